// Every error of a spec at once (dhpt validate), the model catalogue's hyperparameter ranges,
// and what a spec may leave implicit: a range of one value, a known metric's goal.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "google/protobuf/text_format.h"
#include "services/common/model_catalog.h"
#include "services/study/spec_errors.h"
#include "services/study/spec_validation.h"

namespace dhpt::study::spec_errors_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

v1::StudySpec Parse(const std::string& text) {
  v1::StudySpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &spec)) << text;
  return spec;
}

std::vector<std::string> Messages(v1::StudySpec spec) {
  std::vector<std::string> messages;
  for (const absl::Status& error : StudySpecErrors(spec)) {
    EXPECT_EQ(error.code(), absl::StatusCode::kInvalidArgument);
    messages.emplace_back(error.message());
  }
  return messages;
}

const char kXgboost[] = R"pb(
  name: "xgb"
  model { kind: XGBOOST }
  dataset { friedman1 { samples: 500 features: 10 } }
  parameters { name: "max_depth" int_range { min: 2 max: 10 } }
  parameters { name: "colsample_bynode" double_range { min: 0.5 max: 1 } }
  max_trials: 20
)pb";

TEST(SpecErrorsTest, ListsEveryErrorOfASpecAtOnce) {
  v1::StudySpec spec = Parse(kXgboost);
  EXPECT_THAT(Messages(spec), IsEmpty());
  spec.set_name("bad name!");
  spec.mutable_parameters(0)->mutable_int_range()->set_min(20);
  spec.mutable_parameters(1)->mutable_double_range()->set_max(1.5);
  spec.add_parameters()->set_name("dropout");
  spec.mutable_objective()->set_metric("accuracy");
  spec.set_max_trials(0);
  spec.set_parallel_trials(-1);
  const std::vector<std::string> messages = Messages(spec);
  ASSERT_EQ(messages.size(), 7u) << ::testing::PrintToString(messages);
  EXPECT_THAT(messages[0], HasSubstr("name: \"bad name!\""));
  EXPECT_THAT(messages[1], HasSubstr("parameters[0].int_range: min (20) must be less than max"));
  EXPECT_THAT(messages[2], HasSubstr("parameters[2].name: \"dropout\" is not a hyperparameter"));
  EXPECT_THAT(messages[3], HasSubstr("objective.metric: \"accuracy\" is not reported"));
  EXPECT_THAT(messages[4], HasSubstr("max_trials: must be between 1"));
  EXPECT_THAT(messages[5], HasSubstr("parallel_trials: must be >= 0"));
  EXPECT_THAT(messages[6], HasSubstr("parameters[1].double_range: colsample_bynode must be in "
                                     "(0, 1], got 1.5"));
  // The scheduler refuses the same spec with the first of them.
  absl::StatusOr<v1::StudySpec> normal = NormalizeStudySpec(spec);
  ASSERT_FALSE(normal.ok());
  EXPECT_EQ(normal.status().message(), messages[0]);
}

TEST(SpecErrorsTest, NoErrorIsTheEchoOfAnother) {
  // Without a model kind, its parameters and metric cannot be judged: one error, not four.
  v1::StudySpec spec = Parse(kXgboost);
  spec.mutable_model()->clear_kind();
  EXPECT_THAT(Messages(spec), ElementsAre(HasSubstr("model.kind: is required")));
  // A GRID of bad ranges has no size, so its max_trials is not blamed as well.
  spec = Parse(kXgboost);
  spec.mutable_algorithm()->set_name(v1::Algorithm::GRID);
  spec.clear_max_trials();
  spec.mutable_parameters(0)->mutable_int_range()->set_min(20);
  EXPECT_THAT(Messages(spec), ElementsAre(HasSubstr("parameters[0].int_range")));
}

TEST(SpecErrorsTest, ModelRangesComeFromTheCatalogue) {
  auto error_of = [](const std::string& text) {
    std::vector<std::string> messages = Messages(Parse(text));
    return messages.empty() ? std::string("accepted") : messages.front();
  };
  const std::string xgboost = R"pb(name: "x" model { kind: XGBOOST }
    dataset { friedman1 { samples: 500 features: 10 } } max_trials: 5 )pb";
  EXPECT_EQ(error_of(xgboost + R"pb(parameters { name: "colsample_bynode"
                                    double_range { min: 0.5 max: 1.5 } })pb"),
            "parameters[0].double_range: colsample_bynode must be in (0, 1], got 1.5");
  EXPECT_EQ(error_of(xgboost + R"pb(parameters { name: "subsample" discrete { values: [0, 0.5] } })pb"),
            "parameters[0].discrete.values: subsample must be in (0, 1], got 0");
  EXPECT_EQ(error_of(xgboost + R"pb(parameters { name: "max_depth" double_range { min: 2 max: 8 } })pb"),
            "parameters[0].double_range: max_depth takes whole numbers in [0, inf): use int_range");
  EXPECT_EQ(error_of(R"pb(name: "x" dataset { friedman1 { samples: 500 features: 10 } }
                          max_trials: 5
                          parameters { name: "eta" double_range { min: 0.01 max: 0.3 } }
                          model { kind: XGBOOST
                                  fixed { key: "max_bin" value { number_value: 1 } } })pb"),
            "model.fixed.max_bin: max_bin must be a whole number in [2, inf), got 1");
  EXPECT_EQ(error_of(xgboost + R"pb(parameters { name: "n_estimators" int_range { min: 0 max: 50 } })pb"),
            "parameters[0].int_range: n_estimators must be a whole number in [1, 100000], got 0");

  // An AutoEncoder's bottleneck below the data's channels, as the trainer requires.
  const std::string autoencoder = R"pb(name: "a" model { kind: AUTOENCODER }
    dataset { sensors { samples: 500 channels: 16 } } max_trials: 5 )pb";
  EXPECT_EQ(error_of(autoencoder + R"pb(parameters { name: "bottleneck" int_range { min: 2 max: 16 } })pb"),
            "parameters[0].int_range: bottleneck 16 must be smaller than the data's 16 channels "
            "(feature columns), or nothing is compressed");
  EXPECT_EQ(error_of(autoencoder + R"pb(parameters { name: "bottleneck" int_range { min: 2 max: 15 } })pb"),
            "accepted");
  EXPECT_EQ(error_of(autoencoder + R"pb(parameters { name: "dropout" double_range { min: 0 max: 1 } })pb"),
            "parameters[0].double_range: dropout must be in [0, 1), got 1");
  EXPECT_EQ(error_of(autoencoder + R"pb(parameters { name: "activation"
                                        categorical { values: [ "relu", "sigmoidish" ] } })pb"),
            "parameters[0].categorical.values: \"sigmoidish\" is not one of activation's values: "
            "relu, leaky_relu, elu, gelu, silu, tanh");
}

TEST(SpecErrorsTest, ARangeOfOneValueIsThatFixedValue) {
  absl::StatusOr<v1::StudySpec> spec = NormalizeStudySpec(Parse(R"pb(
    name: "x" model { kind: XGBOOST } dataset { friedman1 { samples: 500 features: 10 } }
    parameters { name: "max_depth" int_range { min: 4 max: 4 } }
    parameters { name: "eta" double_range { min: 0.1 max: 0.1 log: true } }
    parameters { name: "subsample" double_range { min: 0.5 max: 1 } }
    max_trials: 5)pb"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(spec->parameters(0).has_discrete());
  EXPECT_THAT(spec->parameters(0).discrete().values(), ElementsAre(4));
  ASSERT_TRUE(spec->parameters(1).has_discrete());
  EXPECT_THAT(spec->parameters(1).discrete().values(), ElementsAre(0.1));
  EXPECT_TRUE(spec->parameters(2).has_double_range());
  // Still checked against the model's range.
  EXPECT_THAT(Messages(Parse(R"pb(
    name: "x" model { kind: XGBOOST } dataset { friedman1 { samples: 500 features: 10 } }
    parameters { name: "subsample" double_range { min: 2 max: 2 } } max_trials: 5)pb")),
              ElementsAre("parameters[0].discrete.values: subsample must be in (0, 1], got 2"));
}

TEST(SpecErrorsTest, AKnownMetricsGoalIsImplied) {
  auto goal_of = [](const std::string& objective) {
    absl::StatusOr<v1::StudySpec> spec = NormalizeStudySpec(Parse(R"pb(
      name: "x" model { kind: XGBOOST } dataset { friedman1 { samples: 500 features: 10 } }
      parameters { name: "max_depth" int_range { min: 2 max: 4 } } max_trials: 5 )pb" + objective));
    EXPECT_TRUE(spec.ok()) << spec.status();
    return spec.ok() ? spec->objective().goal() : v1::Objective::GOAL_UNSPECIFIED;
  };
  EXPECT_EQ(goal_of(R"pb(objective { metric: "mse" })pb"), v1::Objective::MINIMIZE);
  EXPECT_EQ(goal_of(R"pb(objective { metric: "r2" })pb"), v1::Objective::MAXIMIZE);
  EXPECT_EQ(goal_of(R"pb(objective { metric: "mse" goal: MAXIMIZE })pb"), v1::Objective::MAXIMIZE);
  EXPECT_EQ(goal_of(R"pb(objectives { metric: "r2" } objectives { metric: "model_bytes" })pb"),
            v1::Objective::MAXIMIZE);
  EXPECT_EQ(ImpliedGoal("loss"), v1::Objective::MINIMIZE);
  EXPECT_EQ(ImpliedGoal("value"), v1::Objective::MINIMIZE);
  // A metric of the user's own may go either way: it must say.
  EXPECT_THAT(Messages(Parse(R"pb(name: "c" model { kind: COMMAND command: "train" }
                                  objective { metric: "accuracy" }
                                  parameters { name: "lr" double_range { min: 0.1 max: 1 } }
                                  max_trials: 5)pb")),
              ElementsAre(HasSubstr("objective.goal: is required for \"accuracy\"")));
}

}  // namespace
}  // namespace dhpt::study::spec_errors_test

namespace dhpt::study::spec_errors_test {
namespace {

// A name is quoted back with its control bytes written out: through grpcurl or the Python
// client the message reaches a terminal whole, where "\x1b]0;...\x07" retitled the window
// (hostile review). Text is cut at 64 bytes, never inside a character.
TEST(QuoteTest, ControlBytesAreWrittenOutAndLongTextIsCut) {
  EXPECT_EQ(Quote("p\x1b]0;PWNED\x07"), "\"p\\x1b]0;PWNED\\x07\"");
  EXPECT_EQ(Quote("plain"), "\"plain\"");
  const std::string long_text = std::string(63, 'a') + "\xc3\xa9" + "tail";
  EXPECT_EQ(Quote(long_text), "\"" + std::string(63, 'a') + "...\" (69 bytes)");
  std::vector<std::string> messages;
  v1::StudySpec spec = Parse(kXgboost);
  spec.set_name("s\x1b[2J");
  for (const absl::Status& error : StudySpecErrors(spec)) messages.emplace_back(error.message());
  EXPECT_THAT(messages, ElementsAre(HasSubstr("\"s\\x1b[2J\"")));
}

}  // namespace
}  // namespace dhpt::study::spec_errors_test
