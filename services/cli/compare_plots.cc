#include "services/cli/compare_plots.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/util/time_util.h"
#include "services/cli/gnuplot.h"
#include "services/cli/study_file.h"
#include "services/common/model_catalog.h"
#include "services/common/status_macros.h"

namespace dhpt::cli {
namespace {

using google::protobuf::util::TimeUtil;

constexpr const char* kModes[] = {"sequential", "framework"};

const v1::RunReport& RunOf(const v1::CompareReport& report, int mode) {
  return mode == 0 ? report.sequential() : report.framework();
}

// "best-so-far": seconds since the run started, best objective so far; one row per completed
// trial in the order they ended, and a last row at the run's end so both lines reach it.
std::string BestSoFarData(const v1::CompareReport& report, int mode) {
  const v1::RunReport& run = RunOf(report, mode);
  const bool maximize = report.spec().objective().goal() == v1::Objective::MAXIMIZE;
  std::vector<std::pair<double, double>> ends;
  for (const v1::Trial& trial : run.trials()) {
    if (trial.state() != v1::Trial::COMPLETED || !trial.has_end_time()) continue;
    const double at =
        TimeUtil::DurationToMilliseconds(trial.end_time() - run.start_time()) / 1000.0;
    ends.emplace_back(at, trial.objective_value());
  }
  std::sort(ends.begin(), ends.end());
  std::string data = absl::StrCat("# ", kModes[mode], ": seconds, best ",
                                  report.spec().objective().metric(), " so far\n");
  double best = 0;
  for (size_t i = 0; i < ends.size(); ++i) {
    if (i == 0 || (maximize ? ends[i].second > best : ends[i].second < best)) best = ends[i].second;
    absl::StrAppendFormat(&data, "%.3f %.9g\n", ends[i].first, best);
  }
  if (!ends.empty()) absl::StrAppendFormat(&data, "%.3f %.9g\n", run.wall_seconds(), best);
  return data;
}

// "durations": the wall seconds of every trial that ran, one per line.
std::string DurationData(const v1::CompareReport& report, int mode) {
  std::string data = absl::StrCat("# ", kModes[mode], ": trial wall seconds\n");
  for (const v1::Trial& trial : RunOf(report, mode).trials()) {
    auto it = trial.metrics().find(std::string(kMetricWallSeconds));
    if (it != trial.metrics().end()) absl::StrAppendFormat(&data, "%.4f\n", it->second);
  }
  return data;
}

bool UsedGpu(const v1::CompareReport& report) {
  return report.sequential().summary().has_gpu_utilization_avg() ||
         report.framework().summary().has_gpu_utilization_avg();
}

// "resources": a row per run: wall s, CPU s, peak MiB of all processes, GPU utilisation %.
std::string ResourceData(const v1::CompareReport& report) {
  std::string data = "# run wall_seconds cpu_seconds peak_mib_all_processes gpu_utilization_avg\n";
  for (int mode = 0; mode < 2; ++mode) {
    const v1::RunReport& run = RunOf(report, mode);
    absl::StrAppendFormat(&data, "%s %.3f %.3f %.1f %.1f\n", kModes[mode], run.wall_seconds(),
                          run.summary().cpu_seconds(),
                          run.summary().peak_rss_bytes_sum() / (1 << 20),
                          run.summary().gpu_utilization_avg());
  }
  return data;
}

}  // namespace

std::string PlotScript(const v1::CompareReport& report, const std::string& terminal) {
  const std::string ext = terminal == "svg" ? "svg" : "png";
  const std::string metric = GnuplotEscape(report.spec().objective().metric());
  const std::string study = GnuplotEscape(report.spec().name());
  std::string gp = absl::StrFormat(
      "# Drawn by dhpt compare; run `gnuplot %s` in this folder to draw again.\n"
      "set terminal %s size 900,540 %s font 'DejaVu Sans,11'\n"
      "set datafile commentschars '#'\n"
      "set key outside right top\n"
      "set grid\n"
      "set style line 1 lc rgb '#1f77b4' lw 2 pt 7\n"
      "set style line 2 lc rgb '#d62728' lw 2 pt 5\n\n",
      terminal == "svg" ? "plots-svg.gp" : "plots-png.gp", terminal,
      terminal == "svg" ? "dynamic background rgb 'white'" : "background rgb 'white'");

  absl::StrAppendFormat(
      &gp,
      "set output 'best_so_far.%s'\n"
      "set title \"%s: best %s so far against wall time\"\n"
      "set xlabel 'seconds since the run started'\n"
      "set ylabel \"best %s\"\n"
      "plot 'data/best_so_far_sequential.dat' using 1:2 with steps ls 1 title 'sequential', \\\n"
      "     '' using 1:2 with points ls 1 notitle, \\\n"
      "     'data/best_so_far_framework.dat' using 1:2 with steps ls 2 title 'framework', \\\n"
      "     '' using 1:2 with points ls 2 notitle\n\n",
      ext, study, metric, metric);

  absl::StrAppendFormat(
      &gp,
      "set output 'trial_durations.%s'\n"
      "set title \"%s: trial durations\"\n"
      "set style data boxplot\n"
      "set style boxplot outliers pointtype 7\n"
      "set style fill solid 0.3 border -1\n"
      "set xtics ('sequential' 1, 'framework' 2)\n"
      "set xrange [0.4:2.6]\n"
      "set xlabel ''\n"
      "set ylabel 'trial wall time (s)'\n"
      "set key off\n"
      "plot 'data/durations_sequential.dat' using (1):1 ls 1, \\\n"
      "     'data/durations_framework.dat' using (2):1 ls 2\n"
      "unset xrange\n"
      "set xtics autofreq\n"
      "set key outside right top\n\n",
      ext, study);

  const bool gpu = UsedGpu(report);
  absl::StrAppendFormat(
      &gp,
      "set output 'resources.%s'\n"
      "set multiplot layout 1,%d title \"%s: what each run used\"\n"
      "unset title\n"
      "set style fill solid 0.6 border -1\n"
      "set boxwidth 0.6\n"
      "set xrange [-0.6:1.6]\n"
      "set yrange [0:*]\n"
      "set key off\n"
      "set xlabel ''\n",
      ext, gpu ? 4 : 3, study);
  const std::vector<std::pair<int, std::string>> panels = {
      {2, "wall time (s)"}, {3, "CPU time (s)"}, {4, "peak memory, all processes (MiB)"}};
  auto panel = [&](int column, const std::string& label) {
    absl::StrAppendFormat(&gp,
                          "set ylabel '%s'\n"
                          "plot 'data/resources.dat' "
                          "using 0:%d:(0.6):($0 == 0 ? 0x1f77b4 : 0xd62728):xtic(1) "
                          "with boxes lc rgb variable\n",
                          label, column);
  };
  for (const auto& [column, label] : panels) panel(column, label);
  if (gpu) panel(5, "GPU utilisation, average (%)");
  absl::StrAppend(&gp, "unset multiplot\n");
  return gp;
}

absl::StatusOr<std::vector<std::string>> DrawPlots(const v1::CompareReport& report,
                                                    const std::string& dir) {
  const std::filesystem::path root(dir);
  std::error_code error;
  std::filesystem::create_directories(root / "data", error);
  if (error) return absl::InternalError(absl::StrCat("cannot create ", (root / "data").string()));
  const std::filesystem::path data = root / "data";
  for (int mode = 0; mode < 2; ++mode) {
    RETURN_IF_ERROR(WriteTextFile((data / absl::StrCat("best_so_far_", kModes[mode], ".dat")).string(),
                                  BestSoFarData(report, mode)));
    RETURN_IF_ERROR(WriteTextFile((data / absl::StrCat("durations_", kModes[mode], ".dat")).string(),
                                  DurationData(report, mode)));
  }
  RETURN_IF_ERROR(WriteTextFile((data / "resources.dat").string(), ResourceData(report)));
  std::vector<std::string> files;
  for (const std::string terminal : {"svg", "pngcairo"}) {
    const std::string script = terminal == "svg" ? "plots-svg.gp" : "plots-png.gp";
    RETURN_IF_ERROR(WriteTextFile((root / script).string(), PlotScript(report, terminal)));
    // gnuplot reads and writes relative to the report's folder.
    RETURN_IF_ERROR(RunGnuplot(root.string(), script, (root / "data" / "gnuplot.log").string()));
    const std::string ext = terminal == "svg" ? "svg" : "png";
    for (const char* name : {"best_so_far", "trial_durations", "resources"}) {
      files.push_back(absl::StrCat(name, ".", ext));
    }
  }
  return files;
}

}  // namespace dhpt::cli
