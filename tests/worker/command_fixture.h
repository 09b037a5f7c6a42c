#pragma once

// A temporary directory for COMMAND trial tests, the /bin/sh scripts they run, and a runner.

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "services/worker/command_output.h"
#include "services/worker/command_trial.h"
#include "services/worker/process_tree.h"

namespace dhpt::worker {

class CommandFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    char path[] = "/tmp/dhpt-command-test-XXXXXX";
    ASSERT_NE(mkdtemp(path), nullptr);
    dir_ = path;
    options_.workdir_root = dir_ + "/work";
    options_.grace_period = absl::Seconds(10);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A command running `body` under /bin/sh; $DIR in it is the test's directory.
  RegisteredCommand Script(const std::string& body, const std::string& name = "train") {
    const std::string path = absl::StrCat(dir_, "/", name, ".sh");
    {
      std::ofstream file(path);
      file << "#!/bin/sh\n" << absl::StrReplaceAll(body, {{"$DIR", dir_}}) << "\n";
    }
    chmod(path.c_str(), 0755);
    return {.name = name, .path = path};
  }

  static v1::Assign MakeAssign(const std::string& objective = "accuracy") {
    v1::Assign assign;
    assign.set_trial_id(7);
    assign.set_attempt(2);
    assign.set_study("study-a");
    assign.set_objective_metric(objective);
    assign.mutable_model()->set_kind(v1::Model::COMMAND);
    assign.mutable_model()->set_command("train");
    return assign;
  }

  // Runs the trial, collecting what it streams.
  CommandTrialOutcome Run(const RegisteredCommand& command, const v1::Assign& assign,
                          TrialContext context = {}) {
    if (!context.progress) {
      context.progress = [this](int64_t step, double value) {
        absl::MutexLock lock(&mutex_);
        progress_.push_back({step, value});
      };
    }
    return RunCommandTrial(command, options_, assign, context);
  }

  std::string Read(const std::string& name) const {
    std::ifstream file(absl::StrCat(dir_, "/", name));
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
  }

  std::string dir_;
  CommandOptions options_;
  absl::Mutex mutex_;
  std::vector<IntermediateValue> progress_;
};

}  // namespace dhpt::worker
