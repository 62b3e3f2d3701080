// gdn-stack (issue 14 part 5): a token through 48 GDN layers as one CUDA graph, device-resident, per
// tier (f32, q4, and q4-fast: the q4 tier on gdn::step_candidate(), first measured in reports/h200/run-30bee11;
// f32-fast: the f32 tier on gdn::step_f32_candidate()): the graph checked bit for bit against the same layers enqueued one after another,
// then its time per token against the byte floor (the layers' bytes over the run's read ceiling).
// The stack itself (loads, the chain, the graph, the check) is gdn_stack_core.cpp.
//
// Layers: 48 at Qwen3.5-27B's geometry (--quick: small_geometry(), 4 layers). The layer count is a
// parameter of run_tier; it is no --set parameter because --set takes only ops' parameters.
// Weights: one layer's seeded weights generated once on the host and loaded into every layer (each
// layer its own device copy, so every layer reads its own bytes); the q4 tier's codes are those
// weights quantised once. Every layer reads the token (no residual stream, no norms between layers:
// chained output-to-input the values underflowed to 0 by layer 5; GdnStack::enqueue); the last
// layer's output is checked for overflow and its max |value| recorded, per layer too.
// Timing: launch mode (one graph launch between events; the same chain enqueued without a graph is
// timed beside it, interleaved), no read flush: the weights (~3.4 GB q4, ~22 GB f32 at 48 layers)
// are 70x-450x the H200's L2, cold by size; the record says how many times the L2 they are. The
// state is not reset between repetitions (a decode step's state is never zero; the kernels' work does
// not depend on it).
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common.hpp"
#include "gdn/step_op.hpp"
#include "gdn_common.hpp"
#include "gdn_stack.hpp"
#include "klab/metrics.hpp"
#include "klab/stats.hpp"

namespace klab::experiments {

namespace {

using gdn::GdnDevice;
using rg::Geometry;

constexpr int kLayers = 48;      // Qwen3.5-27B's GDN layers (of its 64: 48 linear-attention, 16 full)
constexpr int kQuickLayers = 4;  // --quick: enough for both ping-pong buffers to be read and written twice
const std::string kFullKey = "qwen35-27b,layers=48";

const Claim kBitwise{"graph-bitwise",
                     "one token through the layers as one CUDA graph gives the output and every layer's S and conv history of the same layers "
                     "enqueued one after another, bit for bit (f32 and q4 tiers)"};
const Claim kFinite{"finite", "every layer's output is finite and not zero after one token, each layer fed the token (f32 and q4 tiers)"};
const Claim kQ4Ms{"q4-1ms", "q4: 48 layers per token <= 1.0 ms as one graph (Qwen3.5-27B geometry)"};
const Claim kF32Floor{"f32-85pct", "f32: 48 layers per token as one graph reach >= 85% of their byte floor (their bytes at the run's read ceiling)"};
const Claim kFastMs{"q4-fast-1ms",
                    "q4 on the step's candidate configuration (gdn::step_candidate: q8-dp4a projections, in_proj_qkv and in_proj_z as one "
                    "launch on the paced ring with b|a in its prep kernel (fold=ba), the fused prep, the fused recurrence with pdl=early, "
                    "out=prepared, out_proj on the paced ring at row-split=2 on one block an SM, the PDL chain): 48 layers per "
                    "token <= 1.0 ms as one graph (Qwen3.5-27B geometry)"};
const Claim kF32FastFloor{"f32-fast-85pct",
                          "f32-fast (the f32 tier on gdn::step_f32_candidate: its big three on f32_gemv/impl=warp-row,unroll=4,pdl=on, "
                          "in_proj_qkv, in_proj_z and b|a as one stacked launch, the q4 candidate's small kernels in the PDL chain): 48 layers per "
                          "token as one graph reach >= 85% of their byte floor"};
const Claim kF32U8InGraph{"f32-u8-in-graph",
                          "in the 48-layer graph, eight loads of W in flight a lane pay: f32-fast-u8 (the f32 candidate on warp-row,unroll=8,pdl=on) "
                          "is faster per token than f32-fast (on unroll=4,pdl=on)"};
const Claim kF32FoldInGraph{"f32-fold-main-in-graph",
                            "in the 48-layer graph, b|a's rows riding along in the f32 stacked launch pay: f32-fast is faster per token than "
                            "f32-fast-ba-own (its twin with b|a a launch of its own)"};
const Claim kF32QkvzInGraph{"f32-qkvz-in-graph",
                            "in the 48-layer graph, in_proj_qkv and in_proj_z as one f32 stacked launch pay: f32-fast-ba-own is faster per token than "
                            "f32-fast-apart (its twin with the two launches)"};
const Claim kF32PdlInGraph{"f32-pdl-in-graph",
                           "in the 48-layer graph, the f32 big three on warp-row,unroll=4,pdl=on (their first loads of W before the wait) pay: "
                           "f32-fast-apart is faster per token than f32-fast-plain (its twin on warp-row,unroll=4)"};
const Claim kF32FastFaster{"f32-fast-faster", "f32-fast is faster per token than the f32 tier on the device's defaults, 48 layers as one graph"};
const Claim kQ4Faster{"q4-faster", "q4 faster than f32 per token, 48 layers as one graph (bootstrap verdict on the medians)"};
const Claim kRingInGraph{"ring-in-graph",
                         "in the 48-layer graph, the stacked launch on the TMA ring pays: q4-fast-ring (fold's base with in_proj_qkvz on "
                         "gdn::kStackedRing) is faster per token than q4-fast-ba-own (the base; gdn-step-fused's ring-pays, per layer)"};
const Claim kWarpsInGraph{"warps-in-graph",
                          "in the 48-layer graph, the prep a warp per block of 32 pays: q4-fast-ba-own (fold's base, on gdn::kWarpsQ4) is "
                          "faster per token than q4-fast-thread-prep (its twin on gdn::kThreadPrepQ4)"};
const Claim kFoldInGraph{"fold-in-graph",
                         "in the 48-layer graph, b|a in the stacked launch's prep kernel pays: q4-fast-fold (fold=ba, the candidate 2026-12-02..06) is "
                         "faster per token than q4-fast-ba-own (its base, b|a a launch of its own)"};
const Claim kCandidateInGraph{"candidate-in-graph",
                              "in the 48-layer graph, the candidate since 2026-12-06 pays: q4-fast (gdn::step_candidate, pace_out1_split) is faster "
                              "per token than q4-fast-fold (the candidate before it)"};
const Claim kRecNormInGraph{"rec-norm-in-graph",
                            "in the 48-layer graph, the gated norm and out_proj's q8 x in the recurrence pay: q4-fast-rec-norm (fold's base "
                            "on gdn::kRecNormQ8) is faster per token than q4-fast-ba-own"};
const Claim kFoldMainInGraph{"fold-main-in-graph",
                             "in the 48-layer graph, b|a as f32 rows in the stacked kernel's grid pays: q4-fast-fold-main (fold's base with "
                             "fold=ba-main, the candidate until 2026-12-02) is faster per token than q4-fast-ba-own"};
const Claim kPreparedInGraph{"prepared-in-graph",
                             "in the 48-layer graph, out_proj without its prep launch pays: q4-fast-ba-own (fold's base, out=prepared: the "
                             "gated norm writes out_proj's q8 x) is faster per token than q4-fast-own-prep (its twin with out_proj's own prep launch)"};
const Claim kPfInGraph{"pf-out-in-graph",
                       "in the 48-layer graph, out_proj's weights prefetched into L2 by conv_norm_bg pay: q4-fast-pf-out (fold with "
                       "pf=out) is faster per token than q4-fast-fold"};
const Claim kPfEarlyInGraph{"pf-early-in-graph",
                            "in the 48-layer graph, the prefetch issued before conv_norm_bg's wait pays: q4-fast-pf-early (fold with "
                            "pf=out-early) is faster per token than q4-fast-fold"};
const Claim kForkInGraph{"fork-z-in-graph",
                         "in the 48-layer graph, in_proj_z on a branch of its own pays: q4-fast-fork-z (fold with fork=z: z forked off "
                         "the stacked launch, beside conv_norm_bg and the recurrence) is faster per token than q4-fast-fold"};
const Claim kF32ForkInGraph{"f32-fork-z-in-graph",
                            "in the 48-layer graph, in_proj_z on a branch of its own pays on the f32 tier: f32-fast-fork-z (the f32 candidate with "
                            "fork=z) is faster per token than f32-fast"};
const Claim kNormLastInGraph{"norm-last-in-graph",
                             "in the 48-layer graph, the gated norm in the recurrence's last column blocks pays: q4-fast-norm-last (fold on "
                             "gdn::kRecNormLast: one launch fewer) is faster per token than q4-fast-fold"};
const Claim kRows16InGraph{"rows16-in-graph",
                           "in the 48-layer graph, 16 rows a q4 thread block pay: q4-fast-rows16 (fold on gdn::kWarpsQ4Rows16: half the "
                           "blocks, so the next kernel's blocks find room on the SMs earlier) is faster per token than q4-fast-fold"};
const Claim kOutSmemInGraph{"out-smem-in-graph",
                            "in the 48-layer graph, out_proj with its weights in shared memory pays: q4-fast-out-smem (fold with "
                            "out_proj on gdn::kSmemGroupsQ4, whose blocks leave room for in_prep_ba's) is faster per token than q4-fast-fold"};
const Claim kFoldRingInGraph{"fold-ring-in-graph",
                             "in the 48-layer graph, the ring as the stacked main kernel pays: q4-fast-fold-ring (fold on "
                             "gdn::kStackedRing, its x from in_prep_ba) is faster per token than q4-fast-fold"};
const Claim kFoldDepthInGraph{"fold-depth-in-graph",
                              "in the 48-layer graph, the ring at depth=2 as the stacked main kernel pays: q4-fast-fold-depth (fold_ring on "
                              "gdn::kRingDepth2) is faster per token than q4-fast-fold-ring"};
const Claim kDepthAllInGraph{"depth-all-in-graph",
                             "in the 48-layer graph, every q4 launch on the ring at depth=2 pays: q4-fast-depth (fold with its stacked "
                             "launch and out_proj on gdn::kRingDepth2) is faster per token than q4-fast-fold"};
const Claim kFoldPaceInGraph{"fold-pace-in-graph",
                             "in the 48-layer graph, the paced ring as the stacked main kernel pays: q4-fast-fold-pace (fold_ring on "
                             "gdn::kPace1) is faster per token than q4-fast-fold-ring"};
const Claim kPaceAllInGraph{"pace-all-in-graph",
                            "in the 48-layer graph, every q4 launch on the paced ring pays: q4-fast-pace (fold with its stacked "
                            "launch and out_proj on gdn::kPace1) is faster per token than q4-fast-fold"};
const Claim kPaceIlpInGraph{"pace-ilp-in-graph",
                            "in the 48-layer graph, out_proj's groups interleaved pay: q4-fast-pace-ilp (q4-fast-pace with out_proj on "
                            "gdn::kPace1Ilp3, ilp=3) is faster per token than q4-fast-pace"};
const Claim kPaceLateInGraph{"pace-late-in-graph",
                             "in the 48-layer graph, more requests after the release pay: q4-fast-pace-late (q4-fast-pace on gdn::kPace1Late, "
                             "pace=1-2) is faster per token than q4-fast-pace"};
const Claim kPaceDeferInGraph{"pace-defer-in-graph",
                              "in the 48-layer graph, out_proj's sums deferred pay: q4-fast-pace-defer (q4-fast-pace with out_proj on "
                              "gdn::kPace1Defer4R4, defer=4, rows=4) is faster per token than q4-fast-pace"};
const Claim kBaConvInGraph{"ba-conv-in-graph",
                           "in the 48-layer graph, b|a in the conv_norm_bg launch pays: q4-fast-pace-ba-conv (q4-fast-pace with fold=ba-conv, the "
                           "stacked launch's prep kernel h's q8 form alone) is faster per token than q4-fast-pace"};
const Claim kOut1InGraph{"out-per-sm1-in-graph",
                         "in the 48-layer graph, out_proj on one block an SM pays: q4-fast-pace-out1 (q4-fast-pace with out_proj on "
                         "gdn::kPace1PerSm1, room for the next stacked launch's blocks beside it) is faster per token than q4-fast-pace"};
const Claim kOut1S4InGraph{"out-stages4-in-graph",
                           "in the 48-layer graph, a deeper out_proj ring pays: q4-fast-pace-out1-s4 (q4-fast-pace-out1 with out_proj on "
                           "gdn::kPace1PerSm1S4, stages=4) is faster per token than q4-fast-pace-out1"};
const Claim kOut1BaInGraph{"out1-ba-conv-in-graph",
                           "in the 48-layer graph, b|a in the conv_norm_bg launch pays beside out_proj on one block an SM: q4-fast-pace-out1-ba "
                           "(q4-fast-pace-out1 with fold=ba-conv) is faster per token than q4-fast-pace-out1"};
const Claim kOut1LateInGraph{"out1-late-in-graph",
                             "in the 48-layer graph, two requests after the release pay for out_proj on one block an SM: q4-fast-pace-out1-late "
                             "(q4-fast-pace-out1 with out_proj on gdn::kPace1LatePerSm1) is faster per token than q4-fast-pace-out1"};
const Claim kOut1DeferInGraph{"out1-defer-in-graph",
                              "in the 48-layer graph, out_proj's sums deferred pay on one block an SM: q4-fast-pace-out1-defer (q4-fast-pace-out1 "
                              "with out_proj on gdn::kPace1Defer4R4PerSm1) is faster per token than q4-fast-pace-out1"};
const Claim kOut1L2InGraph{"out1-l2-in-graph",
                           "in the 48-layer graph, out_proj's later groups in the L2 pay: q4-fast-pace-out1-l2 (q4-fast-pace-out1 with out_proj on "
                           "gdn::kPace1PerSm1L2, rest=l2) is faster per token than q4-fast-pace-out1"};
const Claim kOut1IlpInGraph{"out1-ilp-in-graph",
                            "in the 48-layer graph, out_proj's groups interleaved pay on one block an SM: q4-fast-pace-out1-ilp (q4-fast-pace-out1 "
                            "with out_proj on gdn::kPace1Ilp3PerSm1) is faster per token than q4-fast-pace-out1"};
const Claim kOut1SplitInGraph{"out1-split-in-graph",
                              "in the 48-layer graph, twice the warps pay for out_proj on one block an SM: q4-fast (pace_out1_split, the candidate "
                              "since 2026-12-06: q4-fast-pace-out1 with out_proj on gdn::kPace1SplitPerSm1) is faster per token than q4-fast-pace-out1"};
const Claim kSplitX2InGraph{"split-x2-in-graph",
                            "in the 48-layer graph, out_proj on two blocks an SM of 2 stages each pays: q4-fast-split-x2 (the candidate with "
                            "out_proj on gdn::kPace1SplitPerSm2S2) is faster per token than q4-fast"};
const Claim kOwn4InGraph{"own-out4-in-graph",
                         "in the 48-layer graph, warps that own out_proj's groups pay beside the stacked block: q4-fast-own4 (the candidate "
                         "with out_proj on gdn::kOwn4, q4_gemv's grid=own at 4 warps a block) is faster per token than q4-fast"};
const Claim kOwn8InGraph{"own-out8-in-graph",
                         "in the 48-layer graph, out_proj's groups all in its warps' stages pay: q4-fast-own8 (the candidate with out_proj on "
                         "gdn::kOwn8) is faster per token than q4-fast"};
const Claim kKcOutInGraph{"kc-out-in-graph",
                          "in the 48-layer graph, clusters over k pay for out_proj: q4-fast-kc (the candidate with out_proj on gdn::kSplitK1, "
                          "q4_gemv's grid=split-k) is faster per token than q4-fast"};
const Claim kSpan2InGraph{"span2-in-graph",
                          "in the 48-layer graph, one ring across out_proj and the next layer's stacked launch pays: q4-fast-pace-span2 "
                          "(q4-fast-pace-out1 with GdnDevice::set_span at pace 2) is faster per token than q4-fast-pace-out1"};
const Claim kSpan3InGraph{"span3-in-graph",
                          "in the 48-layer graph, the span at pace 3 pays: q4-fast-pace-span3 is faster per token than q4-fast-pace-out1"};
const Claim kSpan1x2InGraph{"span1x2-in-graph",
                            "in the 48-layer graph, the span on two blocks an SM pays at pace 1: q4-fast-pace-span1x2 is faster per token than q4-fast-pace-out1"};
const Claim kSpan2x2InGraph{"span2x2-in-graph",
                            "in the 48-layer graph, the span on two blocks an SM pays at pace 2: q4-fast-pace-span2x2 is faster per token than q4-fast-pace-out1"};
const Claim kWarpInGraph{"warp-prep-in-graph",
                         "in the 48-layer graph, prep blocks of one warp pay: q4-fast-warp (the base on gdn::kWarpQ4, whose prep blocks fit "
                         "beside out_proj's) is faster per token than q4-fast-ba-own"};
const Claim kFoldMainWarpInGraph{"fold-main-warp-in-graph",
                                 "in the 48-layer graph, prep blocks of one warp pay with fold=ba-main: q4-fast-fold-main-warp is faster per "
                                 "token than q4-fast-fold-main"};
const Claim kF32NormLastInGraph{"f32-norm-last-in-graph",
                                "in the 48-layer graph, norm=last pays on the f32 tier: f32-fast-norm-last is faster per token than f32-fast"};
const Claim kConvRecInGraph{"conv-rec-in-graph",
                            "in the 48-layer graph, the conv, the q/k norm and beta/g inside the recurrence pay: q4-fast-conv-rec (fold on "
                            "gdn::kRecConv: no conv_norm_bg launch, one launch fewer a layer) is faster per token than q4-fast-fold"};
const Claim kF32ConvRecInGraph{"f32-conv-rec-in-graph",
                               "in the 48-layer graph, prep=conv pays on the f32 tier: f32-fast-conv-rec is faster per token than f32-fast"};
const Claim kFourInGraph{"four-in-graph",
                         "in the 48-layer graph, four launches a layer pay: q4-fast-four (fold on gdn::kRecFour: the conv, the q/k norm, "
                         "beta/g and the gated norm in the recurrence, the conv history a ring) is faster per token than q4-fast-fold"};
const Claim kF32FourInGraph{"f32-four-in-graph",
                            "in the 48-layer graph, four launches a layer pay on the f32 tier: f32-fast-four is faster per token than f32-fast"};

// The candidate's twins raced as tiers of the graph, each with its claim against its base tier
// (q4-fast-ba-own, fold's base: gdn::candidate_twins().ba_own; for q4-fast-ba-own itself q4-fast-fold, the
// candidate 2026-12-02..06; for q4-fast-fold the candidate since, q4-fast, itself a row against q4-fast-pace-out1):
// the twin faster than its base (twin_faster), or the base faster than the twin (the base took what the twin lacks).
// - q4-fast (pace_out1_split since 2026-12-06, reports/h200/run-call48): 1.1905 ms per token against pace_out1's 1.2133
//   (x1.019) and fold's 1.3169 (x1.106), as q4-fast-pace-out1-split, its name until it became the candidate.
// - q4-fast-ring: the stacked launch on the TMA ring. It paid x1.019 per layer in gdn-step-fused
//   (reports/h200/run-4198a57) but lost in this graph, 1.546 against 1.4775 ms per token (run-68b986b,
//   H200, 2026-12-01, when the candidate had it and the twin did not).
// - q4-fast-own-prep: out_proj's own prep launch (without out=prepared; measured in
//   reports/h200/run-a9d7934 as the candidate, 1.4762 against 1.4131 ms per token with it).
// - q4-fast-ba-own: b|a a launch of its own, the candidate before fold=ba-main (1.3895 ms per token in
//   run-123ab72; its twin with fold=ba-main 1.3770 in run-2c678d0, x1.016).
// - q4-fast-fold-main: the base with fold=ba-main, the candidate until 2026-12-02; without the copy nodes
//   (run-0e18347, run-f64919d) 1.3021 and 1.3025 ms per token against fold=ba's 1.2832 and 1.2828.
// - q4-fast-thread-prep, q4-fast-rec-norm (twins of the base), q4-fast-pf-out,
//   q4-fast-pf-early, q4-fast-fork-z, q4-fast-norm-last, q4-fast-rows16, q4-fast-out-smem (twins of fold, then the candidate;
//   out-smem: 1.3644 against 1.3158 ms per token in reports/h200/run-1b4fbed), q4-fast-warp (of the base),
//   q4-fast-fold-main-warp (of q4-fast-fold-main): step_op.hpp's CandidateTwins;
//   f32-fast-fork-z and f32-fast-norm-last are f32-fast's; q4-fast-conv-rec and f32-fast-conv-rec (prep=conv, 2026-12-04) the two candidates' (x0.972 and x0.983 in
//   reports/h200/run-prep-conv/e0e5590); q4-fast-four and f32-fast-four (prep=conv with norm=last and the history a ring:
//   four launches a layer, 2026-12-05) the same candidates' (reports/h100/run-2c88263: x0.940 and x0.987 on an H100;
//   reports/h200/run-f55aa56: x0.938 and x0.985 on the H200).
// - f32-fast-u8, f32-fast-ba-own, f32-fast-apart, f32-fast-plain: step_op.hpp's F32Twins (f32-fast's twins;
//   measured 2026-12-02 in reports/h200/run-90c5f7b, where f32-fast was the u8 form and f32-fast-u4 this candidate).
struct TwinTier {
  const char* tier;
  gdn::FusedStepConfig (*config)();
  const Claim* claim;
  bool twin_faster;
  const char* base;
};
const std::vector<TwinTier>& twin_tiers() {
  static constexpr const char* kBase = "q4-fast-ba-own";
  static const std::vector<TwinTier> v{
      {"q4-fast-fold", [] { return gdn::candidate_twins().fold; }, &kCandidateInGraph, false, "q4-fast"},
      {kBase, [] { return gdn::candidate_twins().ba_own; }, &kFoldInGraph, false, "q4-fast-fold"},
      {"q4-fast-ring", [] { return gdn::candidate_twins().ring; }, &kRingInGraph, true, kBase},
      {"q4-fast-own-prep", [] { return gdn::candidate_twins().out_own; }, &kPreparedInGraph, false, kBase},
      {"q4-fast-thread-prep", [] { return gdn::candidate_twins().thread_prep; }, &kWarpsInGraph, false, kBase},
      {"q4-fast-fold-main", [] { return gdn::candidate_twins().fold_main; }, &kFoldMainInGraph, true, kBase},
      {"q4-fast-rec-norm", [] { return gdn::candidate_twins().rec_norm; }, &kRecNormInGraph, true, kBase},
      {"q4-fast-pf-out", [] { return gdn::candidate_twins().pf_out; }, &kPfInGraph, true, "q4-fast-fold"},
      {"q4-fast-pf-early", [] { return gdn::candidate_twins().pf_out_early; }, &kPfEarlyInGraph, true, "q4-fast-fold"},
      {"q4-fast-fork-z", [] { return gdn::candidate_twins().fork_z; }, &kForkInGraph, true, "q4-fast-fold"},
      {"f32-fast-fork-z", [] { return gdn::f32_candidate_twins().fork_z; }, &kF32ForkInGraph, true, "f32-fast"},
      {"q4-fast-norm-last", [] { return gdn::candidate_twins().norm_last; }, &kNormLastInGraph, true, "q4-fast-fold"},
      {"f32-fast-norm-last", [] { return gdn::f32_candidate_twins().norm_last; }, &kF32NormLastInGraph, true, "f32-fast"},
      {"q4-fast-conv-rec", [] { return gdn::candidate_twins().conv_rec; }, &kConvRecInGraph, true, "q4-fast-fold"},
      {"f32-fast-conv-rec", [] { return gdn::f32_candidate_twins().conv_rec; }, &kF32ConvRecInGraph, true, "f32-fast"},
      {"q4-fast-four", [] { return gdn::candidate_twins().four; }, &kFourInGraph, true, "q4-fast-fold"},
      {"f32-fast-four", [] { return gdn::f32_candidate_twins().four; }, &kF32FourInGraph, true, "f32-fast"},
      {"q4-fast-rows16", [] { return gdn::candidate_twins().rows16; }, &kRows16InGraph, true, "q4-fast-fold"},
      {"q4-fast-warp", [] { return gdn::candidate_twins().warp1; }, &kWarpInGraph, true, kBase},
      {"q4-fast-out-smem", [] { return gdn::candidate_twins().out_smem; }, &kOutSmemInGraph, true, "q4-fast-fold"},
      {"q4-fast-fold-ring", [] { return gdn::candidate_twins().fold_ring; }, &kFoldRingInGraph, true, "q4-fast-fold"},
      {"q4-fast-fold-depth", [] { return gdn::candidate_twins().fold_depth; }, &kFoldDepthInGraph, true, "q4-fast-fold-ring"},
      {"q4-fast-depth", [] { return gdn::candidate_twins().depth_all; }, &kDepthAllInGraph, true, "q4-fast-fold"},
      {"q4-fast-fold-pace", [] { return gdn::candidate_twins().fold_pace; }, &kFoldPaceInGraph, true, "q4-fast-fold-ring"},
      {"q4-fast-pace", [] { return gdn::candidate_twins().pace_all; }, &kPaceAllInGraph, true, "q4-fast-fold"},
      {"q4-fast-pace-ilp", [] { return gdn::candidate_twins().pace_ilp; }, &kPaceIlpInGraph, true, "q4-fast-pace"},
      {"q4-fast-pace-late", [] { return gdn::candidate_twins().pace_late; }, &kPaceLateInGraph, true, "q4-fast-pace"},
      {"q4-fast-pace-defer", [] { return gdn::candidate_twins().pace_defer; }, &kPaceDeferInGraph, true, "q4-fast-pace"},
      {"q4-fast-pace-ba-conv", [] { return gdn::candidate_twins().pace_ba_conv; }, &kBaConvInGraph, true, "q4-fast-pace"},
      {"q4-fast-pace-out1", [] { return gdn::candidate_twins().pace_out1; }, &kOut1InGraph, true, "q4-fast-pace"},
      {"q4-fast-pace-out1-s4", [] { return gdn::candidate_twins().pace_out1_s4; }, &kOut1S4InGraph, true, "q4-fast-pace-out1"},
      {"q4-fast-pace-out1-ba", [] { return gdn::candidate_twins().pace_out1_ba; }, &kOut1BaInGraph, true, "q4-fast-pace-out1"},
      {"q4-fast-pace-out1-late", [] { return gdn::candidate_twins().pace_out1_late; }, &kOut1LateInGraph, true, "q4-fast-pace-out1"},
      {"q4-fast-pace-out1-defer", [] { return gdn::candidate_twins().pace_out1_defer; }, &kOut1DeferInGraph, true, "q4-fast-pace-out1"},
      {"q4-fast-pace-out1-l2", [] { return gdn::candidate_twins().pace_out1_l2; }, &kOut1L2InGraph, true, "q4-fast-pace-out1"},
      {"q4-fast-pace-out1-ilp", [] { return gdn::candidate_twins().pace_out1_ilp; }, &kOut1IlpInGraph, true, "q4-fast-pace-out1"},
      // the candidate itself (its tier "q4-fast", whose goal run_tier settles): pace_out1_split
      {"q4-fast", gdn::step_candidate, &kOut1SplitInGraph, true, "q4-fast-pace-out1"},
      {"q4-fast-split-x2", [] { return gdn::candidate_twins().pace_split_x2; }, &kSplitX2InGraph, true, "q4-fast"},
      {"q4-fast-own4", [] { return gdn::candidate_twins().own_out4; }, &kOwn4InGraph, true, "q4-fast"},
      {"q4-fast-own8", [] { return gdn::candidate_twins().own_out8; }, &kOwn8InGraph, true, "q4-fast"},
      {"q4-fast-kc", [] { return gdn::candidate_twins().kc_out; }, &kKcOutInGraph, true, "q4-fast"},
      {"q4-fast-pace-span2", [] { return gdn::candidate_twins().pace_span2; }, &kSpan2InGraph, true, "q4-fast-pace-out1"},
      {"q4-fast-pace-span3", [] { return gdn::candidate_twins().pace_span3; }, &kSpan3InGraph, true, "q4-fast-pace-out1"},
      {"q4-fast-pace-span1x2", [] { return gdn::candidate_twins().pace_span1x2; }, &kSpan1x2InGraph, true, "q4-fast-pace-out1"},
      {"q4-fast-pace-span2x2", [] { return gdn::candidate_twins().pace_span2x2; }, &kSpan2x2InGraph, true, "q4-fast-pace-out1"},
      {"q4-fast-fold-main-warp", [] { return gdn::candidate_twins().fold_main_warp1; }, &kFoldMainWarpInGraph, true, "q4-fast-fold-main"},
      {"f32-fast-u8", [] { return gdn::f32_candidate_twins().u8; }, &kF32U8InGraph, true, "f32-fast"},
      {"f32-fast-ba-own", [] { return gdn::f32_candidate_twins().ba_own; }, &kF32FoldInGraph, false, "f32-fast"},
      {"f32-fast-apart", [] { return gdn::f32_candidate_twins().apart; }, &kF32QkvzInGraph, false, "f32-fast-ba-own"},
      {"f32-fast-plain", [] { return gdn::f32_candidate_twins().plain; }, &kF32PdlInGraph, false, "f32-fast-apart"}};
  return v;
}
const TwinTier* twin_tier(const std::string& tier) {
  for (const auto& t : twin_tiers())
    if (tier == t.tier) return &t;
  return nullptr;
}
// A twin row's race: (A, B), B claimed faster than A.
std::pair<std::string, std::string> race_of(const TwinTier& t) {
  return t.twin_faster ? std::pair<std::string, std::string>{t.base, t.tier} : std::pair<std::string, std::string>{t.tier, t.base};
}
// The four tiers whose goals run_tier settles; every other tier is a twin's (twin_tiers), though q4-fast is a row there too.
bool is_goal_tier(const std::string& tier) { return tier == "f32" || tier == "f32-fast" || tier == "q4" || tier == "q4-fast"; }

// The median's 95% percentile-bootstrap interval, by the harness's statistics: compare_times
// resamples A and B and takes median(B)/median(A); with A = {1} every resample of A has median 1, so
// the ratio's interval is that of median(B).
std::pair<double, double> median_interval(const std::vector<double>& s) {
  const Comparison c = compare_times({1.0}, s);
  return {c.lo, c.hi};
}

nlohmann::json ms_json(const Timing& t) {
  const auto [lo, hi] = median_interval(t.kept_ms);
  return {{"median", t.summary.median}, {"ci95_lo", lo}, {"ci95_hi", hi}, {"min", t.summary.min}, {"max", t.summary.max}};
}

// What a tier's name says: q4 (not "f32..."), fast (a candidate or its twin, "...-fast...").
struct TierKind {
  bool q4, fast;
};
TierKind kind_of(const std::string& tier) { return {tier.rfind("f32", 0) != 0, tier.find("-fast") != std::string::npos}; }

// One layer's weights at g, their q4 form and the token, generated once for a stack of up to `layers` layers (each
// layer gets its own device copy); klab::Error, naming `experiment`, for a geometry the stack or the q4 tier refuses.
struct StackInputs {
  rg::LayerWeights w;
  rg::Q4Projections q;
  std::vector<float> h;
};
StackInputs stack_inputs(Context& ctx, const Geometry& g, int layers, const std::string& experiment) {
  if (auto why = GdnDevice::can_implement(g, layers); !why.empty()) throw Error(experiment + ": " + why);
  if (auto why = rg::q4_geometry_error(g); !why.empty()) throw Error(experiment + ": no q4 tier at " + g.str() + ": " + why);
  ctx.log(experiment + ": generating one layer's weights at " + g.str());
  StackInputs in{rg::random_weights(g, ctx.options().seed), {}, make_inputs(g, 1, ctx.options().seed)};
  in.q = rg::quantize_projections(in.w);
  return in;
}

// The graph-vs-sequential check in words (gdn-stack's graph-bitwise evidence).
std::string check_text(const std::string& tier, const StackCheck& c) {
  return tier + fmt(": %g of %g elements (out, every layer's S and hist) differ", double(c.out_differ + c.S_differ + c.hist_differ), double(c.compared));
}

struct TierResult {
  std::vector<double> kept_ms;  // graph launches, ms per token
  double median = 0;
};

// Tiers: "f32", "q4" (the device's defaults), "f32-fast" (gdn::step_f32_candidate()), "q4-fast" (the
// q4 tier on gdn::step_candidate()) and the twins' (twin_tiers(), stack_config).
// One tier's stack of nl layers: loaded, checked against the sequential enqueue (check_stack captures the
// graph), then timed if the check holds; its record (kind `kind`) added either way. nullopt, with a skip,
// when the tier's configuration is refused at w's geometry or the stack does not fit the free memory.
struct TierRun {
  StackCheck check;
  bool timed = false;
  Timing graph;           // the graph, one launch a repetition (timed only)
  double bytes = 0, gbps = 0, ceiling = 0;
  int kernel_nodes = 0;
  std::string what;       // fast tiers: the layer's kernels (projections, recurrence, b|a, prep, chain)
};
std::optional<TierRun> measure_tier(Context& ctx, const std::string& tier, const rg::LayerWeights& w, const rg::Q4Projections& q,
                                    const std::vector<float>& h, int nl, const char* kind) {
  const Geometry& g = w.g;
  const auto [q4, fast] = kind_of(tier);
  const gdn::FusedStepConfig cfg = fast ? stack_config(tier) : gdn::FusedStepConfig{};
  if (fast)
    if (auto why = gdn::config_error(cfg, g); !why.empty()) {
      ctx.skip("gdn-stack " + tier + " at " + g.str(), why);
      return std::nullopt;
    }
  const StackNeed need = stack_need(w, q4 ? &q : nullptr, nl);
  std::size_t free_b = 0, total_b = 0;
  KLAB_CUDA(cudaMemGetInfo(&free_b, &total_b));
  if (auto why = stack_fit_error(need, std::int64_t(free_b), tier, g.str()); !why.empty()) {
    ctx.skip("gdn-stack " + tier, why);
    return std::nullopt;
  }
  ctx.log("gdn-stack " + tier + ": " + std::to_string(nl) + " layers at " + g.str() + fmt(", %.2f GB of device memory (%.1f GB free)", double(need.total()) / 1e9, double(free_b) / 1e9));
  GdnDevice dev(g, nl);
  if (fast && !q4) dev.set_f32_variant(gdn::f32_kernel_of(cfg));  // before the load: the projections keep it
  if (q4) load_stack_q4(dev, w, q);
  else load_stack_f32(dev, w);
  if (fast) gdn::apply(cfg, dev);
  GdnStack stack(dev, ctx.timer().stream());
  stack.set_input(h);
  TierRun run;
  run.check = check_stack(dev, stack);  // captures the graph
  const StackCheck& c = run.check;
  run.kernel_nodes = stack.kernel_nodes();
  if (fast)
    run.what = !q4 ? dev.describe(0) + ", " + dev.recurrence_variant()
                   : dev.q4_variant() + ", " + dev.recurrence_variant() + ", b|a " + dev.ba_variant() + ", fused prep" + (dev.pdl_chain() ? ", PDL chain" : "");
  auto rec = ctx.record(kind);
  rec["tier"] = tier;
  rec["layers"] = nl;
  rec["geometry"] = to_json(g);
  rec["projections"] = dev.describe(0);
  rec["recurrence"] = dev.recurrence_variant();
  rec["fused_prep"] = dev.fused_prep();
  rec["out_prepared"] = dev.norm_q8();
  rec["graph_nodes"] = stack.nodes();
  rec["kernel_nodes"] = stack.kernel_nodes();
  rec["copy_nodes"] = stack.copy_nodes();
  rec["bitwise"] = {{"out_differ", c.out_differ}, {"S_differ", c.S_differ}, {"hist_differ", c.hist_differ}, {"compared", c.compared}};
  rec["out_finite"] = c.finite;
  rec["out_max_abs"] = c.out_max_abs;
  rec["max_abs_by_layer"] = c.max_abs_by_layer;
  rec["device_bytes_needed"] = need.total();
  rec["device_bytes_free"] = std::int64_t(free_b);
  if (!c.bitwise()) {
    rec["timed"] = false;
    rec["not_timed_why"] = "the graph differs from the sequential enqueue: " + check_text(tier, c);
    ctx.add(std::move(rec));
    return run;
  }
  // Cold by size, not by flushing: say how many times the L2 the weights are.
  TimingOptions opt = ctx.options().timing();
  opt.l2_cold = false;
  Timer& timer = ctx.timer();
  auto graph = timer.launch_subject([&](cudaStream_t) { stack.launch(); });
  auto seq = timer.launch_subject([&](cudaStream_t) { stack.enqueue(); });
  const auto t = timer.time_interleaved({graph.get(), seq.get()}, opt);
  run.timed = true;
  run.graph = t[0];
  run.bytes = nl * gdn::step_bytes(g, q4);  // the gdn_step op's traffic model, per layer and token
  const double med = t[0].summary.median;
  run.gbps = run.bytes / (med * 1e-3) / 1e9;
  run.ceiling = ctx.ceiling().read_gbps;
  const double weights = double(nl) * double(need.weights), l2 = double(ctx.device().l2_bytes);
  rec["timed"] = true;
  rec["ms_per_token"] = ms_json(t[0]);
  rec["timing"] = to_json(t[0]);
  rec["sequential_ms_per_token"] = ms_json(t[1]);
  rec["graph_vs_sequential"] = to_json(compare_times(t[1].kept_ms, t[0].kept_ms));
  rec["bytes_per_token"] = run.bytes;
  rec["gbps"] = run.gbps;
  rec["ceiling_gbps"] = run.ceiling;
  rec["floor_ms"] = run.bytes / (run.ceiling * 1e9) * 1e3;
  rec["pct_floor"] = 100.0 * run.gbps / run.ceiling;
  rec["cold"] = {{"flush", "none"}, {"weights_bytes", weights}, {"l2_bytes", l2}, {"weights_over_l2", l2 > 0 ? weights / l2 : 0.0},
                 {"how", "cold by size: every layer's weights are its own, read once per token; no flush between repetitions"}};
  rec["state"] = "carried over between repetitions (one token after another, the same input)";
  ctx.add(std::move(rec));
  ctx.log("gdn-stack " + tier + fmt(": %.4f ms per token as one graph (%.4f ms enqueued), %.0f GB/s, %.1f%% of the byte floor", med, t[1].summary.median, run.gbps,
                                    100.0 * run.gbps / run.ceiling));
  return run;
}

// measure_tier at nl layers, then gdn-stack's claims on it: the graph's bits and the output's range per tier,
// and at the full 48 layers the tier's goal (its own claim, or none for a twin: run_stack settles those).
void run_tier(Context& ctx, const std::string& tier, const rg::LayerWeights& w, const rg::Q4Projections& q, const std::vector<float>& h, int nl,
              std::map<std::string, TierResult>& out) {
  const auto run = measure_tier(ctx, tier, w, q, h, nl, "gdn_stack");
  if (!run) return;
  const StackCheck& c = run->check;
  ctx.claim(kBitwise).settle(tier, c.bitwise(), check_text(tier, c));
  const double least = c.max_abs_by_layer.empty() ? 0.0 : *std::min_element(c.max_abs_by_layer.begin(), c.max_abs_by_layer.end());
  ctx.claim(kFinite).settle(tier, c.finite && least > 0,
                            tier + (c.finite ? fmt(": finite, max |value| %.4g (last layer), the smallest layer's max |value| %.4g", c.out_max_abs, least)
                                             : std::string(": the output OVERFLOWED (NaN or Inf) after one token")));
  if (!run->timed) return;
  const double med = run->graph.summary.median;
  out[tier] = TierResult{run->graph.kept_ms, med};
  const bool full = !ctx.options().quick && nl == kLayers;
  if (!full) return;
  const auto [q4, fast] = kind_of(tier);
  const auto [lo, hi] = median_interval(run->graph.kept_ms);
  const double pct = 100.0 * run->gbps / run->ceiling;
  const std::string ev = tier + fmt(": %.4f ms per token (95%% CI %.4f..%.4f), ", med, lo, hi) +
                         fmt("%.4g GB per token, %.0f GB/s = %.1f%% of the byte floor", run->bytes / 1e9, run->gbps, pct) +
                         fmt(" (read ceiling %.0f GB/s); %g kernel nodes", run->ceiling, double(run->kernel_nodes));
  if (!is_goal_tier(tier)) return;  // a twin: in its twin's claim only
  if (fast && !q4) ctx.claim(kF32FastFloor).settle(kFullKey, pct >= 85.0, ev + "; " + run->what);
  else if (fast) ctx.claim(kFastMs).settle(kFullKey, med <= 1.0, ev + "; " + run->what);
  else if (q4) ctx.claim(kQ4Ms).settle(kFullKey, med <= 1.0, ev);
  else ctx.claim(kF32Floor).settle(kFullKey, pct >= 85.0, ev);
}

void run_stack(Context& ctx) {
  const Geometry g = geometry_for(ctx);
  const int nl = ctx.options().quick ? kQuickLayers : kLayers;
  const std::vector<std::string> tiers = stack_tiers();
  for (const Claim* c : {&kQ4Ms, &kF32Floor, &kQ4Faster, &kFastMs, &kF32FastFloor, &kF32FastFaster}) ctx.claim(*c).needs({kFullKey});
  for (const auto& t : twin_tiers()) ctx.claim(*t.claim).needs({kFullKey});
  ctx.claim(kBitwise).needs(tiers);
  ctx.claim(kFinite).needs(tiers);
  const StackInputs in = stack_inputs(ctx, g, nl, "gdn-stack");
  std::map<std::string, TierResult> res;
  for (const auto& tier : tiers) run_tier(ctx, tier, in.w, in.q, in.h, nl, res);
  for (const auto& t : twin_tiers()) {
    const auto [a, b] = race_of(t);
    if (ctx.options().quick || !res.count(a) || !res.count(b)) continue;
    const Comparison c = compare_times(res[a].kept_ms, res[b].kept_ms);
    ctx.claim(*t.claim).settle(kFullKey, c.verdict == Verdict::faster,
                               "per token as one graph: " + a + fmt(" %.4f ms, ", res[a].median) + b + fmt(" %.4f ms, ", res[b].median) + b + " " +
                                   speedup_text(c));
  }
  if (!ctx.options().quick && res.count("f32") && res.count("f32-fast")) {
    const Comparison c = compare_times(res["f32"].kept_ms, res["f32-fast"].kept_ms);
    ctx.claim(kF32FastFaster).settle(kFullKey, c.verdict == Verdict::faster,
                                     fmt("per token as one graph: f32 %.4f ms, f32-fast %.4f ms, f32-fast ", res["f32"].median, res["f32-fast"].median) +
                                         speedup_text(c));
  }
  if (ctx.options().quick || !res.count("f32") || !res.count("q4")) return;
  const Comparison cmp = compare_times(res["f32"].kept_ms, res["q4"].kept_ms);
  ctx.claim(kQ4Faster).settle(kFullKey, cmp.verdict == Verdict::faster,
                              fmt("per token as one graph: f32 %.4f ms, q4 %.4f ms, q4 ", res["f32"].median, res["q4"].median) + speedup_text(cmp));
}

// ---- gdn-stack-layers: the graph's time against its layer count ----
// Why (2026-12-06, ninth session, written before a run): the 48-layer graph costs more per layer than the step does in
// stream mode, 1.3169 ms / 48 = 27.4 us against 25.30 us for the candidate on the H200 (reports/h200/run-pace) and
// 1.5526 ms / 48 = 32.3 us against 28.5 us for q4-fast-pace on an H100 (reports/h100/run-gdn-pace-late). Either the graph
// has a fixed part (its launch between the events, its first layer with no predecessor to overlap), or its cost per layer
// grows with the layers' footprint (3.4 GB of weights at 48 layers against a few copies of one layer in stream mode:
// TLB reach) or differs from the step's in stream mode as such. The graph of the two q4 candidates is timed at 4, 8, 16,
// 32 and 48 layers (every layer its own weights, cold by size from 4 layers: ~280 MB) and a line fitted (fit_line): its
// slope is the graph's cost per layer, its intercept the fixed part, and the residuals say whether the cost per layer
// is constant. --quick: 1, 2 and 4 layers at the small geometry on the q4 tier (the device's defaults: the candidates
// refuse that geometry's dv = 48), no claim settled.
// Measured (H100, reports/h100/run-stack-layers, 2026-12-06): 33.43 and 33.11 us a layer, fixed parts -1.0 and -3.0 us
// (fixed-part-small held); 33.0-33.7 us a layer from 8 layers on, 4 layers 2-4% under the line (their state fits the
// L2), so linear-in-layers is not held by the smallest count. No fixed part, no footprint cost: the step's stream time
// (T = 16 tokens through one layer, its state L2-resident) is what sits under the graph's, by 2-5 us a layer.
// With pace_out1 (H100, reports/h100/run-out1, run-out1b, run-out1c, run-out1-l2): 29.98-31.81 us a layer against
// q4-fast-pace's 34.91-35.30 in the same runs.
constexpr int kSweepLayers[] = {4, 8, 16, 32, 48};
constexpr int kQuickSweepLayers[] = {1, 2, 4};
// The span (q4-fast-pace-span2, -span1x2) was swept and traced once (H100, reports/h100/run-span, 2026-12-06: 37.8 and
// 38.9 us a layer against pace_out1's 31.5) and left out after. On the H200 (reports/h200/run-call48, traced): fold (the
// candidate then) 28.62, pace_all 28.00, pace_out1 27.22 us a layer, fixed parts -14..-17.5 us (fixed-part-small held),
// residuals up to 5.8-8.2% (linear-in-layers not held: the 4-layer points sit over the line). Since: fold, pace_out1 and
// the candidate (pace_out1_split).
const char* const kSweepTiers[] = {"q4-fast-fold", "q4-fast-pace-out1", "q4-fast"};
const char* const kQuickSweepTiers[] = {"q4"};
const Claim kSweepBitwise{"graph-bitwise",
                          "at every layer count, one token through the layers as one CUDA graph gives the output and every layer's S and conv "
                          "history of the same layers enqueued one after another, bit for bit"};
const Claim kLinear{"linear-in-layers",
                    "the graph's time per token is linear in its layer count: each count's time within 2% of the least-squares line over 4..48 "
                    "layers (q4-fast-fold, q4-fast-pace-out1 and q4-fast), so its cost per layer does not grow with the layers' footprint"};
const Claim kFixedSmall{"fixed-part-small",
                        "the graph's fixed part (the line's intercept) is at most 5% of its time at 48 layers (q4-fast-fold, q4-fast-pace-out1 "
                        "and q4-fast): what "
                        "the 48-layer graph costs over 48 steps is a cost per layer"};

void run_stack_layers(Context& ctx) {
  const Geometry g = geometry_for(ctx);
  const bool quick = ctx.options().quick;
  const std::vector<int> counts = quick ? std::vector<int>(std::begin(kQuickSweepLayers), std::end(kQuickSweepLayers))
                                        : std::vector<int>(std::begin(kSweepLayers), std::end(kSweepLayers));
  const std::vector<const char*> tiers = quick ? std::vector<const char*>(std::begin(kQuickSweepTiers), std::end(kQuickSweepTiers))
                                                : std::vector<const char*>(std::begin(kSweepTiers), std::end(kSweepTiers));
  auto key_of = [](const char* tier, int nl) { return std::string(tier) + ",layers=" + std::to_string(nl); };
  std::vector<std::string> keys;
  for (const char* tier : tiers)
    for (int nl : counts) keys.push_back(key_of(tier, nl));
  ctx.claim(kSweepBitwise).needs(keys);
  if (!quick)
    for (const Claim* c : {&kLinear, &kFixedSmall}) ctx.claim(*c).needs(std::vector<std::string>(std::begin(kSweepTiers), std::end(kSweepTiers)));
  const StackInputs in = stack_inputs(ctx, g, counts.back(), "gdn-stack-layers");
  for (const char* tier : tiers) {
    std::vector<double> xs, ms;
    for (int nl : counts) {
      const auto run = measure_tier(ctx, tier, in.w, in.q, in.h, nl, "gdn_stack_layers");
      if (!run) continue;
      const std::string key = key_of(tier, nl);
      ctx.claim(kSweepBitwise).settle(key, run->check.bitwise(), check_text(key, run->check));
      if (!run->timed) continue;
      xs.push_back(double(nl));
      ms.push_back(run->graph.summary.median);
    }
    if (xs.size() != counts.size()) {
      ctx.log(std::string("gdn-stack-layers ") + tier + ": not every layer count was timed; no line fitted");
      continue;
    }
    const LineFit f = fit_line(xs, ms);
    const double at_most = ms.back(), per_layer_at_most = 1e3 * at_most / xs.back();
    auto rec = ctx.record("gdn_stack_layers_fit");
    rec["tier"] = tier;
    rec["layers"] = xs;
    rec["ms_per_token"] = ms;
    rec["fixed_us"] = 1e3 * f.a;
    rec["us_per_layer"] = 1e3 * f.b;
    rec["max_rel_residual"] = f.max_rel_residual;
    rec["us_per_layer_at_most"] = per_layer_at_most;
    ctx.add(std::move(rec));
    std::string points;
    for (std::size_t i = 0; i < xs.size(); ++i) points += (i ? ", " : "") + fmt("%g layers %.4f ms", xs[i], ms[i]);
    const std::string ev = std::string(tier) + ": " + points + fmt("; the line: %.2f us a layer and %.1f us fixed, the largest residual %.2f%%; ", 1e3 * f.b, 1e3 * f.a,
                                                                   100.0 * f.max_rel_residual) +
                           fmt("%.2f us a layer at %g layers", per_layer_at_most, xs.back());
    ctx.log("gdn-stack-layers " + ev);
    if (quick) continue;
    ctx.claim(kLinear).settle(tier, f.max_rel_residual <= 0.02, ev);
    ctx.claim(kFixedSmall).settle(tier, f.a <= 0.05 * at_most, ev);
  }
}

}  // namespace

std::vector<std::string> stack_tiers() {
  std::vector<std::string> tiers{"f32", "f32-fast", "q4", "q4-fast"};
  for (const auto& t : twin_tiers())
    if (!is_goal_tier(t.tier)) tiers.push_back(t.tier);  // q4-fast is a row too (out1-split-in-graph), timed once
  return tiers;
}

std::vector<StackRace> stack_races() {
  std::vector<StackRace> v;
  for (const auto& t : twin_tiers()) {
    const auto [a, b] = race_of(t);
    v.push_back({a, b, t.claim->id});
  }
  return v;
}

// The configuration of a fast tier: a twin's (q4-fast's row included), f32-fast's, else the candidate's (q4-fast).
gdn::FusedStepConfig stack_config(const std::string& fast_tier) {
  if (const TwinTier* t = twin_tier(fast_tier)) return t->config();
  return fast_tier == "f32-fast" ? gdn::step_f32_candidate() : gdn::step_candidate();
}

void register_gdn_stack(Registry& r) {
  r.add(Experiment{
      .name = "gdn-stack",
      .description = "GDN: a token through 48 layers (Qwen3.5-27B) as one CUDA graph, f32 and q4 tiers: bitwise vs sequential, ms per token, % of the byte floor",
      .claims = {kBitwise, kFinite, kQ4Ms, kF32Floor, kF32FastFloor, kF32FastFaster, kF32U8InGraph, kF32FoldInGraph, kF32QkvzInGraph, kF32PdlInGraph, kQ4Faster, kFastMs, kRingInGraph, kPreparedInGraph, kWarpsInGraph, kFoldInGraph, kCandidateInGraph, kRecNormInGraph, kFoldMainInGraph, kPfInGraph,
                 kPfEarlyInGraph, kForkInGraph, kF32ForkInGraph, kNormLastInGraph, kF32NormLastInGraph, kConvRecInGraph, kF32ConvRecInGraph, kFourInGraph, kF32FourInGraph, kRows16InGraph, kWarpInGraph, kFoldMainWarpInGraph,
                 kOutSmemInGraph, kFoldRingInGraph, kFoldDepthInGraph, kDepthAllInGraph, kFoldPaceInGraph, kPaceAllInGraph, kPaceIlpInGraph, kPaceLateInGraph,
                 kPaceDeferInGraph, kBaConvInGraph, kOut1InGraph, kOut1S4InGraph, kOut1BaInGraph,
                 kOut1LateInGraph, kOut1DeferInGraph, kOut1L2InGraph, kOut1IlpInGraph, kOut1SplitInGraph, kSplitX2InGraph, kOwn4InGraph, kOwn8InGraph, kKcOutInGraph, kSpan2InGraph, kSpan3InGraph, kSpan1x2InGraph, kSpan2x2InGraph},
      .run = run_stack,
  });
  r.add(Experiment{
      .name = "gdn-stack-layers",
      .description = "GDN: the one-graph token's time against its layer count (4..48 layers, q4-fast-fold, q4-fast-pace-out1 and q4-fast): its cost per layer (a "
                     "line's slope) against its fixed part, and whether the cost per layer grows with the layers",
      .claims = {kSweepBitwise, kLinear, kFixedSmall},
      .run = run_stack_layers,
  });
}

}  // namespace klab::experiments
