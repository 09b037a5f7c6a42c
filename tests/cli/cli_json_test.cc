#include "services/cli/cli_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dhpt/v1/study_service.pb.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "services/cli/study_file.h"

namespace dhpt::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Parses JSON text the way a script would (Struct takes any JSON object).
google::protobuf::Struct Parse(const std::string& json) {
  google::protobuf::Struct parsed;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &parsed);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << json;
  return parsed;
}

const google::protobuf::Value& Field(const google::protobuf::Struct& s, const std::string& name) {
  static const auto* const kMissing = new google::protobuf::Value();
  auto it = s.fields().find(name);
  EXPECT_NE(it, s.fields().end()) << "no field " << name;
  return it == s.fields().end() ? *kMissing : it->second;
}

v1::ListTrialsResponse Trials() {
  v1::ListTrialsResponse response;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    trials {
      id: 9007199254740993 study: "s" number: 0 state: FAILED
      params { key: "max_depth" value { int_value: 6 } }
      params { key: "eta" value { double_value: 0.25 } }
      params { key: "booster" value { string_value: "gb\"tree" } }
      error: "exit status 1:\nTraceback"
      create_time { seconds: 1700000000 }
    }
    trials { id: 2 number: 1 state: COMPLETED objective_value: 0 metrics { key: "r2" value: 0 } }
  )pb", &response));
  return response;
}

// The proto3 mapping left out trial 0's number and every zero, quoted 64-bit integers and
// wrapped each parameter: scripts had to know protobuf to read it.
TEST(CliJsonTest, EveryFieldPlainValuesAndNumbers) {
  const std::string json = CliJson(Trials());
  const google::protobuf::Struct parsed = Parse(json);
  const auto& trials = Field(parsed, "trials").list_value();
  ASSERT_EQ(trials.values_size(), 2);
  const google::protobuf::Struct& first = trials.values(0).struct_value();
  EXPECT_EQ(Field(first, "number").kind_case(), google::protobuf::Value::kNumberValue);
  EXPECT_EQ(Field(first, "number").number_value(), 0);
  EXPECT_EQ(Field(first, "attempt").number_value(), 0);
  EXPECT_EQ(Field(first, "infeasible").kind_case(), google::protobuf::Value::kBoolValue);
  EXPECT_EQ(Field(first, "worker_id").kind_case(), google::protobuf::Value::kStringValue);
  EXPECT_EQ(Field(first, "state").string_value(), "FAILED");
  EXPECT_EQ(Field(first, "error").string_value(), "exit status 1:\nTraceback");
  EXPECT_EQ(Field(first, "attempts").list_value().values_size(), 0);
  // Unset optional fields and messages are null rather than missing.
  EXPECT_EQ(Field(first, "objective_value").kind_case(), google::protobuf::Value::kNullValue);
  EXPECT_EQ(Field(first, "start_time").kind_case(), google::protobuf::Value::kNullValue);
  EXPECT_EQ(Field(first, "create_time").string_value(), "2023-11-14T22:13:20Z");
  // A 64-bit id is a number, digit for digit (2^53 + 1 does not fit a double: check the text).
  EXPECT_THAT(json, HasSubstr("\"id\": 9007199254740993,"));
  const google::protobuf::Struct& params = Field(first, "params").struct_value();
  EXPECT_EQ(Field(params, "max_depth").number_value(), 6);
  EXPECT_EQ(Field(params, "eta").number_value(), 0.25);
  EXPECT_EQ(Field(params, "booster").string_value(), "gb\"tree");
  const google::protobuf::Struct& second = trials.values(1).struct_value();
  EXPECT_EQ(Field(second, "number").number_value(), 1);
  EXPECT_EQ(Field(second, "objective_value").kind_case(), google::protobuf::Value::kNumberValue);
  EXPECT_EQ(Field(Field(second, "metrics").struct_value(), "r2").number_value(), 0);
  EXPECT_THAT(json, Not(HasSubstr("int_value")));
}

TEST(CliJsonTest, NonFiniteDoublesAreNullAndOneofsShowTheSetMember) {
  v1::StudySpec spec;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    name: "s"
    parameters { name: "x" double_range { min: 0 max: 1 } }
  )pb", &spec));
  const google::protobuf::Struct parsed = Parse(CliJson(spec));
  const auto& parameter = Field(parsed, "parameters").list_value().values(0).struct_value();
  EXPECT_TRUE(parameter.fields().contains("double_range"));
  EXPECT_FALSE(parameter.fields().contains("int_range"));
  EXPECT_EQ(Field(parsed, "max_trials").number_value(), 0);

  v1::Trial trial;
  trial.add_objective_values(std::numeric_limits<double>::infinity());
  trial.add_objective_values(1e-300);
  const google::protobuf::Struct values = Parse(CliJson(trial));
  const auto& list = Field(values, "objective_values").list_value();
  EXPECT_EQ(list.values(0).kind_case(), google::protobuf::Value::kNullValue);
  EXPECT_EQ(list.values(1).number_value(), 1e-300);  // Shortest text that reads back exactly.
}

// dhpt export stays the proto3 mapping, for dhpt import (and grpcurl) to read back.
TEST(CliJsonTest, ExportKeepsTheProtoMapping) {
  const std::string proto = ToJson(Trials()).value();
  EXPECT_THAT(proto, HasSubstr("\"int_value\": \"6\""));
  v1::ListTrialsResponse back;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(proto, &back).ok());
  EXPECT_EQ(back.trials(0).params().at("max_depth").int_value(), 6);
}

}  // namespace
}  // namespace dhpt::cli
