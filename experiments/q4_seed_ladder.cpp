// seed-ladder: the seed's q4 mat-vec ladder, original -> A -> B -> C, with the cuBLAS peers beside
// them, at the seed shapes (the rungs and the seed's figures: q4_gemv.cpp).
#include <algorithm>
#include <limits>
#include <tuple>

#include "common.hpp"
#include "q4_gemv_common.hpp"

namespace klab::experiments::q4_study {

Experiment seed_ladder() {
  Experiment e;
  e.name = "seed-ladder";
  e.description = "the seed's q4 mat-vec ladder: original -> A (per-lane scale + 4 chains) -> B (+ hardware f16) -> C (+ 4 rows per warp), "
                  "with cuBLAS bf16 GemmEx and f32 SGEMV on dequant(W) beside them, at the seed shapes";
  const Claim accurate{"accurate",
                       "every rung is within 1e-5 (max_rel) of the f64 reference on every shape and input; the peers within theirs (bf16 3e-2, f32 1e-5)"};
  const Claim bits{"bits", "A -> B and B -> C change no bit on any shape or input (seed: B and C changed no bit; original -> A reorders sums and may)"};
  const Claim a_faster{"a-faster", "A is faster than the original on the four seed shapes (seed: 1.42x on gate_proj)"};
  const Claim b_faster{"b-faster", "B is faster than A on the four seed shapes (seed: 1.91x on gate_proj)"};
  const Claim c_slower{"c-slower", "C is slower than B on the four seed shapes (seed: 0.89x on gate_proj, 0.47x on out_proj)"};
  const Claim c_worst{"c-worst-on-fewest-rows", "C's slow-down is largest on the seed shape with the fewest rows (5120x6144, out_proj)"};
  const Claim b_beats_peers{"b-beats-peers",
                            "B, the seed's kept kernel, is faster than both cuBLAS peers on the four seed shapes (it reads 3.6x fewer bytes than bf16)"};
  e.claims = {accurate, bits, a_faster, b_faster, c_slower, c_worst, b_beats_peers};
  e.run = [=](Context& ctx) {
    const Op& op = ctx.registry().op("q4_gemv");
    const auto rungs = lookup(ctx, {kOriginal, kRungA, kRungB, kRungC});
    auto all = rungs;
    for (const Variant* v : lookup(ctx, {kPeerBf16, kPeerF32})) all.push_back(v);
    double worst_c = std::numeric_limits<double>::infinity();
    Shape worst_shape;
    std::string c_speedups;
    int timed_shapes = 0;
    for (const Claim& c : {accurate, bits}) ctx.claim(c).needs(problem_keys(q4_shapes(ctx), {Dist::uniform, Dist::student_t}));
    for (const Claim& c : {a_faster, b_faster, c_slower, b_beats_peers}) ctx.claim(c).needs(shape_keys(seed_shapes()));
    for (const Shape& s : q4_shapes(ctx)) {
      for (Dist d : {Dist::uniform, Dist::student_t}) {
        const Problem p{s, d, ctx.options().seed};
        RaceOptions ro{.tolerance = kTolerance, .tolerance_for = {}, .time = d == Dist::uniform, .ladder = true};
        auto ms = race(ctx, op, all, p, ro);
        if (ms.size() < all.size() || std::any_of(ms.begin(), ms.end(), [](const Measured& m) { return m.skipped; })) continue;
        const std::string where = problem_key(s, d);
        bool ok = true;
        std::string ev = where + ": max_rel";
        for (const auto& m : ms) {
          ok = ok && m.verified;
          ev += fmt(" %.3g", m.acc.max_rel);
        }
        ctx.claim(accurate).settle(where, ok, ev + " (original, A, B, C, bf16, f32)");
        // Bits between consecutive rungs (the race compares each rung with the one before).
        const auto oa = ms[1].bits_vs_prev, ab = ms[2].bits_vs_prev, bc = ms[3].bits_vs_prev;
        ctx.claim(bits).settle(where, ab == 0 && bc == 0,
                      where + ": elements differing original->A " + std::to_string(oa) + ", A->B " + std::to_string(ab) + ", B->C " +
                          std::to_string(bc) + " of " + std::to_string(ms[0].output.size()));
        const bool timed = std::all_of(ms.begin(), ms.end(), [](const Measured& m) { return m.timed; });
        if (d != Dist::uniform || !is_seed_shape(s) || !timed) continue;
        const auto& [mo, ma, mb, mc] = std::tie(ms[0], ms[1], ms[2], ms[3]);
        const auto ao = compare_times(mo.timing.kept_ms, ma.timing.kept_ms, s.m);
        const auto ba = compare_times(ma.timing.kept_ms, mb.timing.kept_ms, s.m);
        const auto cb = compare_times(mb.timing.kept_ms, mc.timing.kept_ms, s.m);
        ctx.claim(a_faster).settle(s.str(), ao.verdict == Verdict::faster, s.str() + ": original " + speed(mo) + "; A " + speed(ma) + "; A " + speedup_text(ao));
        ctx.claim(b_faster).settle(s.str(), ba.verdict == Verdict::faster, s.str() + ": B " + speed(mb) + "; B " + speedup_text(ba));
        ctx.claim(c_slower).settle(s.str(), cb.verdict == Verdict::slower,
                      s.str() + ": C " + speed(mc) + "; C " + speedup_text(cb) + "; B: " + warps_note(kRungB, s.m, ctx) + "; C: " + warps_note(kRungC, s.m, ctx));
        ++timed_shapes;
        c_speedups += (c_speedups.empty() ? "" : ", ") + s.str() + fmt(" x%.3f", cb.speedup);
        if (cb.speedup < worst_c) {
          worst_c = cb.speedup;
          worst_shape = s;
        }
        const auto vs_bf16 = compare_times(ms[4].timing.kept_ms, mb.timing.kept_ms, s.m);
        const auto vs_f32 = compare_times(ms[5].timing.kept_ms, mb.timing.kept_ms, s.m);
        ctx.claim(b_beats_peers).settle(s.str(), vs_bf16.verdict == Verdict::faster && vs_f32.verdict == Verdict::faster,
                      s.str() + ": B " + fmt("%.4f ms", mb.timing.summary.median) + fmt(", bf16 %.4f ms", ms[4].timing.summary.median) +
                          fmt(", f32 %.4f ms", ms[5].timing.summary.median) + "; B vs bf16 " + speedup_text(vs_bf16) + ", vs f32 " + speedup_text(vs_f32));
      }
    }
    if (timed_shapes == int(seed_shapes().size()))
      ctx.claim(c_worst).set(worst_shape == Shape{5120, 6144}, "worst on " + worst_shape.str() + ": C/B " + c_speedups);
  };
  return e;
}

}  // namespace klab::experiments::q4_study
