// What `dhpt watch` and `dhpt submit --watch` print while a study runs: its progress line, a
// line for each failed trial, and notices when the stream to the scheduler drops and returns.
#ifndef DHPT_SERVICES_CLI_WATCH_PROGRESS_H_
#define DHPT_SERVICES_CLI_WATCH_PROGRESS_H_

#include <cstdint>
#include <ostream>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dhpt/v1/study_service.pb.h"
#include "services/cli/study_client.h"

namespace dhpt::cli {

// Prints progress from the study's summaries: a line rewritten in place on a terminal, a line
// per change of the counts otherwise.
class ProgressPrinter {
 public:
  // `shown`: the progress line already printed (submit's), which the first summary repeats:
  // not printed twice. Notices go to `err`, above the progress line on a terminal (`tty`).
  ProgressPrinter(std::string study, std::string shown, std::ostream& out, std::ostream& err,
                  bool tty);
  void OnEvent(const v1::StudyEvent& event);
  // The stream's first answer: after a drop, the watch is up again (said once).
  void OnAnswered();
  // The stream dropped and StudyClient tries again: said at once, not after a silent minute,
  // and again only when the reason changes (a stopping scheduler, then a closed port).
  void OnRetry(const absl::Status& why, absl::Duration trying_for);
  void Finish();

 private:
  // A failed trial gets a line of its own, once (a resumed watch may send it again), above the
  // progress line.
  void OnTrial(const v1::Trial& trial);
  void Notice(const std::string& line);

  const std::string study_;
  std::ostream& out_;
  std::ostream& err_;
  const bool tty_;
  std::set<int64_t> failed_;
  bool printed_ = false;
  bool seen_ = false;  // An answer came: a drop is a lost watch, not one never begun.
  bool lost_ = false;  // Since a drop, until the next answer.
  std::string last_reason_;  // The drop's reason last said.
  std::string last_;         // The progress line last shown.
};

// Watches the study to its end on stdout and stderr: its summaries (a fresh one at most ten
// times a second while trials change) and its trials' events, for the failures' reasons; a
// dropped stream resumes. `shown_line` as for ProgressPrinter.
absl::Status WatchToEnd(StudyClient& client, const std::string& name,
                        std::string shown_line = "");

}  // namespace dhpt::cli

#endif  // DHPT_SERVICES_CLI_WATCH_PROGRESS_H_
