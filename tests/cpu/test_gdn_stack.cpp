// gdn-stack's host side (experiments/gdn_stack.hpp), which needs no GPU: the device memory a stack
// of layers needs, worked out here by hand from the geometry, the refusal when it does not fit, and
// the q4 pool keys of the layers. The graph itself is tests/gpu/test_gdn_stack.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "gdn_stack.hpp"
#include "klab/catalog.hpp"
#include "klab/ref/gdn.hpp"
#include "klab/ref/gdn_q4.hpp"

using namespace klab;
namespace rg = klab::ref::gdn;
using experiments::stack_need;

namespace {
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
// nv != nk, dk != dv: conv_dim = 2*nk*dk + nv*dv = 128 + 288 = 416, value dim nv*dv = 288.
const rg::Geometry kSmall{256, 2, 6, 32, 48, 4, 1e-6};
}  // namespace

TEST_CASE("gdn-stack: the memory need of a stack, by hand, per tier") {
  const auto w = rg::random_weights(kSmall, 3);
  const auto q = rg::quantize_projections(w);
  // Big three: qkv 416x256, z 288x256, out 256x288 = 253952 weights.
  constexpr std::int64_t big = 416 * 256 + 288 * 256 + 256 * 288;
  // Small: w_b and w_a (nv x hidden), A_log and dt_bias (nv), conv (conv_dim x ck), norm (dv).
  constexpr std::int64_t small = 4 * (2 * 6 * 256 + 2 * 6 + 416 * 4 + 48);
  // State: S (nv, dk, dv) and the conv history (ck-1, conv_dim), f32.
  constexpr std::int64_t state = 4 * (6 * 32 * 48 + 3 * 416);
  const auto f = stack_need(w, nullptr, 7);
  CHECK(f.layers == 7);
  CHECK(f.weights == 4 * big + small);
  CHECK(f.state == state);
  CHECK(f.scratch > 0);
  CHECK(f.fixed >= 3 * 4 * 256);
  CHECK(f.total() == 7 * (f.weights + f.state + f.scratch) + f.fixed);
  // q4: half a byte per code and an f16 scale per 32 weights (0.5625 bytes a weight); the small
  // weights stay f32.
  const auto k = stack_need(w, &q, 7);
  CHECK(k.weights == big / 2 + big / 32 * 2 + small);
  CHECK(k.state == f.state);
  CHECK(k.scratch == f.scratch);
  CHECK(k.total() < f.total());
  CHECK_THROWS_AS(stack_need(w, nullptr, 0), Error);
}

TEST_CASE("gdn-stack: 48 q4 layers of Qwen3.5-27B need about 3.4 GB (the issue's estimate)") {
  // The need reads the sizes of what will be loaded: the codes and scales, and the small f32 weights
  // (the big f32 three are not loaded on the q4 tier, so they may be left empty here).
  const rg::Geometry g = rg::qwen35_27b();
  rg::LayerWeights w;
  w.g = g;
  const std::size_t H = std::size_t(g.hidden), C = std::size_t(g.conv_dim()), V = std::size_t(g.value_dim());
  w.w_b.resize(std::size_t(g.nv) * H);
  w.w_a.resize(std::size_t(g.nv) * H);
  w.a_log.resize(std::size_t(g.nv));
  w.dt_bias.resize(std::size_t(g.nv));
  w.conv_w.resize(C * std::size_t(g.ck));
  w.norm_w.resize(std::size_t(g.dv));
  rg::Q4Projections q;
  for (auto [m, rows, cols] : {std::tuple{&q.qkv, C, H}, std::tuple{&q.z, V, H}, std::tuple{&q.out, H, V}}) {
    m->m = std::int64_t(rows);
    m->k = std::int64_t(cols);
    m->codes.resize(rows * cols / 2);
    m->scales.resize(rows * cols / 32);
  }
  const auto n = stack_need(w, &q, 48);
  CAPTURE(n.total());
  CHECK(n.total() > 3.2e9);
  CHECK(n.total() < 4.0e9);
}

TEST_CASE("gdn-stack: a stack that does not fit is refused, naming the need, the free memory and the way out") {
  const auto w = rg::random_weights(kSmall, 3);
  const auto n = stack_need(w, nullptr, 48);
  CHECK(experiments::stack_fit_error(n, n.total(), "f32", kSmall.str()) == "");
  CHECK(experiments::stack_fit_error(n, n.total() + 1, "f32", kSmall.str()) == "");
  const std::string why = experiments::stack_fit_error(n, n.total() - 1, "f32", kSmall.str());
  CAPTURE(why);
  CHECK(contains(why, "f32 tier"));
  CHECK(contains(why, "48 layers"));
  CHECK(contains(why, kSmall.str()));
  CHECK(contains(why, "needs "));
  CHECK(contains(why, " free"));
  CHECK(contains(why, "fewer layers"));
  CHECK(contains(why, "q4 tier"));
  // The need in GB, as computed (two decimals).
  char gb[32];
  std::snprintf(gb, sizeof gb, "%.2f GB", double(n.total()) / 1e9);
  CHECK(contains(why, gb));
}

TEST_CASE("gdn-stack: every layer has three pool keys of its own") {
  std::set<int> keys;
  for (int l = 0; l < 48; ++l) {
    const auto k = experiments::stack_keys(l);
    keys.insert(k.qkv);
    keys.insert(k.z);
    keys.insert(k.out);
  }
  CHECK(keys.size() == 3 * 48);
  CHECK(*keys.begin() > 0);
}

TEST_CASE("gdn-stack is registered with its fifty-eight claims, and needs a device") {
  const auto& e = registry().experiment("gdn-stack");
  CHECK(e.needs_device);
  std::set<std::string> ids;
  for (const auto& c : e.claims) ids.insert(c.id);
  CHECK(ids == std::set<std::string>{"graph-bitwise", "finite", "q4-1ms", "f32-85pct", "f32-fast-85pct", "f32-fast-faster", "f32-u8-in-graph", "f32-fold-main-in-graph", "f32-qkvz-in-graph", "f32-pdl-in-graph", "q4-faster", "q4-fast-1ms", "ring-in-graph", "prepared-in-graph", "warps-in-graph", "fold-in-graph", "candidate-in-graph", "rec-norm-in-graph", "fold-main-in-graph", "pf-out-in-graph", "pf-early-in-graph", "fork-z-in-graph", "f32-fork-z-in-graph", "norm-last-in-graph", "f32-norm-last-in-graph", "conv-rec-in-graph", "f32-conv-rec-in-graph", "four-in-graph", "f32-four-in-graph", "rows16-in-graph", "warp-prep-in-graph", "fold-main-warp-in-graph", "out-smem-in-graph", "fold-ring-in-graph", "fold-depth-in-graph", "depth-all-in-graph", "fold-pace-in-graph", "pace-all-in-graph", "pace-ilp-in-graph", "pace-late-in-graph", "pace-defer-in-graph", "ba-conv-in-graph", "out-per-sm1-in-graph", "out-stages4-in-graph", "out1-ba-conv-in-graph", "out1-late-in-graph", "out1-defer-in-graph", "out1-l2-in-graph", "out1-ilp-in-graph", "out1-split-in-graph", "split-x2-in-graph", "own-out4-in-graph", "own-out8-in-graph", "kc-out-in-graph", "span2-in-graph", "span3-in-graph", "span1x2-in-graph", "span2x2-in-graph"});
}

TEST_CASE("gdn-stack-layers' line: slope and intercept of points worked out by hand, and the largest residual") {
  using experiments::fit_line;
  // On a line: 4..48 layers at 25 us a layer and 40 us fixed.
  const std::vector<double> x{4, 8, 16, 32, 48};
  std::vector<double> y;
  for (double l : x) y.push_back(0.040 + 0.025 * l);
  const auto f = fit_line(x, y);
  CHECK(f.a == doctest::Approx(0.040).epsilon(1e-12));
  CHECK(f.b == doctest::Approx(0.025).epsilon(1e-12));
  CHECK(f.max_rel_residual < 1e-12);
  // Three points off a line: (0, 0), (1, 2), (2, 2): mean x 1, mean y 4/3, slope 1, intercept 1/3; residuals
  // -1/3, 2/3, -1/3; relative to y the largest is (2/3) / 2 (the point at y = 0 is left out of the ratio).
  const auto g = fit_line(std::vector<double>{0, 1, 2}, std::vector<double>{0, 2, 2});
  CHECK(g.b == doctest::Approx(1.0));
  CHECK(g.a == doctest::Approx(1.0 / 3));
  CHECK(g.max_rel_residual == doctest::Approx(1.0 / 3));
}

TEST_CASE("gdn-stack-layers' line refuses what has no line, naming why") {
  using experiments::fit_line;
  using V = std::vector<double>;
  CHECK_THROWS_WITH_AS(fit_line(V{1, 2}, V{1}), doctest::Contains("2 x against 1 y"), Error);
  CHECK_THROWS_WITH_AS(fit_line(V{1}, V{1}), doctest::Contains("two points at least"), Error);
  CHECK_THROWS_WITH_AS(fit_line(V{3, 3}, V{1, 2}), doctest::Contains("no slope"), Error);
  CHECK_THROWS_WITH_AS(fit_line(V{1, 2}, V{1, std::nan("")}), doctest::Contains("point 1 is not finite"), Error);
}

TEST_CASE("gdn-stack-layers is registered with its three claims, and needs a device") {
  const auto& e = registry().experiment("gdn-stack-layers");
  CHECK(e.needs_device);
  std::set<std::string> ids;
  for (const auto& c : e.claims) ids.insert(c.id);
  CHECK(ids == std::set<std::string>{"graph-bitwise", "linear-in-layers", "fixed-part-small"});
}

// gdn-stack's plan, host-side: what it would measure and race, checked without a device (a duplicate tier would be timed
// twice, a race naming a tier it does not measure would leave its claim unevaluated, a refused configuration is a skip).
TEST_CASE("gdn-stack's plan: each tier once, every race between two of its tiers under one of its claims, every fast tier's configuration valid") {
  const auto tiers = experiments::stack_tiers();
  const std::set<std::string> unique(tiers.begin(), tiers.end());
  CHECK(unique.size() == tiers.size());
  CHECK(std::vector<std::string>(tiers.begin(), tiers.begin() + 4) == std::vector<std::string>{"f32", "f32-fast", "q4", "q4-fast"});
  std::set<std::string> ids;
  for (const auto& c : registry().experiment("gdn-stack").claims) ids.insert(c.id);
  const auto races = experiments::stack_races();
  std::set<std::string> raced;
  for (const auto& r : races) {
    CAPTURE(r.a);
    CAPTURE(r.b);
    CHECK(unique.count(r.a) == 1);
    CHECK(unique.count(r.b) == 1);
    CHECK(r.a != r.b);
    CHECK(ids.count(r.claim) == 1);
    CHECK(raced.insert(r.claim).second);  // one race a claim
  }
  // The candidate: raced against pace_out1 (its twin before it became the candidate) and against fold (the candidate before it).
  auto race = [&](const std::string& id) { return *std::find_if(races.begin(), races.end(), [&](const auto& r) { return r.claim == id; }); };
  CHECK(race("out1-split-in-graph").a == "q4-fast-pace-out1");
  CHECK(race("out1-split-in-graph").b == "q4-fast");
  CHECK(race("candidate-in-graph").a == "q4-fast-fold");
  CHECK(race("candidate-in-graph").b == "q4-fast");
  CHECK(race("fold-in-graph").b == "q4-fast-fold");
  CHECK(gdn::fused_step_variant(experiments::stack_config("q4-fast")) == gdn::fused_step_variant(gdn::step_candidate()));
  CHECK(gdn::fused_step_variant(experiments::stack_config("q4-fast-fold")) == gdn::fused_step_variant(gdn::candidate_twins().fold));
  for (const auto& t : tiers) {
    if (t.find("-fast") == std::string::npos) continue;
    CAPTURE(t);
    const auto c = experiments::stack_config(t);
    CHECK(gdn::config_error(c, rg::qwen35_27b()) == "");
    CHECK(registry().has_variant(gdn::fused_step_variant(c)));
  }
}
