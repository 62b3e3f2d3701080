#pragma once
// Pieces shared by the GDN q4 tier's experiments (gdn_q4.cpp, error_budget.cpp).
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace klab::experiments::q4tier {

// The GDN oracle fixtures: $KLAB_GDN_FIXTURES, else tests/fixtures/gdn under the working directory,
// else under the source tree the binary was built in (build/NAME/bin/klab -> ../../..). `looked`
// collects the directories tried (for the skip reason).
inline std::vector<std::filesystem::path> fixture_files(std::string& looked) {
  namespace fs = std::filesystem;
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("KLAB_GDN_FIXTURES")) dirs.emplace_back(env);
  dirs.emplace_back(fs::path("tests") / "fixtures" / "gdn");
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) dirs.push_back(exe.parent_path().parent_path().parent_path().parent_path() / "tests" / "fixtures" / "gdn");
  for (const auto& d : dirs) {
    looked += (looked.empty() ? "" : ", ") + d.string();
    std::vector<fs::path> out;
    if (!fs::is_directory(d, ec)) continue;
    for (const auto& e : fs::directory_iterator(d, ec))
      if (e.is_regular_file() && e.path().extension() == ".safetensors") out.push_back(e.path());
    std::sort(out.begin(), out.end());
    if (!out.empty()) return out;
  }
  return {};
}

}  // namespace klab::experiments::q4tier
