#include "services/common/flag_ranges.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "absl/flags/flag.h"

ABSL_FLAG(int, range_test_threads, 0, "for the test");
ABSL_FLAG(int64_t, range_test_bytes, 0, "for the test");
ABSL_FLAG(double, range_test_share, 0.5, "for the test");
ABSL_FLAG(absl::Duration, range_test_grace, absl::Seconds(5), "for the test");
ABSL_FLAG(std::string, range_test_name, "", "for the test");

namespace dhpt {
namespace {

using ::testing::HasSubstr;

TEST(FlagRangeTest, SaysTheRangeAndWhatItsSpecialValuesMean) {
  EXPECT_EQ(FlagRange::Integer("range_test_threads", 0, 1024, "0: one per core").Accepted(),
            "between 0 and 1024 (0: one per core)");
  EXPECT_EQ(FlagRange::Integer("range_test_bytes", 1, FlagRange::kNoMax).Accepted(), "at least 1");
  EXPECT_EQ(FlagRange::Real("range_test_share", 0, false, 1).Accepted(), "above 0 and at most 1");
  EXPECT_EQ(FlagRange::Real("range_test_share", 0, true, 100).Accepted(), "between 0 and 100");
  EXPECT_EQ(FlagRange::Duration("range_test_grace", absl::ZeroDuration(), absl::Minutes(10)).Accepted(),
            "between 0s and 10m");
}

TEST(FlagRangeTest, EdgesAreInsideAndOneStepBeyondIsRefusedNamingTheFlagAndValue) {
  const FlagRange threads = FlagRange::Integer("range_test_threads", 0, 1024, "0: one per core");
  for (int edge : {0, 1024}) {
    absl::SetFlag(&FLAGS_range_test_threads, edge);
    EXPECT_TRUE(threads.Check().ok()) << edge;
  }
  absl::SetFlag(&FLAGS_range_test_threads, -1);
  EXPECT_EQ(threads.Check().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(threads.Check().message(),
            "--range_test_threads must be between 0 and 1024 (0: one per core); got -1");
  absl::SetFlag(&FLAGS_range_test_threads, 1025);
  EXPECT_THAT(std::string(threads.Check().message()), HasSubstr("got 1025"));

  const FlagRange bytes = FlagRange::Integer("range_test_bytes", -1, FlagRange::kNoMax);
  absl::SetFlag(&FLAGS_range_test_bytes, int64_t{1} << 62);
  EXPECT_TRUE(bytes.Check().ok());
  absl::SetFlag(&FLAGS_range_test_bytes, -2);
  EXPECT_EQ(bytes.Check().message(), "--range_test_bytes must be at least -1; got -2");

  const FlagRange share = FlagRange::Real("range_test_share", 0, false, 1);
  absl::SetFlag(&FLAGS_range_test_share, 1.0);
  EXPECT_TRUE(share.Check().ok());
  for (double refused : {0.0, 1.0000001, std::nan("")}) {
    absl::SetFlag(&FLAGS_range_test_share, refused);
    EXPECT_EQ(share.Check().code(), absl::StatusCode::kInvalidArgument) << refused;
  }

  const FlagRange grace =
      FlagRange::Duration("range_test_grace", absl::ZeroDuration(), absl::Minutes(10));
  absl::SetFlag(&FLAGS_range_test_grace, absl::ZeroDuration());
  EXPECT_TRUE(grace.Check().ok());
  absl::SetFlag(&FLAGS_range_test_grace, absl::InfiniteDuration());
  EXPECT_EQ(grace.Check().message(), "--range_test_grace must be between 0s and 10m; got inf");
  absl::SetFlag(&FLAGS_range_test_grace, absl::Seconds(5));
}

TEST(FlagRangeTest, AnAddressIsHostColonPortWithThePortInRange) {
  const FlagRange listen = FlagRange::Address("range_test_name", 0, "0: any free port");
  EXPECT_EQ(listen.Accepted(),
            "HOST:PORT with PORT between 0 and 65535 and HOST at most 255 characters (0: any "
            "free port)");
  for (const char* good : {"127.0.0.1:0", "0.0.0.0:50051", "[::]:65535", "[::1]:8080",
                           "scheduler.dhpt.svc.cluster.local:50051", "localhost:1"}) {
    absl::SetFlag(&FLAGS_range_test_name, good);
    EXPECT_TRUE(listen.Check().ok()) << good << ": " << listen.Check();
  }
  for (const char* bad : {"", "garbage", ":50051", "127.0.0.1:", "127.0.0.1:65536",
                          "127.0.0.1:99999", "127.0.0.1:-1", "127.0.0.1:+80", "127.0.0.1:0x50",
                          "::1:50051", "127.0.0.1:000000080", "host:80 "}) {
    absl::SetFlag(&FLAGS_range_test_name, bad);
    EXPECT_EQ(listen.Check().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  absl::SetFlag(&FLAGS_range_test_name, "127.0.0.1:99999");
  EXPECT_EQ(listen.Check().message(),
            "--range_test_name must be HOST:PORT with PORT between 0 and 65535 and HOST at most "
            "255 characters (0: any free port); got '127.0.0.1:99999'");
  // A host longer than any DNS name came back whole in gRPC's and the scheduler's messages.
  absl::SetFlag(&FLAGS_range_test_name, std::string(255, 'a') + ":80");
  EXPECT_TRUE(listen.Check().ok());
  absl::SetFlag(&FLAGS_range_test_name, std::string(256, 'a') + ":80");
  EXPECT_EQ(listen.Check().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(listen.Check().message().size(), 400u);
  // A worker's scheduler has no port 0.
  absl::SetFlag(&FLAGS_range_test_name, "127.0.0.1:0");
  EXPECT_EQ(FlagRange::Address("range_test_name", 1).Check().code(),
            absl::StatusCode::kInvalidArgument);
  // A control byte is shown escaped, never written raw to a terminal.
  absl::SetFlag(&FLAGS_range_test_name, "a\x1b[2J:1");
  EXPECT_THAT(std::string(FlagRange::Address("range_test_name", 1).Check().message()),
              HasSubstr("got 'a\\x1b[2J:1'"));
}

// The CLI's --scheduler may be empty (its default), never a port gRPC would wrap.
TEST(FlagRangeTest, AnOptionalAddressMayBeEmpty) {
  const FlagRange scheduler = FlagRange::OptionalAddress("range_test_name", 1, "empty: default");
  absl::SetFlag(&FLAGS_range_test_name, "");
  EXPECT_TRUE(scheduler.Check().ok());
  absl::SetFlag(&FLAGS_range_test_name, "127.0.0.1:103097");
  EXPECT_EQ(scheduler.Check().message(),
            "--range_test_name must be HOST:PORT with PORT between 1 and 65535 and HOST at most "
            "255 characters (empty: default); got '127.0.0.1:103097'");
  absl::SetFlag(&FLAGS_range_test_name, "127.0.0.1:0");
  EXPECT_FALSE(scheduler.Check().ok());
}

TEST(FlagRangeTest, ATableNamingNoSuchFlagOrTheWrongTypeIsAnInternalError) {
  EXPECT_EQ(FlagRange::Integer("range_test_missing", 0, 1).Check().code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(FlagRange::Integer("range_test_name", 0, 1).Check().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(FlagRange::Duration("range_test_threads", absl::ZeroDuration(), absl::Seconds(1))
                .Check()
                .code(),
            absl::StatusCode::kInternal);
}

TEST(FlagRangeTest, FindFlagRangeFindsAFlagsRangeByName) {
  const FlagRange ranges[] = {FlagRange::Real("range_test_share", 0, false, 1),
                              FlagRange::Integer("range_test_threads", 0, 1024)};
  EXPECT_EQ(FindFlagRange(ranges, "range_test_threads"), &ranges[1]);
  EXPECT_EQ(FindFlagRange(ranges, "range_test_name"), nullptr);
}

}  // namespace
}  // namespace dhpt
