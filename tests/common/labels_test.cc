#include "services/common/labels.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace dhpt {
namespace {

using ::testing::HasSubstr;

TEST(LabelsTest, ParsesKubernetesLabels) {
  absl::StatusOr<std::map<std::string, std::string>> labels =
      ParseLabels("board=pi4, kubernetes.io/arch=arm64,empty=,gpu=orin");
  ASSERT_TRUE(labels.ok()) << labels.status();
  EXPECT_EQ(*labels, (std::map<std::string, std::string>{
                         {"board", "pi4"}, {"kubernetes.io/arch", "arm64"}, {"empty", ""}, {"gpu", "orin"}}));
  EXPECT_TRUE(ParseLabels("")->empty());
}

TEST(LabelsTest, RefusesWhatKubernetesWouldRefuse) {
  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           {"board", "write KEY=VALUE"},
           {"-board=pi4", "a key is 1-63"},
           {"board=pi 4", "a value is at most 63"},
           {"Bad.Prefix/board=pi4", "prefix must be a DNS subdomain"},
           {"board=pi4,board=pi5", "\"board\" is given twice"},
           {std::string(64, 'k') + "=v", "a key is 1-63"},
           {"k=" + std::string(64, 'v'), "a value is at most 63"},
       }) {
    absl::StatusOr<std::map<std::string, std::string>> labels = ParseLabels(text);
    EXPECT_EQ(labels.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(std::string(labels.status().message()), HasSubstr(message)) << text;
  }
  std::string many;
  for (int i = 0; i <= kMaxLabels; ++i) many += "k" + std::to_string(i) + "=v,";
  EXPECT_THAT(std::string(ParseLabels(many).status().message()), HasSubstr("more than 32 labels"));
}

TEST(LabelsTest, AnErrorDoesNotGrowWithTheInput) {
  const std::string huge(100000, 'x');
  const absl::Status refused = ParseLabels(huge).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << "a 100 kB label was accepted";
  EXPECT_FALSE(refused.message().empty());
  EXPECT_LT(refused.message().size(), 200u);
}

}  // namespace
}  // namespace dhpt
