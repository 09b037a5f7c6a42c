// Objectives, constraints, worker selectors and NSGA-II settings, through NormalizeStudySpec as
// CreateStudy runs it.

#include "services/study/objectives_validation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "google/protobuf/text_format.h"
#include "services/optimizer/optimizer.h"
#include "services/study/spec_validation.h"

namespace dhpt::study {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

v1::StudySpec XgboostSpec(const std::string& extra) {
  v1::StudySpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    name: "xgb-edge"
    model { kind: XGBOOST }
    dataset { friedman1 { samples: 500 features: 10 } }
    algorithm { name: TPE seed: 1 }
    parameters { name: "max_depth" int_range { min: 2 max: 10 } }
    max_trials: 20
  )pb" + extra, &spec)) << extra;
  return spec;
}

// The base spec with `extra` merged in (so that extra may also name the algorithm).
absl::Status Error(const std::string& extra) {
  v1::StudySpec spec = XgboostSpec("");
  v1::StudySpec patch;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(extra, &patch)) << extra;
  spec.MergeFrom(patch);
  return NormalizeStudySpec(spec).status();
}

TEST(ObjectivesValidationTest, SeveralObjectivesSetTheFirstAsTheObjective) {
  absl::StatusOr<v1::StudySpec> spec = NormalizeStudySpec(XgboostSpec(R"pb(
    objectives { metric: "r2" goal: MAXIMIZE }
    objectives { metric: "inference_latency_us" goal: MINIMIZE reference: 1000 }
    constraints { metric: "model_bytes" max: 4000000 })pb"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->objectives_size(), 2);
  EXPECT_EQ(spec->objective().metric(), "r2");
  // Normalising again changes nothing, so CreateStudy stays idempotent.
  absl::StatusOr<v1::StudySpec> again = NormalizeStudySpec(*spec);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->SerializeAsString(), spec->SerializeAsString());
}

TEST(ObjectivesValidationTest, OneEntryInObjectivesIsASingleObjective) {
  absl::StatusOr<v1::StudySpec> spec =
      NormalizeStudySpec(XgboostSpec(R"pb(objectives { metric: "mse" goal: MINIMIZE })pb"));
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->objectives_size(), 0);
  EXPECT_EQ(spec->objective().metric(), "mse");
}

TEST(ObjectivesValidationTest, DeploymentCostsAndMeasurementsMayBeObjectives) {
  const std::vector<std::string> metrics = TrialMetrics(XgboostSpec(""));
  for (const char* metric : {"r2", "model_bytes", "inference_latency_us",
                             "inference_latency_batch256_us", "energy_joules", "peak_rss_bytes"}) {
    EXPECT_THAT(metrics, Contains(metric));
  }
}

TEST(ObjectivesValidationTest, RefusesWhatCannotWork) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"pb(objective { metric: "r2" goal: MAXIMIZE }
            objectives { metric: "mse" goal: MINIMIZE } objectives { metric: "r2" goal: MAXIMIZE })pb",
       "objective: give either objective or objectives, not both"},
      {R"pb(objectives { metric: "r2" goal: MAXIMIZE } objectives { metric: "speed" goal: MINIMIZE })pb",
       "objectives[1].metric: \"speed\" is not reported by XGBOOST trials"},
      {R"pb(objectives { metric: "r2" goal: MAXIMIZE }
            objectives { metric: "model_bytes" goal: MINIMIZE reference: inf })pb",
       "objectives[1].reference: must be a number between -1e+15 and 1e+15"},
      {R"pb(objectives { metric: "r2" goal: MAXIMIZE }
            objectives { metric: "model_bytes" goal: MINIMIZE reference: 1e300 })pb",
       "objectives[1].reference: must be a number between"},
      {R"pb(objective { metric: "r2" goal: MAXIMIZE reference: 0 })pb",
       "objective.reference: is the hypervolume's reference point"},
      {R"pb(objectives { metric: "r2" goal: MAXIMIZE } objectives { metric: "mse" goal: MINIMIZE }
            early_stopping { median {} })pb",
       "early_stopping: is for studies with one objective"},
      {R"pb(constraints { metric: "model_bytes" max: 1 } constraints { metric: "model_bytes" min: 0 })pb",
       "constraints[1].metric: \"model_bytes\" is constrained twice"},
      {R"pb(constraints { metric: "model_bytes" max: nan })pb", "bounds must be finite"},
      {R"pb(worker_selector { key: "board" value: "pi 4" })pb", "worker_selector: board=pi 4"},
      {R"pb(algorithm { name: NSGA2 nsga2 { population_size: 1 } })pb",
       "algorithm.nsga2.population_size: must be between 2 and 10000"},
      {R"pb(algorithm { name: NSGA2 nsga2 { crossover_prob: 1.5 } })pb",
       "algorithm.nsga2.crossover_prob: must be between 0 and 1"},
      {R"pb(algorithm { name: TPE nsga2 { population_size: 10 } })pb",
       "algorithm.nsga2: is only for NSGA2"},
  };
  for (const auto& [extra, message] : cases) {
    const absl::Status status = Error(extra);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << extra;
    EXPECT_THAT(std::string(status.message()), HasSubstr(message)) << extra;
  }
  std::string many;
  for (int i = 0; i <= kMaxConstraints; ++i) many += R"pb(constraints { metric: "r2" min: 0 })pb";
  EXPECT_THAT(std::string(Error(many).message()), HasSubstr("more than the limit of 16"));
}

TEST(ObjectivesValidationTest, ParEgoFitsFewerPointsByDefaultThanSingleObjectiveBayesian) {
  v1::StudySpec several = XgboostSpec(R"pb(objectives { metric: "r2" goal: MAXIMIZE }
                                           objectives { metric: "model_bytes" goal: MINIMIZE })pb");
  several.mutable_algorithm()->set_name(v1::Algorithm::BAYESIAN);
  v1::StudySpec one = XgboostSpec("");
  one.mutable_algorithm()->set_name(v1::Algorithm::BAYESIAN);
  EXPECT_EQ(NormalizeStudySpec(several)->algorithm().bayesian().max_fit_points(),
            optimizer::kParEgoMaxFitPoints);
  EXPECT_EQ(NormalizeStudySpec(one)->algorithm().bayesian().max_fit_points(), 128);
  several.mutable_algorithm()->mutable_bayesian()->set_max_fit_points(200);
  EXPECT_EQ(NormalizeStudySpec(several)->algorithm().bayesian().max_fit_points(), 200);
}

TEST(ObjectivesValidationTest, Nsga2GetsOptunasDefaults) {
  v1::StudySpec input = XgboostSpec(R"pb(objectives { metric: "r2" goal: MAXIMIZE }
                                         objectives { metric: "model_bytes" goal: MINIMIZE })pb");
  input.mutable_algorithm()->set_name(v1::Algorithm::NSGA2);
  absl::StatusOr<v1::StudySpec> spec = NormalizeStudySpec(input);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->algorithm().nsga2().population_size(), 50);
  EXPECT_EQ(spec->algorithm().nsga2().crossover_prob(), 0.9);
  EXPECT_EQ(spec->algorithm().nsga2().swapping_prob(), 0.5);
  EXPECT_FALSE(spec->algorithm().nsga2().has_mutation_prob());
}

}  // namespace
}  // namespace dhpt::study
