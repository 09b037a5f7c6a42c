#include "services/study/trial_outcome.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dhpt::study {
namespace {

using ::testing::HasSubstr;

v1::StudySpec LossSpec() {
  v1::StudySpec spec;
  spec.mutable_objective()->set_metric("loss");
  return spec;
}

// A result whose state ends no trial (PENDING, RUNNING, a number no state has) failed the trial
// with an empty reason (hostile review): it now names the state, and keeps the worker's error.
TEST(RecordResultTest, AResultWithAStateThatEndsNoTrialFailsItSayingWhich) {
  for (int state : {static_cast<int>(v1::Trial::PENDING), static_cast<int>(v1::Trial::RUNNING),
                    99}) {
    SCOPED_TRACE(state);
    v1::TrialResult result;
    result.set_state(static_cast<v1::Trial::State>(state));
    (*result.mutable_metrics())["loss"] = 1;
    v1::Trial trial;
    RecordResult(LossSpec(), result, trial);
    EXPECT_EQ(trial.state(), v1::Trial::FAILED);
    EXPECT_THAT(trial.error(), HasSubstr("the worker ended the trial with state "));
    EXPECT_THAT(trial.error(),
                HasSubstr(state == 99 ? "99" : v1::Trial::State_Name(
                                                   static_cast<v1::Trial::State>(state))));
  }
  v1::TrialResult said;
  said.set_state(v1::Trial::RUNNING);
  said.set_error("my own words");
  v1::Trial trial;
  RecordResult(LossSpec(), said, trial);
  EXPECT_THAT(trial.error(), HasSubstr(": my own words"));
}

TEST(RecordResultTest, AFailedResultKeepsTheWorkersReasonAndACompletedOneItsObjective) {
  v1::TrialResult failed;
  failed.set_state(v1::Trial::FAILED);
  failed.set_error("out of memory");
  v1::Trial trial;
  RecordResult(LossSpec(), failed, trial);
  EXPECT_EQ(trial.state(), v1::Trial::FAILED);
  EXPECT_EQ(trial.error(), "out of memory");
  v1::TrialResult completed;
  completed.set_state(v1::Trial::COMPLETED);
  (*completed.mutable_metrics())["loss"] = 0.5;
  RecordResult(LossSpec(), completed, trial);
  EXPECT_EQ(trial.state(), v1::Trial::COMPLETED);
  EXPECT_EQ(trial.objective_value(), 0.5);
  EXPECT_TRUE(trial.error().empty());
}

}  // namespace
}  // namespace dhpt::study
