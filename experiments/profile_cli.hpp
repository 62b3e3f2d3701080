#pragma once
// `klab profile-one`: one launch of a variant for a profiler; `klab probe-ring` (experiments/profile_cli.cpp).
#include <string>
#include <vector>

#include "klab/registry.hpp"

namespace klab::experiments {
extern const char* const kProfileOneUsage;
// `reg`: the registry the variant is looked up in (the CLI passes the catalogue's).
int profile_one_command(const Registry& reg, const std::vector<std::string>& args, int argc, char** argv);
// `klab probe-ring`: the q4 ring's loads alone (q4_gemv::packed::launch_ring_probe) in stream mode, beside the
// run's read of the same bytes: one JSON line. Not a variant and not a report: a probe for issue 13's question of
// what bounds the ring at 17408x5120 (docs/DEVICE-RUNBOOK.md).
extern const char* const kProbeRingUsage;
int probe_ring_command(const std::vector<std::string>& args, int argc, char** argv);
}  // namespace klab::experiments
