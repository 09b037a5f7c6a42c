#include "services/worker/power_rails.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "tests/worker/fake_root.h"

namespace dhpt::worker {
namespace {

namespace fs = std::filesystem;

using ::dhpt::worker::testing::FakeRoot;

// The Nano (L4T 32): NVIDIA's ina3221x IIO driver, power in milliwatts per rail.
constexpr char kNano[] = "sys/bus/i2c/drivers/ina3221x/6-0040/iio:device0/";
// The Orin (L4T 34+): the kernel's hwmon driver, millivolts and milliamps per channel.
constexpr char kOrin[] = "sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3/";
constexpr char kOrinSecondChip[] = "sys/bus/i2c/drivers/ina3221/1-0041/hwmon/hwmon4/";

void WriteNano(FakeRoot& root) {
  const char* names[] = {"POM_5V_IN\n", "POM_5V_GPU\n", "POM_5V_CPU\n"};
  const char* milliwatts[] = {"4936\n", "1102\n", "1570\n"};
  for (int i = 0; i < 3; ++i) {
    root.Write(std::string(kNano) + "rail_name_" + std::to_string(i), names[i]);
    root.Write(std::string(kNano) + "in_power" + std::to_string(i) + "_input", milliwatts[i]);
    root.Write(std::string(kNano) + "in_voltage" + std::to_string(i) + "_input", "5000\n");
  }
}

void WriteOrinChannel(FakeRoot& root, const std::string& dir, int i, const std::string& label,
                      const std::string& millivolts, const std::string& milliamps) {
  root.Write(dir + "in" + std::to_string(i) + "_label", label + "\n");
  root.Write(dir + "in" + std::to_string(i) + "_input", millivolts + "\n");
  root.Write(dir + "curr" + std::to_string(i) + "_input", milliamps + "\n");
}

TEST(PowerRailsTest, NanoReadsItsInputRailInMilliwatts) {
  FakeRoot root;
  WriteNano(root);
  absl::StatusOr<std::unique_ptr<PowerRails>> rails = OpenPowerRails(root.path());
  ASSERT_TRUE(rails.ok()) << rails.status();
  EXPECT_EQ((*rails)->source(), "ina3221");
  EXPECT_EQ((*rails)->description(), "POM_5V_IN");
  EXPECT_DOUBLE_EQ(*(*rails)->TotalWatts(), 4.936);
  // Read afresh at every sample.
  root.Write(std::string(kNano) + "in_power0_input", "7250\n");
  EXPECT_DOUBLE_EQ(*(*rails)->TotalWatts(), 7.25);
}

TEST(PowerRailsTest, OrinMultipliesVoltsAndAmpsOfVddIn) {
  FakeRoot root;
  WriteOrinChannel(root, kOrin, 1, "VDD_IN", "5080", "1400");
  WriteOrinChannel(root, kOrin, 2, "VDD_CPU_GPU_CV", "5080", "400");
  WriteOrinChannel(root, kOrin, 3, "VDD_SOC", "5080", "600");
  // The AGX Orin's second monitor: rails that VDD_IN already contains.
  WriteOrinChannel(root, kOrinSecondChip, 1, "VDDQ_VDD2_1V8AO", "4990", "100");
  absl::StatusOr<std::unique_ptr<PowerRails>> rails = OpenPowerRails(root.path());
  ASSERT_TRUE(rails.ok()) << rails.status();
  EXPECT_EQ((*rails)->description(), "VDD_IN");
  EXPECT_NEAR(*(*rails)->TotalWatts(), 5.080 * 1.400, 1e-9);
}

TEST(PowerRailsTest, WithoutAnInputRailTheRailsAreSummed) {
  FakeRoot root;
  WriteOrinChannel(root, kOrin, 1, "VDD_CPU_GPU_CV", "5000", "400");
  WriteOrinChannel(root, kOrin, 2, "VDD_SOC", "5000", "600");
  absl::StatusOr<std::unique_ptr<PowerRails>> rails = OpenPowerRails(root.path());
  ASSERT_TRUE(rails.ok()) << rails.status();
  EXPECT_EQ((*rails)->description(), "sum of VDD_CPU_GPU_CV, VDD_SOC");
  EXPECT_NEAR(*(*rails)->TotalWatts(), 5.0, 1e-9);
}

TEST(PowerRailsTest, NoSensorIsNotFoundAndGarbleIsUnavailable) {
  FakeRoot empty;
  EXPECT_EQ(OpenPowerRails(empty.path()).status().code(), absl::StatusCode::kNotFound);
  // A GPU load file alone (a Jetson with its monitors hidden) is no power sensor either.
  empty.Write("sys/devices/gpu.0/load", "10");
  EXPECT_EQ(OpenPowerRails(empty.path()).status().code(), absl::StatusCode::kNotFound);

  FakeRoot garbled;
  WriteNano(garbled);
  garbled.Write(std::string(kNano) + "in_power0_input", "n/a");
  absl::StatusOr<std::unique_ptr<PowerRails>> rails = OpenPowerRails(garbled.path());
  ASSERT_TRUE(rails.ok());
  EXPECT_EQ((*rails)->TotalWatts().status().code(), absl::StatusCode::kUnavailable);
}

TEST(PowerSamplerTest, IntegratesConstantPowerOverTheTrial) {
  FakeRoot root;
  WriteNano(root);
  std::unique_ptr<PowerRails> rails = *OpenPowerRails(root.path());
  // Before the sampler exists: its thread takes the first sample as it is constructed, so a
  // clock read after construction could start later than the energy's window.
  const absl::Time start = absl::Now();
  PowerSampler sampler(rails.get(), absl::Milliseconds(1));
  EnergyUsage usage = sampler.Stop();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  ASSERT_GE(usage.samples, 2);  // At the start and at Stop.
  ASSERT_TRUE(usage.joules.has_value());
  EXPECT_NEAR(*usage.average_watts, 4.936, 1e-9);
  EXPECT_GT(*usage.joules, 0);
  EXPECT_LE(*usage.joules, 4.936 * seconds + 1e-9);
}

TEST(PowerSamplerTest, NoReadableSampleMeansNoFigures) {
  FakeRoot root;
  WriteNano(root);
  std::unique_ptr<PowerRails> rails = *OpenPowerRails(root.path());
  root.Write(std::string(kNano) + "in_power0_input", "");
  PowerSampler sampler(rails.get(), absl::Milliseconds(1));
  EnergyUsage usage = sampler.Stop();
  EXPECT_EQ(usage.samples, 0);
  EXPECT_FALSE(usage.joules.has_value());  // Absent, never zero.
  EXPECT_FALSE(usage.average_watts.has_value());
}

}  // namespace
}  // namespace dhpt::worker
