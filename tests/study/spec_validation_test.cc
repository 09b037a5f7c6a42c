#include "services/study/spec_validation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/text_format.h"

namespace dhpt::study {
namespace {

using ::testing::HasSubstr;

v1::StudySpec Parse(const std::string& text) {
  v1::StudySpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &spec)) << text;
  return spec;
}

const char kValid[] = R"pb(
  name: "xgb-friedman"
  model { kind: XGBOOST fixed { key: "objective" value { string_value: "reg:squarederror" } } }
  dataset { friedman1 { samples: 500 features: 10 noise: 1 seed: 0 } }
  objective { metric: "r2" goal: MAXIMIZE }
  algorithm { name: RANDOM seed: 42 }
  parameters { name: "max_depth" int_range { min: 2 max: 10 } }
  parameters { name: "eta" double_range { min: 0.001 max: 0.3 log: true } }
  parameters { name: "booster" categorical { values: "gbtree" values: "dart" } }
  max_trials: 50
)pb";

// Applies `edit` to the valid spec and expects INVALID_ARGUMENT mentioning `field`.
void ExpectRejected(const std::function<void(v1::StudySpec&)>& edit, const std::string& field,
                    const std::string& words = "") {
  v1::StudySpec spec = Parse(kValid);
  edit(spec);
  absl::StatusOr<v1::StudySpec> result = NormalizeStudySpec(spec);
  ASSERT_FALSE(result.ok()) << "accepted: " << spec.ShortDebugString();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(result.status().message()), HasSubstr(field));
  EXPECT_THAT(std::string(result.status().message()), HasSubstr(words));
}

TEST(SpecValidationTest, ValidSpecGetsDefaults) {
  absl::StatusOr<v1::StudySpec> spec = NormalizeStudySpec(Parse(kValid));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_DOUBLE_EQ(spec->dataset().validation_fraction(), 0.2);
  EXPECT_EQ(spec->max_attempts(), 3);
  EXPECT_EQ(spec->algorithm().name(), v1::Algorithm::RANDOM);
}

TEST(SpecValidationTest, FunctionDefaultsToMinimisingValue) {
  absl::StatusOr<v1::StudySpec> spec = NormalizeStudySpec(Parse(R"pb(
    name: "b" model { kind: FUNCTION function: "branin" }
    parameters { name: "x1" double_range { min: -5 max: 10 } }
    parameters { name: "x2" double_range { min: 0 max: 15 } }
    max_trials: 10)pb"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->objective().metric(), "value");
  EXPECT_EQ(spec->objective().goal(), v1::Objective::MINIMIZE);
}

TEST(SpecValidationTest, RejectsEachInvalidField) {
  ExpectRejected([](auto& s) { s.clear_name(); }, "name", "required");
  ExpectRejected([](auto& s) { s.set_name("bad name!"); }, "name");
  ExpectRejected([](auto& s) { s.mutable_model()->clear_kind(); }, "model.kind");
  ExpectRejected([](auto& s) { s.clear_dataset(); }, "dataset", "required");
  ExpectRejected([](auto& s) { s.mutable_dataset()->mutable_friedman1()->set_features(3); },
                 "dataset.friedman1.features");
  ExpectRejected([](auto& s) { s.mutable_dataset()->set_validation_fraction(1.5); },
                 "dataset.validation_fraction");
  ExpectRejected([](auto& s) { s.clear_parameters(); }, "parameters", "must not be empty");
  ExpectRejected([](auto& s) { s.mutable_parameters(0)->mutable_int_range()->set_min(20); },
                 "parameters[0].int_range", "min (20) must be less than max (10)");
  ExpectRejected([](auto& s) { s.mutable_parameters(1)->mutable_double_range()->set_min(0); },
                 "parameters[1].double_range", "log needs min > 0");
  ExpectRejected([](auto& s) { s.mutable_parameters(1)->set_name("max_depth"); },
                 "parameters[1].name", "defined twice");
  ExpectRejected([](auto& s) { s.mutable_parameters(1)->set_name("dropout"); },
                 "parameters[1].name", "not a hyperparameter of XGBOOST");
  ExpectRejected([](auto& s) { s.mutable_parameters(2)->mutable_categorical()->clear_values(); },
                 "parameters[2].categorical.values", "must not be empty");
  ExpectRejected([](auto& s) { s.mutable_parameters(2)->mutable_categorical()->add_values("dart"); },
                 "parameters[2].categorical.values", "appears twice");
  ExpectRejected([](auto& s) { s.mutable_parameters(2)->clear_categorical(); }, "parameters[2]",
                 "needs a domain");
  ExpectRejected([](auto& s) { s.mutable_objective()->set_metric("accuracy"); },
                 "objective.metric", "not reported");
  ExpectRejected([](auto& s) { s.set_max_trials(0); }, "max_trials");
  ExpectRejected([](auto& s) { s.set_parallel_trials(-1); }, "parallel_trials");
  ExpectRejected([](auto& s) { s.set_max_failed_trials(-1); }, "max_failed_trials");
  ExpectRejected([](auto& s) { s.set_fail_fast_trials(-1); }, "fail_fast_trials");
  ExpectRejected([](auto& s) { s.mutable_algorithm()->mutable_tpe()->set_n_ei_candidates(-1); },
                 "algorithm.tpe", "only for TPE");
  ExpectRejected(
      [](auto& s) {
        s.mutable_algorithm()->set_name(v1::Algorithm::TPE);
        s.mutable_algorithm()->mutable_tpe()->set_n_ei_candidates(-1);
      },
      "algorithm.tpe.n_ei_candidates", "between 1 and 10000");
  ExpectRejected(
      [](auto& s) {
        s.mutable_algorithm()->set_name(v1::Algorithm::HILL_CLIMBING);
        s.mutable_algorithm()->mutable_hill_climbing()->set_shrink_factor(1.5);
      },
      "algorithm.hill_climbing.shrink_factor", "(0, 1)");
  ExpectRejected(
      [](auto& s) {
        s.mutable_algorithm()->set_name(v1::Algorithm::BAYESIAN);
        s.mutable_algorithm()->mutable_bayesian()->set_candidates(3);
      },
      "algorithm.bayesian.candidates", "between 16");
  ExpectRejected(
      [](auto& s) {
        (*s.mutable_model()->mutable_fixed())["nthread"].set_number_value(4);
      },
      "model.fixed.nthread", "not a hyperparameter");
  ExpectRejected(
      [](auto& s) {
        (*s.mutable_model()->mutable_fixed())["max_depth"].set_number_value(4);
      },
      "parameters[0].name", "also in model.fixed");
}

const char kAutoencoder[] = R"pb(
  name: "ae"
  model { kind: AUTOENCODER fixed { key: "epochs" value { number_value: 5 } } }
  dataset { sensors { samples: 1000 } }
  objective { metric: "r2" goal: MAXIMIZE }
  parameters { name: "learning_rate" double_range { min: 0.0001 max: 0.01 log: true } }
  parameters { name: "activation" categorical { values: "relu" values: "tanh" } }
  max_trials: 10
  allow_cpu_fallback: true
)pb";

TEST(SpecValidationTest, AutoencoderStudiesOnSensorsGetTheSensorDefaults) {
  absl::StatusOr<v1::StudySpec> spec = NormalizeStudySpec(Parse(kAutoencoder));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->dataset().sensors().channels(), 32);
  EXPECT_EQ(spec->dataset().sensors().latent(), 4);
  EXPECT_DOUBLE_EQ(spec->dataset().sensors().noise(), 0.1);
  EXPECT_TRUE(spec->allow_cpu_fallback());
}

TEST(SpecValidationTest, RejectsBadAutoencoderAndSensorFields) {
  auto rejected = [](const std::function<void(v1::StudySpec&)>& edit, const std::string& field) {
    v1::StudySpec spec = Parse(kAutoencoder);
    edit(spec);
    absl::StatusOr<v1::StudySpec> result = NormalizeStudySpec(spec);
    ASSERT_FALSE(result.ok()) << spec.ShortDebugString();
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(result.status().message()), HasSubstr(field));
  };
  rejected([](auto& s) { s.mutable_dataset()->mutable_sensors()->set_samples(5); }, "dataset.sensors.samples");
  rejected([](auto& s) { s.mutable_dataset()->mutable_sensors()->set_latent(40); }, "dataset.sensors.latent");
  rejected([](auto& s) { s.mutable_dataset()->mutable_sensors()->set_noise(-1); }, "dataset.sensors.noise");
  rejected([](auto& s) { s.mutable_parameters(0)->set_name("eta"); }, "eta");
  rejected([](auto& s) { (*s.mutable_model()->mutable_fixed())["max_depth"].set_number_value(3); },
           "model.fixed.max_depth");
  // The fallback is for AutoEncoders only.
  v1::StudySpec xgboost = Parse(kValid);
  xgboost.set_allow_cpu_fallback(true);
  EXPECT_THAT(std::string(NormalizeStudySpec(xgboost).status().message()), HasSubstr("allow_cpu_fallback"));
}

TEST(SpecValidationTest, CsvTargetIsOptionalOnlyForAutoencoders) {
  v1::StudySpec ae = Parse(kAutoencoder);
  ae.mutable_dataset()->mutable_csv()->set_path("/data/sensors.csv");
  EXPECT_TRUE(NormalizeStudySpec(ae).ok());
  v1::StudySpec xgboost = Parse(kValid);
  xgboost.mutable_dataset()->mutable_csv()->set_path("/data/sensors.csv");
  EXPECT_THAT(std::string(NormalizeStudySpec(xgboost).status().message()), HasSubstr("dataset.csv.target"));
}

TEST(SpecValidationTest, GridTooLargeIsRejectedAndGridSizeBecomesMaxTrials) {
  v1::StudySpec spec = Parse(kValid);
  spec.mutable_algorithm()->set_name(v1::Algorithm::GRID);
  spec.set_max_trials(0);
  absl::StatusOr<v1::StudySpec> normal = NormalizeStudySpec(spec);
  ASSERT_TRUE(normal.ok()) << normal.status();
  EXPECT_EQ(normal->max_trials(), 5 * 5 * 2);  // 5 depths, 5 etas, 2 boosters.

  spec.mutable_algorithm()->set_grid_points(1000);
  spec.mutable_parameters(0)->mutable_int_range()->set_max(100000);
  absl::StatusOr<v1::StudySpec> huge = NormalizeStudySpec(spec);
  ASSERT_FALSE(huge.ok());
  EXPECT_THAT(std::string(huge.status().message()), HasSubstr("more than the limit"));
}

TEST(SpecValidationTest, FunctionParametersMustBeX1ToXd) {
  v1::StudySpec spec = Parse(R"pb(
    name: "b" model { kind: FUNCTION function: "branin" }
    parameters { name: "x1" double_range { min: -5 max: 10 } }
    parameters { name: "y" double_range { min: 0 max: 15 } }
    max_trials: 10)pb");
  EXPECT_THAT(std::string(NormalizeStudySpec(spec).status().message()),
              HasSubstr("expected \"x2\""));
  spec.mutable_model()->set_function("hartmann6");
  EXPECT_THAT(std::string(NormalizeStudySpec(spec).status().message()),
              HasSubstr("exactly 6 parameters"));
  spec.mutable_model()->set_function("nope");
  EXPECT_THAT(std::string(NormalizeStudySpec(spec).status().message()),
              HasSubstr("model.function"));
}

// fuzz/spec_fuzzer: max - min of the int64 extremes overflowed (undefined behaviour, an abort
// under UBSan) before the bounds were checked; the bounds now come first.
TEST(SpecValidationTest, IntRangeAtTheInt64ExtremesIsRejectedForItsBounds) {
  ExpectRejected(
      [](v1::StudySpec& spec) {
        spec.mutable_parameters(0)->mutable_int_range()->set_min(
            std::numeric_limits<int64_t>::min());
        spec.mutable_parameters(0)->mutable_int_range()->set_max(
            std::numeric_limits<int64_t>::max());
      },
      "parameters[0].int_range", "within +-2^53");
}

}  // namespace
}  // namespace dhpt::study

namespace dhpt::study {
namespace {

// Each bound alone was fine; together they crashed every worker with bad_alloc.
TEST(SpecLimitsTest, RejectsWhatNoWorkerCouldHoldOrTheSchedulerShouldKeep) {
  ExpectRejected(
      [](auto& s) {
        s.mutable_dataset()->mutable_friedman1()->set_samples(10'000'000);
        s.mutable_dataset()->mutable_friedman1()->set_features(10'000);
      },
      "dataset", "--max_dataset_bytes");
  ExpectRejected(
      [](auto& s) {
        s.mutable_parameters(1)->mutable_double_range()->set_log(false);
        s.mutable_parameters(1)->mutable_double_range()->set_min(-1e308);
        s.mutable_parameters(1)->mutable_double_range()->set_max(1e308);
      },
      "parameters[1].double_range", "difference must be finite");
  ExpectRejected([](auto& s) { s.set_name(std::string(100'000, 'a')); }, "name", "(100000 bytes)");
  ExpectRejected(
      [](auto& s) {
        auto& values = *s.mutable_parameters(2)->mutable_categorical()->mutable_values();
        for (int i = 0; i < kMaxChoices; ++i) values.Add(absl::StrCat("v", i));
      },
      "parameters[2].categorical.values", "more than 1000");
  ExpectRejected(
      [](auto& s) { s.mutable_parameters(2)->mutable_categorical()->add_values(std::string(2000, 'x')); },
      "parameters[2].categorical.values", "limit of 1024");
  ExpectRejected(
      [](auto& s) { (*s.mutable_model()->mutable_fixed())["objective"].set_string_value(std::string(5000, 'o')); },
      "model.fixed.objective", "limit of 1024");
  ExpectRejected([](auto& s) { s.mutable_trial_timeout()->set_seconds(0); }, "trial_timeout");
  ExpectRejected([](auto& s) { s.mutable_trial_timeout()->set_seconds(-5); }, "trial_timeout");

  // FUNCTION studies took any number of parameters (1.45 MB per trial at 5,000).
  v1::StudySpec wide = Parse(R"pb(name: "wide" model { kind: FUNCTION function: "rosenbrock" }
                                  max_trials: 10)pb");
  for (int i = 1; i <= 5000; ++i) {
    v1::Parameter& p = *wide.add_parameters();
    p.set_name(absl::StrCat("x", i));
    p.mutable_double_range()->set_min(-2);
    p.mutable_double_range()->set_max(2);
  }
  absl::StatusOr<v1::StudySpec> refused = NormalizeStudySpec(wide);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("--max_parameters"));
  EXPECT_LT(refused.status().message().size(), 200u);

  // An operator may allow more, or less.
  wide.mutable_parameters()->DeleteSubrange(150, 4850);
  EXPECT_FALSE(NormalizeStudySpec(wide).ok());
  EXPECT_TRUE(NormalizeStudySpec(wide, {.max_parameters = 200}).ok());
  EXPECT_FALSE(NormalizeStudySpec(Parse(kValid), {.max_dataset_bytes = 1000}).ok());
}

TEST(SpecLimitsTest, AcceptsATrialTimeout) {
  v1::StudySpec spec = Parse(kValid);
  spec.mutable_trial_timeout()->set_seconds(600);
  EXPECT_TRUE(NormalizeStudySpec(spec).ok());
}

TEST(SpecValidationTest, FunctionsTakeOnlyTheirSecondsAsAFixedValue) {
  v1::StudySpec spec = Parse(R"pb(name: "slow" model { kind: FUNCTION function: "branin" }
    parameters { name: "x1" double_range { min: -5 max: 10 } }
    parameters { name: "x2" double_range { min: 0 max: 15 } } max_trials: 3)pb");
  (*spec.mutable_model()->mutable_fixed())["seconds"].set_number_value(0.25);
  EXPECT_TRUE(NormalizeStudySpec(spec).ok());
  for (double bad : {-1.0, 3601.0, std::nan("")}) {
    (*spec.mutable_model()->mutable_fixed())["seconds"].set_number_value(bad);
    EXPECT_THAT(std::string(NormalizeStudySpec(spec).status().message()),
                HasSubstr("model.fixed.seconds"));
  }
  (*spec.mutable_model()->mutable_fixed())["seconds"].set_string_value("1");
  EXPECT_FALSE(NormalizeStudySpec(spec).ok());
  spec.mutable_model()->mutable_fixed()->clear();
  (*spec.mutable_model()->mutable_fixed())["max_depth"].set_number_value(3);
  EXPECT_THAT(std::string(NormalizeStudySpec(spec).status().message()),
              HasSubstr("one fixed value, seconds"));
}

TEST(SpecValidationTest, EarlyStoppingRulesGetDefaultsAndRangeChecks) {
  const v1::StudySpec base = Parse(R"pb(name: "e" model { kind: XGBOOST }
    dataset { friedman1 { samples: 200 features: 10 } }
    parameters { name: "eta" double_range { min: 0.01 max: 0.3 } } max_trials: 3)pb");
  v1::StudySpec median = base;
  median.mutable_early_stopping()->mutable_median();
  absl::StatusOr<v1::StudySpec> normalized = NormalizeStudySpec(median);
  ASSERT_TRUE(normalized.ok()) << normalized.status();
  EXPECT_EQ(normalized->early_stopping().median().percentile(), 50);
  EXPECT_EQ(normalized->early_stopping().median().n_startup_trials(), 5);
  EXPECT_EQ(normalized->early_stopping().median().interval_steps(), 1);
  // Under TPE and BAYESIAN, their random start-up trials all complete first (10 by default,
  // 12 here); one set in the rule stays as it is.
  v1::StudySpec tpe = median;
  tpe.mutable_algorithm()->set_name(v1::Algorithm::TPE);
  normalized = NormalizeStudySpec(tpe);
  ASSERT_TRUE(normalized.ok()) << normalized.status();
  EXPECT_EQ(normalized->early_stopping().median().n_startup_trials(), 10);
  v1::StudySpec bayesian = median;
  bayesian.mutable_algorithm()->set_name(v1::Algorithm::BAYESIAN);
  bayesian.mutable_algorithm()->mutable_bayesian()->set_n_startup_trials(12);
  bayesian.mutable_early_stopping()->mutable_percentile();
  normalized = NormalizeStudySpec(bayesian);
  ASSERT_TRUE(normalized.ok()) << normalized.status();
  EXPECT_EQ(normalized->early_stopping().percentile().n_startup_trials(), 12);
  tpe.mutable_early_stopping()->mutable_median()->set_n_startup_trials(3);
  normalized = NormalizeStudySpec(tpe);
  ASSERT_TRUE(normalized.ok()) << normalized.status();
  EXPECT_EQ(normalized->early_stopping().median().n_startup_trials(), 3);
  v1::StudySpec asha = base;
  asha.mutable_early_stopping()->mutable_asha();
  normalized = NormalizeStudySpec(asha);
  ASSERT_TRUE(normalized.ok());
  EXPECT_EQ(normalized->early_stopping().asha().reduction_factor(), 4);
  // XGBoost's default 100 rounds: 100 / 27 rounded up to the 10-round report interval.
  EXPECT_EQ(normalized->early_stopping().asha().min_resource(), 10);

  auto rejected = [&](const std::function<void(v1::StudySpec&)>& edit, const std::string& field) {
    v1::StudySpec spec = base;
    edit(spec);
    absl::StatusOr<v1::StudySpec> result = NormalizeStudySpec(spec);
    ASSERT_FALSE(result.ok()) << spec.ShortDebugString();
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(result.status().message()), HasSubstr(field));
  };
  rejected([](auto& s) { s.mutable_early_stopping(); }, "names no rule");
  rejected([](auto& s) { s.mutable_early_stopping()->mutable_median()->set_percentile(25); },
           "early_stopping.median.percentile");
  rejected([](auto& s) { s.mutable_early_stopping()->mutable_percentile()->set_percentile(101); },
           "early_stopping.percentile.percentile");
  rejected([](auto& s) { s.mutable_early_stopping()->mutable_percentile()->set_interval_steps(0); },
           "interval_steps");
  rejected([](auto& s) { s.mutable_early_stopping()->mutable_asha()->set_reduction_factor(1); },
           "reduction_factor");
  rejected([](auto& s) { s.mutable_early_stopping()->mutable_asha()->set_min_resource(0); },
           "min_resource");
  rejected([](auto& s) { s.mutable_early_stopping()->mutable_hyperband()->set_min_resource(0); },
           "early_stopping.hyperband.min_resource");
  rejected([](auto& s) { s.mutable_early_stopping()->mutable_hyperband()->set_max_resource(5); },
           "early_stopping.hyperband.max_resource: must be between min_resource (10)");
  rejected([](auto& s) { s.mutable_early_stopping()->mutable_hyperband()->set_reduction_factor(1); },
           "early_stopping.hyperband.reduction_factor");
}

// `asha: {}` and `hyperband: {}` take their resources from how long each trainer trains.
TEST(SpecValidationTest, EarlyStoppingResourcesAreDerivedFromEachTrainersBudget) {
  struct Case {
    std::string spec;
    int64_t max_resource;
    int64_t min_resource;
  };
  const std::vector<Case> cases = {
      // XGBoost: num_boost_round fixed; 1000 / 27 = 37.04, up to the 10-round interval.
      {R"pb(model { kind: XGBOOST fixed { key: "num_boost_round" value { number_value: 1000 } } }
            dataset { friedman1 { samples: 200 features: 10 } })pb", 1000, 40},
      // ... or searched: the top of its range.
      {R"pb(model { kind: XGBOOST } dataset { friedman1 { samples: 200 features: 10 } }
            parameters { name: "n_estimators" int_range { min: 50 max: 300 } })pb", 300, 20},
      // ... or the trainer's default of 100 rounds.
      {R"pb(model { kind: XGBOOST } dataset { friedman1 { samples: 200 features: 10 } })pb",
       100, 10},
      // Random Forest: trees, reported every 10.
      {R"pb(model { kind: RANDOM_FOREST } dataset { friedman1 { samples: 200 features: 10 } }
            parameters { name: "n_estimators" discrete { values: [ 100, 500 ] } })pb", 500, 20},
      {R"pb(model { kind: RANDOM_FOREST } dataset { friedman1 { samples: 200 features: 10 } })pb",
       100, 10},
      // AutoEncoder: epochs, reported every epoch.
      {R"pb(model { kind: AUTOENCODER fixed { key: "epochs" value { number_value: 100 } } }
            dataset { sensors { samples: 1000 } })pb", 100, 4},
      {R"pb(model { kind: AUTOENCODER } dataset { sensors { samples: 1000 } })pb", 20, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.spec);
    const std::string parameter = absl::StrContains(c.spec, "AUTOENCODER")
        ? R"pb(parameters { name: "learning_rate" double_range { min: 0.001 max: 0.1 } })pb"
        : R"pb(parameters { name: "max_depth" int_range { min: 2 max: 8 } })pb";
    const v1::StudySpec spec =
        Parse(absl::StrCat(R"pb(name: "e" max_trials: 3 )pb", c.spec, parameter));
    v1::StudySpec hyperband = spec;
    hyperband.mutable_early_stopping()->mutable_hyperband();
    absl::StatusOr<v1::StudySpec> normalized = NormalizeStudySpec(hyperband);
    ASSERT_TRUE(normalized.ok()) << normalized.status();
    EXPECT_EQ(normalized->early_stopping().hyperband().max_resource(), c.max_resource);
    EXPECT_EQ(normalized->early_stopping().hyperband().min_resource(), c.min_resource);
    EXPECT_EQ(normalized->early_stopping().hyperband().reduction_factor(), 3);
    v1::StudySpec asha = spec;
    asha.mutable_early_stopping()->mutable_asha();
    normalized = NormalizeStudySpec(asha);
    ASSERT_TRUE(normalized.ok()) << normalized.status();
    EXPECT_EQ(normalized->early_stopping().asha().min_resource(), c.min_resource);
  }
  // Set resources stay as they are; min_resource follows a max_resource that is set.
  v1::StudySpec spec = Parse(R"pb(name: "e" max_trials: 3 model { kind: XGBOOST }
    dataset { friedman1 { samples: 200 features: 10 } }
    parameters { name: "eta" double_range { min: 0.01 max: 0.3 } }
    early_stopping { hyperband { max_resource: 2700 } })pb");
  absl::StatusOr<v1::StudySpec> normalized = NormalizeStudySpec(spec);
  ASSERT_TRUE(normalized.ok()) << normalized.status();
  EXPECT_EQ(normalized->early_stopping().hyperband().min_resource(), 100);
  spec.mutable_early_stopping()->mutable_hyperband()->set_min_resource(7);
  normalized = NormalizeStudySpec(spec);
  ASSERT_TRUE(normalized.ok()) << normalized.status();
  EXPECT_EQ(normalized->early_stopping().hyperband().min_resource(), 7);
}

TEST(SpecValidationTest, EarlyStoppingNeedsTheObjectiveTrialsStream) {
  // XGBoost streams r2: a rule on an mse objective would compare r2 values as if lower were
  // better, and prune the best trials.
  v1::StudySpec spec = Parse(R"pb(name: "e" model { kind: XGBOOST }
    dataset { friedman1 { samples: 200 features: 10 } }
    objective { metric: "mse" goal: MINIMIZE }
    parameters { name: "eta" double_range { min: 0.01 max: 0.3 } } max_trials: 3
    early_stopping { median {} })pb");
  absl::StatusOr<v1::StudySpec> normalized = NormalizeStudySpec(spec);
  ASSERT_FALSE(normalized.ok());
  EXPECT_EQ(normalized.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(normalized.status().message()),
              HasSubstr("early_stopping: XGBOOST trials stream r2 as they train"));
  EXPECT_THAT(std::string(normalized.status().message()), HasSubstr("set objective.metric to r2"));
  spec.mutable_objective()->set_metric("r2");
  spec.mutable_objective()->set_goal(v1::Objective::MAXIMIZE);
  EXPECT_TRUE(NormalizeStudySpec(spec).ok());
  // Benchmark functions are evaluated at once: there is nothing to judge.
  v1::StudySpec function = Parse(R"pb(name: "f" model { kind: FUNCTION function: "branin" }
    parameters { name: "x1" double_range { min: -5 max: 10 } }
    parameters { name: "x2" double_range { min: 0 max: 15 } } max_trials: 3
    early_stopping { median {} })pb");
  normalized = NormalizeStudySpec(function);
  ASSERT_FALSE(normalized.ok());
  EXPECT_THAT(std::string(normalized.status().message()),
              HasSubstr("early_stopping: FUNCTION trials stream no progress to judge"));
}

}  // namespace
}  // namespace dhpt::study

namespace dhpt::study {
namespace {

// What the hostile review of issue 26 found accepted: each is refused, naming its field.
TEST(SpecValidationTest, RefusesWhatAHostileSpecSlippedPast) {
  ExpectRejected([](v1::StudySpec& s) { s.mutable_objective()->set_goal(static_cast<v1::Objective::Goal>(99)); },
                 "objective.goal", "99 is no value of Goal; one of GOAL_UNSPECIFIED, MINIMIZE, MAXIMIZE");
  ExpectRejected([](v1::StudySpec& s) { s.mutable_model()->set_kind(static_cast<v1::Model::Kind>(42)); },
                 "model.kind", "42 is no value of Kind");
  ExpectRejected([](v1::StudySpec& s) { s.add_objectives()->set_goal(static_cast<v1::Objective::Goal>(7)); },
                 "objectives[0].goal", "7 is no value of Goal");
  ExpectRejected([](v1::StudySpec& s) {
    s.mutable_trial_timeout()->set_seconds(10);
    s.mutable_trial_timeout()->set_nanos(1'500'000'000);
  }, "trial_timeout");
  ExpectRejected([](v1::StudySpec& s) {
    s.mutable_parameters(2)->mutable_categorical()->add_values("\x1b[2J\x1b[Hwiped");
  }, "parameters[2]", "control or invisible character");
  ExpectRejected([](v1::StudySpec& s) {
    s.mutable_parameters(2)->mutable_categorical()->add_values("two\nlines");
  }, "parameters[2]", "at byte 3");
  ExpectRejected([](v1::StudySpec& s) {
    s.mutable_parameters(2)->mutable_categorical()->add_values("c1 \xc2\x9b" "31m");  // CSI
  }, "parameters[2]", "control or invisible character");
  ExpectRejected([](v1::StudySpec& s) {  // U+202E: what follows reads right to left.
    s.mutable_parameters(2)->mutable_categorical()->add_values("gbtree\xe2\x80\xaetrad");
  }, "parameters[2]", "direction override");
  ExpectRejected([](v1::StudySpec& s) {  // U+200B, a zero-width space: two values alike.
    s.mutable_parameters(2)->mutable_categorical()->add_values("gb\xe2\x80\x8btree");
  }, "parameters[2]", "invisible");
  ExpectRejected([](v1::StudySpec& s) {
    (*s.mutable_model()->mutable_fixed())["objective"].set_string_value("reg:\rsquarederror");
  }, "model.fixed.objective", "control or invisible character");
}

TEST(SpecValidationTest, AControlCharacterIsNeverQuotedBack) {
  v1::StudySpec spec = Parse(kValid);
  spec.mutable_parameters(2)->mutable_categorical()->add_values("\x1b]0;owned\x07");
  const absl::Status status = NormalizeStudySpec(spec).status();
  ASSERT_FALSE(status.ok());
  for (char c : status.message()) EXPECT_GE(static_cast<unsigned char>(c), 0x20) << status;
}

const char kCommand[] = R"pb(
  name: "cmd"
  model { kind: COMMAND command: "train" }
  objective { metric: "loss" goal: MINIMIZE }
  parameters { name: "lr" double_range { min: 0.001 max: 0.1 } }
  max_trials: 5
)pb";

TEST(SpecValidationTest, ACommandFixedValueMustBeFinite) {
  v1::StudySpec spec = Parse(kCommand);
  (*spec.mutable_model()->mutable_fixed())["epochs"].set_number_value(
      std::numeric_limits<double>::quiet_NaN());
  const absl::Status status = NormalizeStudySpec(spec).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("model.fixed.epochs: must be a finite"));
}

// A COMMAND trial's parameters travel as one JSON object in DHPT_PARAMS: the spec is refused
// when its longest trial could not start (Linux's 128 KiB per variable), and accepted just under.
TEST(SpecValidationTest, ACommandSpecWhoseParamsCannotFitOneVariableIsRefused) {
  auto with_values = [](int parameters, const std::string& value) {
    v1::StudySpec spec = Parse(kCommand);
    for (int i = 0; i < parameters; ++i) {
      v1::Parameter& p = *spec.add_parameters();
      p.set_name(absl::StrCat("p", i));
      p.mutable_categorical()->add_values("short");
      p.mutable_categorical()->add_values(value);
    }
    return spec;
  };
  // 1000 bytes of quotes escape to 2000 in JSON: 70 of them pass 128 KiB, 60 do not.
  const std::string quotes(1000, '"');
  absl::Status too_long = NormalizeStudySpec(with_values(70, quotes)).status();
  EXPECT_EQ(too_long.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_long.message()), HasSubstr("DHPT_PARAMS"));
  EXPECT_TRUE(NormalizeStudySpec(with_values(60, quotes)).ok());
  // The same values are no concern for a model the worker runs itself.
  v1::StudySpec external = with_values(70, quotes);
  external.mutable_model()->set_kind(v1::Model::EXTERNAL);
  external.mutable_model()->clear_command();
  EXPECT_TRUE(NormalizeStudySpec(external).ok()) << NormalizeStudySpec(external).status();
}

}  // namespace
}  // namespace dhpt::study
