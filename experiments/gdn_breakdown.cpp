// gdn-step-breakdown (issue 14): each operator's time inside the GDN decode step in stream mode, with
// its bytes and % of its floor, per tier (f32 and q4), against the whole step timed the same way.
//
// The operators are GdnDevice::step_operators(): the list enqueue_step itself runs, so what is timed
// here is exactly the step's launches, not a copy of the step (tests/gpu/test_gdn_breakdown.cpp holds
// the list bitwise equal to the step). Per tier, one GdnDevice at the Qwen3.5-27B geometry (--quick: the
// small one) holds nl layers loaded with the SAME weights in DISTINCT buffers (f32: load_f32 per layer;
// q4: the codes put under three keys per layer). Operator i is timed as the harness times a race in
// stream mode: one CUDA graph launching operator i for layer 0, 1, ..., nl-1 (repeated up to the
// harness's minimum launches), read flush before each repetition, time per launch = graph time /
// launches; the whole step is the nine operators of layer 0, then of layer 1, ... the same way. Every
// subject of a tier is timed in one interleaved run (Timer::time_interleaved), so drift hits them alike.
//
// nl: enough layers that each operator's rotation over them exceeds 3x the L2 (Timer::copies_for,
// whose cap of 64 is the harness's: tiny operators cannot be made cold this way), within half the free
// device memory and 16 GB. The big projections and the recurrence's S then read cold; the b|a mat-vec,
// the conv history, the norms and beta/g do not (each record says: rotation_bytes, cold). At
// Qwen3.5-27B that is 34 layers in the f32 tier (~16 GB) and 64 in the q4 tier (~4.7 GB).
//
// Bytes: step_operator_bytes() (variants/gdn/step_bytes.hpp): weights + state (their sum over the
// operators is gdn_step's byte model, tests/cpu/test_gdn_breakdown.cpp) and act, the activations a
// launch of its own reads and writes. floor = (weights + state + act) / the run's read ceiling;
// % of floor = floor / median. The whole step's floor counts h in and y out as its act.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common.hpp"
#include "gdn/step_bytes.hpp"
#include "gdn/step_op.hpp"
#include "gdn_common.hpp"
#include "klab/cuda.hpp"
#include "klab/error.hpp"

namespace klab::experiments {

namespace {

using gdn::GdnDevice;
using rg::Geometry;

// The layers' weights take at most half the free device memory and at most 16 GB: loading them is
// host-to-device copies (~30 GB for 64 f32 layers at Qwen3.5-27B would cost seconds for nothing: at
// 34 f32 layers S already rotates over 214 MB, > 3x the L2, and b|a is not cold at 64 either).
constexpr double kMemShare = 0.5, kMaxWeightBytes = 16e9;
// The sum of the operators' medians against the whole step's: a graph of one operator repeated has
// no neighbour to overlap with, the step's operators do; beyond 10% the breakdown would not explain
// the step.
constexpr double kSumTolerance = 0.10;
// The reference point for the q4 step (microseconds per layer and token).
constexpr double kQ4StepUs = 20.0;

const Claim kPartsSum{"parts-sum-to-step",
                      "per tier (f32, q4, q4 with the fused prep), the operators' stream-mode medians sum to within 10% of the whole step's median (the breakdown accounts for the step)"};
const Claim kCandidate20{"candidate-20us",
                         "the step's candidate (gdn::step_candidate) at the Qwen3.5-27B geometry takes at most 20 us per layer in stream mode (issue 14's goal; not evaluated under --quick)"};
const Claim kQ4Step20{"q4-step-20us",
                      "the q4 step at the Qwen3.5-27B geometry takes at most 20 us per layer in stream mode (the issue's reference point; not evaluated under --quick)"};

// Resident device bytes per layer: weights and state (the model's share), plus the intermediates;
// packed: the q4 tier on a kernel of its own layout, whose pool keeps a packed copy of the big three
// beside the raw ones, and the stacked copy of in_proj_qkv and in_proj_z (GdnDevice::set_merged_in).
double layer_bytes(const Geometry& g, bool q4, bool packed = false) {
  double b = 0;
  for (const auto& m : gdn::step_operator_bytes(g, q4)) b += m.bytes.total();
  if (packed) b += 0.5625 * double(g.hidden) * (2.0 * double(g.conv_dim()) + 2.0 * double(g.value_dim()) + double(g.value_dim()));
  return b;
}

int layers_for(Context& ctx, const Geometry& g, bool q4, bool packed) {
  int need = 2;
  for (const auto& m : gdn::step_operator_bytes(g, q4)) need = std::max(need, ctx.timer().copies_for(m.bytes.total()));
  std::size_t free = 0, total = 0;
  KLAB_CUDA(cudaMemGetInfo(&free, &total));
  const int fit = int(std::min(kMemShare * double(free), kMaxWeightBytes) / layer_bytes(g, q4, packed));
  require(fit >= 2, "gdn-step-breakdown: two layers of " + g.str() + fmt(" (%.0f MB each) do not fit in half the free device memory (%.0f MB) or 16 GB",
                                                                         layer_bytes(g, q4) / 1e6, double(free) / 1e6));
  return std::min(need, fit);
}

struct Row {
  std::string name;
  gdn::OperatorBytes bytes;
  Timing t;
  GraphNodes nodes;
};

// The tiers: "f32", "q4" (the default q4 kernel), "q4-fused-prep" (beta/g, conv and the q/k norm as
// one launch, GdnDevice::set_fused_prep: seven operators) and "q4-candidate" (gdn::step_candidate(),
// applied whole: its kernels, the stacked input projections, the PDL chain; its operators overlap in
// the step, so their sum may exceed the step's time: the claim parts-sum-to-step does not count it),
// and "f32-candidate" (gdn::step_f32_candidate(), the same way: its big three on their own kernel,
// set before the layers load, and in one stacked launch with b|a's rows); "q4-fork" and "f32-fork":
// fold's and the f32 candidate's fork=z twins (in_proj_z an operator of its own; the step runs it on its branch; fold is
// candidate_twins().fold, the q4 candidate until 2026-12-06).
void run_tier(Context& ctx, const Geometry& g, const rg::LayerWeights& w, const rg::Q4Projections* q, const std::string& tier) {
  const bool q4 = q != nullptr, q4_candidate = tier == "q4-candidate" || tier == "q4-fork", f32_candidate = tier == "f32-candidate" || tier == "f32-fork";
  const bool candidate = q4_candidate || f32_candidate;  // chained: the operators overlap
  Timer& timer = ctx.timer();
  const cudaStream_t s = timer.stream();
  const int nl = layers_for(ctx, g, q4, q4_candidate);
  ctx.log(tier + ": " + g.str() + ", " + std::to_string(nl) + " layers of the same weights in distinct buffers" +
          fmt(" (%.1f GB)", nl * layer_bytes(g, q4, q4_candidate) / 1e9));
  GdnDevice dev(g, nl);
  dev.set_stream(s);
  dev.set_fused_prep(tier == "q4-fused-prep");
  // before loading: use_q4 packs and stacks each layer once; an f32 layer keeps the f32 kernel it was loaded with
  if (q4_candidate) gdn::apply(tier == "q4-fork" ? gdn::candidate_twins().fork_z : gdn::step_candidate(), dev);
  if (f32_candidate) gdn::apply(tier == "f32-fork" ? gdn::f32_candidate_twins().fork_z : gdn::step_f32_candidate(), dev);
  if (q4) {
    if (!q4_candidate) dev.set_q4_variant(gdn::kDefaultQ4Variant);
    for (int l = 0; l < nl; ++l) {
      put_all(dev.q4_pool(), *q, 3 * l + 1, 3 * l + 2, 3 * l + 3);
      if (auto why = dev.load_q4(l, w, 3 * l + 1, 3 * l + 2, 3 * l + 3); !why.empty()) throw Error("gdn-step-breakdown: " + why);
    }
  } else {
    for (int l = 0; l < nl; ++l) dev.load_f32(l, w);
  }
  // One input for every layer (hot, as a layer's input is: the previous layer just wrote it).
  auto d_h = DeviceBuffer<float>::from(make_inputs(g, 1, ctx.options().seed));
  DeviceBuffer<float> d_y(std::size_t(g.hidden));
  std::vector<std::vector<GdnDevice::StepOperator>> ops;
  for (int l = 0; l < nl; ++l) ops.push_back(dev.step_operators(l, d_h.get(), d_y.get()));
  // One step of every layer first: every intermediate an operator reads is a real one, not poison.
  for (const auto& layer : ops)
    for (const auto& op : layer) op.enqueue(s);
  KLAB_CUDA(cudaStreamSynchronize(s));

  const std::size_t nops = ops.front().size();
  std::vector<Row> rows(nops + 1);
  std::vector<std::unique_ptr<Timer::Subject>> subs;
  TimingOptions opt = ctx.options().timing();
  for (std::size_t i = 0; i <= nops; ++i) {
    std::vector<Body> bodies;
    for (const auto& layer : ops) {
      if (i < nops) bodies.push_back([op = &layer[i]](cudaStream_t st) { op->enqueue(st); });
      else bodies.push_back([all = &layer, &dev](cudaStream_t st) { dev.enqueue_operators(*all, st); });  // as the step runs them (fork=z: z on its branch)
    }
    Row& r = rows[i];
    r.name = i < nops ? ops[0][i].name : "step";
    if (i < nops) r.bytes = ops[0][i].bytes;
    r.nodes = graph_nodes(bodies.front(), s);
    std::string why;
    subs.push_back(timer.stream_subject(bodies, opt, {}, why));
    if (!subs.back()) throw Error("gdn-step-breakdown: " + tier + " " + r.name + ": " + why);
  }
  // The whole step: the operators' weights and state (together gdn_step's byte model, step_bytes()),
  // and as its act only h in and y out.
  for (std::size_t i = 0; i < nops; ++i) {
    rows[nops].bytes.weights += rows[i].bytes.weights;
    rows[nops].bytes.state += rows[i].bytes.state;
  }
  rows[nops].bytes.act = 8.0 * g.hidden;

  std::vector<Timer::Subject*> ptrs;
  for (auto& sub : subs) ptrs.push_back(sub.get());
  const auto times = timer.time_interleaved(ptrs, opt);
  for (std::size_t i = 0; i <= nops; ++i) rows[i].t = times[i];

  const double gbps = ctx.ceiling().read_gbps, l2 = double(ctx.device().l2_bytes);
  const double step_us = rows[nops].t.summary.median * 1e3;
  double sum_us = 0;
  for (std::size_t i = 0; i < nops; ++i) sum_us += rows[i].t.summary.median * 1e3;
  for (std::size_t i = 0; i <= nops; ++i) {
    const Row& r = rows[i];
    const bool whole = i == nops;
    const double us = r.t.summary.median * 1e3;
    const Interval ci = median_ci95(r.t.kept_ms, ctx.options().seed);
    const double floor_us = r.bytes.total() / (gbps * 1e3);
    auto rec = ctx.record("gdn_breakdown");
    rec["tier"] = tier;
    rec["operator"] = r.name;
    rec["index"] = i;
    rec["whole"] = whole;
    rec["geometry"] = to_json(g);
    rec["projections"] = dev.describe(0);
    rec["recurrence"] = dev.recurrence_variant();
    rec["fused_prep"] = dev.fused_prep();
    rec["merged_in"] = dev.merged_in();
    rec["pdl_chain"] = dev.pdl_chain();
    rec["ba"] = dev.ba_variant();
    rec["layers"] = nl;
    rec["launches"] = r.t.launches;
    rec["kernels"] = r.nodes.kernels;
    rec["graph_nodes"] = r.nodes.total;
    rec["median_us"] = us;
    rec["ci95_lo_us"] = ci.lo * 1e3;
    rec["ci95_hi_us"] = ci.hi * 1e3;
    rec["bytes"] = r.bytes.model();
    rec["weight_bytes"] = r.bytes.weights;
    rec["state_bytes"] = r.bytes.state;
    rec["act_bytes"] = r.bytes.act;
    rec["ceiling_gbps"] = gbps;
    rec["floor_us"] = floor_us;
    rec["pct_floor"] = 100.0 * floor_us / us;
    rec["share_of_step"] = us / step_us;
    rec["rotation_bytes"] = nl * r.bytes.total();
    rec["cold"] = nl * r.bytes.total() >= 3.0 * l2;
    if (whole) {
      rec["sum_of_operators_us"] = sum_us;
      rec["step_model_bytes"] = gdn::step_bytes(g, q4);  // gdn_step's traffic per token: equals bytes
    }
    rec["timing"] = to_json(r.t);
    ctx.add(std::move(rec));
    ctx.log(tier + " " + r.name + fmt(": %.2f us (95%% CI %.2f..%.2f), %.1f%% of floor", us, ci.lo * 1e3, ci.hi * 1e3, 100.0 * floor_us / us) +
            fmt(", %.1f%% of the step", 100.0 * us / step_us));
  }
  const double ratio = sum_us / step_us;
  if (candidate)
    ctx.log(tier + fmt(": operators sum to %.2f us, the whole step %.2f us (x%.3f): the chain overlaps them", sum_us, step_us, ratio));
  else
    ctx.claim(kPartsSum).settle(tier, std::abs(ratio - 1.0) <= kSumTolerance,
                                tier + fmt(": operators sum to %.2f us, the whole step %.2f us (x%.3f)", sum_us, step_us, ratio));
  if (tier == "q4-candidate" && !ctx.options().quick)
    ctx.claim(kCandidate20).set(step_us <= kQ4StepUs, fmt("the candidate's step %.2f us per layer in stream mode (%.0f layers rotating), reference point %.0f us; ", step_us,
                                                          double(nl), kQ4StepUs) + dev.describe(0) + ", " + dev.recurrence_variant() + ", b|a " + dev.ba_variant());
  if (tier == "q4" && !ctx.options().quick)
    ctx.claim(kQ4Step20).set(step_us <= kQ4StepUs, fmt("q4 step %.2f us per layer in stream mode (%.0f layers rotating), reference point %.0f us", step_us, double(nl), kQ4StepUs) +
                                                   "; q4 kernel " + dev.q4_variant());
}

void run_breakdown(Context& ctx) {
  const Geometry g = geometry_for(ctx);
  if (auto why = rg::q4_geometry_error(g); !why.empty()) throw Error("gdn-step-breakdown: no q4 tier for " + g.str() + ": " + why);
  ctx.claim(kPartsSum).needs({"f32", "q4", "q4-fused-prep"});
  const auto w = rg::random_weights(g, ctx.options().seed);
  run_tier(ctx, g, w, nullptr, "f32");
  if (auto why = gdn::config_error(gdn::step_f32_candidate(), g); !why.empty())
    ctx.skip("gdn-step-breakdown f32-candidate on " + g.str(), why);
  else
    for (const char* t : {"f32-candidate", "f32-fork"}) run_tier(ctx, g, w, nullptr, t);
  const auto q = rg::quantize_projections(w);
  run_tier(ctx, g, w, &q, "q4");
  run_tier(ctx, g, w, &q, "q4-fused-prep");
  if (auto why = gdn::config_error(gdn::step_candidate(), g); !why.empty())
    ctx.skip("gdn-step-breakdown q4-candidate on " + g.str(), why);
  else
    for (const char* t : {"q4-candidate", "q4-fork"}) run_tier(ctx, g, w, &q, t);
}

}  // namespace

void register_gdn_breakdown(Registry& r) {
  r.add(Experiment{
      .name = "gdn-step-breakdown",
      .description = "each operator's time inside the GDN decode step (stream mode, cold weights over many layers), its bytes and % of its floor, f32 and q4 tiers, against the whole step",
      .claims = {kPartsSum, kQ4Step20, kCandidate20},
      .run = run_breakdown,
  });
}

}  // namespace klab::experiments
