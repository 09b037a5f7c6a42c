// User text in a gnuplot script (study names, metrics, categorical values) is shown, never run.

#include "services/cli/gnuplot.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace dhpt::cli {
namespace {

namespace fs = std::filesystem;

TEST(GnuplotTest, ABackquotedOrMultiLineLabelIsDrawnNotRun) {
  const fs::path dir = fs::temp_directory_path() / ("dhpt-gnuplot-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path ran = dir / "ran";
  // A categorical value as a hostile study would give it: a backquoted command, and a
  // newline followed by one of gnuplot's own commands that runs a shell.
  const std::string backquoted = "`touch " + ran.string() + "`";
  const std::string new_line = "b\nsystem \"touch " + ran.string() + "\"";
  std::ofstream(dir / "plot.gp") << "set terminal svg\nset output 'plot.svg'\n"
                                 << "set title \"" << GnuplotEscape(backquoted) << "\"\n"
                                 << "set xtics (\"" << GnuplotEscape(new_line) << "\" 0)\n"
                                 << "plot x notitle\n";
  const absl::Status drawn = RunGnuplot(dir.string(), "plot.gp", (dir / "log").string());
  if (absl::IsFailedPrecondition(drawn)) GTEST_SKIP() << drawn;  // no gnuplot installed
  ASSERT_TRUE(drawn.ok()) << drawn;
  EXPECT_FALSE(fs::exists(ran)) << "gnuplot ran a command from a label";
  std::stringstream svg;
  svg << std::ifstream(dir / "plot.svg").rdbuf();
  EXPECT_NE(svg.str().find("`touch"), std::string::npos) << "the label is shown as written";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dhpt::cli
