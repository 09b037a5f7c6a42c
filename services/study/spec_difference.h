#ifndef DHPT_SERVICES_STUDY_SPEC_DIFFERENCE_H_
#define DHPT_SERVICES_STUDY_SPEC_DIFFERENCE_H_

#include <string>

#include "dhpt/v1/common.pb.h"

namespace dhpt::study {

// What differs between a study's stored spec and one submitted under its name, in words a
// user acts on: each differing top-level field, with both values where the field is a
// number or a word ("max_trials is 20 there and 10 here; parameters differ"). Empty when
// the two are equal. Both are expected normalised (NormalizeStudySpec), so that a default
// written out and one left unset do not differ.
std::string SpecDifference(const v1::StudySpec& stored, const v1::StudySpec& given);

}  // namespace dhpt::study

#endif  // DHPT_SERVICES_STUDY_SPEC_DIFFERENCE_H_
