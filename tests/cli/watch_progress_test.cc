#include "services/cli/watch_progress.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "services/cli/demo_studies.h"
#include "services/cli/report.h"

namespace dhpt::cli {
namespace {

using ::testing::HasSubstr;

v1::StudyEvent Summary(int completed) {
  v1::StudyEvent event;
  v1::Study& study = *event.mutable_study();
  *study.mutable_spec() = *DemoStudy("branin");
  study.set_state(v1::Study::RUNNING);
  study.set_trials_completed(completed);
  return event;
}

v1::StudyEvent FailedTrial(int number) {
  v1::StudyEvent event;
  event.mutable_trial()->set_number(number);
  event.mutable_trial()->set_state(v1::Trial::FAILED);
  event.mutable_trial()->set_error("boom");
  return event;
}

// `submit --watch` printed its line, then the watch's first summary printed it again.
TEST(ProgressPrinterTest, TheLineAlreadyShownIsNotPrintedAgain) {
  std::ostringstream out, err;
  const std::string shown = ProgressLine(Summary(0).study());
  ProgressPrinter printer("branin", shown, out, err, /*tty=*/false);
  printer.OnEvent(Summary(0));
  EXPECT_EQ(out.str(), "");
  printer.OnEvent(Summary(1));
  printer.OnEvent(Summary(1));
  printer.Finish();
  EXPECT_EQ(out.str(), ProgressLine(Summary(1).study()) + "\n");
  EXPECT_EQ(err.str(), "");
}

TEST(ProgressPrinterTest, WithNothingShownTheFirstSummaryIsPrinted) {
  std::ostringstream out, err;
  ProgressPrinter printer("branin", "", out, err, /*tty=*/false);
  printer.OnEvent(Summary(0));
  EXPECT_EQ(out.str(), ProgressLine(Summary(0).study()) + "\n");
}

TEST(ProgressPrinterTest, AFailedTrialGetsOneLineEvenWhenSentAgain) {
  std::ostringstream out, err;
  ProgressPrinter printer("branin", "", out, err, /*tty=*/false);
  printer.OnEvent(FailedTrial(4));
  printer.OnEvent(FailedTrial(4));
  EXPECT_EQ(out.str(), FailedTrialLine("branin", FailedTrial(4).trial()) + "\n");
}

TEST(ProgressPrinterTest, ADropIsSaidOncePerReasonAndTheReturnAtTheNextEvent) {
  std::ostringstream out, err;
  ProgressPrinter printer("branin", "", out, err, /*tty=*/false);
  printer.OnRetry(absl::UnavailableError("connection refused"), absl::Seconds(59.5));
  printer.OnRetry(absl::UnavailableError("connection refused"), absl::Seconds(58));
  EXPECT_EQ(err.str(),
            "dhpt: cannot watch branin (UNAVAILABLE: connection refused); trying again for up "
            "to 1m\n");
  printer.OnEvent(Summary(0));
  printer.OnRetry(absl::CancelledError(""), absl::Seconds(30));
  printer.OnEvent(Summary(0));
  EXPECT_THAT(err.str(), HasSubstr("dhpt: lost the watch of branin (the scheduler cut the "
                                   "stream); trying again for up to 30s\n"
                                   "dhpt: reconnected; watching branin again from the last "
                                   "event seen\n"));
  // The scheduler's empty answer to a resumed watch says it is back, before any event, once.
  printer.OnRetry(absl::UnavailableError("socket closed"), absl::Seconds(50));
  printer.OnAnswered();
  printer.OnAnswered();
  printer.OnEvent(Summary(0));
  const std::string said = err.str();
  EXPECT_THAT(said, ::testing::EndsWith("trying again for up to 50s\n"
                                        "dhpt: reconnected; watching branin again from the last "
                                        "event seen\n"));
}

// On a terminal the line is rewritten in place, and a notice goes above it.
TEST(ProgressPrinterTest, OnATerminalTheLineIsRewrittenInPlace) {
  std::ostringstream out, err;
  ProgressPrinter printer("branin", "", out, err, /*tty=*/true);
  printer.OnEvent(Summary(1));
  printer.OnRetry(absl::UnavailableError("gone"), absl::Seconds(10));
  printer.Finish();
  const std::string line = ProgressLine(Summary(1).study());
  EXPECT_EQ(out.str(), "\r\033[K" + line + "\r\033[K" + line + "\n");
}

}  // namespace
}  // namespace dhpt::cli
