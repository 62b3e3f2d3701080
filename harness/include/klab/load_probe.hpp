#pragma once
// What one link of a dependent chain costs while DRAM streams (`klab probe-hop`; issues 13 and 14).
//
// The run's ceiling measures a dependent hop on an idle GPU (Ceiling::hop_*: a graph of launches, each
// reading after griddepcontrol.wait the words the launch before it wrote; H200, run-fe10a61: 0.93 us a launch
// over a full grid, 0.55 us for one block). A decode kernel's chain runs while weights stream: the loads of the
// next launch, or of the same one, are in flight when a link's release, its L2 round trip and its completion
// happen. This measures the same hop, and one dependent L2 round trip inside a thread (a pointer chase over
// lines read into L2 before), while a background kernel on another stream keeps a chosen depth of 16-byte
// loads in flight on every SM. The background reads with ld.global.cs (evict-first), so the chase's lines stay
// in L2; its loads are TMA-free LDGs, not the ring's bulk copies.
#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <vector>

namespace klab {

// The background: `blocks_per_sm` blocks of 256 threads per SM, each thread with `loads` independent 16-byte
// loads in flight, reading a 1 GiB buffer over and over. loads = 0: no background (the idle reference).
struct LoadForm {
  int loads = 0;          // 0 (none), 1, 2, 4 or 8
  int blocks_per_sm = 0;  // 1 to 4 (0 with loads 0)
  std::size_t inflight_bytes_per_sm() const { return std::size_t(loads) * 16u * 256u * std::size_t(blocks_per_sm); }
  std::string str() const;  // "none" or "L loads x B blocks"
};

// A form's refusal, "" when it can run.
std::string load_form_error(const LoadForm& f);
// "L,B" (or "none") as --form takes it; throws Error naming the text and the values allowed.
LoadForm parse_load_form(const std::string& s);
// The forms `klab probe-hop` runs when none is given: none, then 8, 16, 32, 64 and 128 KB per SM in flight.
std::vector<LoadForm> default_load_forms();

struct HopUnderLoad {
  LoadForm form;
  double bg_gbps = 0;       // the background's read rate alone (0 without one)
  double bg_gbps_with = 0;  // its rate over the runs with the foreground beside it (median)
  double hop_one_us = 0;    // per launch: a graph of PDL hops of one block of 32 threads (median over reps)
  double hop_grid_us = 0;   // the same, 2 blocks of 256 threads per SM
  double chase_ns = 0;      // one dependent ld.global.cg over a 1 MB ring of 128-byte lines already in L2 (median)
  int reps = 0;             // runs the medians are over; each with the background running from before the
                            // foreground's first event to after its last (runs where it did not are repeated
                            // with a longer background)
  int bg_passes = 0;        // passes over the 1 GiB buffer the background made a run
};

// One form on the current device: the foreground on `fg`, the background on `bg` (two distinct streams that do
// not synchronise with each other). `launches` hops per graph (>= 8), `reps` runs (>= 1).
HopUnderLoad measure_hop_under_load(const LoadForm& form, int launches, int reps, cudaStream_t fg, cudaStream_t bg);

}  // namespace klab
