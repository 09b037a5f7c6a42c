#ifndef DHPT_SERVICES_STUDY_SPEC_DIFFERENCE_H_
#define DHPT_SERVICES_STUDY_SPEC_DIFFERENCE_H_

#include <string>
#include <vector>

#include "dhpt/v1/common.pb.h"

namespace dhpt::study {

// What differs between a study's stored spec and one submitted under its name.
struct SpecDifference {
  // The differing top-level fields, in the spec's order ("max_trials", "parameters").
  std::vector<std::string> fields;
  // In words a user acts on: each field, with both values where it is a number or a word, and
  // for the parameters which ones ("max_trials is 20 there and 10 here; parameters differ: x
  // changed, y only there"). Empty when the two are equal.
  std::string text;
};

// Both are expected normalised (NormalizeStudySpec), so that a default written out and one
// left unset do not differ.
SpecDifference DifferenceOf(const v1::StudySpec& stored, const v1::StudySpec& given);

}  // namespace dhpt::study

#endif  // DHPT_SERVICES_STUDY_SPEC_DIFFERENCE_H_
