#include "services/common/env_flags.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, test_listen_address, "default", "for the test");
ABSL_FLAG(int, test_slot_count, 1, "for the test");

namespace dhpt {
namespace {

TEST(EnvFlagsTest, EnvironmentSetsFlagsNotListedOnesStayDefault) {
  setenv("DHPT_TEST_LISTEN_ADDRESS", "127.0.0.1:0", 1);
  ApplyEnvironmentToFlags({"test_listen_address", "test_slot_count"});
  EXPECT_EQ(absl::GetFlag(FLAGS_test_listen_address), "127.0.0.1:0");
  EXPECT_EQ(absl::GetFlag(FLAGS_test_slot_count), 1);
  unsetenv("DHPT_TEST_LISTEN_ADDRESS");
}

TEST(EnvFlagsTest, UnparsableValueExits) {
  setenv("DHPT_TEST_SLOT_COUNT", "many", 1);
  EXPECT_EXIT(ApplyEnvironmentToFlags({"test_slot_count"}), testing::ExitedWithCode(2),
              "invalid DHPT_TEST_SLOT_COUNT=many");
  unsetenv("DHPT_TEST_SLOT_COUNT");
}

}  // namespace
}  // namespace dhpt
