#pragma once
// The small kernels of the GDN decode step (operators 1b-6 of seed-digest.md section 2; the
// projections, operators 1a and 7, are in projection.hpp). Each launcher enqueues one kernel on
// `stream`; all pointers are device pointers of one layer (state already offset to the layer and
// slot). Every kernel is deterministic: no atomics, and each reduction has a fixed order that
// depends only on the geometry, so the same inputs give the same bits on every run, every layer
// and every slot.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "klab/ref/gdn.hpp"

namespace klab::gdn::kernels {

// The epsilon inside the q/k L2 norm, the reference's (transformers' l2norm: x * rsqrt(sum x^2 + 1e-6)).
constexpr float kL2NormEps = static_cast<float>(ref::gdn::kL2NormEps);

// Operator 1b, one thread per value head h:
//   beta[h] = sigmoid(b[h]);  g[h] = -exp(a_log[h]) * softplus(a[h] + dt_bias[h])   (log domain)
// ba = b (nv) | a (nv): the b|a projection's output, b first.
void beta_g(const float* ba, const float* a_log, const float* dt_bias, float* beta, float* g, int nv, cudaStream_t stream);

// Operator 2, one thread per channel ch of conv_dim:
//   acc = sum_{j<ck-1} w[ch][j] hist[j][ch] + w[ch][ck-1] xc[ch]   (oldest frame first)
//   xcv[ch] = silu(acc); hist shifts left by one frame and xc[ch] becomes the newest frame.
// xc, xcv (conv_dim); conv_w (conv_dim, ck); hist (ck-1, conv_dim), updated in place.
void conv_silu(const float* xc, const float* conv_w, float* hist, float* xcv, int conv_dim, int ck, cudaStream_t stream);

// Operators 3-4, one block per (q or k, key head): q and k are views of xcv (q | k | v).
//   q_out = q / sqrt(sum q^2 + kL2NormEps) / sqrt(dk);   k_out = k / sqrt(sum k^2 + kL2NormEps)
// q, k (nk, dk). The expansion to value heads is an index (vh / (nv/nk)) in the recurrence: no copy.
void qk_norm(const float* xcv, float* q, float* k, int nk, int dk, cudaStream_t stream);

// Operators 1b, 2 and 3-4 as ONE launch (GdnDevice::set_fused_prep): beta/g, conv + SiLU with the
// history shift, and the q/k L2 norm, with exactly the arithmetic of beta_g, conv_silu and qk_norm
// above (every element the same operations on the same operands; the norms' block_sum over the same
// block size, reduce_threads(dk)), so xcv, hist, q, k, beta and g are bit for bit theirs. Blocks:
// 2 nk (q and k of each key head: its dk channels' conv, then their norm from the values just
// computed), ceil(nv dv / T) (the v channels' conv), one (beta/g); T = reduce_threads(dk) threads.
// pdl: launched with programmatic stream serialization; the kernel then lets its dependents go first,
// prefetches its conv weights and history into L2, and reads and writes nothing before
// griddepcontrol.wait (the same bits; GdnDevice::set_pdl_chain).
// pf: besides, the grid prefetches [pf_base, pf_base + pf_bytes) into L2 (cp.async.bulk.prefetch.L2
// in 4 KB chunks, nothing read into registers, so the same bits): after each block's own work
// (L2Prefetch::after) or before its wait (before: overlapping the predecessor's tail). For a later
// kernel's weights, so that their DRAM reads happen while the small kernels leave the DRAM idle
// (GdnDevice::set_l2_prefetch). Refused (klab::Error, before any launch) where l2_prefetch_error says.
enum class L2Prefetch { none, after, before };
void conv_norm_bg(const float* xc, const float* conv_w, float* hist, float* xcv, float* q, float* k, const float* ba, const float* a_log,
                  const float* dt_bias, float* beta, float* g, int nk, int dk, int nv, int dv, int ck, cudaStream_t stream, bool pdl = false,
                  L2Prefetch pf = L2Prefetch::none, const void* pf_base = nullptr, std::size_t pf_bytes = 0);
// Why [base, base + bytes) cannot be bulk-prefetched ("" when it can): null or empty, or a base or
// size that is not a multiple of 16 bytes.
std::string l2_prefetch_error(const void* base, std::size_t bytes);

// conv_norm_bg for `slots` slots in ONE launch (GdnDevice::enqueue_batch): grid (conv_norm_bg's
// blocks, slots); slot s's blocks run conv_norm_bg's block code (one device function, the same
// instructions) on slot s's tensors, so every slot's xcv, hist, q, k, beta and g are bit for bit what
// conv_norm_bg gives on that slot alone. Per-slot tensors are dense: xc, xcv (slots, conv_dim);
// q, k (slots, nk, dk); ba (slots, 2 nv); beta, g (slots, nv); slot s's history at
// hist + s * hist_stride (floats; the device's slots of one layer are nl layers apart). conv_w,
// a_log and dt_bias are shared. slots in [1, 65535] (grid.y). pdl: as conv_norm_bg's.
void conv_norm_bg_slots(const float* xc, const float* conv_w, float* hist, std::int64_t hist_stride, float* xcv, float* q, float* k, const float* ba,
                        const float* a_log, const float* dt_bias, float* beta, float* g, int nk, int dk, int nv, int dv, int ck, int slots,
                        cudaStream_t stream, bool pdl = false);

// Operator 5, the recurrence, is a gdn_recurrence variant chosen by name (GdnDevice::
// set_recurrence_variant; gdn_recurrence/kernels.hpp).

// Operator 6, one block per value head h:
//   onn[h][c] = o[h][c] * rsqrt(mean_c o[h][c]^2 + eps) * norm_w[c] * silu(z[h][c])
// o, z, onn (nv, dv); norm_w (dv). A block reads only its own head's dv values and norm_w, so B slots
// of dense (B, nv, dv) o, z, onn are one launch with nv = B nv, each slot bit for bit its own launch.
// pdl: as conv_norm_bg's (norm_w prefetched into L2 before the wait; the same bits).
// shift (hist non-null): the launch also shifts the conv history of every channel by one frame, xc
// newest (conv_norm_bg's shift, the same copies), after its wait. For a recurrence that formed the
// conv itself (gdn_recurrence prep=conv): many of its blocks read a key head's q and k history, so it
// cannot shift it; the gated norm, the next launch of the step, can (a shift of the v channels inside
// the recurrence was measured slower: reports/h200/run-prep-conv, variants/gdn_recurrence/kernels_fused.cu).
// Refuses (klab::Error) a shift without xc, conv_dim < 1, or ck outside [1, 9] (its frames are held in
// registers between its loads and its stores).
struct HistShift {
  const float* xc = nullptr;  // (conv_dim) the conv's input, the newest frame
  float* hist = nullptr;      // (ck-1, conv_dim)
  int conv_dim = 0, ck = 0;
};
void gated_norm(const float* o, const float* z, const float* norm_w, float* onn, int nv, int dv, float eps, cudaStream_t stream, bool pdl = false,
                HistShift shift = {});
// The same launch (onn bit for bit) that also writes onn's q8 form for out_proj's
// grid=groups,xprep=launch,dot=q8-dp4a kernel into xq (q4_gemv::prepared_x(); the contract and the
// layout are in q4_gemv/prepared_x.cuh), so that out_proj runs without its prep launch
// (GdnDevice::set_norm_q8). Each warp quantises the 32 values it just computed. Refuses (klab::Error,
// before any CUDA call) what gated_norm_q8_error names.
void gated_norm_q8(const float* o, const float* z, const float* norm_w, float* onn, uint4* xq, int nv, int dv, float eps, cudaStream_t stream,
                   bool pdl = false, HistShift shift = {});
// The stacked input projections' prep and b|a as ONE launch (GdnDevice::set_fold_ba): blocks of 256
// threads, the first ceil(hidden / 256) write h's q8 form into xq (a warp per block of 32, exactly
// q4_gemv's xprep=warps prep kernel), the next `ba_rows` compute ba = W_ba h (a block a row, exactly
// f32_gemv/impl=split-row,pdl=on's code: f32_gemv/split_row.cuh). Launched with programmatic stream
// serialization; every block lets its dependents go first and reads h only after its wait (the W_ba
// loads before it). Refuses (klab::Error, before any CUDA call) what in_prep_ba_error names.
void in_prep_ba(const float* h, uint4* xq, const float* w_ba, float* ba, int ba_rows, int hidden, cudaStream_t stream);
// Why in_prep_ba cannot take (ba_rows, hidden) ("" when it can).
std::string in_prep_ba_error(int ba_rows, int hidden);
// fold=ba-conv (GdnDevice::set_fold_ba_conv): the stacked launch's prep kernel alone (in_prep_ba's first
// blocks: h's q8 form into xq, no b|a rows), and b|a in the conv_norm_bg launch instead (conv_norm_ba).
// Refuses (klab::Error) a hidden that is not a multiple of 32 or past the prepared array (in_prep_ba_error's first check).
void in_prep(const float* h, uint4* xq, int hidden, cudaStream_t stream);
// conv_norm_bg (pdl, no pf) with its beta/g block replaced by one block a row of b|a (2 nv more blocks of
// its T = reduce_threads(dk) threads): ba[r] = W_ba[r] . h, then beta_g's formula for the row's head, beta
// from b's row, g from a's. b|a's arithmetic is f32_gemv/impl=split-row's at 256 threads (each thread
// runs the chains of 256 / T of them: split_row::row_total), so ba, beta and g are bit for bit in_prep_ba's
// and beta_g's, and the step's bits are fold=ba's. Why: b|a needs only h, which the layer's input
// already holds when the stacked launch begins; here its rows' weights are loaded long before (the launch
// is resident beside the stacked kernel, its loads before the wait), and the stacked launch's prep kernel
// is 20 blocks, not 116. Refuses (klab::Error, before any launch) what conv_norm_ba_error names.
void conv_norm_ba(const float* xc, const float* conv_w, float* hist, float* xcv, float* q, float* k, const float* w_ba, const float* h, float* ba,
                  const float* a_log, const float* dt_bias, float* beta, float* g, int nk, int dk, int nv, int dv, int ck, int hidden,
                  cudaStream_t stream);
// Why conv_norm_ba cannot take the geometry ("" when it can): T must divide 256 (dk rounded up to 32 is
// 32, 64, 128 or 256), and split-row must take (2 nv, hidden).
std::string conv_norm_ba_error(int dk, int nv, int hidden);
// Why gated_norm_q8 cannot take (nv, dv) ("" when it can): a thread per element, so dv a multiple
// of 32 and at most 256 (gated_norm's block); nv dv / 32 blocks of 32 within the prepared array.
std::string gated_norm_q8_error(int nv, int dv);

}  // namespace klab::gdn::kernels
