#pragma once
// Reports (reports/SCHEMA.md, schema 2): DIR/report.jsonl, one JSON record per line, written as the
// run goes. open() truncates the file and writes a "header" record (schema version, the run's
// environment once, argv, start time); add() appends each record and flushes it; close() appends an
// "end" record (complete | failed | interrupted, the record counts, end time) and writes one CSV
// per record kind beside it (report-measurement.csv, report-claim.csv, ...). A run killed hard
// leaves a report without the "end" record: readers call it incomplete. Nothing is opened before
// the caller has validated its input, so bad input leaves no report at all.
#include <csignal>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace klab {

// The version of the report format this harness writes (reports without a header are version 1:
// "env" on every record, no closing record).
constexpr int kReportSchemaVersion = 2;

// Where and how this binary was built and run: git commit and dirty flag (at build time), date,
// command line, host. Device fields are added by the caller when there is a device.
nlohmann::json base_environment(int argc, char** argv);
// Now, UTC, ISO 8601 (2026-12-01T03:54:44Z).
std::string utc_now();

// SIGINT and SIGTERM: install_stop_handlers() makes them set a flag (stop_signal() returns the
// signal, 0 before any) instead of killing the process; Report::add() throws Interrupted at the next
// record boundary, so the run can close its report as "interrupted". A second signal kills at once.
void install_stop_handlers();
int stop_signal();
struct Interrupted : std::exception {
  explicit Interrupted(int sig) : signal(sig) {}
  const char* what() const noexcept override { return "interrupted by a signal"; }
  int signal;
};
// "SIGINT", "SIGTERM", or "signal N".
std::string signal_name(int sig);

enum class EndStatus { complete, failed, interrupted };

class Report {
 public:
  explicit Report(nlohmann::json env) : env_(std::move(env)) {}
  Report(const Report&) = delete;
  Report& operator=(const Report&) = delete;

  nlohmann::json& env() { return env_; }
  // Opens DIR/STEM.jsonl (creating DIR; a previous report there is replaced: the .jsonl truncated,
  // its STEM.csv and STEM-*.csv removed) and writes the header record. `argv`: the command line.
  void open(const std::filesystem::path& dir, const std::string& stem, const std::vector<std::string>& argv);
  bool is_open() const { return out_.is_open(); }
  std::filesystem::path file() const { return dir_ / (stem_ + ".jsonl"); }

  // Adds a record (it carries "kind": measurement | claim | skip | ...; the environment is in the
  // header, not on the record). When open, the record is written and flushed at once; then, when a
  // stop signal has arrived, throws Interrupted.
  void add(nlohmann::json record);
  const std::vector<nlohmann::json>& records() const { return records_; }

  // Writes the closing record (status; `detail`: the error message of a failed run, the signal of
  // an interrupted one), closes the file and writes the per-kind CSVs of the records added.
  void close(EndStatus status, const std::string& detail = "");

  // Test hooks, read by open() (documented in reports/SCHEMA.md, "Test hooks"):
  // KLAB_TEST_STALL_AFTER_RECORDS=N pauses after the N-th record (until a stop signal, or 60 s),
  // printing "klab: test hook: stalling after record N" on stderr first;
  // KLAB_TEST_FAIL_AFTER_RECORDS=N throws klab::Error after the N-th record.

 private:
  void after_record();
  nlohmann::json env_;
  std::vector<nlohmann::json> records_;
  std::filesystem::path dir_;
  std::string stem_;
  std::ofstream out_;
  std::string start_;
  long stall_after_ = -1, fail_after_ = -1;
};

// Reads a JSONL report back (throws klab::Error naming the file and line on malformed input).
// Every record comes back, header and end included.
std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& file);
// Flattens records to CSV: the union of scalar leaf keys (dotted paths), arrays left out.
std::string to_csv(const std::vector<nlohmann::json>& records);
// Writes DIR/STEM-KIND.csv for each kind of `records` (header and end records left out); returns
// the files written, in order of the kinds' first appearance.
std::vector<std::filesystem::path> write_csv_per_kind(const std::filesystem::path& dir, const std::string& stem,
                                                      const std::vector<nlohmann::json>& records);
// Writes `text` to `file` atomically: FILE.tmp.PID, then rename.
void write_atomically(const std::filesystem::path& file, const std::string& text);

}  // namespace klab
