// q4-vs-peers: the q4 mat-vecs beyond the seed against its kept kernel B and the cuBLAS peers.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "common.hpp"
#include "q4_gemv_common.hpp"

namespace klab::experiments::q4_study {

namespace {

// Beyond the seed: kernels that read whole blocks (16-byte code loads): block-per-lane (a lane walks
// a row's blocks; 1, 4, 8, 16 rows per warp) and block-per-thread (one thread per block, split-K over
// warps; 2, 4, 8 rows per thread block; the offset dot form at 4 and 8), against the seed's kept
// kernel B and the cuBLAS peers.
std::string beyond(const std::string& map, int rows) {
  // "block-per-thread,dot=offset" carries its extra axis in the map string.
  const auto comma = map.find(',');
  std::vector<std::pair<std::string, std::string>> axes{{"map", map.substr(0, comma)}};
  if (comma != std::string::npos) axes.emplace_back("dot", map.substr(map.find('=') + 1));
  axes.emplace_back("rows", std::to_string(rows));
  return variant_name("q4_gemv", axes);
}

}  // namespace

Experiment vs_peers() {
  Experiment e;
  e.name = "q4-vs-peers";
  e.description = "beyond the seed: block-per-lane (1, 4, 8, 16 rows per warp) and block-per-thread (2, 4, 8 rows per block; "
                  "direct and offset dot) q4 mat-vecs vs the seed's kept kernel B and cuBLAS bf16 GemmEx / f32 SGEMV on dequant(W), at the seed shapes; "
                  "llama.cpp's MMVQ beside them where klab was built with ggml";
  const Claim accurate{"accurate", "every kernel beyond the seed is within 1e-5 (max_rel) of the f64 reference on every shape and input"};
  const Claim rows_bitwise{"rows-bitwise", "within each map, every rows value is bitwise equal to the first (each row keeps its order) on every shape and input"};
  const Claim lane_beats_b{"lane-beats-b", "block-per-lane,rows=1 is faster than the seed's kept kernel B on the four seed shapes"};
  const Claim best_beats_peers{"best-beats-peers", "the fastest kernel beyond the seed is faster than both cuBLAS peers on the four seed shapes"};
  const Claim best_ceiling_70{"best-ceiling-70", "the fastest kernel beyond the seed reaches at least 70% of the measured read ceiling on the four seed shapes"};
  e.claims = {accurate, rows_bitwise, lane_beats_b, best_beats_peers, best_ceiling_70};
  e.run = [=](Context& ctx) {
    const Op& op = ctx.registry().op("q4_gemv");
    // ms[0] = B; then the maps' variants (each map's first is its bitwise anchor); then the peers.
    const std::vector<std::pair<std::string, std::vector<int>>> maps{
        {"block-per-lane", {1, 4, 8, 16}}, {"block-per-thread", {2, 4, 8}}, {"block-per-thread,dot=offset", {4, 8}}};
    std::vector<std::string> names{kRungB};
    std::vector<std::size_t> anchor;  // per variant index: the index of its map's first variant
    for (const auto& [map, rows] : maps)
      for (std::size_t i = 0; i < rows.size(); ++i) {
        anchor.push_back(names.size() - i);
        names.push_back(beyond(map, rows[i]));
      }
    const std::size_t first = 1, last = names.size();  // the kernels beyond the seed: ms[first, last)
    names.push_back(kPeerBf16);
    names.push_back(kPeerF32);
    names.push_back(kPeerMmvq);  // optional (a skip without ggml), in no claim
    const auto vs = lookup(ctx, names);
    for (const Claim& c : {accurate, rows_bitwise}) ctx.claim(c).needs(problem_keys(q4_shapes(ctx), {Dist::uniform, Dist::student_t}));
    for (const Claim& c : {lane_beats_b, best_beats_peers, best_ceiling_70}) ctx.claim(c).needs(shape_keys(seed_shapes()));
    for (const Shape& s : q4_shapes(ctx)) {
      for (Dist d : {Dist::uniform, Dist::student_t}) {
        const Problem p{s, d, ctx.options().seed};
        RaceOptions ro{.tolerance = kTolerance, .tolerance_for = {}, .time = d == Dist::uniform};
        auto ms = race(ctx, op, vs, p, ro);
        if (ms.size() < vs.size() || std::any_of(ms.begin(), ms.end() - 1, [](const Measured& m) { return m.skipped; })) continue;
        ms.pop_back();  // llama-mmvq: in the report as raced (or skipped); the claims below are about the others
        const std::string where = problem_key(s, d);
        bool ok = true;
        std::int64_t bits = 0;
        std::string acc = where + ": max_rel", diff = where + ": elements differing from the map's first:";
        for (std::size_t i = first; i < last; ++i) {
          ok = ok && ms[i].verified;
          acc += " " + ms[i].variant->name.substr(std::string("q4_gemv/map=").size()) + fmt(" %.3g", ms[i].acc.max_rel);
          const std::size_t a = anchor[i - first];
          if (a == i) continue;
          const auto b = bitwise_diff(ms[a].output, ms[i].output);
          bits += b;
          diff += " " + ms[i].variant->name.substr(std::string("q4_gemv/map=").size()) + " " + std::to_string(b);
        }
        ctx.claim(accurate).settle(where, ok, acc);
        ctx.claim(rows_bitwise).settle(where, bits == 0, diff);
        const bool timed = std::all_of(ms.begin(), ms.end(), [](const Measured& m) { return m.timed; });
        if (d != Dist::uniform || !is_seed_shape(s) || !timed) continue;
        ctx.claim(lane_beats_b).settle(s.str(), ms[first].vs_a->verdict == Verdict::faster,
                      s.str() + ": B " + speed(ms[0]) + "; block-per-lane,rows=1 " + speed(ms[first]) + " " + speedup_text(*ms[first].vs_a));
        const Measured* best = &ms[first];
        for (std::size_t i = first; i < last; ++i)
          if (ms[i].timing.summary.median < best->timing.summary.median) best = &ms[i];
        const auto vs_bf16 = compare_times(ms[last].timing.kept_ms, best->timing.kept_ms, s.m);
        const auto vs_f32 = compare_times(ms[last + 1].timing.kept_ms, best->timing.kept_ms, s.m);
        ctx.claim(best_beats_peers).settle(s.str(), vs_bf16.verdict == Verdict::faster && vs_f32.verdict == Verdict::faster,
                      s.str() + ": " + best->variant->name + fmt(" %.4f ms, bf16 %.4f ms, f32 %.4f ms", best->timing.summary.median,
                                                                 ms[last].timing.summary.median, ms[last + 1].timing.summary.median) +
                          "; vs bf16 " + speedup_text(vs_bf16) + ", vs f32 " + speedup_text(vs_f32));
        ctx.claim(best_ceiling_70).settle(s.str(), best->pct_ceiling >= 70.0, s.str() + ": " + best->variant->name + " " + speed(*best));
      }
    }
  };
  return e;
}

}  // namespace klab::experiments::q4_study
