// What the q4 mat-vec A/B experiments share (q4_gemv_common.hpp).
#include "q4_gemv_common.hpp"

#include <algorithm>

#include "common.hpp"
#include "q4_gemv/q4_gemv.hpp"

namespace klab::experiments::q4_study {

std::string q4(const char* scale, const char* chains, const char* f16, const char* rows) {
  return variant_name("q4_gemv", {{"scale", scale}, {"chains", chains}, {"f16", f16}, {"rows", rows}});
}
const std::string kOriginal = q4("lane0-shfl", "1", "soft", "1");
const std::string kRungA = q4("per-lane", "4", "soft", "1");
const std::string kRungB = q4("per-lane", "4", "hard", "1");
const std::string kRungC = q4("per-lane", "4", "hard", "4");
const std::string kPeerBf16 = "q4_gemv/impl=cublas-bf16-gemmex";
const std::string kPeerF32 = "q4_gemv/impl=cublas-sgemv-f32";
// llama.cpp's MMVQ through ggml (variants/baselines/llama_mmvq.cpp): raced in q4-vs-peers where klab
// was built with ggml, else listed as a skip with the reason; no claim depends on it.
const std::string kPeerMmvq = "q4_gemv/impl=llama-mmvq";

std::vector<Shape> q4_shapes(const Context& ctx) {
  // --quick: small shapes that still take every path (a row count not a multiple of 4, a K with a
  // block tail after the unrolled loop).
  return shapes_for(ctx, seed_shapes(), {{1024, 512}, {37, 160}});
}
bool is_seed_shape(const Shape& s) { return std::find(seed_shapes().begin(), seed_shapes().end(), s) != seed_shapes().end(); }

double goal_pct(const Shape& s) {
  if (s == Shape{17408, 5120}) return 90.0;
  if (s == Shape{10240, 5120}) return 85.0;
  return 80.0;
}

std::string speed(const Measured& m) {
  return fmt("%.4f ms, %.0f GB/s (%.1f%% of ceiling), %.1f GMAC/s", m.timing.summary.median, m.gbps, m.pct_ceiling, m.gmacs);
}
// Warps the grid launches for `m` rows against the warps the device can hold at once for this
// kernel: the occupancy side of the rows-per-warp trade.
std::string warps_note(const std::string& variant, std::int64_t m, const Context& ctx) {
  const auto& kern = q4_gemv::q4_kernel(variant);
  const std::int64_t warps = (m + kern.rows_per_warp - 1) / kern.rows_per_warp;
  const std::int64_t slots = std::int64_t(kern.resident_warps_per_sm()) * ctx.device().sm_count;
  return std::to_string(warps) + " warps launched, " + std::to_string(slots) + " resident warp slots (" +
         fmt("%.0f%%", 100.0 * double(std::min(warps, slots)) / double(slots)) + ")";
}

}  // namespace klab::experiments::q4_study
