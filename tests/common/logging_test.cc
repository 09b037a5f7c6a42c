#include "services/common/logging.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

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

// C1's CSI (U+009B) is ESC [ to many terminals (found by a hostile review, logged raw), and a
// right-to-left override makes a line read backwards.
TEST(LoggingTest, C1ControlsAndDirectionOverridesAreEscaped) {
  EXPECT_EQ(EscapeControlCharacters("w\xc2\x9b" "31mred"), "w\\xc2\\x9b31mred");
  EXPECT_EQ(EscapeControlCharacters("a\xe2\x80\xae" "b"), "a\\xe2\\x80\\xaeb");
}

constexpr absl::Time kT0 = absl::FromUnixSeconds(1000);

// What the limiter makes of events (kind, seconds after kT0), in order: '+' logged, '-'
// counted.
std::string Admits(LogLimiter& limiter, const std::vector<std::pair<const char*, int>>& events) {
  std::string out;
  for (const auto& [kind, second] : events) {
    out += limiter.Admit(kind, kT0 + absl::Seconds(second)) ? '+' : '-';
  }
  return out;
}

// A flood of events: the first lines of an interval are logged, the rest told as one count
// once the interval has ended (before the first line of the next).
TEST(LogLimiterTest, PastItsLinesAnIntervalIsCountedAndToldWhenItEnds) {
  LogLimiter limiter(2, absl::Seconds(10));
  EXPECT_EQ(Admits(limiter, {{"connects", 0}, {"disconnects", 1}, {"connects", 2},
                             {"disconnects", 3}, {"connects", 4}}),
            "++---");
  EXPECT_EQ(limiter.Summary(kT0 + absl::Seconds(9)), "");  // The interval still runs.
  EXPECT_EQ(Admits(limiter, {{"connects", 11}}), "-");     // Not yet told: counted.
  EXPECT_EQ(limiter.Summary(kT0 + absl::Seconds(12)), "3 connects, 1 disconnects");
  EXPECT_EQ(limiter.Summary(kT0 + absl::Seconds(30)), "");  // Told once.
  // The next interval starts with its own lines.
  EXPECT_EQ(Admits(limiter, {{"connects", 31}, {"connects", 31}, {"connects", 31}}), "++-");
}

// At shutdown no later interval will end: Flush tells what is held back at once, and once.
TEST(LogLimiterTest, FlushTellsTheCountsBeforeTheIntervalEnds) {
  LogLimiter limiter(1, absl::Hours(1));
  EXPECT_EQ(Admits(limiter, {{"connects", 0}, {"drains", 1}, {"disconnects", 2}}), "+--");
  EXPECT_EQ(limiter.Summary(kT0 + absl::Seconds(3)), "");
  EXPECT_EQ(limiter.Flush(), "1 drains, 1 disconnects");
  EXPECT_EQ(limiter.Flush(), "");
  EXPECT_EQ(limiter.Summary(kT0 + absl::Hours(2)), "");
}

TEST(LogLimiterTest, AQuietIntervalStartsAfreshAndZeroLogsEveryLine) {
  LogLimiter limiter(1, absl::Seconds(10));
  EXPECT_EQ(Admits(limiter, {{"connects", 0}, {"connects", 10}, {"connects", 25}}), "+++");
  EXPECT_EQ(limiter.Summary(kT0 + absl::Seconds(60)), "");
  LogLimiter every(1, absl::ZeroDuration());
  EXPECT_EQ(Admits(every, std::vector<std::pair<const char*, int>>(100, {"connects", 0})),
            std::string(100, '+'));
  EXPECT_EQ(every.Summary(kT0 + absl::Hours(1)), "");
}

}  // namespace
}  // namespace dhpt
