#include "klab/report.hpp"

#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "klab/error.hpp"

namespace klab {

// Filled in at build time (harness/git_info.cmake).
extern const char* const kGitCommit;
extern const bool kGitDirty;

std::string utc_now() {
  auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return date;
}

nlohmann::json base_environment(int argc, char** argv) {
  std::string cmd;
  for (int i = 0; i < argc; ++i) {
    if (i) cmd += ' ';
    cmd += argv[i];
  }
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return {{"git_commit", kGitCommit}, {"git_dirty", kGitDirty}, {"date", utc_now()}, {"command", cmd}, {"host", host},
          {"klab_version", "0.1"}};
}

namespace {
volatile std::sig_atomic_t g_stop_signal = 0;
// The first SIGINT or SIGTERM asks for a stop at the next record; a second one kills at once (the
// default action), leaving the report without its end record. Only async-signal-safe calls here.
extern "C" void on_stop_signal(int sig) {
  if (g_stop_signal != 0) {
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    return;
  }
  g_stop_signal = sig;
  static const char msg[] = "klab: stopping at the next record boundary (signal again to stop at once)\n";
  [[maybe_unused]] auto n = ::write(STDERR_FILENO, msg, sizeof msg - 1);
}

long env_count(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return -1;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  require(*end == 0 && n >= 0, std::string(name) + " must be a non-negative integer (got '" + v + "')");
  return n;
}
}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a sleep or a blocking read returns early
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int stop_signal() { return g_stop_signal; }

std::string signal_name(int sig) {
  if (sig == SIGINT) return "SIGINT";
  if (sig == SIGTERM) return "SIGTERM";
  return "signal " + std::to_string(sig);
}

void Report::open(const std::filesystem::path& dir, const std::string& stem, const std::vector<std::string>& argv) {
  require(!out_.is_open(), "report already open: " + file().string());
  stall_after_ = env_count("KLAB_TEST_STALL_AFTER_RECORDS");
  fail_after_ = env_count("KLAB_TEST_FAIL_AFTER_RECORDS");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  require(!ec, "cannot create report directory " + dir.string() + ": " + ec.message());
  dir_ = dir;
  stem_ = stem;
  // The previous report's CSVs go with it (this run writes its own at the end): STEM.csv (schema 1's
  // union CSV) and STEM-KIND.csv.
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() == ".csv" && (name == stem + ".csv" || name.rfind(stem + "-", 0) == 0))
      std::filesystem::remove(e.path(), ec);
  }
  out_.open(file(), std::ios::binary | std::ios::trunc);
  require(static_cast<bool>(out_), "cannot write " + file().string());
  start_ = env_.value("date", utc_now());
  nlohmann::json header = {{"kind", "header"}, {"schema_version", kReportSchemaVersion}, {"start", start_},
                           {"argv", argv}, {"env", env_}};
  out_ << header.dump() << "\n";
  out_.flush();
  require(static_cast<bool>(out_), "writing " + file().string() + " failed (disk full?)");
}

void Report::add(nlohmann::json record) {
  if (out_.is_open()) {
    out_ << record.dump() << "\n";
    out_.flush();
    require(static_cast<bool>(out_), "writing " + file().string() + " failed (disk full?)");
  }
  records_.push_back(std::move(record));
  after_record();
}

void Report::after_record() {
  const long n = static_cast<long>(records_.size());
  if (n == fail_after_) throw std::runtime_error("test hook KLAB_TEST_FAIL_AFTER_RECORDS: failing after record " + std::to_string(n));
  if (n == stall_after_) {
    std::cerr << "klab: test hook: stalling after record " << n << std::endl;
    for (int i = 0; i < 600 && !stop_signal(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (int sig = stop_signal()) throw Interrupted(sig);
}

void Report::close(EndStatus status, const std::string& detail) {
  std::map<std::string, long> counts;
  for (const auto& r : records_) ++counts[r.value("kind", "")];
  static const char* const kStatus[] = {"complete", "failed", "interrupted"};
  nlohmann::json end = {{"kind", "end"}, {"status", kStatus[static_cast<int>(status)]},
                        {"records", records_.size()}, {"counts", counts}, {"start", start_}, {"end", utc_now()}};
  if (status == EndStatus::failed) end["error"] = detail;
  if (status == EndStatus::interrupted) end["signal"] = detail;
  if (out_.is_open()) {
    out_ << end.dump() << "\n";
    out_.flush();
    const bool ok = static_cast<bool>(out_);
    out_.close();
    require(ok, "writing " + file().string() + " failed (disk full?)");
    write_csv_per_kind(dir_, stem_, records_);
  }
}

void write_atomically(const std::filesystem::path& file, const std::string& text) {
  auto tmp = file;
  tmp += ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    require(static_cast<bool>(f), "cannot write " + tmp.string());
    f << text;
    f.flush();
    require(static_cast<bool>(f), "writing " + tmp.string() + " failed (disk full?)");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, file, ec);
  if (ec) {
    std::filesystem::remove(tmp);
    throw Error("cannot rename " + tmp.string() + " to " + file.string() + ": " + ec.message());
  }
}

std::vector<std::filesystem::path> write_csv_per_kind(const std::filesystem::path& dir, const std::string& stem,
                                                      const std::vector<nlohmann::json>& records) {
  std::vector<std::string> kinds;
  std::map<std::string, std::vector<nlohmann::json>> by_kind;
  for (const auto& r : records) {
    const std::string k = r.value("kind", "");
    if (k == "header" || k == "end") continue;
    if (!by_kind.count(k)) kinds.push_back(k);
    by_kind[k].push_back(r);
  }
  std::vector<std::filesystem::path> files;
  for (const auto& k : kinds) {
    std::string safe = k.empty() ? "unknown" : k;
    for (char& c : safe)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') c = '_';
    files.push_back(dir / (stem + "-" + safe + ".csv"));
    write_atomically(files.back(), to_csv(by_kind[k]));
  }
  return files;
}

std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& file) {
  std::ifstream f(file);
  require(static_cast<bool>(f), "cannot read report " + file.string());
  std::vector<nlohmann::json> out;
  std::string line;
  int n = 0;
  while (std::getline(f, line)) {
    ++n;
    if (line.empty()) continue;
    try {
      auto j = nlohmann::json::parse(line);
      require(j.is_object() && j.contains("kind"), "not a record (an object with \"kind\")");
      out.push_back(std::move(j));
    } catch (const nlohmann::json::exception& e) {
      throw Error(file.string() + ":" + std::to_string(n) + ": malformed JSON: " + e.what());
    } catch (const Error& e) {
      throw Error(file.string() + ":" + std::to_string(n) + ": " + e.what());
    }
  }
  return out;
}

namespace {
void flatten(const nlohmann::json& j, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
  } else if (j.is_array()) {
    return;  // samples stay in the JSONL
  } else if (j.is_string()) {
    out[prefix] = j.get<std::string>();
  } else {
    out[prefix] = j.dump();
  }
}
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}
}  // namespace

std::string to_csv(const std::vector<nlohmann::json>& records) {
  std::vector<std::map<std::string, std::string>> rows;
  std::vector<std::string> cols;
  std::set<std::string> seen;
  for (const auto& r : records) {
    std::map<std::string, std::string> row;
    flatten(r, "", row);
    // Column order: first appearance, record by record, keys in record order.
    for (auto it = r.begin(); it != r.end(); ++it) {
      std::map<std::string, std::string> sub;
      flatten(it.value(), it.key(), sub);
      for (const auto& [k, v] : sub)
        if (seen.insert(k).second) cols.push_back(k);
    }
    rows.push_back(std::move(row));
  }
  std::ostringstream os;
  for (std::size_t i = 0; i < cols.size(); ++i) os << (i ? "," : "") << csv_field(cols[i]);
  os << "\n";
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < cols.size(); ++i) {
      auto it = row.find(cols[i]);
      os << (i ? "," : "") << (it == row.end() ? "" : csv_field(it->second));
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace klab
