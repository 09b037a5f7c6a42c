#include "services/scheduler/median_set.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace dhpt::scheduler {
namespace {

// The median as SpeedModel computed it before MedianSet: sort, take the middle (or the mean of
// the two middle values, the lower first).
std::optional<double> SortedMedian(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  if (n % 2 == 1) return values[n / 2];
  return (values[n / 2 - 1] + values[n / 2]) / 2;
}

TEST(MedianSetTest, AnswersAsTheSortedValuesDoThroughInsertsAndErases) {
  std::mt19937_64 random(7);
  // Few distinct values, so that copies of one value sit in both halves.
  std::uniform_int_distribution<int> small(-6, 6);
  std::normal_distribution<double> spread(0, 3);
  for (int round = 0; round < 40; ++round) {
    MedianSet set;
    std::vector<double> values;
    for (int step = 0; step < 400; ++step) {
      const bool erase = !values.empty() && random() % 3 == 0;
      if (erase) {
        const size_t at = random() % values.size();
        ASSERT_TRUE(set.Erase(values[at]));
        values.erase(values.begin() + static_cast<std::ptrdiff_t>(at));
      } else {
        const double value = round % 2 == 0 ? small(random) : spread(random);
        set.Insert(value);
        values.push_back(value);
      }
      ASSERT_EQ(set.size(), values.size());
      // Exactly: SpeedModel's answers must not move by a bit from what they were.
      ASSERT_EQ(set.Median(), SortedMedian(values)) << "round " << round << ", step " << step;
    }
  }
}

TEST(MedianSetTest, ErasingAValueItDoesNotHoldChangesNothing) {
  MedianSet set;
  EXPECT_FALSE(set.Median());
  EXPECT_FALSE(set.Erase(1));
  set.Insert(1);
  set.Insert(3);
  EXPECT_FALSE(set.Erase(2));
  EXPECT_EQ(set.Median(), 2);
  EXPECT_TRUE(set.Erase(3));
  EXPECT_EQ(set.Median(), 1);
  EXPECT_TRUE(set.Erase(1));
  EXPECT_TRUE(set.empty());
  EXPECT_FALSE(set.Median());
}

}  // namespace
}  // namespace dhpt::scheduler
