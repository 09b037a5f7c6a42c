#include "services/common/input_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace dhpt {
namespace {

TEST(InputFileTest, ARegularFileUpToTheLimitIsReadWhole) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/input_file_", getpid());
  std::ofstream(path) << "0123456789";
  auto text = ReadRegularFile(path, 10, "the test's limit");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "0123456789");
  auto over = ReadRegularFile(path, 9, "the test's limit");
  ASSERT_FALSE(over.ok());
  EXPECT_TRUE(IsUnusableInputFile(over.status()));
  EXPECT_TRUE(absl::StrContains(over.status().message(),
                                "has 10 bytes, more than the 9 a file here may hold (the test's limit)"))
      << over.status();
  std::filesystem::remove(path);
}

TEST(InputFileTest, DevicesFifosAndDirectoriesAreRefusedWithoutReadingOrWaiting) {
  const std::string fifo = absl::StrCat(::testing::TempDir(), "/input_fifo_", getpid());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // No writer: opening it without O_NONBLOCK would wait here for ever.
  for (const auto& [path, kind] : {std::pair<std::string, std::string>{"/dev/zero", "a character device"},
                                   {fifo, "a FIFO"},
                                   {::testing::TempDir(), "a directory"}}) {
    auto text = ReadRegularFile(path, 1 << 20, "limit");
    ASSERT_FALSE(text.ok()) << path;
    EXPECT_TRUE(IsUnusableInputFile(text.status())) << text.status();
    EXPECT_TRUE(absl::StrContains(text.status().message(), absl::StrCat(path, " is ", kind)))
        << text.status();
  }
  std::filesystem::remove(fifo);
}

TEST(InputFileTest, AMissingFileIsNotFoundNotAUsageError) {
  auto text = ReadRegularFile("/nonexistent/spec.yaml", 1 << 20, "limit");
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(IsUnusableInputFile(text.status()));
}

}  // namespace
}  // namespace dhpt
