#include "services/worker/power_rails.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace dhpt::worker {
namespace {

namespace fs = std::filesystem;

// Channels per INA3221.
constexpr int kChannels = 3;
// The driver directories, relative to the root.
constexpr char kIioDriver[] = "sys/bus/i2c/drivers/ina3221x";
constexpr char kHwmonDriver[] = "sys/bus/i2c/drivers/ina3221";

std::optional<std::string> ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return std::string(absl::StripAsciiWhitespace(text.str()));
}

std::optional<double> ReadNumber(const fs::path& path) {
  std::optional<std::string> text = ReadText(path);
  double value = 0;
  if (!text || !absl::SimpleAtod(*text, &value)) return std::nullopt;
  return value;
}

// One monitored rail: a power file in milliwatts (IIO), or voltage (mV) and current (mA)
// files (hwmon).
struct Rail {
  std::string label;
  fs::path milliwatts;
  fs::path millivolts;
  fs::path milliamps;
};

// Subdirectories of `dir` whose names start with `prefix`, sorted; none when `dir` is absent.
std::vector<fs::path> Children(const fs::path& dir, absl::string_view prefix) {
  std::vector<fs::path> children;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    if (absl::StartsWith(it->path().filename().string(), prefix)) children.push_back(it->path());
  }
  std::sort(children.begin(), children.end());
  return children;
}

void FindIioRails(const fs::path& root, std::vector<Rail>& rails) {
  for (const fs::path& chip : Children(root / kIioDriver, "")) {
    for (const fs::path& device : Children(chip, "iio:device")) {
      for (int i = 0; i < kChannels; ++i) {
        Rail rail;
        rail.milliwatts = device / absl::StrCat("in_power", i, "_input");
        if (!fs::exists(rail.milliwatts)) continue;
        rail.label = ReadText(device / absl::StrCat("rail_name_", i))
                         .value_or(absl::StrCat(chip.filename().string(), " channel ", i));
        rails.push_back(std::move(rail));
      }
    }
  }
}

void FindHwmonRails(const fs::path& root, std::vector<Rail>& rails) {
  for (const fs::path& chip : Children(root / kHwmonDriver, "")) {
    for (const fs::path& hwmon : Children(chip / "hwmon", "hwmon")) {
      for (int i = 1; i <= kChannels; ++i) {
        Rail rail;
        rail.millivolts = hwmon / absl::StrCat("in", i, "_input");
        rail.milliamps = hwmon / absl::StrCat("curr", i, "_input");
        if (!fs::exists(rail.millivolts) || !fs::exists(rail.milliamps)) continue;
        rail.label = ReadText(hwmon / absl::StrCat("in", i, "_label"))
                         .value_or(absl::StrCat(chip.filename().string(), " channel ", i));
        rails.push_back(std::move(rail));
      }
    }
  }
}

class Ina3221Rails final : public PowerRails {
 public:
  explicit Ina3221Rails(std::vector<Rail> summed) : summed_(std::move(summed)) {}

  std::string source() const override { return kEnergyTelemetryIna3221; }
  std::string description() const override {
    if (summed_.size() == 1) return summed_.front().label;
    std::vector<std::string> labels;
    for (const Rail& rail : summed_) labels.push_back(rail.label);
    return absl::StrCat("sum of ", absl::StrJoin(labels, ", "));
  }

  absl::StatusOr<double> TotalWatts() override {
    double watts = 0;
    for (const Rail& rail : summed_) {
      if (!rail.milliwatts.empty()) {
        std::optional<double> milliwatts = ReadNumber(rail.milliwatts);
        if (!milliwatts) return Unreadable(rail.milliwatts);
        watts += *milliwatts / 1e3;
      } else {
        std::optional<double> millivolts = ReadNumber(rail.millivolts);
        if (!millivolts) return Unreadable(rail.millivolts);
        std::optional<double> milliamps = ReadNumber(rail.milliamps);
        if (!milliamps) return Unreadable(rail.milliamps);
        watts += *millivolts * *milliamps / 1e6;
      }
    }
    return watts;
  }

 private:
  static absl::Status Unreadable(const fs::path& path) {
    return absl::UnavailableError(absl::StrCat("cannot read ", path.string()));
  }

  const std::vector<Rail> summed_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<PowerRails>> OpenPowerRails(const std::string& root) {
  std::vector<Rail> rails;
  FindIioRails(root, rails);
  FindHwmonRails(root, rails);
  if (rails.empty()) {
    return absl::NotFoundError(absl::StrCat("no INA3221 power rails under ", root));
  }
  if (rails.size() > static_cast<size_t>(kMaxPowerRails)) rails.resize(kMaxPowerRails);
  // The input rail alone when there is one: the other rails are parts of it.
  for (Rail& rail : rails) {
    if (absl::EndsWith(rail.label, "_IN")) {
      return std::make_unique<Ina3221Rails>(std::vector<Rail>{std::move(rail)});
    }
  }
  return std::make_unique<Ina3221Rails>(std::move(rails));
}

PowerSampler::PowerSampler(PowerRails* rails, absl::Duration interval)
    : rails_(rails), sampler_(interval, [this] { Take(); }) {}

void PowerSampler::Take() {
  absl::StatusOr<double> watts = rails_->TotalWatts();
  if (!watts.ok()) return;
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mutex_);
  if (samples_ == 0) {
    first_ = now;
  } else {
    joules_ += (last_watts_ + *watts) / 2 * absl::ToDoubleSeconds(now - last_);
  }
  ++samples_;
  last_ = now;
  last_watts_ = *watts;
}

EnergyUsage PowerSampler::Stop() {
  sampler_.Stop();
  Take();
  absl::MutexLock lock(&mutex_);
  EnergyUsage usage;
  usage.samples = samples_;
  const double seconds = samples_ > 1 ? absl::ToDoubleSeconds(last_ - first_) : 0;
  if (seconds > 0) {
    usage.joules = joules_;
    usage.average_watts = joules_ / seconds;
  }
  return usage;
}

}  // namespace dhpt::worker
