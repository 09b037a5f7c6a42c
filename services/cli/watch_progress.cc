#include "services/cli/watch_progress.h"

#include <unistd.h>

#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "services/cli/report.h"

namespace dhpt::cli {

ProgressPrinter::ProgressPrinter(std::string study, std::string shown, std::ostream& out,
                                 std::ostream& err, bool tty)
    : study_(std::move(study)), out_(out), err_(err), tty_(tty), last_(std::move(shown)) {}

void ProgressPrinter::OnAnswered() {
  seen_ = true;
  if (!lost_) return;
  lost_ = false;
  last_reason_.clear();
  Notice(absl::StrCat("dhpt: reconnected; watching ", study_, " again from the last event seen"));
}

void ProgressPrinter::OnEvent(const v1::StudyEvent& event) {
  OnAnswered();  // A scheduler that answers no empty batch answers with its first event.
  if (event.has_trial()) {
    OnTrial(event.trial());
    return;
  }
  if (!event.has_study()) return;
  std::string line = ProgressLine(event.study());
  if (line == last_) return;
  last_ = std::move(line);
  printed_ = true;
  if (tty_) {
    out_ << "\r\033[K" << last_ << std::flush;
  } else {
    out_ << last_ << std::endl;
  }
}

void ProgressPrinter::Finish() {
  if (tty_ && printed_) out_ << "\n";
  out_.flush();
}

void ProgressPrinter::OnRetry(const absl::Status& why, absl::Duration trying_for) {
  lost_ = true;
  // gRPC's own CANCELLED says only "CANCELLED": a stopping scheduler cut the call.
  const std::string reason =
      absl::IsCancelled(why) ? "the scheduler cut the stream" : why.ToString();
  if (reason == last_reason_) return;
  last_reason_ = reason;
  Notice(absl::StrCat("dhpt: ", seen_ ? "lost the watch of " : "cannot watch ", study_, " (",
                      reason, "); trying again for up to ",
                      absl::FormatDuration(absl::Ceil(trying_for, absl::Seconds(1)))));
}

void ProgressPrinter::OnTrial(const v1::Trial& trial) {
  if (trial.state() != v1::Trial::FAILED || !failed_.insert(trial.number()).second) return;
  const std::string line = FailedTrialLine(study_, trial);
  if (tty_) {
    out_ << "\r\033[K" << line << "\n" << last_ << std::flush;
  } else {
    out_ << line << std::endl;
  }
}

void ProgressPrinter::Notice(const std::string& line) {
  if (tty_) out_ << "\r\033[K" << std::flush;
  err_ << line << std::endl;
  if (tty_) out_ << last_ << std::flush;
}

absl::Status WatchToEnd(StudyClient& client, const std::string& name, std::string shown_line) {
  ProgressPrinter printer(name, std::move(shown_line), std::cout, std::cerr,
                          isatty(STDOUT_FILENO));
  absl::Status status = client.Watch(
      name, [&](const v1::StudyEvent& event) { printer.OnEvent(event); }, /*summaries_only=*/false,
      /*after_position=*/0,
      [&](const absl::Status& why, absl::Duration trying_for) { printer.OnRetry(why, trying_for); },
      [&] { printer.OnAnswered(); });
  printer.Finish();
  return status;
}

}  // namespace dhpt::cli
