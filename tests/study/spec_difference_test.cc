#include "services/study/spec_difference.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "google/protobuf/text_format.h"

namespace dhpt::study {
namespace {

v1::StudySpec Spec(const char* text) {
  v1::StudySpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &spec)) << text;
  return spec;
}

constexpr char kStudy[] = R"pb(
  name: "s" max_trials: 20 model { kind: EXTERNAL }
  objective { metric: "value" goal: MINIMIZE }
  parameters { name: "x" double_range { min: 0 max: 1 } })pb";

TEST(SpecDifferenceTest, EqualSpecsHaveNone) {
  const SpecDifference difference = DifferenceOf(Spec(kStudy), Spec(kStudy));
  EXPECT_EQ(difference.text, "");
  EXPECT_TRUE(difference.fields.empty());
}

// The case a user meets most (the study was extended since the file was written): both
// values, named, where "a different spec" alone sent them looking.
TEST(SpecDifferenceTest, EachDifferingFieldIsNamedInTheSpecsOrderWithItsValues) {
  v1::StudySpec given = Spec(kStudy);
  given.set_max_trials(10);
  given.mutable_parameters(0)->mutable_double_range()->set_max(2);
  given.mutable_objective()->set_goal(v1::Objective::MAXIMIZE);
  given.set_max_failed_trials(0);
  given.add_parameters()->set_name("y");
  const SpecDifference difference = DifferenceOf(Spec(kStudy), given);
  EXPECT_EQ(difference.text,
            "objective differs; parameters differ: \"x\" changed, \"y\" only here; max_trials "
            "is 20 there and 10 here; max_failed_trials is unset there and 0 here");
  EXPECT_THAT(difference.fields,
              ::testing::ElementsAre("objective", "parameters", "max_trials", "max_failed_trials"));
}

}  // namespace
}  // namespace dhpt::study
