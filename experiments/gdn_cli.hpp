#pragma once
// `klab gdn`: step one GDN layer over an input sequence from .safetensors files, print a
// per-operator table, and compare with an oracle (scripts/gen_gdn_fixture.py) when given one.
#include <string>
#include <vector>

namespace klab::experiments {

// Registered in apps/klab/extra_commands.cpp. Returns 0 (ran; within tolerance when compared),
// 3 (an output or state outside the tolerance, or non-finite); throws klab::Error on bad options
// or files (the CLI prints it and exits 2).
int gdn_command(const std::vector<std::string>& args, int argc, char** argv);

// The one-line usage shown by `klab --help`.
extern const char* const kGdnUsage;

}  // namespace klab::experiments
