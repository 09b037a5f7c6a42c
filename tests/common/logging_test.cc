#include "services/common/logging.h"

#include <gtest/gtest.h>

namespace dhpt {
namespace {

// A worker id with a newline could forge a log line of its own (the hostile review did:
// "evil\n2026-12-03T00:00:00.000Z I study ext2 DELETED"); escapes pass no terminal codes.
TEST(LoggingTest, ALineCarriesNoControlCharactersFromItsArguments) {
  ::testing::internal::CaptureStderr();
  DHPT_LOG_INFO("worker %s connected", "evil\n2026-12-03T00:00:00.000Z I study x DELETED\x1b[2J");
  const std::string logged = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(logged.find('\n'), logged.size() - 1) << logged;
  EXPECT_EQ(logged.find('\x1b'), std::string::npos) << logged;
  EXPECT_NE(logged.find("evil\\x0a2026-12-03"), std::string::npos) << logged;
  EXPECT_NE(logged.find("\\x1b[2J"), std::string::npos) << logged;
}

TEST(LoggingTest, PrintableTextAndUtf8AreKept) {
  EXPECT_EQ(EscapeControlCharacters("study \"naïve\" <b>"), "study \"naïve\" <b>");
}

}  // namespace
}  // namespace dhpt
