#include "services/worker/xgboost_forest.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "services/common/status_macros.h"

namespace dhpt::worker {
namespace {

absl::Status Unrecognised(absl::string_view what) {
  return absl::InternalError(
      absl::StrCat("cannot merge the forest's chunks: unexpected XGBoost model JSON (", what, ")"));
}

// The index just past the value that starts at `begin`: a string, an array or object (matched
// with strings skipped), or a scalar (up to the next ',', ']' or '}').
absl::StatusOr<size_t> ValueEnd(const std::string& text, size_t begin) {
  if (begin >= text.size()) return Unrecognised("value past the end");
  const char first = text[begin];
  if (first != '[' && first != '{' && first != '"') {
    const size_t end = text.find_first_of(",]}", begin);
    return end == std::string::npos ? text.size() : end;
  }
  int depth = 0;
  bool in_string = false;
  for (size_t i = begin; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
        if (depth == 0) return i + 1;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if (c == ']' || c == '}') {
      if (--depth == 0) return i + 1;
    }
  }
  return Unrecognised("unbalanced brackets");
}

struct Span {
  size_t begin = 0;
  size_t end = 0;
};

// The value of the first "key": in `text` at or after `from`.
absl::StatusOr<Span> FindValue(const std::string& text, absl::string_view key, size_t from = 0) {
  const std::string quoted = absl::StrCat("\"", key, "\":");
  const size_t at = text.find(quoted, from);
  if (at == std::string::npos) return Unrecognised(absl::StrCat("no \"", key, "\""));
  Span span;
  span.begin = at + quoted.size();
  ASSIGN_OR_RETURN(span.end, ValueEnd(text, span.begin));
  return span;
}

absl::Status ReplaceValue(std::string& text, absl::string_view key, const std::string& value) {
  ASSIGN_OR_RETURN(Span span, FindValue(text, key));
  text.replace(span.begin, span.end - span.begin, value);
  return absl::OkStatus();
}

// The elements of a flat array's text, "[a,b,c]".
std::vector<absl::string_view> Elements(absl::string_view array) {
  array.remove_prefix(1);
  array.remove_suffix(1);
  if (array.empty()) return {};
  return absl::StrSplit(array, ',');
}

// `tree` (one object of "trees") with id `id` and its leaf values times `factor`. A leaf is a
// node whose left child is -1; its value is its split condition.
absl::StatusOr<std::string> RescaledTree(std::string tree, int id, double factor) {
  ASSIGN_OR_RETURN(Span left, FindValue(tree, "left_children"));
  const std::vector<absl::string_view> children =
      Elements(absl::string_view(tree).substr(left.begin, left.end - left.begin));
  ASSIGN_OR_RETURN(Span conditions, FindValue(tree, "split_conditions"));
  std::vector<std::string> values;
  for (absl::string_view element : Elements(absl::string_view(tree).substr(
           conditions.begin, conditions.end - conditions.begin))) {
    values.emplace_back(element);
  }
  if (values.size() != children.size()) return Unrecognised("node arrays of different lengths");
  for (size_t node = 0; node < values.size(); ++node) {
    if (children[node] != "-1") continue;
    double value = 0;
    if (!absl::SimpleAtod(values[node], &value)) return Unrecognised("a leaf value");
    char scaled[32];
    std::snprintf(scaled, sizeof scaled, "%.9e", value * factor);
    values[node] = scaled;
  }
  tree.replace(conditions.begin, conditions.end - conditions.begin,
               absl::StrCat("[", absl::StrJoin(values, ","), "]"));
  RETURN_IF_ERROR(ReplaceValue(tree, "id", absl::StrCat(id)));
  return tree;
}

}  // namespace

absl::StatusOr<std::string> MergeForestChunks(const std::vector<ForestChunk>& chunks) {
  if (chunks.empty()) return absl::InvalidArgumentError("a forest needs at least one chunk");
  if (chunks.size() == 1) return chunks.front().json;
  int total = 0;
  for (const ForestChunk& chunk : chunks) total += chunk.trees;
  std::vector<std::string> trees;
  trees.reserve(static_cast<size_t>(total));
  for (const ForestChunk& chunk : chunks) {
    ASSIGN_OR_RETURN(Span array, FindValue(chunk.json, "trees"));
    if (chunk.json[array.begin] != '[') return Unrecognised("\"trees\" is not an array");
    const double factor = static_cast<double>(chunk.trees) / total;
    int found = 0;
    for (size_t at = array.begin + 1; chunk.json[at] == '{';) {
      ASSIGN_OR_RETURN(size_t end, ValueEnd(chunk.json, at));
      ASSIGN_OR_RETURN(std::string tree,
                       RescaledTree(chunk.json.substr(at, end - at),
                                    static_cast<int>(trees.size()), factor));
      trees.push_back(std::move(tree));
      ++found;
      at = chunk.json[end] == ',' ? end + 1 : end;
    }
    if (found != chunk.trees) {
      return Unrecognised(absl::StrCat(found, " trees in a chunk of ", chunk.trees));
    }
  }
  std::string merged = chunks.front().json;
  // Every tree in the one round, as a single booster of `total` parallel trees has them.
  RETURN_IF_ERROR(ReplaceValue(merged, "trees", absl::StrCat("[", absl::StrJoin(trees, ","), "]")));
  RETURN_IF_ERROR(ReplaceValue(
      merged, "tree_info",
      absl::StrCat("[", absl::StrJoin(std::vector<int>(static_cast<size_t>(total), 0), ","), "]")));
  RETURN_IF_ERROR(ReplaceValue(merged, "num_trees", absl::StrCat("\"", total, "\"")));
  RETURN_IF_ERROR(ReplaceValue(merged, "num_parallel_tree", absl::StrCat("\"", total, "\"")));
  return merged;
}

}  // namespace dhpt::worker
