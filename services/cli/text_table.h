#pragma once

// Tables of the CLI's output: columns sized to their widest cell, text left-aligned, numbers
// right-aligned; as plain text for a terminal or as a Markdown table for report files.

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/cli/terminal_text.h"

namespace dhpt::cli {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) : rows_{std::move(header)} {}
  // Cells may hold what users and workers wrote: control characters are shown escaped.
  void Add(std::vector<std::string> row) {
    row.resize(rows_[0].size());
    for (std::string& cell : row) cell = TerminalText(cell);
    rows_.push_back(std::move(row));
  }

  // A header, a rule of dashes, then the rows.
  std::string Render() const { return RenderWith("", "  ", ""); }
  // The same table in GitHub-flavoured Markdown.
  std::string RenderMarkdown() const { return RenderWith("| ", " | ", " |"); }

 private:
  std::string RenderWith(const std::string& open, const std::string& separator,
                         const std::string& close) const {
    const bool markdown = !open.empty();
    // A Markdown rule needs three dashes.
    std::vector<size_t> width(rows_[0].size(), markdown ? 3 : 0);
    for (const auto& row : rows_) {
      for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
    }
    std::string out;
    for (size_t r = 0; r < rows_.size(); ++r) {
      std::string line = open;
      for (size_t i = 0; i < rows_[r].size(); ++i) {
        const std::string& cell = rows_[r][i];
        const std::string pad(width[i] - cell.size(), ' ');
        absl::StrAppend(&line, i ? separator : "", r > 0 && Numeric(cell) ? pad + cell : cell + pad);
      }
      line += close;
      while (!line.empty() && line.back() == ' ') line.pop_back();
      absl::StrAppend(&out, line, "\n");
      if (r > 0) continue;
      if (markdown) {
        std::string rule = "|";
        for (size_t w : width) absl::StrAppend(&rule, std::string(w + 2, '-'), "|");
        absl::StrAppend(&out, rule, "\n");
      } else {
        size_t total = 0;
        for (size_t w : width) total += w;
        absl::StrAppend(&out, std::string(total + separator.size() * (width.size() - 1), '-'), "\n");
      }
    }
    return out;
  }

  static bool Numeric(const std::string& cell) {
    return !cell.empty() && (std::isdigit(static_cast<unsigned char>(cell[0])) ||
                             ((cell[0] == '-' || cell[0] == '+') && cell.size() > 1));
  }

  std::vector<std::vector<std::string>> rows_;
};

}  // namespace dhpt::cli
