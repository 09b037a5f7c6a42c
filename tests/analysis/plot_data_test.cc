// The plots' data: bounded by the named limits at 100,000 trials, axes covering every trial,
// the trials that matter kept, and clear answers to plots a study cannot have.

#include "services/analysis/plot_data.h"

#include <chrono>
#include <cmath>

#include <gtest/gtest.h>

#include "services/analysis/study_data.h"
#include "services/common/random.h"

namespace dhpt::analysis {
namespace {

TEST(DownsampleTest, KeepsAtMostMaxEvenlyPlusTheKeptOnes) {
  const std::vector<size_t> kept = Downsample(100'000, 100, {77'777});
  EXPECT_LE(kept.size(), 101u);
  EXPECT_EQ(kept.front(), 0u);
  EXPECT_EQ(kept.back(), 99'999u);
  EXPECT_TRUE(std::binary_search(kept.begin(), kept.end(), 77'777u));
  EXPECT_EQ(Downsample(5, 100).size(), 5u);
}

// Two objectives; x log, k categorical; every trial with a curve, a third pruned; two workers.
StudyData LargeStudy(int trials) {
  StudyData study;
  study.name = "large";
  optimizer::ParameterSpec x;
  x.name = "x";
  x.min = 1e-3;
  x.max = 10;
  x.log = true;
  optimizer::ParameterSpec k;
  k.name = "k";
  k.kind = optimizer::ParameterKind::kCategorical;
  k.categories = {"a", "b", "c"};
  study.params = {x, k};
  study.objectives = {{"loss", false}, {"size", false}};
  std::mt19937_64 generator = SeededGenerator(5, 0, 0);
  for (int t = 0; t < trials; ++t) {
    TrialData trial;
    trial.number = t;
    const bool pruned = t % 3 == 2;
    trial.state = pruned ? TrialState::kPruned : TrialState::kCompleted;
    const double u = UniformUnit(generator);
    trial.params = {std::exp(std::log(1e-3) + u * std::log(1e4)), std::floor(UniformUnit(generator) * 3)};
    const double loss = u + 0.1 * trial.params[1];
    trial.values = pruned ? std::vector<double>{loss} : std::vector<double>{loss, 1 - u * u};
    trial.start_seconds = t;
    trial.end_seconds = t + 0.5;
    trial.worker = t % 2 ? "w1" : "w2";
    for (int s = 0; s < 20; ++s) {
      trial.steps.push_back(s);
      trial.step_values.push_back(loss + 1.0 / (s + 1));
    }
    study.trials.push_back(std::move(trial));
  }
  return study;
}

TEST(PlotDataTest, EveryKindStaysWithinItsLimitsAtAHundredThousandTrials) {
  const StudyData study = LargeStudy(100'000);
  ImportanceResult importance;
  importance.importances = {{"x", 0.9, false}, {"k", 0.1, false}};
  PlotOptions options;
  options.importance = &importance;
  for (PlotKind kind : AllPlotKinds()) {
    SCOPED_TRACE(PlotKindName(kind));
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<PlotData> plot = MakePlot(study, kind, options);
    // Each kind takes tens of milliseconds here; a quadratic step (the Pareto front of
    // 66,000 points took 10 s) shows as seconds even on an idle machine.
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
    ASSERT_TRUE(plot.ok()) << plot.status();
    EXPECT_TRUE(plot->empty_reason.empty()) << plot->empty_reason;
    size_t curves = 0;
    for (const PlotPanel& panel : plot->panels) {
      for (const PlotSeries& series : panel.series) {
        // The kept points beyond the even ones: best-so-far steps, the front.
        EXPECT_LE(series.x.size(), static_cast<size_t>(kMaxPointsPerSeries) + 200) << series.name;
        curves += series.line;
        // Every point inside the axes (no trial cropped away).
        for (size_t i = 0; i < series.x.size(); ++i) {
          if (kind == PlotKind::kImportance || kind == PlotKind::kParallel ||
              (kind == PlotKind::kContour && i < series.x.size() && series.name != "completed trial")) {
            continue;
          }
          EXPECT_GE(series.x[i], panel.x.min - 1e-9) << series.name;
          EXPECT_LE(series.x[i], panel.x.max + 1e-9) << series.name;
          EXPECT_GE(series.y[i], panel.y.min - 1e-9) << series.name;
          EXPECT_LE(series.y[i], panel.y.max + 1e-9) << series.name;
        }
      }
    }
    EXPECT_LE(curves, static_cast<size_t>(kMaxCurvesPerPlot) + 2);
    if (kind != PlotKind::kImportance) {
      EXPECT_TRUE(plot->downsampled);
    }
  }
}

TEST(PlotDataTest, LogAndCategoricalAxesAndTheBestSoFarSteps) {
  const StudyData study = LargeStudy(300);
  absl::StatusOr<PlotData> slice = MakePlot(study, PlotKind::kSlice, {});
  ASSERT_TRUE(slice.ok());
  ASSERT_EQ(slice->panels.size(), 2u);
  EXPECT_TRUE(slice->panels[0].x.log);
  EXPECT_EQ(slice->panels[0].x.min, 1e-3);
  EXPECT_EQ(slice->panels[1].x.categories, (std::vector<std::string>{"a", "b", "c"}));
  absl::StatusOr<PlotData> history = MakePlot(study, PlotKind::kHistory, {});
  ASSERT_TRUE(history.ok());
  const PlotSeries& best = history->panels[0].series[1];
  for (size_t i = 1; i < best.y.size(); ++i) EXPECT_LE(best.y[i], best.y[i - 1]);
  absl::StatusOr<PlotData> intermediate = MakePlot(study, PlotKind::kIntermediate, {});
  ASSERT_TRUE(intermediate.ok());
  EXPECT_EQ(intermediate->panels[0].series.back().name, "pruned here");
  EXPECT_EQ(intermediate->panels[0].series.back().x.size(), 100u);  // Every pruned trial.
}

// Hostile review: objectives of -1.7e308 and 1.7e308 (finite, so accepted) made the
// parallel-coordinates span overflow to infinity, and those trials' positions NaN (null).
TEST(PlotDataTest, ExtremeValuesStayOnTheParallelAxes) {
  StudyData study = LargeStudy(30);
  study.trials[0].values = {-1.7e308, 0};
  study.trials[3].values = {1.7e308, 0};
  study.params[0].min = -1.7e308;  // A linear range as wide as a double allows.
  study.params[0].max = 1.7e308;
  study.params[0].log = false;
  study.trials[6].params[0] = 1.7e308;
  absl::StatusOr<PlotData> parallel = MakePlot(study, PlotKind::kParallel, {});
  ASSERT_TRUE(parallel.ok()) << parallel.status();
  int ends = 0;
  for (const PlotSeries& line : parallel->panels[0].series) {
    for (double y : line.y) {
      ASSERT_TRUE(std::isfinite(y)) << "trial " << line.trials[0];
      EXPECT_GE(y, 0);
      EXPECT_LE(y, 1);
    }
    if (line.z.back() == -1.7e308 || line.z.back() == 1.7e308) {
      EXPECT_EQ(line.y.back(), line.z.back() > 0 ? 1 : 0);
      ++ends;
    }
  }
  EXPECT_EQ(ends, 2);
  EXPECT_EQ(FractionOfRange(0, -1.7e308, 1.7e308), 0.5);
  EXPECT_EQ(FractionOfRange(3, 2, 2), 0.5);
}

TEST(PlotDataTest, ContourCellsOfADiscreteParameterSitAtItsValues) {
  StudyData study;
  study.name = "discrete";
  optimizer::ParameterSpec batch;
  batch.name = "batch";
  batch.kind = optimizer::ParameterKind::kDiscrete;
  batch.discrete_values = {100, 1, 10};
  optimizer::ParameterSpec x;
  x.name = "x";
  x.max = 1;
  study.params = {batch, x};
  study.objectives = {{"loss", false}};
  for (int t = 0; t < 30; ++t) {
    TrialData trial;
    trial.number = t;
    trial.state = TrialState::kCompleted;
    trial.params = {std::vector<double>{1, 10, 100}[t % 3], (t % 10) / 10.0};
    trial.values = {trial.params[0] + trial.params[1]};
    study.trials.push_back(std::move(trial));
  }
  absl::StatusOr<PlotData> contour = MakePlot(study, PlotKind::kContour, {});
  ASSERT_TRUE(contour.ok()) << contour.status();
  const PlotSeries& cells = contour->panels[0].series[0];
  ASSERT_FALSE(cells.x.empty());
  for (size_t i = 0; i < cells.x.size(); ++i) {
    EXPECT_TRUE(cells.x[i] == 1 || cells.x[i] == 10 || cells.x[i] == 100) << cells.x[i];
    // Each cell's mean is of trials with that batch value.
    EXPECT_GE(cells.z[i], cells.x[i]);
    EXPECT_LT(cells.z[i], cells.x[i] + 1);
  }
}

TEST(PlotDataTest, PlotsAStudyCannotHaveAreRefusedClearly) {
  StudyData study = LargeStudy(10);
  PlotOptions options;
  options.params = {"x", "nope"};
  absl::Status status = MakePlot(study, PlotKind::kContour, options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("no parameter \"nope\""), std::string::npos) << status;
  study.objectives.resize(1);
  status = MakePlot(study, PlotKind::kParetoFront, {}).status();
  EXPECT_NE(status.message().find("has one objective"), std::string::npos) << status;
  study.trials.clear();
  absl::StatusOr<PlotData> empty = MakePlot(study, PlotKind::kHistory, {});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->empty_reason, "no completed trial yet");
}

}  // namespace
}  // namespace dhpt::analysis
