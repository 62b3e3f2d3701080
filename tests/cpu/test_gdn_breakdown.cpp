// The GDN step's per-operator byte model (variants/gdn/step_bytes.hpp) against gdn_step's own
// (step_op.hpp: a formula written separately, and the registered op's traffic), some of its entries
// worked out by hand; and the bootstrap interval of a median that gdn-step-breakdown reports.
#include <doctest/doctest.h>

#include <algorithm>

#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "gdn/gdn_device.hpp"
#include "gdn/step_bytes.hpp"
#include "gdn/step_op.hpp"
#include "gdn_recurrence/kernels.hpp"
#include "q4_gemv/q4_gemv.hpp"
#include "klab/catalog.hpp"
#include "klab/error.hpp"
#include "klab/ref/gdn.hpp"
#include "klab/stats.hpp"

using namespace klab;
namespace rg = klab::ref::gdn;
namespace gr = klab::gdn_recurrence;

namespace {
double model_sum(const rg::Geometry& g, bool q4) {
  double s = 0;
  for (const auto& m : gdn::step_operator_bytes(g, q4)) s += m.bytes.model();
  return s;
}
const gdn::OperatorBytes& bytes_of(const std::vector<gdn::OperatorModel>& ms, const char* name) {
  for (const auto& m : ms)
    if (std::strcmp(m.name, name) == 0) return m.bytes;
  FAIL("no operator " << name);
  return ms.front().bytes;
}
}  // namespace

TEST_CASE("GDN breakdown: the operators' weights + state sum to gdn_step's byte model, both tiers, several geometries") {
  const std::vector<rg::Geometry> gs{rg::qwen35_27b(), rg::Geometry{256, 2, 6, 32, 48, 4, 1e-6}, rg::Geometry{96, 1, 3, 20, 32, 3, 1e-6},
                                     rg::Geometry{64, 4, 4, 40, 40, 1, 1e-5}};
  for (const auto& g : gs)
    for (bool q4 : {false, true}) {
      CAPTURE(g.str());
      CAPTURE(q4);
      const auto ms = gdn::step_operator_bytes(g, q4);
      REQUIRE(ms.size() == gdn::kStepOperators.size());
      for (std::size_t i = 0; i < ms.size(); ++i) {
        CHECK(std::string(ms[i].name) == gdn::kStepOperators[i]);
        CHECK(ms[i].bytes.act > 0);  // every launch reads and writes activations
      }
      // Every term is a multiple of 1/16 far below 2^53: the sums are exact.
      CHECK(model_sum(g, q4) == gdn::step_bytes(g, q4));
    }
}

TEST_CASE("GDN breakdown: the byte model matches the registered gdn_step op's traffic for one token") {
  const Op& op = registry().op("gdn_step");
  for (int weights : {0, 1}) {
    Problem p;
    for (const auto& d : op.params) p.params[d.name] = d.def;
    p.params["tokens"] = 1;
    p.params["weights"] = weights;
    CAPTURE(p.key());
    CHECK(op.traffic(p).bytes == model_sum(gdn::step_geometry(p), weights == 1));
  }
}

TEST_CASE("GDN breakdown: entries worked out by hand at Qwen3.5-27B (hidden 5120, 16/48 heads of 128, ck 4)") {
  const auto q4 = gdn::step_operator_bytes(rg::qwen35_27b(), true);
  const auto f32 = gdn::step_operator_bytes(rg::qwen35_27b(), false);
  // conv_dim = 2*16*128 + 48*128 = 10240; in_proj_qkv 10240 x 5120 weights at 0.5625 and 4 bytes.
  CHECK(bytes_of(q4, "in_proj_qkv").weights == 29491200.0);
  CHECK(bytes_of(f32, "in_proj_qkv").weights == 209715200.0);
  // h in (5120 floats), xc out (10240 floats).
  CHECK(bytes_of(q4, "in_proj_qkv").act == 61440.0);
  // S: 48 * 128 * 128 floats, read and written once.
  CHECK(bytes_of(q4, "recurrence").state == 6291456.0);
  CHECK(bytes_of(q4, "recurrence").weights == 0.0);
  // b|a stays f32 in the q4 tier: 96 x 5120 floats.
  CHECK(bytes_of(q4, "in_proj_ba").weights == 1966080.0);
  // conv: w (10240 x 4 floats) and the history (3 x 10240 floats) read and written.
  CHECK(bytes_of(q4, "conv_silu").weights == 163840.0);
  CHECK(bytes_of(q4, "conv_silu").state == 245760.0);
  CHECK(bytes_of(q4, "qk_norm").model() == 0.0);
}

TEST_CASE("median_ci95: brackets the median, deterministic in its seed, refuses no samples") {
  std::vector<double> v(101);
  std::iota(v.begin(), v.end(), 1.0);  // median 51
  const Interval a = median_ci95(v, 7), b = median_ci95(v, 7);
  CHECK(a.lo == b.lo);
  CHECK(a.hi == b.hi);
  CHECK(a.lo < 51.0);
  CHECK(a.hi > 51.0);
  CHECK(a.lo >= 35.0);  // the median of 101 draws hardly strays beyond +-15 (its sd is ~5)
  CHECK(a.hi <= 67.0);
  const Interval c = median_ci95(std::vector<double>(9, 2.5));
  CHECK(c.lo == 2.5);
  CHECK(c.hi == 2.5);
  CHECK_THROWS_AS(median_ci95({}), Error);
}

TEST_CASE("GDN breakdown, fused prep: seven operators, the same weights + state (gdn_step's byte model), less act than the three it replaces") {
  const std::vector<rg::Geometry> gs{rg::qwen35_27b(), rg::Geometry{256, 2, 6, 32, 48, 4, 1e-6}, rg::Geometry{64, 4, 4, 40, 40, 1, 1e-5}};
  for (const auto& g : gs)
    for (bool q4 : {false, true}) {
      CAPTURE(g.str());
      CAPTURE(q4);
      const auto nine = gdn::step_operator_bytes(g, q4), seven = gdn::step_operator_bytes(g, q4, true);
      REQUIRE(seven.size() == gdn::kFusedPrepOperators.size());
      double model = 0;
      for (std::size_t i = 0; i < seven.size(); ++i) {
        CHECK(std::string(seven[i].name) == gdn::kFusedPrepOperators[i]);
        model += seven[i].bytes.model();
      }
      CHECK(model == gdn::step_bytes(g, q4));
      // The operators outside the fused one are the nine's, entry for entry.
      for (const char* n : {"in_proj_qkv", "in_proj_z", "in_proj_ba", "recurrence", "gated_norm", "out_proj"}) {
        CAPTURE(n);
        CHECK(bytes_of(seven, n).total() == bytes_of(nine, n).total());
      }
      const auto& f = bytes_of(seven, "conv_norm_bg");
      CHECK(f.weights == bytes_of(nine, "beta_g").weights + bytes_of(nine, "conv_silu").weights);
      CHECK(f.state == bytes_of(nine, "conv_silu").state);
      // b|a and xc in; xcv, q, k, beta and g out: the q and k parts of xcv (2 K floats) are not read back.
      const double C = g.conv_dim(), K = g.key_dim(), nv = g.nv;
      CHECK(f.act == 4.0 * (2 * nv + 2 * C + 2 * K + 2 * nv));
      CHECK(f.act == bytes_of(nine, "beta_g").act + bytes_of(nine, "conv_silu").act + bytes_of(nine, "qk_norm").act - 4.0 * 2 * K);
    }
}

TEST_CASE("gdn_step prep=fused variants: registered, named from their configuration, each pairs with a three-launch twin") {
  const auto cs = gdn::fused_step_configs();
  REQUIRE(cs.size() >= 3);
  int twins = 0;
  for (const auto& c : cs) {
    const std::string n = gdn::fused_step_variant(c);
    CAPTURE(n);
    REQUIRE(registry().has_variant(n));
    CHECK(n.find(",prep=fused") != std::string::npos);
    CHECK((n.find(",rec=") != std::string::npos) == !c.recurrence.empty());
    CHECK((n.find(",ba=") != std::string::npos) == !c.ba.empty());
    CHECK((n.find(",chain=pdl") != std::string::npos) == c.chain);
    CHECK((n.find(",in=qkvz,") != std::string::npos) == c.merged_in);
    if (c.recurrence.empty() && c.ba.empty() && !c.chain) {
      const std::string twin = c.f32 ? std::string("gdn_step/tier=f32") : gdn::q4_step_variant(c.q4_kernel);
      CHECK(registry().has_variant(twin));
      CHECK(registry().variant(twin).tolerance == registry().variant(n).tolerance);
      ++twins;
    }
  }
  CHECK(twins == 3);
  CHECK(registry().experiment("gdn-step-fused").claims.size() == 99);  // with kc-out-*, own-out4-*, own-out8-*, split-x2-*, span2-*, span3-*, span1x2-*, span2x2-*, conv-rec-*, f32-conv-rec-* (prep=conv), conv-ring-*, four-*, f32-four-* (hist=ring), fold-ring-*, fold-depth-*, depth-all-*, fold-pace-*, pace-all-*, pace-ilp-*, pace-late-*, pace-defer-*, ba-conv-*, out-per-sm1-*, out-stages4-*, out1-ba-conv-*, out1-late-*, out1-defer-*, out1-l2-*, out1-ilp-*, out1-split-*
  // fold (the candidate until 2026-12-06) is its base (candidate_twins().ba_own: b|a a launch of its own) with fold=ba;
  // the other twins differ from the base in one setting each, or from fold, pace_all or pace_out1. The candidate since
  // is pace_out1_split: pace_out1 with out_proj at row-split=2 (its stacked launch on kPace1, fold=ba), registered.
  const auto tw = gdn::candidate_twins();
  const auto base = tw.ba_own;
  const auto cand = tw.fold;
  const auto now = gdn::step_candidate();
  CHECK(gdn::fused_step_variant(now) == gdn::fused_step_variant(tw.pace_out1_split));
  CHECK(now.q4_kernel == gdn::kPace1SplitPerSm1);
  CHECK(now.stacked_kernel == gdn::kPace1);
  CHECK(now.fold_ba);
  auto out1 = now;
  out1.q4_kernel = gdn::kPace1PerSm1;
  CHECK(gdn::fused_step_variant(out1) == gdn::fused_step_variant(tw.pace_out1));
  CHECK(registry().has_variant(gdn::fused_step_variant(now)));
  CHECK(gdn::config_error(now, rg::qwen35_27b()) == "");
  CHECK(cand.fold_ba);
  CHECK_FALSE(cand.fold_ba_main);
  CHECK_FALSE(base.fold_ba);
  CHECK_FALSE(base.fold_ba_main);
  CHECK(gdn::fused_step_variant(cand) == gdn::fused_step_variant(base) + ",fold=ba");
  CHECK(registry().has_variant(gdn::fused_step_variant(base)));
  CHECK(registry().has_variant(gdn::fused_step_variant(cand)));
  CHECK(gdn::config_error(cand, rg::qwen35_27b()) == "");
  // The base runs in the chain, on a recurrence that loads nothing before its wait; its twin without the chain is registered.
  CHECK(base.chain);
  CHECK(base.norm_q8);
  CHECK_FALSE(gr::recurrence_kernel(base.recurrence).state_before_wait);
  auto unchained = base;
  unchained.chain = false;
  CHECK(registry().has_variant(gdn::fused_step_variant(unchained)));
  CHECK(gdn::fused_step_variant(base) == gdn::fused_step_variant(unchained).substr(0, gdn::fused_step_variant(unchained).size() - 13) + ",chain=pdl,out=prepared");
  // It stacks its input projections (on its q4 kernel); its twins with the stacked launch on the TMA
  // ring and with the projections apart are registered too, as is its twin with the gated norm as the
  // recurrence's epilogue.
  CHECK(base.merged_in);
  CHECK(base.stacked_kernel.empty());
  auto ring = base;
  ring.stacked_kernel = gdn::kStackedRing;
  CHECK(registry().has_variant(gdn::fused_step_variant(ring)));
  CHECK(gdn::fused_step_variant(ring).find(",in=qkvz,in_proj=map=packed+dot=q8-dp4a+grid=fill+") != std::string::npos);
  CHECK(gdn::config_error(ring, rg::qwen35_27b()) == "");
  // fold_depth and depth_all: the ring at depth=2 as the candidate's stacked kernel, and as every q4 launch's.
  CHECK(tw.fold_depth.stacked_kernel == gdn::kRingDepth2);
  CHECK(tw.depth_all.q4_kernel == gdn::kRingDepth2);
  CHECK(tw.depth_all.stacked_kernel.empty());
  // fold_pace and pace_all: the paced ring (pace=1) likewise.
  CHECK(tw.fold_pace.stacked_kernel == gdn::kPace1);
  CHECK(tw.pace_all.q4_kernel == gdn::kPace1);
  CHECK(tw.pace_all.stacked_kernel.empty());
  // pace_ilp: pace_all with out_proj at ilp=3, its stacked launch still on kPace1 (the same layout: a valid config).
  CHECK(tw.pace_ilp.q4_kernel == gdn::kPace1Ilp3);
  CHECK(tw.pace_ilp.stacked_kernel == gdn::kPace1);
  CHECK(gdn::config_error(tw.pace_ilp, rg::qwen35_27b()) == "");
  CHECK(tw.pace_late.q4_kernel == gdn::kPace1Late);
  CHECK(tw.pace_late.stacked_kernel.empty());
  // pace_defer: out_proj on rows=4 (tiles-r4), its stacked launch on kPace1 (tiles-r8): the stacked copy in its own layout.
  CHECK(tw.pace_defer.q4_kernel == gdn::kPace1Defer4R4);
  CHECK(tw.pace_defer.stacked_kernel == gdn::kPace1);
  CHECK(q4_gemv::q4_kernel(gdn::kPace1Defer4R4).layout != q4_gemv::q4_kernel(gdn::kPace1).layout);
  // pace_ba_conv: pace_all with b|a in the conv_norm_bg launch instead of the stacked launch's prep kernel; its own name.
  CHECK_FALSE(tw.pace_ba_conv.fold_ba);
  CHECK(tw.pace_ba_conv.fold_ba_conv);
  CHECK(tw.pace_ba_conv.q4_kernel == tw.pace_all.q4_kernel);
  CHECK(registry().has_variant(gdn::fused_step_variant(tw.pace_ba_conv)));
  CHECK(gdn::fused_step_variant(tw.pace_ba_conv).find("fold=ba-conv") != std::string::npos);
  CHECK(gdn::config_error(tw.pace_ba_conv, rg::qwen35_27b()) == "");
  {  // what fold=ba-conv refuses, naming why: fold=ba beside it, no chain, pf=out, a prep=conv recurrence, the f32 tier,
     // a geometry whose conv_norm_bg blocks (reduce_threads(dk)) do not divide split-row's 256
    auto both = tw.pace_ba_conv;
    both.fold_ba = true;
    CHECK(gdn::config_error(both, rg::qwen35_27b()).find("b|a in two launches") != std::string::npos);
    auto unchained = tw.pace_ba_conv;
    unchained.chain = false;
    CHECK(gdn::config_error(unchained, rg::qwen35_27b()).find("PDL chain") != std::string::npos);
    auto pf = tw.pace_ba_conv;
    pf.l2_prefetch = gdn::kernels::L2Prefetch::after;
    CHECK(gdn::config_error(pf, rg::qwen35_27b()).find("pf=out") != std::string::npos);
    auto conv = tw.pace_ba_conv;
    conv.recurrence = gdn::kRecConv;
    CHECK(gdn::config_error(conv, rg::qwen35_27b()).find("prep=conv") != std::string::npos);
    auto apart = tw.pace_ba_conv;
    apart.merged_in = false;
    apart.stacked_kernel.clear();
    CHECK(gdn::config_error(apart, rg::qwen35_27b()).find("set_merged_in") != std::string::npos);
    rg::Geometry odd = rg::qwen35_27b();
    odd.dk = 96;  // 96 threads a block: 256 / 96 is not whole
    CHECK(gdn::kernels::conv_norm_ba_error(odd.dk, odd.nv, int(odd.hidden)).find("32, 64, 128 or 256") != std::string::npos);
    CHECK(gdn::kernels::conv_norm_ba_error(128, 48, 5120) == "");
    CHECK(gdn::kernels::conv_norm_ba_error(128, 48, 8196).find("exceeds") != std::string::npos);
  }
  // pace_out1: out_proj on kPace1's kernel at one block an SM (the same layout, tiles-r8), its stacked launch on kPace1.
  CHECK(tw.pace_out1.q4_kernel == gdn::kPace1PerSm1);
  CHECK(tw.pace_out1.stacked_kernel == gdn::kPace1);
  CHECK(q4_gemv::q4_kernel(gdn::kPace1PerSm1).layout == q4_gemv::q4_kernel(gdn::kPace1).layout);
  CHECK(tw.pace_out1_s4.q4_kernel == gdn::kPace1PerSm1S4);
  // pace_split_x2: the candidate with out_proj's kernel on two blocks an SM of 2 stages (the same layout, the same bits' model).
  CHECK(tw.pace_split_x2.q4_kernel == gdn::kPace1SplitPerSm2S2);
  CHECK(tw.pace_split_x2.stacked_kernel == gdn::kPace1);
  CHECK(q4_gemv::q4_kernel(gdn::kPace1SplitPerSm2S2).layout == q4_gemv::q4_kernel(gdn::kPace1).layout);
  // own_out4, own_out8: the candidate with out_proj on grid=own (the same layout, the ring's bits' model, a prepared form).
  // kc_out: on grid=split-k (the same layout and model; its prepared form reads its chunk of g_xq).
  for (const auto& [c, kernel] : {std::pair{tw.own_out4, gdn::kOwn4}, std::pair{tw.own_out8, gdn::kOwn8}, std::pair{tw.kc_out, gdn::kSplitK1}}) {
    CHECK(c.q4_kernel == kernel);
    CHECK(c.stacked_kernel == gdn::kPace1);
    CHECK(q4_gemv::q4_kernel(kernel).layout == q4_gemv::q4_kernel(gdn::kPace1).layout);
    CHECK(static_cast<bool>(q4_gemv::q4_kernel(kernel).launch_prepared));
  }
  CHECK(tw.pace_out1_ba.fold_ba_conv);
  CHECK_FALSE(tw.pace_out1_ba.fold_ba);
  CHECK(gdn::config_error(tw.pace_out1_ba, rg::qwen35_27b()) == "");
  CHECK(registry().has_variant(gdn::fused_step_variant(tw.pace_out1_ba)));
  for (const auto& c : {tw.fold_depth, tw.depth_all, tw.fold_pace, tw.pace_all, tw.pace_ilp, tw.pace_late, tw.pace_defer, tw.pace_out1, tw.pace_out1_s4, tw.pace_out1_late,
                        tw.pace_out1_defer, tw.pace_out1_l2, tw.pace_out1_ilp, tw.pace_out1_split, tw.pace_split_x2, tw.own_out4, tw.own_out8, tw.kc_out, tw.pace_span2, tw.pace_span3, tw.pace_span1x2, tw.pace_span2x2}) {
    CHECK(c.fold_ba);
    CHECK(registry().has_variant(gdn::fused_step_variant(c)));
    CHECK(gdn::config_error(c, rg::qwen35_27b()) == "");
  }
  // The span: pace_out1 with set_span at pace 2 and 3, named by its axis; refused where its needs are not met, naming them.
  {
    auto with = tw.pace_out1;
    with.span = 2;
    CHECK(gdn::fused_step_variant(tw.pace_span2) == gdn::fused_step_variant(with));
    CHECK(gdn::fused_step_variant(tw.pace_span2) == gdn::fused_step_variant(tw.pace_out1) + ",span=2");
    CHECK(tw.pace_span3.span == 3);
    CHECK(gdn::fused_step_variant(tw.pace_span1x2) == gdn::fused_step_variant(tw.pace_out1) + ",span=1x2");
    auto three = tw.pace_span1x2;
    three.span_per_sm = 3;
    CHECK(gdn::config_error(three, rg::qwen35_27b()).find("1 or 2") != std::string::npos);
    auto no_q8 = tw.pace_span2;
    no_q8.norm_q8 = false;
    CHECK(gdn::config_error(no_q8, rg::qwen35_27b()).find("set_norm_q8") != std::string::npos);
    auto unchained = tw.pace_span2;
    unchained.chain = false;
    CHECK(gdn::config_error(unchained, rg::qwen35_27b()).find("PDL chain") != std::string::npos);
    auto no_fold = tw.pace_span2;
    no_fold.fold_ba = false;
    CHECK(gdn::config_error(no_fold, rg::qwen35_27b()).find("set_fold_ba") != std::string::npos);
    auto rows4 = tw.pace_span2;
    rows4.q4_kernel = gdn::kPace1Defer4R4PerSm1;  // tiles-r4
    CHECK(gdn::config_error(rows4, rg::qwen35_27b()).find("tiles-r8") != std::string::npos);
    auto fast = tw.pace_span2;
    fast.span = 5;
    CHECK(gdn::config_error(fast, rg::qwen35_27b()).find("1 to 4") != std::string::npos);
    auto f32 = gdn::step_f32_candidate();
    f32.span = 2;
    CHECK(gdn::config_error(f32, rg::qwen35_27b()).find("f32 tier") != std::string::npos);
  }
  auto apart = base;
  apart.merged_in = false;
  CHECK(registry().has_variant(gdn::fused_step_variant(apart)));
  auto cluster = base;
  cluster.q4_kernel = gdn::kClusterQ4;
  cluster.norm_q8 = false;  // kClusterQ4 has no launch_prepared
  CHECK(registry().has_variant(gdn::fused_step_variant(cluster)));
  CHECK(gdn::config_error(cluster, rg::qwen35_27b()) == "");
  auto gated = base;
  gated.recurrence += ",norm=gated";
  gated.norm_q8 = false;  // the norm in the recurrence cannot write out_proj's x
  CHECK(gr::recurrence_kernel(gated.recurrence).gated_norm);
  CHECK(registry().has_variant(gdn::fused_step_variant(gated)));
  // candidate_twins() are these, one setting changed each.
  CHECK(gdn::fused_step_variant(tw.norm_gated) == gdn::fused_step_variant(gated));
  CHECK(gdn::fused_step_variant(tw.unchained) == gdn::fused_step_variant(unchained));
  CHECK(gdn::fused_step_variant(tw.apart) == gdn::fused_step_variant(apart));
  CHECK(gdn::fused_step_variant(tw.ring) == gdn::fused_step_variant(ring));
  CHECK(gdn::fused_step_variant(tw.cluster) == gdn::fused_step_variant(cluster));
  // out=prepared (set_norm_q8): the base has out_proj's x written by the gated norm, its twin out_own
  // not; refused on a kernel without launch_prepared, with the gated norm in the recurrence, and for dv % 32 != 0.
  auto own = base;
  own.norm_q8 = false;
  CHECK(gdn::fused_step_variant(tw.out_own) == gdn::fused_step_variant(own));
  CHECK(registry().has_variant(gdn::fused_step_variant(own)));
  const auto prepared = base;
  CHECK(gdn::fused_step_variant(prepared) == gdn::fused_step_variant(own) + ",out=prepared");
  CHECK(registry().has_variant(gdn::fused_step_variant(prepared)));
  CHECK(gdn::config_error(prepared, rg::qwen35_27b()) == "");
  auto prepared_raw = prepared;
  prepared_raw.q4_kernel = "q4_gemv/map=block-per-thread,dot=offset,rows=8";
  CHECK(gdn::config_error(prepared_raw, rg::qwen35_27b()).find("takes its x prepared") != std::string::npos);
  auto prepared_gated = prepared;
  prepared_gated.recurrence += ",norm=gated";
  CHECK(gdn::config_error(prepared_gated, rg::qwen35_27b()).find("a launch of its own") != std::string::npos);
  CHECK(gdn::config_error(prepared, rg::Geometry{256, 2, 6, 32, 48, 4, 1e-6}).find("dv = 48") != std::string::npos);
  CHECK(gdn::fused_step_variant(base).find("proj=map=packed+dot=q8-dp4a+grid=groups+xprep=warps+") != std::string::npos);
  CHECK(gdn::fused_step_variant(tw.fold_main) == gdn::fused_step_variant(base) + ",fold=ba-main");
  // fold=ba (the candidate) refused without the stacking, without the chain, with another b|a kernel or a stacked kernel without launch_prepared
  for (auto [mut, why] : std::vector<std::pair<std::function<void(gdn::FusedStepConfig&)>, std::string>>{
           {[](gdn::FusedStepConfig& c) { c.merged_in = false; }, "stacked input projections"},
           {[](gdn::FusedStepConfig& c) { c.chain = false; }, "PDL chain"},
           {[](gdn::FusedStepConfig& c) { c.ba = "f32_gemv/impl=split-row,pdl=off"; }, "split-row,pdl=on's code"},
           // the ring's xpf=l2 form (the ring itself takes its x prepared since 2026-12-05)
           {[](gdn::FusedStepConfig& c) { c.stacked_kernel = "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,xpf=l2,load=bulk,pdl=on,rows=8"; },
            "takes its x prepared"}}) {
    auto c = cand;
    mut(c);
    CAPTURE(why);
    CHECK(gdn::config_error(c, rg::qwen35_27b()).find(why) != std::string::npos);
  }
  // fold=ba-main (the twin fold_main): refused without the stacking or the chain, with fold=ba too, or on a
  // stacked kernel without f32 rows riding along.
  for (auto [mut, why] : std::vector<std::pair<std::function<void(gdn::FusedStepConfig&)>, std::string>>{
           {[](gdn::FusedStepConfig& c) { c.merged_in = false; }, "stacked input projections"},
           {[](gdn::FusedStepConfig& c) { c.chain = false; }, "PDL chain"},
           {[](gdn::FusedStepConfig& c) { c.fold_ba = true; }, "one of the two"},
           {[](gdn::FusedStepConfig& c) { c.stacked_kernel = gdn::kStackedRing; }, "f32 rows riding along"}}) {
    auto c = tw.fold_main;
    mut(c);
    CAPTURE(why);
    CHECK(gdn::config_error(c, rg::qwen35_27b()).find(why) != std::string::npos);
  }
  CHECK(gdn::fused_step_variant(tw.thread_prep).find("proj=map=packed+dot=q8-dp4a+grid=groups+xprep=launch+") != std::string::npos);
  // The f32 tier's candidate: its big three on warp-row,unroll=4,pdl=on (axis proj=), in_proj_qkv, in_proj_z and b|a as one
  // stacked launch, the q4 candidate's small kernels; its twins ba_own (b|a its own launch), apart (two launches) and plain
  // (apart, without pdl); all registered, taking the op's default geometry. Refused: an f32 kernel for the big three on the
  // q4 tier, an unknown one (named), the stacked launch on a kernel without one, the q4 tier's fold=ba and stacked kernel.
  {
    const auto f32c = gdn::step_f32_candidate();
    const auto f32t = gdn::f32_candidate_twins();
    CHECK(f32c.f32);
    CHECK(f32c.merged_in);
    CHECK(f32c.fold_ba_main);
    CHECK(f32c.recurrence == base.recurrence);
    CHECK(f32c.ba == base.ba);
    CHECK(f32c.chain);
    CHECK(gdn::fused_step_variant(f32c) == gdn::fused_step_variant(f32t.ba_own) + ",fold=ba-main");
    CHECK(gdn::fused_step_variant(f32t.u8).find("gdn_step/tier=f32,proj=impl=warp-row+unroll=8+pdl=on,in=qkvz,prep=fused,") == 0);
    CHECK(f32t.u8.fold_ba_main);
    CHECK(gdn::fused_step_variant(f32t.ba_own).find("gdn_step/tier=f32,proj=impl=warp-row+unroll=4+pdl=on,in=qkvz,prep=fused,") == 0);
    CHECK(gdn::fused_step_variant(f32t.apart).find("gdn_step/tier=f32,proj=impl=warp-row+unroll=4+pdl=on,prep=fused,") == 0);
    CHECK(gdn::fused_step_variant(f32t.plain).find("gdn_step/tier=f32,proj=impl=warp-row+unroll=4,prep=fused,") == 0);
    for (const auto& c : {f32c, f32t.u8, f32t.ba_own, f32t.apart, f32t.plain}) {
      CHECK(registry().has_variant(gdn::fused_step_variant(c)));
      CHECK(gdn::config_error(c, rg::qwen35_27b()) == "");
    }
    auto split = f32c;
    split.f32_kernel = "f32_gemv/impl=split-row,pdl=off";
    CHECK(gdn::config_error(split, rg::qwen35_27b()).find("stacked launch") != std::string::npos);
    auto loose = f32t.apart;
    loose.fold_ba_main = true;
    CHECK(gdn::config_error(loose, rg::qwen35_27b()).find("set_merged_in") != std::string::npos);
    auto prep = f32t.ba_own;
    prep.fold_ba = true;
    CHECK(gdn::config_error(prep, rg::qwen35_27b()).find("q4 tier's") != std::string::npos);
    auto q4k = base;
    q4k.f32_kernel = f32c.f32_kernel;
    CHECK(gdn::config_error(q4k, rg::qwen35_27b()).find("on the q4 tier") != std::string::npos);
    auto unknown = f32c;
    unknown.f32_kernel = "f32_gemv/impl=nope";
    CHECK_THROWS_WITH_AS(gdn::config_error(unknown, rg::qwen35_27b()), doctest::Contains("warp-row"), Error);
  }
  // fork=z: the candidate's and the f32 candidate's twins, named after them, taking the op's default geometry;
  // refused without the stacked input projections, with the stacked launch on a kernel of its own (its prep
  // would not write the x z reads) and on a q4 kernel that cannot take its x prepared.
  {
    const auto f32c = gdn::step_f32_candidate();
    const auto f32fork = gdn::f32_candidate_twins().fork_z;
    CHECK(gdn::fused_step_variant(tw.fork_z) == gdn::fused_step_variant(cand) + ",fork=z");
    CHECK(gdn::fused_step_variant(f32fork) == gdn::fused_step_variant(f32c) + ",fork=z");
    for (const auto& c : {tw.fork_z, f32fork}) {
      CHECK(registry().has_variant(gdn::fused_step_variant(c)));
      CHECK(gdn::config_error(c, rg::qwen35_27b()) == "");
    }
    for (auto [mut, why] : std::vector<std::pair<std::function<void(gdn::FusedStepConfig&)>, std::string>>{
             {[](gdn::FusedStepConfig& c) { c.merged_in = false, c.fold_ba = false; }, "needs them (set_merged_in"},
             {[](gdn::FusedStepConfig& c) { c.fold_ba = false, c.stacked_kernel = gdn::kStackedRing; }, "on the q4 variant itself"},
             {[](gdn::FusedStepConfig& c) { c.fold_ba = false, c.norm_q8 = false, c.q4_kernel = gdn::kClusterQ4; }, "takes its x prepared"}}) {
      auto c = tw.fork_z;
      mut(c);
      CAPTURE(why);
      CHECK(gdn::config_error(c, rg::qwen35_27b()).find(why) != std::string::npos);
    }
    // norm=last runs a head's norm one thread a column: refused where the recurrence's blocks are not dv threads
    // (dk 32 / rows 8 * cols 32 / 4 = 32 threads, dv 48), by config_error, before a device is touched.
    CHECK(gdn::config_error(gdn::f32_candidate_twins().norm_last, rg::Geometry{256, 2, 6, 32, 48, 4, 1e-6}).find("one thread a column") != std::string::npos);
    CHECK(gdn::config_error(gdn::f32_candidate_twins().norm_last, rg::qwen35_27b()) == "");
    // rows16: the candidate with every q4 launch on 16 rows a block, one setting changed, registered and valid.
    auto rows16 = gdn::candidate_twins().fold;
    rows16.q4_kernel = gdn::kWarpsQ4Rows16;
    CHECK(gdn::fused_step_variant(gdn::candidate_twins().rows16) == gdn::fused_step_variant(rows16));
    CHECK(gdn::fused_step_variant(rows16).find("rows=16") != std::string::npos);
    CHECK(registry().has_variant(gdn::fused_step_variant(rows16)));
    CHECK(gdn::config_error(rows16, rg::qwen35_27b()) == "");
    // out_smem: the candidate with out_proj on the shared-memory kernel, the stacked launch on the candidate's own.
    auto out_smem = gdn::candidate_twins().fold;
    out_smem.q4_kernel = gdn::kSmemGroupsQ4;
    out_smem.stacked_kernel = gdn::candidate_twins().fold.q4_kernel;
    CHECK(gdn::fused_step_variant(gdn::candidate_twins().out_smem) == gdn::fused_step_variant(out_smem));
    CHECK(registry().has_variant(gdn::fused_step_variant(out_smem)));
    CHECK(gdn::config_error(out_smem, rg::qwen35_27b()) == "");
    // warp1 / fold_main_warp1: the base and fold_main on the q4 kernel with one-warp prep blocks.
    for (auto [twin, of] : {std::pair{gdn::candidate_twins().warp1, gdn::candidate_twins().ba_own},
                            std::pair{gdn::candidate_twins().fold_main_warp1, gdn::candidate_twins().fold_main}}) {
      auto want = of;
      want.q4_kernel = gdn::kWarpQ4;
      CHECK(gdn::fused_step_variant(twin) == gdn::fused_step_variant(want));
      CHECK(gdn::fused_step_variant(twin).find("xprep=warp+") != std::string::npos);
      CHECK(registry().has_variant(gdn::fused_step_variant(twin)));
      CHECK(gdn::config_error(twin, rg::qwen35_27b()) == "");
    }
    auto f32apart = f32fork;
    f32apart.merged_in = f32apart.fold_ba_main = false;
    CHECK(gdn::config_error(f32apart, rg::qwen35_27b()).find("needs them (set_merged_in") != std::string::npos);
  }
  // pf=out and pf=out-early: the candidate's own twins, named after it; refused on the f32 tier and on a q4
  // kernel without a packed layout (the prefetch reads the packed copy's bytes).
  CHECK(gdn::fused_step_variant(tw.pf_out) == gdn::fused_step_variant(cand) + ",pf=out");
  CHECK(gdn::fused_step_variant(tw.pf_out_early) == gdn::fused_step_variant(cand) + ",pf=out-early");
  CHECK(registry().has_variant(gdn::fused_step_variant(tw.pf_out)));
  CHECK(registry().has_variant(gdn::fused_step_variant(tw.pf_out_early)));
  {
    gdn::FusedStepConfig raw{false, "q4_gemv/map=block-per-thread,dot=offset,rows=8", "", "", false, false};
    raw.l2_prefetch = gdn::kernels::L2Prefetch::after;
    CHECK(gdn::config_error(raw, rg::qwen35_27b()).find("packed layout") != std::string::npos);
    gdn::FusedStepConfig f32{true};
    f32.l2_prefetch = gdn::kernels::L2Prefetch::before;
    CHECK(gdn::config_error(f32, rg::qwen35_27b()).find("the f32 tier") != std::string::npos);
    CHECK(gdn::GdnDevice::l2_prefetch_error(gdn::kernels::L2Prefetch::after, false, &q4_gemv::q4_kernel(cand.q4_kernel)).find("set_fused_prep") != std::string::npos);
    CHECK(gdn::GdnDevice::l2_prefetch_error(gdn::kernels::L2Prefetch::none, false, nullptr) == "");
  }
  for (const auto* t : {&tw.norm_gated, &tw.unchained, &tw.apart, &tw.ring, &tw.cluster, &tw.out_own, &tw.thread_prep, &tw.fold_main, &tw.rec_norm, &tw.ba_own, &tw.pf_out, &tw.pf_out_early, &tw.fork_z}) {
    CAPTURE(gdn::fused_step_variant(*t));
    CHECK(gdn::config_error(*t, rg::qwen35_27b()) == "");
  }
  // The stacking needs conv_dim % 4 == 0 (z 16-byte aligned after xc): 2*33 + 4*32 = 194 is refused, naming it.
  const gdn::FusedStepConfig stacked{false, base.q4_kernel, "", "", false, true};
  CHECK(gdn::config_error(stacked, rg::Geometry{256, 1, 4, 33, 32, 4, 1e-6}).find("conv_dim 194") != std::string::npos);
  CHECK(gdn::config_error(stacked, rg::qwen35_27b()) == "");
  // The stacked launch on a kernel of its own is refused without the stacking or on a raw-layout kernel; one of
  // another layout than the q4 kernel's is taken (rows=4: tiles-r4 beside the candidate's tiles-r8; its copy is
  // packed in its own layout).
  auto loose = ring;
  loose.merged_in = false;
  CHECK(gdn::config_error(loose, rg::qwen35_27b()).find("without the stacked input projections") != std::string::npos);
  auto other = ring;
  other.stacked_kernel = "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=launch,pdl=on,rows=4";
  CHECK(gdn::config_error(other, rg::qwen35_27b()) == "");
  auto raw = ring;
  raw.stacked_kernel = gdn::kDefaultQ4Variant;
  CHECK(gdn::config_error(raw, rg::qwen35_27b()).find("raw layout") != std::string::npos);
  // A variant refuses, naming its kernel, a geometry one of the kernels it names cannot take: the
  // recurrence impl=fused,cols=16,rows=8 (8 row slots a warp) does not fit dk = 32 (4 row groups),
  // the op's quick geometry; the op's default (Qwen3.5-27B) it takes. The candidate's recurrence
  // (cols=32: 4 row slots a warp) takes both, but its out=prepared needs dv % 32 == 0, which the quick
  // geometry (dv = 48) is not: the candidate refuses it, naming why, and its twin out_own takes it.
  const Op& op = registry().op("gdn_step");
  Problem def = op.default_problem(Dist::uniform, 1), quick = def;
  for (const auto& d : op.params)
    if (!d.quick.empty()) quick.params[d.name] = d.quick.front();
  const auto cols16 = std::find_if(cs.begin(), cs.end(), [](const auto& c) { return c.recurrence.find("cols=16,rows=8") != std::string::npos; });
  REQUIRE(cols16 != cs.end());
  const Variant& v16 = registry().variant(gdn::fused_step_variant(*cols16));
  CHECK(v16.can_implement(def) == "");
  CHECK(v16.can_implement(quick).find(cols16->recurrence) != std::string::npos);
  for (const auto& c : {cand, base}) {
    const Variant& v = registry().variant(gdn::fused_step_variant(c));
    CHECK(v.can_implement(def) == "");
    CHECK(v.can_implement(quick).find("dv = 48") != std::string::npos);
  }
  CHECK(registry().variant(gdn::fused_step_variant(tw.out_own)).can_implement(quick) == "");
  CHECK(registry().variant(gdn::fused_step_variant({true, "", "", "", false})).can_implement(quick) == "");
}

TEST_CASE("GDN breakdown, the gated norm in the recurrence: recurrence_norm in place of two operators, the same weights + state, z in and onn out") {
  for (const auto& g : {rg::qwen35_27b(), rg::Geometry{256, 2, 6, 32, 48, 4, 1e-6}})
    for (bool q4 : {false, true})
      for (bool prep : {false, true}) {
        CAPTURE(g.str());
        CAPTURE(q4);
        CAPTURE(prep);
        const auto base = gdn::step_operator_bytes(g, q4, prep), fused = gdn::step_operator_bytes(g, q4, prep, true);
        REQUIRE(fused.size() + 1 == base.size());
        double model = 0;
        for (const auto& m : fused) model += m.bytes.model();
        CHECK(model == gdn::step_bytes(g, q4));
        const auto& rn = bytes_of(fused, gdn::kRecurrenceNorm);
        CHECK(rn.state == bytes_of(base, "recurrence").state);
        CHECK(rn.weights == bytes_of(base, "gated_norm").weights);
        CHECK(rn.act == bytes_of(base, "recurrence").act + 4.0 * 2 * g.value_dim());
        for (const auto& m : fused) CHECK(std::string(m.name) != "gated_norm");
        CHECK(std::string(fused.back().name) == "out_proj");
      }
}

TEST_CASE("GDN breakdown, prep=conv: conv_recurrence in place of conv_norm_bg and the recurrence, the same weights + state, the history's write moved to the gated norm") {
  for (const auto& g : {rg::qwen35_27b(), rg::Geometry{256, 2, 6, 32, 48, 4, 1e-6}, rg::Geometry{256, 4, 4, 40, 40, 1, 1e-5}})
    for (bool q4 : {false, true})
      for (bool merged : {false, true}) {
        CAPTURE(g.str());
        CAPTURE(q4);
        CAPTURE(merged);
        const auto base = gdn::step_operator_bytes(g, q4, true, false, merged, merged), conv = gdn::step_operator_bytes(g, q4, true, false, merged, merged, false, true);
        REQUIRE(conv.size() + 1 == base.size());
        double model = 0;
        for (const auto& m : conv) model += m.bytes.model();
        CHECK(model == gdn::step_bytes(g, q4));
        const double C = g.conv_dim(), K = g.key_dim(), V = g.value_dim(), nv = g.nv, hist = 4.0 * (g.ck - 1) * C;
        const auto& cr = bytes_of(conv, gdn::kConvRecurrence);
        CHECK(cr.weights == bytes_of(base, "conv_norm_bg").weights + bytes_of(base, "recurrence").weights);
        CHECK(cr.state == bytes_of(base, "recurrence").state + hist);  // S both ways, the history read
        CHECK(cr.act == 4.0 * (C + 2 * nv + C + 2 * K + 2 * nv + V));  // xc, b|a in; xcv, q, k, beta, g, o out
        const auto& gn = bytes_of(conv, "gated_norm");
        CHECK(gn.state == bytes_of(base, "gated_norm").state + hist);  // the history written
        CHECK(gn.act == bytes_of(base, "gated_norm").act + 4.0 * (1 + std::max(0, g.ck - 2)) * C);  // xc and the moved frames read again
        for (const auto& m : conv) {
          CHECK(std::string(m.name) != "conv_norm_bg");
          CHECK(std::string(m.name) != "recurrence");
        }
        CHECK(std::string(conv.back().name) == "out_proj");
      }
  // Not on the nine-operator list, nor with the gated norm in the recurrence.
  CHECK_THROWS_WITH_AS(gdn::step_operator_bytes(rg::qwen35_27b(), true, false, false, false, false, false, true), doctest::Contains("conv_rec"), Error);
  CHECK_THROWS_WITH_AS(gdn::step_operator_bytes(rg::qwen35_27b(), true, true, true, false, false, false, true), doctest::Contains("conv_rec"), Error);
}

TEST_CASE("GDN breakdown, fold=ba-conv: in_proj_ba inside conv_norm_bg as conv_norm_ba, the same weights + state, h read there too") {
  for (const auto& g : {rg::qwen35_27b(), rg::Geometry{256, 2, 6, 32, 48, 4, 1e-6}})
    for (bool fork : {false, true}) {
      CAPTURE(g.str());
      CAPTURE(fork);
      const auto base = gdn::step_operator_bytes(g, true, true, false, true, false, fork);
      const auto conv = gdn::step_operator_bytes(g, true, true, false, true, false, fork, false, false, true);
      REQUIRE(conv.size() + 1 == base.size());
      double model = 0;
      for (const auto& m : conv) model += m.bytes.model();
      CHECK(model == gdn::step_bytes(g, true));
      const double H = g.hidden, nv = g.nv;
      const auto& cb = bytes_of(conv, gdn::kConvNormBa);
      CHECK(cb.weights == bytes_of(base, "conv_norm_bg").weights + 4.0 * 2 * nv * H);  // W_ba beside the fused prep's weights
      CHECK(cb.state == bytes_of(base, "conv_norm_bg").state);
      CHECK(cb.act == bytes_of(base, "conv_norm_bg").act + 4.0 * H);  // h in; b|a written instead of read
      for (const auto& m : conv) {
        CHECK(std::string(m.name) != "in_proj_ba");
        CHECK(std::string(m.name) != "conv_norm_bg");
      }
      CHECK(std::string(conv[0].name) == (fork ? gdn::kForkStacked : gdn::kStackedInProj));
    }
  // Only with the stacked projections and the fused prep, without fold=ba and prep=conv.
  CHECK_THROWS_WITH_AS(gdn::step_operator_bytes(rg::qwen35_27b(), true, true, false, false, false, false, false, false, true), doctest::Contains("ba_conv"), Error);
  CHECK_THROWS_WITH_AS(gdn::step_operator_bytes(rg::qwen35_27b(), true, true, false, true, true, false, false, false, true), doctest::Contains("ba_conv"), Error);
  CHECK_THROWS_WITH_AS(gdn::step_operator_bytes(rg::qwen35_27b(), true, false, false, true, false, false, false, false, true), doctest::Contains("ba_conv"), Error);
}

TEST_CASE("GDN breakdown, prep=conv with hist=ring: conv_recurrence reads ck-1 frames and writes one, the gated norm moves nothing, and with the gated norm in it conv_recurrence_norm and two operators fewer") {
  for (const auto& g : {rg::qwen35_27b(), rg::Geometry{256, 2, 6, 32, 48, 4, 1e-6}, rg::Geometry{256, 4, 4, 40, 40, 1, 1e-5}})
    for (bool q4 : {false, true})
      for (bool merged : {false, true}) {
        CAPTURE(g.str());
        CAPTURE(q4);
        CAPTURE(merged);
        const auto fused = gdn::step_operator_bytes(g, q4, true, false, merged, merged);
        const auto ring = gdn::step_operator_bytes(g, q4, true, false, merged, merged, false, true, true);
        const auto four = gdn::step_operator_bytes(g, q4, true, true, merged, merged, false, true, true);
        REQUIRE(ring.size() + 1 == fused.size());
        REQUIRE(four.size() + 2 == fused.size());
        const double C = g.conv_dim(), K = g.key_dim(), V = g.value_dim(), nv = g.nv;
        const double frames = g.ck > 1 ? 4.0 * g.ck * C : 0.0;  // ck-1 frames read, the newest written; no history at ck = 1
        const auto& cr = bytes_of(ring, gdn::kConvRecurrence);
        CHECK(cr.weights == bytes_of(fused, "conv_norm_bg").weights + bytes_of(fused, "recurrence").weights);
        CHECK(cr.state == bytes_of(fused, "recurrence").state + frames);
        CHECK(cr.act == 4.0 * (C + 2 * nv + C + 2 * K + 2 * nv + V));
        const auto& gn = bytes_of(ring, "gated_norm");  // as on the fused prep's list: nothing shifted
        CHECK(gn.weights == bytes_of(fused, "gated_norm").weights);
        CHECK(gn.state == bytes_of(fused, "gated_norm").state);
        CHECK(gn.act == bytes_of(fused, "gated_norm").act);
        const auto& crn = bytes_of(four, gdn::kConvRecurrenceNorm);
        CHECK(crn.weights == cr.weights + bytes_of(fused, "gated_norm").weights);
        CHECK(crn.state == cr.state);
        CHECK(crn.act == cr.act + 4.0 * 2 * V);  // z in, onn out
        // Every byte of the model but the history's: (ck-2) conv_dim floats fewer than read and written whole (ck >= 2)
        for (const auto* ms : {&ring, &four}) {
          double model = 0;
          for (const auto& m : *ms) model += m.bytes.model();
          CHECK(model == doctest::Approx(gdn::step_bytes(g, q4) - (g.ck > 1 ? 4.0 * (g.ck - 2) * C : 0.0)).epsilon(1e-12));
          for (const auto& m : *ms) {
            CHECK(std::string(m.name) != "conv_norm_bg");
            CHECK(std::string(m.name) != "recurrence");
          }
          CHECK(std::string(ms->back().name) == "out_proj");
        }
        for (const auto& m : four) CHECK(std::string(m.name) != "gated_norm");
        if (merged) {  // in_proj_qkvz_ba (in_prep_ba and the stacked kernel: two launches), conv_recurrence_norm, out_proj: four launches
          REQUIRE(four.size() == 3);
          CHECK(std::string(four[0].name) == gdn::kStackedInProjBa);
          CHECK(std::string(four[1].name) == gdn::kConvRecurrenceNorm);
        }
      }
  // The gated norm in the recurrence with prep=conv only with the ring; the ring only with prep=conv.
  CHECK_THROWS_WITH_AS(gdn::step_operator_bytes(rg::qwen35_27b(), true, true, true, false, false, false, true, false), doctest::Contains("hist_ring"), Error);
  CHECK_THROWS_WITH_AS(gdn::step_operator_bytes(rg::qwen35_27b(), true, true, false, false, false, false, false, true), doctest::Contains("hist_ring"), Error);
}

TEST_CASE("GDN step configurations with hist=ring: the four-launch twins are registered, config_error takes them, the batched step refuses the ring") {
  const auto t = gdn::candidate_twins();
  for (const auto& c : {t.conv_ring, t.four, gdn::f32_candidate_twins().four}) {
    const std::string n = gdn::fused_step_variant(c);
    CAPTURE(n);
    CHECK(registry().has_variant(n));
    CHECK(gdn::config_error(c, rg::qwen35_27b()) == "");
    const auto& rk = gr::recurrence_kernel(c.recurrence);
    CHECK(rk.hist_ring);
    CHECK(gdn::GdnDevice::conv_prep_error(&rk, true, gdn::kernels::L2Prefetch::none) == "");
    CHECK(gdn::GdnDevice::conv_prep_error(&rk, false, gdn::kernels::L2Prefetch::none).find("set_fused_prep(true)") != std::string::npos);
    CHECK(gdn::GdnDevice::batch_error(gdn::kWarpsQ4, c.recurrence, true, 4).find("hist=ring") != std::string::npos);
  }
  // The candidate with the ring's recurrence differs from it in the recurrence alone; four is conv_ring with norm=last.
  CHECK(t.four.recurrence == gdn::kRecFour);
  CHECK(t.conv_ring.recurrence == gdn::kRecConvRing);
  auto back = t.four;
  back.recurrence = t.fold.recurrence;
  CHECK(gdn::fused_step_variant(back) == gdn::fused_step_variant(t.fold));
  // prep=conv without the ring still refuses the gated norm as its epilogue: nothing would shift the history.
  const auto& plain_last = gr::recurrence_kernel("gdn_recurrence/impl=fused,cols=32,rows=8,pdl=early,norm=last");
  CHECK(gdn::GdnDevice::conv_prep_error(&plain_last, true, gdn::kernels::L2Prefetch::none) == "");  // no prep=conv: nothing to say
  CHECK(gdn::GdnDevice::batch_error(gdn::kWarpsQ4, gdn::kRecConv, true, 4) == "");  // the shifted prep=conv batches (its prep is not asked there)
}

TEST_CASE("GDN breakdown, the stacked input projections: in_proj_qkvz in place of in_proj_qkv and in_proj_z, their weights, h read once") {
  for (const auto& g : {rg::qwen35_27b(), rg::Geometry{256, 2, 6, 32, 48, 4, 1e-6}})
    for (bool q4 : {false, true})
      for (bool prep : {false, true})
        for (bool norm : {false, true}) {
          CAPTURE(q4);
          CAPTURE(prep);
          CAPTURE(norm);
          const auto apart = gdn::step_operator_bytes(g, q4, prep, norm), one = gdn::step_operator_bytes(g, q4, prep, norm, true);
          REQUIRE(one.size() + 1 == apart.size());
          CHECK(std::string(one[0].name) == gdn::kStackedInProj);
          for (std::size_t i = 1; i < one.size(); ++i) {
            CHECK(std::string(one[i].name) == apart[i + 1].name);
            CHECK(one[i].bytes.total() == apart[i + 1].bytes.total());
          }
          const double H = g.hidden, C = g.conv_dim(), V = g.value_dim();
          CHECK(one[0].bytes.weights == apart[0].bytes.weights + apart[1].bytes.weights);
          CHECK(one[0].bytes.state == 0);
          CHECK(one[0].bytes.act == 4.0 * (H + C + V));
          CHECK(one[0].bytes.act == apart[0].bytes.act + apart[1].bytes.act - 4.0 * H);  // h read once, not twice
          // fold=ba: in_proj_ba joins it, h still read once, b|a written; the sum stays the step's model
          const auto folded = gdn::step_operator_bytes(g, q4, prep, norm, true, true);
          REQUIRE(folded.size() + 1 == one.size());
          CHECK(std::string(folded[0].name) == gdn::kStackedInProjBa);
          CHECK(folded[0].bytes.weights == one[0].bytes.weights + one[1].bytes.weights);
          CHECK(folded[0].bytes.act == 4.0 * (H + C + V + 2 * g.nv));
          for (std::size_t i = 1; i < folded.size(); ++i) CHECK(std::string(folded[i].name) == one[i + 1].name);
          double model = 0;
          for (const auto& m : folded) model += m.bytes.model();
          CHECK(model == gdn::step_bytes(g, q4));
          // fork=z: in_proj_z back out of the stacked operator, right after it, with its bytes of the nine
          // (h read again); the stacked one keeps W_qkv (and W_b|a), h in, xc (and b|a) out; the rest unchanged
          for (bool fold : {false, true}) {
            CAPTURE(fold);
            const auto joined = fold ? folded : one, forked = gdn::step_operator_bytes(g, q4, prep, norm, true, fold, true);
            REQUIRE(forked.size() == joined.size() + 1);
            CHECK(std::string(forked[0].name) == (fold ? gdn::kForkStackedBa : gdn::kForkStacked));
            CHECK(forked[0].bytes.weights == apart[0].bytes.weights + (fold ? apart[2].bytes.weights : 0.0));
            CHECK(forked[0].bytes.act == 4.0 * (H + C + (fold ? 2 * g.nv : 0)));
            CHECK(std::string(forked[1].name) == "in_proj_z");
            CHECK(forked[1].bytes.weights == apart[1].bytes.weights);
            CHECK(forked[1].bytes.act == apart[1].bytes.act);
            for (std::size_t i = 2; i < forked.size(); ++i) {
              CHECK(std::string(forked[i].name) == joined[i - 1].name);
              CHECK(forked[i].bytes.total() == joined[i - 1].bytes.total());
            }
            double sum = 0;
            for (const auto& m : forked) sum += m.bytes.model();
            CHECK(sum == gdn::step_bytes(g, q4));
          }
        }
}
