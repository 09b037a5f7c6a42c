#include "services/study/spec_difference.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "services/study/spec_errors.h"

namespace dhpt::study {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::util::MessageDifferencer;

// Collects the top-level field of every difference MessageDifferencer finds.
class TopLevelFields : public MessageDifferencer::Reporter {
 public:
  void ReportAdded(const Message&, const Message&,
                   const std::vector<MessageDifferencer::SpecificField>& path) override {
    Add(path);
  }
  void ReportDeleted(const Message&, const Message&,
                     const std::vector<MessageDifferencer::SpecificField>& path) override {
    Add(path);
  }
  void ReportModified(const Message&, const Message&,
                      const std::vector<MessageDifferencer::SpecificField>& path) override {
    Add(path);
  }
  const std::set<const FieldDescriptor*>& fields() const { return fields_; }

 private:
  void Add(const std::vector<MessageDifferencer::SpecificField>& path) {
    if (!path.empty() && path.front().field != nullptr) fields_.insert(path.front().field);
  }
  std::set<const FieldDescriptor*> fields_;
};

std::string Shown(const v1::StudySpec& spec, const FieldDescriptor* field) {
  if (field->has_presence() && !spec.GetReflection()->HasField(spec, field)) return "unset";
  std::string text;
  google::protobuf::TextFormat::PrintFieldValueToString(spec, field, -1, &text);
  return text;
}

// Which parameters differ, by name: "x changed, y only there, z only here".
std::string ParameterDifference(const v1::StudySpec& stored, const v1::StudySpec& given) {
  std::map<std::string, const v1::Parameter*> there, here;
  for (const v1::Parameter& p : stored.parameters()) there.emplace(p.name(), &p);
  for (const v1::Parameter& p : given.parameters()) here.emplace(p.name(), &p);
  std::vector<std::string> parts;
  for (const auto& [name, parameter] : there) {
    auto it = here.find(name);
    if (it == here.end()) {
      parts.push_back(absl::StrCat(Quote(name), " only there"));
    } else if (!MessageDifferencer::Equals(*parameter, *it->second)) {
      parts.push_back(absl::StrCat(Quote(name), " changed"));
    }
  }
  for (const auto& [name, parameter] : here) {
    if (!there.contains(name)) parts.push_back(absl::StrCat(Quote(name), " only here"));
  }
  if (parts.empty()) return "in their order";
  constexpr size_t kShown = 5;
  const size_t more = parts.size() > kShown ? parts.size() - kShown : 0;
  parts.resize(std::min(parts.size(), kShown));
  return absl::StrCat(absl::StrJoin(parts, ", "), more > 0 ? absl::StrCat(" and ", more, " more") : "");
}

}  // namespace

SpecDifference DifferenceOf(const v1::StudySpec& stored, const v1::StudySpec& given) {
  TopLevelFields differing;
  MessageDifferencer differencer;
  differencer.ReportDifferencesTo(&differing);
  SpecDifference difference;
  if (differencer.Compare(stored, given)) return difference;
  std::vector<std::string> parts;
  // In the spec's own order, whatever order the differencer found them in.
  const google::protobuf::Descriptor* descriptor = v1::StudySpec::descriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    if (!differing.fields().contains(field)) continue;
    difference.fields.push_back(field->name());
    if (field->name() == "parameters") {
      parts.push_back(absl::StrCat("parameters differ: ", ParameterDifference(stored, given)));
    } else if (field->is_repeated() || field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      parts.push_back(absl::StrCat(field->name(), " differ", field->is_repeated() ? "" : "s"));
    } else {
      parts.push_back(absl::StrCat(field->name(), " is ", Shown(stored, field), " there and ",
                                   Shown(given, field), " here"));
    }
  }
  if (parts.empty()) parts.push_back("fields unknown to this scheduler differ");
  difference.text = absl::StrJoin(parts, "; ");
  return difference;
}

}  // namespace dhpt::study
