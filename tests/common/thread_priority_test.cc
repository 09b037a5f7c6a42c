#include "services/common/thread_priority.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

namespace dhpt {
namespace {

TEST(ThreadPriorityTest, LowersTheCallingThreadOnlyAndOnlyOnce) {
  const int process_nice = CallingThreadNice();
  int lowered = -100;
  int after_second_call = -100;
  std::thread([&] {
    EXPECT_TRUE(LowerCallingThreadPriority(3));
    lowered = CallingThreadNice();
    // Once per thread: a second call does not lower it further.
    EXPECT_TRUE(LowerCallingThreadPriority(3));
    after_second_call = CallingThreadNice();
  }).join();
  EXPECT_EQ(lowered, std::min(process_nice + 3, 19));
  EXPECT_EQ(after_second_call, lowered);
  EXPECT_EQ(CallingThreadNice(), process_nice) << "another thread's priority moved";
}

TEST(ThreadPriorityTest, StopsAtTheLowestPriorityAndZeroStepsLeaveTheThreadAlone) {
  const int process_nice = CallingThreadNice();
  int lowest = -100;
  std::thread([&] {
    EXPECT_TRUE(LowerCallingThreadPriority(100));
    lowest = CallingThreadNice();
  }).join();
  EXPECT_EQ(lowest, 19);
  int untouched = -100;
  std::thread([&] {
    EXPECT_TRUE(LowerCallingThreadPriority(0));
    untouched = CallingThreadNice();
  }).join();
  EXPECT_EQ(untouched, process_nice);
}

}  // namespace
}  // namespace dhpt
