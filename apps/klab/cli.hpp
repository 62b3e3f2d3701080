#pragma once
// Commands beyond list/run/ab/env (e.g. `klab gdn`) register here, so main.cpp needs no change.
#include <functional>
#include <string>
#include <vector>

namespace klab {
struct Command {
  std::string name;
  std::string usage;  // one line for `klab --help`
  std::function<int(const std::vector<std::string>& args, int argc, char** argv)> run;
};
// Defined in extra_commands.cpp: the list of extra commands.
const std::vector<Command>& extra_commands();
}  // namespace klab
