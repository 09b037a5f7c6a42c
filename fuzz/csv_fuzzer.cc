// The CSV dataset reader: any bytes as a file, with the target column named by the first
// line's first cell (a real column, so the deeper paths are reached) and with no target.

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "services/worker/datasets.h"

namespace {

// The one place that reaches the parser: the pure text parser the file loader uses.
absl::StatusOr<dhpt::worker::Dataset> Parse(const std::string& text, const std::string& target) {
  return dhpt::worker::ParseCsv(text, target);
}

void Check(const absl::StatusOr<dhpt::worker::Dataset>& data) {
  if (!data.ok()) return;
  // A dataset the trainers will index: one label per row, a full row of features each.
  if (data->target.size() != static_cast<size_t>(data->rows) && !data->target.empty()) std::abort();
  if (data->features.size() != static_cast<size_t>(data->rows * data->cols)) std::abort();
  if (data->feature_names.size() != static_cast<size_t>(data->cols)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const std::string text(reinterpret_cast<const char*>(bytes), size);
  const std::string first_cell = text.substr(0, text.find_first_of(",\n"));
  Check(Parse(text, first_cell));
  Check(Parse(text, ""));
  return 0;
}
