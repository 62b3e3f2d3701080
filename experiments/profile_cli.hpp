#pragma once
// `klab profile-one`: one launch of a variant for a profiler (experiments/profile_cli.cpp).
#include <string>
#include <vector>

namespace klab::experiments {
extern const char* const kProfileOneUsage;
int profile_one_command(const std::vector<std::string>& args, int argc, char** argv);
}  // namespace klab::experiments
