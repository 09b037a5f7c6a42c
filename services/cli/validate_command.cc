#include "services/cli/validate_command.h"

#include <ostream>

#include "absl/strings/str_cat.h"
#include "services/cli/study_file.h"
#include "services/cli/terminal_text.h"
#include "services/common/input_file.h"
#include "services/study/spec_validation.h"

namespace dhpt::cli {
namespace {

absl::StatusOr<v1::StudySpec> NormalizedStudyFile(const std::string& path,
                                                  std::vector<absl::Status>& errors) {
  absl::StatusOr<v1::StudySpec> spec = ReadStudyFile(path);
  if (!spec.ok()) {
    errors.push_back(spec.status());
    return spec;
  }
  // The scheduler's default limits: one run with lower --max_parameters or --max_trials
  // (an operator's choice) may refuse more, and says so when the study is submitted.
  errors = study::StudySpecErrors(*spec);
  return spec;
}

}  // namespace

std::vector<absl::Status> StudyFileErrors(const std::string& path) {
  std::vector<absl::Status> errors;
  (void)NormalizedStudyFile(path, errors);
  return errors;
}

int RunValidate(const std::string& path, std::ostream& out, std::ostream& err) {
  std::vector<absl::Status> errors;
  absl::StatusOr<v1::StudySpec> spec = NormalizedStudyFile(path, errors);
  // Not a study file at all (a FIFO, a device, too large): a usage error, as for a bad flag.
  if (!spec.ok() && IsUnusableInputFile(spec.status())) {
    PrintRefusal(err, spec.status());
    return 2;
  }
  if (errors.empty()) {
    out << path << ": valid: study " << spec->name() << ", "
        << v1::Model::Kind_Name(spec->model().kind()) << ", "
        << v1::Algorithm::Name_Name(spec->algorithm().name()) << ", " << spec->max_trials()
        << " trials; nothing was created\n";
    return 0;
  }
  err << path << ": " << errors.size() << (errors.size() == 1 ? " error" : " errors") << "\n";
  for (const absl::Status& error : errors) {
    // Parse errors already name the file.
    std::string message(error.message());
    if (message.rfind(path + ": ", 0) == 0) message = message.substr(path.size() + 2);
    err << "  " << TerminalText(message) << "\n";
  }
  return 1;
}

}  // namespace dhpt::cli
