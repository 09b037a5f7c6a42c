#include "services/worker/gpu_telemetry.h"

#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "gtest/gtest.h"
#include "tests/worker/fake_root.h"

namespace dhpt::worker {
namespace {

namespace fs = std::filesystem;

using ::dhpt::worker::testing::FakeRoot;

constexpr char kMeminfo[] = "MemTotal:        7994684 kB\nMemFree:  100 kB\n";

TEST(JetsonReaderTest, ReadsTheNanoLoadFile) {
  FakeRoot root;
  root.Write("sys/devices/gpu.0/load", "532\n");
  root.Write("proc/device-tree/model", std::string("NVIDIA Jetson Nano Developer Kit\0", 33));
  root.Write("proc/meminfo", kMeminfo);
  absl::StatusOr<std::unique_ptr<GpuReader>> reader = OpenJetsonReader(root.path());
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->device().name, "NVIDIA Jetson Nano Developer Kit");
  EXPECT_EQ((*reader)->device().source, "jetson-sysfs");
  EXPECT_EQ((*reader)->device().memory_total_bytes, 7994684ull * 1024);
  absl::StatusOr<GpuSample> sample = (*reader)->Sample();
  ASSERT_TRUE(sample.ok());
  EXPECT_DOUBLE_EQ(sample->utilization, 0.532);
  // Memory is shared with the CPU: no GPU figure rather than a guess.
  EXPECT_FALSE(sample->memory_used_bytes.has_value());

  // The file is read afresh at every sample.
  root.Write("sys/devices/gpu.0/load", "1000\n");
  EXPECT_DOUBLE_EQ((*reader)->Sample()->utilization, 1.0);
}

TEST(JetsonReaderTest, ReadsTheOrinLoadFilesOfBothJetPacks) {
  for (const char* load : {"sys/devices/platform/17000000.gpu/load",
                           "sys/devices/platform/17000000.ga10b/load"}) {
    FakeRoot root;
    root.Write(load, "250");
    root.Write("proc/device-tree/model", std::string("NVIDIA Jetson AGX Orin\0", 23));
    absl::StatusOr<std::unique_ptr<GpuReader>> reader = OpenJetsonReader(root.path());
    ASSERT_TRUE(reader.ok()) << load << ": " << reader.status();
    EXPECT_EQ((*reader)->device().name, "NVIDIA Jetson AGX Orin");
    EXPECT_FALSE((*reader)->device().memory_total_bytes.has_value());  // No meminfo here.
    EXPECT_DOUBLE_EQ((*reader)->Sample()->utilization, 0.25);
  }
}

TEST(JetsonReaderTest, MissingOrGarbledFiles) {
  FakeRoot empty;
  EXPECT_EQ(OpenJetsonReader(empty.path()).status().code(), absl::StatusCode::kNotFound);

  FakeRoot garbled;
  garbled.Write("sys/devices/gpu.0/load", "busy");
  absl::StatusOr<std::unique_ptr<GpuReader>> reader = OpenJetsonReader(garbled.path());
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ((*reader)->device().name, "NVIDIA Jetson");
  EXPECT_EQ((*reader)->Sample().status().code(), absl::StatusCode::kUnavailable);
}

TEST(NvmlReaderTest, AMissingLibraryMeansNoTelemetryWithTheReason) {
  absl::StatusOr<std::unique_ptr<GpuReader>> reader = OpenNvmlReader("libnvidia-ml-missing.so.1");
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(reader.status().message().find("libnvidia-ml-missing.so.1"), std::string::npos);

  // A library that is not NVML at all.
  absl::StatusOr<std::unique_ptr<GpuReader>> not_nvml = OpenNvmlReader("libm.so.6");
  EXPECT_NE(not_nvml.status().message().find("lacks the NVML functions"), std::string::npos)
      << not_nvml.status();
}

using FakeSet = void (*)(unsigned, unsigned long long, int, int);

FakeSet FakeNvmlControl() {
  void* library = dlopen(DHPT_FAKE_NVML, RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(library, nullptr) << dlerror();
  return reinterpret_cast<FakeSet>(dlsym(library, "fake_nvml_set"));
}

TEST(NvmlReaderTest, ReadsUtilisationAndMemoryThroughDlopen) {
  FakeSet set = FakeNvmlControl();
  ASSERT_NE(set, nullptr);
  set(37, 3ull << 30, 0, 1);
  absl::StatusOr<std::unique_ptr<GpuReader>> reader = OpenNvmlReader(DHPT_FAKE_NVML);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->device().name, "Fake GPU 80GB");
  EXPECT_EQ((*reader)->device().source, "nvml");
  EXPECT_EQ((*reader)->device().memory_total_bytes, 80ull << 30);
  absl::StatusOr<GpuSample> sample = (*reader)->Sample();
  ASSERT_TRUE(sample.ok());
  EXPECT_DOUBLE_EQ(sample->utilization, 0.37);
  EXPECT_EQ(sample->memory_used_bytes, static_cast<double>(3ull << 30));
}

TEST(NvmlReaderTest, InitAndDeviceErrorsAreReported) {
  FakeSet set = FakeNvmlControl();
  ASSERT_NE(set, nullptr);
  set(0, 0, /*init_result=*/9, 1);
  absl::StatusOr<std::unique_ptr<GpuReader>> reader = OpenNvmlReader(DHPT_FAKE_NVML);
  EXPECT_NE(reader.status().message().find("Driver Not Loaded"), std::string::npos) << reader.status();
  set(0, 0, 0, /*device_count=*/0);
  reader = OpenNvmlReader(DHPT_FAKE_NVML);
  EXPECT_NE(reader.status().message().find("NVML device 0"), std::string::npos) << reader.status();
  set(0, 0, 0, 1);
}

TEST(DetectGpuReaderTest, PrefersJetsonThenNvmlElseSaysWhy) {
  FakeRoot board;
  board.Write("sys/devices/gpu.0/load", "10");
  EXPECT_EQ((*DetectGpuReader(board.path(), DHPT_FAKE_NVML))->device().source, "jetson-sysfs");

  FakeRoot server;
  FakeNvmlControl()(0, 0, 0, 1);
  EXPECT_EQ((*DetectGpuReader(server.path(), DHPT_FAKE_NVML))->device().source, "nvml");

  absl::StatusOr<std::unique_ptr<GpuReader>> none =
      DetectGpuReader(server.path(), "libnvidia-ml-missing.so.1");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("no Jetson GPU load file"), std::string::npos);
  EXPECT_NE(none.status().message().find("NVML not loaded"), std::string::npos);
}

// Replays scripted samples; fails where the script says so.
class ScriptedReader : public GpuReader {
 public:
  explicit ScriptedReader(std::vector<absl::StatusOr<GpuSample>> script) : script_(std::move(script)) {}
  const GpuDevice& device() const override { return device_; }
  absl::StatusOr<GpuSample> Sample() override {
    absl::MutexLock lock(&mutex_);
    const size_t i = std::min(next_++, script_.size() - 1);
    return script_[i];
  }
  size_t calls() {
    absl::MutexLock lock(&mutex_);
    return next_;
  }

 private:
  GpuDevice device_;
  absl::Mutex mutex_;
  std::vector<absl::StatusOr<GpuSample>> script_;
  size_t next_ = 0;
};

// Waits up to 10 s for the sampler's thread to have read `calls` samples.
bool ReadAtLeast(ScriptedReader& reader, size_t calls) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (reader.calls() < calls) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

GpuSample Sample(double utilization, std::optional<double> memory) {
  GpuSample sample;
  sample.utilization = utilization;
  sample.memory_used_bytes = memory;
  return sample;
}

TEST(GpuSamplerTest, AveragesAndPeaksSkippingFailedSamples) {
  ScriptedReader reader({Sample(0.2, 100), absl::UnavailableError("busy"), Sample(0.6, 300),
                         Sample(0.4, 200)});
  GpuSampler sampler(&reader, absl::Milliseconds(1));
  ASSERT_TRUE(ReadAtLeast(reader, 4)) << reader.calls() << " samples read";
  const GpuUsage usage = sampler.Stop();
  // After the script ends, the last sample repeats; the average lies between.
  EXPECT_GE(usage.samples, 3);
  EXPECT_DOUBLE_EQ(usage.utilization_peak, 0.6);
  EXPECT_GT(usage.utilization_avg, 0.2);
  EXPECT_LT(usage.utilization_avg, 0.6);
  EXPECT_EQ(usage.memory_used_peak_bytes, 300);
  ASSERT_TRUE(usage.memory_used_avg_bytes.has_value());
  EXPECT_GT(*usage.memory_used_avg_bytes, 100);
}

TEST(GpuSamplerTest, SamplesAtOnceSoShortTrialsHaveAFigure) {
  ScriptedReader reader({Sample(0.5, std::nullopt)});
  GpuSampler sampler(&reader, absl::Hours(1));
  const GpuUsage usage = sampler.Stop();
  EXPECT_EQ(usage.samples, 1);
  EXPECT_DOUBLE_EQ(usage.utilization_avg, 0.5);
  EXPECT_FALSE(usage.memory_used_avg_bytes.has_value());
}

TEST(GpuSamplerTest, NoSuccessfulSampleMeansNoFigures) {
  ScriptedReader reader({absl::UnavailableError("gone")});
  GpuSampler sampler(&reader, absl::Milliseconds(1));
  ASSERT_TRUE(ReadAtLeast(reader, 3)) << reader.calls() << " samples read";
  EXPECT_EQ(sampler.Stop().samples, 0);
}

}  // namespace
}  // namespace dhpt::worker
