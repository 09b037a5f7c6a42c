#include "services/dashboard/allowed_hosts.h"

#include "gtest/gtest.h"

namespace dhpt::dashboard {
namespace {

TEST(AllowedHostsTest, AddressesAndLocalhostAreAnsweredOtherNamesOnlyWhenAllowed) {
  const AllowedHosts none;
  for (const char* host : {"127.0.0.1:8080", "127.0.0.1", "localhost:8080", "LocalHost.:9",
                           "[::1]:8080", "[::1]", "10.0.0.5:8080", ""}) {
    EXPECT_TRUE(none.Allows(host)) << host;
  }
  // A rebinding page's own name, and things that are not a Host at all.
  for (const char* host : {"evil.example:8080", "evil.example", "localhost.evil.example",
                           "127.0.0.1.evil.example", "::1", "[::1", "localhost:", "localhost:x",
                           "localhost:99999", "[evil]:80"}) {
    EXPECT_FALSE(none.Allows(host)) << host;
  }
  auto allowed = AllowedHosts::Parse({"dash.lab.local", "dhpt-dashboard:8080"});
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  EXPECT_TRUE(allowed->Allows("dash.lab.local"));
  EXPECT_TRUE(allowed->Allows("DASH.lab.local:443"));  // No port given: any.
  EXPECT_TRUE(allowed->Allows("dhpt-dashboard:8080"));
  EXPECT_FALSE(allowed->Allows("dhpt-dashboard:9090"));
  EXPECT_FALSE(allowed->Allows("dhpt-dashboard"));
  EXPECT_FALSE(allowed->Allows("evil.example"));
}

TEST(AllowedHostsTest, AnEntryThatIsNotAHostIsRefusedByName) {
  // Control bytes were let through (hostile review): they are in no name.
  for (const char* bad : {"", "dash:", "dash:0", "dash:99999", "http://dash", "a b", "a\rb",
                          "ab\x01", "dash\x7f" "x"}) {
    auto parsed = AllowedHosts::Parse({bad});
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find("--allowed_hosts"), absl::string_view::npos);
  }
}

}  // namespace
}  // namespace dhpt::dashboard
