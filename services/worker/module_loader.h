#pragma once

// Trainer code that lives in a shared library of its own, loaded with dlopen at the first trial
// that needs it: libdhpt_autoencoder.so (libtorch, autoencoder_module.h) and libdhpt_xgboost.so
// (XGBoost, xgboost_module.h). Linked at start, their libraries held memory for the life of an
// idle worker: libtorch about 145 MiB, XGBoost with dmlc and libgomp about 4 MiB of a CPU
// worker's 22 (docs/benchmarks.md, "Idle memory").
//
// Each library exports one extern "C" function returning a table whose first member is its
// interface version (`int abi`). Both sides are built from this tree with one compiler, so the
// tables pass C++ types; a library of another version is refused by name. A worker checks at
// start, in a short-lived child process, that its libraries load (ProbeModule), so a missing or
// broken one stops the worker with the reason instead of failing every trial of that kind.

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dhpt::worker {

struct ModuleSpec {
  const char* what;    // "AutoEncoder": how errors name it.
  const char* file;    // "libdhpt_autoencoder.so"
  const char* env;     // "DHPT_AUTOENCODER_MODULE": a path that overrides the search.
  const char* symbol;  // The exported function returning the table.
  int abi;             // The table's interface version this binary needs.
};

// The library's path: `spec.env` when set, else the file next to the executable (the build
// tree, `dhpt local`), else in ../lib/dhpt/ beside it (the images); the first candidate when
// none exists, so that the error names where it was looked for.
std::string ModulePath(const ModuleSpec& spec);

// Loads the library at `path` (dlopen returns the same handle for a path already loaded, so
// every trial may ask; it is never closed) and returns its table, checked for `spec.abi`.
// FAILED_PRECONDITION saying where to install it when it cannot be loaded.
absl::StatusOr<const void*> LoadModuleTable(const ModuleSpec& spec, const std::string& path);

template <typename Table>
absl::StatusOr<const Table*> LoadModule(const ModuleSpec& spec) {
  absl::StatusOr<const void*> table = LoadModuleTable(spec, ModulePath(spec));
  if (!table.ok()) return table.status();
  return static_cast<const Table*>(*table);
}

// What a probe child found: the numbers its `ask` wrote, or why it found nothing.
struct ModuleProbe {
  bool loaded = false;
  std::array<int64_t, 4> values{};
  std::string error;  // Why not loaded.
  // The library could not be loaded (missing, not ours, of another version, or the child died
  // loading it, e.g. a truncated file), as against a probe that only ran out of time.
  bool unusable = false;
};

// Loads the library in a forked child, calls `ask` on its table there, and returns what it
// wrote; the child exits without running static destructors, so this process maps nothing of
// the library. A child that has not answered by `timeout` is killed.
ModuleProbe ProbeModule(const ModuleSpec& spec, void (*ask)(const void* table,
                                                            std::array<int64_t, 4>& values),
                        absl::Duration timeout);

}  // namespace dhpt::worker
