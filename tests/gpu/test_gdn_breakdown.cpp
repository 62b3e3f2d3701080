// The GDN step as a list of operators (GdnDevice::step_operators, what gdn-step-breakdown times): the
// listed operators, run one by one (a stream sync after each), give bitwise the outputs, every
// intermediate and the state of the step (the host-facing step(), which runs enqueue_step), token
// after token, on both tiers; the list carries the byte model of its tier and the kernels the step
// launches, no more and no fewer; bad buffers and unloaded layers are refused.
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gdn/gdn_device.hpp"
#include "gdn/step_bytes.hpp"
#include "gdn/step_op.hpp"
#include "gdn_common.hpp"
#include "gdn_stack.hpp"
#include "gdn_util.hpp"
#include "klab/cuda.hpp"
#include "klab/error.hpp"
#include "klab/metrics.hpp"
#include "klab/problem.hpp"
#include "klab/ref/gdn.hpp"
#include "klab/ref/gdn_q4.hpp"
#include "klab/timing.hpp"
#include "q4_gemv/prepared_x.cuh"

using namespace klab;
namespace rg = klab::ref::gdn;
using gdn::GdnDevice;
using rg::Geometry;
using rg::What;

namespace {

// q4-able geometries (hidden and nv*dv multiples of 32): nv != nk, dk != dv; and the Qwen3.5-27B state.
const std::vector<test::Named>& geometries() {
  static const std::vector<test::Named> v{
      {"nv != nk, dk != dv, dv not a multiple of 32", Geometry{256, 2, 6, 32, 48, 4, 1e-6}},
      {"the Qwen3.5-27B state (16/48 heads of 128) with hidden 256", Geometry{256, 16, 48, 128, 128, 4, 1e-6}},
  };
  return v;
}

void load(GdnDevice& dev, const rg::LayerWeights& w, const rg::Q4Projections* q) {
  if (!q) {
    dev.load_f32(0, w);
    return;
  }
  experiments::put_all(dev.q4_pool(), *q);
  REQUIRE(dev.load_q4(0, w, experiments::kQkv, experiments::kZ, experiments::kOut) == "");
}

// T tokens of h stepped through two devices side by side: the elements that differ, of the output,
// of every intermediate, and of the state (S and conv history; rg::all_whats) after each token.
struct TwinsDiff {
  std::int64_t out = 0, mid = 0, state = 0;
};
TwinsDiff twins_diff(GdnDevice& a, GdnDevice& b, const std::vector<float>& h, const Geometry& g, int T) {
  TwinsDiff d;
  for (int t = 0; t < T; ++t) {
    d.out += bitwise_diff(a.step(0, test::tok(h, g, t)), b.step(0, test::tok(h, g, t)));
    for (What wh : rg::all_whats()) (wh == What::S || wh == What::HIST ? d.state : d.mid) += bitwise_diff(a.get(0, wh), b.get(0, wh));
  }
  return d;
}

// The kernel nodes a list of the step's operators adds to a CUDA graph.
int kernels_of(const std::vector<GdnDevice::StepOperator>& ops, cudaStream_t s) {
  int n = 0;
  for (const auto& op : ops) n += graph_nodes(op.enqueue, s).kernels;
  return n;
}

// The Qwen3.5-27B state's geometry (geometries()[1]) with weights, their q4 form and T tokens, from `seed`.
struct QwenCase {
  Geometry g;
  rg::LayerWeights w;
  rg::Q4Projections q;
  std::vector<float> h;
};
QwenCase qwen_case(int T, std::uint64_t seed) {
  QwenCase c{geometries()[1].g, {}, {}, {}};
  c.w = rg::random_weights(c.g, seed);
  c.q = rg::quantize_projections(c.w);
  c.h = test::gdn_inputs(c.g, T, seed + 1, 815 + int(seed));
  return c;
}

// dev (nl layers) loaded with w, on the f32 tier where c is (its big three's kernel set first: the
// projections keep it) or q4's, every layer its own weights when nl > 1 (gdn-stack's loaders), then configured as c.
void setup_config(GdnDevice& dev, const gdn::FusedStepConfig& c, const rg::LayerWeights& w, const rg::Q4Projections& q) {
  REQUIRE(gdn::config_error(c, w.g) == "");
  const int nl = dev.layers();
  if (c.f32) {
    dev.set_f32_variant(gdn::f32_kernel_of(c));
    if (nl == 1) dev.load_f32(0, w);
    else experiments::load_stack_f32(dev, w);
  } else if (nl == 1) {
    load(dev, w, &q);
  } else {
    experiments::load_stack_q4(dev, w, q);
  }
  gdn::apply(c, dev);
}

// One step of layer 0 of dev: its operators' names with the kernels each launches, and their total.
struct StepKernels {
  std::vector<std::pair<std::string, int>> ops;
  int total = 0;
};
StepKernels step_kernels(const GdnDevice& dev, const Geometry& g) {
  DeviceBuffer<float> d_h(std::size_t(g.hidden)), d_y(std::size_t(g.hidden));
  cudaStream_t s = nullptr;
  KLAB_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  StepKernels k;
  for (const auto& op : dev.step_operators(0, d_h.get(), d_y.get())) {
    k.ops.emplace_back(op.name, kernels_of({op}, s));
    k.total += k.ops.back().second;
  }
  KLAB_CUDA(cudaStreamDestroy(s));
  return k;
}

// One token h0 through nl layers as one captured graph (GdnStack), on configurations a and b: each
// graph against its own sequential enqueue (bitwise), the two outputs against each other, and the
// graphs' kernel nodes.
struct GraphTwins {
  bool a_bitwise = false, b_bitwise = false;
  std::int64_t out_diff = -1;
  int a_kernels = 0, b_kernels = 0;
};
GraphTwins graph_twins(const gdn::FusedStepConfig& a, const gdn::FusedStepConfig& b, int nl, const rg::LayerWeights& w, const rg::Q4Projections& q,
                       std::span<const float> h0) {
  cudaStream_t s = nullptr;
  KLAB_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  GraphTwins r;
  {
    GdnDevice da(w.g, nl), db(w.g, nl);
    setup_config(da, a, w, q);
    setup_config(db, b, w, q);
    experiments::GdnStack sa(da, s), sb(db, s);
    sa.set_input(h0);
    sb.set_input(h0);
    r.a_bitwise = experiments::check_stack(da, sa).bitwise();
    r.b_bitwise = experiments::check_stack(db, sb).bitwise();
    r.out_diff = bitwise_diff(sb.output(), sa.output());
    r.a_kernels = sa.kernel_nodes();
    r.b_kernels = sb.kernel_nodes();
  }
  KLAB_CUDA(cudaStreamDestroy(s));
  return r;
}

// Configuration b against a on c's T tokens, each check bit for bit: token by token (step(): out, intermediates and state),
// as one run of the T tokens (run(): out and every what; not all zero), and as one token through nl layers in a graph
// (graph_twins: each graph against its sequential enqueue, the outputs against each other). Returns the two graphs'
// kernel nodes (a's, b's) for the caller's count.
std::pair<int, int> same_bits_everywhere(const gdn::FusedStepConfig& a_cfg, const gdn::FusedStepConfig& b_cfg, const QwenCase& c, int T, int nl) {
  GdnDevice a(c.g, 1), b(c.g, 1);
  setup_config(a, a_cfg, c.w, c.q);
  setup_config(b, b_cfg, c.w, c.q);
  const TwinsDiff d = twins_diff(b, a, c.h, c.g, T);
  CHECK(d.out == 0);
  CHECK(d.mid + d.state == 0);
  a.reset();
  b.reset();
  const std::vector<float> ya = a.run(0, T, c.h), yb = b.run(0, T, c.h);
  CHECK(bitwise_diff(yb, ya) == 0);
  std::int64_t rest = 0;
  for (What wh : rg::all_whats()) rest += bitwise_diff(b.get(0, wh), a.get(0, wh));
  CHECK(rest == 0);
  CHECK(bitwise_diff(yb, std::vector<float>(yb.size(), 0.0f)) > 0);
  const GraphTwins gt = graph_twins(a_cfg, b_cfg, nl, c.w, c.q, test::tok(c.h, c.g, 0));
  CHECK(gt.a_bitwise);
  CHECK(gt.b_bitwise);
  CHECK(gt.out_diff == 0);
  return {gt.a_kernels, gt.b_kernels};
}

}  // namespace

TEST_CASE("GDN breakdown: the listed operators run one by one equal the step bitwise (outputs, intermediates, S, hist), f32 and q4 tiers") {
  constexpr int T = 12;
  for (const auto& [why, g] : geometries()) {
    for (bool q4 : {false, true}) {
      CAPTURE(why);
      CAPTURE(q4);
      const auto w = rg::random_weights(g, 31);
      const auto q = rg::quantize_projections(w);
      const auto h = test::gdn_inputs(g, T, 32, 900);
      GdnDevice stepped(g, 1), listed(g, 1);
      load(stepped, w, q4 ? &q : nullptr);
      load(listed, w, q4 ? &q : nullptr);
      cudaStream_t s = nullptr;
      KLAB_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      listed.set_stream(s);
      DeviceBuffer<float> d_h(std::size_t(g.hidden)), d_y(std::size_t(g.hidden));
      const auto ops = listed.step_operators(0, d_h.get(), d_y.get());
      // The list: the nine operators in step order, with the byte model of this tier.
      const auto model = gdn::step_operator_bytes(g, q4);
      REQUIRE(ops.size() == gdn::kStepOperators.size());
      for (std::size_t i = 0; i < ops.size(); ++i) {
        CHECK(std::string(ops[i].name) == gdn::kStepOperators[i]);
        CHECK(ops[i].bytes.weights == model[i].bytes.weights);
        CHECK(ops[i].bytes.state == model[i].bytes.state);
        CHECK(ops[i].bytes.act == model[i].bytes.act);
      }
      std::int64_t out_diff = 0, mid_diff = 0, state_diff = 0;
      for (int t = 0; t < T; ++t) {
        const auto y_step = stepped.step(0, test::tok(h, g, t));
        d_h.upload(h.data() + std::size_t(t) * std::size_t(g.hidden), std::size_t(g.hidden));
        KLAB_CUDA(cudaDeviceSynchronize());
        poison_device(d_y.get(), d_y.size(), s);
        for (const auto& op : ops) {
          op.enqueue(s);
          KLAB_CUDA(cudaStreamSynchronize(s));
        }
        out_diff += bitwise_diff(d_y.download(), y_step);
        for (What wh : rg::all_whats()) {
          if (wh == What::OUT) continue;  // OUT is step()'s own output buffer; the list wrote d_y (compared above)
          (wh == What::S || wh == What::HIST ? state_diff : mid_diff) += bitwise_diff(listed.get(0, wh), stepped.get(0, wh));
        }
      }
      CHECK(out_diff == 0);
      CHECK(mid_diff == 0);
      CHECK(state_diff == 0);
      // The state moved (a list that did nothing to S would not compare equal after T tokens).
      CHECK(bitwise_diff(listed.get(0, What::S), std::vector<float>(listed.get(0, What::S).size(), 0.0f)) > 0);
      // The same kernels as the step: enqueue_run of one token (enqueue_step and a copy of y) launches
      // exactly the kernels of the nine operators.
      int listed_kernels = 0;
      for (const auto& op : ops) {
        const int k = graph_nodes(op.enqueue, s).kernels;
        CAPTURE(op.name);
        CHECK(k >= 1);
        listed_kernels += k;
      }
      DeviceBuffer<float> d_y2(std::size_t(g.hidden));
      const int step_kernels = graph_nodes([&](cudaStream_t st) { listed.enqueue_run(0, 1, d_h.get(), d_y2.get(), st); }, s).kernels;
      CHECK(step_kernels == listed_kernels);
      KLAB_CUDA(cudaStreamDestroy(s));
    }
  }
}

TEST_CASE("GDN fused prep: beta/g, conv + SiLU and the q/k norm as one launch give the three launches' bits (outputs, intermediates, S, hist), f32 and q4 tiers") {
  constexpr int T = 12;
  std::vector<test::Named> gs = geometries();
  // dk = 320 > 256 threads: two channels of a head per thread; ck = 2: one history frame; nv dv not a multiple of the block.
  gs.push_back({"dk 320 (two channels a thread), ck 2, 40-wide value heads", Geometry{256, 1, 4, 320, 40, 2, 1e-6}});
  for (const auto& [why, g] : gs) {
    for (bool q4 : {false, true}) {
      CAPTURE(why);
      CAPTURE(q4);
      if (q4 && !rg::q4_geometry_error(g).empty()) continue;  // no q4 tier for this geometry (the f32 case ran)
      const auto w = rg::random_weights(g, 41);
      const auto q = rg::quantize_projections(w);
      const auto h = test::gdn_inputs(g, T, 42, 901);
      GdnDevice three(g, 1), one(g, 1);
      load(three, w, q4 ? &q : nullptr);
      load(one, w, q4 ? &q : nullptr);
      CHECK_FALSE(one.fused_prep());
      one.set_fused_prep(true);
      CHECK(one.fused_prep());
      const TwinsDiff d = twins_diff(one, three, h, g, T);
      CHECK(d.out == 0);
      CHECK(d.mid == 0);
      CHECK(d.state == 0);
      CHECK(bitwise_diff(one.get(0, What::HIST), std::vector<float>(one.get(0, What::HIST).size(), 0.0f)) > 0);  // the history moved
      // The list: seven operators with the fused byte model, two kernels fewer than the nine.
      DeviceBuffer<float> d_h(std::size_t(g.hidden)), d_y(std::size_t(g.hidden));
      cudaStream_t s = nullptr;
      KLAB_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      const auto ops = one.step_operators(0, d_h.get(), d_y.get());
      const auto model = gdn::step_operator_bytes(g, q4, true);
      REQUIRE(ops.size() == gdn::kFusedPrepOperators.size());
      for (std::size_t i = 0; i < ops.size(); ++i) {
        CHECK(std::string(ops[i].name) == gdn::kFusedPrepOperators[i]);
        CHECK(ops[i].bytes.total() == model[i].bytes.total());
      }
      CHECK(kernels_of(ops, s) == kernels_of(three.step_operators(0, d_h.get(), d_y.get()), s) - 2);
      KLAB_CUDA(cudaStreamDestroy(s));
    }
  }
}

TEST_CASE("GDN PDL chain: the step's candidate's base (q4 tier, b|a a launch of its own) gives the same bits with its small kernels chained, and the chain refuses what it cannot make safe") {
  constexpr int T = 8;
  int stepped = 0;
  for (const auto& [why, g] : geometries()) {
    CAPTURE(why);
    // its recurrence (cols=32) takes dk = 32 and 128; out=prepared needs dv % 32 == 0 (not dv = 48: there its twin without it)
    // (the base: the candidate's fold=ba is a PDL launch, which needs the chain)
    auto cand = g.dv % 32 == 0 ? gdn::candidate_twins().ba_own : gdn::candidate_twins().out_own;
    REQUIRE(gdn::config_error(cand, g) == "");
    ++stepped;
    const auto w = rg::random_weights(g, 51);
    const auto q = rg::quantize_projections(w);
    const auto h = test::gdn_inputs(g, T, 52, 902);
    GdnDevice off(g, 1), on(g, 1);
    load(off, w, &q);
    load(on, w, &q);
    gdn::apply(cand, on);
    cand.chain = false;
    gdn::apply(cand, off);
    CHECK(on.pdl_chain());
    CHECK_FALSE(off.pdl_chain());
    CHECK(on.ba_variant() == cand.ba);
    const TwinsDiff d = twins_diff(on, off, h, g, T);
    CHECK(d.out == 0);
    CHECK(d.mid + d.state == 0);
    // Refused before any launch: a chain without the fused prep, and a recurrence that loads S before its wait.
    const auto y_before = on.get(0, What::OUT);
    on.set_fused_prep(false);
    CHECK_THROWS_WITH_AS(on.step(0, test::tok(h, g, 0)), doctest::Contains("set_fused_prep"), Error);
    on.set_fused_prep(true);
    on.set_recurrence_variant("gdn_recurrence/impl=fused,cols=32,rows=8,pdl=on");
    CHECK_THROWS_WITH_AS(on.step(0, test::tok(h, g, 0)), doctest::Contains("pdl=early"), Error);
    CHECK(bitwise_diff(on.get(0, What::OUT), y_before) == 0);  // nothing ran
    CHECK_THROWS_WITH_AS(on.set_ba_variant("f32_gemv/impl=nope"), doctest::Contains("split-row"), Error);
  }
  CHECK(stepped == 2);
}

TEST_CASE("GDN gated norm in the recurrence (norm=gated): o bit for bit the recurrence's without it, onn and the output within 1e-5 of the unfused norm, one launch fewer") {
  constexpr int T = 8;
  const Geometry g{256, 16, 48, 128, 128, 4, 1e-6};  // the Qwen3.5-27B state: a head's 128 columns are 8 tiles of 16
  for (const char* rec : {"gdn_recurrence/impl=fused,cols=16,rows=8,pdl=early", "gdn_recurrence/impl=fused,cols=32,rows=8,pdl=early"}) {
    for (bool q4 : {false, true}) {
      CAPTURE(rec);
      CAPTURE(q4);
      const auto w = rg::random_weights(g, 61);
      const auto q = rg::quantize_projections(w);
      const auto h = test::gdn_inputs(g, T, 62, 903);
      GdnDevice two(g, 1), one(g, 1);
      load(two, w, q4 ? &q : nullptr);
      load(one, w, q4 ? &q : nullptr);
      for (GdnDevice* d : {&two, &one}) d->set_fused_prep(true);
      two.set_recurrence_variant(rec);
      one.set_recurrence_variant(std::string(rec) + ",norm=gated");
      double worst = 0;
      std::int64_t on_diff = 0, state_diff = 0;
      for (int t = 0; t < T; ++t) {
        const auto y1 = one.step(0, test::tok(h, g, t)), y2 = two.step(0, test::tok(h, g, t));
        worst = std::max({worst, accuracy(y1, y2).max_rel, accuracy(one.get(0, What::ONN), two.get(0, What::ONN)).max_rel});
        on_diff += bitwise_diff(one.get(0, What::ON), two.get(0, What::ON));
        state_diff += bitwise_diff(one.get(0, What::S), two.get(0, What::S));
      }
      CHECK(on_diff == 0);
      CHECK(state_diff == 0);
      CHECK(worst < 1e-5);
      CHECK(worst > 0);  // another order of the sum of o^2: not bits (a check that compares the same buffer twice would read 0)
      DeviceBuffer<float> d_h(std::size_t(g.hidden)), d_y(std::size_t(g.hidden));
      cudaStream_t s = nullptr;
      KLAB_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      const auto ops1 = one.step_operators(0, d_h.get(), d_y.get()), ops2 = two.step_operators(0, d_h.get(), d_y.get());
      REQUIRE(ops1.size() + 1 == ops2.size());
      CHECK(std::string(ops1[4].name) == gdn::kRecurrenceNorm);
      CHECK(kernels_of(ops1, s) == kernels_of(ops2, s) - 1);
      KLAB_CUDA(cudaStreamDestroy(s));
    }
  }
}

TEST_CASE("GDN stacked input projections (set_merged_in): in_proj_qkv and in_proj_z as one q4 launch give the two launches' bits, raw and packed kernels; f32 layers refused") {
  constexpr int T = 8;
  const char* kernels[] = {gdn::kDefaultQ4Variant, "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=launch,pdl=on,rows=8",
                           "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,load=bulk,pdl=on,rows=8"};
  for (const auto& [why, g] : geometries()) {
    for (const char* kernel : kernels) {
      CAPTURE(why);
      CAPTURE(kernel);
      const auto w = rg::random_weights(g, 71);
      const auto q = rg::quantize_projections(w);
      const auto h = test::gdn_inputs(g, T, 72, 904);
      GdnDevice apart(g, 1), one(g, 1);
      load(apart, w, &q);
      for (GdnDevice* d : {&apart, &one}) d->set_q4_variant(kernel);
      // one: stacked before its layer is loaded (use_q4 stacks it) and again after a change of kernel (set_q4_variant restacks it).
      one.set_merged_in(true);
      load(one, w, &q);
      one.set_q4_variant(gdn::kDefaultQ4Variant);
      one.set_q4_variant(kernel);
      CHECK(one.merged_in());
      const TwinsDiff d = twins_diff(one, apart, h, g, T);
      CHECK(d.out == 0);
      CHECK(d.mid + d.state == 0);
      CHECK(bitwise_diff(one.get(0, What::Z), std::vector<float>(one.get(0, What::Z).size(), 0.0f)) > 0);  // z was written
      // The list: in_proj_qkvz first, then the apart list's operators from in_proj_ba on; one projection's kernels fewer.
      DeviceBuffer<float> d_h(std::size_t(g.hidden)), d_y(std::size_t(g.hidden));
      cudaStream_t s = nullptr;
      KLAB_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      const auto ops1 = one.step_operators(0, d_h.get(), d_y.get()), ops2 = apart.step_operators(0, d_h.get(), d_y.get());
      REQUIRE(ops1.size() + 1 == ops2.size());
      CHECK(std::string(ops1[0].name) == gdn::kStackedInProj);
      CHECK(ops1[0].bytes.weights == ops2[0].bytes.weights + ops2[1].bytes.weights);
      CHECK(kernels_of({ops1[0]}, s) == kernels_of({ops2[0]}, s));
      CHECK(kernels_of(ops1, s) == kernels_of(ops2, s) - kernels_of({ops2[1]}, s));
      KLAB_CUDA(cudaStreamDestroy(s));
      // A stale binding is refused as the projections refuse it (no silent fallback): erase and re-put a key.
      REQUIRE(one.q4_pool().erase(2));
      one.q4_pool().put(2, q.z);
      CHECK_THROWS_WITH_AS(one.step(0, test::tok(h, g, 0)), doctest::Contains("in_proj_z"), Error);
    }
  }
  // The stacked launch on a kernel of its own (set_stacked_q4_variant): the TMA ring beside grid=groups,
  // the same layout (tiles-r8) and dot form: the same bits. Another layout (rows=4: tiles-r4) is taken, the
  // stacked copy repacked in it: the same bits again. A raw-layout kernel is refused, nothing changed; a later
  // change of the q4 variant's layout leaves the stacked copy in its kernel's.
  for (const auto& [why, g] : geometries()) {
    CAPTURE(why);
    const auto w = rg::random_weights(g, 74);
    const auto q = rg::quantize_projections(w);
    const auto h = test::gdn_inputs(g, T, 75, 905);
    GdnDevice apart(g, 1), ring(g, 1);
    load(apart, w, &q);
    load(ring, w, &q);
    for (GdnDevice* d : {&apart, &ring}) d->set_q4_variant(kernels[1]);
    ring.set_merged_in(true);
    ring.set_stacked_q4_variant(gdn::kStackedRing);
    CHECK(ring.stacked_q4_variant() == gdn::kStackedRing);
    const TwinsDiff d = twins_diff(ring, apart, h, g, T);
    CHECK(d.out == 0);
    CHECK(d.mid + d.state == 0);
    const std::string rows4 = "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=launch,pdl=on,rows=4";
    ring.set_stacked_q4_variant(rows4);
    const TwinsDiff d4 = twins_diff(ring, apart, h, g, T);
    CHECK(d4.out == 0);
    CHECK(d4.mid + d4.state == 0);
    CHECK_THROWS_WITH_AS(ring.set_stacked_q4_variant(gdn::kDefaultQ4Variant), doctest::Contains("raw layout"), Error);
    CHECK(ring.stacked_q4_variant() == rows4);
    ring.set_q4_variant(gdn::kDefaultQ4Variant);  // the raw layout for the others; the stacked copy stays in tiles-r4
    CHECK_NOTHROW(ring.step(0, test::tok(h, g, 0)));
    ring.set_stacked_q4_variant("");  // the stacked launch on the q4 variant again: its copy restacked raw
    CHECK_NOTHROW(ring.step(0, test::tok(h, g, 0)));
  }
  // f32 layers: one stacked launch of the layer's f32 kernel (F32Kernel::launch_stacked) over both weights, and with
  // fold=ba-main b|a's rows too: the same bits as the launches apart (b|a on the same kernel), one and two launches
  // fewer; refused before any launch on a kernel without a stacked launch, and with the q4 tier's fold=ba.
  const Geometry g = geometries()[0].g;
  const auto w32 = rg::random_weights(g, 73);
  const auto h32 = test::gdn_inputs(g, 4, 74, 903);
  for (const char* kern : {gdn::kDefaultF32Variant, gdn::kF32PdlKernel}) {
    CAPTURE(kern);
    GdnDevice one(g, 1), two(g, 1);
    for (GdnDevice* d : {&one, &two}) {
      d->set_f32_variant(kern);
      d->set_ba_variant(kern);
      d->load_f32(0, w32);
    }
    one.set_merged_in(true);
    for (bool fold : {false, true}) {
      CAPTURE(fold);
      one.set_fold_ba_main(fold);
      one.reset();
      two.reset();
      const TwinsDiff d = twins_diff(one, two, h32, g, 4);
      CHECK(d.out == 0);
      CHECK(d.mid + d.state == 0);
      CHECK(step_kernels(one, g).total == step_kernels(two, g).total - (fold ? 2 : 1));
    }
    one.set_fold_ba_main(false);
    one.set_fold_ba(true);
    CHECK_THROWS_WITH_AS(one.step(0, test::tok(h32, g, 0)), doctest::Contains("q4 tier's"), Error);
  }
  GdnDevice f32(g, 1);
  f32.set_f32_variant("f32_gemv/impl=split-row,pdl=off");
  f32.load_f32(0, w32);
  f32.set_merged_in(true);
  CHECK_THROWS_WITH_AS(f32.step(0, std::vector<float>(std::size_t(g.hidden), 0.5f)), doctest::Contains("stacked launch"), Error);
  f32.set_merged_in(false);
  CHECK_NOTHROW(f32.step(0, std::vector<float>(std::size_t(g.hidden), 0.5f)));
  // A geometry whose conv_dim is not a multiple of 4 is refused by set_merged_in, nothing changed.
  const Geometry odd{256, 1, 4, 33, 32, 4, 1e-6};
  GdnDevice d(odd, 1);
  CHECK_THROWS_WITH_AS(d.set_merged_in(true), doctest::Contains("conv_dim 194"), Error);
  CHECK_FALSE(d.merged_in());
}

TEST_CASE("GDN out_proj without its prep launch (set_norm_q8): the step's candidate gives its bits with the gated norm writing out_proj's q8 x, one kernel fewer; what it cannot take is refused") {
  constexpr int T = 8;
  const auto [g, w, q, h] = qwen_case(T, 81);  // dv = 128: a warp per 32 values of onn
  GdnDevice own(g, 1), prepared(g, 1);
  const gdn::FusedStepConfig twin = gdn::candidate_twins().ba_own;  // out_own's base
  REQUIRE(twin.norm_q8);
  setup_config(own, gdn::candidate_twins().out_own, w, q);
  setup_config(prepared, twin, w, q);
  CHECK(prepared.norm_q8());
  const TwinsDiff d = twins_diff(prepared, own, h, g, T);
  CHECK(d.out == 0);
  CHECK(d.mid + d.state == 0);
  CHECK(bitwise_diff(prepared.get(0, What::OUT), std::vector<float>(std::size_t(g.hidden), 0.0f)) > 0);  // y was written
  const StepKernels k1 = step_kernels(prepared, g), k2 = step_kernels(own, g);
  REQUIRE(k1.ops.size() == k2.ops.size());
  CHECK(k1.total == k2.total - 1);
  CHECK(k1.ops.back().second == 1);  // out_proj: the main kernel alone
  // Refused when enqueued, before any launch (nothing ran): a q4 kernel without launch_prepared, the
  // gated norm inside the recurrence.
  const auto y_before = prepared.get(0, What::OUT);
  prepared.set_q4_variant(gdn::kDefaultQ4Variant);
  CHECK_THROWS_WITH_AS(prepared.step(0, test::tok(h, g, 0)), doctest::Contains("takes its x prepared"), Error);
  prepared.set_q4_variant(twin.q4_kernel);
  prepared.set_recurrence_variant(twin.recurrence + ",norm=gated");
  CHECK_THROWS_WITH_AS(prepared.step(0, test::tok(h, g, 0)), doctest::Contains("a launch of its own"), Error);
  CHECK(bitwise_diff(prepared.get(0, What::OUT), y_before) == 0);
  CHECK(gdn::config_error([&] { auto c = twin; c.recurrence += ",norm=gated"; return c; }(), g).find("a launch of its own") != std::string::npos);
  // A geometry whose dv is not a multiple of 32 is refused by set_norm_q8, nothing changed; f32 layers when stepped.
  const Geometry odd = geometries()[0].g;
  GdnDevice f32(odd, 1);
  CHECK_THROWS_WITH_AS(f32.set_norm_q8(true), doctest::Contains("dv = 48"), Error);
  CHECK_FALSE(f32.norm_q8());
  GdnDevice f32b(g, 1);
  f32b.load_f32(0, w);
  f32b.set_norm_q8(true);
  CHECK_THROWS_WITH_AS(f32b.step(0, test::tok(h, g, 0)), doctest::Contains("q4 variant"), Error);
}

TEST_CASE("GDN b|a in the stacked launch's prep kernel (set_fold_ba): the step's candidate gives its base's bits with fold=ba, one launch fewer; what it cannot take is refused") {
  constexpr int T = 8;
  const auto [g, w, q, h] = qwen_case(T, 91);  // dv = 128: a warp per 32 values of onn
  GdnDevice cand(g, 1), fold(g, 1);
  const gdn::FusedStepConfig twin = gdn::candidate_twins().fold;
  REQUIRE(twin.fold_ba);
  setup_config(cand, gdn::candidate_twins().ba_own, w, q);  // fold's base
  setup_config(fold, twin, w, q);
  CHECK(fold.fold_ba());
  const TwinsDiff d = twins_diff(fold, cand, h, g, T);
  CHECK(d.out == 0);
  CHECK(d.mid + d.state == 0);
  CHECK(bitwise_diff(fold.get(0, What::B), std::vector<float>(std::size_t(g.nv), 0.0f)) > 0);  // b|a was written
  const StepKernels k1 = step_kernels(fold, g), k2 = step_kernels(cand, g);
  REQUIRE(k1.ops.size() + 1 == k2.ops.size());
  CHECK(k1.ops[0].first == gdn::kStackedInProjBa);
  CHECK(k1.ops[0].second == 2);  // the prep with b|a, the stacked kernel
  CHECK(k1.total == k2.total - 1);
  // Refused when enqueued, before any launch: another b|a kernel, no chain, the projections apart.
  const auto y_before = fold.get(0, What::OUT);
  fold.set_ba_variant("f32_gemv/impl=split-row,pdl=off");
  CHECK_THROWS_WITH_AS(fold.step(0, test::tok(h, g, 0)), doctest::Contains("split-row,pdl=on's code"), Error);
  fold.set_ba_variant(twin.ba);
  fold.set_pdl_chain(false);
  CHECK_THROWS_WITH_AS(fold.step(0, test::tok(h, g, 0)), doctest::Contains("PDL chain"), Error);
  fold.set_pdl_chain(true);
  fold.set_merged_in(false);
  CHECK_THROWS_WITH_AS(fold.step(0, test::tok(h, g, 0)), doctest::Contains("set_merged_in"), Error);
  CHECK(bitwise_diff(fold.get(0, What::OUT), y_before) == 0);
}

TEST_CASE("GDN b|a in the conv_norm_bg launch (set_fold_ba_conv, pace_all's twin pace_ba_conv): pace_all's bits, the stacked launch's prep h's q8 form alone; the kernel gives in_prep_ba's and conv_norm_bg's bits at hidden 5120; refusals") {
  constexpr int T = 8;
  const auto [g, w, q, h] = qwen_case(T, 93);
  const auto tw = gdn::candidate_twins();
  GdnDevice base(g, 1), conv(g, 1);
  setup_config(base, tw.pace_all, w, q);
  setup_config(conv, tw.pace_ba_conv, w, q);
  REQUIRE(conv.fold_ba_conv());
  const TwinsDiff d = twins_diff(conv, base, h, g, T);
  CHECK(d.out == 0);
  CHECK(d.mid + d.state == 0);  // b|a, beta and g included (rg::all_whats)
  CHECK(bitwise_diff(conv.get(0, What::B), std::vector<float>(std::size_t(g.nv), 0.0f)) > 0);  // b|a was written
  const StepKernels k1 = step_kernels(conv, g), k2 = step_kernels(base, g);
  REQUIRE(k1.ops.size() == k2.ops.size());
  CHECK(k1.ops[0].first == gdn::kStackedInProj);
  CHECK(k1.ops[0].second == 2);  // in_prep, the stacked kernel
  CHECK(k1.ops[1].first == gdn::kConvNormBa);
  CHECK(k1.ops[1].second == 1);
  CHECK(k1.total == k2.total);
  // Refused when enqueued, before any launch: fold=ba beside it, no chain.
  const auto y_before = conv.get(0, What::OUT);
  conv.set_fold_ba(true);
  CHECK_THROWS_WITH_AS(conv.step(0, test::tok(h, g, 0)), doctest::Contains("two launches"), Error);
  conv.set_fold_ba(false);
  conv.set_pdl_chain(false);
  CHECK_THROWS_WITH_AS(conv.step(0, test::tok(h, g, 0)), doctest::Contains("PDL chain"), Error);
  CHECK(bitwise_diff(conv.get(0, What::OUT), y_before) == 0);

  // The kernels alone at hidden 5120 (split-row's float4s over every one of its 256 threads' chains), at dk 128, 64
  // and 32 (blocks of 128, 64, 32 threads: each standing for 2, 4, 8 of split-row's): conv_norm_ba against
  // in_prep_ba then conv_norm_bg, both in the PDL chain, bit for bit in every output.
  for (int dk : {128, 64, 32}) {
    CAPTURE(dk);
    const Geometry G{5120, 16, 48, dk, 128, 4, 1e-6};
    const int C = int(G.conv_dim()), nv = G.nv, H = int(G.hidden);
    // uniform in [-scale, scale), each tensor its own stream
    auto filled = [](std::size_t n, std::uint64_t stream, double scale) { return DeviceBuffer<float>::from(generate(Dist::uniform, n, 93, stream, scale)); };
    const auto hh = filled(std::size_t(H), 1, 1.0), wba = filled(std::size_t(2 * nv) * H, 2, 0.05), xc = filled(std::size_t(C), 3, 1.0),
               cw = filled(std::size_t(C) * G.ck, 4, 0.5), alog = filled(std::size_t(nv), 5, 1.0), dtb = filled(std::size_t(nv), 6, 1.0),
               hist0 = filled(std::size_t(G.ck - 1) * C, 7, 1.0);
    struct Out {
      DeviceBuffer<float> hist, xcv, q, k, ba, beta, g;
    };
    auto out = [&] {
      Out o{DeviceBuffer<float>(hist0.size()), DeviceBuffer<float>(std::size_t(C)), DeviceBuffer<float>(std::size_t(G.key_dim())),
            DeviceBuffer<float>(std::size_t(G.key_dim())), DeviceBuffer<float>(std::size_t(2 * nv)), DeviceBuffer<float>(std::size_t(nv)),
            DeviceBuffer<float>(std::size_t(nv))};
      KLAB_CUDA(cudaMemcpy(o.hist.get(), hist0.get(), hist0.bytes(), cudaMemcpyDeviceToDevice));
      return o;
    };
    Out a = out(), b = out();
    uint4* xq = q4_gemv::prepared_x();
    cudaStream_t s = nullptr;
    KLAB_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    gdn::kernels::in_prep_ba(hh.get(), xq, wba.get(), a.ba.get(), 2 * nv, H, s);
    gdn::kernels::conv_norm_bg(xc.get(), cw.get(), a.hist.get(), a.xcv.get(), a.q.get(), a.k.get(), a.ba.get(), alog.get(), dtb.get(), a.beta.get(),
                               a.g.get(), G.nk, G.dk, G.nv, G.dv, G.ck, s, true);
    gdn::kernels::in_prep(hh.get(), xq, H, s);
    gdn::kernels::conv_norm_ba(xc.get(), cw.get(), b.hist.get(), b.xcv.get(), b.q.get(), b.k.get(), wba.get(), hh.get(), b.ba.get(), alog.get(), dtb.get(),
                               b.beta.get(), b.g.get(), G.nk, G.dk, G.nv, G.dv, G.ck, H, s);
    KLAB_CUDA(cudaStreamSynchronize(s));
    KLAB_CUDA(cudaStreamDestroy(s));
    for (auto [x, y, what] : {std::tuple{&a.ba, &b.ba, "ba"}, {&a.beta, &b.beta, "beta"}, {&a.g, &b.g, "g"}, {&a.xcv, &b.xcv, "xcv"}, {&a.q, &b.q, "q"},
                              {&a.k, &b.k, "k"}, {&a.hist, &b.hist, "hist"}}) {
      CAPTURE(what);
      CHECK(bitwise_diff(x->download(), y->download()) == 0);
    }
    CHECK(bitwise_diff(a.ba.download(), std::vector<float>(std::size_t(2 * nv), 0.0f)) == 2 * nv);  // every row written
  }
  CHECK_THROWS_WITH_AS(gdn::kernels::conv_norm_ba(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                                  nullptr, 16, 96, 48, 128, 4, 5120, nullptr),
                       doctest::Contains("32, 64, 128 or 256"), Error);
}

TEST_CASE("GDN the gated norm and out_proj's q8 x in the recurrence (cols=128,norm=gated with out=prepared): its own prep's bits, within 1e-5 of the candidate's norm, one launch fewer") {
  constexpr int T = 8;
  const auto [g, w, q, h] = qwen_case(T, 93);  // dv = 128: a warp per 32 values of onn
  GdnDevice cand(g, 1), rec(g, 1), own(g, 1);
  const gdn::FusedStepConfig twin = gdn::candidate_twins().rec_norm;
  auto own_cfg = twin;
  own_cfg.norm_q8 = false;  // the same recurrence, out_proj quantising onn in its own prep launch
  setup_config(cand, gdn::candidate_twins().ba_own, w, q);  // rec_norm's base
  setup_config(rec, twin, w, q);
  setup_config(own, own_cfg, w, q);
  const TwinsDiff d = twins_diff(rec, own, h, g, T);
  CHECK(d.out == 0);
  CHECK(d.mid + d.state == 0);
  rec.reset();  // twins_diff stepped it T tokens: both from a zero state again
  double worst = 0;
  for (int t = 0; t < T; ++t) {
    cand.step(0, test::tok(h, g, t));
    rec.step(0, test::tok(h, g, t));
    worst = std::max({worst, accuracy(rec.get(0, What::ON), cand.get(0, What::ON)).max_rel, accuracy(rec.get(0, What::ONN), cand.get(0, What::ONN)).max_rel});
  }
  CHECK(worst < 1e-5);
  CHECK(step_kernels(rec, g).total == step_kernels(cand, g).total - 1);
  CHECK(step_kernels(rec, g).total == step_kernels(own, g).total - 1);  // own: out_proj's prep launch back
}

TEST_CASE("GDN b|a in the stacked kernel's grid (set_fold_ba_main, the candidate's twin fold_main): b|a within f32 rounding of its base's split-row, the step within the q8 tolerance of it, one launch fewer; refusals") {
  constexpr int T = 8;
  const auto [g, w, q, h] = qwen_case(T, 95);
  GdnDevice cand(g, 1), fold(g, 1);
  setup_config(cand, gdn::candidate_twins().ba_own, w, q);  // the twin's base: b|a on split-row
  setup_config(fold, gdn::candidate_twins().fold_main, w, q);
  CHECK(fold.fold_ba_main());
  double ba = 0, out = 0;
  for (int t = 0; t < T; ++t) {
    const auto y1 = fold.step(0, test::tok(h, g, t)), y2 = cand.step(0, test::tok(h, g, t));
    out = std::max(out, accuracy(y1, y2).max_rel);
    for (What wh : {What::A, What::B}) ba = std::max(ba, accuracy(fold.get(0, wh), cand.get(0, wh)).max_rel);
  }
  CHECK(ba < 1e-5);
  CHECK(out < 0.15);  // the step's q8 tolerance (3 x 5e-2): an ulp of b|a may move a q8 rounding downstream
  const StepKernels k1 = step_kernels(fold, g), k2 = step_kernels(cand, g);
  REQUIRE(k1.ops.size() + 1 == k2.ops.size());
  CHECK(k1.ops[0].first == gdn::kStackedInProjBa);
  CHECK(k1.ops[0].second == 2);  // the prep, the stacked kernel with b|a's rows
  CHECK(k1.total == k2.total - 1);
  fold.set_fold_ba(true);
  CHECK_THROWS_WITH_AS(fold.step(0, test::tok(h, g, 0)), doctest::Contains("one of the two"), Error);
  fold.set_fold_ba(false);
  fold.set_stacked_q4_variant(gdn::kStackedRing);
  CHECK_THROWS_WITH_AS(fold.step(0, test::tok(h, g, 0)), doctest::Contains("f32 rows riding along"), Error);
}

TEST_CASE("GDN out_proj's weights prefetched into L2 by conv_norm_bg (set_l2_prefetch, pf=out and pf=out-early): the candidate's bits, no launch more; refusals") {
  constexpr int T = 8;
  const auto [g, w, q, h] = qwen_case(T, 97);
  const auto tw = gdn::candidate_twins();
  for (const auto* twin : {&tw.pf_out, &tw.pf_out_early}) {
    CAPTURE(gdn::fused_step_variant(*twin));
    GdnDevice cand(g, 1), pf(g, 1);
    setup_config(cand, gdn::candidate_twins().fold, w, q);
    setup_config(pf, *twin, w, q);
    CHECK(pf.l2_prefetch() == twin->l2_prefetch);
    const TwinsDiff d = twins_diff(pf, cand, h, g, T);
    CHECK(d.out == 0);
    CHECK(d.mid + d.state == 0);
    CHECK(bitwise_diff(pf.get(0, What::OUT), std::vector<float>(std::size_t(g.hidden), 0.0f)) > 0);  // y was written
    CHECK(step_kernels(pf, g).total == step_kernels(cand, g).total);
    // Refused when enqueued, before any launch: without the fused prep, on a q4 kernel without a packed layout.
    const auto y_before = pf.get(0, What::OUT);
    pf.set_fused_prep(false);
    pf.set_pdl_chain(false);
    pf.set_fold_ba(false);
    CHECK_THROWS_WITH_AS(pf.step(0, test::tok(h, g, 0)), doctest::Contains("set_fused_prep"), Error);
    CHECK(bitwise_diff(pf.get(0, What::OUT), y_before) == 0);
  }
  // The kernel refuses a span cp.async.bulk cannot take, naming it, before any launch.
  DeviceBuffer<float> buf(64);
  CHECK(gdn::kernels::l2_prefetch_error(buf.get(), 256) == "");
  CHECK(gdn::kernels::l2_prefetch_error(reinterpret_cast<const char*>(buf.get()) + 4, 256).find("16-byte") != std::string::npos);
  CHECK(gdn::kernels::l2_prefetch_error(buf.get(), 100).find("multiple of 16") != std::string::npos);
  CHECK(gdn::kernels::l2_prefetch_error(nullptr, 256).find("null") != std::string::npos);
}

TEST_CASE("GDN the f32 tier's candidate (step_f32_candidate: big three on warp-row,unroll=4,pdl=on, qkv, z and b|a as one stacked launch, the q4 candidate's small kernels): within f32 rounding of the default f32 step; set_f32_variant refuses a loaded layer") {
  constexpr int T = 8;
  const auto [g, w, q, h] = qwen_case(T, 99);
  const auto cand = gdn::step_f32_candidate();
  REQUIRE(gdn::config_error(cand, g) == "");
  GdnDevice fast(g, 1), plain(g, 1);
  fast.set_f32_variant(cand.f32_kernel);
  fast.load_f32(0, w);
  gdn::apply(cand, fast);
  plain.load_f32(0, w);
  CHECK(fast.describe(0).find("unroll=4") != std::string::npos);
  CHECK(plain.describe(0).find("unroll=1") != std::string::npos);
  double worst = 0;
  for (int t = 0; t < T; ++t) {
    const auto y1 = fast.step(0, test::tok(h, g, t)), y2 = plain.step(0, test::tok(h, g, t));
    worst = std::max(worst, accuracy(y1, y2).max_rel);
  }
  CHECK(worst < 1e-4);  // the f32 tier's tolerance against f64 (another f32 order of the same sums)
  CHECK(worst > 0);     // another order: not the same bits
  // An f32 layer keeps its kernel: another one is refused while it is loaded, naming the way out, nothing changed.
  CHECK_NOTHROW(fast.set_f32_variant(cand.f32_kernel));
  CHECK_THROWS_WITH_AS(fast.set_f32_variant(gdn::kDefaultF32Variant), doctest::Contains("unload_projections(0)"), Error);
  CHECK(fast.f32_variant() == cand.f32_kernel);
  CHECK_THROWS_WITH_AS(fast.set_f32_variant("f32_gemv/impl=nope"), doctest::Contains("warp-row"), Error);
}

TEST_CASE("GDN in_proj_z on a branch of its own (set_fork_z, fork=z): the candidates' bits on both tiers, step by step, listed and as a captured graph of layers; one launch more; refusals") {
  constexpr int T = 8, kLayers = 3;
  const auto [g, w, q, h] = qwen_case(T, 101);
  for (bool f32 : {false, true}) {
    CAPTURE(f32);
    const gdn::FusedStepConfig cand = f32 ? gdn::step_f32_candidate() : gdn::candidate_twins().fold;
    const gdn::FusedStepConfig fork = f32 ? gdn::f32_candidate_twins().fork_z : gdn::candidate_twins().fork_z;
    GdnDevice a(g, 1), b(g, 1);
    setup_config(a, cand, w, q);
    setup_config(b, fork, w, q);
    CHECK(b.fork_z());
    CHECK_FALSE(a.fork_z());
    const TwinsDiff d = twins_diff(b, a, h, g, T);
    CHECK(d.out == 0);
    CHECK(d.mid + d.state == 0);
    CHECK(bitwise_diff(b.get(0, What::OUT), std::vector<float>(std::size_t(g.hidden), 0.0f)) > 0);  // y was written
    // The list: the stacked launch without z, then z alone (one kernel: launch_prepared on the q4 tier, the
    // f32 kernel's own launch on the f32 tier), then the candidate's operators; one launch more.
    const StepKernels kb = step_kernels(b, g), ka = step_kernels(a, g);
    REQUIRE(kb.ops.size() == ka.ops.size() + 1);
    CHECK(kb.ops[0].first == gdn::kForkStackedBa);
    CHECK(kb.ops[1].first == "in_proj_z");
    CHECK(kb.ops[1].second == 1);
    CHECK(kb.total == ka.total + 1);
    DeviceBuffer<float> d_h(std::size_t(g.hidden)), d_y(std::size_t(g.hidden));
    const auto ops = b.step_operators(0, d_h.get(), d_y.get());
    for (std::size_t i = 0; i < ops.size(); ++i) {
      CAPTURE(ops[i].name);
      CHECK(ops[i].forked == (i == 1));
      CHECK(ops[i].joins == (std::string(ops[i].name) == "gated_norm"));  // the first operator that reads z
    }
    // The listed operators one by one (one stream, no branch) give the forked step's bits.
    {
      GdnDevice listed(g, 1), stepped(g, 1);
      setup_config(listed, fork, w, q);
      setup_config(stepped, fork, w, q);
      const auto lops = listed.step_operators(0, d_h.get(), d_y.get());
      std::int64_t diff = 0;
      for (int t = 0; t < 3; ++t) {
        const auto y = stepped.step(0, test::tok(h, g, t));
        d_h.upload(h.data() + std::size_t(t) * std::size_t(g.hidden), std::size_t(g.hidden));
        KLAB_CUDA(cudaDeviceSynchronize());
        for (const auto& op : lops) op.enqueue(nullptr);
        KLAB_CUDA(cudaDeviceSynchronize());
        diff += bitwise_diff(d_y.download(), y) + bitwise_diff(listed.get(0, What::S), stepped.get(0, What::S));
      }
      CHECK(diff == 0);
    }
    // Layers as one captured graph (the fork and the join as its edges): the sequential enqueue's bits,
    // and the candidate's graph's.
    const GraphTwins gt = graph_twins(cand, fork, kLayers, w, q, test::tok(h, g, 0));
    CHECK(gt.a_bitwise);
    CHECK(gt.b_bitwise);
    CHECK(gt.out_diff == 0);
    CHECK(gt.b_kernels == gt.a_kernels + kLayers);
    // Refused when enqueued, before any launch, naming the reason: without the stacked input projections.
    const auto y_before = b.get(0, What::OUT);
    b.set_fold_ba(false);
    b.set_fold_ba_main(false);
    b.set_merged_in(false);
    CHECK_THROWS_WITH_AS(b.step(0, test::tok(h, g, 0)), doctest::Contains("fork=z"), Error);
    CHECK(bitwise_diff(b.get(0, What::OUT), y_before) == 0);
  }
  // On the q4 tier: with the stacked launch on a kernel of its own (its prep is not the variant's).
  GdnDevice ring(g, 1);
  auto c = gdn::candidate_twins().ba_own;
  c.stacked_kernel = gdn::kStackedRing;
  setup_config(ring, c, w, q);
  ring.set_fork_z(true);
  CHECK_THROWS_WITH_AS(ring.step(0, test::tok(h, g, 0)), doctest::Contains("on the q4 variant itself"), Error);
}

TEST_CASE("GDN the gated norm by the recurrence's last column block of each head (norm=last): the candidates' bits on both tiers, token after token and as a graph of layers; one launch fewer") {
  constexpr int T = 8, kLayers = 3;
  const auto [g, w, q, h] = qwen_case(T, 103);
  for (bool f32 : {false, true}) {
    CAPTURE(f32);
    const gdn::FusedStepConfig cand = f32 ? gdn::step_f32_candidate() : gdn::candidate_twins().fold;
    const gdn::FusedStepConfig last = f32 ? gdn::f32_candidate_twins().norm_last : gdn::candidate_twins().norm_last;
    GdnDevice a(g, 1), b(g, 1);
    setup_config(a, cand, w, q);
    setup_config(b, last, w, q);
    // T tokens: a head's count must be back at zero after each launch, or a later token's norm would not run.
    const TwinsDiff d = twins_diff(b, a, h, g, T);
    CHECK(d.out == 0);
    CHECK(d.mid + d.state == 0);
    CHECK(bitwise_diff(b.get(0, What::ONN), std::vector<float>(b.get(0, What::ONN).size(), 0.0f)) > 0);
    const StepKernels kb = step_kernels(b, g), ka = step_kernels(a, g);
    CHECK(kb.total == ka.total - 1);
    CHECK(std::find_if(kb.ops.begin(), kb.ops.end(), [](const auto& op) { return op.first == gdn::kRecurrenceNorm; }) != kb.ops.end());
    const GraphTwins gt = graph_twins(cand, last, kLayers, w, q, test::tok(h, g, 0));
    CHECK(gt.a_bitwise);
    CHECK(gt.b_bitwise);
    CHECK(gt.out_diff == 0);
    CHECK(gt.b_kernels == gt.a_kernels - kLayers);
  }
}

TEST_CASE("GDN the conv, the q/k norm and beta/g inside the recurrence (prep=conv): the candidates' bits on both tiers (every intermediate, S and the conv history), token after token and as a graph of layers; one launch fewer") {
  constexpr int T = 8, kLayers = 3;
  std::vector<test::Named> gs = geometries();
  gs.push_back({"dk 288: the norm's 256 threads stride (thread t < 32 sums two squares), nine warps a block", Geometry{256, 1, 2, 288, 64, 4, 1e-6}});
  int ran = 0;
  for (const auto& [why, g] : gs) {
    CAPTURE(why);
    const auto w = rg::random_weights(g, 211);
    const auto q = rg::quantize_projections(w);
    const auto h = test::gdn_inputs(g, T, 212, 900);
    for (bool f32 : {false, true}) {
      CAPTURE(f32);
      const gdn::FusedStepConfig cand = f32 ? gdn::step_f32_candidate() : gdn::candidate_twins().fold;
      const gdn::FusedStepConfig conv = f32 ? gdn::f32_candidate_twins().conv_rec : gdn::candidate_twins().conv_rec;
      if (gdn::config_error(cand, g) != "") {  // dv 48: the q4 candidate's out=prepared takes dv a multiple of 32
        CHECK(gdn::config_error(conv, g) != "");
        continue;
      }
      ++ran;
      GdnDevice a(g, 1), b(g, 1);
      setup_config(a, cand, w, q);
      setup_config(b, conv, w, q);
      const TwinsDiff d = twins_diff(b, a, h, g, T);
      CHECK(d.out == 0);
      CHECK(d.mid == 0);
      CHECK(d.state == 0);
      for (What wh : {What::Q, What::K, What::BETA, What::HIST})  // written, not left at their poison or zero
        CHECK(bitwise_diff(b.get(0, wh), std::vector<float>(b.get(0, wh).size(), 0.0f)) > 0);
      const StepKernels kb = step_kernels(b, g), ka = step_kernels(a, g);
      CHECK(kb.total == ka.total - 1);
      CHECK(std::find_if(kb.ops.begin(), kb.ops.end(), [](const auto& op) { return op.first == gdn::kConvRecurrence; }) != kb.ops.end());
      CHECK(std::find_if(kb.ops.begin(), kb.ops.end(), [](const auto& op) { return op.first == "conv_norm_bg"; }) == kb.ops.end());
    }
  }
  CHECK(ran == 5);  // both tiers on Qwen's heads and on dk 288, the f32 tier on dv 48 (a partial column tile, one warp a block)
  const auto [g, w, q, h] = qwen_case(T, 213);
  for (bool f32 : {false, true}) {
    CAPTURE(f32);
    const GraphTwins gt = graph_twins(f32 ? gdn::step_f32_candidate() : gdn::candidate_twins().fold,
                                      f32 ? gdn::f32_candidate_twins().conv_rec : gdn::candidate_twins().conv_rec, kLayers, w, q, test::tok(h, g, 0));
    CHECK(gt.a_bitwise);
    CHECK(gt.b_bitwise);
    CHECK(gt.out_diff == 0);
    CHECK(gt.b_kernels == gt.a_kernels - kLayers);
  }
  // Refused when stepped, before any launch, naming the reason: without the fused prep, and with pf=out.
  GdnDevice dev(g, 1);
  setup_config(dev, gdn::candidate_twins().conv_rec, w, q);
  dev.step(0, test::tok(h, g, 0));
  const auto y_before = dev.get(0, What::OUT), hist_before = dev.get(0, What::HIST);
  dev.set_fused_prep(false);
  CHECK_THROWS_WITH_AS(dev.step(0, test::tok(h, g, 1)), doctest::Contains("set_fused_prep(true)"), Error);
  dev.set_fused_prep(true);
  dev.set_l2_prefetch(gdn::kernels::L2Prefetch::after);
  CHECK_THROWS_WITH_AS(dev.step(0, test::tok(h, g, 1)), doctest::Contains("pf=out"), Error);
  CHECK(bitwise_diff(dev.get(0, What::OUT), y_before) == 0);
  CHECK(bitwise_diff(dev.get(0, What::HIST), hist_before) == 0);
  CHECK(gdn::config_error([&] {
          auto c = gdn::candidate_twins().conv_rec;
          c.l2_prefetch = gdn::kernels::L2Prefetch::after;
          return c;
        }(), g).find("pf=out") != std::string::npos);
}

TEST_CASE("GDN the conv history as a ring (hist=ring): the candidates' bits with nothing shifting it (conv_ring) and in four launches a layer (four), the history read back oldest first at every ring position, saved and loaded mid-ring, left for a shifted recurrence, and as a graph of layers") {
  constexpr int T = 9, kLayers = 3;  // T: the ring (ck = 4) goes round twice and stops at position 1
  std::vector<test::Named> gs = geometries();
  gs.push_back({"dk 288: nine warps a block, 288 threads against dv 64 (norm=last refuses: one thread a column)", Geometry{256, 1, 2, 288, 64, 4, 1e-6}});
  gs.push_back({"ck 2: a ring of two frames", Geometry{256, 2, 6, 32, 32, 2, 1e-6}});
  for (const auto& [why, g] : gs) {
    CAPTURE(why);
    const auto w = rg::random_weights(g, 221);
    const auto q = rg::quantize_projections(w);
    const auto h = test::gdn_inputs(g, T + 4, 222, 900);
    for (bool f32 : {false, true}) {
      CAPTURE(f32);
      const gdn::FusedStepConfig cand = f32 ? gdn::step_f32_candidate() : gdn::candidate_twins().fold;
      if (const std::string refused = gdn::config_error(cand, g); !refused.empty()) {  // dv 48: out=prepared's q8 epilogue
        CHECK(refused.find("dv = 48") != std::string::npos);
        continue;
      }
      std::vector<std::pair<gdn::FusedStepConfig, int>> twins{{f32 ? gdn::f32_candidate_twins().four : gdn::candidate_twins().four, 2}};
      if (!f32) twins.push_back({gdn::candidate_twins().conv_ring, 1});  // launches fewer than the candidate
      for (const auto& [c, fewer] : twins) {
        CAPTURE(c.recurrence);
        if (const std::string refused = gdn::config_error(c, g); !refused.empty()) {  // norm=last's one thread a column
          CHECK(refused.find("one thread a column") != std::string::npos);
          CHECK(fewer == 2);
          continue;
        }
        GdnDevice a(g, 1), b(g, 1);
        setup_config(a, cand, w, q);
        setup_config(b, c, w, q);
        const TwinsDiff d = twins_diff(b, a, h, g, T);  // HIST read back after every token: every ring position
        CHECK(d.out == 0);
        CHECK(d.mid == 0);
        CHECK(d.state == 0);
        CHECK(bitwise_diff(b.get(0, What::HIST), std::vector<float>(b.get(0, What::HIST).size(), 0.0f)) > 0);
        const StepKernels kb = step_kernels(b, g), ka = step_kernels(a, g);
        CHECK(kb.total == ka.total - fewer);
        if (fewer == 2 && !f32) CHECK(kb.total == 4);  // in_prep_ba, the stacked input projections, the recurrence, out_proj
        // save_state mid-ring is the shifted state; loaded into a fresh device (position 0) both go on alike
        const gdn::HostState sb = b.save_state(0), sa = a.save_state(0);
        CHECK(bitwise_diff(sb.S, sa.S) == 0);
        CHECK(bitwise_diff(sb.hist, sa.hist) == 0);
        GdnDevice b2(g, 1), a2(g, 1);  // a2: the candidate from the same saved state (a and b stay at token T)
        setup_config(b2, c, w, q);
        setup_config(a2, cand, w, q);
        b2.load_state(0, sb);
        a2.load_state(0, sa);
        for (int t = T; t < T + 2; ++t) {
          const auto ya = a2.step(0, test::tok(h, g, t)), yb2 = b2.step(0, test::tok(h, g, t));
          CHECK(bitwise_diff(ya, yb2) == 0);
          CHECK(bitwise_diff(a2.get(0, What::HIST), b2.get(0, What::HIST)) == 0);
        }
        // leaving the ring (b at position 1): its history rotated back for the candidate's own recurrence, which goes on alike
        b.set_recurrence_variant(cand.recurrence);
        gdn::apply(cand, b);
        for (int t = T; t < T + 2; ++t) CHECK(bitwise_diff(a.step(0, test::tok(h, g, t)), b.step(0, test::tok(h, g, t))) == 0);
        CHECK(bitwise_diff(a.get(0, What::HIST), b.get(0, What::HIST)) == 0);
        // reset: the ring back at position 0 with zero frames, the same first token as a fresh device
        b2.reset();
        KLAB_CUDA(cudaDeviceSynchronize());
        GdnDevice fresh(g, 1);
        setup_config(fresh, cand, w, q);
        CHECK(bitwise_diff(b2.step(0, test::tok(h, g, 0)), fresh.step(0, test::tok(h, g, 0))) == 0);
        CHECK(bitwise_diff(b2.get(0, What::HIST), fresh.get(0, What::HIST)) == 0);
      }
    }
  }
  const auto [g, w, q, h] = qwen_case(T, 223);
  for (bool f32 : {false, true}) {
    CAPTURE(f32);
    // two tokens through the graph: the ring's position lives on the device, so one graph serves every token
    const GraphTwins gt = graph_twins(f32 ? gdn::step_f32_candidate() : gdn::candidate_twins().fold,
                                      f32 ? gdn::f32_candidate_twins().four : gdn::candidate_twins().four, kLayers, w, q, test::tok(h, g, 0));
    CHECK(gt.a_bitwise);
    CHECK(gt.b_bitwise);
    CHECK(gt.out_diff == 0);
    CHECK(gt.b_kernels == gt.a_kernels - 2 * kLayers);
  }
  // The batched step refuses a ring (its conv_norm_bg_slots shifts the history in place), before any launch.
  GdnDevice dev(g, 1, 2);
  setup_config(dev, gdn::candidate_twins().four, w, q);
  CHECK_THROWS_WITH_AS(dev.enqueue_batch(0, 0, 2, nullptr, nullptr, nullptr), doctest::Contains("hist=ring"), Error);
}

TEST_CASE("GDN span (set_span): pace_out1's bits with out_proj and the next token's or layer's input side as one persistent launch, token by token, chained through a run and as a graph of layers; two launches fewer a step after the first") {
  constexpr int T = 8, kLayers = 3;
  const QwenCase c = qwen_case(T, 107);
  const auto tw = gdn::candidate_twins();
  // Token by token each out_proj is a span with no next; as one run each carries the next token's h's q8 form, b|a and
  // stacked projections; in the graph each carries the next layer's.
  for (const gdn::FusedStepConfig& span : {tw.pace_span2, tw.pace_span3, tw.pace_span1x2, tw.pace_span2x2}) {
    CAPTURE(span.span);
    CAPTURE(span.span_per_sm);
    const auto [a_kernels, b_kernels] = same_bits_everywhere(tw.pace_out1, span, c, T, kLayers);
    CHECK(b_kernels == a_kernels - 2 * (kLayers - 1));  // in_prep_ba and the stacked kernel, inside the span before
  }
}

TEST_CASE("GDN step candidate (pace_out1_split since 2026-12-06): pace_out1's bits token by token, as a run of tokens and as a graph of layers, with as many kernels") {
  constexpr int T = 8, kLayers = 3;
  const gdn::FusedStepConfig base = gdn::candidate_twins().pace_out1, cand = gdn::step_candidate();
  REQUIRE(cand.q4_kernel != base.q4_kernel);  // out_proj's kernel is what differs
  const auto [a_kernels, b_kernels] = same_bits_everywhere(base, cand, qwen_case(T, 109), T, kLayers);
  CHECK(b_kernels == a_kernels);
}

TEST_CASE("graph_nodes counts what a body captures: one empty kernel, a kernel and a memset") {
  cudaStream_t s = nullptr;
  KLAB_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const GraphNodes one = graph_nodes([](cudaStream_t st) { launch_empty(st); }, s);
  CHECK(one.kernels == 1);
  CHECK(one.total == 1);
  DeviceBuffer<float> buf(16);
  const GraphNodes two = graph_nodes([&](cudaStream_t st) {
    launch_empty(st);
    KLAB_CUDA(cudaMemsetAsync(buf.get(), 0, buf.bytes(), st));
  }, s);
  CHECK(two.kernels == 1);
  CHECK(two.total == 2);
  KLAB_CUDA(cudaStreamDestroy(s));
}

TEST_CASE("GDN breakdown: step_operators refuses unloaded layers, bad slots and bad buffers") {
  const Geometry g = geometries()[0].g;
  GdnDevice dev(g, 2);
  dev.load_f32(0, rg::random_weights(g, 1));
  DeviceBuffer<float> d_h(std::size_t(g.hidden) * 2), d_y(std::size_t(g.hidden));
  CHECK_NOTHROW(dev.step_operators(0, d_h.get(), d_y.get()));
  auto refused = [](auto f, const std::string& needle) {
    try {
      f();
    } catch (const CudaError& e) {
      FAIL("CUDA error, not a refusal: " << e.what());
      return;
    } catch (const Error& e) {
      CHECK_MESSAGE(std::string(e.what()).find(needle) != std::string::npos, e.what());
      return;
    }
    FAIL("not refused (" << needle << ")");
  };
  refused([&] { dev.step_operators(1, d_h.get(), d_y.get()); }, "layer 1");
  refused([&] { dev.step_operators(0, d_h.get(), d_y.get(), 1); }, "slot 1");
  refused([&] { dev.step_operators(0, nullptr, d_y.get()); }, "null");
  refused([&] { dev.step_operators(0, d_h.get() + 1, d_y.get()); }, "aligned");
  refused([&] { dev.step_operators(0, d_h.get(), d_h.get() + g.hidden / 2); }, "overlaps");
}
