// The GDN step's q4 tier (variants/gdn: GdnDevice::use_q4 over the resident Q4Pool, q4_pool.hpp):
//   gdn-q4-per-op  the seed's table A1: every operator, q4 tier vs f32 tier (same weights and inputs),
//                  at the first and last token, on the transformers fixtures and at Qwen3.5-27B; and
//                  the q4 tier against the f64 reference step on dequant(q4) weights (its wiring)
//   gdn-q4-gates   the seed's wiring evidence: the shape gate (wrong key assignments refused before
//                  running) and the magnitude gate (q4 vs f32 max_rel < 1e-1), with deliberately
//                  miswired runs that pass the shape gate and must trip the magnitude gate
//   (gdn-q4-layer, the step raced through race(), is gdn_layer.cpp)
//   error-budget   (error_budget.cpp) q4 weights under several input distributions, no device needed
// The q4 mat-vec is kDefaultQ4Variant unless KLAB_GDN_Q4_VARIANT names another q4_gemv variant.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "common.hpp"
#include "error_budget.hpp"
#include "gdn/gdn_device.hpp"
#include "gdn/inputs.hpp"
#include "gdn/q4_pool.hpp"
#include "klab/cuda.hpp"
#include "klab/error.hpp"
#include "klab/metrics.hpp"
#include "klab/ref/gdn.hpp"
#include "klab/ref/gdn_q4.hpp"
#include "q4_gemv/q4_gemv.hpp"

namespace klab::experiments {

namespace {

namespace rg = klab::ref::gdn;
namespace fs = std::filesystem;
using gdn::GdnDevice;
using rg::Geometry;
using rg::What;

constexpr int kQkv = 1, kZ = 2, kOut = 3;  // pool keys of the correct wiring

// The GPU q4 tier against the f64 reference on the same (dequantised) weights: f32 sums, ~1e-6; a
// wrong tensor, index or stale buffer gives O(1e-2) (the quantisation error) or more.
constexpr double kRefTol = 1e-4;
// The seed's magnitude gate: correct q4 wiring stays O(1e-2) against the f32 tier, miswiring ~1e0.
constexpr double kGate = 1e-1;
// Errors of independent q4 projections add (in quadrature: ~sqrt(3)x over the three on the path to
// the output); "amplified" means beyond this factor of the first projections' error.
constexpr double kAmplification = 4.0;

Geometry small_geometry() { return Geometry{256, 2, 6, 32, 48, 4, 1e-6}; }  // conv 416, nv*dv 288: q4-able, shapes pairwise different
Geometry geometry_for(const Context& ctx) { return ctx.options().quick ? small_geometry() : rg::qwen35_27b(); }

nlohmann::json to_json(const Geometry& g) {
  return {{"hidden", g.hidden}, {"nk", g.nk}, {"nv", g.nv}, {"dk", g.dk}, {"dv", g.dv}, {"ck", g.ck}, {"eps", g.eps}, {"str", g.str()}};
}

// The q4 mat-vec: $KLAB_GDN_Q4_VARIANT or the default (an unknown name is a klab::Error naming the known ones).
std::string chosen_variant() {
  const char* env = std::getenv("KLAB_GDN_Q4_VARIANT");
  const std::string v = env && *env ? env : gdn::kDefaultQ4Variant;
  return gdn::q4_kernel_by_name(v).name;
}

// T tokens of layer input (T, hidden): heavy-tailed (N(0,1) with outlier channels, as LLM activations).
std::vector<float> make_inputs(const Geometry& g, int T, std::uint64_t seed) { return gdn::inputs(g.hidden, T, Dist::outlier, seed, 1000); }
std::span<const float> token(const std::vector<float>& seq, const Geometry& g, int t) { return gdn::token(seq, g.hidden, t); }

void put_all(gdn::Q4Pool& pool, const rg::Q4Projections& q, int kq = kQkv, int kz = kZ, int ko = kOut) {
  pool.put(kq, q.qkv);
  pool.put(kz, q.z);
  pool.put(ko, q.out);
}

std::map<What, std::vector<float>> snapshot(const GdnDevice& dev, int layer) {
  std::map<What, std::vector<float>> m;
  for (What w : rg::all_whats()) m[w] = dev.get(layer, w);
  return m;
}

// ---- gdn-q4-per-op ---------------------------------------------------------------------------------

struct PerOpAgg {
  bool exact_zero = true, not_amplified = true, first_o1e2 = true, ref_ok = true;
  std::string ev_zero, ev_amp, ev_first, ev_ref;
};

void per_op_case(Context& ctx, const std::string& label, const rg::LayerWeights& w, const std::vector<float>& h, int T, PerOpAgg& agg) {
  const Geometry& g = w.g;
  if (auto why = rg::q4_geometry_error(g); !why.empty()) {
    ctx.skip(label, "no q4 tier for geometry " + g.str() + ": " + why);
    return;
  }
  ctx.log(label + ": " + g.str() + ", " + std::to_string(T) + " tokens");
  const auto q = rg::quantize_projections(w);
  const auto wq = rg::with_q4(w, q);
  // Layer 0: f32 tier; layer 1: q4 tier; same small weights, same inputs.
  GdnDevice dev(g, 2);
  dev.set_stream(ctx.timer().stream());
  dev.set_q4_variant(chosen_variant());
  dev.load_f32(0, w);
  put_all(dev.q4_pool(), q);
  if (auto why = dev.load_q4(1, w, kQkv, kZ, kOut); !why.empty()) throw Error(label + ": " + why);
  auto st = rg::State::zeros(g);
  std::map<What, std::vector<float>> f32_0, q4_0, f32_l, q4_l, ref_0, ref_l;
  double ref_worst = 0;
  std::string ref_where;
  for (int t = 0; t < T; ++t) {
    dev.step(0, token(h, g, t));
    dev.step(1, token(h, g, t));
    rg::Intermediates im;
    rg::step(wq, st, token(h, g, t), &im);
    const bool keep = t == 0 || t == T - 1;
    for (What wh : rg::all_whats()) {
      const auto got = dev.get(1, wh);
      const auto want = im.get(wh, st);
      const Accuracy a = accuracy(got, want);
      const double r = a.finite() ? a.max_rel : std::numeric_limits<double>::infinity();
      if (!(r <= ref_worst)) {
        ref_worst = r;
        ref_where = "token " + std::to_string(t) + " " + rg::to_string(wh);
      }
      if (keep) (t == 0 ? ref_0 : ref_l)[wh] = std::vector<float>(want.begin(), want.end());
    }
    if (t == 0) {
      f32_0 = snapshot(dev, 0);
      q4_0 = snapshot(dev, 1);
    }
    if (t == T - 1) {
      f32_l = snapshot(dev, 0);
      q4_l = snapshot(dev, 1);
    }
  }
  const std::string fixture = label;
  auto add_op = [&](const std::string& pair, What wh, const std::vector<float>& t0, const std::vector<float>& b0, const std::vector<float>& tl,
                    const std::vector<float>& bl) {
    const Accuracy a0 = accuracy(t0, b0), al = accuracy(tl, bl);
    double rms_ref = 0;
    for (float v : b0) rms_ref += double(v) * v;
    rms_ref = b0.empty() ? 0 : std::sqrt(rms_ref / double(b0.size()));
    auto rec = ctx.record("gdn_op");
    rec["fixture"] = fixture;
    rec["pair"] = pair;
    rec["op"] = rg::to_string(wh);
    rec["n"] = t0.size();
    rec["max_rel_t0"] = a0.finite() ? a0.max_rel : std::numeric_limits<double>::quiet_NaN();
    rec["rms_rel_t0"] = a0.finite() ? a0.rms_rel : std::numeric_limits<double>::quiet_NaN();
    rec["rms_rel_last"] = al.finite() ? al.rms_rel : std::numeric_limits<double>::quiet_NaN();
    rec["max_rel_last"] = al.finite() ? al.max_rel : std::numeric_limits<double>::quiet_NaN();
    rec["max_abs_ref"] = a0.max_ref;
    rec["rms_ref"] = rms_ref;
    rec["tokens"] = T;
    rec["geometry"] = to_json(g);
    rec["q4_variant"] = dev.q4_variant();
    rec["bits_differ_t0"] = bitwise_diff(t0, b0);
    rec["bits_differ_last"] = bitwise_diff(tl, bl);
    ctx.add(std::move(rec));
    return std::pair<Accuracy, Accuracy>{a0, al};
  };
  std::map<What, std::pair<Accuracy, Accuracy>> vs_f32;
  for (What wh : rg::all_whats()) {
    vs_f32[wh] = add_op("q4 vs f32", wh, q4_0[wh], f32_0[wh], q4_l[wh], f32_l[wh]);
    add_op("gpu-q4 vs reference-q4", wh, q4_0[wh], ref_0[wh], q4_l[wh], ref_l[wh]);
  }
  // Claim 0: the f32 weights of both tiers (b|a, A_log, dt_bias) give exactly the same A, B, BETA, G.
  std::int64_t differ = 0;
  for (What wh : {What::A, What::B, What::BETA, What::G}) differ += bitwise_diff(q4_0[wh], f32_0[wh]) + bitwise_diff(q4_l[wh], f32_l[wh]);
  agg.exact_zero = agg.exact_zero && differ == 0;
  agg.ev_zero += label + ": " + std::to_string(differ) + " elements of A, B, BETA, G differ at tokens 0 and " + std::to_string(T - 1) + "; ";
  // Claim 1: no operator beyond kAmplification x the first projections' error, at t0 and at T-1.
  for (int which = 0; which < 2; ++which) {
    auto rms = [&](What wh) { return which == 0 ? vs_f32[wh].first.rms_rel : vs_f32[wh].second.rms_rel; };
    const double first = std::max(rms(What::XC), rms(What::Z));
    double worst = 0;
    std::string at;
    for (What wh : {What::XCV, What::Q, What::K, What::ON, What::ONN, What::OUT, What::S, What::HIST})
      if (!(rms(wh) <= worst)) {
        worst = rms(wh);
        at = rg::to_string(wh);
      }
    const bool ok = worst <= kAmplification * first;
    agg.not_amplified = agg.not_amplified && ok;
    agg.ev_amp += label + (which == 0 ? " t0" : " last") + fmt(": first projections %.3g, worst downstream %.3g", first, worst) + " (" + at + fmt(", x%.2f); ", first > 0 ? worst / first : 0.0);
  }
  // Claim 2: the error entering at the first projections is O(1e-2) (the seed: 4.53e-2).
  const double xc = vs_f32[What::XC].first.rms_rel, z = vs_f32[What::Z].first.rms_rel;
  agg.first_o1e2 = agg.first_o1e2 && xc >= 1e-3 && xc < kGate && z >= 1e-3 && z < kGate;
  agg.ev_first += label + fmt(": XC %.3g, Z %.3g; ", xc, z);
  // Claim 3: the q4 tier is the reference step on dequant(q4) weights, to f32 rounding.
  agg.ref_ok = agg.ref_ok && ref_worst <= kRefTol;
  agg.ev_ref += label + fmt(": worst max_rel %.3g", ref_worst) + " at " + ref_where + "; ";
}

// ---- gdn-q4-per-op: its claims, settled below.
const Claim kPerOpExact{"exact-f32-weights",
                        "A, B, BETA and G are bitwise equal between the q4 and f32 tiers at the first and last token (their weights stay f32: the readback's self-check)"};
const Claim kPerOpNotAmplified{"not-amplified",
                               "the error is not amplified downstream: no operator's rms_rel exceeds 4x the larger of XC's and Z's, at the first and at the last token "
                               "(independent q4 projections add ~sqrt(3)x; the seed saw at most 1.3x)"};
const Claim kPerOpFirst{"first-o1e2", "the error entering at the first projections is O(1e-2): XC and Z rms_rel at the first token in [1e-3, 1e-1) (the seed: 4.53e-2)"};
const Claim kPerOpRef{"vs-reference", "the GPU q4 tier equals the f64 reference step on dequant(q4) weights within 1e-4 (max_rel) at every token and intermediate"};

void run_per_op(Context& ctx) {
  PerOpAgg agg;
  std::string looked;
  const auto files = gdn_fixture_files(looked);
  if (files.empty()) ctx.skip("fixtures", "no *.safetensors in " + looked + " (generate them with scripts/gen_gdn_fixture.py)");
  for (const auto& f : files) {
    const auto w = rg::load_weights(f);
    const auto in = rg::load_inputs(f, w.g);
    per_op_case(ctx, f.stem().string(), w, in.h, in.tokens, agg);
  }
  {
    const Geometry g = geometry_for(ctx);
    const int T = ctx.options().quick ? 4 : 8;
    const std::string label = std::string(ctx.options().quick ? "small" : "qwen35-27b") + " seeded, T=" + std::to_string(T);
    per_op_case(ctx, label, rg::random_weights(g, ctx.options().seed), make_inputs(g, T, ctx.options().seed), T, agg);
  }
  ctx.claim(kPerOpExact).set(agg.exact_zero, agg.ev_zero);
  ctx.claim(kPerOpNotAmplified).set(agg.not_amplified, agg.ev_amp + "(the seed: at most 1.3x)");
  ctx.claim(kPerOpFirst).set(agg.first_o1e2, agg.ev_first + "(the seed: 4.53e-2)");
  ctx.claim(kPerOpRef).set(agg.ref_ok, agg.ev_ref);
}

// ---- gdn-q4-gates ----------------------------------------------------------------------------------

// Per token, q4 (layer 1) vs f32 (layer 0) max_rel at XC, Z and OUT.
struct GateRun {
  std::vector<double> xc, z, out;
  double gated_worst() const {  // the magnitude gate reads the projections fed the same h in both tiers
    double m = 0;
    for (double v : xc) m = std::max(m, v);
    for (double v : z) m = std::max(m, v);
    return m;
  }
  double out_worst() const { return out.empty() ? 0 : *std::max_element(out.begin(), out.end()); }
};

GateRun gate_run(GdnDevice& dev, const std::vector<float>& h, const Geometry& g, int T) {
  GateRun r;
  dev.reset();
  auto rel = [](const std::vector<float>& a, const std::vector<float>& b) {
    const Accuracy acc = accuracy(a, b);
    return acc.finite() ? acc.max_rel : std::numeric_limits<double>::infinity();
  };
  for (int t = 0; t < T; ++t) {
    const auto y0 = dev.step(0, token(h, g, t));
    const auto y1 = dev.step(1, token(h, g, t));
    r.xc.push_back(rel(dev.get(1, What::XC), dev.get(0, What::XC)));
    r.z.push_back(rel(dev.get(1, What::Z), dev.get(0, What::Z)));
    r.out.push_back(rel(y1, y0));
  }
  return r;
}

nlohmann::json gate_record(Context& ctx, const std::string& wiring, const Geometry& g, const std::string& shape_gate, const GateRun& r) {
  auto rec = ctx.record("gdn_q4_gate");
  rec["wiring"] = wiring;
  rec["geometry"] = to_json(g);
  rec["shape_gate"] = shape_gate.empty() ? "passed" : shape_gate;
  rec["max_rel_xc"] = r.xc;
  rec["max_rel_z"] = r.z;
  rec["max_rel_out"] = r.out;
  rec["gate"] = kGate;
  rec["gate_tripped"] = r.gated_worst() >= kGate;
  return rec;
}

// ---- gdn-q4-gates: its claims, settled below.
const Claim kGateShape{"shape-gate",
                       "shape gate: at a geometry whose big projections have pairwise different shapes, each of the 5 wrong assignments of the three keys is refused by "
                       "use_q4 before running, the layer left unchanged"};
const Claim kGateMagnitude{"magnitude-gate",
                           "magnitude gate, correct wiring: q4 vs f32 max_rel < 1e-1 at XC and Z (the projections fed the same input in both tiers) at every token, at both "
                           "geometries"};
const Claim kGateMiswiringTrips{"miswirings-trip",
                                "each miswiring that passes the shape gate (a same-shaped in_proj_qkv of other weights; q and k row blocks swapped; z and out swapped where "
                                "hidden = nv*dv) trips the magnitude gate (max_rel >= 1e-1 at XC or Z)"};
const Claim kGateSeparated{"separated", "at the layer output, every miswiring's worst-token max_rel is at least 3x the correct wiring's at the same geometry"};

void run_gates(Context& ctx) {
  const std::uint64_t seed = ctx.options().seed;
  const int T = ctx.options().quick ? 4 : 8;
  const std::string variant = chosen_variant();
  // Part 1, at a geometry whose three big projections have pairwise different shapes (Qwen3.5-27B:
  // 10240x5120, 6144x5120, 5120x6144).
  const Geometry g = geometry_for(ctx);
  const auto w = rg::random_weights(g, seed);
  const auto q = rg::quantize_projections(w);
  const auto h = make_inputs(g, T, seed);
  GdnDevice dev(g, 2);
  dev.set_stream(ctx.timer().stream());
  dev.set_q4_variant(variant);
  dev.load_f32(0, w);
  put_all(dev.q4_pool(), q);
  dev.load_small(1, w);

  // Shape gate: the five wrong assignments of the three keys.
  std::array<int, 3> perm{kQkv, kZ, kOut};
  int wrong = 0, refused = 0;
  nlohmann::json reasons = nlohmann::json::array();
  std::string ev0;
  std::sort(perm.begin(), perm.end());
  do {
    if (perm == std::array<int, 3>{kQkv, kZ, kOut}) continue;
    ++wrong;
    const std::string why = dev.use_q4(1, perm[0], perm[1], perm[2]);
    std::string step_msg;
    bool step_refused = false;
    try {
      dev.step(1, token(h, g, 0));
    } catch (const CudaError& e) {
      step_msg = std::string("CUDA error: ") + e.what();
    } catch (const Error& e) {
      step_refused = true;
      step_msg = e.what();
    }
    const bool ok = !why.empty() && dev.tier(1).empty() && step_refused;
    refused += ok;
    const std::string keys = gdn::Q4Keys{perm[0], perm[1], perm[2]}.str();
    reasons.push_back({{"keys", keys}, {"refused", ok}, {"reason", why}, {"tier_after", dev.tier(1)}, {"step", step_msg}});
    if (!ok) ev0 += keys + ": " + (why.empty() ? "accepted" : "tier " + dev.tier(1)) + "; ";
  } while (std::next_permutation(perm.begin(), perm.end()));
  {
    auto rec = ctx.record("gdn_q4_shape_gate");
    rec["geometry"] = to_json(g);
    rec["shapes"] = {{"in_proj_qkv", gdn::expected_shape(g, gdn::BigProj::qkv).str()},
                     {"in_proj_z", gdn::expected_shape(g, gdn::BigProj::z).str()},
                     {"out_proj", gdn::expected_shape(g, gdn::BigProj::out).str()}};
    rec["assignments"] = reasons;
    ctx.add(std::move(rec));
  }
  ctx.claim(kGateShape).set(wrong == 5 && refused == wrong,
            std::to_string(refused) + "/" + std::to_string(wrong) + " wrong key assignments refused by use_q4 (layer left without projections, step refused), " + g.str() +
                (ev0.empty() ? "" : ": " + ev0));

  // Magnitude gate, correct wiring.
  if (auto why = dev.use_q4(1, kQkv, kZ, kOut); !why.empty()) throw Error("gdn-q4-gates: the correct wiring was refused: " + why);
  const GateRun good = gate_run(dev, h, g, T);
  ctx.add(gate_record(ctx, "correct", g, "", good));

  // Miswirings that pass the shape gate, each with the correct wiring of its own geometry beside it.
  struct Mis {
    std::string name;
    GateRun run;
    std::string shape_gate;
    const GateRun* correct;
  };
  std::vector<Mis> mis;
  {
    // (a) a same-shaped in_proj_qkv from other weights (another layer's tensor under the right shape).
    const auto other = rg::random_weights(g, seed + 1);
    dev.q4_pool().put(11, ref::q4_quantize(other.w_qkv, g.conv_dim(), g.hidden));
    const std::string why = dev.use_q4(1, 11, kZ, kOut);
    mis.push_back({"in_proj_qkv from other weights (same shape)", why.empty() ? gate_run(dev, h, g, T) : GateRun{}, why, &good});
    ctx.add(gate_record(ctx, mis.back().name, g, why, mis.back().run));
  }
  {
    // (b) q and k row blocks swapped in in_proj_qkv (a wrong q|k|v order). At the first token this is
    // nearly invisible downstream: from a zero state o = t (k.q) is symmetric in q and k (only the
    // 1/sqrt(dk) scale and the norms' epsilon tell them apart).
    std::vector<float> sw = w.w_qkv;
    const std::size_t blk = std::size_t(g.key_dim()) * std::size_t(g.hidden);
    std::swap_ranges(sw.begin(), sw.begin() + std::ptrdiff_t(blk), sw.begin() + std::ptrdiff_t(blk));
    dev.q4_pool().put(12, ref::q4_quantize(sw, g.conv_dim(), g.hidden));
    const std::string why = dev.use_q4(1, 12, kZ, kOut);
    mis.push_back({"q and k row blocks of in_proj_qkv swapped", why.empty() ? gate_run(dev, h, g, T) : GateRun{}, why, &good});
    ctx.add(gate_record(ctx, mis.back().name, g, why, mis.back().run));
  }
  // (c) z and out swapped, at a geometry where their shapes coincide (hidden == nv*dv: Qwen's heads on
  // hidden 256, the qwen-head fixture's geometry): the shape gate cannot see it.
  const Geometry ge{256, 1, 2, 128, 128, 4, 1e-6};
  const auto we = rg::random_weights(ge, seed);
  const auto qe = rg::quantize_projections(we);
  const auto he = make_inputs(ge, T, seed);
  GdnDevice d2(ge, 2);
  d2.set_stream(ctx.timer().stream());
  d2.set_q4_variant(variant);
  d2.load_f32(0, we);
  put_all(d2.q4_pool(), qe);
  if (auto why = d2.load_q4(1, we, kQkv, kZ, kOut); !why.empty()) throw Error("gdn-q4-gates: the correct wiring was refused at " + ge.str() + ": " + why);
  const GateRun good_e = gate_run(d2, he, ge, T);
  ctx.add(gate_record(ctx, "correct", ge, "", good_e));
  {
    const std::string why = d2.use_q4(1, kQkv, kOut, kZ);
    mis.push_back({"in_proj_z and out_proj swapped (" + ge.str() + ": both " + gdn::expected_shape(ge, gdn::BigProj::z).str() + ")",
                   why.empty() ? gate_run(d2, he, ge, T) : GateRun{}, why, &good_e});
    ctx.add(gate_record(ctx, mis.back().name, ge, why, mis.back().run));
  }

  const double good_gated = std::max(good.gated_worst(), good_e.gated_worst());
  ctx.claim(kGateMagnitude).set(good_gated < kGate,
            fmt("worst max_rel over %g tokens at XC/Z: %.3g at ", T, good.gated_worst()) + g.str() + fmt(", %.3g at ", good_e.gated_worst()) + ge.str() +
                fmt(" (gate %.0e)", kGate));
  bool all_trip = true, separated = true;
  std::string ev2, ev3;
  for (const auto* c : {&good, &good_e})
    ev3 += fmt("correct wiring: worst OUT max_rel %.3g", c->out_worst()) + " at " + (c == &good ? g.str() : ge.str()) +
           (c->out_worst() < kGate ? " (the seed's 1e-1 gate would pass at OUT too); " : " (the seed's 1e-1 gate would trip at OUT on the correct wiring); ");
  for (const Mis& m : mis) {
    const bool passed_shape = m.shape_gate.empty();
    const bool tripped = passed_shape && m.run.gated_worst() >= kGate;
    all_trip = all_trip && tripped;
    ev2 += m.name + ": " + (passed_shape ? fmt("shape gate passed, XC/Z max_rel %.3g (t0 %.3g)", m.run.gated_worst(), std::max(m.run.xc[0], m.run.z[0]))
                                         : "refused by the shape gate (" + m.shape_gate + ")") +
           "; ";
    const bool sep = passed_shape && m.run.out_worst() >= 3 * m.correct->out_worst();
    separated = separated && sep;
    if (passed_shape) ev3 += m.name + fmt(": OUT worst %.3g (t0 %.3g, x%.1f the correct wiring's worst); ", m.run.out_worst(), m.run.out.front(), m.run.out_worst() / std::max(m.correct->out_worst(), 1e-300));
  }
  ctx.claim(kGateMiswiringTrips).set(all_trip, ev2);
  ctx.claim(kGateSeparated).set(separated, ev3);
}

// ---- gdn-q4-layer ----------------------------------------------------------------------------------

// The kernel's arithmetic family: its axes without those q4_gemv documents as changing no bit (scale
// read, f16 conversion, rows per warp: policy.hpp, lane_block.cu). Kernels of one family must give
// the same bits.
}  // namespace

void register_gdn_q4(Registry& r) {
  r.add(Experiment{
      .name = "gdn-q4-per-op",
      .description = "GDN q4 tier vs f32 tier per operator (the seed's table A1), first and last token, on the fixtures and at Qwen3.5-27B; and vs the f64 reference on dequant(q4)",
      .claims = {kPerOpExact, kPerOpNotAmplified, kPerOpFirst, kPerOpRef},
      .run = run_per_op,
  });
  r.add(Experiment{
      .name = "gdn-q4-gates",
      .description = "GDN q4 wiring evidence: shape gate (wrong keys refused before running), magnitude gate (q4 vs f32 max_rel < 1e-1), deliberate miswirings",
      .claims = {kGateShape, kGateMagnitude, kGateMiswiringTrips, kGateSeparated},
      .run = run_gates,
  });
  r.add(make_error_budget());
}

}  // namespace klab::experiments
