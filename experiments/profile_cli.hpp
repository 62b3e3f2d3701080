#pragma once
// `klab profile-one`: one launch of a variant for a profiler; `klab probe-ring` (experiments/profile_cli.cpp).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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
// `klab probe-rec`: the recurrence's pdl=ahead kernel with in-kernel %globaltimer stamps (gdn_recurrence's stamp
// probe), launches back to back in a graph over rotating state copies: one JSON line saying where a launch's period
// goes (the hop from the last block of the launch before to the first release from the wait, then each phase after
// it). Not a variant and not a report: a probe for issue 14's batch-1 question (docs/DEVICE-RUNBOOK.md).
extern const char* const kProbeRecUsage;
int probe_rec_command(const std::vector<std::string>& args, int argc, char** argv);
// `klab probe-hop`: the ceiling's dependent hop and a dependent L2 round trip, measured while a background kernel
// on another stream keeps a chosen depth of loads in flight on every SM (klab/load_probe.hpp): one JSON line a
// background form. Not a variant and not a report: a probe for the question both issue 13's small shapes and issue
// 14's six launches a layer come to (docs/DEVICE-RUNBOOK.md): what one link of a chain costs while weights stream.
extern const char* const kProbeHopUsage;
int probe_hop_command(const std::vector<std::string>& args, int argc, char** argv);
// `klab probe-cluster`: whether a PDL grid with a cluster dimension enters before the grid before it ends
// (klab/cluster_probe.hpp): one JSON line a form. Not a variant and not a report: a probe for issue 13's grid=split-k,
// whose calls, each a cluster launch, paid a near constant 2.1-2.6 us more than the paced ring's (docs/DEVICE-RUNBOOK.md).
extern const char* const kProbeClusterUsage;
int probe_cluster_command(const std::vector<std::string>& args, int argc, char** argv);
// The probe's reading of stamps (launches x blocks x points, ns; 0 = not written): per launch the first entry, the
// first and last release from the wait and the last exit; the medians over launches from `skip` on of the period,
// the hop and the span after the first release, and of each phase i -> i+1 over blocks; the smallest positive step
// seen between two stamps of a block (the timer's resolution, at most). Host-only, so the cpu suite checks it.
// Point 2 is the release from griddepcontrol.wait in both probes' kernels; `phase_names` names the phases i -> i+1
// (points - 1 of them); without it, the recurrence's seven.
nlohmann::json stamp_reading(const std::vector<unsigned long long>& stamps, int launches, int blocks, int points, int skip);
nlohmann::json stamp_reading(const std::vector<unsigned long long>& stamps, int launches, int blocks, int points, int skip,
                             const std::vector<std::string>& phase_names);
// `klab probe-q4`: a q4 main kernel with in-kernel %globaltimer stamps (q4_gemv::packed::launch_q4_stamped: the ring
// of rung 11 or depth=1|2|3, or rung 10's grid=groups kernel), after its prep launch or alone on prepared x, launches
// back to back in a graph over rotating copies of the weights: one JSON line saying where a call's period goes (the
// hop from the last block of the call before to the first release, then each phase of a block: x, its bytes, its
// work, the exit) and, for the ring, how long a block waits for its stages' bytes. Not a variant and not a report: a
// probe for issue 13's small shapes (docs/DEVICE-RUNBOOK.md).
extern const char* const kProbeQ4Usage;
int probe_q4_command(const std::vector<std::string>& args, int argc, char** argv);
}  // namespace klab::experiments
