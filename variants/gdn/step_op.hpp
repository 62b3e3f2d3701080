#pragma once
// The op gdn_step: one GDN layer over T tokens from a zero state (seed-digest.md section 2), as a
// registry op, so the f32 and q4 tiers race through race() like every mat-vec: poisoned outputs,
// the f64 reference, bits against A, both timing modes.
//
// Parameters (Op::params): the geometry (hidden, nk, nv, dk, dv, ck; defaults Qwen3.5-27B's), tokens
// (T) per run, and weights: 0 = the seeded f32 weights, 1 = those weights with the three big
// projections quantised to q4 and dequantised back (the q4 tier's weights). With weights=1 the f32
// tier (reading the dequantised values) and the q4 tier (reading the codes) compute the same
// function, so both meet the same reference.
//
// Named outputs: "out" (T, hidden) the layer output of every token, "S" (nv, dk, dv) and "hist"
// (ck-1, conv_dim) the state after the last token, and the last token's intermediates "q", "k"
// (nk*dk, normalised), "beta", "g" (nv), "onn" (nv*dv).
//
// Bytes (Traffic, per run of T tokens): per token the big three (4 bytes per weight, or 0.5625 with
// weights=1: codes and f16 scales), the small f32 weights, and S and the conv history read and
// written once; the same model the GDN experiments quote.
#include <string>
#include <vector>

#include "gdn/gdn_kernels.hpp"
#include "klab/ref/gdn.hpp"
#include "klab/ref/gdn_q4.hpp"
#include "klab/registry.hpp"

namespace klab::gdn {
class GdnDevice;
}

namespace klab::gdn {

struct StepWorkload : klab::Workload {
  ref::gdn::LayerWeights w;  // with weights=1: the big three dequant(q4(w))
  ref::gdn::Q4Projections q;  // with weights=1: q4(w)'s codes and scales, quantised once for every instance
  std::vector<float> h;      // (T, hidden)
  int T = 0;
  bool q4 = false;
  std::uint64_t digest() const override;
};

ref::gdn::Geometry step_geometry(const Problem& p);
// Bytes a perfect step moves for one token of geometry g (q4: the big three as codes and scales).
double step_bytes(const ref::gdn::Geometry& g, bool q4);
Op make_step_op();
const StepWorkload& step_workload_of(const klab::Workload& w);

// Registers gdn_step and its variants: tier=f32, tier=q4 with every raw q4_gemv kernel
// (proj=<its axes, ',' as '+'>), and the host APIs (launch mode only): tier=q4,api=host,
// tier=f32,api=host (T host-facing steps) and tier=f32,api=run (GdnDevice::run).
void register_all(Registry& r);
// The gdn_step variant that runs the q4 tier on `q4_variant` (a q4_gemv variant name).
std::string q4_step_variant(const std::string& q4_variant);

// The gdn_step variants with prep=fused (GdnDevice::set_fused_prep): the f32 tier (f32), or the q4
// tier on q4_kernel; recurrence: a gdn_recurrence variant name, "" for the device's default; ba: the
// b|a projection's f32_gemv kernel, "" for the device's default; chain: GdnDevice::set_pdl_chain;
// merged_in: GdnDevice::set_merged_in (in_proj_qkv and in_proj_z as one q4 launch; axis in=qkvz).
struct FusedStepConfig {
  bool f32 = false;
  std::string q4_kernel = "";
  std::string recurrence = "";
  std::string ba = "";
  bool chain = false;
  bool merged_in = false;
  std::string stacked_kernel = "";  // with merged_in: GdnDevice::set_stacked_q4_variant ("": the q4 kernel; axis in_proj)
  bool norm_q8 = false;             // GdnDevice::set_norm_q8: the gated norm writes out_proj's q8 x (axis out=prepared)
  bool fold_ba = false;             // GdnDevice::set_fold_ba: b|a in the stacked launch's prep kernel (axis fold=ba)
  bool fold_ba_main = false;        // GdnDevice::set_fold_ba_main: b|a in the stacked kernel's grid (axis fold=ba-main)
  // GdnDevice::set_l2_prefetch: conv_norm_bg prefetches out_proj's weights into L2 (axis pf=out, after its
  // blocks' work; pf=out-early, before their wait)
  kernels::L2Prefetch l2_prefetch = kernels::L2Prefetch::none;
  std::string f32_kernel = "";  // with f32: GdnDevice::set_f32_variant for the big three ("": kDefaultF32Variant; axis proj=)
  bool fork_z = false;          // GdnDevice::set_fork_z: in_proj_z on a branch of its own beside conv_norm_bg and the recurrence (axis fork=z)
  bool fold_ba_conv = false;    // GdnDevice::set_fold_ba_conv: b|a in the conv_norm_bg launch (axis fold=ba-conv)
  int span = 0;                 // GdnDevice::set_span: out_proj and the next step's input side as one launch at this pace (axis span=P)
  int span_per_sm = 1;          // its blocks an SM (axis span=PxB where 2)
};
// The f32_gemv kernel of c's big three on the f32 tier: c.f32_kernel, or kDefaultF32Variant where empty.
std::string f32_kernel_of(const FusedStepConfig& c);
std::vector<FusedStepConfig> fused_step_configs();
// The q4 kernel of one of them for its stacked launch (FusedStepConfig::stacked_kernel): the TMA ring.
inline constexpr const char* kStackedRing = "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,load=bulk,pdl=on,rows=8";
// The ring filling at most 2 of its stages a block (q4_gemv's depth=2: fewer bytes in flight, the ring's bits).
inline constexpr const char* kRingDepth2 = "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,load=bulk,depth=2,pdl=on,rows=8";
// The ring fed by a producer warp, one stage request in flight a block (q4_gemv's pace=1: the ring's bits).
inline constexpr const char* kPace1 = "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,load=bulk,pace=1,pdl=on,rows=8";
// kPace1 with its consumers taking up to 3 full stages a step (q4_gemv's ilp=3: the groups' dot chains interleaved, the
// ring's bits). The step runs its main kernel alone (launch_prepared), so its prep form (xprep=warps) does not enter.
inline constexpr const char* kPace1Ilp3 = "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=warps,load=bulk,pace=1,ilp=3,pdl=on,rows=8";
// kPace1 with two requests in flight a block once its consumers pass their wait (q4_gemv's pace=1-2, rows=8: the ring's
// bits); its main kernel alone, as kPace1Ilp3's.
inline constexpr const char* kPace1Late = "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=warps,load=bulk,pace=1-2,pdl=on,rows=8";
// The paced ring on groups of 4 rows with the warps' sums of 4 groups after one barrier (q4_gemv's rung 96, defer=4,
// rows=4: the ring's bits; tiles-r4, so beside a rows=8 stacked kernel the stacked copy is packed in the stacked
// kernel's own layout); its main kernel alone, as kPace1Ilp3's.
inline constexpr const char* kPace1Defer4R4 = "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=warps,load=bulk,pace=1,defer=4,pdl=on,rows=4";
// kPace1's kernel on a grid of one block an SM (q4_gemv's per-sm=1, rung 98: the ring's bits), so that the next
// layer's stacked launch places one block an SM beside out_proj's and fills its ring before out_proj ends; its main
// kernel alone, as kPace1Ilp3's.
inline constexpr const char* kPace1PerSm1 = "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=warps,load=bulk,pace=1,per-sm=1,pdl=on,rows=8";
// kPace1PerSm1 with a ring of 4 stages (q4_gemv's stages=4, rung 99): at out_proj's k = 6144 110 KB a block, not 83.
inline constexpr const char* kPace1PerSm1S4 = "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=warps,load=bulk,pace=1,per-sm=1,stages=4,pdl=on,rows=8";
// kPace1PerSm1 with two requests in flight a block after the release (pace=1-2, rung 100), and defer=4 at rows=4 on one
// block an SM (rung 101; tiles-r4, so the stacked copy in kPace1's own layout).
inline constexpr const char* kPace1LatePerSm1 = "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=warps,load=bulk,pace=1-2,per-sm=1,pdl=on,rows=8";
inline constexpr const char* kPace1Defer4R4PerSm1 = "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=warps,load=bulk,pace=1,defer=4,per-sm=1,pdl=on,rows=4";
// kPace1PerSm1 whose producer asks the L2 for the block's groups past its ring before the release (rest=l2, rung 102).
inline constexpr const char* kPace1PerSm1L2 = "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=warps,load=bulk,pace=1,per-sm=1,rest=l2,pdl=on,rows=8";
// kPace1PerSm1 taking up to 3 stages a step (ilp=3, rung 103) and with each group's rows over two threads (row-split=2, rung 104:
// out_proj's kernel in step_candidate() since 2026-12-06; H200, reports/h200/run-call48: 57.4% of the read ceiling alone at
// 5120x6144 against rung 98's 56.1%, and x1.039 per layer, x1.019 in the 48-layer graph over kPace1PerSm1 as out_proj).
inline constexpr const char* kPace1Ilp3PerSm1 = "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=warps,load=bulk,pace=1,ilp=3,per-sm=1,pdl=on,rows=8";
inline constexpr const char* kPace1SplitPerSm1 = "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=warps,load=bulk,pace=1,row-split=2,per-sm=1,pdl=on,rows=8";
// kPace1SplitPerSm1's kernel on two blocks an SM of 2 stages each (per-sm=2,stages=2, rung 108): twice its consumer warps,
// a stacked kPace1 block still beside them (out_proj's twin pace_split_x2).
inline constexpr const char* kPace1SplitPerSm2S2 =
    "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=warps,load=bulk,pace=1,row-split=2,per-sm=2,stages=2,pdl=on,rows=8";
// q4_gemv's grid=own at rows=8 (rungs 111, 112): each warp of one block an SM owns its groups and a stage, no barrier a
// group; owners=4 leaves room for a stacked kPace1 block beside it (120 KB at k = 6144), owners=8 (7 warps at k = 6144,
// 203 KB) does not, and holds all of out_proj's groups at once (640 over 132 x 7 warps). out_proj's twins own_out4, own_out8.
inline constexpr const char* kOwn4 = "q4_gemv/map=packed,dot=q8-dp4a,grid=own,xprep=warps,load=bulk,owners=4,pdl=on,rows=8";
inline constexpr const char* kOwn8 = "q4_gemv/map=packed,dot=q8-dp4a,grid=own,xprep=warps,load=bulk,owners=8,pdl=on,rows=8";
// q4_gemv's grid=split-k at rows=8 on one block an SM's worth of clusters (rung 116): clusters of 6 blocks at k = 6144, each
// block one chunk of k of its cluster's groups; on prepared x it reads its chunk's words of g_xq. out_proj's twin kc_out.
inline constexpr const char* kSplitK1 =
    "q4_gemv/map=packed,dot=q8-dp4a,grid=split-k,xprep=chunk,load=bulk,owners=8,stages=2,per-sm=1,pdl=on,rows=8";
// The candidate's q4 kernel without the prep kernel (x quantised per cluster of 8 blocks): the same
// layout and bits as the candidate's grid=groups,xprep=launch kernel.
inline constexpr const char* kClusterQ4 = "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=cluster,pdl=on,rows=8";
// The candidate's q4 kernel (its prep kernel a warp per block of 32), and the same with the prep a
// thread per block (xprep=launch): the same layout, main kernel and bits.
inline constexpr const char* kWarpsQ4 = "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=warps,pdl=on,rows=8";
// kWarpsQ4 with 16 rows a thread block: the same bits (each row's warp totals summed in warp order).
// Why (kernel traces, reports/h200/run-4cb578e, 2026-12-02): in the 48-layer graph the candidate's
// in_prep_ba ends 5.3 us after out_proj ends, where out_proj itself ends 2.6 us after the gated norm:
// out_proj's 640 blocks of 160 threads (64 registers) fill the SMs, so the next kernel's blocks find no
// room until they leave. With 16 rows, out_proj is 320 blocks and the stacked launch 1030.
// Measured (reports/h200/run-e308630, run-e75fb18, 2026-12-02): in_prep_ba then ends 1.9 us after out_proj, but the
// rows=16 kernels are far slower themselves: 1.7832 against 1.2920 ms per token (x0.725). A negative result.
// kWarpsQ4 with the prep kernel's blocks one warp each (xprep=warp): the same bits; its blocks fit
// beside a main kernel that fills the SMs (packed.cu, xprep_warps_kernel). In the 48-layer graph
// (reports/h200/run-e75fb18): the base on it x0.984, fold_main on it x0.972 (x1.024 in that commit's slice run:
// the pair differs by 2-3% between machines). Kept as twins.
inline constexpr const char* kWarpQ4 = "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=warp,pdl=on,rows=8";
inline constexpr const char* kWarpsQ4Rows16 = "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=warps,pdl=on,rows=16";
// A block per group with its weights in shared memory by one TMA copy (q4-to-ceiling's rung 50): 43 registers
// and 28 KB a block at k = 6144, so out_proj's 640 blocks (five an SM) leave room for the next kernel's.
inline constexpr const char* kSmemGroupsQ4 = "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=launch,load=bulk,pdl=on,rows=8";
// The recurrence with a head in one block, the gated norm and onn's q8 form as its epilogue.
inline constexpr const char* kRecNormQ8 = "gdn_recurrence/impl=fused,cols=128,rows=8,pdl=early,norm=gated";
// The candidates' recurrence with the gated norm (and onn's q8 form) run by the last of a head's column blocks.
inline constexpr const char* kRecNormLast = "gdn_recurrence/impl=fused,cols=32,rows=8,pdl=early,norm=last";
// The candidates' recurrence forming q, k, v, beta and g itself from the raw projections (prep=conv): the
// conv_norm_bg launch goes (GdnDevice::conv_prep_error), its bits stay. Measured on the H200 (2026-12-04,
// reports/h200/run-prep-conv): the candidates' bits, slower (q4 x0.965 per layer, x0.972 in the graph). A twin.
inline constexpr const char* kRecConv = "gdn_recurrence/impl=fused,cols=32,rows=8,pdl=early,prep=conv";
// kRecConv with the conv history a ring it writes itself (hist=ring, gdn_recurrence/hist_ring.hpp), so that the
// gated norm shifts nothing; and the same with norm=last, so that the gated-norm launch goes too: in_prep_ba,
// the stacked input projections, this, out_proj: four launches a layer (issue 14's aim). Measured 2026-12-05 on an
// H100 (reports/h100/run-2c88263) and the H200 (reports/h200/run-f55aa56, stream): the candidates' bits; the ring
// x0.999 / x1.005 against kRecConv (free, no gain), four launches x0.940 per layer and x0.940 / x0.938 in the 48-layer
// graph (f32 x0.985): the gated norm in the last blocks costs more than the launch it saves, as norm=last before.
// Twins, kept as negative results.
inline constexpr const char* kRecConvRing = "gdn_recurrence/impl=fused,cols=32,rows=8,pdl=early,prep=conv,hist=ring";
inline constexpr const char* kRecFour = "gdn_recurrence/impl=fused,cols=32,rows=8,pdl=early,norm=last,prep=conv,hist=ring";
inline constexpr const char* kThreadPrepQ4 = "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=launch,pdl=on,rows=8";
// The last of them: the step's candidate toward issue 14's goals, since 2026-12-06 candidate_twins().pace_out1_split:
// q8-dp4a projections, in_proj_qkv and in_proj_z as one launch on the paced ring (kPace1) with b|a computed by its
// prep kernel (fold=ba), the fused prep, the fused recurrence cols=32,rows=8,pdl=early with the gated norm a launch of
// its own that writes out_proj's q8 x (out=prepared), out_proj on the paced ring at row-split=2 on one block an SM
// (kPace1SplitPerSm1), every small kernel in the PDL chain. The fastest q4 layer raced on the H200 (reports/h200/
// run-call48, 2026-12-06, stream): 23.1 us a layer, 1.1905 ms per token through 48 layers as one graph, x1.106 over
// the candidate before it (candidate_twins().fold, 1.3169 ms) and x1.019 over pace_out1 in the same run. gdn-stack,
// gdn-step-breakdown and gdn-batch (its base) run it; the ones before it are its twins (candidate_twins).
FusedStepConfig step_candidate();
// The candidate's twins. ba_own is fold (the candidate until 2026-12-06) with b|a a launch of its own (f32_gemv
// split-row,pdl=on, whose code fold=ba runs: the candidate's bits; the candidate before fold=ba-main).
// Every other twin differs from ba_own in one setting, so
// that its bitwise claim compares like with like (norm_gated and cluster also leave out_proj its own
// prep launch, which their kernels need): the claims of gdn-step-fused (norm-pays, chain-*, merged-*,
// ring-*, cluster-*, normq8-*, ...) and gdn-stack's twin tiers race them.
struct CandidateTwins {
  FusedStepConfig ba_own;      // b|a a launch of its own (no fold): the base of the twins below
  FusedStepConfig fold;        // ba_own with fold=ba (b|a in the stacked launch's prep): the candidate 2026-12-02..06, base of the fold twins
  FusedStepConfig norm_gated;  // the gated norm as the recurrence's epilogue (norm=gated)
  FusedStepConfig unchained;   // without the PDL chain
  FusedStepConfig apart;       // in_proj_qkv and in_proj_z as two launches
  FusedStepConfig ring;        // the stacked launch on kStackedRing
  FusedStepConfig cluster;     // every other q4 launch on kClusterQ4
  FusedStepConfig out_own;     // out_proj with its own prep launch (no out=prepared)
  FusedStepConfig thread_prep; // every q4 launch on kThreadPrepQ4 (the stacked launch's prep a thread per block of 32)
  FusedStepConfig fold_main;   // b|a's rows in the stacked kernel's grid (fold=ba-main: another f32 order for b|a; the candidate until 2026-12-02)
  FusedStepConfig rec_norm;    // the gated norm and out_proj's q8 x in the recurrence's epilogue (kRecNormQ8): one launch fewer
  // fold's own twins (fold, the candidate until 2026-12-06, with one setting more):
  FusedStepConfig pf_out;        // out_proj's weights prefetched into L2 by conv_norm_bg after its work (pf=out)
  FusedStepConfig pf_out_early;  // the same, issued before conv_norm_bg's wait (pf=out-early)
  FusedStepConfig fork_z;        // in_proj_z forked off the stacked launch, beside conv_norm_bg and the recurrence (fork=z)
  FusedStepConfig norm_last;     // the gated norm and out_proj's q8 x by the recurrence's last column block of each head (kRecNormLast): one launch fewer
  FusedStepConfig rows16;        // every q4 launch on kWarpsQ4Rows16 (16 rows a thread block: half the blocks, room beside them on the SMs)
  FusedStepConfig out_smem;      // out_proj on kSmemGroupsQ4, the stacked launch still on the candidate's kernel (in_proj=)
  // kWarpQ4 (the prep kernel's blocks one warp each): twins of the base and of fold_main, whose
  // stacked launch runs the q4 kernel's own prep (the candidate's runs in_prep_ba, out_proj none).
  FusedStepConfig warp1;         // ba_own on kWarpQ4
  FusedStepConfig fold_main_warp1;  // fold_main on kWarpQ4
  FusedStepConfig conv_rec;      // fold on kRecConv: conv, q/k norm and beta/g in the recurrence, five launches a layer
  FusedStepConfig conv_ring;     // fold on kRecConvRing: conv_rec with the history a ring (the gated norm shifts nothing)
  FusedStepConfig four;          // fold on kRecFour: conv_ring with the gated norm by the last blocks, four launches a layer
  FusedStepConfig fold_ring;     // fold with its stacked launch's main kernel the ring's (kStackedRing, on in_prep_ba's x)
  FusedStepConfig fold_depth;    // fold_ring on kRingDepth2 (the ring at depth=2)
  FusedStepConfig depth_all;     // fold with every q4 launch on kRingDepth2 (the stacked launch and out_proj, x prepared for both)
  FusedStepConfig fold_pace;     // fold_ring on kPace1 (the ring fed by a producer warp, pace=1)
  FusedStepConfig pace_all;      // fold with every q4 launch on kPace1 (the stacked launch and out_proj, x prepared for both)
  FusedStepConfig pace_ilp;      // pace_all with out_proj on kPace1Ilp3 (its stacked launch still on kPace1)
  FusedStepConfig pace_late;     // pace_all with both q4 launches on kPace1Late
  FusedStepConfig pace_defer;    // pace_all with out_proj on kPace1Defer4R4 (its stacked launch still on kPace1)
  FusedStepConfig pace_ba_conv;  // pace_all with b|a in the conv_norm_bg launch (fold=ba-conv, not fold=ba)
  FusedStepConfig pace_out1;     // pace_all with out_proj on kPace1PerSm1 (one block an SM; its stacked launch still on kPace1)
  FusedStepConfig pace_out1_s4;  // pace_out1 with out_proj on kPace1PerSm1S4 (its ring 4 stages)
  FusedStepConfig pace_out1_ba;  // pace_out1 with fold=ba-conv
  FusedStepConfig pace_out1_late;   // pace_out1 with out_proj on kPace1LatePerSm1 (two requests in flight after the release)
  FusedStepConfig pace_out1_defer;  // pace_out1 with out_proj on kPace1Defer4R4PerSm1 (defer=4, rows=4, one block an SM)
  FusedStepConfig pace_out1_l2;     // pace_out1 with out_proj on kPace1PerSm1L2 (its groups past the ring into L2 early)
  FusedStepConfig pace_out1_ilp;    // pace_out1 with out_proj on kPace1Ilp3PerSm1
  FusedStepConfig pace_out1_split;  // pace_out1 with out_proj on kPace1SplitPerSm1 (step_candidate() since 2026-12-06)
  FusedStepConfig pace_split_x2;    // the candidate with out_proj on kPace1SplitPerSm2S2 (two blocks an SM of 2 stages each)
  FusedStepConfig own_out4;         // the candidate with out_proj on kOwn4 (grid=own: each warp its groups and a stage)
  FusedStepConfig own_out8;         // the candidate with out_proj on kOwn8
  FusedStepConfig kc_out;           // the candidate with out_proj on kSplitK1 (grid=split-k: clusters over k)
  FusedStepConfig pace_span2;       // pace_out1 with the span at pace 2 (GdnDevice::set_span: out_proj and the next step's input side one launch)
  FusedStepConfig pace_span3;       // the same at pace 3
  FusedStepConfig pace_span1x2;     // the span at pace 1 on two blocks an SM (each half the ring: twice the consumer warps)
  FusedStepConfig pace_span2x2;     // the same at pace 2
};
CandidateTwins candidate_twins();
// The f32 tier's candidate toward issue 14's f32 goal (85% of its byte floor): its big three on
// f32_gemv/impl=warp-row,unroll=4,pdl=on (four 16-byte loads in flight a lane, 94% of the read
// ceiling at 17408x5120 in f32-gemv-vs-cublas; with pdl=on the first loads of W before the wait),
// in_proj_qkv and in_proj_z as one stacked launch with b|a's rows riding along (in=qkvz,
// fold=ba-main: F32Kernel::launch_stacked), and the q4 candidate's small kernels (the fused prep,
// the recurrence cols=32,rows=8,pdl=early, the PDL chain). gdn-stack's f32-fast tier and
// gdn-step-fused race it. Measured on the H200 (2026-12-02, gdn-stack, 48 layers as one graph, the
// f32 tier on its defaults 7.50..7.54 ms per token, 64.4..65.6% of the byte floor):
// - the big three on warp-row,unroll=4 with these small kernels (b|a on split-row,pdl=on): 6.1053
//   ms, 80.9% (reports/h200/run-e77f998); with pdl=on 5.9618 ms, 82.9% (x1.025, run-e73ba77);
// - with in=qkvz as a pair launch 5.7266 ms, 84.3% (x1.025 over 5.8712 apart, run-311735f);
// - with b|a's rows in it too 5.7034 ms, 84.7% (x1.003 over 5.7217 without: same, run-aa70846),
//   5.7087 ms, 84.6% in run-90c5f7b; there its twin on warp-row,unroll=8,pdl=on took 5.7531 ms
//   (x0.992: eight loads a lane do not pay; kept as the twin u8);
// - with gdn-stack's 48 copy nodes gone from its graph (commit 0e18347): 5.6136 and 5.6139 ms, 86.1%
//   (reports/h200/run-0e18347, run-f64919d): issue 14's 85% reached.
FusedStepConfig step_f32_candidate();
inline constexpr const char* kF32PdlKernel = "f32_gemv/impl=warp-row,unroll=4,pdl=on";
// The same with eight loads in flight a lane (the twin u8).
inline constexpr const char* kF32Pdl8Kernel = "f32_gemv/impl=warp-row,unroll=8,pdl=on";
// Its twins: fork_z (the candidate with fork=z), u8 (the candidate on kF32Pdl8Kernel), and one setting apart down the line ba_own (the
// candidate with b|a its own launch on split-row,pdl=on), apart (ba_own with in_proj_qkv and
// in_proj_z as two launches) and plain (apart on warp-row,unroll=4 without pdl): gdn-stack's
// f32-fast-u8, f32-fast-ba-own, f32-fast-apart and f32-fast-plain.
struct F32Twins {
  FusedStepConfig fork_z;     // the candidate with in_proj_z forked off the stacked launch (fork=z)
  FusedStepConfig norm_last;  // the candidate on kRecNormLast: the gated norm by the recurrence's last column block of each head
  FusedStepConfig conv_rec;   // the candidate on kRecConv: conv, q/k norm and beta/g in the recurrence
  FusedStepConfig four;       // the candidate on kRecFour: conv, q/k norm, beta/g and the gated norm in the recurrence, its history a ring
  FusedStepConfig u8;
  FusedStepConfig ba_own;
  FusedStepConfig apart;
  FusedStepConfig plain;
};
F32Twins f32_candidate_twins();
// Why c cannot step geometry g ("" when it can): a kernel it names (the recurrence, the b|a kernel)
// refuses the geometry, naming the kernel and its reason.
std::string config_error(const FusedStepConfig& c, const ref::gdn::Geometry& g);
// Applies c's kernels and modes to a loaded device (set_q4_variant where q4, set_fused_prep, and the
// recurrence, b|a kernel and chain where c names them).
void apply(const FusedStepConfig& c, GdnDevice& dev);
// e.g. gdn_step/tier=q4,proj=map=packed+...,prep=fused,rec=impl=fused+cols=16+rows=8+pdl=on
std::string fused_step_variant(const FusedStepConfig& c);

}  // namespace klab::gdn
