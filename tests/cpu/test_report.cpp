// Reports: a header, records flushed as added, a closing record, one CSV per kind; malformed input refused.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <unistd.h>

#include "klab/error.hpp"
#include "klab/report.hpp"
#include "klab/timing.hpp"

using namespace klab;
namespace fs = std::filesystem;

namespace {
fs::path temp_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("klab-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}
}  // namespace

TEST_CASE("report round trip: a header with the environment once, the records as added, a closing record") {
  auto dir = temp_dir("report");
  char arg0[] = "klab", arg1[] = "run";
  char* argv[] = {arg0, arg1};
  // A previous report in the directory is replaced whole, its CSVs included (schema 1's too).
  fs::create_directories(dir);
  std::ofstream(dir / "report.jsonl") << "{\"kind\":\"old\"}\n{\"kind\":\"old\"}\n{\"kind\":\"old\"}\n";
  std::ofstream(dir / "report.csv") << "old\n";
  std::ofstream(dir / "report-gdn_op.csv") << "old\n";
  std::ofstream(dir / "notes.csv") << "kept\n";
  Report r(base_environment(2, argv));
  r.open(dir, "report", {"klab", "run"});
  CHECK_FALSE(fs::exists(dir / "report.csv"));
  CHECK_FALSE(fs::exists(dir / "report-gdn_op.csv"));
  CHECK(fs::exists(dir / "notes.csv"));
  r.add({{"kind", "measurement"}, {"variant", "a/b=c"}, {"timing", {{"median_ms", 1.5}, {"samples_ms", {1.0, 2.0}}}}});
  // Flushed as added: the file already holds the header and the first record.
  auto so_far = read_jsonl(dir / "report.jsonl");
  REQUIRE(so_far.size() == 2);
  CHECK(so_far[0]["kind"] == "header");
  CHECK(so_far[1]["kind"] == "measurement");
  r.add({{"kind", "claim"}, {"text", "x, \"quoted\""}, {"state", "held"}});
  r.add({{"kind", "claim"}, {"text", "y"}, {"state", "not_held"}});
  r.close(EndStatus::complete);
  auto back = read_jsonl(dir / "report.jsonl");
  REQUIRE(back.size() == 5);
  const auto& h = back[0];
  CHECK(h["kind"] == "header");
  CHECK(h["schema_version"] == kReportSchemaVersion);
  CHECK(kReportSchemaVersion == 2);
  CHECK(h["argv"] == nlohmann::json::array({"klab", "run"}));
  CHECK(h["env"]["command"] == "klab run");
  CHECK(h["env"].contains("git_commit"));
  CHECK(h["start"] == h["env"]["date"]);
  // The environment is in the header only.
  CHECK(back[1]["kind"] == "measurement");
  CHECK_FALSE(back[1].contains("env"));
  CHECK(back[1]["timing"]["median_ms"] == 1.5);
  CHECK(back[2]["text"] == "x, \"quoted\"");
  const auto& end = back[4];
  CHECK(end["kind"] == "end");
  CHECK(end["status"] == "complete");
  CHECK(end["records"] == 3);
  CHECK(end["counts"] == nlohmann::json({{"claim", 2}, {"measurement", 1}}));
  CHECK(end["start"] == h["start"]);
  CHECK(end.contains("end"));
  CHECK_FALSE(end.contains("error"));
  // One CSV per record kind, no temporary files left behind.
  std::set<std::string> files;
  for (auto& e : fs::directory_iterator(dir)) files.insert(e.path().filename().string());
  CHECK(files == std::set<std::string>{"report.jsonl", "report-measurement.csv", "report-claim.csv", "notes.csv"});
  // CSV: a header with dotted paths, samples (arrays) left out, quotes escaped, one row per record.
  std::ifstream mcsv(dir / "report-measurement.csv");
  std::string header, row1, row2, row3;
  std::getline(mcsv, header);
  CHECK(header.find("timing.median_ms") != std::string::npos);
  CHECK(header.find("samples_ms") == std::string::npos);
  CHECK(header.find("text") == std::string::npos);  // claim columns stay in the claims' CSV
  std::ifstream ccsv(dir / "report-claim.csv");
  std::getline(ccsv, header);
  std::getline(ccsv, row1);
  std::getline(ccsv, row2);
  CHECK_FALSE(std::getline(ccsv, row3));
  CHECK(header == "kind,state,text");
  CHECK(row1.find("\"x, \"\"quoted\"\"\"") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("a failed or interrupted report says so in its closing record, with the CSVs of what there is") {
  auto dir = temp_dir("failed");
  Report r(nlohmann::json{{"date", "2026-01-01T00:00:00Z"}});
  r.open(dir, "report", {"klab"});
  r.add({{"kind", "skip"}, {"what", "x"}, {"reason", "y"}});
  r.close(EndStatus::failed, "CUDA error: boom");
  auto back = read_jsonl(dir / "report.jsonl");
  REQUIRE(back.size() == 3);
  CHECK(back[2]["status"] == "failed");
  CHECK(back[2]["error"] == "CUDA error: boom");
  CHECK(back[2]["records"] == 1);
  CHECK(fs::exists(dir / "report-skip.csv"));
  Report s(nlohmann::json::object());
  s.open(dir, "report", {"klab"});
  s.close(EndStatus::interrupted, "SIGINT");
  back = read_jsonl(dir / "report.jsonl");
  REQUIRE(back.size() == 2);  // the failed report was replaced
  CHECK(back[1]["status"] == "interrupted");
  CHECK(back[1]["signal"] == "SIGINT");
  CHECK(back[1]["records"] == 0);
  CHECK_FALSE(fs::exists(dir / "report-skip.csv"));
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

TEST_CASE("the ceiling's JSON keeps every copy form beside the read's, and the best of them as copy_gbps") {
  klab::Ceiling c;
  c.read_gbps = c.read_gbps_launch = 4600;
  c.read_gbps_by_loads = {{1, 4000}, {4, 4600}};
  c.copy_gbps_by_loads = {{1, 3900}, {2, 3880}, {4, 3830}, {8, 3820}};
  c.copy_gbps = 3900;
  c.copy_loads = 1;
  const nlohmann::json j = klab::to_json(c);
  CHECK(j.at("copy_gbps").get<double>() == 3900);
  CHECK(j.at("copy_loads_in_flight").get<int>() == 1);
  const auto& forms = j.at("copy_gbps_by_loads_launch");
  REQUIRE(forms.size() == 4);
  CHECK(forms.at("2").get<double>() == 3880);
  CHECK(forms.at("8").get<double>() == 3820);
  CHECK(j.at("read_gbps_by_loads_launch").at("4").get<double>() == 4600);
  // the copy back to back (stream mode): not measured here, so 0 and no forms
  CHECK(j.at("modes").at("stream").at("copy_gbps").get<double>() == 0);
  CHECK(j.at("modes").at("stream").at("copy_gbps_by_form").empty());
}

TEST_CASE("the ceiling's stream-mode copy: every form under its name, the best as modes.stream.copy_gbps, and copy_gbps_of picks the mode") {
  klab::Ceiling c;
  c.copy_gbps = 3917;
  c.copy_gbps_stream_by_form = {{"1", 3950}, {"2,pdl", 4010}, {"8", 3890}};
  c.copy_gbps_stream = 4010;
  c.copy_stream_loads = 2;
  c.copy_stream_pdl = true;
  const nlohmann::json j = klab::to_json(c);
  const auto& st = j.at("modes").at("stream");
  CHECK(st.at("copy_gbps").get<double>() == 4010);
  CHECK(st.at("copy_loads_in_flight").get<int>() == 2);
  CHECK(st.at("copy_pdl").get<bool>());
  REQUIRE(st.at("copy_gbps_by_form").size() == 3);
  CHECK(st.at("copy_gbps_by_form").at("2,pdl").get<double>() == 4010);
  CHECK(st.at("copy_gbps_by_form").at("8").get<double>() == 3890);
  CHECK(j.at("copy_gbps").get<double>() == 3917);  // the launch-mode copy keeps its key
  CHECK(c.copy_gbps_of(klab::TimingMode::stream) == 4010);
  CHECK(c.copy_gbps_of(klab::TimingMode::launch) == 3917);
}
