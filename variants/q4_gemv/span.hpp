#pragma once
// span: one step's out_proj and the next step's stacked input projections as ONE persistent launch (issue 14).
//
// Why (the traced 48-layer graph of the GDN twin pace_out1 on an H100, reports/h100/run-call44, 2026-12-06): of a 29.4 us
// layer, out_proj ends 5.5 us after the gated norm, the next layer's prep (in_prep_ba) 2.0 us after out_proj and its
// stacked input projections 13.7 us after that, though those 65 MB take ~19.5 us at the card's read rate and the small
// kernels before out_proj (~8 us) leave the DRAM mostly idle. Every q4 launch there is a ring (a producer warp streaming
// weight groups into shared memory) that starts empty and ends with its grid: the bytes wait for the chain. Here one
// ring streams out_proj's groups, then the next stacked launch's, without a break: its blocks enter while the small
// kernels run (one block an SM, beside them), fill the ring with out_proj's bytes before its release, and keep
// requesting the next layer's bytes while out_proj's dots, a grid-wide barrier and the next prep run.
// Measured (H100, reports/h100/run-span, 2026-12-06): the bits of the launches it replaces, and slower: in the GDN layer's
// 48-layer graph x0.76..x0.80 at pace 1-3 on one or two blocks an SM; it ends 28-31 us after the gated norm (the three
// launches: 21.2), ~43 MB after its release at 1.4-1.5 TB/s. Kept as a negative result (the GDN twins pace_span*).
//
// Phases of a block (grid: per_sm blocks an SM, 1 or 2, all resident; the launch is refused where they would not fit):
//   1. griddepcontrol.wait; x (out_proj's input) from the prepared array (prepared_x.cuh; its producer wrote it);
//      out_y = W_out x over the block's groups, each group as the paced ring computes it (the same functions in the
//      same order: the bits of the paced kernels on launch_prepared);
//   2. a grid-wide barrier (every block's out_y stored and visible), so that h may be out_y itself;
//   3. in_y = W_in q8(h): each consumer thread quantises its block of 32 values of h (xprep=block's words, which
//      are the prep launches'), then the block's groups of the stacked matrix as in 1;
//   4. ba rows (optional): ba[r] = W_ba[r] . h in f32_gemv split-row's order (row_total at 256 threads, stood for by
//      128 of the block's consumer threads: the bits of the GDN step's in_prep_ba).
// Pace: at most `pace` group requests in flight a block (the paced ring's pace=P, one block an SM here).
// Contract: the launch is in a PDL chain (it lets its dependents go at once; they must wait before reading its
// outputs); nothing that may run beside it writes W_out, W_in or W_ba; the prepared array holds out_proj's x when
// its predecessor completes; h is complete when the barrier passes (out_y, or written before the launch).
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace klab::q4_gemv {

struct SpanCall {
  const std::uint8_t* out_packed = nullptr;  // W_out in the paced ring's layout (tiles-r8), out_m x out_k
  float* out_y = nullptr;
  int out_m = 0, out_k = 0;
  const std::uint8_t* in_packed = nullptr;  // W_in, the same layout, in_m x in_k (in_k == out_m where h is out_y)
  float* in_y = nullptr;
  int in_m = 0, in_k = 0;
  const float* h = nullptr;  // in_k values, 16-byte aligned
  const float* w_ba = nullptr;  // ba_rows x in_k f32, row-major, 16-byte aligned (ba_rows 0: none)
  float* ba = nullptr;
  int ba_rows = 0;
  int per_sm = 1;  // blocks an SM (1 or 2), each a ring of kSpanSmem / per_sm: two give twice the consumer warps an SM
};

// Why the span cannot run c's shapes ("" when it can): k a multiple of 32 within the paced ring's one-block bound,
// b|a within split-row's k, the pace 1 to 4.
std::string span_error(const SpanCall& c, int pace);
// Enqueues the span on `stream` (with PDL). Throws klab::Error before launching on span_error or a null buffer.
void launch_span(const SpanCall& c, int pace, cudaStream_t stream);
// The ring's stages a block, for reports and tests: min(8, kSpanSmem / per_sm / the larger group's bytes).
int span_stages(int out_k, int in_k, int per_sm = 1);
// Shared memory the span's rings take on an SM (its per_sm blocks share it): room is left beside them for the small
// kernels of the chain (the GDN step's conv, recurrence and gated norm run beside the span's blocks, which wait for them).
inline constexpr int kSpanSmem = 168 * 1024;

}  // namespace klab::q4_gemv
