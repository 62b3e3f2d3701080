// f32-gemv-vs-cublas: our plain warp-per-row f32 mat-vec against cuBLAS SGEMV, at the seed's
// shapes and an awkward one, L2-cold.
#include "common.hpp"

namespace klab::experiments {

void register_f32_gemv(Registry& r) {
  Experiment e;
  e.name = "f32-gemv-vs-cublas";
  e.description = "f32 mat-vec: warp-per-row kernel vs cuBLAS SGEMV at the seed shapes and 33x160";
  e.claims = {
      "both variants are within 1e-5 (max_rel) of the f64 reference on every shape",
      "warp-row is not slower than cuBLAS SGEMV on the four seed shapes",
      "warp-row reaches at least 80% of the measured read ceiling on the four seed shapes",
  };
  e.run = [](Context& ctx) {
    auto vs = lookup({"f32_gemv/impl=warp-row", "f32_gemv/impl=cublas-sgemv"});
    auto shapes = shapes_for(ctx, {{17408, 5120}, {10240, 5120}, {6144, 5120}, {5120, 6144}, {33, 160}},
                             {{1024, 512}, {33, 160}});
    const Op& op = registry().op("f32_gemv");
    for (const auto& s : shapes) {
      // f32 sums of up to 6144 products: rounding grows ~sqrt(k) * 2^-24 relative to max|y|,
      // i.e. ~5e-6 at worst here; a wrong index or a lost block gives O(1).
      auto ms = race(ctx, op, vs, Problem{s, Dist::uniform, ctx.options().seed}, RaceOptions{.tolerance = 1e-5, .tolerance_for = {}});
      if (ms.empty()) continue;
      ctx.claim_all(0, ms[0].verified && ms[1].verified, s.str() + fmt(": max_rel %.2g / %.2g", ms[0].acc.max_rel, ms[1].acc.max_rel));
      const bool seed_shape = s.m * s.k >= 5120LL * 5120;
      if (seed_shape && ms[0].timed && ms[1].timed && ms[1].vs_a) {
        // vs_a is cuBLAS (B) against warp-row (A): warp-row not slower <=> cuBLAS not faster.
        ctx.claim_all(1, ms[1].vs_a->verdict != Verdict::faster, s.str() + fmt(": warp-row %.4f ms, cuBLAS %.4f ms", ms[0].timing.summary.median, ms[1].timing.summary.median));
        ctx.claim_all(2, ms[0].pct_ceiling >= 80.0, s.str() + fmt(": %.1f%% of ceiling", ms[0].pct_ceiling));
      }
    }
  };
  r.add(std::move(e));
}

}  // namespace klab::experiments
