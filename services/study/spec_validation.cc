#include "services/study/spec_validation.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <regex>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/json_util.h"
#include "services/common/benchmark_functions.h"
#include "services/common/dataset_defaults.h"
#include "services/common/enum_values.h"
#include "services/common/model_catalog.h"
#include "services/common/status_macros.h"
#include "services/common/unsafe_text.h"
#include "services/study/condition_validation.h"
#include "services/study/model_choice.h"
#include "services/study/spec_errors.h"
#include "services/optimizer/bayesian_optimization.h"
#include "services/optimizer/optimizer.h"
#include "services/study/early_stopping.h"
#include "services/study/early_stopping_defaults.h"
#include "services/study/objectives_validation.h"
#include "services/study/spec_translation.h"

namespace dhpt::study {
namespace {

// The text a spec may carry in values, keys and paths: bounded, with no control characters.
absl::Status CheckText(absl::string_view field, absl::string_view text) {
  if (text.size() > kMaxStringBytes) {
    return Invalid(field, absl::StrCat("is ", text.size(), " bytes, more than the limit of ",
                                       kMaxStringBytes));
  }
  for (size_t at = 0; at < text.size(); ++at) {
    // Not quoted back: the error would carry the character to the caller's terminal.
    if (UnsafeCharacterBytes(text, at) > 0) {
      return Invalid(field, absl::StrCat("holds a control or invisible character (a newline, a "
                                         "tab, an escape code, a direction override) at byte ",
                                         at, "; use printable text"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateName(const std::string& name, absl::string_view field = "name") {
  static const std::regex kName("[A-Za-z0-9]([A-Za-z0-9._-]{0,126}[A-Za-z0-9])?");
  if (name.empty()) return Invalid(field, "is required");
  if (name.size() > 128 || !std::regex_match(name, kName)) {
    return Invalid(field,
                   absl::StrCat(Quote(name),
                                " must be 1-128 letters, digits, '.', '_' or '-', starting "
                                "and ending with a letter or digit"));
  }
  return absl::OkStatus();
}

absl::Status ValidateModel(v1::StudySpec& spec) {
  const v1::Model& model = spec.model();
  switch (model.kind()) {
    case v1::Model::XGBOOST:
    case v1::Model::RANDOM_FOREST:
      break;
    case v1::Model::FUNCTION: {
      if (const MultiObjectiveFunction* problem = FindMultiObjectiveFunction(model.function())) {
        if (spec.parameters_size() < problem->min_dims) {
          return Invalid("parameters", absl::StrCat(problem->name, " takes at least ",
                                                    problem->min_dims, " parameters x1..xd, not ",
                                                    spec.parameters_size()));
        }
        break;
      }
      const BenchmarkFunction* function = FindBenchmarkFunction(model.function());
      if (function == nullptr) {
        return Invalid("model.function",
                       absl::StrCat(Quote(model.function()), " is not one of ",
                                    BenchmarkFunctionNames()));
      }
      const int d = spec.parameters_size();
      if (!function->AcceptsDims(d)) {
        return Invalid("parameters",
                       function->dims > 0
                           ? absl::StrCat(function->name, " takes exactly ", function->dims,
                                          " parameters x1..x", function->dims, ", not ", d)
                           : absl::StrCat(function->name, " takes at least ",
                                          function->min_dims, " parameters x1..xd, not ", d));
      }
      break;
    }
    case v1::Model::AUTOENCODER:
      break;
    case v1::Model::COMMAND:
      if (model.command().empty()) {
        return Invalid("model.command", "is required: the name of a command the workers' "
                                        "operator registered (dhpt-cpu-worker --command=NAME=PATH)");
      }
      if (!IsUserCodeName(model.command())) {
        return Invalid("model.command", absl::StrCat(Quote(model.command()),
                                                     " is not a command name: 1-64 letters, "
                                                     "digits, '.', '_' or '-'"));
      }
      break;
    case v1::Model::EXTERNAL:
      if (model.fixed_size() > 0) {
        return Invalid("model.fixed", "EXTERNAL studies are evaluated by your own client, which "
                                      "keeps its fixed settings itself");
      }
      break;
    default:
      return Invalid("model.kind", "is required: one of XGBOOST, RANDOM_FOREST, AUTOENCODER, "
                                   "FUNCTION, COMMAND, EXTERNAL");
  }
  if (model.kind() != v1::Model::FUNCTION && !model.function().empty()) {
    return Invalid("model.function", "is only for FUNCTION models");
  }
  if (model.kind() != v1::Model::COMMAND && !model.command().empty()) {
    return Invalid("model.command", "is only for COMMAND models");
  }
  if (spec.allow_cpu_fallback() && model.kind() != v1::Model::AUTOENCODER) {
    return Invalid("allow_cpu_fallback",
                   "is only for AUTOENCODER studies; the other models run on CPU workers anyway");
  }
  if (model.fixed_size() > kMaxFixedHyperparameters) {
    return Invalid("model.fixed", absl::StrCat("has ", model.fixed_size(),
                                               " entries, more than the limit of ",
                                               kMaxFixedHyperparameters));
  }
  for (const auto& [key, value] : model.fixed()) {
    RETURN_IF_ERROR(CheckText("model.fixed", key));
    const std::string field = absl::StrCat("model.fixed.", key);
    if (model.kind() == v1::Model::FUNCTION) {
      // One knob: how long each trial takes, to stand in for a costly objective (tests of
      // restarts, demos of the scheduler at work).
      if (key != kFunctionSecondsKey || value.kind_case() != google::protobuf::Value::kNumberValue ||
          !(value.number_value() >= 0 && value.number_value() <= kMaxFunctionSeconds)) {
        return Invalid(field, absl::StrCat("FUNCTION models take one fixed value, ",
                                           kFunctionSecondsKey, ": a number of seconds from 0 to ",
                                           kMaxFunctionSeconds, " each trial takes"));
      }
      continue;
    }
    if (IsUserCode(model.kind())) {
      if (!IsUserCodeName(key)) {
        return Invalid(field, "a COMMAND's fixed values become --name=value arguments: names "
                              "are 1-64 letters, digits, '.', '_' or '-'");
      }
    } else if (!IsKnownHyperparameter(model.kind(), key)) {
      return Invalid(field, absl::StrCat("is not a hyperparameter of ",
                                         v1::Model::Kind_Name(model.kind()), "; known: ",
                                         absl::StrJoin(KnownHyperparameters(model.kind()), ", ")));
    }
    const auto kind = value.kind_case();
    if (kind != google::protobuf::Value::kNumberValue &&
        kind != google::protobuf::Value::kStringValue && kind != google::protobuf::Value::kBoolValue) {
      return Invalid(field, "must be a number, string or boolean");
    }
    if (kind == google::protobuf::Value::kNumberValue && !std::isfinite(value.number_value())) {
      return Invalid(field, "must be a finite number");
    }
    if (kind == google::protobuf::Value::kStringValue) {
      RETURN_IF_ERROR(CheckText(field, value.string_value()));
      // A command line cannot carry a NUL: the argument would be cut short.
      if (value.string_value().find('\0') != std::string::npos) {
        return Invalid(field, "must not contain a NUL byte");
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateDataset(v1::StudySpec& spec, const SpecLimits& limits) {
  const v1::Model::Kind kind = spec.model().kind();
  if (kind == v1::Model::FUNCTION || IsUserCode(kind)) {
    if (spec.has_dataset()) {
      return Invalid("dataset", absl::StrCat(v1::Model::Kind_Name(kind), " models take no "
                                             "dataset", IsUserCode(kind) ? ": your code loads its own" : ""));
    }
    return absl::OkStatus();
  }
  v1::Dataset& dataset = *spec.mutable_dataset();
  switch (dataset.source_case()) {
    case v1::Dataset::kFriedman1: {
      const v1::Friedman1& f = dataset.friedman1();
      if (f.samples() < 20 || f.samples() > 10'000'000) {
        return Invalid("dataset.friedman1.samples", "must be between 20 and 10000000");
      }
      if (f.features() < 5 || f.features() > 10'000) {
        return Invalid("dataset.friedman1.features", "must be between 5 and 10000");
      }
      if (!(f.noise() >= 0) || !std::isfinite(f.noise())) {
        return Invalid("dataset.friedman1.noise", "must be a finite number >= 0");
      }
      break;
    }
    case v1::Dataset::kSensors: {
      v1::SensorChannels& sensors = *dataset.mutable_sensors();
      if (sensors.samples() < 20 || sensors.samples() > 10'000'000) {
        return Invalid("dataset.sensors.samples", "must be between 20 and 10000000");
      }
      if (sensors.channels() == 0) sensors.set_channels(kDefaultSensorChannels);
      if (sensors.latent() == 0) sensors.set_latent(kDefaultSensorLatent);
      if (sensors.noise() == 0) sensors.set_noise(kDefaultSensorNoise);
      if (sensors.channels() < 2 || sensors.channels() > 10'000) {
        return Invalid("dataset.sensors.channels", "must be between 2 and 10000");
      }
      if (sensors.latent() < 1 || sensors.latent() >= sensors.channels()) {
        return Invalid("dataset.sensors.latent",
                       absl::StrCat("must be at least 1 and less than channels (", sensors.channels(), ")"));
      }
      if (!(sensors.noise() > 0) || !std::isfinite(sensors.noise())) {
        return Invalid("dataset.sensors.noise", "must be a finite number > 0");
      }
      break;
    }
    case v1::Dataset::kCsv:
      if (dataset.csv().path().empty()) return Invalid("dataset.csv.path", "is required");
      RETURN_IF_ERROR(CheckText("dataset.csv.path", dataset.csv().path()));
      RETURN_IF_ERROR(CheckText("dataset.csv.target", dataset.csv().target()));
      if (dataset.csv().target().empty() && spec.model().kind() != v1::Model::AUTOENCODER) {
        return Invalid("dataset.csv.target", "is required: the column the model predicts");
      }
      break;
    default:
      return Invalid("dataset", "is required: set friedman1, sensors or csv");
  }
  if (dataset.validation_fraction() == 0) {
    dataset.set_validation_fraction(kDefaultValidationFraction);
  }
  if (!(dataset.validation_fraction() > 0 && dataset.validation_fraction() < 1)) {
    return Invalid("dataset.validation_fraction", "must be between 0 and 1 (exclusive)");
  }
  // Each bound alone is fine; together they may not be (10^7 rows x 10^4 columns).
  if (const int64_t bytes = EstimatedDatasetBytes(dataset); bytes > limits.max_dataset_bytes) {
    return Invalid("dataset",
                   absl::StrCat("would take about ", bytes >> 20, " MiB on a worker, more than "
                                "the scheduler's limit of ", limits.max_dataset_bytes >> 20,
                                " MiB (--max_dataset_bytes); use fewer samples or features"));
  }
  return absl::OkStatus();
}

absl::Status ValidateParameter(const v1::Parameter& p, const std::string& field) {
  auto finite = [](double v) { return std::isfinite(v); };
  switch (p.domain_case()) {
    case v1::Parameter::kDoubleRange: {
      const v1::DoubleRange& r = p.double_range();
      const std::string f = field + ".double_range";
      if (!finite(r.min()) || !finite(r.max()) || !finite(r.max() - r.min())) {
        return Invalid(f, "min, max and their difference must be finite numbers");
      }
      if (r.min() >= r.max()) {
        return Invalid(f, absl::StrCat("min (", r.min(), ") must be less than max (", r.max(), ")"));
      }
      if (r.log() && r.min() <= 0) {
        return Invalid(f, absl::StrCat("log needs min > 0, got ", r.min()));
      }
      if (r.step() < 0 || !finite(r.step())) return Invalid(f, "step must be >= 0");
      if (r.step() > 0 && r.log()) return Invalid(f, "step and log cannot be combined");
      if (r.step() > r.max() - r.min()) return Invalid(f, "step is wider than the range");
      return absl::OkStatus();
    }
    case v1::Parameter::kIntRange: {
      const v1::IntRange& r = p.int_range();
      const std::string f = field + ".int_range";
      if (r.min() >= r.max()) {
        return Invalid(f, absl::StrCat("min (", r.min(), ") must be less than max (", r.max(), ")"));
      }
      if (r.log() && r.min() <= 0) {
        return Invalid(f, absl::StrCat("log needs min >= 1, got ", r.min()));
      }
      // Before any arithmetic on the bounds: max - min (and std::abs) of int64 extremes
      // overflow, which is undefined behaviour (found by fuzz/spec_fuzzer).
      constexpr int64_t kBound = int64_t{1} << 53;
      if (r.min() < -kBound || r.max() > kBound) {
        return Invalid(f, "min and max must be within +-2^53");
      }
      if (r.step() < 0) return Invalid(f, "step must be >= 0");
      if (r.step() > 1 && r.log()) return Invalid(f, "step and log cannot be combined");
      if (r.step() > r.max() - r.min()) return Invalid(f, "step is wider than the range");
      return absl::OkStatus();
    }
    case v1::Parameter::kCategorical: {
      const std::string f = field + ".categorical.values";
      if (p.categorical().values().empty()) return Invalid(f, "must not be empty");
      if (p.categorical().values_size() > kMaxChoices) {
        return Invalid(f, absl::StrCat("has more than ", kMaxChoices, " values"));
      }
      absl::flat_hash_set<std::string> seen;
      for (const std::string& v : p.categorical().values()) {
        if (v.empty()) return Invalid(f, "values must not be empty strings");
        if (v.find('\0') != std::string::npos) return Invalid(f, "values must not contain a NUL byte");
        RETURN_IF_ERROR(CheckText(f, v));
        if (!seen.insert(v).second) return Invalid(f, absl::StrCat(Quote(v), " appears twice"));
      }
      return absl::OkStatus();
    }
    case v1::Parameter::kDiscrete: {
      const std::string f = field + ".discrete.values";
      if (p.discrete().values().empty()) return Invalid(f, "must not be empty");
      if (p.discrete().values_size() > kMaxChoices) {
        return Invalid(f, absl::StrCat("has more than ", kMaxChoices, " values"));
      }
      absl::flat_hash_set<double> seen;
      for (double v : p.discrete().values()) {
        if (!finite(v)) return Invalid(f, "values must be finite");
        if (!seen.insert(v).second) return Invalid(f, absl::StrCat(v, " appears twice"));
      }
      return absl::OkStatus();
    }
    case v1::Parameter::DOMAIN_NOT_SET:
      break;
  }
  return Invalid(field, "needs a domain: double_range, int_range, categorical or discrete");
}

absl::Status ValidateParameterName(const v1::StudySpec& spec, const v1::Parameter& p, int i,
                                   const std::string& field,
                                   absl::flat_hash_set<std::string>& names, bool model_ok) {
  const v1::Model::Kind kind = spec.model().kind();
  if (p.name().empty()) return Invalid(field + ".name", "is required");
  if (p.name().size() > 128) return Invalid(field + ".name", "is longer than 128 bytes");
  if (!names.insert(p.name()).second) {
    return Invalid(field + ".name", absl::StrCat(Quote(p.name()), " is defined twice"));
  }
  if (!model_ok) return absl::OkStatus();  // Its names depend on the model, which is wrong.
  if (kind == v1::Model::FUNCTION) {
    const std::string expected = absl::StrCat("x", i + 1);
    if (p.name() != expected) {
      return Invalid(field + ".name", absl::StrCat("FUNCTION parameters are x1..xd in order; "
                                                   "expected \"", expected, "\", got \"",
                                                   p.name(), "\""));
    }
    if (p.domain_case() != v1::Parameter::kDoubleRange &&
        p.domain_case() != v1::Parameter::kIntRange &&
        p.domain_case() != v1::Parameter::kDiscrete) {
      return Invalid(field, "FUNCTION parameters must be numeric");
    }
  } else if (IsUserCode(kind)) {
    if (!IsUserCodeName(p.name())) {
      return Invalid(field + ".name",
                     absl::StrCat(Quote(p.name()), ": your code gets each parameter as "
                                  "--name=value, so names are 1-64 letters, digits, '.', '_' "
                                  "or '-', not starting with '-' or '.'"));
    }
    if (spec.model().fixed().contains(p.name())) {
      return Invalid(field + ".name",
                     absl::StrCat("\"", p.name(), "\" is also in model.fixed; tune it or fix it"));
    }
  } else if (p.name() == kModelKindParameter) {
    return absl::OkStatus();  // Model choice: ValidateConditions checks it.
  } else if (!IsKnownHyperparameter(kind, p.name()) &&
             ModelKindParameter(spec) < 0) {
    return Invalid(field + ".name",
                   absl::StrCat(Quote(p.name()), " is not a hyperparameter of ",
                                v1::Model::Kind_Name(kind), "; known: ",
                                absl::StrJoin(KnownHyperparameters(kind), ", ")));
  } else if (ModelKindParameter(spec) >= 0) {
    // Model choice: known to every kind under which it can be active.
    for (v1::Model::Kind each : ParameterModelKinds(spec, i)) {
      if (!IsKnownHyperparameter(each, p.name())) {
        return Invalid(field + ".name",
                       absl::StrCat(Quote(p.name()), " is not a hyperparameter of ",
                                    v1::Model::Kind_Name(each), ", for which it can be active; "
                                    "give it a condition on model_kind"));
      }
    }
  }
  if (spec.model().fixed().contains(p.name())) {
    return Invalid(field + ".name",
                   absl::StrCat("\"", p.name(), "\" is also in model.fixed; tune it or fix it"));
  }
  return absl::OkStatus();
}

// A range whose min equals its max is that one value, as Optuna takes it: it becomes a discrete
// parameter of one value, which every optimiser suggests as is (and the study shows as such).
void FixSingleValueRange(v1::Parameter& p) {
  double value = 0;
  constexpr int64_t kExact = int64_t{1} << 53;  // Whole numbers a double holds exactly.
  if (p.has_int_range() && p.int_range().min() == p.int_range().max() &&
      std::abs(p.int_range().min()) <= kExact) {
    value = static_cast<double>(p.int_range().min());
  } else if (p.has_double_range() && p.double_range().min() == p.double_range().max() &&
             std::isfinite(p.double_range().min())) {
    value = p.double_range().min();
  } else {
    return;
  }
  p.mutable_discrete()->add_values(value);  // Clears the range: one domain per parameter.
}

// Checks each parameter; its errors (one per parameter) go to `errors`. False if any.
bool ValidateParameters(v1::StudySpec& spec, bool model_ok, std::vector<absl::Status>& errors) {
  if (spec.parameters().empty()) {
    errors.push_back(Invalid("parameters", "must not be empty"));
    return false;
  }
  const size_t before = errors.size();
  absl::flat_hash_set<std::string> names;
  for (int i = 0; i < spec.parameters_size(); ++i) {
    FixSingleValueRange(*spec.mutable_parameters(i));
    const v1::Parameter& p = spec.parameters(i);
    const std::string field = absl::StrCat("parameters[", i, "]");
    if (absl::Status status = ValidateParameterName(spec, p, i, field, names, model_ok);
        !status.ok()) {
      errors.push_back(std::move(status));
    } else if (absl::Status domain = ValidateParameter(p, field); !domain.ok()) {
      errors.push_back(std::move(domain));
    }
  }
  return errors.size() == before;
}

// Range checks for settings; a value of 0 (unset) takes the default.
absl::Status ValidateTpe(v1::Algorithm& algorithm) {
  if (algorithm.name() != v1::Algorithm::TPE) {
    if (algorithm.has_tpe()) return Invalid("algorithm.tpe", "is only for TPE");
    return absl::OkStatus();
  }
  v1::TpeSettings& tpe = *algorithm.mutable_tpe();
  if (!tpe.has_n_startup_trials()) tpe.set_n_startup_trials(10);
  if (tpe.n_startup_trials() < 0 || tpe.n_startup_trials() > 10000) {
    return Invalid("algorithm.tpe.n_startup_trials", "must be between 0 and 10000");
  }
  if (tpe.n_ei_candidates() == 0) tpe.set_n_ei_candidates(24);
  if (tpe.n_ei_candidates() < 1 || tpe.n_ei_candidates() > 10000) {
    return Invalid("algorithm.tpe.n_ei_candidates", "must be between 1 and 10000");
  }
  if (!tpe.has_constant_liar()) tpe.set_constant_liar(true);
  if (!tpe.has_bandwidth_weighted()) tpe.set_bandwidth_weighted(true);
  if (tpe.prior_weight() == 0) tpe.set_prior_weight(1.0);
  if (!(tpe.prior_weight() > 0 && tpe.prior_weight() <= 100)) {
    return Invalid("algorithm.tpe.prior_weight", "must be in (0, 100]");
  }
  return absl::OkStatus();
}

absl::Status ValidateBayesian(v1::Algorithm& algorithm, bool multi_objective) {
  if (algorithm.name() != v1::Algorithm::BAYESIAN) {
    if (algorithm.has_bayesian()) return Invalid("algorithm.bayesian", "is only for BAYESIAN");
    return absl::OkStatus();
  }
  v1::BayesianSettings& bayesian = *algorithm.mutable_bayesian();
  if (!bayesian.has_n_startup_trials()) bayesian.set_n_startup_trials(10);
  if (bayesian.n_startup_trials() < 2 || bayesian.n_startup_trials() > 10000) {
    return Invalid("algorithm.bayesian.n_startup_trials", "must be between 2 and 10000");
  }
  if (bayesian.candidates() == 0) bayesian.set_candidates(512);
  if (bayesian.candidates() < 16 || bayesian.candidates() > 100000) {
    return Invalid("algorithm.bayesian.candidates", "must be between 16 and 100000");
  }
  if (!bayesian.has_warp_objective()) bayesian.set_warp_objective(true);
  if (bayesian.max_fit_points() == 0) {
    bayesian.set_max_fit_points(multi_objective ? optimizer::kParEgoMaxFitPoints : 128);
  }
  if (bayesian.max_fit_points() < 8 || bayesian.max_fit_points() > 2000) {
    return Invalid("algorithm.bayesian.max_fit_points", "must be between 8 and 2000");
  }
  return absl::OkStatus();
}

// BAYESIAN's matrices grow with the encoded width (a column per numeric parameter, one per
// value of a categorical or discrete one) times the candidates, the fit points and the model
// points: 100 categoricals of 1,000 values made 100,000 columns and 1.69 GB for one suggestion.
// Refused here, before the study exists, rather than failing every suggestion later.
absl::Status ValidateBayesianCost(const v1::StudySpec& spec) {
  const optimizer::SearchSpace space = ToSearchSpace(spec);
  const optimizer::BayesianOptions options = ToOptimizerConfig(spec).bayesian;
  const int64_t width = optimizer::EncodedWidth(space);
  const int64_t bytes = optimizer::BayesianSuggestionBytes(space, options);
  if (bytes > optimizer::kSuggestionMemoryBudgetBytes) {
    return Invalid("parameters",
                   absl::StrCat("BAYESIAN would take up to ", bytes >> 20, " MiB per suggestion, "
                                "more than the budget of ",
                                optimizer::kSuggestionMemoryBudgetBytes >> 20, " MiB (", width,
                                " encoded columns: one per numeric parameter, one per categorical "
                                "or discrete value; max_fit_points ", options.max_fit_points,
                                "); use fewer categorical or discrete values, lower "
                                "algorithm.bayesian.max_fit_points, or use TPE"));
  }
  const int64_t cells = optimizer::BayesianCandidateCells(space, options);
  if (cells > optimizer::kMaxBayesianCandidateCells) {
    return Invalid("algorithm.bayesian.candidates",
                   absl::StrCat(options.candidates, " candidates (and 100 perturbed ones) times ",
                                width, " encoded columns is ", cells, ", more than the limit of ",
                                optimizer::kMaxBayesianCandidateCells,
                                "; lower candidates, use fewer categorical or discrete values, "
                                "or use TPE"));
  }
  return absl::OkStatus();
}

absl::Status ValidateHillClimbing(v1::Algorithm& algorithm) {
  if (algorithm.name() != v1::Algorithm::HILL_CLIMBING) {
    if (algorithm.has_hill_climbing()) {
      return Invalid("algorithm.hill_climbing", "is only for HILL_CLIMBING");
    }
    return absl::OkStatus();
  }
  v1::HillClimbingSettings& hill = *algorithm.mutable_hill_climbing();
  if (hill.initial_step() == 0) hill.set_initial_step(0.2);
  if (!(hill.initial_step() > 0 && hill.initial_step() <= 1)) {
    return Invalid("algorithm.hill_climbing.initial_step", "must be in (0, 1]");
  }
  if (hill.shrink_factor() == 0) hill.set_shrink_factor(0.5);
  if (!(hill.shrink_factor() > 0 && hill.shrink_factor() < 1)) {
    return Invalid("algorithm.hill_climbing.shrink_factor", "must be in (0, 1)");
  }
  if (hill.patience() == 0) hill.set_patience(4);
  if (hill.patience() < 1 || hill.patience() > 1000) {
    return Invalid("algorithm.hill_climbing.patience", "must be between 1 and 1000");
  }
  if (hill.min_step() == 0) hill.set_min_step(std::min(0.02, hill.initial_step()));
  if (!(hill.min_step() > 0 && hill.min_step() <= hill.initial_step())) {
    return Invalid("algorithm.hill_climbing.min_step", "must be in (0, initial_step]");
  }
  if (!hill.has_flip_probability()) hill.set_flip_probability(0.2);
  if (!(hill.flip_probability() >= 0 && hill.flip_probability() <= 1)) {
    return Invalid("algorithm.hill_climbing.flip_probability", "must be in [0, 1]");
  }
  return absl::OkStatus();
}

// The algorithm and its settings; a GRID's size (which needs valid parameters) and, unless
// given, its max_trials.
absl::Status ValidateAlgorithm(v1::StudySpec& spec) {
  v1::Algorithm& algorithm = *spec.mutable_algorithm();
  switch (algorithm.name()) {
    case v1::Algorithm::NAME_UNSPECIFIED:
      algorithm.set_name(v1::Algorithm::RANDOM);
      break;
    case v1::Algorithm::RANDOM:
    case v1::Algorithm::GRID:
    case v1::Algorithm::TPE:
    case v1::Algorithm::HILL_CLIMBING:
    case v1::Algorithm::BAYESIAN:
    case v1::Algorithm::NSGA2:
      break;
    default:
      return Invalid("algorithm.name",
                     "must be RANDOM, GRID, TPE, BAYESIAN, HILL_CLIMBING or NSGA2");
  }
  RETURN_IF_ERROR(ValidateBayesian(algorithm, spec.objectives_size() >= 2));
  if (algorithm.name() == v1::Algorithm::BAYESIAN) RETURN_IF_ERROR(ValidateBayesianCost(spec));
  RETURN_IF_ERROR(ValidateTpe(algorithm));
  RETURN_IF_ERROR(ValidateHillClimbing(algorithm));
  RETURN_IF_ERROR(ValidateNsga2(spec));
  if (algorithm.grid_points() != 0 && algorithm.name() != v1::Algorithm::GRID) {
    return Invalid("algorithm.grid_points", "is only for GRID");
  }
  if (algorithm.name() == v1::Algorithm::GRID) {
    if (algorithm.grid_points() == 0) algorithm.set_grid_points(kDefaultGridPoints);
    if (algorithm.grid_points() < 2 || algorithm.grid_points() > 1000) {
      return Invalid("algorithm.grid_points", "must be between 2 and 1000");
    }
    const std::optional<int64_t> size =
        optimizer::GridSize(ToSearchSpace(spec), algorithm.grid_points());
    if (!size || *size > kMaxGridPoints) {
      return Invalid("parameters",
                     absl::StrCat("the grid has ", size ? absl::StrCat(*size) : "over 2^62",
                                  " points, more than the limit of ", kMaxGridPoints,
                                  "; lower algorithm.grid_points, add steps or narrow ranges"));
    }
    if (spec.max_trials() == 0) spec.set_max_trials(static_cast<int32_t>(*size));
  }
  return absl::OkStatus();
}

// Trial counts, attempts and the timeout. `grid_sized`: false when a GRID's size is unknown
// (its parameters are wrong), so that its max_trials is not blamed for a default it lacks.
void ValidateTrialLimits(v1::StudySpec& spec, const SpecLimits& limits, bool grid_sized,
                         std::vector<absl::Status>& errors) {
  const bool unsized_grid = spec.algorithm().name() == v1::Algorithm::GRID && !grid_sized &&
                            spec.max_trials() == 0;
  if (!unsized_grid && (spec.max_trials() <= 0 || spec.max_trials() > limits.max_trials)) {
    errors.push_back(
        Invalid("max_trials", absl::StrCat("must be between 1 and ", limits.max_trials)));
  }
  if (spec.parallel_trials() < 0) {
    errors.push_back(Invalid("parallel_trials", "must be >= 0 (0: no limit)"));
  }
  if (spec.has_max_failed_trials() && spec.max_failed_trials() < 0) {
    errors.push_back(Invalid("max_failed_trials", "must be >= 0"));
  }
  if (spec.has_fail_fast_trials() && spec.fail_fast_trials() < 0) {
    errors.push_back(Invalid("fail_fast_trials", "must be >= 0 (0: never fail fast)"));
  }
  if (spec.max_attempts() == 0) spec.set_max_attempts(kDefaultMaxAttempts);
  if (spec.max_attempts() < 1 || spec.max_attempts() > 100) {
    errors.push_back(Invalid("max_attempts", "must be between 1 and 100"));
  }
  if (spec.has_trial_timeout()) {
    const google::protobuf::Duration& timeout = spec.trial_timeout();
    if (timeout.seconds() < 1 || timeout.seconds() >= kMaxTrialTimeoutSeconds ||
        timeout.nanos() < 0 || timeout.nanos() > 999'999'999) {
      errors.push_back(Invalid("trial_timeout",
                               absl::StrCat("must be between 1s and ", kMaxTrialTimeoutSeconds,
                                            "s, e.g. \"600s\" (or 10m, 1h30m in a dhpt file)")));
    }
  }
}

// Fills the rule's defaults and checks its ranges.
absl::Status ValidateEarlyStopping(v1::StudySpec& spec) {
  if (!spec.has_early_stopping()) return absl::OkStatus();
  // The rules compare the values trials stream as they train, so those must be the objective.
  const std::optional<absl::string_view> streamed =
      ProgressMetric(spec.model().kind(), spec.objective().metric());
  if (spec.objectives_size() >= 2) {
    return Invalid("early_stopping",
                   "is for studies with one objective: a trial behind on one objective may be "
                   "ahead on another; remove early_stopping or keep one objective");
  }
  if (!streamed) {
    return Invalid("early_stopping", absl::StrCat(v1::Model::Kind_Name(spec.model().kind()),
                                                  " trials stream no progress to judge"));
  }
  if (spec.objective().metric() != *streamed) {
    return Invalid("early_stopping",
                   absl::StrCat(v1::Model::Kind_Name(spec.model().kind()), " trials stream ",
                                *streamed, " as they train, and the rules compare those values; "
                                "the objective is ", spec.objective().metric(), ": set objective."
                                "metric to ", *streamed, " or remove early_stopping"));
  }
  RETURN_IF_ERROR(FillDerivedResources(spec));  // Unset resources, from the trainer's budget.
  v1::EarlyStopping& stopping = *spec.mutable_early_stopping();
  auto percentile = [](v1::PercentileStopping& rule, const std::string& field,
                       bool median) -> absl::Status {
    if (!rule.has_percentile()) rule.set_percentile(50);
    if (median && rule.percentile() != 50) {
      return Invalid(field + ".percentile", "is 50 for median; use percentile for another");
    }
    if (!(rule.percentile() >= 0 && rule.percentile() <= 100)) {
      return Invalid(field + ".percentile", "must be between 0 and 100");
    }
    if (!rule.has_n_startup_trials()) rule.set_n_startup_trials(5);
    if (rule.n_startup_trials() < 0 || rule.n_startup_trials() > 10000) {
      return Invalid(field + ".n_startup_trials", "must be between 0 and 10000");
    }
    if (rule.n_warmup_steps() < 0) return Invalid(field + ".n_warmup_steps", "must be >= 0");
    if (!rule.has_interval_steps()) rule.set_interval_steps(1);
    if (rule.interval_steps() < 1) return Invalid(field + ".interval_steps", "must be >= 1");
    return absl::OkStatus();
  };
  switch (stopping.rule_case()) {
    case v1::EarlyStopping::kMedian:
      return percentile(*stopping.mutable_median(), "early_stopping.median", true);
    case v1::EarlyStopping::kPercentile:
      return percentile(*stopping.mutable_percentile(), "early_stopping.percentile", false);
    case v1::EarlyStopping::kAsha: {
      v1::AshaStopping& asha = *stopping.mutable_asha();
      if (asha.min_resource() < 1) {
        return Invalid("early_stopping.asha.min_resource", "must be >= 1");
      }
      if (!asha.has_reduction_factor()) asha.set_reduction_factor(4);
      if (asha.reduction_factor() < 2 || asha.reduction_factor() > 100) {
        return Invalid("early_stopping.asha.reduction_factor", "must be between 2 and 100");
      }
      if (asha.min_early_stopping_rate() < 0 || asha.min_early_stopping_rate() > 30) {
        return Invalid("early_stopping.asha.min_early_stopping_rate", "must be between 0 and 30");
      }
      return absl::OkStatus();
    }
    case v1::EarlyStopping::kHyperband: {
      v1::HyperbandStopping& hyperband = *stopping.mutable_hyperband();
      const std::string field = "early_stopping.hyperband.";
      if (hyperband.min_resource() < 1) return Invalid(field + "min_resource", "must be >= 1");
      if (hyperband.max_resource() < hyperband.min_resource() ||
          hyperband.max_resource() > kMaxProgressStep) {
        return Invalid(field + "max_resource",
                       absl::StrCat("must be between min_resource (", hyperband.min_resource(),
                                    ") and 2^53"));
      }
      if (!hyperband.has_reduction_factor()) {
        hyperband.set_reduction_factor(kDefaultHyperbandReductionFactor);
      }
      if (hyperband.reduction_factor() < 2 || hyperband.reduction_factor() > 100) {
        return Invalid(field + "reduction_factor", "must be between 2 and 100");
      }
      return absl::OkStatus();
    }
    case v1::EarlyStopping::RULE_NOT_SET:
      return Invalid("early_stopping", "names no rule: median, percentile, asha or hyperband");
  }
  return absl::OkStatus();
}

}  // namespace

int64_t EstimatedDatasetBytes(const v1::Dataset& dataset) {
  int64_t rows = 0, columns = 0;
  if (dataset.has_friedman1()) {
    rows = dataset.friedman1().samples();
    columns = dataset.friedman1().features();
  } else if (dataset.has_sensors()) {
    rows = dataset.sensors().samples();
    columns = dataset.sensors().channels() > 0 ? dataset.sensors().channels()
                                               : kDefaultSensorChannels;
  }
  // Floats for the features and the target, held whole and again as the split.
  return 2 * rows * (columns + 1) * static_cast<int64_t>(sizeof(float));
}

// The longest JSON a string takes in DHPT_PARAMS (the worker's encoder, escapes included).
size_t JsonStringBytes(const std::string& text) {
  google::protobuf::Value value;
  value.set_string_value(text);
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(value, &json);
  return json.size();
}

// A COMMAND trial gets every parameter and fixed value as one JSON object in the environment
// variable DHPT_PARAMS, and Linux refuses to start a program with a variable longer than
// MAX_ARG_STRLEN: a spec whose longest trial would not fit fails every trial, so it is refused.
absl::Status ValidateCommandParams(const v1::StudySpec& spec) {
  if (spec.model().kind() != v1::Model::COMMAND) return absl::OkStatus();
  constexpr size_t kLongestNumber = 24;  // -1.2345678901234567e+308
  size_t longest = 2;                     // {}
  auto add = [&longest](const std::string& name, size_t value_bytes) {
    longest += JsonStringBytes(name) + 1 + value_bytes + 1;  // "name":value,
  };
  for (const auto& [name, value] : spec.model().fixed()) {
    add(name, value.kind_case() == google::protobuf::Value::kStringValue
                  ? JsonStringBytes(value.string_value())
                  : kLongestNumber);
  }
  for (const v1::Parameter& p : spec.parameters()) {
    size_t value_bytes = kLongestNumber;
    for (const std::string& choice : p.categorical().values()) {
      value_bytes = std::max(value_bytes, JsonStringBytes(choice));
    }
    add(p.name(), value_bytes);
  }
  if (longest > kMaxCommandParamsJsonBytes) {
    return Invalid("parameters", absl::StrCat(
        "a COMMAND trial's parameters and fixed values can take ", longest, " bytes as JSON in "
        "DHPT_PARAMS, more than the ", kMaxCommandParamsJsonBytes, " bytes Linux lets one "
        "environment variable hold; use fewer or shorter categorical values"));
  }
  return absl::OkStatus();
}

namespace {

// The columns an AutoEncoder of this data set sees; 0 when only the worker knows (CSV).
int64_t KnownChannels(const v1::Dataset& dataset) {
  if (dataset.has_sensors()) return dataset.sensors().channels();
  if (dataset.has_friedman1()) return dataset.friedman1().features();
  return 0;
}

// Every value a tuned or fixed hyperparameter can take lies in the range its trainer accepts
// (services/common/model_catalog.h, which the trainers read too): one error per field.
// A parameter with an error of its own (its domain) is left out; `dataset_ok`: whether the data
// set's channels can be trusted for the bottleneck rule. In a model choice each parameter is
// checked against every kind it can be active for, and model.fixed against every kind, so a
// branch's range the trainer of that branch refuses is refused here, not in every such trial.
void ValidateHyperparameterRanges(const v1::StudySpec& spec, bool dataset_ok,
                                  std::vector<absl::Status>& errors) {
  const bool choice = ModelKindParameter(spec) >= 0;
  // The values to check: a range's ends (the values between are within them) or each choice.
  // False when it added an error.
  auto check_kind = [&](v1::Model::Kind kind, const std::string& field, absl::string_view name,
                        const std::vector<double>& values, bool whole_only) {
    const HyperparameterRange* range = FindHyperparameterRange(kind, name);
    if (range == nullptr) return true;
    // Which kind refuses it, when the study has several.
    const std::string of_kind =
        choice ? absl::StrCat(" (", v1::Model::Kind_Name(kind), ")") : std::string();
    if (range->whole && !whole_only) {
      errors.push_back(Invalid(field, absl::StrCat(name, " takes whole numbers in ",
                                                   DescribeRange(*range), of_kind,
                                                   ": use int_range")));
      return false;
    }
    const int64_t channels =
        kind == v1::Model::AUTOENCODER && dataset_ok ? KnownChannels(spec.dataset()) : 0;
    for (double value : values) {
      if (absl::Status status = CheckHyperparameterValue(*range, value); !status.ok()) {
        errors.push_back(Invalid(field, absl::StrCat(status.message(), of_kind)));
        return false;
      }
      if (name == "bottleneck" && channels > 0) {
        if (absl::Status status = CheckAutoencoderBottleneck(static_cast<int64_t>(value), channels);
            !status.ok()) {
          errors.push_back(Invalid(field, absl::StrCat(status.message(), of_kind)));
          return false;
        }
      }
    }
    return true;
  };
  auto check_all = [&](const std::vector<v1::Model::Kind>& kinds, const std::string& field,
                       absl::string_view name, const std::vector<double>& values,
                       bool whole_only) {
    for (v1::Model::Kind kind : kinds) {
      if (!check_kind(kind, field, name, values, whole_only)) return;  // One error per field.
    }
  };
  for (int i = 0; i < spec.parameters_size(); ++i) {
    const v1::Parameter& p = spec.parameters(i);
    const std::string field = absl::StrCat("parameters[", i, "]");
    if (!ValidateParameter(p, field).ok()) continue;
    const std::vector<v1::Model::Kind> kinds =
        choice ? ParameterModelKinds(spec, i) : std::vector<v1::Model::Kind>{spec.model().kind()};
    if (p.has_int_range()) {
      check_all(kinds, field + ".int_range", p.name(),
                {static_cast<double>(p.int_range().min()), static_cast<double>(p.int_range().max())},
                true);
    } else if (p.has_double_range()) {
      const v1::DoubleRange& r = p.double_range();
      // A step from a whole min makes whole numbers only.
      const bool whole = r.step() > 0 && r.step() == std::floor(r.step()) &&
                         r.min() == std::floor(r.min());
      check_all(kinds, field + ".double_range", p.name(), {r.min(), r.max()}, whole);
    } else if (p.has_discrete()) {
      const std::vector<double> values(p.discrete().values().begin(), p.discrete().values().end());
      const bool whole = std::all_of(values.begin(), values.end(),
                                     [](double v) { return v == std::floor(v); });
      check_all(kinds, field + ".discrete.values", p.name(), values, whole);
    }
  }
  const v1::Model::Kind kind = spec.model().kind();
  auto check_choices = [&](const std::string& field, absl::string_view name,
                           const std::vector<std::string>& values) {
    const std::vector<absl::string_view>* choices = HyperparameterChoices(kind, name);
    if (choices == nullptr) return;
    for (const std::string& value : values) {
      if (std::find(choices->begin(), choices->end(), value) == choices->end()) {
        errors.push_back(Invalid(field, absl::StrCat(Quote(value), " is not one of ", name, "'s values: ",
                                                     absl::StrJoin(*choices, ", "))));
        return;
      }
    }
  };
  for (int i = 0; i < spec.parameters_size(); ++i) {
    const v1::Parameter& p = spec.parameters(i);
    if (!p.has_categorical()) continue;
    check_choices(absl::StrCat("parameters[", i, "].categorical.values"), p.name(),
                  {p.categorical().values().begin(), p.categorical().values().end()});
  }
  for (const auto& [name, value] : spec.model().fixed()) {
    if (value.kind_case() == google::protobuf::Value::kStringValue) {
      check_choices(absl::StrCat("model.fixed.", name), name, {value.string_value()});
    }
    if (value.kind_case() != google::protobuf::Value::kNumberValue) continue;
    const double number = value.number_value();
    check_all(StudyModelKinds(spec), absl::StrCat("model.fixed.", name), name, {number},
              number == std::floor(number));
  }
}

}  // namespace

std::vector<absl::Status> StudySpecErrors(v1::StudySpec& spec, const SpecLimits& limits) {
  std::vector<absl::Status> errors;
  // Each section is checked when what it reads is sound, so that no error is only the echo of
  // another (the parameters of an unknown model kind, the size of a grid of bad ranges).
  auto add = [&errors](absl::Status status) {
    if (!status.ok()) errors.push_back(std::move(status));
    return status.ok();
  };
  if (!add(CheckEnumValues(spec, ""))) return errors;  // Unknown enum numbers: nothing reads.
  add(ValidateName(spec.name()));
  if (!spec.warm_start_study().empty()) {
    if (add(ValidateName(spec.warm_start_study(), "warm_start_study")) &&
        spec.warm_start_study() == spec.name()) {
      add(Invalid("warm_start_study", "names the study itself; name an earlier study"));
    }
  }
  if (spec.parameters_size() > limits.max_parameters) {
    add(Invalid("parameters", absl::StrCat("has ", spec.parameters_size(),
                                           " entries, more than the limit of ",
                                           limits.max_parameters,
                                           " (dhpt-scheduler --max_parameters)")));
    return errors;  // Too many to look at each.
  }
  const bool model_ok = add(ValidateModel(spec));
  const bool dataset_ok = add(ValidateDataset(spec, limits));
  const bool parameters_ok = ValidateParameters(spec, model_ok, errors) && model_ok &&
                             ValidateConditions(spec, errors);
  const bool objectives_ok = model_ok && add(ValidateObjectives(spec));
  if (objectives_ok) add(ValidateConstraints(spec));
  add(ValidateWorkerSelector(spec));
  const bool algorithm_ok = parameters_ok && objectives_ok && add(ValidateAlgorithm(spec));
  ValidateTrialLimits(spec, limits, algorithm_ok, errors);
  if (objectives_ok) add(ValidateEarlyStopping(spec));
  if (parameters_ok) add(ValidateCommandParams(spec));
  if (model_ok) ValidateHyperparameterRanges(spec, dataset_ok, errors);
  return errors;
}

absl::StatusOr<v1::StudySpec> NormalizeStudySpec(v1::StudySpec spec, const SpecLimits& limits) {
  std::vector<absl::Status> errors = StudySpecErrors(spec, limits);
  if (!errors.empty()) return errors.front();
  return spec;
}

}  // namespace dhpt::study
