// Reports: written atomically, read back with the same records, CSV beside, malformed input refused.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "klab/error.hpp"
#include "klab/report.hpp"

using namespace klab;
namespace fs = std::filesystem;

namespace {
fs::path temp_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("klab-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}
}  // namespace

TEST_CASE("report round trip: every record comes back with its environment") {
  auto dir = temp_dir("report");
  char arg0[] = "klab", arg1[] = "run";
  char* argv[] = {arg0, arg1};
  Report r(base_environment(2, argv));
  r.add({{"kind", "measurement"}, {"variant", "a/b=c"}, {"timing", {{"median_ms", 1.5}, {"samples_ms", {1.0, 2.0}}}}});
  r.add({{"kind", "claim"}, {"text", "x, \"quoted\""}, {"state", "held"}});
  r.write(dir, "report");
  auto back = read_jsonl(dir / "report.jsonl");
  REQUIRE(back.size() == 2);
  CHECK(back[0]["kind"] == "measurement");
  CHECK(back[0]["timing"]["median_ms"] == 1.5);
  CHECK(back[0]["env"]["command"] == "klab run");
  CHECK(back[0]["env"].contains("git_commit"));
  CHECK(back[0]["env"].contains("date"));
  CHECK(back[1]["text"] == "x, \"quoted\"");
  // No temporary files are left behind.
  int files = 0;
  for (auto& e : fs::directory_iterator(dir)) {
    ++files;
    CHECK(e.path().string().find(".tmp.") == std::string::npos);
  }
  CHECK(files == 2);
  // CSV: a header with dotted paths, samples (arrays) left out, quotes escaped.
  std::ifstream csv(dir / "report.csv");
  std::string header, row1, row2;
  std::getline(csv, header);
  std::getline(csv, row1);
  std::getline(csv, row2);
  CHECK(header.find("timing.median_ms") != std::string::npos);
  CHECK(header.find("samples_ms") == std::string::npos);
  CHECK(row2.find("\"x, \"\"quoted\"\"\"") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("read_jsonl names the file and line of malformed input") {
  auto dir = temp_dir("bad");
  fs::create_directories(dir);
  std::ofstream(dir / "bad.jsonl") << "{\"kind\":\"x\"}\n{not json\n";
  try {
    read_jsonl(dir / "bad.jsonl");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("bad.jsonl:2") != std::string::npos);
  }
  std::ofstream(dir / "nokind.jsonl") << "{\"a\":1}\n";
  CHECK_THROWS_AS(read_jsonl(dir / "nokind.jsonl"), Error);
  CHECK_THROWS_AS(read_jsonl(dir / "missing.jsonl"), Error);
  fs::remove_all(dir);
}

TEST_CASE("write_atomically replaces a file whole") {
  auto dir = temp_dir("atomic");
  fs::create_directories(dir);
  write_atomically(dir / "f.txt", "first");
  write_atomically(dir / "f.txt", "second");
  std::ifstream f(dir / "f.txt");
  std::string s;
  std::getline(f, s);
  CHECK(s == "second");
  CHECK_THROWS_AS(write_atomically(dir / "no-such-dir" / "f.txt", "x"), Error);
  fs::remove_all(dir);
}
