#include "services/cli/study_file.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/type_resolver.h"
#include "google/protobuf/util/type_resolver_util.h"
#include "services/common/input_file.h"
#include "services/common/status_macros.h"

namespace dhpt::cli {

std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppend(&out, "\\u00", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

namespace {

constexpr char kTypeUrlPrefix[] = "type.googleapis.com";


bool IsNumber(const std::string& s) {
  if (s.empty()) return false;
  double value;
  const char* begin = s.data();
  if (*begin == '+') ++begin;
  auto [end, error] = std::from_chars(begin, s.data() + s.size(), value);
  return error == std::errc() && end == s.data() + s.size() && std::isfinite(value);
}

// The JSON of a document can be far larger than its text: an alias repeats its anchor's node
// wherever it is named, so a few lines of aliases of aliases expand to gigabytes ("billion
// laughs"; fuzz/spec_fuzzer timed out on fuzz/corpus/spec_fuzzer/alias_bomb.yaml), and an
// alias inside its own anchor (`a: &a [*a]`) is a cycle that never ends (a stack overflow
// found by spec_fuzzer, fuzz/corpus/spec_fuzzer/alias_cycle.yaml). Study specs and compare
// matrices are kilobytes and a few levels deep; protobuf's JSON parser stops at 100 levels.
constexpr size_t kMaxJsonBytes = size_t{4} << 20;
constexpr int kMaxDepth = 100;

absl::Status AppendJson(const YAML::Node& node, int depth, std::string& out) {
  if (out.size() > kMaxJsonBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "not a usable document: its JSON passes ", kMaxJsonBytes >> 20,
        " MiB (aliases repeated over and over?)"));
  }
  if (depth > kMaxDepth) {
    return absl::InvalidArgumentError(absl::StrCat(
        "not a usable document: it nests deeper than ", kMaxDepth,
        " levels (an alias inside its own anchor?)"));
  }
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      out += "null";
      return absl::OkStatus();
    case YAML::NodeType::Scalar: {
      const std::string& value = node.Scalar();
      if (node.Tag() == "!") {  // Quoted in the file: a string, whatever it looks like.
        out += JsonString(value);
      } else if (value == "true" || value == "false" || value == "null") {
        out += value;
      } else if (IsNumber(value)) {
        out += value[0] == '+' ? value.substr(1) : value;
      } else {
        out += JsonString(value);
      }
      return absl::OkStatus();
    }
    case YAML::NodeType::Sequence: {
      out += "[";
      bool first = true;
      for (const YAML::Node& item : node) {
        if (!first) out += ",";
        first = false;
        RETURN_IF_ERROR(AppendJson(item, depth + 1, out));
      }
      out += "]";
      return absl::OkStatus();
    }
    case YAML::NodeType::Map: {
      out += "{";
      bool first = true;
      // YAML forbids a key twice in one mapping; yaml-cpp keeps both and the JSON parser the
      // last, so `max_trials: 2` then `max_trials: 500` ran 500 trials without a word.
      std::set<std::string> keys;
      for (const auto& entry : node) {
        if (!first) out += ",";
        first = false;
        const std::string key = entry.first.as<std::string>();
        if (!keys.insert(key).second) {
          return absl::InvalidArgumentError(absl::StrCat(
              "not a usable document: \"", key.substr(0, 64), "\" is given twice in one mapping (line ",
              entry.first.Mark().line + 1, ")"));
        }
        out += JsonString(key);
        out += ":";
        RETURN_IF_ERROR(AppendJson(entry.second, depth + 1, out));
      }
      out += "}";
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

// The spec's durations as people write them ("10m", "1h30m", "1.5h", "600s"), in the form the
// proto JSON mapping reads ("600s"); grpcurl, which reads that mapping itself, wants the latter.
absl::Status NormalizeDurations(YAML::Node& root) {
  if (!root.IsMap()) return absl::OkStatus();
  for (const char* field : {"trial_timeout"}) {
    YAML::Node value = root[field];
    if (!value.IsScalar()) continue;
    absl::Duration duration;
    if (!absl::ParseDuration(value.Scalar(), &duration) || duration < absl::ZeroDuration() ||
        duration == absl::InfiniteDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "not a study spec: ", field, ": \"", value.Scalar().substr(0, 64),
          "\" is not a duration; write it as 600s, 10m or 1h30m"));
    }
    const int64_t seconds = absl::ToInt64Seconds(duration);
    const int64_t nanos = absl::ToInt64Nanoseconds(duration - absl::Seconds(seconds));
    root[field] = nanos == 0 ? absl::StrCat(seconds, "s")
                             : absl::StrFormat("%d.%09ds", seconds, nanos);
  }
  return absl::OkStatus();
}

// Where a document's first node starts, from the parser's events: an empty document (a
// trailing `---`) has none.
class FirstNodeMark : public YAML::EventHandler {
 public:
  std::optional<YAML::Mark> mark;

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark& at, YAML::anchor_t) override { Saw(at); }
  void OnScalar(const YAML::Mark& at, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Saw(at);
  }
  void OnSequenceStart(const YAML::Mark& at, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Saw(at);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& at, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Saw(at);
  }
  void OnMapEnd() override {}

 private:
  void Saw(const YAML::Mark& at) {
    if (!mark) mark = at;
  }
};

// YAML::Load reads the first document and ignores the rest: a second one (another study after
// `---`, or text after a JSON object) would be dropped without a word. YAML::LoadAll cannot
// tell, as it loops without end on some malformed text (spec_fuzzer: 1.6 GB in 14 s), so the
// parser is asked for exactly two documents, each parsed once; it throws on malformed text.
absl::Status RefuseASecondDocument(const std::string& yaml) {
  std::istringstream in(yaml);
  YAML::Parser parser(in);
  FirstNodeMark first, second;
  if (!parser.HandleNextDocument(first) || !parser.HandleNextDocument(second) || !second.mark) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "a second YAML document starts at line ", second.mark->line + 1,
      ": a file holds one (what follows the first would be ignored); put each in a file "
      "of its own"));
}

absl::StatusOr<std::string> YamlToJson(const std::string& yaml, bool study_spec) {
  try {
    YAML::Node root = YAML::Load(yaml);
    if (root.IsNull()) return absl::InvalidArgumentError("the file is empty");
    RETURN_IF_ERROR(RefuseASecondDocument(yaml));
    if (study_spec) RETURN_IF_ERROR(NormalizeDurations(root));
    std::string json;
    RETURN_IF_ERROR(AppendJson(root, 0, json));
    return json;
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("not valid YAML or JSON: ", e.what()));
  }
}

}  // namespace

absl::StatusOr<std::string> YamlToJson(const std::string& yaml) { return YamlToJson(yaml, false); }

namespace {

absl::Status ParseYamlMessage(const std::string& text, absl::string_view what,
                              google::protobuf::Message& message, bool study_spec) {
  ASSIGN_OR_RETURN(std::string json, YamlToJson(text, study_spec));
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  auto status = google::protobuf::util::JsonStringToMessage(json, &message, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "not a ", what, ": ",
        std::string(status.message().data(), status.message().size())));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseYamlMessage(const std::string& text, absl::string_view what,
                              google::protobuf::Message& message) {
  return ParseYamlMessage(text, what, message, false);
}

absl::StatusOr<v1::StudySpec> ParseStudySpec(const std::string& text) {
  v1::StudySpec spec;
  RETURN_IF_ERROR(ParseYamlMessage(text, "study spec", spec, true));
  return spec;
}

absl::StatusOr<std::string> ReadTextFile(const std::string& path, int64_t max_bytes) {
  return ReadRegularFile(path, max_bytes,
                         max_bytes == kMaxStudyFileBytes
                             ? "4 MiB, the scheduler's default --max_message_bytes"
                             : "the limit of dhpt import and the CLI's own files");
}

absl::Status WriteTextFile(const std::string& path, const std::string& text) {
  const std::string partial = path + ".partial";
  std::ofstream file(partial);
  file << text;
  file.close();
  if (!file) return absl::InternalError(absl::StrCat("cannot write ", partial));
  std::error_code error;
  std::filesystem::rename(partial, path, error);
  if (error) return absl::InternalError(absl::StrCat("cannot write ", path, ": ", error.message()));
  return absl::OkStatus();
}

absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message) {
  // MessageToJsonString prints maps (params, metrics, labels, a model's fixed values) in the
  // order of their serialisation, which is their hash order and differs between runs: two
  // exports of the same study would differ. Serialised deterministically, map entries are
  // sorted by key, and the JSON printed from those bytes keeps that order.
  std::string binary;
  {
    google::protobuf::io::StringOutputStream stream(&binary);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);  // proto3: nothing to be missing.
  }
  const google::protobuf::DescriptorPool* pool = message.GetDescriptor()->file()->pool();
  const std::unique_ptr<google::protobuf::util::TypeResolver> resolver(
      google::protobuf::util::NewTypeResolverForDescriptorPool(kTypeUrlPrefix, pool));
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  if (const auto written = google::protobuf::util::BinaryToJsonString(
          resolver.get(), absl::StrCat(kTypeUrlPrefix, "/", message.GetDescriptor()->full_name()),
          binary, &json, options);
      !written.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot write ", message.GetTypeName(),
                                                   " as JSON: ", written.ToString()));
  }
  return json;
}

absl::Status OverrideEarlyStopping(absl::string_view rule, v1::StudySpec& spec) {
  if (rule.empty()) return absl::OkStatus();
  if (rule == "off") {
    spec.clear_early_stopping();
  } else if (rule == "median") {
    spec.mutable_early_stopping()->mutable_median();
  } else if (rule == "asha") {
    spec.mutable_early_stopping()->mutable_asha();
  } else if (rule == "hyperband") {
    spec.mutable_early_stopping()->mutable_hyperband();
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--early_stopping=", rule, ": expected off, median, asha or hyperband (or leave it unset to keep "
        "the study's own rule; other settings go in the study file)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::StudySpec> ReadStudyFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadTextFile(path, kMaxStudyFileBytes));
  absl::StatusOr<v1::StudySpec> spec = ParseStudySpec(text);
  if (!spec.ok()) return absl::Status(spec.status().code(), absl::StrCat(path, ": ", spec.status().message()));
  return spec;
}

}  // namespace dhpt::cli
