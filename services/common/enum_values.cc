#include "services/common/enum_values.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"

namespace dhpt {
namespace {

using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

absl::Status Undefined(const std::string& field, const EnumDescriptor& type, int number) {
  std::vector<std::string> names;
  for (int i = 0; i < type.value_count(); ++i) names.push_back(type.value(i)->name());
  return absl::InvalidArgumentError(absl::StrCat(
      field, ": ", number, " is no value of ", type.name(), "; one of ", absl::StrJoin(names, ", ")));
}

absl::Status CheckField(const Message& message, const Reflection& reflection,
                        const FieldDescriptor& field, const std::string& path) {
  if (field.is_repeated()) {
    const int size = reflection.FieldSize(message, &field);
    for (int i = 0; i < size; ++i) {
      const std::string item = absl::StrCat(path, "[", i, "]");
      if (field.cpp_type() == FieldDescriptor::CPPTYPE_ENUM) {
        const int number = reflection.GetRepeatedEnumValue(message, &field, i);
        if (field.enum_type()->FindValueByNumber(number) == nullptr) {
          return Undefined(item, *field.enum_type(), number);
        }
      } else if (field.cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        // A map entry's key cannot be an enum; its value is checked as a field of the entry.
        const Message& element = reflection.GetRepeatedMessage(message, &field, i);
        if (absl::Status status = CheckEnumValues(element, field.is_map() ? path : item);
            !status.ok()) {
          return status;
        }
      }
    }
    return absl::OkStatus();
  }
  if (field.cpp_type() == FieldDescriptor::CPPTYPE_ENUM) {
    const int number = reflection.GetEnumValue(message, &field);
    if (field.enum_type()->FindValueByNumber(number) == nullptr) {
      return Undefined(path, *field.enum_type(), number);
    }
  } else if (field.cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
    return CheckEnumValues(reflection.GetMessage(message, &field), path);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckEnumValues(const Message& message, const std::string& root) {
  const Reflection& reflection = *message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection.ListFields(message, &fields);  // Only the fields set: unset enums read as 0.
  for (const FieldDescriptor* field : fields) {
    const std::string path = root.empty() ? field->name() : absl::StrCat(root, ".", field->name());
    if (absl::Status status = CheckField(message, reflection, *field, path); !status.ok()) {
      return status;
    }
  }
  return absl::OkStatus();
}

}  // namespace dhpt
