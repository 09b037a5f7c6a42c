#include "services/cli/cli_json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "dhpt/v1/common.pb.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "services/cli/study_file.h"

namespace dhpt::cli {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

void AppendString(absl::string_view text, std::string& out) { out += JsonString(text); }

// The shortest text that reads back as the same double; JSON has no NaN or infinity.
void AppendDouble(double value, std::string& out) {
  if (!std::isfinite(value)) {
    out += "null";
    return;
  }
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  out.append(buffer, result.ptr);
}

void AppendNewline(int indent, std::string& out) {
  out += '\n';
  out.append(static_cast<size_t>(indent) * 2, ' ');
}

void AppendMessage(const Message& message, int indent, std::string& out);

// Element `index` of a repeated field, or the singular field when index < 0.
void AppendValue(const Message& message, const FieldDescriptor& field, int index, int indent,
                 std::string& out) {
  const Reflection& r = *message.GetReflection();
  const bool repeated = index >= 0;
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      absl::StrAppend(&out, repeated ? r.GetRepeatedInt32(message, &field, index)
                                     : r.GetInt32(message, &field));
      return;
    case FieldDescriptor::CPPTYPE_INT64:
      absl::StrAppend(&out, repeated ? r.GetRepeatedInt64(message, &field, index)
                                     : r.GetInt64(message, &field));
      return;
    case FieldDescriptor::CPPTYPE_UINT32:
      absl::StrAppend(&out, repeated ? r.GetRepeatedUInt32(message, &field, index)
                                     : r.GetUInt32(message, &field));
      return;
    case FieldDescriptor::CPPTYPE_UINT64:
      absl::StrAppend(&out, repeated ? r.GetRepeatedUInt64(message, &field, index)
                                     : r.GetUInt64(message, &field));
      return;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      AppendDouble(repeated ? r.GetRepeatedDouble(message, &field, index)
                            : r.GetDouble(message, &field), out);
      return;
    case FieldDescriptor::CPPTYPE_FLOAT:
      AppendDouble(repeated ? r.GetRepeatedFloat(message, &field, index)
                            : r.GetFloat(message, &field), out);
      return;
    case FieldDescriptor::CPPTYPE_BOOL:
      out += (repeated ? r.GetRepeatedBool(message, &field, index) : r.GetBool(message, &field))
                 ? "true" : "false";
      return;
    case FieldDescriptor::CPPTYPE_ENUM: {
      const int number = repeated ? r.GetRepeatedEnumValue(message, &field, index)
                                  : r.GetEnumValue(message, &field);
      const auto* value = field.enum_type()->FindValueByNumber(number);
      if (value != nullptr) {
        AppendString(value->name(), out);
      } else {
        absl::StrAppend(&out, number);  // A value from a newer scheduler.
      }
      return;
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      const std::string text = repeated ? r.GetRepeatedString(message, &field, index)
                                        : r.GetString(message, &field);
      AppendString(field.type() == FieldDescriptor::TYPE_BYTES ? absl::Base64Escape(text) : text,
                   out);
      return;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      AppendMessage(repeated ? r.GetRepeatedMessage(message, &field, index)
                             : r.GetMessage(message, &field),
                    indent, out);
      return;
  }
}

// A map entry's key as JSON object key text.
std::string MapKey(const Message& entry) {
  const FieldDescriptor& key = *entry.GetDescriptor()->map_key();
  const Reflection& r = *entry.GetReflection();
  switch (key.cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING: return r.GetString(entry, &key);
    case FieldDescriptor::CPPTYPE_INT32: return absl::StrCat(r.GetInt32(entry, &key));
    case FieldDescriptor::CPPTYPE_INT64: return absl::StrCat(r.GetInt64(entry, &key));
    case FieldDescriptor::CPPTYPE_UINT32: return absl::StrCat(r.GetUInt32(entry, &key));
    case FieldDescriptor::CPPTYPE_UINT64: return absl::StrCat(r.GetUInt64(entry, &key));
    case FieldDescriptor::CPPTYPE_BOOL: return r.GetBool(entry, &key) ? "true" : "false";
    default: return "";
  }
}

void AppendField(const Message& message, const FieldDescriptor& field, int indent,
                 std::string& out) {
  const Reflection& r = *message.GetReflection();
  if (field.is_map()) {
    // Sorted by key, so that the output of the same study is the same text.
    std::vector<std::pair<std::string, int>> entries;
    for (int i = 0; i < r.FieldSize(message, &field); ++i) {
      entries.emplace_back(MapKey(r.GetRepeatedMessage(message, &field, i)), i);
    }
    std::sort(entries.begin(), entries.end());
    if (entries.empty()) {
      out += "{}";
      return;
    }
    out += '{';
    const FieldDescriptor& value = *field.message_type()->map_value();
    for (size_t k = 0; k < entries.size(); ++k) {
      AppendNewline(indent + 1, out);
      AppendString(entries[k].first, out);
      out += ": ";
      AppendValue(r.GetRepeatedMessage(message, &field, entries[k].second), value, -1, indent + 1,
                  out);
      if (k + 1 < entries.size()) out += ',';
    }
    AppendNewline(indent, out);
    out += '}';
  } else if (field.is_repeated()) {
    const int size = r.FieldSize(message, &field);
    if (size == 0) {
      out += "[]";
      return;
    }
    out += '[';
    for (int i = 0; i < size; ++i) {
      AppendNewline(indent + 1, out);
      AppendValue(message, field, i, indent + 1, out);
      if (i + 1 < size) out += ',';
    }
    AppendNewline(indent, out);
    out += ']';
  } else if (field.has_presence() && !r.HasField(message, &field)) {
    out += "null";
  } else {
    AppendValue(message, field, -1, indent, out);
  }
}

void AppendMessage(const Message& message, int indent, std::string& out) {
  const google::protobuf::Descriptor& descriptor = *message.GetDescriptor();
  // A parameter's value is the value itself.
  if (descriptor.full_name() == v1::ParameterValue::descriptor()->full_name()) {
    const auto& value = static_cast<const v1::ParameterValue&>(message);
    switch (value.kind_case()) {
      case v1::ParameterValue::kDoubleValue: AppendDouble(value.double_value(), out); return;
      case v1::ParameterValue::kIntValue: absl::StrAppend(&out, value.int_value()); return;
      case v1::ParameterValue::kStringValue: AppendString(value.string_value(), out); return;
      case v1::ParameterValue::KIND_NOT_SET: out += "null"; return;
    }
  }
  // Well-known types (Timestamp, Duration, Struct, ...) keep their proto3 JSON form.
  if (descriptor.file()->package() == "google.protobuf") {
    std::string json;
    if (google::protobuf::util::MessageToJsonString(message, &json).ok()) {
      out += json;
    } else {
      out += "null";
    }
    return;
  }
  std::vector<const FieldDescriptor*> fields;
  for (int i = 0; i < descriptor.field_count(); ++i) {
    const FieldDescriptor* field = descriptor.field(i);
    // Of a oneof, only the member that is set: the others are not zero values, they are absent.
    if (field->real_containing_oneof() != nullptr &&
        !message.GetReflection()->HasField(message, field)) {
      continue;
    }
    fields.push_back(field);
  }
  if (fields.empty()) {
    out += "{}";
    return;
  }
  out += '{';
  for (size_t i = 0; i < fields.size(); ++i) {
    AppendNewline(indent + 1, out);
    AppendString(fields[i]->name(), out);
    out += ": ";
    AppendField(message, *fields[i], indent + 1, out);
    if (i + 1 < fields.size()) out += ',';
  }
  AppendNewline(indent, out);
  out += '}';
}

}  // namespace

std::string CliJson(const google::protobuf::Message& message) {
  std::string out;
  AppendMessage(message, 0, out);
  out += '\n';
  return out;
}

}  // namespace dhpt::cli
