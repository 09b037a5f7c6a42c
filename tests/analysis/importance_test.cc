// Parameter importance where the truth is known: a function with one dominant parameter, two
// that interact, one categorical that matters and three that do nothing; both evaluators must
// rank them as the truth does, for every seed. Then the bad inputs and the bounds.

#include "services/analysis/importance.h"

#include <chrono>
#include <cmath>
#include <map>
#include <numbers>

#include <gtest/gtest.h>

#include "services/common/random.h"

namespace dhpt::analysis {
namespace {

using optimizer::ParameterKind;
using optimizer::ParameterSpec;

ParameterSpec Double(const std::string& name, double min, double max, bool log = false) {
  ParameterSpec p;
  p.name = name;
  p.kind = ParameterKind::kDouble;
  p.min = min;
  p.max = max;
  p.log = log;
  return p;
}

ParameterSpec Int(const std::string& name, double min, double max, double step = 0) {
  ParameterSpec p = Double(name, min, max);
  p.kind = ParameterKind::kInt;
  p.step = step;
  return p;
}

ParameterSpec Choice(const std::string& name, std::vector<std::string> values) {
  ParameterSpec p;
  p.name = name;
  p.kind = ParameterKind::kCategorical;
  p.categories = std::move(values);
  return p;
}

// y = 20 dominant + 6 [colour == red] + 10 sin(pi width / 10) u(rate), minimised, where u is the
// log-scale position of rate; noise_a, noise_b and noise_c do nothing.
StudyData KnownTruthStudy(uint64_t seed, int trials) {
  StudyData study;
  study.name = "known-truth";
  study.params = {Double("dominant", 0, 1),       Int("width", 0, 10),
                  Double("rate", 1e-3, 1, true),  Choice("colour", {"red", "green", "blue"}),
                  Double("noise_a", -5, 5),       Int("noise_b", 0, 100, 5),
                  Choice("noise_c", {"x", "y"})};
  study.objectives = {{"loss", false}};
  std::mt19937_64 generator = SeededGenerator(seed, 1, 0);
  for (int t = 0; t < trials; ++t) {
    TrialData trial;
    trial.number = t;
    trial.state = TrialState::kCompleted;
    const double dominant = UniformUnit(generator);
    const double width = std::floor(UniformUnit(generator) * 11);
    const double rate_unit = UniformUnit(generator);
    const double rate = std::exp(std::log(1e-3) + rate_unit * (std::log(1.0) - std::log(1e-3)));
    const double colour = std::floor(UniformUnit(generator) * 3);
    trial.params = {dominant, width, rate, colour, -5 + 10 * UniformUnit(generator),
                    5 * std::floor(UniformUnit(generator) * 21),
                    std::floor(UniformUnit(generator) * 2)};
    trial.values = {20 * dominant + (colour == 0 ? 6 : 0) +
                    10 * std::sin(std::numbers::pi * width / 10) * rate_unit};
    study.trials.push_back(std::move(trial));
  }
  return study;
}

std::map<std::string, double> ByName(const ImportanceResult& result) {
  std::map<std::string, double> out;
  for (const ParamImportance& p : result.importances) out[p.name] = p.importance;
  return out;
}

class KnownTruthTest : public testing::TestWithParam<Evaluator> {};

TEST_P(KnownTruthTest, RanksAsTheTruthDoesForFiveSeeds) {
  for (uint64_t seed = 0; seed < 5; ++seed) {
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    ImportanceOptions options;
    options.evaluator = GetParam();
    options.seed = seed;
    absl::StatusOr<ImportanceResult> result = ComputeImportances(KnownTruthStudy(seed, 600), options);
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_EQ(result->importances.size(), 7u);
    EXPECT_EQ(result->importances[0].name, "dominant");
    double sum = 0;
    for (const ParamImportance& p : result->importances) sum += p.importance;
    EXPECT_NEAR(sum, 1.0, 1e-9);
    const std::map<std::string, double> importance = ByName(*result);
    // Every parameter with an effect beats every one without.
    for (const char* effect : {"dominant", "width", "rate", "colour"}) {
      for (const char* none : {"noise_a", "noise_b", "noise_c"}) {
        EXPECT_GT(importance.at(effect), importance.at(none)) << effect << " vs " << none;
      }
    }
  }
}

TEST_P(KnownTruthTest, IsDeterministicGivenTheSeed) {
  const StudyData study = KnownTruthStudy(3, 300);
  ImportanceOptions options;
  options.evaluator = GetParam();
  options.seed = 11;
  absl::StatusOr<ImportanceResult> first = ComputeImportances(study, options);
  absl::StatusOr<ImportanceResult> second = ComputeImportances(study, options);
  ASSERT_TRUE(first.ok() && second.ok());
  for (size_t i = 0; i < first->importances.size(); ++i) {
    EXPECT_EQ(first->importances[i].name, second->importances[i].name);
    EXPECT_EQ(first->importances[i].importance, second->importances[i].importance);
  }
}

TEST_P(KnownTruthTest, AHundredThousandTrialsAreSubsampledAndAnswerQuickly) {
  const StudyData study = KnownTruthStudy(1, 100'000);
  ImportanceOptions options;
  options.evaluator = GetParam();
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<ImportanceResult> result = ComputeImportances(study, options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->trials_considered, 100'000);
  EXPECT_EQ(result->trials_used,
            GetParam() == Evaluator::kFanova ? kMaxFanovaTrials : kMaxPedAnovaTrials);
  EXPECT_EQ(result->importances[0].name, "dominant");
  // Generous for a loaded machine; the point is that it does not grow with the study.
  EXPECT_LT(seconds, 20.0);
}

INSTANTIATE_TEST_SUITE_P(Evaluators, KnownTruthTest,
                         testing::Values(Evaluator::kPedAnova, Evaluator::kFanova),
                         [](const auto& info) {
                           return info.param == Evaluator::kFanova ? "Fanova" : "PedAnova";
                         });

TEST(ImportanceTest, EachObjectiveOfAMultiObjectiveStudyHasItsOwnImportances) {
  StudyData study = KnownTruthStudy(2, 400);
  study.objectives = {{"loss", false}, {"size", true}};
  for (TrialData& trial : study.trials) trial.values.push_back(trial.params[4]);  // noise_a.
  for (Evaluator evaluator : {Evaluator::kPedAnova, Evaluator::kFanova}) {
    ImportanceOptions options;
    options.evaluator = evaluator;
    options.objective = 1;
    absl::StatusOr<ImportanceResult> result = ComputeImportances(study, options);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->importances[0].name, "noise_a");
    EXPECT_EQ(result->objective, "size");
  }
}

TEST(ImportanceTest, PrunedTrialsCountOnlyWhenAsked) {
  StudyData study = KnownTruthStudy(4, 40);
  for (size_t i = 2; i < study.trials.size(); ++i) study.trials[i].state = TrialState::kPruned;
  ImportanceOptions options;
  absl::StatusOr<ImportanceResult> completed_only = ComputeImportances(study, options);
  ASSERT_TRUE(completed_only.ok());
  EXPECT_EQ(completed_only->trials_used, 2);
  options.include_pruned = true;
  absl::StatusOr<ImportanceResult> with_pruned = ComputeImportances(study, options);
  ASSERT_TRUE(with_pruned.ok());
  EXPECT_EQ(with_pruned->trials_used, 40);
}

TEST(ImportanceTest, BadInputGetsAClearAnswer) {
  StudyData study = KnownTruthStudy(0, 50);
  ImportanceOptions unknown;
  unknown.params = {"dominant", "learning_rate"};
  absl::Status status = ComputeImportances(study, unknown).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("no parameter \"learning_rate\""), std::string::npos) << status;
  EXPECT_NE(status.message().find("dominant, width"), std::string::npos) << status;

  ImportanceOptions quantile;
  quantile.target_quantile = 1.5;
  EXPECT_EQ(ComputeImportances(study, quantile).status().code(),
            absl::StatusCode::kInvalidArgument);
  ImportanceOptions objective;
  objective.objective = 2;
  EXPECT_EQ(ComputeImportances(study, objective).status().code(),
            absl::StatusCode::kInvalidArgument);

  StudyData empty = study;
  empty.trials.clear();
  status = ComputeImportances(empty, {}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("has 0 completed trial(s)"), std::string::npos) << status;

  StudyData one = study;
  one.trials.resize(1);
  status = ComputeImportances(one, {}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("needs at least 2"), std::string::npos) << status;

  StudyData flat = study;
  for (TrialData& trial : flat.trials) trial.values = {1.0};
  status = ComputeImportances(flat, {}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("same loss"), std::string::npos) << status;
}

TEST(ImportanceTest, AParameterThatNeverVariedIsReportedConstant) {
  StudyData study = KnownTruthStudy(0, 200);
  for (TrialData& trial : study.trials) trial.params[5] = 40;  // noise_b always 40.
  for (Evaluator evaluator : {Evaluator::kPedAnova, Evaluator::kFanova}) {
    ImportanceOptions options;
    options.evaluator = evaluator;
    absl::StatusOr<ImportanceResult> result = ComputeImportances(study, options);
    ASSERT_TRUE(result.ok()) << result.status();
    const ParamImportance& last = result->importances.back();
    EXPECT_EQ(last.name, "noise_b");
    EXPECT_TRUE(last.constant);
    EXPECT_EQ(last.importance, 0.0);
  }
  for (TrialData& trial : study.trials) {
    for (double& value : trial.params) value = 1;
  }
  const absl::Status status = ComputeImportances(study, {}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("no parameter"), std::string::npos) << status;
}

}  // namespace
}  // namespace dhpt::analysis

namespace dhpt::analysis {
namespace {

// A conditional study (issue 33): `depth` is active only when `kind` is b. The scheduler's
// records hold Inactive for it elsewhere, which once threw (bad_variant_access) in the RPC.
TEST(ImportanceTest, AConditionalParameterIsAbsentWhereInactiveAndTheAnswerSaysHowToChoose) {
  v1::StudySpec spec;
  spec.set_name("cond");
  spec.mutable_objective()->set_metric("loss");
  spec.mutable_objective()->set_goal(v1::Objective::MINIMIZE);
  v1::Parameter* kind = spec.add_parameters();
  kind->set_name("kind");
  kind->mutable_categorical()->add_values("a");
  kind->mutable_categorical()->add_values("b");
  v1::Parameter* depth = spec.add_parameters();
  depth->set_name("depth");
  depth->mutable_int_range()->set_min(1);
  depth->mutable_int_range()->set_max(9);
  depth->mutable_condition()->set_parent("kind");
  depth->mutable_condition()->add_values()->set_string_value("b");
  std::vector<optimizer::TrialRecord> records;
  std::vector<int64_t> numbers;
  for (int t = 0; t < 20; ++t) {
    optimizer::TrialRecord record;
    record.status = optimizer::TrialStatus::kCompleted;
    const bool b = t % 2 == 1;
    record.point = {std::string(b ? "b" : "a"),
                    b ? optimizer::ParameterValue(int64_t{1 + t % 9})
                      : optimizer::ParameterValue(optimizer::Inactive{})};
    record.value = b ? 1.0 + (t % 9) : 0.5;
    records.push_back(std::move(record));
    numbers.push_back(t);
  }
  const StudyData study = StudyDataFromRecords(spec, records, numbers);
  ASSERT_EQ(study.trials.size(), 20u);
  EXPECT_TRUE(std::isnan(study.trials[0].params[1]));
  EXPECT_EQ(study.trials[1].params[1], 2);

  // Both parameters: only the 10 trials of branch b have both, and there kind never varies.
  absl::StatusOr<ImportanceResult> both = ComputeImportances(study, {});
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->trials_used, 10);
  // The parent alone reads every trial.
  ImportanceOptions parent;
  parent.params = {"kind"};
  absl::StatusOr<ImportanceResult> by_kind = ComputeImportances(study, parent);
  ASSERT_TRUE(by_kind.ok()) << by_kind.status();
  EXPECT_EQ(by_kind->trials_used, 20);

  // With too few trials of the branch the answer names the cause and the remedy.
  StudyData few = study;
  for (size_t t = 3; t < few.trials.size(); t += 2) few.trials[t].params[1] = std::nan("");
  const absl::Status status = ComputeImportances(few, {}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("lack a conditional one: choose the parameters of one branch "
                                  "with --params"),
            std::string::npos)
      << status;
}

}  // namespace
}  // namespace dhpt::analysis
