#pragma once
// Reports: one JSON Lines record per measurement, each carrying the environment; written
// atomically (temporary file, then rename) with a CSV beside it. Nothing is written until
// write() is called, so a run that fails leaves no half-written report.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace klab {

// Where and how this binary was built and run: git commit and dirty flag (at build time), date,
// command line, host. Device fields are added by the caller when there is a device.
nlohmann::json base_environment(int argc, char** argv);

class Report {
 public:
  explicit Report(nlohmann::json env) : env_(std::move(env)) {}
  // Adds a record; "env" is attached to it. Records carry "kind": measurement | claim | skip | ...
  void add(nlohmann::json record);
  const std::vector<nlohmann::json>& records() const { return records_; }
  nlohmann::json& env() { return env_; }
  // Writes DIR/STEM.jsonl and DIR/STEM.csv atomically (creating DIR).
  void write(const std::filesystem::path& dir, const std::string& stem) const;

 private:
  nlohmann::json env_;
  std::vector<nlohmann::json> records_;
};

// Reads a JSONL report back (throws klab::Error naming the file and line on malformed input).
std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& file);
// Flattens records to CSV: the union of scalar leaf keys (dotted paths), arrays left out.
std::string to_csv(const std::vector<nlohmann::json>& records);
// Writes `text` to `file` atomically: FILE.tmp.PID, then rename.
void write_atomically(const std::filesystem::path& file, const std::string& text);

}  // namespace klab
