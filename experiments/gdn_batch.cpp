// gdn-batch (issue 14 part 4, "batched slots"): one token of a GDN layer for B sequences at once
// (GdnDevice::enqueue_batch: each big projection one q4_gemm launch over the B columns, the weights
// read once for all B; b|a, the small kernels and the recurrence one launch each over the B slots)
// against the B slots' own single-sequence steps (GdnDevice::step_operators, the
// single step's launches), at B = 1, 8 and 32. First run on the H200 in reports/h200/run-30bee11.
//
// Configuration: fold (the step's candidate 2026-12-02..06) on the q4 tier without its two single-sequence forms
// (fold's base gdn::candidate_twins().ba_own with out=prepared off: q8-dp4a projections, the fused
// prep, the fused recurrence with pdl=early, b|a split-row, the PDL chain), which enqueue_batch
// takes; both sides run it, so the single steps are the same kernels on one column (the singles with
// in_proj_qkv and in_proj_z stacked, the batch with its three q4_gemm launches: the same bits).
// Check (before timing): from a zeroed state, T tokens of B slots through enqueue_batch, then the same
// tokens slot by slot through the single step; every slot's outputs and its final S and conv history
// must be bit for bit equal (claim slots-bitwise at B = 8 and 32; B = 1 recorded too).
// Timing: stream mode (Timer::stream_subject, as gdn-step-breakdown): the batch is one body per layer
// (enqueue_batch for slots 0..B-1), the singles one body per layer (the B single steps, slot after
// slot); the bodies rotate over nl layers of the same weights in distinct buffers (Timer::copies_for
// the step's bytes: the projections read cold at Qwen3.5-27B), read flush before each repetition, and
// every subject of every B is timed in one interleaved run. Time per token = graph time / launches:
// one token of all B slots.
// --quick: small_geometry(), which the candidate's recurrence refuses (dk = 32): skipped, saying why.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "common.hpp"
#include "gdn/step_op.hpp"
#include "gdn_common.hpp"
#include "klab/cuda.hpp"
#include "klab/error.hpp"
#include "klab/metrics.hpp"
#include "klab/stats.hpp"

namespace klab::experiments {

namespace {

using gdn::GdnDevice;
using rg::Geometry;

constexpr int kBs[] = {1, 8, 32};
constexpr int kMaxB = 32;
constexpr int kCheckTokens = 4;
// The layers' weights take at most half the free device memory (as gdn-step-breakdown) and at most 16.
constexpr double kMemShare = 0.5;
constexpr int kMaxLayers = 16;
// weights-once: the batched step at B = 32 under this many times its B = 1 time.
constexpr double kWeightsOnceRatio = 4.0;

const Claim kBits{"slots-bitwise",
                  "every slot of the batched step (enqueue_batch) equals its own single-sequence steps bit for bit: output at every token, final S "
                  "and conv history, at B = 8 and 32 (4 tokens from a zero state)"};
const Claim kPays{"batch-pays", "at the Qwen3.5-27B geometry, one batched step of B = 32 slots is faster than the 32 slots' single steps (stream mode)"};
const Claim kOnce{"weights-once",
                  "at the Qwen3.5-27B geometry, the batched step at B = 32 takes under 4x its own B = 1 time (stream mode): the weights are read once"};

std::string key_of(int B) { return "B=" + std::to_string(B); }

struct Check {
  std::int64_t out_differ = 0, S_differ = 0, hist_differ = 0, compared = 0;
  bool bitwise() const { return out_differ + S_differ + hist_differ == 0; }
};

// T tokens of slots 0..B-1 of layer 0 from a zeroed state, batched then single; h (T*B, hidden) with
// token t of slot j at row t*B + j.
Check check_slots(GdnDevice& dev, int B, const std::vector<float>& h, cudaStream_t s) {
  const Geometry& g = dev.geometry();
  const std::size_t H = std::size_t(g.hidden), n = std::size_t(kCheckTokens) * std::size_t(B) * H;
  auto d_h = DeviceBuffer<float>::from(std::vector<float>(h.begin(), h.begin() + std::ptrdiff_t(n)));
  DeviceBuffer<float> yb(n), ys(n);
  poison_device(yb.get(), yb.size(), s);
  poison_device(ys.get(), ys.size(), s);
  auto state = [&](std::vector<std::vector<float>>& S, std::vector<std::vector<float>>& hist) {
    for (int j = 0; j < B; ++j) S.push_back(dev.get(0, rg::What::S, j)), hist.push_back(dev.get(0, rg::What::HIST, j));
  };
  dev.reset();
  for (int t = 0; t < kCheckTokens; ++t) {
    const std::size_t at = std::size_t(t) * std::size_t(B) * H;
    dev.enqueue_batch(0, 0, B, d_h.get() + at, yb.get() + at, s);
  }
  KLAB_CUDA(cudaStreamSynchronize(s));
  std::vector<std::vector<float>> Sb, hb, Ss, hs;
  state(Sb, hb);
  dev.reset();
  for (int t = 0; t < kCheckTokens; ++t)
    for (int j = 0; j < B; ++j) {
      const std::size_t at = (std::size_t(t) * std::size_t(B) + std::size_t(j)) * H;
      for (const auto& op : dev.step_operators(0, d_h.get() + at, ys.get() + at, j)) op.enqueue(s);
    }
  KLAB_CUDA(cudaStreamSynchronize(s));
  state(Ss, hs);
  Check c;
  c.out_differ = bitwise_diff(yb.download(), ys.download());
  c.compared = std::int64_t(n);
  for (int j = 0; j < B; ++j) {
    c.S_differ += bitwise_diff(Sb[std::size_t(j)], Ss[std::size_t(j)]);
    c.hist_differ += bitwise_diff(hb[std::size_t(j)], hs[std::size_t(j)]);
    c.compared += std::int64_t(Sb[std::size_t(j)].size() + hb[std::size_t(j)].size());
  }
  return c;
}

nlohmann::json us_json(const Timing& t, std::uint64_t seed) {
  const Interval ci = median_ci95(t.kept_ms, seed);
  return {{"median", t.summary.median * 1e3}, {"ci95_lo", ci.lo * 1e3}, {"ci95_hi", ci.hi * 1e3}, {"min", t.summary.min * 1e3}, {"max", t.summary.max * 1e3}};
}

void run_batch(Context& ctx) {
  const Geometry g = geometry_for(ctx);
  const bool full = !ctx.options().quick;
  ctx.claim(kBits).needs({key_of(8), key_of(32)});
  ctx.claim(kPays).needs({key_of(32)});
  ctx.claim(kOnce).needs({key_of(32)});
  // out=prepared and fold=ba (the candidate's b|a in the stacked launch's prep) are the single step's (enqueue_batch runs q4_gemm, and b|a through
  // the b|a kernel's column launch): off here, so that the singles run the batch's b|a order and
  // out=prepared's refusal of dv % 32 != 0 does not keep the batch from the quick geometry.
  gdn::FusedStepConfig cfg = gdn::candidate_twins().ba_own;
  cfg.norm_q8 = false;
  if (auto why = rg::q4_geometry_error(g); !why.empty()) {
    ctx.skip("gdn-batch at " + g.str(), "no q4 tier: " + why);
    return;
  }
  if (auto why = gdn::config_error(cfg, g); !why.empty()) {
    ctx.skip("gdn-batch at " + g.str(), "the batched step's kernels refuse the geometry: " + why);
    return;
  }
  for (int B : kBs)
    if (auto why = GdnDevice::batch_error(cfg.q4_kernel, cfg.recurrence, true, B); !why.empty()) throw Error("gdn-batch: B = " + std::to_string(B) + ": " + why);
  Timer& timer = ctx.timer();
  const cudaStream_t s = timer.stream();
  // Layers: enough that the bodies' rotation exceeds 3x the L2, within half the free memory.
  const double layer_bytes = gdn::step_bytes(g, true) + double(kMaxB) * (double(g.nv) * g.dk * g.dv + double(g.ck - 1) * g.conv_dim()) * 4.0;
  std::size_t free_b = 0, total_b = 0;
  KLAB_CUDA(cudaMemGetInfo(&free_b, &total_b));
  const int fit = int(kMemShare * double(free_b) / layer_bytes);
  if (fit < 1) {
    ctx.skip("gdn-batch at " + g.str(), fmt("one layer of %.0f MB (weights and %.0f slots of state) does not fit in half the free device memory (%.0f MB)",
                                            layer_bytes / 1e6, kMaxB, double(free_b) / 1e6));
    return;
  }
  const int nl = std::clamp(timer.copies_for(gdn::step_bytes(g, true)), 1, std::min(fit, kMaxLayers));
  ctx.log("gdn-batch: " + g.str() + ", " + std::to_string(nl) + " layers of the same weights in distinct buffers, " + std::to_string(kMaxB) + " slots");
  const auto w = rg::random_weights(g, ctx.options().seed);
  const auto q = rg::quantize_projections(w);
  GdnDevice dev(g, nl, kMaxB);
  dev.set_stream(s);
  for (int l = 0; l < nl; ++l) {
    put_all(dev.q4_pool(), q, 3 * l + 1, 3 * l + 2, 3 * l + 3);
    if (auto why = dev.load_q4(l, w, 3 * l + 1, 3 * l + 2, 3 * l + 3); !why.empty()) throw Error("gdn-batch: " + why);
  }
  gdn::apply(cfg, dev);
  dev.reserve_batch(kMaxB);
  const std::string gemm = GdnDevice::batch_gemm_variant(dev.q4_variant());
  const std::size_t H = std::size_t(g.hidden);
  const auto h = make_inputs(g, kCheckTokens * kMaxB, ctx.options().seed);  // (T*B, hidden); the timing reads its first 32 rows

  std::vector<Check> checks;
  for (int B : kBs) checks.push_back(check_slots(dev, B, h, s));
  auto d_h = DeviceBuffer<float>::from(std::vector<float>(h.begin(), h.begin() + std::ptrdiff_t(std::size_t(kMaxB) * H)));
  DeviceBuffer<float> d_y(std::size_t(kMaxB) * H);
  // Per layer, the single step's operators of every slot (on that slot's row of d_h and d_y).
  std::vector<std::vector<std::vector<GdnDevice::StepOperator>>> ops(static_cast<std::size_t>(nl));
  for (int l = 0; l < nl; ++l)
    for (int j = 0; j < kMaxB; ++j) ops[std::size_t(l)].push_back(dev.step_operators(l, d_h.get() + std::size_t(j) * H, d_y.get() + std::size_t(j) * H, j));

  TimingOptions opt = ctx.options().timing();
  std::vector<std::unique_ptr<Timer::Subject>> subs;  // per B: batch, singles
  std::vector<GraphNodes> nodes;                      // per B: batch, singles (one body: one layer's token)
  for (int B : kBs) {
    std::vector<Body> batch, singles;
    for (int l = 0; l < nl; ++l) {
      batch.push_back([&dev, l, B, hp = d_h.get(), yp = d_y.get()](cudaStream_t st) { dev.enqueue_batch(l, 0, B, hp, yp, st); });
      singles.push_back([layer = &ops[std::size_t(l)], B](cudaStream_t st) {
        for (int j = 0; j < B; ++j)
          for (const auto& op : (*layer)[std::size_t(j)]) op.enqueue(st);
      });
    }
    for (auto* bodies : {&batch, &singles}) {
      nodes.push_back(graph_nodes(bodies->front(), s));
      std::string why;
      subs.push_back(timer.stream_subject(*bodies, opt, {}, why));
      if (!subs.back()) throw Error("gdn-batch: B = " + std::to_string(B) + ": " + why);
    }
  }
  std::vector<Timer::Subject*> ptrs;
  for (auto& sub : subs) ptrs.push_back(sub.get());
  const auto times = timer.time_interleaved(ptrs, opt);

  const std::uint64_t seed = ctx.options().seed;
  const Timing* batch1 = nullptr;
  for (std::size_t i = 0; i < std::size(kBs); ++i) {
    const int B = kBs[i];
    const Timing &tb = times[2 * i], &ts = times[2 * i + 1];
    if (B == 1) batch1 = &tb;
    const Check& c = checks[i];
    const Comparison vs = compare_times(ts.kept_ms, tb.kept_ms, seed);
    auto rec = ctx.record("gdn_batch");
    rec["B"] = B;
    rec["geometry"] = to_json(g);
    rec["layers"] = nl;
    rec["projections"] = dev.describe(0);
    rec["batch_gemm"] = gemm;
    rec["recurrence"] = dev.recurrence_variant();
    rec["ba"] = dev.ba_variant();
    rec["fused_prep"] = dev.fused_prep();
    rec["pdl_chain"] = dev.pdl_chain();
    rec["batch_kernels"] = nodes[2 * i].kernels;
    rec["singles_kernels"] = nodes[2 * i + 1].kernels;
    rec["bitwise"] = {{"out_differ", c.out_differ}, {"S_differ", c.S_differ}, {"hist_differ", c.hist_differ}, {"compared", c.compared}, {"tokens", kCheckTokens}};
    rec["batch_us_per_token"] = us_json(tb, seed);
    rec["singles_us_per_token"] = us_json(ts, seed);
    rec["us_per_slot"] = tb.summary.median * 1e3 / B;
    rec["batch_vs_singles"] = to_json(vs);
    rec["bytes_per_token"] = gdn::step_bytes(g, true);  // the single step's model: the batch reads the weights once, the state B times
    rec["timing"] = to_json(tb);
    rec["singles_timing"] = to_json(ts);
    ctx.add(std::move(rec));
    ctx.log(key_of(B) + fmt(": batched %.2f us per token (%.2f us per slot), %.0f single steps %.2f us, ", tb.summary.median * 1e3, tb.summary.median * 1e3 / B, double(B),
                            ts.summary.median * 1e3) +
            speedup_text(vs) + "; " + std::to_string(c.out_differ + c.S_differ + c.hist_differ) + " elements differ");
    if (B != 1)
      ctx.claim(kBits).settle(key_of(B), c.bitwise(),
                              key_of(B) + fmt(": %g of %g elements differ (outputs of %.0f tokens, final S and hist of every slot)",
                                              double(c.out_differ + c.S_differ + c.hist_differ), double(c.compared), kCheckTokens));
    if (B == 32 && full) {
      ctx.claim(kPays).settle(key_of(B), vs.verdict == Verdict::faster,
                              fmt("B = 32: batched %.2f us per token, 32 single steps %.2f us, batched ", tb.summary.median * 1e3, ts.summary.median * 1e3) +
                                  speedup_text(vs));
      if (batch1) {
        const double ratio = tb.summary.median / batch1->summary.median;
        ctx.claim(kOnce).settle(key_of(B), ratio < kWeightsOnceRatio,
                                fmt("batched B = 32 %.2f us against B = 1 %.2f us: x%.2f (under x%.0f claimed)", tb.summary.median * 1e3,
                                    batch1->summary.median * 1e3, ratio, kWeightsOnceRatio));
      }
    }
  }
}

}  // namespace

void register_gdn_batch(Registry& r) {
  r.add(Experiment{
      .name = "gdn-batch",
      .description = "GDN batched slots: one token of B = 1, 8, 32 sequences in one batched step (q4_gemm projections, weights read once) against B "
                     "single steps, bit for bit per slot, stream-mode time per token",
      .claims = {kBits, kPays, kOnce},
      .run = run_batch,
  });
}

}  // namespace klab::experiments
