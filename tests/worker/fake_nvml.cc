// A stand-in for libnvidia-ml.so.1 with the functions the NVML reader resolves, so that the
// reader's dlopen path runs here without a GPU. fake_nvml_set scripts what it reports.

#include <cstring>

namespace {
unsigned g_utilization = 0;
unsigned long long g_used = 0;
int g_init_result = 0;
int g_device_count = 1;
struct Device {
} g_device;
}  // namespace

extern "C" {

struct FakeMemory {
  unsigned long long total, free, used;
};
struct FakeUtilization {
  unsigned gpu, memory;
};

void fake_nvml_set(unsigned utilization_percent, unsigned long long used_bytes, int init_result,
                   int device_count) {
  g_utilization = utilization_percent;
  g_used = used_bytes;
  g_init_result = init_result;
  g_device_count = device_count;
}

int nvmlInit_v2() { return g_init_result; }
int nvmlShutdown() { return 0; }
const char* nvmlErrorString(int result) {
  return result == 0 ? "Success" : result == 9 ? "Driver Not Loaded" : "Invalid Argument";
}
int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  if (static_cast<int>(index) >= g_device_count) return 2;
  *device = &g_device;
  return 0;
}
int nvmlDeviceGetName(void*, char* name, unsigned length) {
  std::strncpy(name, "Fake GPU 80GB", length);
  return 0;
}
int nvmlDeviceGetMemoryInfo(void*, FakeMemory* memory) {
  memory->total = 80ull << 30;
  memory->used = g_used;
  memory->free = memory->total - g_used;
  return 0;
}
int nvmlDeviceGetUtilizationRates(void*, FakeUtilization* utilization) {
  utilization->gpu = g_utilization;
  utilization->memory = g_utilization / 2;
  return 0;
}

}  // extern "C"
