// q4-gemm-batch (issue 14 part 4, "batched slots"): the q4 mat-vec at n = B columns. At the four
// seed shapes and n = 1, 8 and 32 (op q4_gemm's params), uniform inputs, races impl=loop (A: n
// launches of q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=launch,pdl=on,rows=8, W read n
// times) against the batched kernels (variants/q4_gemm/gemm.cu: W read once for all n columns).
// Measured on the H200 (reports/h200/run-30bee11, 2026-12-01, stream mode): batched-bits held,
// batched-pays held (x2.969..x4.479 over impl=loop at n = 8 and 32), weights-once not held (at n = 32
// the fastest takes x5.92..x6.90 its n = 1 time: the dp4a dots over 32 columns, not the weights, bound
// it; 391..458 GB/s at n = 32).
// Predicted before the run (variants/q4_gemm/README.md): at n = 8 and 32 the batched kernels win by
// far (impl=loop pays n times the weights, ~n x its n = 1 time); at n = 32 their x reads from L2 (8.9x
// the bytes of W at rows=8) may cost more than the weights, so weights-once may not hold.
#include <algorithm>
#include <map>

#include "common.hpp"
#include "q4_gemm/variants.hpp"

namespace klab::experiments {

namespace {
// The timed, verified batched variant (every one but A) with the lowest headline median.
const Measured* fastest_batched(const std::vector<Measured>& ms) {
  const Measured* best = nullptr;
  for (std::size_t i = 1; i < ms.size(); ++i) {
    const Measured& m = ms[i];
    if (m.skipped || !m.timed || !m.verified) continue;
    if (!best || m.timing.summary.median < best->timing.summary.median) best = &m;
  }
  return best;
}
std::string mode_name(const Measured& m) { return m.mode(TimingMode::stream) ? "stream" : "launch"; }
}  // namespace

void register_q4_gemm_batch(Registry& r) {
  Experiment e;
  e.name = "q4-gemm-batch";
  e.description = "q4 skinny GEMM (n activation vectors at once): n launches of the q8-dp4a gemv vs batched kernels reading W once, at the four "
                  "seed shapes and n = 1, 8, 32";
  const Claim bits{"batched-bits", "every batched variant's Y equals impl=loop's bit for bit at every seed shape and n = 1, 8, 32"};
  const Claim pays{"batched-pays", "the fastest batched variant is faster than impl=loop at n = 8 and 32 on every seed shape"};
  const Claim once{"weights-once", "at n = 32 the fastest batched variant takes at most 2x its own n = 1 time on every seed shape (the weights dominate)"};
  e.claims = {bits, pays, once};
  e.run = [=](Context& ctx) {
    const Op& op = ctx.registry().op(q4_gemm::kOp);
    std::vector<std::string> names;
    for (const Variant& v : q4_gemm::gemm_variants()) names.push_back(v.name);  // impl=loop (A) first
    const auto vs = lookup(ctx, names);
    const std::vector<std::int64_t> cols{1, 8, 32};
    // Full: the four seed shapes (not declared_problems' cross-product of m and k) at n = 1, 8, 32;
    // --quick: the op's quick values (the claims, stated on the seed shapes, stay not evaluated).
    std::vector<Problem> problems;
    if (ctx.options().quick) {
      problems = op.declared_problems(true, Dist::uniform, ctx.options().seed);
    } else {
      for (const Shape& s : seed_shapes())
        for (std::int64_t n : cols) problems.push_back(q4_gemm::problem(s.m, s.k, n, Dist::uniform, ctx.options().seed));
    }
    std::vector<std::string> all, batched, wide;
    for (const Shape& s : seed_shapes()) {
      for (std::int64_t n : cols) {
        const std::string key = q4_gemm::problem(s.m, s.k, n).key();
        all.push_back(key);
        if (n != 1) batched.push_back(key);
      }
      wide.push_back(s.str());
    }
    ctx.claim(bits).needs(all);
    ctx.claim(pays).needs(batched);
    ctx.claim(once).needs(wide);
    std::map<std::string, double> n1_ms;  // (shape/variant) -> its median at n = 1

    for (const Problem& p : problems) {
      const std::string key = p.key(), shape = Shape{p.param("m"), p.param("k")}.str();
      const std::int64_t n = p.param("n");
      const auto ms = race(ctx, op, vs, p, RaceOptions{});
      if (ms.size() != vs.size()) continue;  // no device, or outside the --set slice
      const Measured& loop = ms[0];
      if (std::none_of(ms.begin(), ms.end(), [](const Measured& m) { return m.skipped; })) {
        std::int64_t diff = 0;
        std::string ev = key + ": elements differing from impl=loop:";
        for (std::size_t i = 1; i < ms.size(); ++i) {
          diff += ms[i].bits_vs_a;
          ev += " " + ms[i].variant->name + " " + std::to_string(ms[i].bits_vs_a) + " of " + std::to_string(ms[i].acc.n) + ";";
        }
        ctx.claim(bits).settle(key, diff == 0, ev);
      }
      const Measured* best = fastest_batched(ms);
      if (!best) continue;
      const double us = best->timing.summary.median * 1e3;
      if (n == 1)
        for (std::size_t i = 1; i < ms.size(); ++i)
          if (ms[i].timed) n1_ms[shape + "/" + ms[i].variant->name] = ms[i].timing.summary.median;
      if (n != 1 && loop.timed && best->vs_a)
        ctx.claim(pays).settle(key, best->vs_a->verdict == Verdict::faster,
                               key + ": " + best->variant->name + fmt(" %.2f us vs impl=loop %.2f us, ", us, loop.timing.summary.median * 1e3) +
                                   speedup_text(*best->vs_a) + " (" + mode_name(*best) + ")");
      if (n == 32) {
        const auto it = n1_ms.find(shape + "/" + best->variant->name);
        if (it != n1_ms.end())
          ctx.claim(once).settle(shape, best->timing.summary.median <= 2.0 * it->second,
                                 shape + ": " + best->variant->name + fmt(" %.2f us at n = 32, %.2f us at n = 1 (x%.2f), ", us, it->second * 1e3,
                                                                          best->timing.summary.median / it->second) +
                                     fmt("%.0f GB/s at n = 32", best->gbps) + " (" + mode_name(*best) + ")");
      }
    }
  };
  r.add(std::move(e));
}

}  // namespace klab::experiments
