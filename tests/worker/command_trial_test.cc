#include "services/worker/command_trial.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iterator>
#include <set>

#include "absl/strings/str_split.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "services/worker/trial_runner.h"
#include "tests/worker/command_fixture.h"

namespace dhpt::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;
using CommandTrialTest = CommandFixture;

TEST_F(CommandTrialTest, KatibLinesCompleteTheTrialWithEveryMetric) {
  CommandTrialOutcome outcome = Run(Script(R"(
echo "loading data"
echo "epoch=1 accuracy=0.5 loss=0.9"
echo "epoch=2 accuracy=0.7 loss=0.4" >&2
echo "epoch=2 accuracy=0.75 loss=0.3"
printf "lr=0.01")"),
                                    MakeAssign());
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_THAT(outcome.metrics, UnorderedElementsAre(Pair("epoch", 2), Pair("accuracy", 0.75),
                                                    Pair("loss", 0.3), Pair("lr", 0.01)));
  EXPECT_THAT(progress_, ElementsAre(IntermediateValue{1, 0.5}, IntermediateValue{2, 0.75}));
  ASSERT_TRUE(outcome.usage.has_value());
  // The trial's working directory goes with it.
  EXPECT_TRUE(std::filesystem::is_empty(options_.workdir_root));
}

// A directory of the same trial id and attempt (a restarted in-memory scheduler's trial while
// the first one's still runs here) is not the new trial's to remove: it gets a name of its own.
TEST_F(CommandTrialTest, ADirectoryOfTheSameTrialAndAttemptIsLeftAlone) {
  const std::string first = options_.workdir_root + "/trial-7-2";
  std::filesystem::create_directories(first);
  std::ofstream(first + "/running") << "the first trial's\n";
  ASSERT_TRUE(Run(Script("pwd > $DIR/pwd.txt; echo accuracy=1"), MakeAssign()).status.ok());
  std::ifstream running(first + "/running");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(running), {}), "the first trial's\n");
  EXPECT_THAT(Read("pwd.txt"), StartsWith(first + "-"));
  // Its own went after it; the first trial's stays for that trial to remove.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(options_.workdir_root),
                          std::filesystem::directory_iterator()),
            1);
}

TEST_F(CommandTrialTest, JsonLinesWithStepsStreamOnlyIncreasingSteps) {
  CommandTrialOutcome outcome = Run(Script(R"(
echo '{"step": 10, "accuracy": 0.5, "phase": "train"}'
echo '{"step": 20, "accuracy": 0.6}'
echo '{"step": 15, "accuracy": 0.55}')"),
                                    MakeAssign());
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_THAT(outcome.metrics, UnorderedElementsAre(Pair("accuracy", 0.55)));
  EXPECT_THAT(progress_, ElementsAre(IntermediateValue{10, 0.5}, IntermediateValue{20, 0.6}));
}

// Progress arrives while the program runs: it waits for the test to see its first value.
TEST_F(CommandTrialTest, StreamsProgressWhileTheProgramRuns) {
  const std::string go = dir_ + "/go";
  TrialContext context;
  context.progress = [&](int64_t step, double value) {
    progress_.push_back({step, value});
    std::ofstream{go};
  };
  CommandTrialOutcome outcome = Run(Script(R"(
echo accuracy=0.1
i=0
while [ ! -e $DIR/go ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done
[ -e $DIR/go ] || exit 3
echo accuracy=0.2)"),
                                    MakeAssign(), context);
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_THAT(progress_, ElementsAre(IntermediateValue{1, 0.1}, IntermediateValue{2, 0.2}));
}

TEST_F(CommandTrialTest, ExitingZeroWithoutTheObjectiveFails) {
  CommandTrialOutcome outcome = Run(Script("echo loss=0.3"), MakeAssign("accuracy"));
  EXPECT_TRUE(absl::IsAborted(outcome.status));
  EXPECT_EQ(outcome.status.message(),
            "command train exited 0 but never printed the objective metric accuracy (print a "
            "line `accuracy=0.93`, or a JSON line)");
}

TEST_F(CommandTrialTest, NonZeroExitFailsWithTheTailOfStderr) {
  CommandTrialOutcome outcome = Run(Script(R"(
echo accuracy=0.9
head -c 5000 /dev/zero | tr '\0' x >&2
printf '\n\033[31mValueError: bad lr \303\251\n' >&2
exit 3)"),
                                    MakeAssign());
  const std::string message(outcome.status.message());
  EXPECT_THAT(message, HasSubstr("command train exited with status 3; stderr ends:\n"));
  EXPECT_THAT(message, HasSubstr("\n?[31mValueError: bad lr \303\251"));
  EXPECT_LT(message.size(), 100 + kStderrTailBytes);
}

TEST_F(CommandTrialTest, ASignalFailsTheTrialNamingIt) {
  CommandTrialOutcome outcome = Run(Script("echo accuracy=0.9\nkill -SEGV $$"), MakeAssign());
  EXPECT_THAT(outcome.status.message(),
              HasSubstr("was killed by signal SIGSEGV (Segmentation fault)"));
}

TEST_F(CommandTrialTest, AnExecFailureFailsWithItsErrno) {
  RegisteredCommand command = Script("#!/nonexistent/interpreter");
  std::filesystem::path path = command.path;
  std::ofstream(path) << "#!/nonexistent/interpreter\n";
  CommandTrialOutcome outcome = Run(command, MakeAssign());
  EXPECT_THAT(outcome.status.message(),
              HasSubstr(absl::StrCat("cannot run ", command.path, ": No such file or directory")));
  EXPECT_FALSE(outcome.usage.has_value());
  EXPECT_TRUE(std::filesystem::is_empty(options_.workdir_root));
}

TEST_F(CommandTrialTest, ParametersArriveAsArgumentsEnvironmentAndFile) {
  v1::Assign assign = MakeAssign();
  (*assign.mutable_params())["lr"].set_double_value(0.1);
  (*assign.mutable_params())["depth"].set_int_value(6);
  (*assign.mutable_params())["booster"].set_string_value("gbtree");
  (*assign.mutable_model()->mutable_fixed())["epochs"].set_number_value(10);
  (*assign.mutable_model()->mutable_fixed())["shuffle"].set_bool_value(true);
  (*assign.mutable_model()->mutable_fixed())["depth"].set_number_value(3);  // Tuned wins.
  RegisteredCommand command = Script(R"(
for a in "$@"; do echo "$a"; done > $DIR/args.txt
printf '%s' "$DHPT_PARAMS" > $DIR/env.json
cp "$DHPT_PARAMS_FILE" $DIR/file.json
echo "$DHPT_PARAMS_FILE" > $DIR/file.txt
echo accuracy=1)");
  command.args = {"--fixed", "x"};
  ASSERT_TRUE(Run(command, assign).status.ok());
  EXPECT_THAT(absl::StrSplit(Read("args.txt"), '\n', absl::SkipEmpty()),
              ElementsAre("--fixed", "x", "--booster=gbtree", "--depth=6", "--epochs=10",
                          "--lr=0.10000000000000001", "--shuffle=true"));
  EXPECT_EQ(Read("file.txt"), absl::StrCat(options_.workdir_root, "/trial-7-2/params.json\n"));
  EXPECT_EQ(Read("env.json"), Read("file.json"));
  google::protobuf::Struct params;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(Read("env.json"), &params).ok());
  EXPECT_EQ(params.fields().at("lr").number_value(), 0.1);
  EXPECT_EQ(params.fields().at("depth").number_value(), 6);
  EXPECT_EQ(params.fields().at("booster").string_value(), "gbtree");
  EXPECT_EQ(params.fields().at("epochs").number_value(), 10);
  EXPECT_TRUE(params.fields().at("shuffle").bool_value());
}

TEST_F(CommandTrialTest, TheEnvironmentIsCleanButForWhatIsAllowed) {
  setenv("DHPT_TEST_SECRET", "hunter2", 1);
  setenv("DHPT_TEST_ALLOWED", "visible", 1);
  setenv("DHPT_TEST_OWN", "own", 1);
  setenv("DHPT_TRIAL_ID", "forged", 1);
  options_.env = {"DHPT_TEST_ALLOWED", "DHPT_TEST_UNSET", "DHPT_TRIAL_ID"};
  RegisteredCommand command = Script("env > $DIR/env.txt; pwd > $DIR/pwd.txt; echo accuracy=1");
  command.env = {"DHPT_TEST_OWN"};
  TrialContext context;
  context.threads = 3;
  ASSERT_TRUE(Run(command, MakeAssign(), context).status.ok());
  const std::string workdir = options_.workdir_root + "/trial-7-2";
  std::map<std::string, std::string> env;
  for (absl::string_view line : absl::StrSplit(Read("env.txt"), '\n', absl::SkipEmpty())) {
    env.insert(absl::StrSplit(line, absl::MaxSplits('=', 1)));
  }
  EXPECT_FALSE(env.contains("DHPT_TEST_SECRET"));
  EXPECT_FALSE(env.contains("DHPT_TEST_UNSET"));
  EXPECT_EQ(env["DHPT_TEST_ALLOWED"], "visible");
  EXPECT_EQ(env["DHPT_TEST_OWN"], "own");
  EXPECT_EQ(env["DHPT_TRIAL_ID"], "7");  // Allowed names never replace DHPT's own.
  EXPECT_EQ(env["DHPT_ATTEMPT"], "2");
  EXPECT_EQ(env["DHPT_STUDY"], "study-a");
  EXPECT_EQ(env["DHPT_OBJECTIVE_METRIC"], "accuracy");
  EXPECT_EQ(env["DHPT_THREADS"], "3");
  EXPECT_EQ(env["OMP_NUM_THREADS"], "3");
  EXPECT_EQ(env["PATH"], "/usr/local/bin:/usr/bin:/bin");
  EXPECT_EQ(env["HOME"], workdir);
  EXPECT_EQ(env["TMPDIR"], workdir);
  EXPECT_EQ(env["LANG"], "C.UTF-8");
  EXPECT_EQ(Read("pwd.txt"), workdir + "\n");
  const std::set<std::string> expected = {"DHPT_TEST_ALLOWED",
                                          "DHPT_TEST_OWN",
                                          "DHPT_TRIAL_ID",
                                          "DHPT_ATTEMPT",
                                          "DHPT_STUDY",
                                          "DHPT_OBJECTIVE_METRIC",
                                          "DHPT_THREADS",
                                          "OMP_NUM_THREADS",
                                          "DHPT_PARAMS",
                                          "DHPT_PARAMS_FILE",
                                          "PATH",
                                          "HOME",
                                          "TMPDIR",
                                          "LANG",
                                          "PWD",
                                          "OLDPWD",
                                          "SHLVL",
                                          "_"};  // The last four are the shell's own.
  for (const auto& [name, value] : env) EXPECT_TRUE(expected.contains(name)) << name;
  unsetenv("DHPT_TRIAL_ID");
}

TEST_F(CommandTrialTest, TheRunnerRunsRegisteredCommandsAndMeasuresTheirTree) {
  auto registry = std::make_shared<CommandRegistry>();
  ASSERT_TRUE(registry->Add(Script("echo accuracy=0.8 cpu_seconds=999 model_bytes=12")).ok());
  TrialRunner runner({.commands = registry, .command_options = options_});
  v1::TrialResult result = runner.Run(MakeAssign(), {});
  ASSERT_EQ(result.state(), v1::Trial::COMPLETED) << result.error();
  EXPECT_EQ(result.metrics().at("accuracy"), 0.8);
  EXPECT_EQ(result.metrics().at("model_bytes"), 12);   // The program's own, kept.
  EXPECT_LT(result.metrics().at("cpu_seconds"), 100);  // Measured, never printed.
  for (const char* m : {"wall_seconds", "cpu_utilization", "peak_rss_bytes"}) {
    EXPECT_TRUE(result.metrics().contains(m)) << m;
  }
  v1::Assign unknown = MakeAssign();
  unknown.mutable_model()->set_command("other");
  result = runner.Run(unknown, {});
  EXPECT_EQ(result.state(), v1::Trial::FAILED);
  EXPECT_EQ(result.error(),
            "this worker has no command other; its operator registers commands with --command");
}

// One rule, whatever the objective: a measurement is the worker's, never the program's.
TEST_F(CommandTrialTest, AMeasuredObjectiveIsMeasuredNeverTakenFromTheProgram) {
  auto registry = std::make_shared<CommandRegistry>();
  ASSERT_TRUE(registry->Add(Script("echo accuracy=0.8 cpu_seconds=999 wall_seconds=999")).ok());
  TrialRunner runner({.commands = registry, .command_options = options_});
  for (const char* objective : {"cpu_seconds", "wall_seconds"}) {
    v1::TrialResult result = runner.Run(MakeAssign(objective), {});
    ASSERT_EQ(result.state(), v1::Trial::COMPLETED) << objective << ": " << result.error();
    EXPECT_LT(result.metrics().at("cpu_seconds"), 100) << objective;
    EXPECT_LT(result.metrics().at("wall_seconds"), 100) << objective;
  }
  // Nor need the program print it: the worker measures it.
  auto silent = std::make_shared<CommandRegistry>();
  ASSERT_TRUE(silent->Add(Script("echo accuracy=0.8")).ok());
  TrialRunner quiet({.commands = silent, .command_options = options_});
  v1::TrialResult result = quiet.Run(MakeAssign("cpu_seconds"), {});
  ASSERT_EQ(result.state(), v1::Trial::COMPLETED) << result.error();
  EXPECT_TRUE(result.metrics().contains("cpu_seconds"));
}

TEST(CommandPrintableTailTest, KeepsValidUtf8FromACharacterBoundary) {
  EXPECT_EQ(PrintableTail("abc\xc3\xa9", 2), "\xc3\xa9");
  EXPECT_EQ(PrintableTail("abc\xc3\xa9", 1), "");  // Half a character: dropped.
  EXPECT_EQ(PrintableTail("a\x01\x7f\tb\xff\xc3(\xed\xa0\x80z\n", 100),
            "a??\tb?"
            "?(?"
            "??z");
  EXPECT_EQ(PrintableTail("\xf0\x9f\x98\x80 ok", 100), "\xf0\x9f\x98\x80 ok");
}

}  // namespace
}  // namespace dhpt::worker
