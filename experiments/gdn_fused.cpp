// gdn-step-fused (issue 14, "fused step variants"): the GDN step (op gdn_step) with beta/g, conv +
// SiLU and the q/k norm as ONE launch (GdnDevice::set_fused_prep, kernels::conv_norm_bg) raced
// against the same step with the three launches, on the f32 tier, the default q4 kernel and the
// fastest q4 kernel measured inside the step; and folds toward the 20 us per
// layer (q8-dp4a projections, the fused prep and a fused recurrence by name). A is the q4 tier on the
// default kernel, three launches: gdn-q4-layer's own q4 row. All run on the q4 weights (weights=1),
// so every variant meets the same f64 reference; time is per run of T tokens, quoted per layer and
// token. First measured in reports/h200/run-30bee11 (H200, 2026-12-01); in=qkvz in run-105e07b;
// in_proj= (the stacked launch on a kernel of its own) in run-4198a57; out=prepared in run-a9d7934;
// fold=ba-main in run-2c678d0. The twins' claims compare each with the candidate's base
// (gdn::candidate_twins().ba_own: b|a a launch of its own), from which each differs in one setting;
// fold (the base with fold=ba, the candidate 2026-12-02..06: candidate_twins().fold) meets the base in fold-bitwise and
// fold-pays, and its own twins (pf-out-*, fork-z-*, ..., pace-all-*) meet it; the candidate since 2026-12-06
// (gdn::step_candidate(), pace_out1_split) meets pace_out1 in out1-split-*.
#include <algorithm>
#include <string>
#include <vector>

#include "common.hpp"
#include "gdn/q4_pool.hpp"
#include "gdn/step_op.hpp"

namespace klab::experiments {

namespace {

const Claim kBits{"fused-bitwise",
                  "with prep=fused the step gives its three-launch twin's out, S, hist and intermediates bit for bit (f32 tier, default q4 kernel, "
                  "q8-dp4a kernel)"};
const Claim kFaster{"fused-faster", "with prep=fused the step is faster than its three-launch twin (headline timing: stream mode), every tier"};
const Claim kRecPays{"rec-pays",
                     "inside the fused step, the fused one-launch recurrence (impl=fused,cols=16,rows=8,pdl=on) is faster than the step's seed recurrence"};
const Claim kChainBits{"chain-bitwise", "the step's base with its small kernels in the PDL chain gives the same base's bits without it"};
const Claim kChainPays{"chain-pays", "the PDL chain pays: the step's base is faster with it than without it"};
const Claim kNormPays{"norm-pays",
                      "the gated norm as the recurrence's epilogue (norm=gated) pays: the step's base (the gated norm a launch of its own) is "
                      "slower than its twin with norm=gated"};
const Claim kMergedBits{"merged-bitwise",
                        "the step's base with in_proj_qkv and in_proj_z as one q4 launch (in=qkvz) gives the same base's bits with them apart"};
const Claim kMergedPays{"merged-pays", "one launch for in_proj_qkv and in_proj_z pays: the step's base is faster with in=qkvz than with the two apart"};
const Claim kRingBits{"ring-bitwise", "the step's base with its stacked launch on the TMA ring (in_proj=...grid=fill...) gives the base's bits"};
const Claim kRingPays{"ring-pays", "the TMA ring pays for the stacked launch: the step's base is faster with in_proj=...grid=fill... than without"};
const Claim kClusterBits{"cluster-bitwise",
                         "the step's base on the q4 kernel grid=groups,xprep=cluster (no prep kernel) gives the base's bits"};
const Claim kClusterPays{"cluster-pays", "the step's base is faster on the q4 kernel grid=groups,xprep=cluster than on xprep=launch"};
const Claim kNormQ8Bits{"normq8-bitwise",
                        "the step's base, its out_proj's q8 x written by the gated norm (out=prepared, no prep launch), gives the bits of its "
                        "twin with out_proj's own prep launch"};
const Claim kNormQ8Pays{"normq8-pays", "out_proj without its prep launch pays: the step's base (out=prepared) is faster than its twin without it"};
const Claim kWarpsBits{"warps-bitwise",
                       "the step's base, on the q4 kernel xprep=warps (the prep a warp per block of 32), gives the bits of its twin on xprep=launch"};
const Claim kWarpsPays{"warps-pays", "the step's base (the q4 kernel xprep=warps) is faster than its twin on xprep=launch"};
const Claim kFoldBits{"fold-bitwise",
                      "fold (the step's candidate 2026-12-02..06: its base with b|a folded into the stacked launch's prep kernel, fold=ba) gives the base's bits"};
const Claim kFoldPays{"fold-pays", "b|a in the stacked launch's prep kernel pays: fold (fold=ba) is faster than its base"};
const Claim kRecNormPays{"rec-norm-pays",
                         "the gated norm and out_proj's q8 x in the recurrence (cols=128, a head a block, no cluster) pay: the step's base "
                         "is faster with them there than with the gated norm a launch of its own"};
const Claim kFoldMainPays{"fold-main-pays",
                          "b|a as f32 rows in the stacked kernel's grid (fold=ba-main) pays: the step's base is faster with them there than with b|a "
                          "a launch of its own"};
const Claim kPfBits{"pf-out-bitwise",
                    "fold with out_proj's weights prefetched into L2 by conv_norm_bg (pf=out, after its blocks' work) gives "
                    "fold's bits"};
const Claim kPfPays{"pf-out-pays", "out_proj's weights prefetched into L2 while the small kernels run pay: fold is faster with pf=out"};
const Claim kPfEarlyBits{"pf-early-bitwise",
                         "fold with out_proj's weights prefetched into L2 before conv_norm_bg's wait (pf=out-early) gives "
                         "fold's bits"};
const Claim kPfEarlyPays{"pf-early-pays", "the prefetch issued before conv_norm_bg's wait pays: fold is faster with pf=out-early"};
const Claim kForkBits{"fork-z-bitwise",
                      "fold with in_proj_z on a branch of its own (fork=z: forked off the stacked launch, joined before the gated "
                      "norm) gives fold's bits"};
const Claim kForkPays{"fork-z-pays", "z beside conv_norm_bg and the recurrence pays: fold is faster with fork=z"};
const Claim kF32ForkBits{"f32-fork-z-bitwise", "the f32 tier's candidate with fork=z gives the f32 candidate's bits"};
const Claim kF32ForkPays{"f32-fork-z-pays", "fork=z pays on the f32 tier: the f32 candidate is faster with it"};
const Claim kNormLastBits{"norm-last-bitwise",
                          "fold with the gated norm and out_proj's q8 x run by the recurrence's last column block of each head "
                          "(norm=last: one launch fewer) gives fold's bits"};
const Claim kNormLastPays{"norm-last-pays", "the gated norm in the recurrence's last blocks pays: fold is faster with norm=last"};
const Claim kF32NormLastBits{"f32-norm-last-bitwise", "the f32 tier's candidate with norm=last gives the f32 candidate's bits"};
const Claim kF32NormLastPays{"f32-norm-last-pays", "norm=last pays on the f32 tier: the f32 candidate is faster with it"};
const Claim kRows16Bits{"rows16-bitwise", "fold with every q4 launch on 16 rows a thread block (gdn::kWarpsQ4Rows16) gives fold's bits"};
const Claim kRows16Pays{"rows16-pays", "16 rows a q4 thread block pay: fold is faster on gdn::kWarpsQ4Rows16"};
const Claim kOutSmemBits{"out-smem-bitwise",
                         "fold with out_proj on gdn::kSmemGroupsQ4 (weights in shared memory, fewer registers) gives fold's bits"};
const Claim kOutSmemPays{"out-smem-pays", "out_proj on gdn::kSmemGroupsQ4 pays: fold is faster with it (in_prep_ba's blocks fit beside out_proj's)"};
const Claim kFoldRingBits{"fold-ring-bitwise",
                          "fold with its stacked launch's main kernel the TMA ring's (gdn::kStackedRing, on in_prep_ba's q8 x) "
                          "gives fold's bits"};
const Claim kFoldRingPays{"fold-ring-pays", "the ring as the stacked main kernel pays: fold is faster with it"};
const Claim kFoldDepthBits{"fold-depth-bitwise",
                           "fold with its stacked launch's main kernel the ring at depth=2 (gdn::kRingDepth2) gives fold's bits"};
const Claim kFoldDepthPays{"fold-depth-pays", "the ring at depth=2 as the stacked main kernel pays: fold is faster with it than with the ring (fold_ring)"};
const Claim kDepthAllBits{"depth-all-bitwise",
                          "fold with the stacked launch and out_proj on the ring at depth=2 (gdn::kRingDepth2) gives fold's bits"};
const Claim kDepthAllPays{"depth-all-pays", "every q4 launch on the ring at depth=2 pays: fold is faster with it"};
const Claim kFoldPaceBits{"fold-pace-bitwise",
                          "fold with its stacked launch's main kernel the paced ring (gdn::kPace1, pace=1) gives fold's bits"};
const Claim kFoldPacePays{"fold-pace-pays", "the paced ring as the stacked main kernel pays: fold is faster with it than with the ring (fold_ring)"};
const Claim kPaceAllBits{"pace-all-bitwise",
                         "fold with the stacked launch and out_proj on the paced ring (gdn::kPace1, pace=1) gives fold's bits"};
const Claim kPaceAllPays{"pace-all-pays", "every q4 launch on the paced ring pays: fold is faster with it"};
const Claim kPaceIlpBits{"pace-ilp-bitwise",
                         "pace_all with out_proj on the paced ring taking up to 3 stages a step (gdn::kPace1Ilp3, ilp=3) gives pace_all's bits"};
const Claim kPaceIlpPays{"pace-ilp-pays", "out_proj's groups interleaved pay: pace_all is faster with out_proj on gdn::kPace1Ilp3"};
const Claim kPaceLateBits{"pace-late-bitwise",
                          "pace_all with both q4 launches on the paced ring with two requests in flight after the release (gdn::kPace1Late, "
                          "pace=1-2) gives pace_all's bits"};
const Claim kPaceLatePays{"pace-late-pays", "more requests after the release pay in the step: pace_all is faster on gdn::kPace1Late"};
const Claim kPaceDeferBits{"pace-defer-bitwise",
                           "pace_all with out_proj on the paced ring at defer=4, rows=4 (gdn::kPace1Defer4R4; its stacked launch on gdn::kPace1, "
                           "its copy in tiles-r8, out_proj's in tiles-r4) gives pace_all's bits"};
const Claim kPaceDeferPays{"pace-defer-pays", "out_proj's sums deferred pay in the step: pace_all is faster with out_proj on gdn::kPace1Defer4R4"};
const Claim kBaConvBits{"ba-conv-bitwise",
                        "pace_all with b|a's rows in the conv_norm_bg launch (fold=ba-conv: split-row's arithmetic there, the stacked launch's "
                        "prep kernel h's q8 form alone) gives pace_all's bits"};
const Claim kBaConvPays{"ba-conv-pays", "b|a in the conv_norm_bg launch pays in the step: pace_all is faster with fold=ba-conv than with fold=ba"};
const Claim kOut1Bits{"out-per-sm1-bitwise",
                      "pace_all with out_proj on the paced ring at one block an SM (gdn::kPace1PerSm1, per-sm=1; its stacked launch on "
                      "gdn::kPace1) gives pace_all's bits"};
const Claim kOut1Pays{"out-per-sm1-pays", "out_proj on one block an SM pays in the step: pace_all is faster with out_proj on gdn::kPace1PerSm1"};
const Claim kOut1S4Bits{"out-stages4-bitwise",
                        "pace_out1 with out_proj's ring 4 stages (gdn::kPace1PerSm1S4, stages=4) gives pace_out1's bits"};
const Claim kOut1S4Pays{"out-stages4-pays", "a deeper out_proj ring pays beside the stacked block: pace_out1 is faster with out_proj on gdn::kPace1PerSm1S4"};
const Claim kOut1BaBits{"out1-ba-conv-bitwise", "pace_out1 with b|a's rows in the conv_norm_bg launch (fold=ba-conv) gives pace_out1's bits"};
const Claim kOut1BaPays{"out1-ba-conv-pays", "b|a in the conv_norm_bg launch pays beside out_proj on one block an SM: pace_out1 is faster with fold=ba-conv"};
const Claim kOut1LateBits{"out1-late-bitwise", "pace_out1 with out_proj at pace=1-2 (gdn::kPace1LatePerSm1) gives pace_out1's bits"};
const Claim kOut1LatePays{"out1-late-pays", "two requests after the release pay for out_proj on one block an SM: pace_out1 is faster on gdn::kPace1LatePerSm1"};
const Claim kOut1DeferBits{"out1-defer-bitwise",
                           "pace_out1 with out_proj at defer=4, rows=4 on one block an SM (gdn::kPace1Defer4R4PerSm1; its copy in tiles-r4, the "
                           "stacked one in tiles-r8) gives pace_out1's bits"};
const Claim kOut1DeferPays{"out1-defer-pays", "out_proj's sums deferred pay on one block an SM: pace_out1 is faster on gdn::kPace1Defer4R4PerSm1"};
const Claim kOut1L2Bits{"out1-l2-bitwise", "pace_out1 with out_proj's groups past its ring asked of the L2 early (gdn::kPace1PerSm1L2, rest=l2) gives pace_out1's bits"};
const Claim kOut1L2Pays{"out1-l2-pays", "out_proj's later groups in the L2 pay: pace_out1 is faster with out_proj on gdn::kPace1PerSm1L2"};
const Claim kOut1IlpBits{"out1-ilp-bitwise", "pace_out1 with out_proj taking up to 3 stages a step (gdn::kPace1Ilp3PerSm1, ilp=3) gives pace_out1's bits"};
const Claim kOut1IlpPays{"out1-ilp-pays", "out_proj's groups interleaved pay on one block an SM: pace_out1 is faster with out_proj on gdn::kPace1Ilp3PerSm1"};
const Claim kOut1SplitBits{"out1-split-bitwise",
                           "pace_out1 with out_proj's rows over two threads a block of 32 weights (gdn::kPace1SplitPerSm1, row-split=2: the step's candidate since 2026-12-06) gives pace_out1's bits"};
const Claim kOut1SplitPays{"out1-split-pays", "twice the warps pay for out_proj on one block an SM: pace_out1 is faster with out_proj on gdn::kPace1SplitPerSm1"};
const Claim kSplitX2Bits{"split-x2-bitwise",
                         "the candidate (pace_out1_split) with out_proj on two blocks an SM of 2 stages each (gdn::kPace1SplitPerSm2S2, "
                         "per-sm=2,stages=2) gives the candidate's bits"};
const Claim kSplitX2Pays{"split-x2-pays",
                         "twice out_proj's consumer warps again pay beside the stacked block: the candidate is faster with out_proj on "
                         "gdn::kPace1SplitPerSm2S2"};
const Claim kOwn4Bits{"own-out4-bitwise",
                      "the candidate with out_proj on q4_gemv's grid=own, 4 warps a block each owning its groups and a stage (gdn::kOwn4), "
                      "gives the candidate's bits"};
const Claim kOwn4Pays{"own-out4-pays", "warps that own out_proj's groups pay beside the stacked block: the candidate is faster with out_proj on gdn::kOwn4"};
const Claim kOwn8Bits{"own-out8-bitwise", "the candidate with out_proj on grid=own at 8 warps a block (gdn::kOwn8) gives the candidate's bits"};
const Claim kOwn8Pays{"own-out8-pays", "out_proj's groups all in its warps' stages pay: the candidate is faster with out_proj on gdn::kOwn8"};
const Claim kKcOutBits{"kc-out-bitwise",
                       "the candidate with out_proj on q4_gemv's grid=split-k (gdn::kSplitK1: clusters over k, one block an SM's worth) "
                       "gives the candidate's bits"};
const Claim kKcOutPays{"kc-out-pays", "clusters over k pay for out_proj: the candidate is faster with out_proj on gdn::kSplitK1"};
const Claim kSpan2Bits{"span2-bitwise",
                       "pace_out1 with out_proj and the next token's input side as one persistent launch (GdnDevice::set_span, pace 2) gives pace_out1's bits"};
const Claim kSpan2Pays{"span2-pays", "one ring across out_proj and the next stacked launch pays: pace_out1 is faster with the span at pace 2"};
const Claim kSpan3Bits{"span3-bitwise", "pace_out1 with the span at pace 3 gives pace_out1's bits"};
const Claim kSpan3Pays{"span3-pays", "one ring across out_proj and the next stacked launch pays at pace 3: pace_out1 is faster with the span at pace 3"};
const Claim kSpan1x2Bits{"span1x2-bitwise", "pace_out1 with the span at pace 1 on two blocks an SM gives pace_out1's bits"};
const Claim kSpan1x2Pays{"span1x2-pays", "the span on two blocks an SM pays at pace 1: pace_out1 is faster with it"};
const Claim kSpan2x2Bits{"span2x2-bitwise", "pace_out1 with the span at pace 2 on two blocks an SM gives pace_out1's bits"};
const Claim kSpan2x2Pays{"span2x2-pays", "the span on two blocks an SM pays at pace 2: pace_out1 is faster with it"};
const Claim kWarpBits{"warp-prep-bitwise", "the candidate's base with its prep kernel's blocks one warp each (gdn::kWarpQ4) gives the base's bits"};
const Claim kWarpPays{"warp-prep-pays", "prep blocks of one warp pay: the candidate's base is faster on gdn::kWarpQ4"};
const Claim kConvRecBits{"conv-rec-bitwise",
                         "fold with the conv, the q/k norm and beta/g formed inside the recurrence (prep=conv: no conv_norm_bg "
                         "launch, one launch fewer) gives fold's bits"};
const Claim kConvRecPays{"conv-rec-pays", "the conv inside the recurrence pays: fold is faster with prep=conv"};
const Claim kF32ConvRecBits{"f32-conv-rec-bitwise", "the f32 tier's candidate with prep=conv gives the f32 candidate's bits"};
const Claim kF32ConvRecPays{"f32-conv-rec-pays", "prep=conv pays on the f32 tier: the f32 candidate is faster with it"};
// hist=ring (2026-12-05; bits held, conv-ring x0.999 / x1.005, four x0.940 on an H100 and the H200: reports/h100/run-2c88263,
// reports/h200/run-f55aa56): the conv history a ring the recurrence writes itself, so that the
// gated norm shifts nothing (conv-ring-*, against conv_rec: what the ring saves the shift), and with the gated norm
// by the recurrence's last blocks too, four launches a layer (four-*, against the candidate).
const Claim kConvRingBits{"conv-ring-bitwise",
                          "fold on gdn::kRecConvRing (prep=conv with the conv history a ring: nothing shifts it) gives "
                          "fold's bits"};
const Claim kConvRingPays{"conv-ring-pays", "the ring pays: prep=conv is faster with the history a ring (gdn::kRecConvRing) than shifted by the gated norm"};
const Claim kFourBits{"four-bitwise",
                      "fold on gdn::kRecFour (the conv, the q/k norm, beta/g and the gated norm in the recurrence, the history a "
                      "ring: four launches a layer) gives fold's bits"};
const Claim kFourPays{"four-pays", "four launches a layer pay: fold is faster on gdn::kRecFour"};
const Claim kF32FourBits{"f32-four-bitwise", "the f32 tier's candidate on gdn::kRecFour gives the f32 candidate's bits"};
const Claim kF32FourPays{"f32-four-pays", "four launches a layer pay on the f32 tier: the f32 candidate is faster on gdn::kRecFour"};
// The step's time per layer is a run of T tokens through one layer over T: its state (3.1 MB at Qwen3.5-27B) stays in
// the L2 from token to token. The 48-layer graph reads every layer's state and weights from DRAM and costs 2-5 us a
// layer more (H100, reports/h100/run-stack-layers: 33 us against 28.5-31.3): gdn-stack-layers' slope is the honest
// figure, and the evidence says so.
const Claim kGoal{"layer-20us", "the fastest variant raced here takes at most 20 us per layer and token, device-resident (issue 14's goal; stream mode)"};

const Measured* find(const std::vector<Measured>& ms, const std::string& name) {
  for (const auto& m : ms)
    if (m.variant->name == name && !m.skipped) return &m;
  return nullptr;
}

// (three-launch twin, prep=fused) of the configurations without rec=, then the rec= candidates.
struct Plan {
  std::vector<std::pair<std::string, std::string>> pairs;
  std::vector<std::string> candidates;
  std::string rec_base, rec_on;      // the q8 prep=fused step and its rec=...pdl=on twin (claim rec-pays)
  // base: gdn::candidate_twins().ba_own, the candidate with b|a a launch of its own; every twin but the
  // candidate differs from it in one setting
  std::string unchained, base;       // the base without and with the chain (chain-bitwise, chain-pays)
  std::string norm_twin;             // the base with the gated norm as the recurrence's epilogue (norm-pays)
  std::string fold_main;             // the base with fold=ba-main (fold-main-pays; not bits: another f32 order for b|a)
  std::string rec_norm;              // the base on gdn::kRecNormQ8 (rec-norm-pays; not bits: another reduction order)
};
Plan plan() {
  Plan p;
  const gdn::CandidateTwins t = gdn::candidate_twins();
  p.unchained = gdn::fused_step_variant(t.unchained);
  p.base = gdn::fused_step_variant(t.ba_own);
  p.norm_twin = gdn::fused_step_variant(t.norm_gated);
  p.fold_main = gdn::fused_step_variant(t.fold_main);
  p.rec_norm = gdn::fused_step_variant(t.rec_norm);
  for (const auto& c : gdn::fused_step_configs()) {
    const std::string fused = gdn::fused_step_variant(c);
    if (!c.recurrence.empty() || !c.ba.empty() || c.chain) {
      p.candidates.push_back(fused);
      if (c.recurrence.find("pdl=on") != std::string::npos) {
        p.rec_on = fused;
        p.rec_base = gdn::fused_step_variant({c.f32, c.q4_kernel, ""});
      }
      continue;
    }
    p.pairs.emplace_back(c.f32 ? std::string("gdn_step/tier=f32") : gdn::q4_step_variant(c.q4_kernel), fused);
  }
  return p;
}

void run_fused(Context& ctx) {
  const Op& op = ctx.registry().op("gdn_step");
  const Plan pl = plan();
  // The twins twin_claims races, each against the configuration it differs from (their settings: step_op.hpp).
  const gdn::CandidateTwins t = gdn::candidate_twins();
  const gdn::F32Twins f = gdn::f32_candidate_twins();
  std::vector<std::string> names{gdn::q4_step_variant(gdn::kDefaultQ4Variant)};
  auto add = [&](const std::string& n) {
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  };
  for (const auto& [three, one] : pl.pairs) add(three), add(one);
  for (const auto& c : pl.candidates) add(c);
  const auto vs = lookup(ctx, names);
  for (const Problem& p : op_problems(ctx, op, Dist::outlier)) {
    if (p.param("weights") != 1) {
      ctx.skip("gdn-step-fused on " + p.str(), "the step races on the q4 weights (weights=1)");
      continue;
    }
    const auto ms = race(ctx, op, vs, p, RaceOptions{.tolerance = 1e-4, .tolerance_for = {}});
    if (ms.empty()) continue;
    const std::string key = p.key();
    const double T = double(p.param("tokens"));
    std::int64_t bits = 0;
    bool compared = true, timed = true, faster = true;
    std::string ev_bits = "elements (out, S, hist, intermediates) differing from the three-launch twin:", ev_time;
    for (const auto& [three, one] : pl.pairs) {
      const Measured *a = find(ms, three), *b = find(ms, one);
      if (!a || !b || !a->verified || !b->verified) {
        compared = false;
        continue;
      }
      const auto d = outputs_bitwise_diff(*a, *b);
      bits += d;
      ev_bits += " " + one + " " + std::to_string(d) + ";";
      if (!a->timed || !b->timed) {
        timed = false;
        continue;
      }
      const auto c = compare_times(a->timing.kept_ms, b->timing.kept_ms, std::uint64_t(T));
      faster = faster && c.verdict == Verdict::faster;
      ev_time += one + fmt(": %.4f -> %.4f ms per layer and token ", a->timing.summary.median / T, b->timing.summary.median / T) + speedup_text(c) +
                 " (" + to_string(b->timing.mode) + "); ";
    }
    if (compared) ctx.claim(kBits).settle(key, bits == 0, ev_bits);
    if (compared && timed) ctx.claim(kFaster).settle(key, faster, ev_time);
    const Measured *seed_rec = find(ms, pl.rec_base), *on = find(ms, pl.rec_on);
    if (seed_rec && on && seed_rec->timed && on->timed) {
      const auto c = compare_times(seed_rec->timing.kept_ms, on->timing.kept_ms, std::uint64_t(T));
      ctx.claim(kRecPays).settle(key, c.verdict == Verdict::faster,
                                 on->variant->name + fmt(" %.4f ms per layer and token against %.4f, ", on->timing.summary.median / T,
                                                         seed_rec->timing.summary.median / T) + speedup_text(c));
    }
    const Measured *off = find(ms, pl.unchained), *base = find(ms, pl.base);
    if (off && base && off->verified && base->verified) {
      const auto d = outputs_bitwise_diff(*off, *base);
      ctx.claim(kChainBits).settle(key, d == 0, std::to_string(d) + " elements (out, S, hist, intermediates) differ between " + pl.base + " and " + pl.unchained);
      if (off->timed && base->timed) {
        const auto c = compare_times(off->timing.kept_ms, base->timing.kept_ms, std::uint64_t(T));
        ctx.claim(kChainPays).settle(key, c.verdict == Verdict::faster,
                                     fmt("%.4f -> %.4f ms per layer and token with the chain, ", off->timing.summary.median / T, base->timing.summary.median / T) +
                                         speedup_text(c) + " (" + to_string(base->timing.mode) + ")");
      }
    }
    // (without, with): `with` faster than `without` per layer and token settles pays_claim; `accuracy`
    // adds both max_rel against the f64 reference (twins in another arithmetic order, judged by it).
    auto pays = [&](const Measured* without, const Measured* with, const Claim& pays_claim, const char* what, bool accuracy) {
      if (!without || !with || !without->timed || !with->timed) return;
      const auto c = compare_times(without->timing.kept_ms, with->timing.kept_ms, std::uint64_t(T));
      ctx.claim(pays_claim).settle(key, c.verdict == Verdict::faster,
                                   fmt("%.4f -> %.4f ms per layer and token ", without->timing.summary.median / T, with->timing.summary.median / T) + what + ", " +
                                       speedup_text(c) + " (" + to_string(with->timing.mode) + ")" +
                                       (accuracy ? fmt(" (max_rel %.3g against the f64 reference, the base's %.3g)", with->acc.max_rel, without->acc.max_rel)
                                                 : std::string()));
    };
    pays(base, find(ms, pl.norm_twin), kNormPays, "with the gated norm in the recurrence", false);
    // (without, with): the base against a twin, bits and time, each settling its pair of claims.
    // (without, with): their outputs bit for bit settle bits_claim, their times pays_claim.
    auto twin_claims = [&](const gdn::FusedStepConfig& a, const gdn::FusedStepConfig& b, const Claim& bits_claim, const Claim& pays_claim, const char* what) {
      const std::string without_name = gdn::fused_step_variant(a), with_name = gdn::fused_step_variant(b);
      const Measured *without = find(ms, without_name), *with = find(ms, with_name);
      if (!without || !with || !without->verified || !with->verified) return;
      const auto d = outputs_bitwise_diff(*without, *with);
      ctx.claim(bits_claim).settle(key, d == 0, std::to_string(d) + " elements (out, S, hist, intermediates) differ between " + with_name + " and " + without_name);
      pays(without, with, pays_claim, what, false);
    };
    twin_claims(t.apart, t.ba_own, kMergedBits, kMergedPays, "with one launch for both");
    twin_claims(t.ba_own, t.ring, kRingBits, kRingPays, "with the stacked launch on the ring");
    twin_claims(t.ba_own, t.cluster, kClusterBits, kClusterPays, "with the q4 kernel xprep=cluster");
    twin_claims(t.out_own, t.ba_own, kNormQ8Bits, kNormQ8Pays, "with out_proj's x prepared by the gated norm");
    twin_claims(t.thread_prep, t.ba_own, kWarpsBits, kWarpsPays, "with the q4 kernel xprep=warps");
    twin_claims(t.ba_own, t.fold, kFoldBits, kFoldPays, "with b|a in the stacked launch's prep kernel");
    // time only: these twins' arithmetic is another order (their races check them against the f64 reference)
    pays(base, find(ms, pl.rec_norm), kRecNormPays, "with the gated norm and out_proj's x in the recurrence", true);
    pays(base, find(ms, pl.fold_main), kFoldMainPays, "with b|a in the stacked kernel's grid", true);
    // fold's own twins
    twin_claims(t.fold, t.pf_out, kPfBits, kPfPays, "with out_proj's weights prefetched into L2");
    twin_claims(t.fold, t.pf_out_early, kPfEarlyBits, kPfEarlyPays, "with the prefetch before conv_norm_bg's wait");
    twin_claims(t.fold, t.fork_z, kForkBits, kForkPays, "with in_proj_z on a branch of its own");
    twin_claims(gdn::step_f32_candidate(), f.fork_z, kF32ForkBits, kF32ForkPays,
                "with in_proj_z on a branch of its own");
    twin_claims(t.fold, t.norm_last, kNormLastBits, kNormLastPays, "with the gated norm in the recurrence's last blocks");
    twin_claims(gdn::step_f32_candidate(), f.norm_last, kF32NormLastBits, kF32NormLastPays,
                "with the gated norm in the recurrence's last blocks");
    twin_claims(t.fold, t.rows16, kRows16Bits, kRows16Pays, "with 16 rows a q4 thread block");
    twin_claims(t.fold, t.out_smem, kOutSmemBits, kOutSmemPays, "with out_proj's weights in shared memory");
    twin_claims(t.fold, t.fold_ring, kFoldRingBits, kFoldRingPays, "with the ring as its stacked main kernel");
    twin_claims(t.fold_ring, t.fold_depth, kFoldDepthBits, kFoldDepthPays,
                "with the ring at depth=2 as its stacked main kernel");
    twin_claims(t.fold, t.depth_all, kDepthAllBits, kDepthAllPays, "with every q4 launch on the ring at depth=2");
    twin_claims(t.fold_ring, t.fold_pace, kFoldPaceBits, kFoldPacePays,
                "with the paced ring as its stacked main kernel");
    twin_claims(t.fold, t.pace_all, kPaceAllBits, kPaceAllPays, "with every q4 launch on the paced ring");
    twin_claims(t.pace_all, t.pace_ilp, kPaceIlpBits, kPaceIlpPays,
                "with out_proj's groups interleaved (ilp=3)");
    twin_claims(t.pace_all, t.pace_late, kPaceLateBits, kPaceLatePays,
                "with two requests in flight after the release (pace=1-2)");
    twin_claims(t.pace_all, t.pace_defer, kPaceDeferBits, kPaceDeferPays,
                "with out_proj's sums deferred (defer=4, rows=4)");
    twin_claims(t.pace_all, t.pace_ba_conv, kBaConvBits, kBaConvPays,
                "with b|a's rows in the conv_norm_bg launch (fold=ba-conv)");
    twin_claims(t.pace_all, t.pace_out1, kOut1Bits, kOut1Pays,
                "with out_proj on one block an SM (per-sm=1)");
    twin_claims(t.pace_out1, t.pace_out1_s4, kOut1S4Bits, kOut1S4Pays,
                "with out_proj's ring 4 stages (stages=4)");
    twin_claims(t.pace_out1, t.pace_out1_ba, kOut1BaBits, kOut1BaPays,
                "with b|a's rows in the conv_norm_bg launch (fold=ba-conv)");
    twin_claims(t.pace_out1, t.pace_out1_late, kOut1LateBits, kOut1LatePays,
                "with out_proj at pace=1-2");
    twin_claims(t.pace_out1, t.pace_out1_defer, kOut1DeferBits, kOut1DeferPays,
                "with out_proj at defer=4, rows=4");
    twin_claims(t.pace_out1, t.pace_out1_l2, kOut1L2Bits, kOut1L2Pays,
                "with out_proj's later groups asked of the L2 early (rest=l2)");
    twin_claims(t.pace_out1, t.pace_out1_ilp, kOut1IlpBits, kOut1IlpPays,
                "with out_proj at ilp=3");
    twin_claims(t.pace_out1, t.pace_out1_split, kOut1SplitBits, kOut1SplitPays,
                "with out_proj at row-split=2");
    twin_claims(t.pace_out1_split, t.pace_split_x2, kSplitX2Bits, kSplitX2Pays,
                "with out_proj on two blocks an SM of 2 stages each (per-sm=2,stages=2)");
    twin_claims(t.pace_out1_split, t.own_out4, kOwn4Bits, kOwn4Pays, "with out_proj on grid=own, 4 warps a block");
    twin_claims(t.pace_out1_split, t.own_out8, kOwn8Bits, kOwn8Pays, "with out_proj on grid=own, 8 warps a block");
    twin_claims(t.pace_out1_split, t.kc_out, kKcOutBits, kKcOutPays, "with out_proj on grid=split-k (clusters over k)");
    twin_claims(t.pace_out1, t.pace_span2, kSpan2Bits, kSpan2Pays,
                "with the span at pace 2 (out_proj and the next token's input side one launch)");
    twin_claims(t.pace_out1, t.pace_span3, kSpan3Bits, kSpan3Pays, "with the span at pace 3");
    twin_claims(t.pace_out1, t.pace_span1x2, kSpan1x2Bits, kSpan1x2Pays,
                "with the span at pace 1 on two blocks an SM");
    twin_claims(t.pace_out1, t.pace_span2x2, kSpan2x2Bits, kSpan2x2Pays,
                "with the span at pace 2 on two blocks an SM");
    twin_claims(t.ba_own, t.warp1, kWarpBits, kWarpPays, "with the prep's blocks one warp each");
    twin_claims(t.fold, t.conv_rec, kConvRecBits, kConvRecPays, "with the conv inside the recurrence");
    twin_claims(gdn::step_f32_candidate(), f.conv_rec, kF32ConvRecBits, kF32ConvRecPays,
                "with the conv inside the recurrence");
    twin_claims(t.conv_rec, t.conv_ring, kConvRingBits, kConvRingPays, "with the conv history a ring");
    twin_claims(t.fold, t.four, kFourBits, kFourPays, "with four launches a layer");
    twin_claims(gdn::step_f32_candidate(), f.four, kF32FourBits, kF32FourPays, "with four launches a layer");
    const Measured* best = nullptr;
    for (const auto& m : ms)
      if (!m.skipped && m.timed && m.verified && (!best || m.timing.summary.median < best->timing.summary.median)) best = &m;
    if (best && !ctx.options().quick) {
      const double us = best->timing.summary.median / T * 1e3;
      ctx.claim(kGoal).settle(key, us <= 20.0 && best->timing.mode == TimingMode::stream,
                              best->variant->name + fmt(" %.2f us per layer and token (", us) + to_string(best->timing.mode) +
                                  fmt(" mode), %.1f%% of the read ceiling", best->pct_ceiling) +
                                  fmt("; %g tokens through one layer, its state in the L2 from token to token: a token through the "
                                      "48-layer graph costs more a layer (gdn-stack-layers' slope)", T));
    }
  }
}

}  // namespace

void register_gdn_fused(Registry& r) {
  r.add(Experiment{
      .name = "gdn-step-fused",
      .description = "GDN step (op gdn_step): beta/g, conv + SiLU and the q/k norm as one launch (prep=fused) against three, bits and time; the "
                     "step's candidates toward 20 us per layer (q8-dp4a projections, a fused recurrence)",
      .claims = {kBits, kFaster, kRecPays, kChainBits, kChainPays, kNormPays, kMergedBits, kMergedPays, kRingBits, kRingPays, kClusterBits,
                 kClusterPays, kNormQ8Bits, kNormQ8Pays, kWarpsBits, kWarpsPays, kFoldBits, kFoldPays, kRecNormPays, kFoldMainPays, kPfBits, kPfPays,
                 kPfEarlyBits, kPfEarlyPays, kForkBits, kForkPays, kF32ForkBits, kF32ForkPays, kNormLastBits, kNormLastPays,
                 kF32NormLastBits, kF32NormLastPays, kRows16Bits, kRows16Pays, kWarpBits, kWarpPays, kOutSmemBits, kOutSmemPays, kFoldRingBits, kFoldRingPays, kFoldDepthBits, kFoldDepthPays, kDepthAllBits, kDepthAllPays, kFoldPaceBits, kFoldPacePays, kPaceAllBits, kPaceAllPays, kPaceIlpBits, kPaceIlpPays, kPaceLateBits, kPaceLatePays, kPaceDeferBits, kPaceDeferPays, kBaConvBits, kBaConvPays, kOut1Bits, kOut1Pays, kOut1S4Bits, kOut1S4Pays, kOut1BaBits, kOut1BaPays, kOut1LateBits, kOut1LatePays, kOut1DeferBits, kOut1DeferPays, kOut1L2Bits, kOut1L2Pays, kOut1IlpBits, kOut1IlpPays, kOut1SplitBits, kOut1SplitPays, kSplitX2Bits, kSplitX2Pays, kOwn4Bits, kOwn4Pays, kOwn8Bits, kOwn8Pays, kKcOutBits, kKcOutPays, kSpan2Bits, kSpan2Pays, kSpan3Bits, kSpan3Pays, kSpan1x2Bits, kSpan1x2Pays, kSpan2x2Bits, kSpan2x2Pays, kConvRecBits, kConvRecPays,
                 kF32ConvRecBits, kF32ConvRecPays, kConvRingBits, kConvRingPays, kFourBits, kFourPays, kF32FourBits, kF32FourPays, kGoal},
      .run = run_fused,
  });
}

}  // namespace klab::experiments
