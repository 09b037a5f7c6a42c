#pragma once

// A throwaway directory laid out like a board's / (the sysfs and procfs files a test writes),
// for the readers that take a root path: GPU telemetry, power rails.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace dhpt::worker::testing {

class FakeRoot {
 public:
  FakeRoot()
      : path_(std::filesystem::temp_directory_path() /
              ("dhpt-fake-root-" + std::to_string(getpid()) + "-" + std::to_string(counter_++))) {
    std::filesystem::create_directories(path_);
  }
  ~FakeRoot() { std::filesystem::remove_all(path_); }
  FakeRoot(const FakeRoot&) = delete;
  FakeRoot& operator=(const FakeRoot&) = delete;

  void Write(const std::string& relative, const std::string& text) {
    std::filesystem::create_directories((path_ / relative).parent_path());
    std::ofstream(path_ / relative, std::ios::binary) << text;
  }
  std::string path() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

}  // namespace dhpt::worker::testing
