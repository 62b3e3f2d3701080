#pragma once
// `klab profile-one`: one launch of a variant for a profiler (experiments/profile_cli.cpp).
#include <string>
#include <vector>

#include "klab/registry.hpp"

namespace klab::experiments {
extern const char* const kProfileOneUsage;
// `reg`: the registry the variant is looked up in (the CLI passes the catalogue's).
int profile_one_command(const Registry& reg, const std::vector<std::string>& args, int argc, char** argv);
}  // namespace klab::experiments
