#include "services/worker/command_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace dhpt::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class CommandRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char path[] = "/tmp/dhpt-registry-test-XXXXXX";
    ASSERT_NE(mkdtemp(path), nullptr);
    dir_ = path;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text, mode_t mode = 0644) {
    const std::string path = absl::StrCat(dir_, "/", name);
    std::ofstream(path) << text;
    chmod(path.c_str(), mode);
    return path;
  }
  static std::string Message(const absl::Status& status) { return std::string(status.message()); }

  std::string dir_;
};

TEST_F(CommandRegistryTest, ParsesACommandFlag) {
  absl::StatusOr<RegisteredCommand> command = ParseCommandFlag("train=/bin/echo  a b");
  ASSERT_TRUE(command.ok()) << command.status();
  EXPECT_EQ(command->name, "train");
  EXPECT_EQ(command->path, "/bin/echo");
  EXPECT_THAT(command->args, ElementsAre("a", "b"));
  EXPECT_THAT(Message(ParseCommandFlag("train").status()), HasSubstr("NAME=PATH"));
  EXPECT_THAT(Message(ParseCommandFlag("train= ").status()), HasSubstr("has no path"));
}

TEST_F(CommandRegistryTest, RegistersValidCommandsAndListsThemSorted) {
  CommandRegistry registry;
  ASSERT_TRUE(registry.Add({.name = "zeta", .path = "/bin/sh"}).ok());
  ASSERT_TRUE(registry.Add({.name = "alpha.v2_x-y", .path = "/bin/echo", .env = {"_A1"}}).ok());
  EXPECT_THAT(registry.Names(), ElementsAre("alpha.v2_x-y", "zeta"));
  ASSERT_NE(registry.Find("zeta"), nullptr);
  EXPECT_EQ(registry.Find("zeta")->path, "/bin/sh");
  EXPECT_EQ(registry.Find("nope"), nullptr);
}

TEST_F(CommandRegistryTest, RefusesBadNamesPathsAndEnvNames) {
  const std::string script = Write("script.sh", "#!/bin/sh\n", 0755);
  const std::string plain = Write("plain.sh", "#!/bin/sh\n", 0644);
  CommandRegistry registry;
  for (const std::string& name : {std::string(), std::string("-x"), std::string("a b"),
                                  std::string(".hidden"), std::string(65, 'n')}) {
    EXPECT_THAT(Message(registry.Add({.name = name, .path = script})),
                HasSubstr("not a command name"))
        << name;
  }
  EXPECT_TRUE(registry.Add({.name = std::string(64, 'n'), .path = script}).ok());
  EXPECT_TRUE(registry.Add({.name = "ok", .path = script}).ok());
  EXPECT_THAT(Message(registry.Add({.name = "ok", .path = script})), HasSubstr("registered twice"));
  EXPECT_THAT(Message(registry.Add({.name = "rel", .path = "bin/sh"})),
              HasSubstr("not an absolute path"));
  EXPECT_THAT(Message(registry.Add({.name = "gone", .path = dir_ + "/gone"})),
              HasSubstr("No such file"));
  EXPECT_THAT(Message(registry.Add({.name = "dir", .path = dir_})),
              HasSubstr("not a regular file"));
  EXPECT_THAT(Message(registry.Add({.name = "plain", .path = plain})), HasSubstr("not executable"));
  EXPECT_THAT(Message(registry.Add({.name = "env", .path = script, .env = {"1A"}})),
              HasSubstr("not an environment variable name"));
  EXPECT_THAT(Message(registry.Add({.name = "env", .path = script, .env = {"A-B"}})),
              HasSubstr("not an environment variable name"));
  EXPECT_THAT(registry.Names(), ElementsAre(std::string(64, 'n'), "ok"));
}

TEST_F(CommandRegistryTest, LoadsACommandsFile) {
  const std::string file = Write("commands.yaml", R"(
- name: train
  command: [/usr/bin/python3, /opt/train.py, --data, /data/x.csv]
  env: [WANDB_API_KEY, HF_HOME]
  grace_period_seconds: 2.5
- name: eval
  command: ["/bin/sh", "-c", "echo a, b"]
)");
  absl::StatusOr<std::vector<RegisteredCommand>> commands = LoadCommandsFile(file);
  ASSERT_TRUE(commands.ok()) << commands.status();
  ASSERT_EQ(commands->size(), 2u);
  const RegisteredCommand& train = (*commands)[0];
  EXPECT_EQ(train.name, "train");
  EXPECT_EQ(train.path, "/usr/bin/python3");
  EXPECT_THAT(train.args, ElementsAre("/opt/train.py", "--data", "/data/x.csv"));
  EXPECT_THAT(train.env, ElementsAre("WANDB_API_KEY", "HF_HOME"));
  EXPECT_EQ(train.grace_period, absl::Milliseconds(2500));
  EXPECT_THAT((*commands)[1].args, ElementsAre("-c", "echo a, b"));
  EXPECT_EQ((*commands)[1].grace_period, std::nullopt);
  EXPECT_TRUE(LoadCommandsFile(Write("empty.yaml", ""))->empty());
}

TEST_F(CommandRegistryTest, RefusesMalformedCommandsFiles) {
  auto error = [&](const std::string& text) {
    return Message(LoadCommandsFile(Write("bad.yaml", text)).status());
  };
  EXPECT_THAT(error("name: x\n"), HasSubstr("expected a list"));
  EXPECT_THAT(error("- name: x\n  comand: [/bin/sh]\n"), HasSubstr("unknown key \"comand\""));
  EXPECT_THAT(error("- name: x\n  command: /bin/sh\n"), HasSubstr("command must be a list"));
  EXPECT_THAT(error("- name: x\n"), HasSubstr("command must be a list"));
  EXPECT_THAT(error("- command: [/bin/sh]\n"), HasSubstr("has no name"));
  EXPECT_THAT(error("- name: x\n  command: [/bin/sh]\n  grace_period_seconds: -1\n"),
              HasSubstr("grace_period_seconds must be between 0 and"));
  EXPECT_THAT(error("- name: x\n  command: [/bin/sh\n"), HasSubstr("bad.yaml"));  // Syntax.
  EXPECT_THAT(error("- name: [x]\n  command: [/bin/sh]\n"), HasSubstr("bad.yaml"));
  EXPECT_THAT(Message(LoadCommandsFile(dir_ + "/none.yaml").status()), HasSubstr("none.yaml"));
  EXPECT_THAT(error(std::string(kMaxCommandsFileBytes + 1, '#')), HasSubstr("larger than"));
}

TEST_F(CommandRegistryTest, DefaultWorkdirIsUnderTmpdirAndNamedByPid) {
  const char* tmpdir = std::getenv("TMPDIR");
  const std::optional<std::string> saved =
      tmpdir != nullptr ? std::optional<std::string>(tmpdir) : std::nullopt;
  setenv("TMPDIR", "/var/tmp", 1);
  EXPECT_EQ(DefaultCommandWorkdir(), absl::StrCat("/var/tmp/dhpt-trials-", getpid()));
  unsetenv("TMPDIR");
  EXPECT_EQ(DefaultCommandWorkdir(), absl::StrCat("/tmp/dhpt-trials-", getpid()));
  if (saved) setenv("TMPDIR", saved->c_str(), 1);
}

}  // namespace
}  // namespace dhpt::worker
