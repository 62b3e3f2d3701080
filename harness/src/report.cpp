#include "klab/report.hpp"

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "klab/error.hpp"

namespace klab {

// Filled in at build time (harness/git_info.cmake).
extern const char* const kGitCommit;
extern const bool kGitDirty;

nlohmann::json base_environment(int argc, char** argv) {
  std::string cmd;
  for (int i = 0; i < argc; ++i) {
    if (i) cmd += ' ';
    cmd += argv[i];
  }
  auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return {{"git_commit", kGitCommit}, {"git_dirty", kGitDirty}, {"date", date}, {"command", cmd}, {"host", host},
          {"klab_version", "0.1"}};
}

void Report::add(nlohmann::json record) {
  record["env"] = env_;
  records_.push_back(std::move(record));
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

void Report::write(const std::filesystem::path& dir, const std::string& stem) const {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  require(!ec, "cannot create report directory " + dir.string() + ": " + ec.message());
  std::string jsonl;
  for (const auto& r : records_) jsonl += r.dump() + "\n";
  // CSV first: the JSONL is the report of record, so it appears last and only if both succeeded.
  write_atomically(dir / (stem + ".csv"), to_csv(records_));
  write_atomically(dir / (stem + ".jsonl"), jsonl);
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
