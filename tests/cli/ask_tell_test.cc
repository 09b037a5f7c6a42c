#include "services/cli/ask_tell.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace dhpt::cli {
namespace {

using ::testing::HasSubstr;

TEST(AskTellTest, AskLineIsTheNumberThenExactSortedArguments) {
  v1::Trial trial;
  trial.set_number(7);
  (*trial.mutable_params())["lr"].set_double_value(0.1);
  (*trial.mutable_params())["layers"].set_int_value(3);
  (*trial.mutable_params())["act"].set_string_value("gelu");
  // 0.1 as the double it is, so a program reads back the very value the optimiser chose.
  EXPECT_EQ(AskLine(trial), "7 --act=gelu --layers=3 --lr=0.10000000000000001");
}

TEST(AskTellTest, AnAskLineIsOneLineWhateverAValueHolds) {
  v1::Trial trial;
  trial.set_number(2);
  (*trial.mutable_params())["kind"].set_string_value("a\nb\x1b[31m");
  EXPECT_EQ(AskLine(trial), "2 '--kind=a\\x0ab\\x1b[31m'");
}

// Found by a hostile review: "4 --kind=two words --x=1" could not be told from a parameter
// "kind" of "two" and a stray word. A value a shell would split or expand is quoted, and a
// real shell reads every parameter back as one word, exactly.
TEST(AskTellTest, AnAskLineIsReadBackWordForWordByAShell) {
  v1::Trial trial;
  trial.set_number(4);
  const std::vector<std::string> values = {"two words", "a=b", "it's", "$(echo hi)`echo x`",
                                           "*", "", "'", "plain-1.5e+3"};
  for (size_t i = 0; i < values.size(); ++i) {
    (*trial.mutable_params())[absl::StrCat("p", i)].set_string_value(values[i]);
  }
  const std::string line = AskLine(trial);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_THAT(line, HasSubstr(" '--p0=two words' --p1=a=b '--p2=it'\\''s' "));
  EXPECT_THAT(line, HasSubstr(" --p7=plain-1.5e+3"));
  ASSERT_EQ(setenv("ASK_LINE", line.c_str(), 1), 0);
  FILE* shell = popen("sh -c 'eval \"set -- $ASK_LINE\"; printf \"%s\\n\" \"$@\"' </dev/null", "r");
  ASSERT_NE(shell, nullptr);
  std::string output;
  char buffer[256];
  while (fgets(buffer, sizeof(buffer), shell) != nullptr) output += buffer;
  EXPECT_EQ(pclose(shell), 0);
  std::string expected = "4\n";
  for (size_t i = 0; i < values.size(); ++i) {
    absl::StrAppend(&expected, "--p", i, "=", values[i], "\n");
  }
  EXPECT_EQ(output, expected);
}

TEST(AskTellTest, MetricWordsAreDecimalNumbersGivenOnce) {
  absl::StatusOr<google::protobuf::Map<std::string, double>> metrics =
      ParseMetricWords({"loss=0.25", "acc=1e-3"});
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(metrics->at("loss"), 0.25);
  EXPECT_EQ(metrics->at("acc"), 0.001);
  // Out of range is refused too (it was stored as 0, and became the best trial).
  for (const char* bad : {"loss", "=1", "loss=", "loss=0x10", "loss=nan", "loss=inf", "loss=1.5x",
                          "loss=1e999", "loss=-1e400", "loss=1.8e308"}) {
    EXPECT_EQ(ParseMetricWords({bad}).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  absl::StatusOr<google::protobuf::Map<std::string, double>> twice =
      ParseMetricWords({"loss=1", "loss=2"});
  EXPECT_THAT(twice.status().message(), HasSubstr("loss is given twice"));
}

TEST(AskTellTest, ParameterWordsAreNumbersWhenTheyReadAsNumbers) {
  absl::StatusOr<google::protobuf::Map<std::string, google::protobuf::Value>> params =
      ParseParameterWords({"x=0.5", "n=3", "kind=dart"});
  ASSERT_TRUE(params.ok()) << params.status();
  EXPECT_EQ(params->at("x").number_value(), 0.5);
  EXPECT_EQ(params->at("n").number_value(), 3);
  EXPECT_EQ(params->at("kind").string_value(), "dart");
  EXPECT_EQ(ParseParameterWords({"x=1", "x=3"}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

v1::CompleteTrialRequest Tell(int64_t trial, int metrics, const std::string& reason = "") {
  v1::CompleteTrialRequest request;
  request.set_trial(trial);
  for (int i = 0; i < metrics; ++i) (*request.mutable_metrics())[absl::StrCat("m", i)] = i;
  request.set_infeasible_reason(reason);
  return request;
}

// gRPC's refusal of a tell over the message limit names neither the trial nor what to change;
// the scheduler's own RESOURCE_EXHAUSTED (a limit it names) and other errors are left as they are.
TEST(AskTellTest, ATellOverTheMessageLimitIsSaidInWordsToActOn) {
  const absl::Status grpc_refusal =
      absl::ResourceExhaustedError("Received message larger than max (2345 vs. 1024)");
  const std::optional<std::string> reason = OversizedTellReason(grpc_refusal, Tell(7, 61));
  ASSERT_TRUE(reason.has_value());
  EXPECT_EQ(*reason,
            "trial 7: the result (61 metrics) is over the scheduler's message limit of 1024 bytes "
            "(Received message larger than max (2345 vs. 1024); dhpt-scheduler "
            "--max_message_bytes): tell the objectives and at most 64 metrics in all");
  EXPECT_THAT(*OversizedTellReason(grpc_refusal, Tell(0, 1)), HasSubstr("(1 metric)"));
  EXPECT_FALSE(OversizedTellReason(absl::ResourceExhaustedError("too many studies"), Tell(7, 61)));
  EXPECT_FALSE(OversizedTellReason(absl::InvalidArgumentError("larger than max"), Tell(7, 61)));
  EXPECT_FALSE(OversizedTellReason(absl::OkStatus(), Tell(7, 61)));
}

// What is too big is what the message names: an --infeasible reason of 1100 bytes is not "0
// metrics", one metric name of 1100 bytes is not "2 metrics"; and the trial keeps the start of
// the user's own reason.
TEST(AskTellTest, ATellOverTheMessageLimitNamesWhatIsTooBig) {
  const absl::Status grpc_refusal =
      absl::ResourceExhaustedError("Received message larger than max (1135 vs. 1024)");
  const std::string long_reason(1100, 'r');
  const v1::CompleteTrialRequest infeasible = Tell(3, 0, long_reason);
  const std::optional<std::string> reason = OversizedTellReason(grpc_refusal, infeasible);
  ASSERT_TRUE(reason.has_value());
  EXPECT_EQ(*reason,
            "trial 3: the --infeasible reason (1100 bytes) is over the scheduler's message limit "
            "of 1024 bytes (Received message larger than max (1135 vs. 1024); dhpt-scheduler "
            "--max_message_bytes): give a shorter reason");
  const std::string failure = OversizedTellFailure(*reason, infeasible);
  EXPECT_EQ(failure, absl::StrCat(std::string(253, 'r'), "... [cut to 256 bytes; bad result: ",
                                  *reason, "]"));
  EXPECT_LT(failure.size(), 1024u - 100);  // Fits under the smallest limit, with the request.
  // A short reason is kept whole; without one the failure is the refusal alone.
  EXPECT_EQ(OversizedTellFailure("too big", Tell(3, 61, "diverged")),
            "diverged [bad result: too big]");
  EXPECT_EQ(OversizedTellFailure("too big", Tell(3, 61)), "bad result: too big");

  v1::CompleteTrialRequest long_name = Tell(4, 0);
  (*long_name.mutable_metrics())["loss"] = 0.5;
  (*long_name.mutable_metrics())[std::string(1100, 'n')] = 1;
  EXPECT_EQ(*OversizedTellReason(grpc_refusal, long_name),
            absl::StrCat("trial 4: metric name \"", std::string(40, 'n'),
                         "...\" (1100 bytes) is over the scheduler's message limit of 1024 bytes "
                         "(Received message larger than max (1135 vs. 1024); dhpt-scheduler "
                         "--max_message_bytes): give shorter metric names"));
}

}  // namespace
}  // namespace dhpt::cli
