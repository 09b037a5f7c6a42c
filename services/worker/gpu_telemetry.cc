#include "services/worker/gpu_telemetry.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace dhpt::worker {
namespace {

// --------------------------------------------------------------------------------------------
// NVML, declared here as its documented C ABI so that nothing NVIDIA is needed to build.

using NvmlReturn = int;  // nvmlReturn_t; NVML_SUCCESS is 0.
using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct NvmlUtilization {
  unsigned int gpu;     // Percent of the last sample period a kernel was running.
  unsigned int memory;  // Percent of it the memory was read or written.
};

struct NvmlApi {
  NvmlReturn (*init)();
  NvmlReturn (*shutdown)();
  const char* (*error_string)(NvmlReturn);
  NvmlReturn (*handle_by_index)(unsigned, NvmlDevice*);
  NvmlReturn (*name)(NvmlDevice, char*, unsigned);
  NvmlReturn (*memory_info)(NvmlDevice, NvmlMemory*);
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*);
};

class NvmlReader final : public GpuReader {
 public:
  NvmlReader(void* library, NvmlApi api, NvmlDevice handle, GpuDevice device)
      : library_(library), api_(api), handle_(handle), device_(std::move(device)) {}
  ~NvmlReader() override {
    api_.shutdown();
    dlclose(library_);
  }

  const GpuDevice& device() const override { return device_; }

  absl::StatusOr<GpuSample> Sample() override {
    NvmlUtilization utilization{};
    if (NvmlReturn rc = api_.utilization(handle_, &utilization); rc != 0) {
      return absl::UnavailableError(absl::StrCat("nvmlDeviceGetUtilizationRates: ",
                                                 api_.error_string(rc)));
    }
    GpuSample sample;
    sample.utilization = utilization.gpu / 100.0;
    NvmlMemory memory{};
    if (api_.memory_info(handle_, &memory) == 0) {
      sample.memory_used_bytes = static_cast<double>(memory.used);
    }
    return sample;
  }

 private:
  void* const library_;
  const NvmlApi api_;
  const NvmlDevice handle_;
  const GpuDevice device_;
};

template <typename Function>
bool Resolve(void* library, const char* symbol, Function*& out) {
  out = reinterpret_cast<Function*>(dlsym(library, symbol));
  return out != nullptr;
}

// --------------------------------------------------------------------------------------------
// Jetson boards

// The GPU load file (per mille busy) of each board generation, relative to the root.
constexpr std::array<const char*, 4> kJetsonLoadFiles = {
    "sys/devices/gpu.0/load",                   // Nano, TX1, TX2, Xavier (L4T 32)
    "sys/devices/platform/gpu.0/load",          // some L4T 32 kernels
    "sys/devices/platform/17000000.gpu/load",   // Orin (JetPack 6)
    "sys/devices/platform/17000000.ga10b/load",  // Orin (JetPack 5)
};

std::optional<std::string> ReadSmallFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::optional<uint64_t> MemTotalBytes(const std::filesystem::path& meminfo) {
  std::ifstream in(meminfo);
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemTotal:") return kib * 1024;
  }
  return std::nullopt;
}

class JetsonReader final : public GpuReader {
 public:
  JetsonReader(std::filesystem::path load_file, GpuDevice device)
      : load_file_(std::move(load_file)), device_(std::move(device)) {}

  const GpuDevice& device() const override { return device_; }

  absl::StatusOr<GpuSample> Sample() override {
    std::optional<std::string> text = ReadSmallFile(load_file_);
    int per_mille = 0;
    if (!text || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &per_mille)) {
      return absl::UnavailableError(absl::StrCat("cannot read ", load_file_.string()));
    }
    // Memory is shared with the CPU and the board reports no GPU share of it, so there is
    // no memory figure: absent rather than a guess.
    GpuSample sample;
    sample.utilization = std::clamp(per_mille / 1000.0, 0.0, 1.0);
    return sample;
  }

 private:
  const std::filesystem::path load_file_;
  const GpuDevice device_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GpuReader>> OpenNvmlReader(const std::string& library,
                                                          unsigned index) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return absl::UnavailableError(absl::StrCat("NVML not loaded: ", dlerror()));
  }
  NvmlApi api{};
  if (!Resolve(handle, "nvmlInit_v2", api.init) || !Resolve(handle, "nvmlShutdown", api.shutdown) ||
      !Resolve(handle, "nvmlErrorString", api.error_string) ||
      !Resolve(handle, "nvmlDeviceGetHandleByIndex_v2", api.handle_by_index) ||
      !Resolve(handle, "nvmlDeviceGetName", api.name) ||
      !Resolve(handle, "nvmlDeviceGetMemoryInfo", api.memory_info) ||
      !Resolve(handle, "nvmlDeviceGetUtilizationRates", api.utilization)) {
    dlclose(handle);
    return absl::UnavailableError(absl::StrCat(library, " lacks the NVML functions this reader uses"));
  }
  if (NvmlReturn rc = api.init(); rc != 0) {
    absl::Status status =
        absl::UnavailableError(absl::StrCat("nvmlInit_v2: ", api.error_string(rc)));
    dlclose(handle);
    return status;
  }
  NvmlDevice device = nullptr;
  if (NvmlReturn rc = api.handle_by_index(index, &device); rc != 0) {
    absl::Status status = absl::UnavailableError(
        absl::StrCat("NVML device ", index, ": ", api.error_string(rc)));
    api.shutdown();
    dlclose(handle);
    return status;
  }
  GpuDevice description;
  description.source = "nvml";
  std::array<char, 96> name{};
  if (api.name(device, name.data(), name.size()) == 0) description.name = name.data();
  NvmlMemory memory{};
  if (api.memory_info(device, &memory) == 0) description.memory_total_bytes = memory.total;
  return std::make_unique<NvmlReader>(handle, api, device, std::move(description));
}

absl::StatusOr<std::unique_ptr<GpuReader>> OpenJetsonReader(const std::string& root) {
  const std::filesystem::path base(root);
  for (const char* relative : kJetsonLoadFiles) {
    std::filesystem::path load_file = base / relative;
    if (!ReadSmallFile(load_file)) continue;
    GpuDevice device;
    device.name = "NVIDIA Jetson";
    device.source = "jetson-sysfs";
    // The device tree's model string ends with a NUL.
    if (std::optional<std::string> model = ReadSmallFile(base / "proc/device-tree/model")) {
      std::string name(model->c_str());
      if (!name.empty()) device.name = std::move(name);
    }
    device.memory_total_bytes = MemTotalBytes(base / "proc/meminfo");
    return std::make_unique<JetsonReader>(std::move(load_file), std::move(device));
  }
  return absl::NotFoundError(absl::StrCat("no Jetson GPU load file under ", root));
}

absl::StatusOr<std::unique_ptr<GpuReader>> DetectGpuReader(const std::string& sysfs_root,
                                                           const std::string& nvml_library) {
  absl::StatusOr<std::unique_ptr<GpuReader>> jetson = OpenJetsonReader(sysfs_root);
  if (jetson.ok()) return jetson;
  absl::StatusOr<std::unique_ptr<GpuReader>> nvml = OpenNvmlReader(nvml_library);
  if (nvml.ok()) return nvml;
  return absl::NotFoundError(absl::StrCat("no GPU telemetry: ", jetson.status().message(), "; ",
                                          nvml.status().message()));
}

// ---------------------------------------------------------------------------------------------

GpuSampler::GpuSampler(GpuReader* reader, absl::Duration interval)
    : reader_(reader), sampler_(interval, [this] { Take(); }) {}

GpuSampler::~GpuSampler() { Stop(); }

void GpuSampler::Take() {
  absl::StatusOr<GpuSample> sample = reader_->Sample();
  if (!sample.ok()) return;
  absl::MutexLock lock(&mutex_);
  ++usage_.samples;
  utilization_sum_ += sample->utilization;
  usage_.utilization_peak = std::max(usage_.utilization_peak, sample->utilization);
  if (sample->memory_used_bytes) {
    ++memory_samples_;
    memory_sum_ += *sample->memory_used_bytes;
    usage_.memory_used_peak_bytes =
        std::max(usage_.memory_used_peak_bytes.value_or(0), *sample->memory_used_bytes);
  }
}

GpuUsage GpuSampler::Stop() {
  sampler_.Stop();
  absl::MutexLock lock(&mutex_);
  GpuUsage usage = usage_;
  if (usage.samples > 0) usage.utilization_avg = utilization_sum_ / usage.samples;
  if (memory_samples_ > 0) usage.memory_used_avg_bytes = memory_sum_ / memory_samples_;
  return usage;
}

}  // namespace dhpt::worker
