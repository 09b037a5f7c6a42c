// Conditional search spaces in the spec (issue 33): validation names the field of every error,
// and translation leaves inactive parameters out of a trial, in both directions.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "google/protobuf/text_format.h"
#include "services/study/model_choice.h"
#include "services/study/spec_translation.h"
#include "services/study/spec_validation.h"

namespace dhpt::study::conditional_test {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// booster in {gbtree, dart}; rate_drop only for dart; a chain booster -> max_depth (int) ->
// max_leaves; dart with max_depth 8 forbidden.
const char kConditional[] = R"pb(
  name: "xgb-conditional"
  model { kind: XGBOOST }
  dataset { friedman1 { samples: 500 features: 10 noise: 1 seed: 0 } }
  objective { metric: "r2" goal: MAXIMIZE }
  algorithm { name: TPE seed: 1 }
  parameters { name: "booster" categorical { values: "gbtree" values: "dart" } }
  parameters {
    name: "rate_drop" double_range { min: 0 max: 0.5 }
    condition { parent: "booster" values { string_value: "dart" } }
  }
  parameters {
    name: "max_depth" int_range { min: 2 max: 8 }
    condition { parent: "booster" values { string_value: "gbtree" } values { string_value: "dart" } }
  }
  parameters {
    name: "max_leaves" int_range { min: 4 max: 64 }
    condition { parent: "max_depth" values { number_value: 7 } values { number_value: 8 } }
  }
  parameters { name: "eta" double_range { min: 0.001 max: 0.3 log: true } }
  forbidden {
    all { parameter: "booster" values { string_value: "dart" } }
    all { parameter: "max_depth" values { number_value: 8 } }
  }
  max_trials: 20
)pb";

v1::StudySpec Parse(const std::string& text) {
  v1::StudySpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &spec)) << text;
  return spec;
}

// The messages of every error of the conditional spec after `edit`.
std::vector<std::string> Errors(const std::function<void(v1::StudySpec&)>& edit) {
  v1::StudySpec spec = Parse(kConditional);
  edit(spec);
  std::vector<std::string> messages;
  for (const absl::Status& status : StudySpecErrors(spec)) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    messages.emplace_back(status.message());
  }
  return messages;
}

TEST(ConditionalSpecTest, AValidConditionalSpecIsAccepted) {
  EXPECT_THAT(Errors([](v1::StudySpec&) {}), IsEmpty());
}

TEST(ConditionalSpecTest, AnUnknownParentIsNamed) {
  EXPECT_THAT(Errors([](v1::StudySpec& s) {
                s.mutable_parameters(1)->mutable_condition()->set_parent("boster");
              }),
              ElementsAre(HasSubstr("parameters[1].condition.parent: \"boster\" is not a parameter")));
}

TEST(ConditionalSpecTest, AFloatParentIsRefused) {
  EXPECT_THAT(Errors([](v1::StudySpec& s) {
                s.mutable_parameters(3)->mutable_condition()->set_parent("eta");
              }),
              ElementsAre(HasSubstr("parameters[3].condition.parent: \"eta\" is a double_range")));
}

TEST(ConditionalSpecTest, ValuesTheParentCannotTakeAreNamedOneByOne) {
  EXPECT_THAT(Errors([](v1::StudySpec& s) {
                auto* values = s.mutable_parameters(3)->mutable_condition()->mutable_values();
                values->Mutable(0)->set_number_value(9);    // Outside [2, 8].
                values->Mutable(1)->set_string_value("8");  // A string for an int parent.
              }),
              ElementsAre(HasSubstr("parameters[3].condition.values[0]: is not a value of"),
                          HasSubstr("parameters[3].condition.values[1]: is not a value of")));
  EXPECT_THAT(Errors([](v1::StudySpec& s) {
                s.mutable_parameters(1)->mutable_condition()->clear_values();
              }),
              ElementsAre(HasSubstr("parameters[1].condition.values: must not be empty")));
}

TEST(ConditionalSpecTest, CyclesAreRefused) {
  // booster now depends on max_leaves: booster -> max_leaves -> max_depth -> booster.
  EXPECT_THAT(Errors([](v1::StudySpec& s) {
                v1::ParameterCondition* c = s.mutable_parameters(0)->mutable_condition();
                c->set_parent("max_leaves");
                c->add_values()->set_number_value(4);
              }),
              Contains(HasSubstr("parameters[0].condition: forms a cycle (booster -> max_leaves "
                                 "-> max_depth -> booster)")));
  EXPECT_THAT(Errors([](v1::StudySpec& s) {
                s.mutable_parameters(3)->mutable_condition()->set_parent("max_leaves");
              }),
              ElementsAre(HasSubstr("parameters[3].condition.parent: names the parameter itself")));
}

TEST(ConditionalSpecTest, ForbiddenClausesAreChecked) {
  EXPECT_THAT(Errors([](v1::StudySpec& s) {
                s.mutable_forbidden(0)->mutable_all(1)->set_parameter("depth");
              }),
              ElementsAre(HasSubstr("forbidden[0].all[1].parameter: \"depth\" is not a parameter")));
  EXPECT_THAT(Errors([](v1::StudySpec& s) {
                s.mutable_forbidden(0)->mutable_all(1)->set_parameter("eta");
              }),
              ElementsAre(HasSubstr("forbidden[0].all[1].parameter: \"eta\" is a double_range")));
  EXPECT_THAT(Errors([](v1::StudySpec& s) {
                s.mutable_forbidden(0)->mutable_all(0)->mutable_values(0)->set_string_value("gblinear");
              }),
              ElementsAre(HasSubstr("forbidden[0].all[0].values[0]: is not a value of \"booster\"")));
  EXPECT_THAT(Errors([](v1::StudySpec& s) { s.add_forbidden(); }),
              ElementsAre(HasSubstr("forbidden[1].all: must list at least one parameter")));
}

TEST(ConditionalSpecTest, ClausesThatForbidEverythingAreRefused) {
  EXPECT_THAT(Errors([](v1::StudySpec& s) {
                s.mutable_parameters(4)->mutable_discrete()->add_values(0.1);  // Countable now.
                s.mutable_parameters()->DeleteSubrange(1, 1);  // rate_drop, a continuous range.
                v1::ParameterIn* all = s.add_forbidden()->add_all();
                all->set_parameter("booster");
                all->add_values()->set_string_value("gbtree");
                all->add_values()->set_string_value("dart");
              }),
              Contains(HasSubstr("forbidden: forbids every point")));
  // With continuous ranges left in (the clauses read none of them): refused too. It was
  // accepted, and every algorithm then failed saying it drew only tried points (hostile review).
  EXPECT_THAT(Errors([](v1::StudySpec& s) {
                v1::ParameterIn* all = s.add_forbidden()->add_all();
                all->set_parameter("booster");
                all->add_values()->set_string_value("gbtree");
                all->add_values()->set_string_value("dart");
              }),
              Contains(HasSubstr("forbidden: forbids every point")));
}

TEST(ConditionalSpecTest, GridCountsEachBranch) {
  v1::StudySpec spec = Parse(kConditional);
  spec.mutable_algorithm()->set_name(v1::Algorithm::GRID);
  spec.mutable_algorithm()->set_grid_points(3);
  spec.clear_max_trials();
  absl::StatusOr<v1::StudySpec> normal = NormalizeStudySpec(spec);
  ASSERT_TRUE(normal.ok()) << normal.status();
  // eta: 3 values everywhere. gbtree: max_depth 2..8 has 7 values, more than 3, so 2, 5, 8;
  // depth 8 brings max_leaves (3 values): 2 + 3 = 5. dart: rate_drop 3 x (2, 5, and 8 with its
  // leaves, forbidden) = 3 x 2. (5 + 6) x 3 = 33.
  EXPECT_EQ(normal->max_trials(), 33);
}

TEST(ConditionalSpecTest, InactiveParametersAreAbsentFromATrial) {
  const optimizer::SearchSpace space = ToSearchSpace(Parse(kConditional));
  ASSERT_TRUE(space.conditional());
  const optimizer::Point point = {std::string("gbtree"), optimizer::Inactive{}, int64_t{3},
                                  optimizer::Inactive{}, 0.01};
  const ParamMap params = ToParamMap(space, point);
  EXPECT_EQ(params.size(), 3u);
  EXPECT_FALSE(params.contains("rate_drop"));
  EXPECT_FALSE(params.contains("max_leaves"));
  absl::StatusOr<optimizer::Point> back = ToPoint(space, params);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, point);
  // A stored value for an inactive parameter is not silently kept.
  ParamMap extra = params;
  extra["rate_drop"].set_double_value(0.1);
  EXPECT_FALSE(ToPoint(space, extra).ok());
}

TEST(ConditionalSpecTest, AUserPointNamesExactlyTheActiveParameters) {
  const optimizer::SearchSpace space = ToSearchSpace(Parse(kConditional));
  google::protobuf::Map<std::string, google::protobuf::Value> values;
  values["booster"].set_string_value("dart");
  values["rate_drop"].set_number_value(0.2);
  values["max_depth"].set_number_value(3);
  values["eta"].set_number_value(0.01);
  absl::StatusOr<optimizer::Point> point = PointFromValues(space, values, "trials[0]");
  ASSERT_TRUE(point.ok()) << point.status();
  EXPECT_TRUE(std::holds_alternative<optimizer::Inactive>((*point)[3]));

  auto with = values;
  with["max_leaves"].set_number_value(8);  // max_depth 3 does not switch it on.
  EXPECT_THAT(std::string(PointFromValues(space, with, "trials[0]").status().message()),
              HasSubstr("trials[0].max_leaves: is inactive"));
  auto without = values;
  without.erase("rate_drop");
  EXPECT_THAT(std::string(PointFromValues(space, without, "trials[0]").status().message()),
              HasSubstr("trials[0].rate_drop: is missing"));
  auto forbidden = values;
  forbidden["max_depth"].set_number_value(8);
  forbidden["max_leaves"].set_number_value(8);
  EXPECT_THAT(std::string(PointFromValues(space, forbidden, "trials[0]").status().message()),
              HasSubstr("trials[0]: is a forbidden combination"));
}

// Model choice: XGBoost or Random Forest, each with its own parameters.
const char kModelChoice[] = R"pb(
  name: "model-choice"
  model { kind: XGBOOST }
  dataset { friedman1 { samples: 500 features: 10 noise: 1 seed: 0 } }
  algorithm { name: TPE seed: 1 }
  parameters { name: "model_kind" categorical { values: "XGBOOST" values: "RANDOM_FOREST" } }
  parameters {
    name: "eta" double_range { min: 0.01 max: 0.3 log: true }
    condition { parent: "model_kind" values { string_value: "XGBOOST" } }
  }
  parameters {
    name: "num_parallel_tree" int_range { min: 10 max: 100 }
    condition { parent: "model_kind" values { string_value: "RANDOM_FOREST" } }
  }
  parameters { name: "max_depth" int_range { min: 2 max: 8 } }
  max_trials: 20
)pb";

std::vector<std::string> ModelChoiceErrors(const std::function<void(v1::StudySpec&)>& edit) {
  v1::StudySpec spec = Parse(kModelChoice);
  edit(spec);
  std::vector<std::string> messages;
  for (const absl::Status& status : StudySpecErrors(spec)) messages.emplace_back(status.message());
  return messages;
}

TEST(ConditionalSpecTest, AModelChoiceStudyIsValidatedPerKind) {
  EXPECT_THAT(ModelChoiceErrors([](v1::StudySpec&) {}), IsEmpty());
  // eta is XGBoost's: without its condition it could be active for a Random Forest.
  EXPECT_THAT(ModelChoiceErrors([](v1::StudySpec& s) { s.mutable_parameters(1)->clear_condition(); }),
              ElementsAre(HasSubstr("parameters[1].name: \"eta\" is not a hyperparameter of "
                                    "RANDOM_FOREST, for which it can be active")));
  EXPECT_THAT(ModelChoiceErrors([](v1::StudySpec& s) {
                s.mutable_parameters(0)->mutable_categorical()->set_values(1, "AUTOENCODER");
              }),
              Contains(HasSubstr("parameters[0].categorical.values[1]: \"AUTOENCODER\" cannot "
                                 "be in a model choice: its r2 measures how well it reconstructs "
                                 "the features")));
  EXPECT_THAT(ModelChoiceErrors([](v1::StudySpec& s) {
                s.mutable_parameters(0)->mutable_categorical()->set_values(1, "FUNCTION");
              }),
              Contains(HasSubstr("parameters[0].categorical.values[1]: \"FUNCTION\" is not a "
                                 "model kind a study can choose")));
  EXPECT_THAT(ModelChoiceErrors([](v1::StudySpec& s) {
                s.mutable_model()->set_kind(v1::Model::FUNCTION);
                s.mutable_model()->set_function("branin");
              }),
              Not(IsEmpty()));
  EXPECT_THAT(ModelChoiceErrors([](v1::StudySpec& s) {
                (*s.mutable_model()->mutable_fixed())["eta"].set_number_value(0.1);
                s.mutable_parameters()->DeleteSubrange(1, 1);
              }),
              ElementsAre(HasSubstr("model.fixed.eta: is not a hyperparameter of RANDOM_FOREST")));
}

// Each branch's ranges are the ones its own trainer accepts, whichever kind model.kind names:
// a range only the other kind's trainer would see is refused at CreateStudy, not in every trial.
TEST(ConditionalSpecTest, AModelChoiceBranchRangeIsCheckedAgainstItsOwnKind) {
  // num_parallel_tree is the Random Forest's tree count (at least 1); model.kind is XGBOOST.
  EXPECT_THAT(ModelChoiceErrors([](v1::StudySpec& s) {
                s.mutable_parameters(2)->mutable_int_range()->set_min(0);
              }),
              ElementsAre(HasSubstr("parameters[2].int_range: num_parallel_tree must be a whole "
                                    "number in [1, 100000], got 0 (RANDOM_FOREST)")));
  // eta is XGBoost's alone; model.kind is RANDOM_FOREST.
  EXPECT_THAT(ModelChoiceErrors([](v1::StudySpec& s) {
                s.mutable_model()->set_kind(v1::Model::RANDOM_FOREST);
                s.mutable_parameters(1)->mutable_double_range()->set_min(-0.1);
                s.mutable_parameters(1)->mutable_double_range()->set_log(false);
              }),
              ElementsAre(HasSubstr("parameters[1].double_range: eta must be in [0, inf), got "
                                    "-0.1 (XGBOOST)")));
  // A parameter of both kinds is reported once.
  EXPECT_THAT(ModelChoiceErrors([](v1::StudySpec& s) {
                s.mutable_parameters(3)->mutable_int_range()->set_min(-1);
              }),
              ElementsAre(HasSubstr("parameters[3].int_range: max_depth must be a whole number "
                                    "in [0, inf), got -1 (XGBOOST)")));
}

TEST(ConditionalSpecTest, AModelChoiceTrialRunsAsItsKindWithoutTheChoiceAmongItsParameters) {
  const v1::StudySpec spec = Parse(kModelChoice);
  ParamMap params;
  params["model_kind"].set_string_value("RANDOM_FOREST");
  params["num_parallel_tree"].set_int_value(20);
  params["max_depth"].set_int_value(4);
  v1::Model model;
  ParamMap sent;
  ModelForTrial(spec, params, &model, &sent);
  EXPECT_EQ(model.kind(), v1::Model::RANDOM_FOREST);
  EXPECT_EQ(sent.size(), 2u);
  EXPECT_FALSE(sent.contains("model_kind"));
}

}  // namespace
}  // namespace dhpt::study::conditional_test
