#include "services/common/logging.h"

#include <gtest/gtest.h>

#include "services/common/log_limiter.h"

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

// A flood of events: the first lines of an interval are logged, the rest told as one count
// once the interval has ended (before the first line of the next).
TEST(LogLimiterTest, PastItsLinesAnIntervalIsCountedAndToldWhenItEnds) {
  LogLimiter limiter(2, absl::Seconds(10));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  EXPECT_TRUE(limiter.Admit("connects", t0));
  EXPECT_TRUE(limiter.Admit("disconnects", t0 + absl::Seconds(1)));
  EXPECT_FALSE(limiter.Admit("connects", t0 + absl::Seconds(2)));
  EXPECT_FALSE(limiter.Admit("disconnects", t0 + absl::Seconds(3)));
  EXPECT_FALSE(limiter.Admit("connects", t0 + absl::Seconds(4)));
  EXPECT_EQ(limiter.Summary(t0 + absl::Seconds(9)), "");  // The interval still runs.
  EXPECT_FALSE(limiter.Admit("connects", t0 + absl::Seconds(11)));  // Not yet told: counted.
  EXPECT_EQ(limiter.Summary(t0 + absl::Seconds(12)), "3 connects, 1 disconnects");
  EXPECT_EQ(limiter.Summary(t0 + absl::Seconds(30)), "");  // Told once.
  // The next interval starts with its own lines.
  EXPECT_TRUE(limiter.Admit("connects", t0 + absl::Seconds(31)));
  EXPECT_TRUE(limiter.Admit("connects", t0 + absl::Seconds(31)));
  EXPECT_FALSE(limiter.Admit("connects", t0 + absl::Seconds(31)));
}

TEST(LogLimiterTest, AQuietIntervalStartsAfreshAndZeroLogsEveryLine) {
  LogLimiter limiter(1, absl::Seconds(10));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  EXPECT_TRUE(limiter.Admit("connects", t0));
  EXPECT_TRUE(limiter.Admit("connects", t0 + absl::Seconds(10)));
  EXPECT_TRUE(limiter.Admit("connects", t0 + absl::Seconds(25)));
  EXPECT_EQ(limiter.Summary(t0 + absl::Seconds(60)), "");
  LogLimiter every(1, absl::ZeroDuration());
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(every.Admit("connects", t0));
  EXPECT_EQ(every.Summary(t0 + absl::Hours(1)), "");
}

}  // namespace
}  // namespace dhpt
