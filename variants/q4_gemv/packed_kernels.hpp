#pragma once
// The map=packed kernels (packed.cu) and their bit-models (packed_model.cpp), appended to the
// family's lists by q4_kernels() / q4_models().
#include <cstdint>
#include <string>
#include <vector>

#include "q4_gemv/q4_gemv.hpp"

namespace klab::q4_gemv::packed {
std::vector<Q4Kernel> packed_kernels();
std::vector<Q4ModelEntry> packed_models();
// Why map=packed cannot take k (empty: it can): k > 32768.
std::string packed_error(std::int64_t k);
// The counters of a flag-released kernel on the current device: grid=groups,xprep=flag's (packed.cu,
// packed_xf_kernel) or wait=flag's (the ring's tickets and its prep kernel's count and flag,
// xprep_wf_kernel): tickets taken in the open call, calls begun, prep blocks counted in the open call,
// the last call published + 1. In step between calls: tickets == 0, counted == 0, published == calls.
// For tests (set_* puts them out of step to run the kernels' timeout path); both synchronise with the
// device. Throw CudaError.
enum class FlagSet { xprep_flag, wait_flag };
struct XfCounters {
  std::uint32_t tickets, calls, counted, published;
};
XfCounters xf_counters(FlagSet which = FlagSet::xprep_flag);
void set_xf_counters(const XfCounters& c, FlagSet which = FlagSet::xprep_flag);
// The ring read probe (`klab probe-ring`): rung 32's ring kernel (grid=fill, load=bulk, rows=8, pdl=on) with its
// stages, waits, barriers and refills over `packed` (ring_probe_bytes(m, k) bytes, 16-byte aligned, any content)
// but no x and no dots: y[0..m) gets +0. Not a variant (it computes no product): it times the ring's loads alone,
// to set beside the read ceiling and rung 32. Refuses, before any CUDA call, what rung 32 would (k, null buffers,
// alignment). Throws klab::Error (refusals) or CudaError.
void launch_ring_probe(const std::uint8_t* packed, float* y, int m, int k, cudaStream_t stream);
std::int64_t ring_probe_bytes(int m, int k);
// The stamp probe (`klab probe-q4`): a q4 main kernel with thread 0 of each block reading %globaltimer at
// q4_stamp_points() points of its path into stamps[(launch * grid + block) * points + i], for the first `launches`
// launches after q4_stamp_begin (launch: the index of the launch's copy of the weights, (packed - base) / stride; each
// launch a copy of its own); launches = 0 turns the stamps off (before their buffers go). Not a variant: the stamps are
// on the path they measure (packed.cu, Q4Stamper, which lists the points).
//   StampGrid::fill: the ring kernel of rung 11 (grid=fill,xprep=launch,load=bulk,pdl=on,rows=8) or of depth=1|2|3
//   (depth: 0 = the ring's own stages); waits[launch * grid + block] gets the block's time in its stages' mbarrier
//   waits (ns). Points: entry, stage requests issued, after griddepcontrol.wait, x in registers, the first stage's
//   bytes in, the first group done, the last stage's bytes in, exit.
//   StampGrid::groups: rung 10's main kernel (grid=groups,xprep=launch,pdl=on,rows=8; depth 0 only; waits stay 0).
//   Points: entry, the group's loads issued, after the wait, x in registers, the weights in registers, the dots done,
//   after the block's barrier, exit.
//   StampGrid::paced: rung 85's (grid=fill,xprep=warps,load=bulk,pace=1,pdl=on,rows=8; depth 0 only; its prep launch a
//   warp per block of x), thread 0 its first consumer: the ring's points and waits, point 1 the consumers at their wait
//   (the producer warp requests on its own from the block's start). Refused where pace=1 runs the ring (k > 31744).
//   StampGrid::split_k, split_k1, split_k_last: grid=split-k,owners=8,stages=2,rows=8 at per-sm=2 (rung 115), per-sm=1
//   (rung 116) and with fold=last (rung 119); split_k4: owners=8,stages=4,per-sm=1,rows=4 (rung 121) (no prep launch:
//   each block quantises its chunk of x, or reads it from g_xq when prepared), thread 0 warp 0's lane 0: entry, its
//   warp's first tiles requested, after the wait, the chunk's x in shared memory, every cluster member started (fold=last: the same point again), warp 0's first tile's bytes in, its
//   last tile done, exit after the fold; waits: warp 0's for its tiles' bytes. Refused where the launcher runs the paced
//   ring (k > 8192, a cluster's rows past 1024, fold=last past m = 65536).
// Either after its prep launch or, `prepared`, alone on the x in g_xq (launch_prepared's form). q4_stamp_grid: the
// launch's blocks (refuses what the kernel would). Throw klab::Error or CudaError.
enum class StampGrid { fill, groups, paced, split_k, split_k1, split_k4, split_k_last };
// Whether g is one of grid=split-k's stamped kernels (their points and phases differ from the rings').
constexpr bool is_split_k(StampGrid g) {
  return g == StampGrid::split_k || g == StampGrid::split_k1 || g == StampGrid::split_k4 || g == StampGrid::split_k_last;
}
int q4_stamp_points();
std::vector<int> ring_stamp_depths();
int q4_stamp_grid(StampGrid g, int m, int k);
void launch_q4_stamped(StampGrid g, int depth, bool prepared, const std::uint8_t* packed, const float* x, float* y, int m, int k, cudaStream_t stream);
void q4_stamp_begin(unsigned long long* stamps, unsigned long long* waits, int launches, const std::uint8_t* base, long long stride, cudaStream_t s);
}  // namespace klab::q4_gemv::packed
