// q4-to-ceiling (issue 13, "the q4 mat-vec at the read ceiling"): the ladder from today's fastest
// q4 mat-vec, block-per-thread,dot=offset,rows=8 (22.9 / 15.6 / 11.1 / 11.1 us in a graph on the
// H200, 35-48% of the 4.59 TB/s read ceiling; Nsight: 66 registers, occupancy 39%, issue- and
// latency-bound), through the rungs of map=packed (variants/q4_gemv/packed.cu), at the four seed
// shapes, uniform (timed) and Student-t (bits and accuracy) inputs, with the cuBLAS peers beside.
//
// Rungs, each a registered variant (losers stay registered), in ladder order:
//   0  block-per-thread,dot=offset,rows=8                       today's fastest
//   per dot form (f32, f16x2, q8-dp4a) of map=packed, rows=4:
//   1  grid=groups,pdl=on    tiled layout, one thread block per group of 4 rows, PDL
//   2  grid=fill,pdl=off     persistent blocks, next group's loads in flight, plain launch
//   3  grid=fill,pdl=on      the same with PDL (pdl=off is its twin: what PDL gives)
//   then grid=groups,xprep=launch (x prepared once per launch by a first PDL-chained kernel, one
//   block per group, every load issued before the wait; packed.cu), best guess first:
//   10 q8-dp4a rows=8 pdl=on (the fastest measured: 73.6 / 62.1 / 57.2 / 56.4% of the ceiling, but
//      latency-bound: Nsight DRAM 68.5%, long_scoreboard 21.8 cycles per issue), then the ring
//      (grid=fill,xprep=launch,load=bulk|cp-async, q8-dp4a; packed_ring.hpp), measured in
//      reports/h200/q4-ring-trial/ and reports/h200/run-30bee11/ (rung 11 faster than rung 10 at 17408x5120 only):
//   11 load=bulk rows=8 pdl=on      S whole groups per block in flight in shared memory (TMA), not registers
//   12 load=bulk rows=4 pdl=on      the same with half the group: twice the groups, finer balance at 5120-6144 rows
//   13 load=cp-async rows=8 pdl=on  the same ring filled by per-thread cp.async: no mbarrier, no single issuer
//   14 load=bulk rows=8 pdl=off     rung 11's twin: what PDL gives a persistent ring
//   then grid=half (the ring in half an SM's shared memory, packed_ring.hpp), measured in
//   reports/h200/q4-ring-trial/round2/ and reports/h200/run-30bee11/ (every grid=half rung slower than
//   rungs 10 and 11 at every seed shape); the trial (reports/h200/q4-ring-trial/) put rung 11 at
//   77.2 / 60.1 / 48.7 / 49.8% against rung 10's
//   73.3 / 62.0 / 56.9 / 56.1%: its two 92 KB blocks fill the SM, so no next launch overlaps it:
//   15 xprep=block per-sm=1 pdl=on  one block per SM (1.03x balance at every seed shape), the next launch's blocks co-reside and load during this one; no prep kernel
//   16 xprep=block per-sm=2 pdl=on  two blocks of 2 stages per SM: twice the consumer warps, grid=fill's balance
//   17 xprep=launch per-sm=1 pdl=on rung 15 with the prep kernel: what co-residency alone gives over rung 11
//   18 xprep=block per-sm=1 pdl=off rung 15's twin: co-residency needs PDL
//   19 q8-dp4a rows=4 pdl=on   20 q8-dp4a rows=4 pdl=off (its twin)
//   21 f16x2 rows=4 pdl=on     22 f32 rows=8 pdl=on (the bits of rung 0)
//   then grid=warp (one warp per group, every chunk's loads in flight, no barrier; packed.cu), not
//   yet measured: 23 rows=4 inflight=6 pdl=on, 24 rows=2 inflight=8, 25 rows=8 inflight=3 (two
//   batches of loads at k = 5120), 26 rung 23's pdl=off twin, 27 rows=4 inflight=3 (fewer registers:
//   ptxas gives rung 23 153 registers, one wave and no room for a PDL successor)
//   The trial of 23-27 (reports/h200/q4-warp-trial/, H200, 2026-12-01): every grid=warp rung slower than
//   rung 10 at every seed shape (rows=4 inflight=6: 19.7 / 13.2 / 8.6 / 8.8 us against 15.0 / 10.5 /
//   6.8 / 6.9), rows=2 slowest (27.9 us at 17408x5120): its x reads (48 bytes of prepared x per block
//   for every R rows) cost more than the barrier it saves. Hence:
//   28 grid=groups,xprep=launch,q8-dp4a,rows=16 pdl=on   half rung 10's x reads per weight
//   then xpf=l2 (packed.cu, prefetch_x_warp): x prefetched into L2 before the weight loads are issued, on
//   the twins of rungs 10, 19, 28, 11, 3 of q8-dp4a (grid=fill,pdl=on), 16 and 17: 29-35. Why: x is read
//   only after griddepcontrol.wait, behind every weight load issued before it (at 6144x5120 rung 10's
//   single wave issues the whole 17.7 MB), so its read waits for them and every dot waits for x: per
//   launch the byte time plus the whole x-to-y chain (6.85 us against a 3.8 us floor). Predicted: the
//   small shapes gain most (rung 10 at 6144x5120 from 6.85 toward ~5 us), 17408x5120 least.
//   then wpf=l2 (packed.cu, xprep_kernel): the twins of 29-32 whose tiny prep kernel, resident while
//   the previous call still runs, also prefetches this call's weights into L2 (at most half the L2):
//   36-39. Predicted: DRAM never idles at a launch boundary; 6144x5120 toward ~4.5 us (85%).
//   then xprep=cluster (packed.cu, packed_xc_kernel): rung 10's and 19's twins without the prep kernel,
//   x quantised after the wait by clusters of 8 blocks (1/8 of x each, 8 threads per block of 32) and
//   shared over distributed shared memory: 40, 41. Why: the prep kernel puts a kernel boundary (its
//   completion, then the main kernel's release) and an L2 round trip on every launch's path, while
//   per-thread quantisation (rung 3's kind: 12.6 us at 6144x5120) costs too many instructions after
//   the wait. Predicted (2026-12-01, before any run): the small shapes gain most, 6144x5120 from
//   6.83 toward ~5.5 us (70%); 17408x5120 little. Measured (reports/h200/run-4198a57, H200, stream):
//   slower everywhere, rows=8 9.92 us at 6144x5120 (x0.68), 18.94 at 17408x5120 (x0.79); Nsight: 1.69
//   against 1.03 SASS per MAC, membar and barrier stalls. Kept as a negative result.
//   then xprep=flag (packed.cu, packed_xf_kernel): 46-48, twins of 42 and 43 (and 46's pdl=off twin)
//   with the prep kernel taken into the launch and done ONCE: after the wait the blocks holding the
//   first P tickets quantise x into g_xq (8 threads per block of 32) and publish it by a flag that
//   every block polls. Why (kernel traces, run-4cb578e, run-e75fb18/slice): at 6144x5120 the period is
//   prep N+1 ending 2.8 us after main N, main N+1 3.8 us after that, and every x-dependent dot lies
//   after both hops. Predicted (2026-12-02, before any run): one hop less, 6144x5120 from 6.8 toward
//   ~5.3 us (~73%); 17408x5120 little.
//   Predicted (not measured): 10/11 ~12-13 / 8.5 / 6 / 6 us at the four seed shapes (balanced waves,
//   no per-block x preparation, no persistent-loop tail); 13 ~ fill's f16x2 or better; 14 ~20 us on
//   17408x5120 (A's structure less one FADD per weight, plus PDL).
// The f32 rungs compute exactly the bits of rung 0 (same block values, same sum order); f16x2 and
// q8-dp4a round x on purpose and carry their declared tolerances (Variant::tolerance, packed.hpp).
// Predicted, not measured (the file's header and variants/q4_gemv/README.md): ~3.3 / ~1.9 / ~1.3
// lane instructions per weight for f32 / f16x2 / q8-dp4a against ~4.1 available at the ceiling.
#include <algorithm>
#include <array>
#include <limits>
#include <map>

#include "common.hpp"
#include "klab/cuda.hpp"
#include "q4_gemv_common.hpp"

namespace klab::experiments {

namespace {

const std::string kToday = "q4_gemv/map=block-per-thread,dot=offset,rows=8";
const std::string kPeerBf16 = "q4_gemv/impl=cublas-bf16-gemmex";
const std::string kPeerF32 = "q4_gemv/impl=cublas-sgemv-f32";
// llama.cpp's MMVQ (q8_1 activations and DP4A, as the q8-dp4a form): raced where klab was built with
// ggml, else a skip with the reason; no claim depends on it.
const std::string kPeerMmvq = "q4_gemv/impl=llama-mmvq";
const std::vector<std::string> kForms{"f32", "f16x2", "q8-dp4a"};

// The rungs 29-35 are the xpf=l2 twins of these rungs (in this order).
constexpr std::array<std::size_t, 7> kXpfTwins{10, 19, 28, 11, 9, 16, 17};
constexpr std::size_t kXpf0 = 29;
// The rungs 36-39 are the wpf=l2 twins (packed.cu, xprep_kernel: the prep kernel prefetches its
// call's weights into L2) of the xpf=l2 rungs 29-32.
constexpr std::size_t kWpf0 = 36, kWpfN = 4;
// The rungs 40, 41: grid=groups,xprep=cluster,q8-dp4a,pdl=on, rows=8 and 4 (twins of rungs 10 and 19).
constexpr std::size_t kXc8 = 40, kXc4 = 41;
// The rungs 42-44: grid=groups,xprep=warps,q8-dp4a,pdl=on, rows=8, 4 and 16 (twins of rungs 10, 19, 28).
constexpr std::size_t kXw0 = 42;
constexpr std::array<std::size_t, 3> kXwTwins{10, 19, 28};
// The rung 45: grid=groups,xprep=warp,q8-dp4a,pdl=on,rows=8 (the prep in blocks of one warp, twin of rung 42).
// Measured in reports/h200/run-e75fb18: faster at the two large shapes, slower at the two small (warp-prep-pays not held).
constexpr std::size_t kXw1 = 45;
// The rungs 46-48: grid=groups,xprep=flag,q8-dp4a (no prep kernel: x quantised once, in the launch, by
// its first blocks, published by a flag), rows=8 and 4 with pdl=on (twins of rungs 42 and 43), rows=8
// with pdl=off.
// Measured (reports/h200/run-c00d582, stream): slower than their twins everywhere, 8.03 against 6.79 us
// at 6144x5120 (flag-pays not held; the trace and the why: packed.cu, kernel_xf's registration).
constexpr std::size_t kXf0 = 46, kXf8Off = 48;
// The rung 49: grid=half,xprep=launch,load=bulk,per-sm=2 (twin of rung 16 with the prep kernel, of 17 with two blocks per SM).
// Measured (reports/h200, the reference run of bafbb21, stream): 19.58 / 12.47 / 7.02 / 7.85 us at the four seed shapes;
// per-sm=1 (rung 17) 16.98 / 11.63 / 8.58 / 8.34, rung 10 14.98 / 10.49 / 6.82 / 6.89 (run-3772b2a).
constexpr std::size_t kHalf2Xl = 49;
// The rung 50: grid=groups,xprep=launch,load=bulk,rows=8 (rung 10's schedule, the group's weights by one TMA
// copy into shared memory: 43 registers, 8 blocks an SM instead of 6, so the next call's blocks co-reside).
// Measured (reports/h200/run-3772b2a, stream): the same as rung 10 at the small shapes (6.89 / 6.82 us), slower
// at the large ones (16.07 against 14.98 us at 17408x5120): smem-groups-pays not held.
constexpr std::size_t kRingGroups = 50;
// The rung 51: grid=half,xprep=launch,load=bulk,per-sm=2,last=regs (rung 49 with each block's last group in
// registers, loaded before griddepcontrol.wait: the whole share of a block in flight before the wait where
// it has at most 3 groups, i.e. at 6144x5120 and 5120x6144; packed.cu, packed_ring_kernel's Held).
// Measured (reports/h200/run-866a17b, stream): 19.31 / 10.16 / 7.76 / 7.82 us against rung 49's 18.94 / 11.64 / 6.87 /
// 7.51: faster at 10240x5120 only (predicted ~5 us at 6144x5120; the prep kernel between two calls lost what the main
// kernel gained). 10.20 and 10.16 us at 10240x5120 in run-019f260 and run-4530fab.
constexpr std::size_t kHalf2Held = 51;
// The rungs 52-54: the xpf=l2 twins of rungs 49 and 51 (the prep kernel requests x into L2 before its trigger),
// and last=l2 with xpf=l2 (the groups after the ring's requested into L2 by TMA prefetches, the first S before
// the wait). Why (the trace of rung 51 at 6144x5120, reports/h200/run-866a17b): the main kernel ends 3.23 us after
// its prep (rung 49: 4.26) but the prep 4.27 us after the main kernel before it (2.63); the guess: the prep's x
// read waits behind the next call's weight loads (not so: xpf=l2 leaves the prep as late). Measured (run-4530fab,
// stream): within 2% of their twins at every seed shape but 10240x5120, where rung 52 is x1.05 over 49 (10.94
// against 11.45 us) and rung 53 10.08 us.
constexpr std::size_t kHalf2XlXpf = 52, kHalf2HeldXpf = 53, kHalf2L2Xpf = 54;
// The rung 55: grid=half,xprep=launch,load=bulk,per-sm=2,pre=1 (rung 49 with only the first stage requested
// before the wait). Why (traces of 49, 51-54 in reports/h200/run-4530fab): the more a call requests before its
// wait, the later its prep kernel ends (packed.cu, its registration). Measured (run-019f260, stream): 19.08 / 11.70 /
// 6.94 / 7.24 us against rung 49's 18.93 / 11.20 / 6.86 / 7.53.
constexpr std::size_t kHalf2Pre1 = 55;
// The rung 56: grid=groups,xprep=warp,wpf=lines,q8-dp4a,pdl=on,rows=8, rung 45 whose one-warp prep blocks
// (resident beside the previous call's main kernel) request the call's weights into L2, a line a lane,
// after their trigger. Why (reports/h200/run-4341948): with the weights in L2 the xprep=launch chain takes
// 4.97 us at 6144x5120, 6.80 cold. Predicted before its run: toward the hot figures (~5 us at 6144x5120,
// ~7.5 at 10240x5120), less at 17408x5120 (half the L2 prefetched). Measured (reports/h200/run-839bf35, stream):
// 17.69 / 13.81 / 8.64 / 9.63 us against rung 45's 14.47 / 10.07 / 6.91 / 6.91: slower everywhere, hot too.
constexpr std::size_t kXwLines = 56;
// The rung 57: grid=groups,xprep=launch,parts=2,q8-dp4a,pdl=on,rows=8, rung 10 with its main kernel as two PDL
// launches over the halves of its row groups (packed.cu, launch_xl_parts). Measured once before it joined the
// ladder (reports/h200/run-parts, stream): 9.83 against rung 10's 10.39 us at 10240x5120 (x1.058; 1280 blocks,
// 1.6 waves, against two launches of 640 that fit one), slower at the other three shapes (x0.85-0.86): its
// claim parts-10240 repeats that one cell. Held in its first ladder run (reports/h200/run-f57df58, 2026-12-04):
// 10.73 -> 10.37 us (x1.035), slower at the other three shapes again.
constexpr std::size_t kXlParts2 = 57;
// The rungs 58-60: row-split=2|4 (packed.cu, packed_ring_kernel's Split), the ring with 2 or 4 threads per block of
// 32 weights, each taking 4 or 2 of a group's 8 rows: twice or four times the warps on the same stages and grid, the
// same bits. 58 and 59 are rung 32's twins (grid=fill,xpf=l2), 60 rung 52's (grid=half,per-sm=2,xpf=l2). Why
// (Nsight Compute, reports/h200/run-f57df58): rung 32 has 10 warps an SM, issue 24% of peak and 1.10 instructions
// per MAC at 17408x5120, and takes the same time hot and cold: its issue rate looked like the bound. Predicted before its run:
// rung 32 at 17408x5120 from ~14.2 toward ~12 us; little at the small shapes. Measured before they joined a ladder
// run (reports/h200/run-split, ab, stream): x1.008 (same) at 17408x5120; the main kernel ends 2 us sooner after its
// prep, the prep 1.8 us later after the main kernel before it. Only row-split=2 at 6144x5120 pays (x1.113 over
// rung 32, 7.2 us: still slower than rung 50). Claim split-pays is stated on the four shapes, as before that run.
// In the first ladder run (reports/h200/run-0e7f54b) not held again: x1.006 (same) for row-split=2 at 17408x5120, where
// it is the fastest rung by that hair (14.1 us, 77.9%); Nsight Compute there: occupancy 15 -> 30%, issue 24 -> 29%,
// instructions per MAC 1.10 -> 1.41, DRAM 65% in a launch alone either way.
constexpr std::size_t kSplit0 = 58;
constexpr std::array<std::size_t, 3> kSplitTwins{32, 32, 52};
// The rungs 61, 62: grid=fill,xprep=block, rungs 32 and 58 without the prep kernel (one launch a call; each thread
// quantises its block of x after the wait: the same bits). Why (run-split's trace at 17408x5120): the prep kernel
// ends 2.5-4.3 us after the main kernel before it. Predicted: 17408x5120 from 14.2 toward ~13 us. Measured in their
// first ladder run (reports/h200/run-0e7f54b): 16.8 and 24.0 us there, x0.46..x0.85 of their twins on the four
// shapes; claim fill-block-pays not held.
constexpr std::size_t kFillBlock0 = 61;
constexpr std::array<std::size_t, 2> kFillBlockTwins{32, 58};
// The rungs 63, 64: tail=split, rungs 32 and 58 with the ring's last round of groups cut into pieces of R / q rows
// (packed_ring.hpp tail_pieces), the same bits. Why (the plan, 2026-12-05): at 17408x5120 the ring's 2176 groups
// are 8 rounds of 264 blocks and 64 groups; 64 blocks take a ninth group while 200 take none. In pieces the last
// round is 256 quarter groups (17408x5120) and 224 halves (5120x6144); at 10240x5120 and 6144x5120 q = 1 (the
// ring's schedule), so claim tail-pays is stated at the two shapes with pieces only. Predicted: toward 8.25 / 9 of
// rung 32's time at 17408x5120 where the last round is exposed (~13 us). Measured before it joined a ladder run (ab,
// stream): x0.972 at 17408x5120 and x1.009 (same) at 5120x6144 on an H100 (reports/h100/run-6346147), x0.947 and
// x1.006 (same) on the H200 (reports/h200/run-f55aa56): not held.
constexpr std::size_t kTail0 = 63;
constexpr std::array<std::size_t, 2> kTailTwins{32, 58};
// The rungs 65-67: grid=fill,xprep=cluster, rung 32's ring with x prepared inside the launch and shared over clusters
// of 8 blocks (xpf=l2, and without it) or 4 (xpf=l2) by distributed shared memory; the same bits. Why (q4-prep-split
// on an H100, 2026-12-05, reports/h100/run-prep-ring): the ring's main kernel alone, on x already prepared, takes
// 16.21 us at 17408x5120 against 18.48 with its prep launch: the prep launch is what rung 32 loses. Predicted:
// between that producer twin and rung 32 at every seed shape; on the H200 toward ~12.5 us at 17408x5120. Measured
// on an H100 (reports/h100/run-ring-xc, the rungs alone with 11 and 32): x0.75..x0.85 of their twins, the same bits;
// on the H200 (reports/h200/run-fe10a61/xc, the same subset): x0.76..x0.84.
constexpr std::size_t kRingXc0 = 65;
constexpr std::array<std::size_t, 3> kRingXcTwins{32, 11, 32};
// The rung 68: grid=fill,xprep=launch,wait=flag, rung 11's ring whose main kernel is released by a flag its prep
// kernel's last block sets, not by the prep's completion (packed.cu, xprep_wf_kernel); the same bits. Why: the
// prep launch costs the ring 2.1-2.3 us a call on an H100 (reports/h100/run-prep-ring), two grid completions on the
// chain where the producer twin has one. Predicted (2026-12-05, before any run): a hop (~0.5-0.9 us) less at most,
// less the poll's L2 round trip behind the call's stage requests; the small shapes gain most, if any. Measured
// (reports/h200/run-fe10a61, the whole ladder, H200, stream): x0.931 / x0.936 / x0.932 / x0.892 at the four seed shapes,
// the same bits: wait-flag-pays not held (packed.cu, its registration).
constexpr std::size_t kWaitFlag = 68;
// The rungs 69, 70: depth=2 and depth=1, rung 11's ring filling at most 2 or 1 of its stages a block (the same shared
// memory request, grid and bits; packed.cu launch_ring's Depth). Why: `klab probe-hop` on an H100 (2026-12-05,
// reports/h100/run-depth): a dependent L2 round trip takes 141 ns idle, ~490 ns with 32-64 KB an SM of reads in
// flight, ~1000 ns with 128 KB, at the same read rate; the ring keeps ~184 KB an SM in flight at k = 5120 and its chain
// has x reads after each release. Predicted (before any run): faster where the chain, not the reads, sets the period
// (the small shapes), if the ring's TMA copies queue as the probe's loads did; depth=1 may lose the read rate.
// Measured on an H100 only (reports/h100/run-depth, run-depth3): depth=2 x1.011 / x1.077 / x1.173 / x1.113 and depth=1
// x0.955 / x1.068 / x1.157 / x1.146 against rung 11, the same bits: depth-pays not held (depth=1 at 17408x5120), the
// prediction right at the small shapes and at 10240x5120 too.
constexpr std::size_t kDepth0 = 69;
// The rungs 71, 72: trigger=late, the rungs 69 and 70 with their prep kernel letting the main kernel launch only once
// its x is in and quantised (packed.cu xprep_kernel's Late). Why (reports/h100/run-depth): the main kernel's stage
// requests queue in front of the prep's x read; the prep launch still costs the depth rings ~2 us a call on an H100.
// Predicted (before any run): the prep shorter by an L2 round trip under load (~0.5 us), the main kernel's requests
// later by about as much less the launch's overlap; a gain at the small shapes if any. Measured (H100, reports/h100/
// run-late): x0.80..x0.94 against 69 / 70, the same bits: late-trigger-pays not held.
constexpr std::size_t kLate0 = 71;
// The rung 73: depth=3, rung 11's twin between depth=2 and the ring's 4 stages at k = 5120 (3 at k = 6144: the ring's
// own there). Why: on an H100 (reports/h100/run-depth) depth=2 led at the large shapes, depth=1 at 5120x6144; the H200
// reads ~1.5x faster and may need more bytes in flight. In claim depth-pays with 69 and 70. Measured (H100,
// reports/h100/run-depth3): x1.000 / x1.105 / x0.994 / x0.999 against rung 11 (the ring itself at the 17.7 MB shapes).
constexpr std::size_t kDepth3 = 73;
// The rungs 74, 75: xprep=block at depth=2 and depth=1 (no prep launch; each thread quantises its block of x after the
// wait), the twins of 69 and 70. Why: rung 61 (xprep=block on the full ring) lost with its x reads behind ~24 MB of
// stage requests; at depth=1 ~6 MB are in flight, and a call keeps one hop instead of two. Predicted (before any run):
// faster than 69 / 70 at the small shapes if the per-thread quantisation (~300 dependent instructions) costs less than
// the prep launch's hop and reads (~1.5-2 us on an H100). Measured (H100, reports/h100/run-blockdepth): x0.76..x0.87
// against 69 / 70, the same bits: block-depth-pays not held.
constexpr std::size_t kBlockDepth0 = 74;
// The rungs 76-79: xprep=warp (76, 77) and xprep=warps (78, 79), the twins of 69 (depth=2) and 73 (depth=3): their prep
// launch a warp a block of 32 (xprep_warps_kernel, xprep_kernel's words) instead of a thread a block. Why: on grid=groups
// xprep=warps paid at every seed shape (rung 42 x1.004..x1.020 over rung 10 on the H200, reports/h200/run-4a53b8f) and
// xprep=warp at the two large ones (rung 45 x1.030..x1.032; x0.984 / x0.994 at the small ones), and the depth rings carry the same prep launch, the
// fastest rungs at 17408x5120 and 10240x5120 there. Predicted (before any run, 2026-12-05): x1.01..x1.03 at the two
// large shapes, within 2% at the 17.7 MB ones; the same bits (packed.cu).
constexpr std::size_t kRingWarp0 = 76;
constexpr std::array<std::size_t, 2> kDepthTwins{kDepth0, kDepth3};  // the depth=2 and depth=3 rings: 76-81's twins
// The rungs 80, 81: row-split=2 on the depth rings, the twins of 69 (depth=2) and 73 (depth=3). Why: depth=2 (fewer bytes
// in flight at the release) and row-split=2 (twice the warps on a group's work after the wait) took different parts of
// the ring's time on the H200 (run-4a53b8f: x1.130 and x1.061 at 6144x5120 against their twins). Predicted (before any
// run, 2026-12-05): ~6.7 us at 6144x5120 if they compose (the fastest rung there 6.76), the same as depth=2 at the
// large shapes, slower at 5120x6144 (row-split=2 x0.958 there).
constexpr std::size_t kDepthSplit0 = 80;
// The rungs 82, 83: pace=1 and pace=2, rung 11's ring fed by a producer warp with at most 1 or 2 stage requests in
// flight a block (packed.cu packed_paced_kernel), its 4 stages (at k = 5120) still the buffer. Why: fewer bytes in
// flight at the release paid at the small shapes (depth=2) but a shallower buffer leaves less read before the
// release; pacing keeps the buffer and caps what is in flight. Predicted (before any run, 2026-12-05): at or past
// depth=2 at the 17.7 MB shapes, the ring's time or slower at 17408x5120. Measured on an H100 (reports/h100/run-pace,
// two whole ladders): pace=1 96.2 / 90.5 / 73.6 / 66.9% of that card's read ceiling, x1.106..x1.257 over the ring, the
// fastest rung at three shapes; pace=2 the ring's time, so pace-pays not held. 76-81 within 2% of their twins but at
// 6144x5120 on depth=3 (x1.08..x1.12): ring-warp-pays, ring-warps-pay, depth-split-pays not held. On the H200
// (reports/h200/run-pace): pace=1 90.4 / 76.0 / 58.3 / 53.5%, the goal at 17408x5120 held; depth=2 with xprep=warps the
// fastest at 6144x5120 (59.5%); the same claims not held.
constexpr std::size_t kPace0 = 82;
// The rung 84: pace=1,xprep=block, rung 82 without its prep launch (each consumer thread quantises its block of x after
// the wait). Why: the earlier xprep=block rungs lost with the ring's ~24 MB of requests in flight (61) or with 1-2 stages
// a block buffered at the release (74, 75); pace=1 has its stages full and one request a block in flight there.
// Predicted (before any run, 2026-12-05): faster than pace=1 at 6144x5120 and 5120x6144, within 3% at 17408x5120.
// Measured (H100, reports/h100/run-pace-warps): x0.72..x0.88 against pace=1. A negative result.
constexpr std::size_t kPaceBlock = 84;
// The rung 85: pace=1,xprep=warps, rung 82 with its prep launch a warp per block of x. Why: on the depth rings xprep=warps
// paid 0.5-2% on an H100 (x1.117 on depth=3 at 6144x5120) and depth=2 with it leads at 6144x5120 on the H200.
// Predicted (before any run, 2026-12-05): x1.00..x1.03 over pace=1. Measured (H100, reports/h100/run-pace-warps):
// x1.000 / x1.034 / x1.066 / x1.045, the fastest rung at every seed shape on that card (98.2 / 95.3 / 80.6 / 71.0%).
constexpr std::size_t kPaceWarps = 85;
// The rung 86: pace=1,xprep=warp (prep blocks of one warp), rung 85's twin. Predicted (before any run, 2026-12-06):
// within 2% of xprep=warps.
constexpr std::size_t kPaceWarp = 86;
// The rung 87: grid=groups,xprep=warps,load=bulk, rung 50 with its prep a warp per block of x. Why: rung 50 leads at
// 5120x6144 on the H200; the warp prep paid x1.045 there on pace=1 (H100). Predicted (before any run, 2026-12-06):
// x1.01..x1.05 over rung 50 at the 17.7 MB shapes.
// Measured (H100, reports/h100/run-pace-warp, a ladder slice): 86 within 1.5% of 85; 87 8.01 against rung 50's 7.99 us
// at 6144x5120 and 8.39 against 7.77 at 5120x6144: negative results.
constexpr std::size_t kGroupsBulkWarps = 87;
// The rungs 88, 89: pace=1,xprep=warps,ilp=2|3, rung 85 with its consumers taking 2 or 3 full stages a step, the groups'
// dot chains interleaved (packed.cu packed_paced_kernel's G; the ring's bits). Why: at the 17.7 MB shapes a block's
// groups (at most 3) are all in its stages at the release, and what follows is each group's own work one after another
// (`klab probe-q4`, the ring on an H100: 0.77 us for the first group, 1.02 for the next two, no wait for bytes).
// Predicted (before any run, 2026-12-06): x1.03..x1.10 over rung 85 at 6144x5120 and 5120x6144, within 2% at 17408x5120.
// Measured (H100, reports/h100/run-ilp, a ladder slice): x0.90..x0.96 against rung 85 at every shape. Negative.
constexpr std::size_t kPaceIlp0 = 88;
// The rung 90: pace=1,xprep=warps,row-split=2, rung 85 with each block of 32 weights over two consumer threads (4 rows
// each, twice the warps; the ring's bits). Why: the other way to shorten a group's work after the release; on the ring
// row-split=2 took ~2 us off the main kernel's work after the wait but the prep queued behind its requests (run-split),
// which pace=1 caps at one a block. Predicted (before any run, 2026-12-06): x1.02..x1.06 over rung 85 at the 17.7 MB
// shapes, within 2% at 17408x5120. Measured (H100, reports/h100/run-ilp): x1.007 / x1.010 / x0.956 / x1.005, rung 85's time.
constexpr std::size_t kPaceSplit = 90;
// The rungs 91, 92: pace=2 and pace=1,xprep=warps,rows=4, rung 85 on groups of 4 rows (stages of half the bytes; pace=2
// keeps rung 85's bytes in flight a block). Why: run-ilp showed pace=1's blocks waiting for their groups' bytes, and at
// 5120x6144 640 groups of 8 over 264 blocks give 112 blocks 3 and 152 blocks 2 (81% of the blocks' time used; 1280 groups
// of 4: 97%). Predicted (before any run, 2026-12-06): pace=2,rows=4 x1.05..x1.12 over rung 85 at 5120x6144, within 3%
// elsewhere; pace=1,rows=4 slower at the large shapes. Measured (H100, reports/h100/run-rows4): pace=2,rows=4 slower at
// all four (pace-rows4-pays not held); pace=1,rows=4 x1.095 at 5120x6144, x0.92..x0.96 elsewhere.
constexpr std::size_t kPaceRows4 = 91;
// The rungs 93, 94: pace=1-2,xprep=warps,rows=4|8: one request in flight a block until its consumers pass the wait, two
// after. Why (H100, reports/h100/run-rows4, the whole ladder): pace=1 at rows=4 (half rung 85's bytes in flight) x1.095
// over rung 85 at 5120x6144 but x0.92..x0.96 elsewhere, pace=2 at rows=4 slower everywhere; the bytes in flight before
// the release cost the prep's chain, those after it feed the reads. Predicted (before any run, 2026-12-06): rows=4
// x1.05..x1.10 over rung 85 at 5120x6144 and within 3% elsewhere. Measured (H100, reports/h100/run-pace-late): rows=4
// x1.075 over rung 85 at 5120x6144 but slower than pace=1 at rows=4 there (7.41 against 7.21 us); rows=8 rung 85's time
// (x0.990 / x0.995 at the 17.7 MB shapes): pace-late-pays not held.
constexpr std::size_t kPaceLate0 = 93;
// The rungs 95, 96 (and 97: defer=8 at rows=4, rung 92's twin too): pace=1,xprep=warps,defer=4,rows=8|4: rung 85 and rung 92 (kPaceRows4 + 1) with each consumer warp
// releasing its stage itself and the cross-warp sums of 4 groups after one barrier. Why: the paced ring's stamp probe
// (H100, reports/h100/run-pace-late) puts the span after the release on a block's own chain (bytes waited for 5-8% of
// it at the 17.7 MB shapes). Predicted (before any run, 2026-12-06): x1.03..x1.08 over their twins at the 17.7 MB shapes.
// Measured (H100, reports/h100/run-defer, a slice: the claim needs the whole ladder): rows=4 x1.060 / x1.037 over rung 92
// (80.3 / 79.2%, the fastest there), rows=8 x0.99 / x0.98 against rung 85.
constexpr std::size_t kPaceDefer0 = 95;
// The rung 98: pace=1,xprep=warps,per-sm=1,rows=8: rung 85's kernel on a grid of one block an SM (packed.cu says why: the
// GDN layer's out_proj leaving room for the next stacked launch's blocks). Predicted (before any run, 2026-12-06): slower
// than rung 85 alone (half its bytes in flight), x0.8..x0.95 at the 17.7 MB shapes. Measured (H100, reports/h100/run-out1):
// x0.93 at 6144x5120, x1.02 at 5120x6144 (84.8 / 79.0 / 73.3 / 71.2%); as the GDN layer's out_proj the graph x1.08.
constexpr std::size_t kPacePerSm1 = 98;
// The rung 99: rung 98 with a ring of 4 stages (stages=4: at k = 6144 110 KB, not 3 stages' 83 KB). Predicted: rung 98's
// time at k = 5120 (the same ring there), within 3% of it at 5120x6144. Measured (H100, reports/h100/run-out1b): rung 98's
// time at k = 5120, x1.073 over it at 5120x6144 (7.23 us, 76.3%).
// The rungs 100, 101: rung 98 at pace=1-2, and defer=4 at rows=4 (rung 96) on one block an SM. Predicted: slower than
// rung 85 alone, as rung 98; they are out_proj's candidates in the GDN layer (the twins pace_out1_late, pace_out1_defer).
// Measured (H100, reports/h100/run-out1c): 72.8 and 64.9% at 5120x6144 (rung 85 69.6%), slower elsewhere.
// The rung 102: rung 98 with rest=l2 (the block's groups past its ring prefetched into L2 before the release). Predicted:
// within 3% of rung 98 alone; it is out_proj's candidate in the GDN layer (the twin pace_out1_l2). Measured only in the GDN
// layer (H100, reports/h100/run-out1-l2: x0.957 in the graph); its ladder slice stopped at a refused launch, since mended.
// The rungs 103, 104: ilp=3 and row-split=2 on one block an SM (rung 89's and rung 90's kernels on rung 98's grid).
// Predicted: slower than rung 85 alone, as rung 98; out_proj's candidates (the twins pace_out1_ilp, pace_out1_split).
// Measured (H100, reports/h100/run-slice104): 66.8 / 61.6 / 59.4 / 56.1% and 86.0 / 80.4 / 75.8 / 71.8%.
// The rungs 105, 106: per-sm=3 on rung 85 and on rung 96 (defer=4 at rows=4): three blocks an SM, each ring shrunk to fit
// (packed.cu's shared_ring). Why (Nsight Compute on an H100, reports/h100/run-span/ncu): the paced kernels alone are
// consumer-bound, 1.6-2.9 warps a scheduler, 0.2-0.27 of them eligible. Predicted (before any run, 2026-12-06): faster than
// their twins at the 17.7 MB shapes, the same or slower at 17408x5120 (claim pace-per-sm3-pays). Measured (H200,
// reports/h200/run-call48, 2026-12-06): not held; rung 105 x1.046 over rung 85 at 5120x6144 but x0.883 at 6144x5120, rung
// 106 x1.028 over rung 96 at 6144x5120 but x0.963 at 5120x6144. The whole ladder there: best per shape 91.5 (rung 90) /
// 79.9 / 64.2 (rung 85) / 62.9% (rung 97) against the sixth session's 90.4 / 76.0 / 59.5 / 57.9%.
constexpr std::size_t kPacePerSm3 = 105;
// The rungs 107, 108: rung 85 and rung 90 (row-split=2) on two blocks an SM of 2 stages each (per-sm=2,stages=2), the
// grid and rings under which out_proj leaves a stacked block room beside it in the GDN step with twice the consumer warps
// of the candidate's out_proj (rung 104; the twin pace_split_x2). Predicted (2026-12-06, before any run): below rungs 85
// and 90 at 17408x5120 (2 stages a block), within 3% of them at the 17.7 MB shapes (claim pace-per-sm2-pays). Measured
// (H100, reports/h100/run-call56, a slice): rung 107 x0.968 / x1.120 over rung 85 and rung 108 x1.053 / x1.074 over rung
// 90 at 6144x5120 / 5120x6144 (the claim would not hold: rung 107 loses at 6144x5120); 75-77% at 17408x5120.
constexpr std::size_t kPacePerSm2 = 107;
// The rungs 109, 110: rung 97 (defer=8 at rows=4) with its ring cut to 4 and 3 stages (stages=4|3; packed.cu says why).
// Predicted (2026-12-06, before any run): faster than rung 97 at 6144x5120 and 5120x6144 (claim pace-stages-pays).
// Measured (H100, reports/h100/run-call58, a slice): rung 109 x1.052 over rung 97 at 5120x6144 (84.2%, that card's
// fastest there) and x0.935 at 6144x5120; rung 110 slower at both: the claim would not hold.
constexpr std::size_t kPaceStages0 = 109;
// The rungs 111-114: grid=own (packed.cu's packed_own_kernel): each warp of one block an SM owns its groups and a stage, no
// barrier a group: rows=8 on 8 warps and on 4 (the GDN out_proj's grid with room beside it), rows=4 on 16 warps with its
// prep launch and with xprep=block (one launch a call). Predicted (2026-12-06, before any run): faster than rung 85 (rows=8)
// and rung 97 (rows=4) at 6144x5120 and 5120x6144 (claim own-pays); xprep=block faster than its prep launch there
// (claim own-block-pays). Measured (H100, reports/h100/run-call61, a slice): x0.84 / x0.98 (rung 111 against rung 85) and
// x0.84 / x0.86 (rung 113 against rung 97) at 6144x5120 / 5120x6144, rung 114 x0.88 / x0.83 against rung 113: neither
// claim would hold.
constexpr std::size_t kOwn0 = 111;
// The rungs 115-118: grid=split-k (packed.cu's packed_kc_kernel): clusters of k / 1024 blocks, each block one chunk of k of
// its cluster's groups, quantising only its chunk of x after the wait (one launch a call), the chunk totals folded across
// the cluster after one cluster barrier: rows=8 on 8 warps of 2 stages, two blocks an SM's worth of clusters and one,
// rows=4 on 8 and 16 warps. Predicted (2026-12-06, before any run): faster than rung 85 (rows=8) and rung 97 (rows=4) at
// 6144x5120 and 5120x6144 (claim split-k-pays). Measured (H100, reports/h100/run-call64, a slice): 62.5 / 62.9% of that
// card's read ceiling at the 17.7 MB shapes for rung 115 (rung 85 80.8 / 70.6%, rung 97 81.5 / 81.3%), the others 54-62%:
// the claim would not hold.
constexpr std::size_t kSplitK0 = 115;
// The rungs 119, 120: rungs 115 and 117 with fold=last (no cluster launch: each group folded by the last of its blocks
// through global memory). Predicted (2026-12-06, after reports/h100/run-call64, before any run): faster than their cluster
// twins at the four seed shapes if the cluster launch is what split-k's calls pay (claim split-k-flat-pays). Measured (H100,
// reports/h100/run-call66, a slice): rung 119 84.7 / 71.3 / 57.7 / 50.4% of that card's read ceiling (rung 115 85.9 / 74.2 /
// 61.7 / 62.6%), rung 120 42.9-52.6% (rung 117 60.3-69.8%): the claim would not hold; the cluster launch is not the cost.
constexpr std::size_t kSplitKFlat0 = 119;
// The rungs 121, 122: grid=split-k at one block an SM and rows=4, its rings as deep as two calls' blocks allow beside each
// other: owners=8 of 4 stages, owners=16 of 2. Predicted (2026-12-06, after the stamp probe of reports/h100/run-call68,
// before any run): faster than rung 97 (defer=8,rows=4) at 6144x5120 and 5120x6144 (claim split-k-deep-pays). Measured (H100,
// reports/h100/run-call69, a slice): 57.1-57.6% of that card's read ceiling at the 17.7 MB shapes (rung 97 80.9 / 81.1%): the
// claim would not hold.
constexpr std::size_t kSplitKDeep0 = 121;
// A map=packed name with xpf=l2 added where packed.cu puts it: after xprep=, else after grid=.
std::string xpf_name(const std::string& name) {
  const std::size_t at = name.find(name.find(",xprep=") != std::string::npos ? ",xprep=" : ",grid=");
  std::string out = name;
  out.insert(name.find(',', at + 1), ",xpf=l2");
  return out;
}

// A rung's name with `add` inserted right after (the first) `after`, or with (the first) `from` replaced by `to`.
std::string inserted_after(std::string n, const std::string& after, const std::string& add) { return n.insert(n.find(after) + after.size(), add); }
std::string replaced(std::string n, const std::string& from, const std::string& to) { return n.replace(n.find(from), from.size(), to); }

std::string packed(const std::string& dot, const std::string& grid, const std::string& pdl) {
  return variant_name("q4_gemv", {{"map", "packed"}, {"dot", dot}, {"grid", grid}, {"pdl", pdl}, {"rows", "4"}});
}
// The ladder's rungs after rung 0, in order: per form groups/pdl=on, fill/pdl=off, fill/pdl=on.
std::vector<std::string> rungs() {
  std::vector<std::string> out{kToday};
  for (const auto& f : kForms) {
    out.push_back(packed(f, "groups", "on"));
    out.push_back(packed(f, "fill", "off"));
    out.push_back(packed(f, "fill", "on"));
  }
  auto xl = [](const std::string& dot, const std::string& rows, const std::string& pdl) {
    return variant_name("q4_gemv", {{"map", "packed"}, {"dot", dot}, {"grid", "groups"}, {"xprep", "launch"}, {"pdl", pdl}, {"rows", rows}});
  };
  auto ring = [](const std::string& load, const std::string& rows, const std::string& pdl) {
    return variant_name("q4_gemv", {{"map", "packed"}, {"dot", "q8-dp4a"}, {"grid", "fill"}, {"xprep", "launch"}, {"load", load}, {"pdl", pdl}, {"rows", rows}});
  };
  out.push_back(xl("q8-dp4a", "8", "on"));
  out.push_back(ring("bulk", "8", "on"));
  out.push_back(ring("bulk", "4", "on"));
  out.push_back(ring("cp-async", "8", "on"));
  out.push_back(ring("bulk", "8", "off"));
  auto half = [](const std::string& xprep, const std::string& per_sm, const std::string& pdl, const std::string& last = "", bool xpf = false,
                 bool pre1 = false) {
    std::vector<std::pair<std::string, std::string>> axes{{"map", "packed"}, {"dot", "q8-dp4a"}, {"grid", "half"}, {"xprep", xprep}};
    if (xpf) axes.emplace_back("xpf", "l2");
    axes.emplace_back("load", "bulk");
    axes.emplace_back("per-sm", per_sm);
    if (!last.empty()) axes.emplace_back("last", last);
    if (pre1) axes.emplace_back("pre", "1");
    axes.emplace_back("pdl", pdl);
    axes.emplace_back("rows", "8");
    return variant_name("q4_gemv", axes);
  };
  out.push_back(half("block", "1", "on"));
  out.push_back(half("block", "2", "on"));
  out.push_back(half("launch", "1", "on"));
  out.push_back(half("block", "1", "off"));
  for (const auto& [dot, rows, pdl] :
       std::vector<std::array<std::string, 3>>{{"q8-dp4a", "4", "on"}, {"q8-dp4a", "4", "off"}, {"f16x2", "4", "on"}, {"f32", "8", "on"}})
    out.push_back(xl(dot, rows, pdl));
  auto warp = [](const std::string& rows, const std::string& inflight, const std::string& pdl) {
    return variant_name("q4_gemv", {{"map", "packed"}, {"dot", "q8-dp4a"}, {"grid", "warp"}, {"xprep", "launch"}, {"inflight", inflight}, {"pdl", pdl},
                                    {"rows", rows}});
  };
  out.push_back(warp("4", "6", "on"));
  out.push_back(warp("2", "8", "on"));
  out.push_back(warp("8", "3", "on"));
  out.push_back(warp("4", "6", "off"));
  out.push_back(warp("4", "3", "on"));
  out.push_back(xl("q8-dp4a", "16", "on"));
  for (std::size_t twin : kXpfTwins) out.push_back(xpf_name(out[twin]));
  for (std::size_t i = 0; i < kWpfN; ++i)
    out.push_back(inserted_after(out[kXpf0 + i], ",xpf=l2", ",wpf=l2"));
  // 40, 41: xprep=cluster (no prep kernel; x quantised once per cluster of 8 blocks), rungs 10's and 19's twins.
  for (const std::string rows : {"8", "4"})
    out.push_back(variant_name("q4_gemv", {{"map", "packed"}, {"dot", "q8-dp4a"}, {"grid", "groups"}, {"xprep", "cluster"}, {"pdl", "on"}, {"rows", rows}}));
  // 42-44: xprep=warps (the prep a warp per block of 32), the twins of rungs 10, 19 and 28.
  for (const std::string rows : {"8", "4", "16"})
    out.push_back(variant_name("q4_gemv", {{"map", "packed"}, {"dot", "q8-dp4a"}, {"grid", "groups"}, {"xprep", "warps"}, {"pdl", "on"}, {"rows", rows}}));
  // 45: xprep=warp (the prep blocks one warp each: resident beside a full main kernel), rung 42's twin.
  out.push_back(variant_name("q4_gemv", {{"map", "packed"}, {"dot", "q8-dp4a"}, {"grid", "groups"}, {"xprep", "warp"}, {"pdl", "on"}, {"rows", "8"}}));
  // 46-48: xprep=flag (x prepared once inside the launch, behind a flag), the twins of rungs 42 and 43, and rows=8 without PDL.
  for (const auto& [rows, pdl] : std::vector<std::pair<std::string, std::string>>{{"8", "on"}, {"4", "on"}, {"8", "off"}})
    out.push_back(variant_name("q4_gemv", {{"map", "packed"}, {"dot", "q8-dp4a"}, {"grid", "groups"}, {"xprep", "flag"}, {"pdl", pdl}, {"rows", rows}}));
  // 49: grid=half,xprep=launch,per-sm=2 (two co-resident ring blocks per SM and the prep kernel).
  out.push_back(half("launch", "2", "on"));
  // 50: grid=groups with the weights in shared memory (one TMA copy per block), rung 10's twin.
  out.push_back(variant_name("q4_gemv", {{"map", "packed"}, {"dot", "q8-dp4a"}, {"grid", "groups"}, {"xprep", "launch"}, {"load", "bulk"}, {"pdl", "on"}, {"rows", "8"}}));
  // 51: rung 49 with each block's last group held in registers.
  out.push_back(half("launch", "2", "on", "regs"));
  // 52-54: xpf=l2 twins of 49 and 51; last=l2 with xpf=l2.
  out.push_back(half("launch", "2", "on", "", true));
  out.push_back(half("launch", "2", "on", "regs", true));
  out.push_back(half("launch", "2", "on", "l2", true));
  // 55: rung 49 with one stage requested before the wait.
  out.push_back(half("launch", "2", "on", "", false, true));
  // 56: rung 45 with wpf=lines (its prep blocks request the call's weights into L2).
  out.push_back(variant_name("q4_gemv", {{"map", "packed"}, {"dot", "q8-dp4a"}, {"grid", "groups"}, {"xprep", "warp"}, {"wpf", "lines"}, {"pdl", "on"}, {"rows", "8"}}));
  // 57: rung 10 as a prep launch and two main launches (parts=2).
  out.push_back(variant_name("q4_gemv", {{"map", "packed"}, {"dot", "q8-dp4a"}, {"grid", "groups"}, {"xprep", "launch"}, {"parts", "2"}, {"pdl", "on"}, {"rows", "8"}}));
  // 58-60: row-split=2|4, the twins of rungs 32, 32 and 52 (row-split goes before pdl=).
  for (std::size_t i = 0; i < kSplitTwins.size(); ++i) {
    std::string n = out[kSplitTwins[i]];
    out.push_back(n.insert(n.find(",pdl="), i == 1 ? ",row-split=4" : ",row-split=2"));
  }
  // 61, 62: xprep=block twins of 32 and 58.
  for (std::size_t twin : kFillBlockTwins)
    out.push_back(replaced(out[twin], ",xprep=launch,", ",xprep=block,"));
  // 63, 64: tail=split twins of 32 and 58 (tail= goes after load=).
  for (std::size_t twin : kTailTwins)
    out.push_back(inserted_after(out[twin], ",load=bulk", ",tail=split"));
  // 65-67: xprep=cluster twins of 32, 11 (32 without xpf=l2) and 32 again with cluster=4 (cluster= goes after load=).
  for (std::size_t i = 0; i < kRingXcTwins.size(); ++i) {
    std::string n = out[kRingXcTwins[i]];
    n = replaced(n, ",xprep=launch,", ",xprep=cluster,");
    if (i == 2) n = inserted_after(n, ",load=bulk", ",cluster=4");
    out.push_back(n);
  }
  // 68: wait=flag, rung 11's twin (wait= goes after xprep=).
  out.push_back(inserted_after(out[11], ",xprep=launch", ",wait=flag"));
  // 69, 70: depth=2, depth=1, rung 11's twins (depth= goes after load=).
  for (const std::string depth : {"2", "1"})
    out.push_back(inserted_after(out[11], ",load=bulk", ",depth=" + depth));
  // 71, 72: trigger=late, the twins of 69 and 70 (trigger= goes after xprep=).
  for (std::size_t twin : {kDepth0, kDepth0 + 1})
    out.push_back(inserted_after(out[twin], ",xprep=launch", ",trigger=late"));
  // 73: depth=3, rung 11's twin.
  out.push_back(inserted_after(out[11], ",load=bulk", ",depth=3"));
  // 74, 75: xprep=block twins of 69 and 70.
  for (std::size_t twin : {kDepth0, kDepth0 + 1})
    out.push_back(replaced(out[twin], ",xprep=launch,", ",xprep=block,"));
  // 76, 77: xprep=warp twins of 69 and 73; 78, 79: xprep=warps twins of the same.
  for (const std::string prep : {",xprep=warp,", ",xprep=warps,"})
    for (std::size_t twin : kDepthTwins) out.push_back(replaced(out[twin], ",xprep=launch,", prep));
  // 80, 81: row-split=2 twins of 69 and 73 (row-split= goes before pdl=).
  for (std::size_t twin : kDepthTwins) out.push_back(inserted_after(out[twin], ",depth=" + std::string(twin == kDepth0 ? "2" : "3"), ",row-split=2"));
  // 82, 83: pace=1, pace=2, rung 11's twins (pace= goes after load=).
  for (const std::string pace : {"1", "2"}) out.push_back(inserted_after(out[11], ",load=bulk", ",pace=" + pace));
  // 84: xprep=block, rung 82's twin.
  out.push_back(replaced(out[kPace0], ",xprep=launch,", ",xprep=block,"));
  // 85: xprep=warps, rung 82's twin.
  out.push_back(replaced(out[kPace0], ",xprep=launch,", ",xprep=warps,"));
  // 86: xprep=warp, rung 82's twin.
  out.push_back(replaced(out[kPace0], ",xprep=launch,", ",xprep=warp,"));
  // 87: xprep=warps, rung 50's twin.
  out.push_back(replaced(out[kRingGroups], ",xprep=launch,", ",xprep=warps,"));
  // 88, 89: ilp=2, ilp=3, rung 85's twins (ilp= goes after pace=).
  for (const std::string g : {"2", "3"}) out.push_back(inserted_after(out[kPaceWarps], ",pace=1", ",ilp=" + g));
  // 90: row-split=2, rung 85's twin (row-split= goes after pace=).
  out.push_back(inserted_after(out[kPaceWarps], ",pace=1", ",row-split=2"));
  // 91, 92: pace=2,rows=4 and pace=1,rows=4, rung 85's twins.
  for (const std::string pace : {"2", "1"}) out.push_back(replaced(replaced(out[kPaceWarps], ",pace=1,", ",pace=" + pace + ","), ",rows=8", ",rows=4"));
  // 93, 94: pace=1-2 at rows=4 and rows=8, rung 85's twins.
  out.push_back(replaced(out[kPaceRows4 + 1], ",pace=1,", ",pace=1-2,"));
  out.push_back(replaced(out[kPaceWarps], ",pace=1,", ",pace=1-2,"));
  // 95, 96: defer=4, rung 85's and rung 92's twins (defer= goes after pace=).
  for (std::size_t twin : {kPaceWarps, kPaceRows4 + 1}) out.push_back(inserted_after(out[twin], ",pace=1", ",defer=4"));
  // 97: defer=8, rung 92's twin.
  out.push_back(inserted_after(out[kPaceRows4 + 1], ",pace=1", ",defer=8"));
  // 98: per-sm=1, rung 85's twin (per-sm= goes after pace=).
  out.push_back(inserted_after(out[kPaceWarps], ",pace=1", ",per-sm=1"));
  // 99: stages=4, rung 98's twin (stages= goes after per-sm=).
  out.push_back(inserted_after(out[kPacePerSm1], ",per-sm=1", ",stages=4"));
  // 100: pace=1-2 on rung 98; 101: per-sm=1 on rung 96 (per-sm= goes after defer=).
  out.push_back(replaced(out[kPacePerSm1], ",pace=1,", ",pace=1-2,"));
  out.push_back(inserted_after(out[kPaceDefer0 + 1], ",defer=4", ",per-sm=1"));
  // 102: rest=l2 on rung 98 (rest= goes after per-sm=).
  out.push_back(inserted_after(out[kPacePerSm1], ",per-sm=1", ",rest=l2"));
  // 103, 104: per-sm=1 on rung 89 (ilp=3) and rung 90 (row-split=2) (per-sm= goes after ilp= and row-split=).
  out.push_back(inserted_after(out[kPaceIlp0 + 1], ",ilp=3", ",per-sm=1"));
  out.push_back(inserted_after(out[kPaceSplit], ",row-split=2", ",per-sm=1"));
  // 105, 106: per-sm=3 on rung 85 (after pace=) and rung 96 (after defer=).
  out.push_back(inserted_after(out[kPaceWarps], ",pace=1", ",per-sm=3"));
  out.push_back(inserted_after(out[kPaceDefer0 + 1], ",defer=4", ",per-sm=3"));
  // 107, 108: per-sm=2,stages=2 on rung 85 (after pace=) and rung 90 (after row-split=).
  out.push_back(inserted_after(out[kPaceWarps], ",pace=1", ",per-sm=2,stages=2"));
  out.push_back(inserted_after(out[kPaceSplit], ",row-split=2", ",per-sm=2,stages=2"));
  // 109, 110: stages=4|3 on rung 97 (stages= goes after defer=).
  for (const std::string st : {"4", "3"}) out.push_back(inserted_after(out[kPaceDefer0 + 2], ",defer=8", ",stages=" + st));
  // 111-114: grid=own, owners=8 and 4 at rows=8, owners=16 at rows=4 (xprep=warps, then xprep=block).
  for (const auto& [xprep, owners, rows] : std::vector<std::array<std::string, 3>>{{"warps", "8", "8"}, {"warps", "4", "8"}, {"warps", "16", "4"}, {"block", "16", "4"}})
    out.push_back(variant_name("q4_gemv", {{"map", "packed"}, {"dot", "q8-dp4a"}, {"grid", "own"}, {"xprep", xprep}, {"load", "bulk"}, {"owners", owners},
                                           {"pdl", "on"}, {"rows", rows}}));
  // 115-118: grid=split-k, owners=8 with two and one blocks an SM at rows=8, owners=8 and 16 at rows=4.
  for (const auto& [owners, per_sm, rows] : std::vector<std::array<std::string, 3>>{{"8", "2", "8"}, {"8", "1", "8"}, {"8", "2", "4"}, {"16", "2", "4"}})
    out.push_back(variant_name("q4_gemv", {{"map", "packed"}, {"dot", "q8-dp4a"}, {"grid", "split-k"}, {"xprep", "chunk"}, {"load", "bulk"},
                                           {"owners", owners}, {"stages", "2"}, {"per-sm", per_sm}, {"pdl", "on"}, {"rows", rows}}));
  // 119, 120: fold=last on rungs 115 and 117 (fold= goes after load=).
  for (const std::size_t i : {kSplitK0, kSplitK0 + 2}) out.push_back(inserted_after(out[i], ",load=bulk", ",fold=last"));
  // 121, 122: split-k at per-sm=1,rows=4, owners=8 of 4 stages and owners=16 of 2.
  for (const auto& [owners, stages] : std::vector<std::array<std::string, 2>>{{"8", "4"}, {"16", "2"}})
    out.push_back(variant_name("q4_gemv", {{"map", "packed"}, {"dot", "q8-dp4a"}, {"grid", "split-k"}, {"xprep", "chunk"}, {"load", "bulk"},
                                           {"owners", owners}, {"stages", stages}, {"per-sm", "1"}, {"pdl", "on"}, {"rows", "4"}}));
  return out;
}
// The xprep=launch rungs, the ring rungs and the grid=half rungs (indices in rungs()).
constexpr std::size_t kXlQ8r8 = 10, kRingBulk8 = 11, kRingBulk4 = 12, kRingCp8 = 13, kRingBulk8Off = 14, kHalf1 = 15, kHalf2 = 16, kHalf1Xl = 17,
                      kHalf1Off = 18, kXlQ8r4 = 19, kXlQ8r4Off = 20, kXlF16 = 21, kXlF32 = 22, kWarp4 = 23, kWarp2 = 24, kWarp8 = 25, kWarp4Off = 26, kWarp4c3 = 27, kXlQ8r16 = 28;
// Index of the fill/pdl=on and fill/pdl=off rungs of form i (0, 1, 2) in rungs().
std::size_t fill_on(std::size_t form) { return 1 + 3 * form + 2; }
std::size_t fill_off(std::size_t form) { return 1 + 3 * form + 1; }

using q4_study::goal_pct;
using q4_study::is_seed_shape;

std::string short_name(const Measured& m) {
  const std::string& n = m.variant->name;
  return n.rfind("q4_gemv/", 0) == 0 ? n.substr(8) : n;
}
std::string speed(const Measured& m) {
  return fmt("%.4f ms, %.0f GB/s (%.1f%% of the read ceiling)", m.timing.summary.median, m.gbps, m.pct_ceiling);
}
Experiment q4_to_ceiling() {
  Experiment e;
  e.name = "q4-to-ceiling";
  e.description = "issue 13: the q4 mat-vec ladder from block-per-thread,dot=offset,rows=8 through map=packed (tiled layout, persistent "
                  "double-buffered blocks, PDL; dot forms f32 exact, f16x2, q8-dp4a) at the seed shapes, with the cuBLAS peers (and llama.cpp's "
                  "MMVQ where klab was built with ggml)";
  const Claim accurate{"accurate",
                       "every rung is within its tolerance of the f64 reference on every shape and input (f32 forms 1e-5, f16x2 1e-2, q8-dp4a 5e-2); "
                       "the peers within theirs"};
  const Claim f32_bitwise{"f32-bits", "the f32 rungs of map=packed give exactly the bits of block-per-thread,dot=offset,rows=8 on every shape and input"};
  const Claim form_bitwise{"form-bits",
                           "within each dot form of map=packed, grid, xprep, xpf, wpf, last, pre, parts, row-split, tail, depth, trigger, rows and pdl change no bit, on every shape and input"};
  const Claim ceiling{"ceiling",
                      "the fastest rung reaches at least 90% of the read ceiling on 17408x5120, 85% on 10240x5120 and 80% on 6144x5120 and 5120x6144 "
                      "(headline timing: stream mode where measured)"};
  const Claim beats_peers{"beats-peers", "the fastest rung is faster than both cuBLAS peers on the four seed shapes"};
  const Claim pdl_pays_claim{"pdl-pays",
                             "PDL pays: for every dot form, grid=fill,pdl=on is faster than its pdl=off twin, and so is grid=groups,xprep=launch,q8-dp4a,rows=4, "
                             "on the four seed shapes"};
  const Claim exact_faster{"exact-faster",
                           "the fastest exact rung (f32, any grid) is faster than today's fastest (block-per-thread,dot=offset,rows=8) on the four seed shapes"};
  const Claim ring_pays{"ring-pays",
                        "the ring pays: grid=fill,xprep=launch,load=bulk,q8-dp4a,rows=8,pdl=on (S whole groups per block in flight in shared "
                        "memory) is faster than grid=groups,xprep=launch,q8-dp4a,rows=8,pdl=on on the four seed shapes"};
  const Claim half_pays{"half-pays",
                        "the ring in half an SM pays: grid=half,xprep=block,load=bulk,per-sm=1,pdl=on,rows=8 (the next launch co-resides and "
                        "loads during this one) is faster than both grid=groups,xprep=launch,q8-dp4a,rows=8,pdl=on and "
                        "grid=fill,xprep=launch,load=bulk,rows=8,pdl=on on the four seed shapes"};
  const Claim warp_pays{"warp-pays",
                        "a warp per group pays: grid=warp,xprep=launch,inflight=6,q8-dp4a,rows=4,pdl=on (no barrier, no shared memory, the "
                        "whole group's loads in flight) is faster than grid=groups,xprep=launch,q8-dp4a,rows=8,pdl=on on the four seed shapes"};
  const Claim xpf_pays{"xpf-pays",
                       "x prefetched into L2 before the weight loads pays: every xpf=l2 rung is faster than its twin without it on the four seed shapes"};
  const Claim wpf_pays{"wpf-pays",
                       "the prep kernel's weight prefetch pays: every wpf=l2 rung is faster than its xpf=l2 twin without it on the four seed shapes"};
  const Claim cluster_pays{"cluster-pays",
                           "x prepared inside the launch pays: grid=groups,xprep=cluster,q8-dp4a,pdl=on (no prep kernel; each of a cluster's 8 "
                           "blocks quantises 1/8 of x, shared over distributed shared memory) is faster than its xprep=launch twin, rows=8 and "
                           "rows=4, on the four seed shapes"};
  const Claim warps_pay{"warps-pay",
                        "the prep a warp per block of 32 pays: grid=groups,xprep=warps,q8-dp4a,pdl=on is faster than its xprep=launch twin "
                        "(one thread per block), rows=8, 4 and 16, on the four seed shapes"};
  const Claim warp1_pays{"warp-prep-pays",
                         "prep blocks of one warp pay: grid=groups,xprep=warp,q8-dp4a,pdl=on,rows=8 (they fit beside the main kernel's blocks) "
                         "is faster than its xprep=warps twin (8 warps a prep block), on the four seed shapes"};
  const Claim smem_groups_pays{"smem-groups-pays",
                               "a block per group with its weights in shared memory pays: grid=groups,xprep=launch,load=bulk,q8-dp4a,rows=8,pdl=on "
                               "(one TMA copy per block, fewer registers, more blocks an SM) is faster than its register twin "
                               "grid=groups,xprep=launch,q8-dp4a,rows=8,pdl=on on the four seed shapes"};
  const Claim flag_pays{"flag-pays",
                        "x prepared once inside the launch pays: grid=groups,xprep=flag,q8-dp4a,pdl=on (no prep kernel; the launch's first "
                        "blocks quantise x and publish it by a flag) is faster than its xprep=warps twin, rows=8 and rows=4, on the four seed shapes"};
  const Claim held_pays{"held-pays",
                        "holding a block's last group in registers pays: grid=half,xprep=launch,load=bulk,per-sm=2,last=regs,rows=8,pdl=on "
                        "(loaded before griddepcontrol.wait, not into a refilled stage) is faster than its twin without last=regs on the four seed shapes"};
  const Claim half_xpf_pays{"half-xpf-pays",
                            "x requested into L2 by the prep kernel pays on grid=half,xprep=launch,per-sm=2: its xpf=l2 rungs (without "
                            "last and with last=regs) are faster than their twins without xpf on the four seed shapes"};
  const Claim l2_pays{"l2-pays",
                      "the ring's later groups requested into L2 ahead of their refills pay: grid=half,xprep=launch,xpf=l2,load=bulk,per-sm=2,"
                      "last=l2,rows=8,pdl=on is faster than its twin without last=l2 on the four seed shapes"};
  const Claim pre1_pays{"pre1-pays",
                        "requesting fewer weights before the wait pays: grid=half,xprep=launch,load=bulk,per-sm=2,pre=1,rows=8,pdl=on (one stage "
                        "before griddepcontrol.wait, the rest after it) is faster than its twin without pre=1 on the four seed shapes"};
  const Claim lines_pay{"lines-pay",
                        "the prep blocks' line prefetch pays: grid=groups,xprep=warp,wpf=lines,q8-dp4a,rows=8,pdl=on (the one-warp prep blocks "
                        "request the call's weights into L2 while the previous call runs) is faster than its twin without wpf on the four seed shapes"};
  const Claim parts_pay{"parts-10240",
                        "two main launches a call pay at 10240x5120: grid=groups,xprep=launch,parts=2,q8-dp4a,rows=8,pdl=on is faster than "
                        "grid=groups,xprep=launch,q8-dp4a,rows=8,pdl=on (one launch of 1.6 waves) there (stated at that shape only: the one run "
                        "before, reports/h200/run-parts, had it x1.058 there and x0.85-0.86 slower at the other three)"};
  const Claim split_pays{"split-pays",
                         "more threads on the ring's rows pay: grid=fill,xprep=launch,xpf=l2,load=bulk,row-split=2 and row-split=4 (rows=8, "
                         "pdl=on) and grid=half,xprep=launch,xpf=l2,load=bulk,per-sm=2,row-split=2 are faster than their twins without "
                         "row-split on the four seed shapes"};
  const Claim fill_block_pays{"fill-block-pays",
                              "one launch a call pays on the ring: grid=fill,xprep=block,xpf=l2,load=bulk,rows=8,pdl=on, with and without "
                              "row-split=2 (each thread quantises its block of x; no prep kernel) is faster than its xprep=launch twin on the "
                              "four seed shapes"};
  const Claim tail_pays{"tail-pays",
                        "the ring's last round in pieces pays: grid=fill,xprep=launch,xpf=l2,load=bulk,tail=split,rows=8,pdl=on, with and "
                        "without row-split=2, is faster than its twin without tail=split at 17408x5120 and 5120x6144 (stated where the "
                        "H200's grid cuts the last round into pieces: 4 and 2; at the other two seed shapes the kernel is its twin's)"};
  const Claim ring_cluster_pays{"ring-cluster-pays",
                                "x prepared inside the ring's launch pays: grid=fill,xprep=cluster,load=bulk,rows=8,pdl=on (clusters of 8 with and "
                                "without xpf=l2, of 4 with it; no prep kernel) is faster than its xprep=launch twin on the four seed shapes"};
  const Claim wait_flag_pays{"wait-flag-pays",
                             "the ring's main kernel released by its prep kernel's flag pays: grid=fill,xprep=launch,wait=flag,load=bulk,rows=8,"
                             "pdl=on is faster than its twin without wait=flag (the main kernel waiting for the prep's completion) on the four "
                             "seed shapes"};
  const Claim depth_pays{"depth-pays",
                         "fewer of the ring's bytes in flight pay: grid=fill,xprep=launch,load=bulk,depth=3, depth=2 and depth=1,rows=8,pdl=on (at "
                         "most 3, 2 or 1 of the ring's stages filled a block, the rest of its shared memory idle) are faster than their twin "
                         "without depth (all 4 stages at k = 5120, 3 at k = 6144) on the four seed shapes"};
  const Claim late_pays{"late-trigger-pays",
                        "the prep kernel's late trigger pays: grid=fill,xprep=launch,trigger=late,load=bulk,depth=2 and depth=1,rows=8,pdl=on "
                        "(the main kernel launched once the prep's x is in) are faster than their twins without trigger=late on the four seed shapes"};
  const Claim block_depth_pays{"block-depth-pays",
                               "one launch a call pays on the shallow rings: grid=fill,xprep=block,load=bulk,depth=2 and depth=1,rows=8,pdl=on "
                               "(each thread quantises its block of x after the wait; no prep kernel) are faster than their xprep=launch twins "
                               "on the four seed shapes"};
  const Claim ring_warp_pays{"ring-warp-pays",
                             "the prep a warp per block of 32 pays on the depth rings: grid=fill,xprep=warp,load=bulk,depth=2 and depth=3,rows=8,"
                             "pdl=on (prep blocks of one warp) are faster than their xprep=launch twins on the four seed shapes"};
  const Claim ring_warps_pay{"ring-warps-pay",
                             "the prep a warp per block of 32 pays on the depth rings: grid=fill,xprep=warps,load=bulk,depth=2 and depth=3,rows=8,"
                             "pdl=on (prep blocks of 8 warps) are faster than their xprep=launch twins on the four seed shapes"};
  const Claim depth_split_pays{"depth-split-pays",
                               "twice the warps pay on the depth rings: grid=fill,xprep=launch,load=bulk,depth=2 and depth=3,row-split=2,rows=8,"
                               "pdl=on (each group's rows over two threads a block of 32 weights) are faster than their twins without row-split "
                               "on the four seed shapes"};
  const Claim pace_pays{"pace-pays",
                        "paced requests pay: grid=fill,xprep=launch,load=bulk,pace=1 and pace=2,rows=8,pdl=on (a producer warp keeps at most "
                        "1 or 2 of the ring's stage requests in flight a block, before the wait too) are faster than the ring without pace "
                        "(all its stages requested at once) at 6144x5120 and 5120x6144"};
  const Claim pace_block_pays{"pace-block-pays",
                              "one launch a call pays on the paced ring: grid=fill,xprep=block,load=bulk,pace=1,rows=8,pdl=on (each consumer "
                              "thread quantises its block of x after the wait; no prep kernel) is faster than its xprep=launch twin at 6144x5120 "
                              "and 5120x6144"};
  const Claim pace_warps_pay{"pace-warps-pay",
                             "the prep a warp per block of 32 pays on the paced ring: grid=fill,xprep=warps,load=bulk,pace=1,rows=8,pdl=on "
                             "(prep blocks of 8 warps) is faster than its xprep=launch twin on the four seed shapes"};
  const Claim pace_ilp_pays{"pace-ilp-pays",
                            "interleaved groups pay on the paced ring: grid=fill,xprep=warps,load=bulk,pace=1,ilp=2 and ilp=3,rows=8,pdl=on "
                            "(the consumers take 2 or 3 full stages a step, their dot chains interleaved) are faster than rung 85 (one stage a "
                            "step) at 6144x5120 and 5120x6144"};
  const Claim pace_split_pays{"pace-split-pays",
                              "twice the warps pay on the paced ring: grid=fill,xprep=warps,load=bulk,pace=1,row-split=2,rows=8,pdl=on (each "
                              "block of 32 weights over two threads, 4 rows each) is faster than rung 85 at 6144x5120 and 5120x6144"};
  const Claim pace_rows4_pays{"pace-rows4-pays",
                              "groups of 4 rows pay on the paced ring: grid=fill,xprep=warps,load=bulk,pace=2,rows=4,pdl=on (stages of half "
                              "the bytes, two requests in flight a block: rung 85's bytes in flight) is faster than rung 85 at 6144x5120 and 5120x6144"};
  const Claim pace_late_pays{"pace-late-pays",
                             "more requests after the release pay: grid=fill,xprep=warps,load=bulk,pace=1-2,pdl=on,rows=4 and rows=8 (one stage "
                             "request in flight a block until the consumers pass their wait, two after) are faster than rung 85 at 6144x5120 and 5120x6144"};
  const Claim pace_defer_pays{"pace-defer-pays",
                              "the warps' sums of a window of groups after one barrier pay on the paced ring: grid=fill,xprep=warps,load=bulk,"
                              "pace=1,defer=4,pdl=on,rows=8, and rows=4 at defer=4 and defer=8 (each warp releasing its stage itself) are faster "
                              "than rung 85 and pace=1 at rows=4 (rung 92) at 6144x5120 and 5120x6144"};
  const Claim pace_per_sm1_pays{"pace-per-sm1-pays",
                                "one block an SM pays on the paced ring alone: grid=fill,xprep=warps,load=bulk,pace=1,per-sm=1,rows=8,pdl=on "
                                "(rung 85's kernel on half its grid), with and without stages=4, at pace=1-2, with rest=l2, and defer=4,rows=4, ilp=3 and "
                                "row-split=2 on one block an SM, "
                                "are faster than rung 85 at 6144x5120 and 5120x6144"};
  const Claim pace_per_sm3_pays{"pace-per-sm3-pays",
                                "three blocks an SM pay on the paced ring: grid=fill,xprep=warps,load=bulk,pace=1,per-sm=3,rows=8,pdl=on and "
                                "pace=1,defer=4,per-sm=3,rows=4 (rungs 85 and 96 with each ring shrunk so that three blocks share an SM) are "
                                "faster than rungs 85 and 96 at 6144x5120 and 5120x6144"};
  const Claim pace_per_sm2_pays{"pace-per-sm2-pays",
                                "two blocks an SM of two stages each pay on the paced ring: grid=fill,xprep=warps,load=bulk,pace=1,per-sm=2,stages=2,"
                                "rows=8,pdl=on and its row-split=2 twin (rungs 85 and 90 on that grid and those rings, the GDN candidate's out_proj "
                                "grid with room for a stacked block) are faster than rungs 85 and 90 at 6144x5120 and 5120x6144"};
  const Claim pace_stages_pays{"pace-stages-pays",
                               "fewer stages a block pay at the 17.7 MB shapes: grid=fill,xprep=warps,load=bulk,pace=1,defer=8,stages=4 and "
                               "stages=3,rows=4,pdl=on (rung 97 with its ring cut from 8 or 7 stages) are faster than rung 97 at 6144x5120 and "
                               "5120x6144"};
  const Claim own_pays{"own-pays",
                       "warps that own their groups pay at the 17.7 MB shapes: grid=own,xprep=warps,load=bulk,owners=8 and owners=4,rows=8 "
                       "(each warp of one block an SM its groups and a stage, no barrier a group) are faster than rung 85, and owners=16,rows=4 "
                       "than rung 97 (defer=8,rows=4), at 6144x5120 and 5120x6144"};
  const Claim own_block_pays{"own-block-pays",
                             "one launch a call pays on grid=own: grid=own,xprep=block,load=bulk,owners=16,rows=4,pdl=on (each block quantises x "
                             "into its shared memory after the wait; no prep kernel) is faster than its xprep=warps twin at 6144x5120 and 5120x6144"};
  const Claim split_k_pays{"split-k-pays",
                           "clusters over k pay at the 17.7 MB shapes: grid=split-k,xprep=chunk,load=bulk,owners=8,stages=2,per-sm=2 and per-sm=1,"
                           "rows=8 (each block one chunk of k, quantising only its chunk of x: one launch a call) are faster than rung 85, and "
                           "owners=8 and owners=16 at rows=4 than rung 97 (defer=8,rows=4), at 6144x5120 and 5120x6144"};
  const Claim split_k_flat_pays{"split-k-flat-pays",
                                "split-k pays without the cluster launch: grid=split-k,xprep=chunk,load=bulk,fold=last,owners=8,stages=2,per-sm=2 "
                                "at rows=8 and rows=4 (each group folded by the last of its blocks through global memory) are faster than their "
                                "cluster twins on the four seed shapes"};
  const Claim split_k_deep_pays{"split-k-deep-pays",
                                "deeper rings pay on split-k: grid=split-k,xprep=chunk,load=bulk,owners=8,stages=4 and owners=16,stages=2,per-sm=1,"
                                "rows=4 (one block an SM, the next call's beside it, a refill asked for about 4 tiles ahead) are faster than rung "
                                "97 (defer=8,rows=4) at 6144x5120 and 5120x6144"};
  const Claim pace_warp_pays{"pace-warp-pays",
                             "prep blocks of one warp pay on the paced ring: grid=fill,xprep=warp,load=bulk,pace=1,rows=8,pdl=on is faster than "
                             "its xprep=warps twin (prep blocks of 8 warps) on the four seed shapes"};
  const Claim groups_bulk_warps_pay{"groups-bulk-warps-pay",
                                    "the prep a warp per block of 32 pays on grid=groups,load=bulk: grid=groups,xprep=warps,load=bulk,rows=8,"
                                    "pdl=on is faster than its xprep=launch twin (rung 50) at 6144x5120 and 5120x6144"};
  e.claims = {accurate,  f32_bitwise, form_bitwise, ceiling,      beats_peers, pdl_pays_claim, exact_faster,     ring_pays, half_pays,     warp_pays,
              xpf_pays,  wpf_pays,    cluster_pays, warps_pay,    warp1_pays,  flag_pays,      smem_groups_pays, held_pays, half_xpf_pays, l2_pays,
              pre1_pays, lines_pay,   parts_pay,    split_pays,   fill_block_pays, tail_pays, ring_cluster_pays, wait_flag_pays, depth_pays,
              late_pays, block_depth_pays, ring_warp_pays, ring_warps_pay, depth_split_pays, pace_pays, pace_block_pays,
              pace_warps_pay, pace_warp_pays, groups_bulk_warps_pay, pace_ilp_pays, pace_split_pays, pace_rows4_pays, pace_late_pays,
              pace_defer_pays, pace_per_sm1_pays, pace_per_sm3_pays, pace_per_sm2_pays, pace_stages_pays, own_pays, own_block_pays,
              split_k_pays, split_k_flat_pays, split_k_deep_pays};
  e.run = [=](Context& ctx) {
    const Op& op = ctx.registry().op("q4_gemv");
    const std::vector<std::string> ours = rungs();
    std::vector<std::string> names = ours;
    names.push_back(kPeerBf16);
    names.push_back(kPeerF32);
    names.push_back(kPeerMmvq);  // ms[n_ours + 2]: optional, in no claim
    const auto vs = lookup(ctx, names);
    const std::size_t n_ours = ours.size();
    for (const Shape& s : shapes_for(ctx, seed_shapes(), {{1024, 512}, {37, 160}})) {
      for (Dist d : {Dist::uniform, Dist::student_t}) {
        const Problem p{s, d, ctx.options().seed};
        // Tolerances: the race takes each variant's own (the rounding forms and the bf16 peer state
        // theirs), else 1e-5.
        RaceOptions ro{.tolerance = 1e-5, .tolerance_for = {}, .time = d == Dist::uniform, .ladder = true};
        auto ms = race(ctx, op, vs, p, ro);
        if (ms.size() < vs.size() || std::any_of(ms.begin(), ms.begin() + std::ptrdiff_t(n_ours + 2), [](const Measured& m) { return m.skipped; }))
          continue;
        ms.pop_back();  // llama-mmvq: in the report as raced (or skipped); the claims below are about the others
        const std::string where = s.str() + "/" + to_string(d);

        bool ok = true;
        std::string acc = where + ": max_rel";
        for (const auto& m : ms) {
          ok = ok && m.verified;
          acc += " " + short_name(m) + fmt(" %.3g (tol %.0e)", m.acc.max_rel, m.tolerance);
        }
        ctx.claim(accurate).settle(ok, acc);

        std::int64_t f32_bits = 0;
        std::string f32_ev = where + ": elements differing from rung 0:";
        for (std::size_t i : {std::size_t(1), std::size_t(2), std::size_t(3), kXlF32}) {
          const auto b = bitwise_diff(ms[0].output, ms[i].output);
          f32_bits += b;
          f32_ev += " " + short_name(ms[i]) + " " + std::to_string(b);
        }
        ctx.claim(f32_bitwise).settle(f32_bits == 0, f32_ev + " of " + std::to_string(ms[0].output.size()));

        std::int64_t form_bits = 0;
        std::string form_ev = where + ": elements differing within each form (groups/on vs fill/off, fill/on):";
        for (std::size_t f = 0; f < kForms.size(); ++f) {
          const std::size_t a = 1 + 3 * f;
          const auto b1 = bitwise_diff(ms[a].output, ms[a + 1].output), b2 = bitwise_diff(ms[a].output, ms[a + 2].output);
          form_bits += b1 + b2;
          form_ev += " " + kForms[f] + " " + std::to_string(b1) + ", " + std::to_string(b2);
        }
        // xprep=launch against grid=groups,pdl=on,rows=4 of its form (f32: covered by f32-bits).
        for (const auto& [i, f] : std::vector<std::pair<std::size_t, std::size_t>>{
                 {kXlQ8r8, 2}, {kRingBulk8, 2}, {kRingBulk4, 2}, {kRingCp8, 2}, {kRingBulk8Off, 2}, {kHalf1, 2}, {kHalf2, 2}, {kHalf1Xl, 2},
                 {kHalf1Off, 2}, {kXlQ8r4, 2}, {kXlQ8r4Off, 2}, {kXlF16, 1}, {kWarp4, 2}, {kWarp2, 2}, {kWarp8, 2}, {kWarp4Off, 2}, {kWarp4c3, 2}, {kXlQ8r16, 2},
                 {kXpf0, 2}, {kXpf0 + 1, 2}, {kXpf0 + 2, 2}, {kXpf0 + 3, 2}, {kXpf0 + 4, 2}, {kXpf0 + 5, 2}, {kXpf0 + 6, 2},
                 {kWpf0, 2}, {kWpf0 + 1, 2}, {kWpf0 + 2, 2}, {kWpf0 + 3, 2}, {kXc8, 2}, {kXc4, 2}, {kXw0, 2}, {kXw0 + 1, 2}, {kXw0 + 2, 2}, {kXw1, 2},
                 {kXf0, 2}, {kXf0 + 1, 2}, {kXf8Off, 2}, {kHalf2Xl, 2}, {kRingGroups, 2}, {kHalf2Held, 2}, {kHalf2XlXpf, 2}, {kHalf2HeldXpf, 2}, {kHalf2L2Xpf, 2}, {kHalf2Pre1, 2}, {kXwLines, 2},
                 {kXlParts2, 2}, {kSplit0, 2}, {kSplit0 + 1, 2}, {kSplit0 + 2, 2}, {kFillBlock0, 2}, {kFillBlock0 + 1, 2}, {kTail0, 2}, {kTail0 + 1, 2}}) {
          const auto b = bitwise_diff(ms[1 + 3 * f].output, ms[i].output);
          form_bits += b;
          form_ev += "; " + short_name(ms[i]) + " " + std::to_string(b);
        }
        // Every rung from 65 on is q8-dp4a (xprep=cluster on the ring, wait=flag, depth, trigger=late, xprep=block at depth).
        for (std::size_t i = kRingXc0; i < n_ours; ++i) {
          const auto b = bitwise_diff(ms[1 + 3 * 2].output, ms[i].output);
          form_bits += b;
          form_ev += "; " + short_name(ms[i]) + " " + std::to_string(b);
        }
        ctx.claim(form_bitwise).settle(form_bits == 0, form_ev);

        const bool timed = std::all_of(ms.begin(), ms.end(), [](const Measured& m) { return m.timed; });
        if (d != Dist::uniform || !is_seed_shape(s) || !timed) continue;
        // The fastest of ours, and the fastest exact one.
        const Measured* best = &ms[0];
        const Measured* best_f32 = &ms[1];
        for (std::size_t i = 0; i < n_ours; ++i) {
          if (ms[i].timing.summary.median < best->timing.summary.median) best = &ms[i];
          if (((i >= 1 && i < 4) || i == kXlF32) && ms[i].timing.summary.median < best_f32->timing.summary.median) best_f32 = &ms[i];
        }
        std::string ladder = s.str() + ":";
        for (std::size_t i = 0; i < n_ours; ++i) ladder += " " + short_name(ms[i]) + fmt(" %.4f ms (%.1f%%);", ms[i].timing.summary.median, ms[i].pct_ceiling);
        ctx.log(ladder);
        const double goal = goal_pct(s);
        ctx.claim(ceiling).settle(best->pct_ceiling >= goal, s.str() + ": fastest " + short_name(*best) + " " + speed(*best) + fmt("; goal %.0f%%", goal));
        const auto vs_bf16 = compare_times(ms[n_ours].timing.kept_ms, best->timing.kept_ms, s.m);
        const auto vs_f32 = compare_times(ms[n_ours + 1].timing.kept_ms, best->timing.kept_ms, s.m);
        ctx.claim(beats_peers).settle(vs_bf16.verdict == Verdict::faster && vs_f32.verdict == Verdict::faster,
                      s.str() + ": " + short_name(*best) + fmt(" %.4f ms, bf16 %.4f ms, f32 %.4f ms", best->timing.summary.median,
                                                               ms[n_ours].timing.summary.median, ms[n_ours + 1].timing.summary.median) +
                          "; vs bf16 " + speedup_text(vs_bf16) + ", vs f32 " + speedup_text(vs_f32));
        bool pdl_pays = true;
        std::string pdl_ev = s.str() + ": pdl=on vs off (grid=fill):";
        for (std::size_t f = 0; f < kForms.size(); ++f) {
          const auto c = compare_times(ms[fill_off(f)].timing.kept_ms, ms[fill_on(f)].timing.kept_ms, s.m);
          pdl_pays = pdl_pays && c.verdict == Verdict::faster;
          pdl_ev += " " + kForms[f] + fmt(" %.4f -> %.4f ms ", ms[fill_off(f)].timing.summary.median, ms[fill_on(f)].timing.summary.median) + speedup_text(c);
        }
        {
          const auto c = compare_times(ms[kXlQ8r4Off].timing.kept_ms, ms[kXlQ8r4].timing.kept_ms, s.m);
          pdl_pays = pdl_pays && c.verdict == Verdict::faster;
          pdl_ev += "; xprep=launch q8-dp4a rows=4" + fmt(" %.4f -> %.4f ms ", ms[kXlQ8r4Off].timing.summary.median, ms[kXlQ8r4].timing.summary.median) + speedup_text(c);
        }
        ctx.claim(pdl_pays_claim).settle(pdl_pays, pdl_ev);
        {
          const auto c = compare_times(ms[kXlQ8r8].timing.kept_ms, ms[kRingBulk8].timing.kept_ms, s.m);
          std::string ev = s.str() + ": " + short_name(ms[kXlQ8r8]) + " " + speed(ms[kXlQ8r8]) + "; " + short_name(ms[kRingBulk8]) + " " +
                           speed(ms[kRingBulk8]) + " " + speedup_text(c) + ";";
          for (std::size_t i : {kRingBulk4, kRingCp8, kRingBulk8Off}) ev += " " + short_name(ms[i]) + " " + speed(ms[i]) + ";";
          ctx.claim(ring_pays).settle(c.verdict == Verdict::faster, ev);
        }
        {
          const auto vs_groups = compare_times(ms[kXlQ8r8].timing.kept_ms, ms[kHalf1].timing.kept_ms, s.m);
          const auto vs_fill = compare_times(ms[kRingBulk8].timing.kept_ms, ms[kHalf1].timing.kept_ms, s.m);
          std::string ev = s.str() + ": " + short_name(ms[kHalf1]) + " " + speed(ms[kHalf1]) + "; vs " + short_name(ms[kXlQ8r8]) + " " +
                           speedup_text(vs_groups) + "; vs " + short_name(ms[kRingBulk8]) + " " + speedup_text(vs_fill) + ";";
          for (std::size_t i : {kHalf2, kHalf1Xl, kHalf1Off, kHalf2Xl}) ev += " " + short_name(ms[i]) + " " + speed(ms[i]) + ";";
          ctx.claim(half_pays).settle(vs_groups.verdict == Verdict::faster && vs_fill.verdict == Verdict::faster, ev);
        }
        {
          const auto c = compare_times(ms[kXlQ8r8].timing.kept_ms, ms[kWarp4].timing.kept_ms, s.m);
          std::string ev = s.str() + ": " + short_name(ms[kWarp4]) + " " + speed(ms[kWarp4]) + "; vs " + short_name(ms[kXlQ8r8]) + " " +
                           speed(ms[kXlQ8r8]) + " " + speedup_text(c) + ";";
          for (std::size_t i : {kWarp2, kWarp8, kWarp4Off, kWarp4c3}) ev += " " + short_name(ms[i]) + " " + speed(ms[i]) + ";";
          ctx.claim(warp_pays).settle(c.verdict == Verdict::faster, ev);
        }
        // Each rung `with` (a first index and count) against its twin `without`: faster, every one.
        auto twins_pay = [&](const Claim& claim, const std::string& flag, auto without, std::size_t with0, std::size_t n) {
          bool all = true;
          std::string ev = s.str() + ": without -> with " + flag + ":";
          for (std::size_t i = 0; i < n; ++i) {
            const Measured &a = ms[without(i)], &b = ms[with0 + i];
            const auto c = compare_times(a.timing.kept_ms, b.timing.kept_ms, s.m);
            all = all && c.verdict == Verdict::faster;
            ev += " " + short_name(a) + fmt(" %.4f -> %.4f ms ", a.timing.summary.median, b.timing.summary.median) + speedup_text(c) + ";";
          }
          ctx.claim(claim).settle(all, ev);
        };
        twins_pay(xpf_pays, "xpf=l2", [](std::size_t i) { return kXpfTwins[i]; }, kXpf0, kXpfTwins.size());
        twins_pay(wpf_pays, "wpf=l2", [](std::size_t i) { return kXpf0 + i; }, kWpf0, kWpfN);
        twins_pay(cluster_pays, "xprep=cluster (for xprep=launch)", [](std::size_t i) { return i == 0 ? kXlQ8r8 : kXlQ8r4; }, kXc8, 2);
        twins_pay(warps_pay, "xprep=warps (for xprep=launch)", [](std::size_t i) { return kXwTwins[i]; }, kXw0, kXwTwins.size());
        twins_pay(warp1_pays, "xprep=warp (for xprep=warps)", [](std::size_t) { return kXw0; }, kXw1, 1);
        twins_pay(flag_pays, "xprep=flag (for xprep=warps)", [](std::size_t i) { return kXw0 + i; }, kXf0, 2);
        twins_pay(smem_groups_pays, "load=bulk (weights in shared memory)", [](std::size_t) { return kXlQ8r8; }, kRingGroups, 1);
        twins_pay(held_pays, "last=regs", [](std::size_t) { return kHalf2Xl; }, kHalf2Held, 1);
        twins_pay(half_xpf_pays, "xpf=l2", [](std::size_t i) { return i == 0 ? kHalf2Xl : kHalf2Held; }, kHalf2XlXpf, 2);
        twins_pay(l2_pays, "last=l2", [](std::size_t) { return kHalf2XlXpf; }, kHalf2L2Xpf, 1);
        twins_pay(pre1_pays, "pre=1", [](std::size_t) { return kHalf2Xl; }, kHalf2Pre1, 1);
        twins_pay(lines_pay, "wpf=lines", [](std::size_t) { return kXw1; }, kXwLines, 1);
        if (s.m == 10240 && s.k == 5120) twins_pay(parts_pay, "parts=2", [](std::size_t) { return kXlQ8r8; }, kXlParts2, 1);
        twins_pay(split_pays, "row-split", [](std::size_t i) { return kSplitTwins[i]; }, kSplit0, kSplitTwins.size());
        twins_pay(fill_block_pays, "xprep=block (for xprep=launch)", [](std::size_t i) { return kFillBlockTwins[i]; }, kFillBlock0, kFillBlockTwins.size());
        if ((s.m == 17408 && s.k == 5120) || (s.m == 5120 && s.k == 6144))
          twins_pay(tail_pays, "tail=split", [](std::size_t i) { return kTailTwins[i]; }, kTail0, kTailTwins.size());
        twins_pay(ring_cluster_pays, "xprep=cluster (for xprep=launch)", [](std::size_t i) { return kRingXcTwins[i]; }, kRingXc0, kRingXcTwins.size());
        twins_pay(wait_flag_pays, "wait=flag", [](std::size_t) { return kRingBulk8; }, kWaitFlag, 1);
        twins_pay(depth_pays, "depth", [](std::size_t) { return kRingBulk8; }, kDepth0, 2);
        twins_pay(depth_pays, "depth=3", [](std::size_t) { return kRingBulk8; }, kDepth3, 1);
        twins_pay(late_pays, "trigger=late", [](std::size_t i) { return kDepth0 + i; }, kLate0, 2);
        twins_pay(block_depth_pays, "xprep=block (for xprep=launch)", [](std::size_t i) { return kDepth0 + i; }, kBlockDepth0, 2);
        twins_pay(ring_warp_pays, "xprep=warp (for xprep=launch)", [](std::size_t i) { return kDepthTwins[i]; }, kRingWarp0, 2);
        twins_pay(ring_warps_pay, "xprep=warps (for xprep=launch)", [](std::size_t i) { return kDepthTwins[i]; }, kRingWarp0 + 2, 2);
        twins_pay(depth_split_pays, "row-split=2", [](std::size_t i) { return kDepthTwins[i]; }, kDepthSplit0, 2);
        if ((s.m == 6144 && s.k == 5120) || (s.m == 5120 && s.k == 6144)) {
          twins_pay(pace_pays, "pace", [](std::size_t) { return kRingBulk8; }, kPace0, 2);
          twins_pay(pace_block_pays, "xprep=block (for xprep=launch)", [](std::size_t) { return kPace0; }, kPaceBlock, 1);
          twins_pay(groups_bulk_warps_pay, "xprep=warps (for xprep=launch)", [](std::size_t) { return kRingGroups; }, kGroupsBulkWarps, 1);
          twins_pay(pace_ilp_pays, "ilp", [](std::size_t) { return kPaceWarps; }, kPaceIlp0, 2);
          twins_pay(pace_split_pays, "row-split=2", [](std::size_t) { return kPaceWarps; }, kPaceSplit, 1);
          twins_pay(pace_rows4_pays, "rows=4 at pace=2", [](std::size_t) { return kPaceWarps; }, kPaceRows4, 1);
          twins_pay(pace_late_pays, "pace=1-2", [](std::size_t) { return kPaceWarps; }, kPaceLate0, 2);
          twins_pay(pace_defer_pays, "defer=4|8", [](std::size_t i) { return i == 0 ? kPaceWarps : kPaceRows4 + 1; }, kPaceDefer0, 3);
          twins_pay(pace_per_sm1_pays, "per-sm=1", [](std::size_t) { return kPaceWarps; }, kPacePerSm1, 7);
          twins_pay(pace_per_sm3_pays, "per-sm=3", [](std::size_t i) { return i == 0 ? kPaceWarps : kPaceDefer0 + 1; }, kPacePerSm3, 2);
          twins_pay(pace_per_sm2_pays, "per-sm=2,stages=2", [](std::size_t i) { return i == 0 ? kPaceWarps : kPaceSplit; }, kPacePerSm2, 2);
          twins_pay(pace_stages_pays, "stages=4|3", [](std::size_t) { return kPaceDefer0 + 2; }, kPaceStages0, 2);
          twins_pay(own_pays, "grid=own", [](std::size_t i) { return i < 2 ? kPaceWarps : kPaceDefer0 + 2; }, kOwn0, 3);
          twins_pay(own_block_pays, "xprep=block (for xprep=warps)", [](std::size_t) { return kOwn0 + 2; }, kOwn0 + 3, 1);
          twins_pay(split_k_pays, "grid=split-k", [](std::size_t i) { return i < 2 ? kPaceWarps : kPaceDefer0 + 2; }, kSplitK0, 4);
          twins_pay(split_k_deep_pays, "grid=split-k,per-sm=1,rows=4 (for rung 97)", [](std::size_t) { return kPaceDefer0 + 2; }, kSplitKDeep0, 2);
        }
        twins_pay(split_k_flat_pays, "fold=last", [](std::size_t i) { return kSplitK0 + 2 * i; }, kSplitKFlat0, 2);
        twins_pay(pace_warps_pay, "xprep=warps (for xprep=launch)", [](std::size_t) { return kPace0; }, kPaceWarps, 1);
        twins_pay(pace_warp_pays, "xprep=warp (for xprep=warps)", [](std::size_t) { return kPaceWarps; }, kPaceWarp, 1);
        const auto exact = compare_times(ms[0].timing.kept_ms, best_f32->timing.kept_ms, s.m);
        ctx.claim(exact_faster).settle(exact.verdict == Verdict::faster,
                      s.str() + ": today's " + speed(ms[0]) + "; " + short_name(*best_f32) + " " + speed(*best_f32) + " " + speedup_text(exact));
      }
    }
  };
  return e;
}

}  // namespace

void register_q4_ceiling(Registry& r) { r.add(q4_to_ceiling()); }

}  // namespace klab::experiments
