#include "services/common/env_flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

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

// Applies DHPT_TEST_SLOT_COUNT, then parses `args` as a service's main does.
void ApplyThenParse(std::vector<const char*> args) {
  ApplyEnvironmentToFlags({"test_slot_count"});
  ParseCommandLineWithDashes("prog", static_cast<int>(args.size()), const_cast<char**>(args.data()));
}

TEST(EnvFlagsTest, UnparsableValueExits) {
  setenv("DHPT_TEST_SLOT_COUNT", "many", 1);
  EXPECT_EXIT(ApplyThenParse({"prog"}), testing::ExitedWithCode(2),
              "prog: invalid DHPT_TEST_SLOT_COUNT=many");
  unsetenv("DHPT_TEST_SLOT_COUNT");
}

// The command line wins, over a variable that does not parse too (it ended the process before
// the command line was read: hostile review).
TEST(EnvFlagsTest, AnUnparsableValueTheCommandLineOverridesIsNoError) {
  setenv("DHPT_TEST_SLOT_COUNT", "many", 1);
  EXPECT_EXIT(
      {
        ApplyThenParse({"prog", "--test_slot_count=5"});
        std::exit(absl::GetFlag(FLAGS_test_slot_count) == 5 ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
  unsetenv("DHPT_TEST_SLOT_COUNT");
}

// The value is anyone's text: a control character reaches the terminal escaped, and a long
// value is cut.
TEST(EnvFlagsTest, AnUnparsableValueIsShownEscapedAndCut) {
  setenv("DHPT_TEST_SLOT_COUNT", ("\x1b[2J" + std::string(5000, '7') + "x").c_str(), 1);
  EXPECT_EXIT(ApplyThenParse({"prog"}), testing::ExitedWithCode(2),
              "invalid DHPT_TEST_SLOT_COUNT=.x1b.2J7{252}: it sets --test_slot_count");
  unsetenv("DHPT_TEST_SLOT_COUNT");
}

// An empty value read "Illegal value '' specified for flag": it now says what the flag takes.
TEST(EnvFlagsTest, AnEmptyValueSaysWhatTheFlagTakesAndHowToGetTheDefault) {
  setenv("DHPT_TEST_SLOT_COUNT", "", 1);
  EXPECT_EXIT(ApplyThenParse({"prog"}), testing::ExitedWithCode(2),
              "invalid DHPT_TEST_SLOT_COUNT=: it sets --test_slot_count, which takes a whole "
              "number .unset the variable for the default.");
  unsetenv("DHPT_TEST_SLOT_COUNT");
}

TEST(EnvFlagsTest, StrayArgumentAfterAFlagValueShowsThatValueQuoted) {
  const char* args[] = {"dhpt-cpu-worker", "--command=gbr=/usr/bin/python3", "/opt/gbr.py",
                        "--slots=2"};
  EXPECT_EQ(StrayArgumentMessage("dhpt-cpu-worker", 4, const_cast<char**>(args), "/opt/gbr.py"),
            "dhpt-cpu-worker: unexpected argument \"/opt/gbr.py\"; this command takes flags "
            "only (--name=value). If \"/opt/gbr.py\" belongs to --command, quote the whole "
            "value as one argument: --command='gbr=/usr/bin/python3 /opt/gbr.py'");
}

TEST(EnvFlagsTest, StrayArgumentAloneShowsHowToQuoteInGeneral) {
  const char* args[] = {"dhpt-scheduler", "extra"};
  EXPECT_THAT(StrayArgumentMessage("dhpt-scheduler", 2, const_cast<char**>(args), "extra"),
              ::testing::HasSubstr("unexpected argument \"extra\"; this command takes flags only"
                                   " (--name=value). A flag value with spaces must be quoted"));
}

// absl::ParseCommandLine's own usage errors ended the process with status 1 and a message
// without the program or what the flag takes; every one is status 2 now, saying both.
TEST(EnvFlagsTest, EveryUsageErrorOfTheCommandLineExits2NamingTheFlagAndWhatItTakes) {
  const FlagRange ranges[] = {FlagRange::Integer("test_slot_count", 1, 64)};
  const struct {
    std::vector<const char*> args;
    const char* said;
  } cases[] = {
      {{"--test_slot_count=abc"}, "prog: --test_slot_count=abc is not a whole number; it must "
                                  "be between 1 and 64"},
      {{"--test-slot-count", "1.5"}, "--test_slot_count=1.5 is not a whole number"},
      {{"--test_slot_count"}, "prog: --test_slot_count needs a value: --test_slot_count=VALUE"},
      {{"--test_slot_count="}, "--test_slot_count= is not a whole number"},
      {{"--test_slot_counts=2"}, "prog: unknown flag --test_slot_counts (did you mean "
                                 "--test_slot_count?)"},
      {{"--no_such_flag_anywhere"}, "prog: unknown flag --no_such_flag_anywhere\n"},
      {{"--test_slot_count=0"}, "prog: --test_slot_count must be between 1 and 64; got 0"},
      {{"--test_slot_count=65"}, "got 65"},
  };
  for (const auto& c : cases) {
    std::vector<const char*> args = {"prog"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    SCOPED_TRACE(c.args.front());
    EXPECT_EXIT(ParseCommandLineWithDashes("prog", static_cast<int>(args.size()),
                                           const_cast<char**>(args.data()), ranges),
                ::testing::ExitedWithCode(2), ::testing::HasSubstr(c.said));
  }
}

// A value out of range that came from DHPT_<FLAG> names the variable: the message named only
// --test_slot_count, which nobody had typed. One on the command line is said as it was typed.
TEST(EnvFlagsTest, AValueOutOfRangeFromTheEnvironmentNamesItsVariable) {
  const FlagRange ranges[] = {FlagRange::Integer("test_slot_count", 1, 64)};
  const auto parse = [&ranges](std::vector<const char*> args) {
    setenv("DHPT_TEST_SLOT_COUNT", "40000", 1);
    ApplyEnvironmentToFlags({"test_slot_count"});
    ParseCommandLineWithDashes("prog", static_cast<int>(args.size()),
                               const_cast<char**>(args.data()), ranges);
  };
  EXPECT_EXIT(parse({"prog"}), ::testing::ExitedWithCode(2),
              ::testing::HasSubstr("prog: --test_slot_count must be between 1 and 64; got 40000 "
                                   "(from DHPT_TEST_SLOT_COUNT='40000')"));
  EXPECT_EXIT(parse({"prog", "--test-slot-count=0"}), ::testing::ExitedWithCode(2),
              ::testing::AllOf(::testing::HasSubstr("got 0"),
                               ::testing::Not(::testing::HasSubstr("DHPT_TEST_SLOT_COUNT"))));
}

// A start-up error that names flags says which of them came from DHPT_<FLAG> (hostile review:
// "--tls_ca: cannot read ..." sent users looking for a --tls_ca nobody had typed), once each;
// a flag given on the command line, or named only as a longer flag's prefix, is left alone.
TEST(EnvFlagsTest, AFlagErrorNamesTheVariablesThatSetItsFlags) {
  const auto report = [](std::vector<const char*> args, const std::string& message) {
    setenv("DHPT_TEST_LISTEN_ADDRESS", "nowhere\n", 1);
    ApplyEnvironmentToFlags({"test_listen_address"});
    ParseCommandLineWithDashes("prog", static_cast<int>(args.size()),
                               const_cast<char**>(args.data()));
    std::exit(ReportFlagError("prog", message));
  };
  EXPECT_EXIT(report({"prog"}, "--test_listen_address=nowhere is not HOST:PORT; --test_listen_"
                               "address again, --test_listen_address_v6 and --test_slot_count"),
              ::testing::ExitedWithCode(2),
              ::testing::HasSubstr("prog: --test_listen_address=nowhere is not HOST:PORT; "
                                   "--test_listen_address again, --test_listen_address_v6 and "
                                   "--test_slot_count (--test_listen_address from "
                                   "DHPT_TEST_LISTEN_ADDRESS='nowhere\\n')\n"));
  EXPECT_EXIT(report({"prog", "--test_listen_address=x"}, "--test_listen_address: bad"),
              ::testing::ExitedWithCode(2), ::testing::EndsWith("prog: --test_listen_address: bad\n"));
  unsetenv("DHPT_TEST_LISTEN_ADDRESS");
}

TEST(EnvFlagsTest, HelpIsAnAnswerNotAFailure) {
  const char* args[] = {"prog", "--help"};
  EXPECT_EXIT(ParseCommandLineWithDashes("prog", 2, const_cast<char**>(args)),
              ::testing::ExitedWithCode(0), ::testing::Not(::testing::HasSubstr("ERROR")));
}

TEST(EnvFlagsTest, ParseFlagsOnlyExitsOnAPositionalArgument) {
  const char* args[] = {"dhpt-cpu-worker", "--test_listen_address=a", "b"};
  EXPECT_EXIT(ParseFlagsOnly("dhpt-cpu-worker", 3, const_cast<char**>(args)),
              ::testing::ExitedWithCode(2), "--test_listen_address='a b'");
}

}  // namespace
}  // namespace dhpt
