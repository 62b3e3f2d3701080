// The q4 GDN step replayed token by token. Why: reports/h100/run-call70 and run-call74 saw the step with rung 110
// (q4_gemv pace=1,defer=8,stages=3,rows=4) as its projections give other bits for `out` on a replay after reset()
// now and then (call 74: 20480 elements, four whole tokens from token 8, S and the last token's intermediates the
// same), and `out` alone cannot say which operator of which token first differed. Here the gdn_step op's own
// workload (the full geometry, 16 tokens, q4 weights) runs once from a zero state and again after reset(), its
// operators enqueued one by one as enqueue_step enqueues them, and every token's intermediates are copied out
// (GdnDevice::enqueue_copy) only after operators that a plain launch follows in the unfused q4 step, so that no
// copy cuts a PDL overlap (those are out_proj -> the next token's in_proj_qkv -> in_proj_z, each a prep and a main
// launch). Each replay must give every token's every copy and `out` bit for bit; a failure names, per
// intermediate, how many elements differ, in which tokens, and the first of them with its two values.
// KLAB_GPU_VARIANTS (a --variants filter over q4_gemv's names; default: every q4_gemv kernel) picks the
// projections' kernels, KLAB_GPU_REPLAYS (default 1) the replays.
// What it caught (reports/h100/run-call75, an H100, 2026-12-07): nothing of that race, even on the binary before its fix
// (240 replays of rung 110, none differed, where the variant case in test_variants.cpp saw 4 in 200): the copies change the
// launches' timing. It still names the first operator and token of any difference a replay does show; for races, run
// the variant case with hundreds of replays.
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "gdn/gdn_device.hpp"
#include "gdn/step_op.hpp"
#include "gdn/step_bytes.hpp"
#include "gdn_common.hpp"
#include "gpu_util.hpp"
#include "klab/cuda.hpp"
#include "klab/metrics.hpp"
#include "klab/registry.hpp"

using namespace klab;
namespace rg = klab::ref::gdn;
using gdn::GdnDevice;
using rg::What;

namespace {

// The copies: after each named operator of the unfused q4 step (kStepOperators), the intermediates it leaves.
// None follows in_proj_qkv (in_proj_z's prep is a PDL launch after it) or out_proj (the next token's
// in_proj_qkv prep is); every other operator is followed by a plain launch, which waits for it anyway.
struct Copy {
  const char* after;
  What what;
};
const std::vector<Copy> kCopies = {{"in_proj_z", What::XC},   {"in_proj_z", What::Z}, {"in_proj_ba", What::B}, {"in_proj_ba", What::A},
                                   {"beta_g", What::BETA},    {"beta_g", What::G},    {"conv_silu", What::XCV}, {"qk_norm", What::Q},
                                   {"qk_norm", What::K},      {"recurrence", What::ON}, {"recurrence", What::S}, {"gated_norm", What::ONN}};

struct Tokens {
  std::vector<std::int64_t> offset;  // of each copy within a token's block
  std::int64_t per_token = 0;
};
Tokens layout(const rg::Geometry& g) {
  Tokens t;
  for (const Copy& c : kCopies) t.offset.push_back(t.per_token), t.per_token += rg::count(g, c.what);
  return t;
}

// One run of T tokens from a zero state: every token's copies, then `out` (T x hidden), as one host vector.
std::vector<float> run_tokens(GdnDevice& dev, const rg::Geometry& g, int T, const float* d_h, float* d_y, float* d_copies, const Tokens& lay) {
  dev.set_stream(nullptr);  // the gpu cases' stream (StepInstance's)
  dev.reset();
  const std::int64_t H = g.hidden;
  for (int t = 0; t < T; ++t) {
    const auto ops = dev.step_operators(0, d_h + t * H, d_y + t * H);
    for (const auto& op : ops) {
      REQUIRE_MESSAGE(!op.forked, "the unfused q4 step forks nothing");
      op.enqueue(nullptr);
      for (std::size_t c = 0; c < kCopies.size(); ++c)
        if (std::string(op.name) == kCopies[c].after) dev.enqueue_copy(0, kCopies[c].what, d_copies + t * lay.per_token + lay.offset[c], nullptr);
    }
  }
  KLAB_CUDA(cudaDeviceSynchronize());
  std::vector<float> all(std::size_t(T * lay.per_token + T * H));
  KLAB_CUDA(cudaMemcpy(all.data(), d_copies, std::size_t(T * lay.per_token) * sizeof(float), cudaMemcpyDeviceToHost));
  KLAB_CUDA(cudaMemcpy(all.data() + T * lay.per_token, d_y, std::size_t(T * H) * sizeof(float), cudaMemcpyDeviceToHost));
  return all;
}

// Per intermediate (the copies, then "out"): elements that differ between a and b, the tokens holding them, the first.
std::string compare(const rg::Geometry& g, int T, const Tokens& lay, const std::vector<float>& a, const std::vector<float>& b, std::int64_t& total) {
  std::ostringstream why;
  total = 0;
  const std::int64_t H = g.hidden;
  for (std::size_t c = 0; c <= kCopies.size(); ++c) {
    const bool out = c == kCopies.size();
    const std::int64_t n = out ? H : rg::count(g, kCopies[c].what);
    std::int64_t differ = 0;
    std::string tokens, first;
    for (int t = 0; t < T; ++t) {
      const std::int64_t at = out ? T * lay.per_token + t * H : t * lay.per_token + lay.offset[c];
      const std::span<const float> x(a.data() + at, std::size_t(n)), y(b.data() + at, std::size_t(n));
      const std::int64_t d = bitwise_diff(x, y);
      if (d == 0) continue;
      if (first.empty()) first = "token " + std::to_string(t) + " " + test::first_difference(x, y);
      tokens += (tokens.empty() ? "" : " ") + std::to_string(t) + ":" + std::to_string(d);
      differ += d;
    }
    if (differ == 0) continue;
    total += differ;
    why << "\n  " << (out ? std::string("out") : rg::to_string(kCopies[c].what)) << " (after " << (out ? "out_proj" : kCopies[c].after) << "): " << differ
        << " elements differ, tokens:count " << tokens << "; first " << first;
  }
  return why.str();
}

}  // namespace

TEST_CASE("the q4 step's every token replays bit for bit, intermediate by intermediate, after reset") {
  const int replays = test::replays();
  const Op& op = registry().op("gdn_step");
  const Problem* full = nullptr;
  const auto problems = op.declared_problems(false);
  for (const Problem& p : problems)
    if (p.param("weights") == 1 && p.param("hidden") == 5120) full = &p;
  REQUIRE_MESSAGE(full != nullptr, "gdn_step declares no full-size q4 problem (hidden 5120, weights=1)");
  const auto w = op.generate(*full);
  const gdn::StepWorkload& wl = gdn::step_workload_of(*w);
  const rg::Geometry g = gdn::step_geometry(*full);
  const int T = wl.T;
  const Tokens lay = layout(g);
  DeviceBuffer<float> h = DeviceBuffer<float>::from(wl.h), y(wl.h.size()), copies(std::size_t(T * lay.per_token));
  int checked = 0;
  for (const Variant* v : test::selected_variants("q4_gemv")) {
    CAPTURE(v->name);
    GdnDevice dev(g, 1);
    experiments::put_all(dev.q4_pool(), wl.q);
    dev.set_q4_variant(v->name);
    if (auto why = dev.load_q4(0, wl.w, experiments::kQkv, experiments::kZ, experiments::kOut); !why.empty()) {
      MESSAGE("not run: " << why);  // not counted as checked
      continue;
    }
    const auto first = run_tokens(dev, g, T, h.get(), y.get(), copies.get(), lay);
    for (int r = 1; r <= replays; ++r) {
      CAPTURE(r);
      std::int64_t differ = 0;
      const std::string why = compare(g, T, lay, first, run_tokens(dev, g, T, h.get(), y.get(), copies.get(), lay), differ);
      CHECK_MESSAGE(differ == 0, differ << " elements differ on replay " << r << ":" << why);
    }
    ++checked;
  }
  CHECK(checked > 0);
}
