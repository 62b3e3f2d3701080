// q4-prep-split (issue 13, "the profiler's reading of why"): what the x-prep launch costs a call of
// the q4 mat-vec in stream mode. Every q4-to-ceiling rung since 2026-12-01 takes 6.7-7.8 us at
// 6144x5120 (17.7 MB, a 3.9 us byte floor), whatever moves weight bytes across griddepcontrol.wait;
// the kernel traces put the period on the chain "main N ends, prep N+1 ends, main N+1 ends"
// (2.5 + 4.2 us, reports/h200/run-019f260). Here each of two main kernels races its xprep=producer
// twin (variants/q4_gemv/register.cpp, ProducerInstance: the same main kernel on x already prepared,
// as when the kernel before it writes the q8 x; the prep outside the timed region), so the chain is
// main after main and the difference is the prep launch's share of the period. Run it with --hot
// too: back to back over one copy whose weights stay in L2 (17.7 MB of 60 MB), which takes the DRAM
// out of the period.
//
// Predicted before the first run (2026-12-04, from the traces above): the producer twins at least
// 1 us faster a call at the two small shapes (the prep's 2.5 us less a hop's ~0.9 us); even so,
// short of the goal shares (the main kernel alone ends ~4.2 us after its prep).
// Measured (reports/h200/run-4341948, H200, 2026-12-04, stream, twice on two machines), as predicted:
// prep-costs-1us held, producer-goal not held. At 6144x5120 rung 10 6.79 us, its producer twin 5.49
// (the prep launch 1.29-1.34 us a call; the load=bulk pair 1.43-1.56); the twins reach 83.6 / 74.4 /
// 70.7 / 73.1% of the read ceiling at best. With --hot (weights in L2) rung 10 4.97 us, its twin 3.96.
// The ring's pair (added 2026-12-05, not yet run when written): at 17408x5120 the ring (rung 32, 14.3 us
// in reports/h200/run-f55aa56) spends ~2.9 us over its loads alone (klab probe-ring: 11.45 us). Predicted:
// its producer twin about 1.5-2 us faster there (~12.5 us, 88% of the read ceiling), as rung 10's
// (14.98 -> 13.16); what is left over the probe is the ring's consumption. Measured on an H100 (reports/h100/
// run-prep-ring): 18.48 -> 16.21 us at 17408x5120 (99.0% of that card's read ceiling), 12.81 -> 10.46, 9.37 -> 7.31,
// 9.25 -> 7.14; producer-goal held there (the best twin at every shape). On the H200 (reports/h200/run-fe10a61): 14.33 ->
// 12.30 us (89.4%), 10.83 -> 8.87, 8.01 -> 6.14, 7.76 -> 6.06: producer-goal not held (the small shapes' best twins,
// grid=groups', reach 70-72%).
// Then the ring with wait=flag (added 2026-12-05; packed.cu, xprep_wf_kernel): the same two launches, the main kernel
// released by a flag the prep's last block sets instead of by the prep's completion: one grid completion fewer on the
// chain. Predicted: between the ring and its producer twin, nearer the ring (a hop of ~0.5-0.9 us at most, less the
// poll's L2 round trip). Measured (run-fe10a61, H200): 15.18 / 11.52 / 8.56 / 8.69 us, x0.945 / x0.940 / x0.936 / x0.894
// against the ring, the ring's bits: wait-flag-pays not held.
// Then the ring filling at most 2 or 1 of its stages a block (depth=2|1, added 2026-12-05 in the fifth session;
// packed.cu launch_ring's Depth) and their producer twins: fewer weight bytes in flight when the chain's x reads
// happen (klab probe-hop: a dependent L2 round trip grows from 140 ns idle to ~1 us with 128 KB an SM in flight on an
// H100). Logged here beside the ring; q4-to-ceiling's depth-pays races them.
#include <algorithm>
#include <array>

#include "common.hpp"
#include "q4_gemv_common.hpp"

namespace klab::experiments {

namespace {
// The main kernels and their producer twins, in pairs, in race order: rung 10, rung 50 and the ring
// (grid=fill,load=bulk: rung 32 is its xpf=l2 form, whose main kernel is the same); the ring's wait=flag twin; the
// ring at depth=2 and depth=1 with their producer twins.
const std::vector<std::string> kNames = {
    "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=launch,pdl=on,rows=8",
    "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=producer,pdl=on,rows=8",
    "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=launch,load=bulk,pdl=on,rows=8",
    "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=producer,load=bulk,pdl=on,rows=8",
    "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,load=bulk,pdl=on,rows=8",
    "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=producer,load=bulk,pdl=on,rows=8",
    "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,wait=flag,load=bulk,pdl=on,rows=8",
    "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,load=bulk,depth=2,pdl=on,rows=8",
    "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=producer,load=bulk,depth=2,pdl=on,rows=8",
    "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,load=bulk,depth=1,pdl=on,rows=8",
    "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=producer,load=bulk,depth=1,pdl=on,rows=8",
    "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,load=bulk,depth=3,pdl=on,rows=8",
    "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=producer,load=bulk,depth=3,pdl=on,rows=8",
    "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,load=bulk,pace=1,pdl=on,rows=8",
    "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=producer,load=bulk,pace=1,pdl=on,rows=8",
    "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,load=bulk,pace=2,pdl=on,rows=8",
    "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=producer,load=bulk,pace=2,pdl=on,rows=8",
};
// The (xprep=launch, xprep=producer) pairs: rung 10, rung 50, the ring, the ring at depth=2, 1 and 3, and the paced
// ring (pace=1|2, added in the sixth session: whether pacing changes the main kernel alone or only its chain with the
// prep launch).
constexpr std::array<std::size_t, 8> kPairAt{0, 2, 4, 7, 9, 11, 13, 15};
constexpr std::size_t kRing = 4, kWaitFlag = 6;  // the ring (xprep=launch) and its wait=flag twin

}  // namespace

void register_q4_prep_split(Registry& r) {
  Experiment e;
  e.name = "q4-prep-split";
  e.description = "issue 13: the q4 mat-vec's x-prep launch against the main kernel alone (xprep=producer twins of "
                  "grid=groups,xprep=launch, its load=bulk form and the grid=fill ring), and the ring released by its prep's flag "
                  "(wait=flag), and the ring filling fewer of its stages (depth=2, 1, 3) or pacing its requests (pace=1, 2) with their "
                  "producer twins, at the seed shapes; "
                  "stream mode is the headline";
  const Claim bits{"producer-bits", "each xprep=producer twin gives exactly its xprep=launch kernel's bits, on every shape and input"};
  const Claim hop{"prep-costs-1us",
                  "the prep launch costs a call at least 1 us at 6144x5120 and 5120x6144: each xprep=producer twin is at least 1 us faster "
                  "than its xprep=launch kernel there"};
  const Claim goal{"producer-goal",
                   "with x prepared by its producer, the faster main kernel reaches issue 13's goal share of the read ceiling (90 / 85 / 80 / "
                   "80%) on the four seed shapes"};
  const Claim flag{"wait-flag-pays",
                  "the ring released by its prep kernel's flag (wait=flag) gives the ring's bits and is faster than the ring (released by "
                  "the prep's completion) on the four seed shapes"};
  e.claims = {bits, hop, goal, flag};
  e.run = [=](Context& ctx) {
    const Op& op = ctx.registry().op("q4_gemv");
    const auto vs = lookup(ctx, kNames);
    ctx.claim(hop).needs({"6144x5120", "5120x6144"});
    ctx.claim(goal).needs(shape_keys(seed_shapes()));
    ctx.claim(flag).needs(shape_keys(seed_shapes()));
    for (const Shape& s : shapes_for(ctx, seed_shapes(), {{1024, 512}, {37, 160}})) {
      for (Dist d : {Dist::uniform, Dist::student_t}) {
        const Problem p{s, d, ctx.options().seed};
        auto ms = race(ctx, op, vs, p, RaceOptions{.tolerance = 1e-5, .tolerance_for = {}, .time = d == Dist::uniform});
        if (ms.size() < vs.size() || std::any_of(ms.begin(), ms.end(), [](const Measured& m) { return m.skipped || !m.verified; })) continue;
        const std::string where = s.str() + "/" + to_string(d);
        std::size_t differ = 0;
        std::string counts;
        for (std::size_t p = 0; p < kPairAt.size(); ++p) {
          const auto d = bitwise_diff(ms[kPairAt[p]].output, ms[kPairAt[p] + 1].output);
          differ += d;
          counts += (p ? ", " : "") + fmt("%.0f", double(d));
        }
        ctx.claim(bits).settle(differ == 0, where + ": " + counts + fmt(" of %.0f elements differ (pair by pair)", double(ms[0].output.size())));
        const auto flag_differ = bitwise_diff(ms[kRing].output, ms[kWaitFlag].output);
        if (flag_differ != 0)
          ctx.claim(flag).settle(false, where + fmt(": wait=flag differs from the ring in %.0f of %.0f elements", double(flag_differ), double(ms[0].output.size())));
        if (d != Dist::uniform || !std::all_of(ms.begin(), ms.end(), [](const Measured& m) { return m.timed; })) continue;
        auto us = [&](std::size_t i) { return ms[i].timing.summary.median * 1e3; };
        std::string ev = s.str() + ":";
        for (std::size_t i = 0; i < ms.size(); ++i) ev += " " + kNames[i].substr(8) + fmt(" %.2f us (%.1f%%);", us(i), ms[i].pct_ceiling);
        ctx.log(ev);
        if (s == Shape{6144, 5120} || s == Shape{5120, 6144})
          ctx.claim(hop).settle(s.str(), us(0) - us(1) >= 1.0 && us(2) - us(3) >= 1.0 && us(4) - us(5) >= 1.0,
                                s.str() + fmt(": the prep launch costs %.2f us (groups), %.2f us (load=bulk) and %.2f us (the ring) a call",
                                              us(0) - us(1), us(2) - us(3), us(4) - us(5)));
        if (q4_study::is_seed_shape(s)) {
          const auto c = compare_times(ms[kRing].timing.kept_ms, ms[kWaitFlag].timing.kept_ms, s.m);
          ctx.claim(flag).settle(s.str(), c.verdict == Verdict::faster,
                                 s.str() + fmt(": the ring %.2f us, wait=flag %.2f us ", us(kRing), us(kWaitFlag)) + speedup_text(c));
        }
        if (q4_study::is_seed_shape(s)) {
          std::size_t best = 1;
          for (std::size_t p = 1; p < kPairAt.size(); ++p)
            if (ms[kPairAt[p] + 1].pct_ceiling > ms[best].pct_ceiling) best = kPairAt[p] + 1;
          ctx.claim(goal).settle(s.str(), ms[best].pct_ceiling >= q4_study::goal_pct(s),
                                 s.str() + ": " + kNames[best].substr(8) +
                                     fmt(" %.2f us, %.1f%% of the read ceiling (goal %.0f%%)", us(best), ms[best].pct_ceiling, q4_study::goal_pct(s)));
        }
      }
    }
  };
  r.add(std::move(e));
}

}  // namespace klab::experiments
