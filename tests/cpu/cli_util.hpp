#pragma once
// Runs the klab CLI built beside the tests (KLAB_CLI) and captures its exit code and output.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

namespace klab::test {

struct CliResult {
  int code;
  std::string out;  // stdout and stderr together (stdout alone with stdout_only)
};

// A path in the temporary directory for this test process: klab-TAG-PID-NAME.safetensors.
inline std::filesystem::path temp_safetensors(const std::string& tag, const std::string& name) {
  return std::filesystem::temp_directory_path() / ("klab-" + tag + "-" + std::to_string(::getpid()) + "-" + name + ".safetensors");
}

// A fresh (removed if there) path in the temporary directory for this test process: klab-TAG-PID.
inline std::filesystem::path temp_out_dir(const std::string& tag) {
  auto d = std::filesystem::temp_directory_path() / ("klab-" + tag + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  return d;
}

inline bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The klab binary: $KLAB_CLI where set (the suite run away from its build tree, e.g. on a lent GPU machine), else the
// one built beside the tests.
inline std::string klab_cli_path() {
  const char* env = std::getenv("KLAB_CLI");
  return env && *env ? std::string(env) : std::string(KLAB_CLI);
}

inline CliResult klab_cli(const std::string& args, bool stdout_only = false) {
  const std::string cmd = klab_cli_path() + " " + args + (stdout_only ? " 2>/dev/null" : " 2>&1");
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  REQUIRE(p);
  std::string out;
  std::array<char, 4096> buf{};
  while (auto n = fread(buf.data(), 1, buf.size(), p.get())) out.append(buf.data(), n);
  const int status = pclose(p.release());
  return {WEXITSTATUS(status), out};
}

}  // namespace klab::test
