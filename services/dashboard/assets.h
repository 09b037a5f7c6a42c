#pragma once

// The dashboard's pages, scripts and styles, built into the binary from assets/ (the build
// generates assets.cc with embed_assets.cmake), so a browser needs no network to open them.

#include <string_view>

namespace dhpt::dashboard {

struct Asset {
  std::string_view path;          // "index.html", "app.js", ...
  std::string_view content_type;  // From the file's extension.
  std::string_view data;
};

// The asset at `path` (relative to assets/), or nullptr.
const Asset* FindAsset(std::string_view path);

}  // namespace dhpt::dashboard
