#include "services/worker/command_output.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <random>
#include <regex>

#include "absl/strings/str_cat.h"

namespace dhpt::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;
using Values = std::vector<IntermediateValue>;

TEST(CommandOutputTest, ReadsKatibPairsAnywhereOnALineAndIgnoresLog) {
  CommandOutputParser parser("accuracy");
  EXPECT_THAT(parser.Feed("Epoch 1/10 done\n"
                          "2024-01-01T00:00:00Z epoch=1 accuracy=0.5 loss = 0.25\n"
                          "lr=.5 momentum=+9E-1 val.loss=-1e-3 name|x=3\n"),
              ElementsAre(IntermediateValue{1, 0.5}));
  EXPECT_THAT(parser.metrics(),
              UnorderedElementsAre(Pair("epoch", 1), Pair("accuracy", 0.5), Pair("loss", 0.25),
                                   Pair("lr", 0.5), Pair("momentum", 0.9), Pair("val.loss", -1e-3),
                                   Pair("name|x", 3)));
  EXPECT_EQ(parser.objective(), 0.5);
}

TEST(CommandOutputTest, TakesWhatKatibsFilterTakesAndNoMore) {
  CommandOutputParser parser("a");
  // "a=" has no number (b then starts a match of its own); "c=-" and "d=e5" hold no digit;
  // "f=1.5.3" is f=1.5; "g=7ms" is g=7.
  parser.Feed("a=b=2 c=- d=e5 f=1.5.3 g=7ms h: 4\n");
  EXPECT_THAT(parser.metrics(), UnorderedElementsAre(Pair("b", 2), Pair("f", 1.5), Pair("g", 7)));
  EXPECT_FALSE(parser.objective());
}

// The hand-written matcher against Katib's filter itself (with '.' in names), on random lines.
TEST(CommandOutputTest, AgreesWithKatibsRegexOnRandomLines) {
  const std::regex katib(R"(([\w|.-]+)\s*=\s*([+-]?\d*(\.\d+)?([Ee][+-]?\d+)?))");
  const std::string alphabet = "ab_|.-+=eE0123456789 \t:,";
  std::mt19937 random(7);
  for (int i = 0; i < 3000; ++i) {
    std::string line;
    const int length = static_cast<int>(random() % 40);
    for (int j = 0; j < length; ++j) line.push_back(alphabet[random() % alphabet.size()]);
    std::map<std::string, double> expected;
    for (std::sregex_iterator it(line.begin(), line.end(), katib), end; it != end; ++it) {
      const std::string value = (*it)[2];
      // Go's ParseFloat wants a digit before any exponent.
      if (value.substr(0, value.find_first_of("eE")).find_first_of("0123456789") ==
          std::string::npos) {
        continue;
      }
      errno = 0;
      const double number = std::strtod(value.c_str(), nullptr);
      if (errno != ERANGE) expected[(*it)[1]] = number;
    }
    CommandOutputParser parser("objective");
    parser.Feed(line + "\n");
    EXPECT_EQ(parser.metrics(), expected) << "line: \"" << line << "\"";
  }
}

TEST(CommandOutputTest, ReadsNumberFieldsOfJsonLines) {
  CommandOutputParser parser("accuracy");
  EXPECT_THAT(parser.Feed("  {\"accuracy\": 0.75, \"step\": 10, \"note\": \"x=5\", \"ok\": true,"
                          " \"nested\": {\"y\": 1}}\n"),
              ElementsAre(IntermediateValue{10, 0.75}));
  EXPECT_THAT(parser.metrics(), UnorderedElementsAre(Pair("accuracy", 0.75)));
  // A line that only looks like JSON is read as pairs.
  parser.Feed("{not json} loss=0.5\n");
  EXPECT_THAT(parser.metrics(), UnorderedElementsAre(Pair("accuracy", 0.75), Pair("loss", 0.5)));
}

TEST(CommandOutputTest, StreamsTheObjectiveAtIncreasingStepsOnly) {
  CommandOutputParser parser("accuracy");
  EXPECT_THAT(parser.Feed("step=5 accuracy=0.1\n"), ElementsAre(IntermediateValue{5, 0.1}));
  EXPECT_THAT(parser.Feed("accuracy=0.2 step=3\n"), IsEmpty());  // Not above 5: kept, not streamed.
  EXPECT_EQ(parser.objective(), 0.2);
  EXPECT_THAT(parser.Feed("{\"step\": 6, \"accuracy\": 0.3}\n"),
              ElementsAre(IntermediateValue{6, 0.3}));
  EXPECT_FALSE(parser.metrics().contains("step"));
}

TEST(CommandOutputTest, WithoutAStepAReportIsNumberedByItsCount) {
  CommandOutputParser parser("accuracy");
  EXPECT_THAT(
      parser.Feed("loss=1\naccuracy=0.1\naccuracy=0.2 accuracy=0.3\n"),
      ElementsAre(IntermediateValue{1, 0.1}, IntermediateValue{2, 0.2}, IntermediateValue{3, 0.3}));
}

TEST(CommandOutputTest, JoinsLinesAcrossFeedsAndParsesALastLineAtTheEnd) {
  CommandOutputParser parser("accuracy");
  EXPECT_THAT(parser.Feed("accu"), IsEmpty());
  EXPECT_THAT(parser.Feed("racy=0.5\r"),
              ElementsAre(IntermediateValue{1, 0.5}));  // \r ends lines too.
  EXPECT_THAT(parser.Feed("accuracy=0.6"), IsEmpty());
  EXPECT_THAT(parser.Finish(), ElementsAre(IntermediateValue{2, 0.6}));
}

TEST(CommandOutputTest, IgnoresNonFiniteValuesAndOverlongNames) {
  CommandOutputParser parser("accuracy");
  parser.Feed(
      absl::StrCat("accuracy=1e999 ", std::string(65, 'n'), "=1 ", std::string(64, 'm'), "=2\n"));
  EXPECT_THAT(parser.metrics(), UnorderedElementsAre(Pair(std::string(64, 'm'), 2)));
}

TEST(CommandOutputTest, SkipsLinesOverTheLimitWholeWhateverTheFeeds) {
  CommandOutputParser parser("accuracy");
  const std::string long_line = "accuracy=0.9 " + std::string(kMaxOutputLineBytes, 'x');
  parser.Feed(long_line.substr(0, 1000));
  parser.Feed(long_line.substr(1000));
  parser.Feed("\naccuracy=0.1 " + std::string(kMaxOutputLineBytes, 'y') + "\naccuracy=0.5\n");
  EXPECT_EQ(parser.objective(), 0.5);
  EXPECT_EQ(parser.skipped_long_lines(), 2);
  // A line of exactly the limit is still read.
  parser.Feed("accuracy=0.7" + std::string(kMaxOutputLineBytes - 12, ' ') + "\n");
  EXPECT_EQ(parser.objective(), 0.7);
}

TEST(CommandOutputTest, KeepsAPlaceForTheObjectiveAmongBoundedNames) {
  CommandOutputParser parser("accuracy");
  for (int i = 0; i < 100; ++i) parser.Feed(absl::StrCat("m", i, "=", i, "\n"));
  parser.Feed("accuracy=0.8\n");
  EXPECT_EQ(parser.metrics().size(), kMaxOutputMetrics);
  EXPECT_EQ(parser.objective(), 0.8);
  EXPECT_TRUE(parser.metric_limit_reached());
}

TEST(CommandOutputTest, ParsesNoMoreThanItsByteLimit) {
  CommandOutputParser parser("accuracy", 20);
  parser.Feed("accuracy=0.1\naccuracy=0.2\naccuracy=0.3\n");  // The limit cuts the 2nd line.
  parser.Feed("accuracy=0.4\n");
  parser.Finish();
  EXPECT_EQ(parser.objective(), 0.1);
  EXPECT_EQ(parser.discarded_bytes(), 39 - 20 + 13);
}

}  // namespace
}  // namespace dhpt::worker
