// The small kernels of the GDN decode step. Layouts are stated once per kernel; each math line has
// its formula above it. Precise libm functions throughout (expf, log1pf, sqrtf; no fast-math
// intrinsics): the tier is judged against an f64 reference at 1e-4 and there is no speed to win here.
// Tuning: none yet. On the H200 the whole f32 step takes 0.152 ms per layer per token at the
// Qwen3.5-27B geometry, 67% of the read ceiling for its 442 MB of projection weights, so the
// projections, not these kernels, set the time (reports/h200/, gdn-q4-layer).
#include "gdn/gdn_kernels.hpp"

#include <algorithm>
#include <cstdint>

#include "klab/cuda.hpp"
#include "klab/error.hpp"
#include "f32_gemv/split_row.cuh"
#include "gdn_recurrence/block_sum.cuh"
#include "gdn_recurrence/step_math.cuh"
#include "f32_gemv/variants.hpp"
#include "q4_gemv/prepared_x.cuh"

namespace klab::gdn::kernels {

namespace {

// silu, softplus, beta/g, the conv's value and the history shift are gdn_recurrence's (step_math.cuh), the formulas the
// recurrence's prep=conv and gated-norm epilogues run: the same operations, the same bits.
using gdn_recurrence::shift_history;
using gdn_recurrence::silu;

// Threads for a block that reduces over n elements (block_sum.cuh: prep=conv's norm takes its order from it).
using gdn_recurrence::reduce_threads;

// The block reductions (q/k norm, gated norm) are gdn_recurrence's block_sum (block_sum.cuh), the one
// the recurrence's norm=last epilogue runs: the same order, so its onn is this gated norm's bits.
using gdn_recurrence::block_sum;

// ba (2 nv) = b | a; a_log, dt_bias, beta, g (nv). Value head h.
__device__ __forceinline__ void beta_g_one(const float* __restrict__ ba, const float* __restrict__ a_log, const float* __restrict__ dt_bias,
                                           float* __restrict__ beta, float* __restrict__ g, int nv, int h) {
  beta[h] = gdn_recurrence::beta_of(ba[h]);
  g[h] = gdn_recurrence::g_of(ba[nv + h], a_log[h], dt_bias[h]);
}

// One thread per value head.
__global__ void beta_g_kernel(const float* __restrict__ ba, const float* __restrict__ a_log, const float* __restrict__ dt_bias,
                              float* __restrict__ beta, float* __restrict__ g, int nv) {
  const int h = blockIdx.x * blockDim.x + threadIdx.x;
  if (h >= nv) return;
  beta_g_one(ba, a_log, dt_bias, beta, g, nv, h);
}

// xc, xcv (conv_dim); w (conv_dim, ck); hist (ck-1, conv_dim), frame 0 the oldest, holding the conv
// INPUT (raw projection). Channel ch; returns xcv[ch]. A thread reads and rewrites only its own
// column of hist, so convolution and shift share a kernel without races.
__device__ __forceinline__ float conv_one(const float* __restrict__ xc, const float* __restrict__ w, float* __restrict__ hist,
                                          float* __restrict__ xcv, int conv_dim, int ck, int ch) {
  const float x = xc[ch];
  // xcv = silu(sum_{j<ck-1} w[ch][j] * hist[j][ch] + w[ch][ck-1] * x)   (step_math.cuh)
  const float out = gdn_recurrence::conv_value(x, w + static_cast<std::size_t>(ch) * ck, hist, conv_dim, ck, ch);
  xcv[ch] = out;
  shift_history(hist, conv_dim, ck, ch, x);
  return out;
}

// One thread per channel.
__global__ void conv_silu_kernel(const float* __restrict__ xc, const float* __restrict__ w, float* __restrict__ hist,
                                 float* __restrict__ xcv, int conv_dim, int ck) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= conv_dim) return;
  conv_one(xc, w, hist, xcv, conv_dim, ck, ch);
}

// out[i] = x[i] / sqrt(ss + eps) (k), or that times 1 / sqrt(dk) (q), for the block's thread-strided i.
__device__ __forceinline__ void norm_write(const float* x, float* __restrict__ out, int dk, bool is_k, float ss) {
  // inv = 1 / sqrt(ss + eps)   (transformers' l2norm: x * rsqrt(sum x^2 + 1e-6))
  const float inv = gdn_recurrence::l2_inv(ss, kL2NormEps);
  // q additionally times 1 / sqrt(dk), after the norm
  const float scale = is_k ? 1.f : 1.f / sqrtf(static_cast<float>(dk));
  for (int i = threadIdx.x; i < dk; i += blockDim.x) out[i] = is_k ? x[i] * inv : (x[i] * inv) * scale;
}

// xcv (conv_dim) = q (nk, dk) | k (nk, dk) | v (nv, dv); q, k outputs (nk, dk). Block b < nk
// normalises q of key head b, block nk + b normalises k of key head b.
__global__ void qk_norm_kernel(const float* __restrict__ xcv, float* __restrict__ q, float* __restrict__ k, int nk, int dk) {
  __shared__ float smem[33];
  const bool is_k = blockIdx.x >= static_cast<unsigned>(nk);
  const int head = is_k ? blockIdx.x - nk : blockIdx.x;
  const float* x = xcv + (is_k ? static_cast<std::size_t>(nk) * dk : 0) + static_cast<std::size_t>(head) * dk;
  float* out = (is_k ? k : q) + static_cast<std::size_t>(head) * dk;
  // ss = sum_i x[i]^2   (thread-strided partials, then block_sum: a fixed order)
  float p = 0.f;
  for (int i = threadIdx.x; i < dk; i += blockDim.x) p = fmaf(x[i], x[i], p);
  norm_write(x, out, dk, is_k, block_sum(p, smem));
}

// conv_norm_bg (gdn_kernels.hpp): blocks [0, 2 nk) a key head's q or k (conv of its dk channels, then
// their norm, as qk_norm_kernel's block of the same index), [2 nk, 2 nk + vb) the v channels' conv
// (blockDim.x each), the last one beta/g (thread-strided over the value heads). A q/k block's thread
// i accumulates the squares of the values it computed itself, in qk_norm_kernel's order, and
// norm_write reads them back from xcv (its own writes: program order), so every bit is the
// three-kernel path's.
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// Pdl: trigger, the channel's conv weights and history frames into L2, wait (nothing read or written before).
__device__ __forceinline__ void pdl_prologue_conv(const float* conv_w, const float* hist, int conv_dim, int ck, int ch) {
  asm volatile("griddepcontrol.launch_dependents;");
  if (ch < conv_dim) {
    prefetch_l2(conv_w + static_cast<std::size_t>(ch) * ck);
    for (int j = 0; j < ck - 1; ++j) prefetch_l2(hist + static_cast<std::size_t>(j) * conv_dim + ch);
  }
  asm volatile("griddepcontrol.wait;" ::: "memory");
}

// The body of a conv_norm_bg block for one slot (blockIdx.x as above): conv_norm_bg_kernel runs it on
// its pointers, conv_norm_bg_slots_kernel on slot blockIdx.y's.
template <bool Pdl>
__device__ __forceinline__ void conv_norm_bg_block(const float* __restrict__ xc, const float* __restrict__ conv_w, float* __restrict__ hist, float* xcv,
                                                   float* __restrict__ q, float* __restrict__ k, const float* __restrict__ ba,
                                                   const float* __restrict__ a_log, const float* __restrict__ dt_bias, float* __restrict__ beta,
                                                   float* __restrict__ g, int nk, int dk, int nv, int dv, int ck, int vblocks) {
  __shared__ float smem[33];
  const int conv_dim = 2 * nk * dk + nv * dv;
  const int b = blockIdx.x;
  if constexpr (Pdl) {  // the first channel this thread takes (a q/k head's, a v block's; the beta/g block: none)
    const int first = b < 2 * nk ? (b >= nk ? nk * dk : 0) + (b % nk) * dk + int(threadIdx.x) : 2 * nk * dk + (b - 2 * nk) * int(blockDim.x) + int(threadIdx.x);
    pdl_prologue_conv(conv_w, hist, b < 2 * nk + vblocks ? conv_dim : 0, ck, first);
  }
  if (b < 2 * nk) {
    const bool is_k = b >= nk;
    const int head = is_k ? b - nk : b;
    const int base = (is_k ? nk * dk : 0) + head * dk;
    float p = 0.f;
    for (int i = threadIdx.x; i < dk; i += blockDim.x) {
      const float x = conv_one(xc, conv_w, hist, xcv, conv_dim, ck, base + i);
      p = fmaf(x, x, p);
    }
    norm_write(xcv + base, (is_k ? k : q) + static_cast<std::size_t>(head) * dk, dk, is_k, block_sum(p, smem));
  } else if (b < 2 * nk + vblocks) {
    const int ch = 2 * nk * dk + (b - 2 * nk) * blockDim.x + threadIdx.x;
    if (ch < conv_dim) conv_one(xc, conv_w, hist, xcv, conv_dim, ck, ch);
  } else {
    for (int h = threadIdx.x; h < nv; h += blockDim.x) beta_g_one(ba, a_log, dt_bias, beta, g, nv, h);
  }
}

// The grid's threads issue bulk L2 prefetches of [base, base + bytes) in chunks of kPrefetchChunk
// (cp.async.bulk.prefetch.L2: a hint with no completion, nothing read into registers; base and bytes
// multiples of 16, checked on the host).
constexpr std::size_t kPrefetchChunk = 4096;
__device__ __forceinline__ void bulk_prefetch_l2(const char* base, std::size_t bytes) {
  const std::size_t n = (bytes + kPrefetchChunk - 1) / kPrefetchChunk;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t off = i * kPrefetchChunk;
    const unsigned size = unsigned(bytes - off < kPrefetchChunk ? bytes - off : kPrefetchChunk);
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(base + off), "r"(size) : "memory");
  }
}

// Pf: L2Prefetch (gdn_kernels.hpp) as an int: 0 none, 1 after the block's work, 2 before its wait.
template <bool Pdl, int Pf>
__global__ void conv_norm_bg_kernel(const float* __restrict__ xc, const float* __restrict__ conv_w, float* __restrict__ hist, float* xcv,
                                    float* __restrict__ q, float* __restrict__ k, const float* __restrict__ ba, const float* __restrict__ a_log,
                                    const float* __restrict__ dt_bias, float* __restrict__ beta, float* __restrict__ g, int nk, int dk, int nv,
                                    int dv, int ck, int vblocks, const char* pf, std::size_t pf_bytes) {
  if constexpr (Pf == 2) bulk_prefetch_l2(pf, pf_bytes);
  conv_norm_bg_block<Pdl>(xc, conv_w, hist, xcv, q, k, ba, a_log, dt_bias, beta, g, nk, dk, nv, dv, ck, vblocks);
  if constexpr (Pf == 1) bulk_prefetch_l2(pf, pf_bytes);
}

// conv_norm_bg_slots (gdn_kernels.hpp): slot s = blockIdx.y runs conv_norm_bg_block on its own rows of
// the dense per-slot tensors and its own history (hist + s hist_stride); the weights are shared.
template <bool Pdl>
__global__ void conv_norm_bg_slots_kernel(const float* __restrict__ xc, const float* __restrict__ conv_w, float* __restrict__ hist, float* xcv,
                                          float* __restrict__ q, float* __restrict__ k, const float* __restrict__ ba, const float* __restrict__ a_log,
                                          const float* __restrict__ dt_bias, float* __restrict__ beta, float* __restrict__ g, int nk, int dk, int nv,
                                          int dv, int ck, int vblocks, std::int64_t hist_stride) {
  const std::size_t s = blockIdx.y;
  const std::size_t conv_dim = std::size_t(2 * nk * dk + nv * dv), key = std::size_t(nk) * dk, heads = std::size_t(nv);
  conv_norm_bg_block<Pdl>(xc + s * conv_dim, conv_w, hist + s * std::size_t(hist_stride), xcv + s * conv_dim, q + s * key, k + s * key, ba + s * 2 * heads,
                          a_log, dt_bias, beta + s * heads, g + s * heads, nk, dk, nv, dv, ck, vblocks);
}

// o, z, onn (nv, dv); norm_w (dv). One block per value head.
// Q8: also the q8 form of onn for out_proj (gated_norm_q8), blockDim.x == dv (a multiple of 32).
// Shift: also the conv history shift of every channel (HistShift, gdn_kernels.hpp), grid-strided, after the wait.
constexpr int kShiftFrames = 8;  // ck - 1 at most (check_shift)
constexpr int kShiftPass = 2;    // channels a thread holds between its loads and its stores
template <bool Pdl, bool Q8 = false, bool Shift = false>
__global__ void gated_norm_kernel(const float* __restrict__ o, const float* __restrict__ z, const float* __restrict__ norm_w,
                                  float* __restrict__ onn, int dv, float eps, uint4* __restrict__ xq = nullptr, HistShift sh = {}) {
  __shared__ float smem[33];
  if constexpr (Pdl) {
    asm volatile("griddepcontrol.launch_dependents;");
    for (int c = threadIdx.x; c < dv; c += blockDim.x) prefetch_l2(norm_w + c);
    asm volatile("griddepcontrol.wait;" ::: "memory");
  }
  // Shift: the first kShiftPass channels a thread shifts are loaded now, beside o and z, and stored last, so
  // that their L2 round trip overlaps the norm's (measured on the H200, 2026-12-04: the shift before the
  // norm, each channel loaded and stored in turn, made the gated norm end 3.1 us after the recurrence
  // instead of 1.8, reports/h200/run-prep-conv/d0d353c; one channel a thread so, the rest in turn, 3.1 us
  // again, c0b53d5; two a thread in one pass, 2.5 us, e0e5590). At Qwen3.5-27B 10240 channels over 6144
  // threads: all in the first pass. Channels past it (small geometries) are shifted in turn at the end.
  [[maybe_unused]] const int sch = int(blockIdx.x * blockDim.x + threadIdx.x), sstride = int(gridDim.x * blockDim.x);
  [[maybe_unused]] float keep[kShiftPass][kShiftFrames];
  if constexpr (Shift)
#pragma unroll
    for (int p = 0; p < kShiftPass; ++p)
      if (sch + p * sstride < sh.conv_dim)
#pragma unroll
        for (int j = 0; j < kShiftFrames; ++j)
          if (j < sh.ck - 1)
            keep[p][j] = j + 1 < sh.ck - 1 ? sh.hist[static_cast<std::size_t>(j + 1) * sh.conv_dim + sch + p * sstride] : sh.xc[sch + p * sstride];
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * dv;
  // ss = sum_c o[c]^2   (thread-strided partials, then block_sum: a fixed order)
  float p = 0.f;
  for (int c = threadIdx.x; c < dv; c += blockDim.x) p = fmaf(o[base + c], o[base + c], p);
  const float ss = block_sum(p, smem);
  // r = 1 / sqrt(mean(o^2) + eps)
  const float r = 1.f / sqrtf(ss / static_cast<float>(dv) + eps);
  // onn = o * r * norm_w * silu(z)
  if constexpr (Q8) {  // one element a thread: thread c's warp holds block (base + c) / 32 of x
    const int c = threadIdx.x;
    const float v = o[base + c] * r * norm_w[c] * silu(z[base + c]);
    onn[base + c] = v;
    q4_gemv::store_prepared_q8_warp(xq, int((base + c) / 32), v, c & 31);
  } else {
    for (int c = threadIdx.x; c < dv; c += blockDim.x) onn[base + c] = o[base + c] * r * norm_w[c] * silu(z[base + c]);
  }
  if constexpr (Shift) {
#pragma unroll
    for (int p = 0; p < kShiftPass; ++p)  // hist[j] = hist[j+1] for j < ck-2, hist[ck-2] = xc: shift_history's copies
      if (sch + p * sstride < sh.conv_dim)
#pragma unroll
        for (int j = 0; j < kShiftFrames; ++j)
          if (j < sh.ck - 1) sh.hist[static_cast<std::size_t>(j) * sh.conv_dim + sch + p * sstride] = keep[p][j];
    for (int ch = sch + kShiftPass * sstride; ch < sh.conv_dim; ch += sstride) shift_history(sh.hist, sh.conv_dim, sh.ck, ch, sh.xc[ch]);
  }
}

// in_prep_ba: blocks [0, prep) h's q8 form (xprep=warps' kernel body), blocks [prep, prep + rows) b|a rows.
__global__ void __launch_bounds__(f32_gemv::split_row::kThreads)
    in_prep_ba_kernel(const float* __restrict__ h, uint4* __restrict__ xq, int nb, int prep, const float* __restrict__ w_ba, float* __restrict__ ba,
                      int k) {
  if (int(blockIdx.x) >= prep) {
    f32_gemv::split_row::body<true>(w_ba, h, ba, k, int(blockIdx.x) - prep);
    return;
  }
  asm volatile("griddepcontrol.launch_dependents;");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  q4_gemv::prepare_q8_warps(h, xq, nb, int(blockIdx.x));
}

// conv_norm_ba (gdn_kernels.hpp): conv_norm_bg's blocks [0, 2 nk + vblocks) as they are (in the PDL chain), then
// block 2 nk + vblocks + r row r of b|a; Ways = 256 / blockDim.x (split_row::row_total).
template <int Ways>
__global__ void conv_norm_ba_kernel(const float* __restrict__ xc, const float* __restrict__ conv_w, float* __restrict__ hist, float* xcv,
                                    float* __restrict__ q, float* __restrict__ k, const float* __restrict__ w_ba, const float* __restrict__ h,
                                    float* __restrict__ ba, const float* __restrict__ a_log, const float* __restrict__ dt_bias, float* __restrict__ beta,
                                    float* __restrict__ g, int nk, int dk, int nv, int dv, int ck, int vblocks, int hidden) {
  const int first = 2 * nk + vblocks;
  if (int(blockIdx.x) < first) {
    conv_norm_bg_block<true>(xc, conv_w, hist, xcv, q, k, ba, a_log, dt_bias, beta, g, nk, dk, nv, dv, ck, vblocks);
    return;
  }
  const int r = int(blockIdx.x) - first;
  f32_gemv::split_row::row_total<true, Ways>(w_ba, h, hidden, r, int(blockDim.x), [&](float s) {  // beta_g_one's formulas on the row's total
    ba[r] = s;
    if (r < nv) beta[r] = gdn_recurrence::beta_of(s);
    else g[r - nv] = gdn_recurrence::g_of(s, a_log[r - nv], dt_bias[r - nv]);
  });
}

// Why h's q8 form cannot be prepared at `hidden` ("" when it can): in_prep_ba's first check, in_prep's only one.
std::string prep_error(int hidden) {
  if (hidden % 32 != 0 || hidden / 32 > q4_gemv::kPreparedStride)
    return "hidden = " + std::to_string(hidden) + ": the prepared x takes blocks of 32, at most " + std::to_string(32 * q4_gemv::kPreparedStride);
  return "";
}

// Why ba_rows rows of b|a cannot be split-row's at `hidden` ("" when they can).
std::string ba_rows_error(std::int64_t ba_rows, int hidden) {
  if (auto why = f32_gemv::split_row_error(ba_rows, hidden); !why.empty()) return "b|a (" + std::to_string(ba_rows) + " x " + std::to_string(hidden) + "): " + why;
  return "";
}

// in_prep_ba_kernel's launch, checked by its callers: its prep blocks for h's q8 form, then ba_rows rows of b|a (0: none).
void launch_in_prep(const float* h, uint4* xq, const float* w_ba, float* ba, int ba_rows, int hidden, cudaStream_t stream) {
  const int nb = hidden / 32, prep = (nb + 7) / 8;
  launch_maybe_pdl(true, in_prep_ba_kernel, dim3(unsigned(prep + ba_rows)), dim3(unsigned(f32_gemv::split_row::kThreads)), 0, stream, h, xq, nb, prep, w_ba, ba,
                   hidden);
  KLAB_CUDA_LAUNCH("in_prep_ba_kernel");
}

}  // namespace

std::string in_prep_ba_error(int ba_rows, int hidden) {
  if (auto why = prep_error(hidden); !why.empty()) return why;
  return ba_rows_error(ba_rows, hidden);
}

void in_prep_ba(const float* h, uint4* xq, const float* w_ba, float* ba, int ba_rows, int hidden, cudaStream_t stream) {
  if (auto why = in_prep_ba_error(ba_rows, hidden); !why.empty()) throw Error("in_prep_ba: " + why);
  require(h && xq && w_ba && ba, "in_prep_ba: a null buffer");
  require(reinterpret_cast<std::uintptr_t>(h) % 16 == 0 && reinterpret_cast<std::uintptr_t>(w_ba) % 16 == 0, "in_prep_ba: h and W_ba must be 16-byte aligned");
  launch_in_prep(h, xq, w_ba, ba, ba_rows, hidden, stream);
}

void in_prep(const float* h, uint4* xq, int hidden, cudaStream_t stream) {
  if (auto why = prep_error(hidden); !why.empty()) throw Error("in_prep: " + why);
  require(h && xq, "in_prep: a null buffer");
  require(reinterpret_cast<std::uintptr_t>(h) % 16 == 0, "in_prep: h must be 16-byte aligned");
  launch_in_prep(h, xq, nullptr, nullptr, 0, hidden, stream);
}

std::string conv_norm_ba_error(int dk, int nv, int hidden) {
  const int threads = reduce_threads(dk);
  if (f32_gemv::split_row::kThreads % threads != 0)
    return "dk = " + std::to_string(dk) + ": conv_norm_bg's blocks of " + std::to_string(threads) + " threads do not divide split-row's " +
           std::to_string(f32_gemv::split_row::kThreads) + " (each b|a row stands for 256 threads): dk rounded up to 32 must be 32, 64, 128 or 256";
  return ba_rows_error(2 * std::int64_t(nv), hidden);
}

void conv_norm_ba(const float* xc, const float* conv_w, float* hist, float* xcv, float* q, float* k, const float* w_ba, const float* h, float* ba,
                  const float* a_log, const float* dt_bias, float* beta, float* g, int nk, int dk, int nv, int dv, int ck, int hidden,
                  cudaStream_t stream) {
  if (auto why = conv_norm_ba_error(dk, nv, hidden); !why.empty()) throw Error("kernels::conv_norm_ba: " + why);
  require(w_ba && h && ba, "kernels::conv_norm_ba: a null buffer");
  require(reinterpret_cast<std::uintptr_t>(h) % 16 == 0 && reinterpret_cast<std::uintptr_t>(w_ba) % 16 == 0,
          "kernels::conv_norm_ba: h and W_ba must be 16-byte aligned");
  const int threads = reduce_threads(dk);  // conv_norm_bg's block: the same conv and norm bits
  const int vblocks = (nv * dv + threads - 1) / threads;
  auto kernel = conv_norm_ba_kernel<1>;
  switch (f32_gemv::split_row::kThreads / threads) {
    case 2: kernel = conv_norm_ba_kernel<2>; break;
    case 4: kernel = conv_norm_ba_kernel<4>; break;
    case 8: kernel = conv_norm_ba_kernel<8>; break;
    default: break;
  }
  launch_maybe_pdl(true, kernel, dim3(unsigned(2 * nk + vblocks + 2 * nv)), dim3(unsigned(threads)), 0, stream, xc, conv_w, hist, xcv, q, k, w_ba, h, ba,
                   a_log, dt_bias, beta, g, nk, dk, nv, dv, ck, vblocks, hidden);
  KLAB_CUDA_LAUNCH("conv_norm_ba_kernel");
}

void beta_g(const float* ba, const float* a_log, const float* dt_bias, float* beta, float* g, int nv, cudaStream_t stream) {
  beta_g_kernel<<<(nv + 127) / 128, 128, 0, stream>>>(ba, a_log, dt_bias, beta, g, nv);
  KLAB_CUDA_LAUNCH("beta_g_kernel");
}

void conv_silu(const float* xc, const float* conv_w, float* hist, float* xcv, int conv_dim, int ck, cudaStream_t stream) {
  conv_silu_kernel<<<(conv_dim + 255) / 256, 256, 0, stream>>>(xc, conv_w, hist, xcv, conv_dim, ck);
  KLAB_CUDA_LAUNCH("conv_silu_kernel");
}

void qk_norm(const float* xcv, float* q, float* k, int nk, int dk, cudaStream_t stream) {
  qk_norm_kernel<<<2 * nk, reduce_threads(dk), 0, stream>>>(xcv, q, k, nk, dk);
  KLAB_CUDA_LAUNCH("qk_norm_kernel");
}

std::string l2_prefetch_error(const void* base, std::size_t bytes) {
  if (base == nullptr || bytes == 0) return "an L2 prefetch of nothing (a null base or 0 bytes)";
  if (reinterpret_cast<std::uintptr_t>(base) % 16 != 0 || bytes % 16 != 0)
    return "an L2 prefetch of " + std::to_string(bytes) + " bytes at a base that is not 16-byte aligned or a size not a multiple of 16 (cp.async.bulk)";
  return "";
}

namespace {
template <bool Pdl>
auto conv_norm_bg_for(L2Prefetch pf) {
  switch (pf) {
    case L2Prefetch::after: return conv_norm_bg_kernel<Pdl, 1>;
    case L2Prefetch::before: return conv_norm_bg_kernel<Pdl, 2>;
    default: return conv_norm_bg_kernel<Pdl, 0>;
  }
}
}  // namespace

void conv_norm_bg(const float* xc, const float* conv_w, float* hist, float* xcv, float* q, float* k, const float* ba, const float* a_log,
                  const float* dt_bias, float* beta, float* g, int nk, int dk, int nv, int dv, int ck, cudaStream_t stream, bool pdl, L2Prefetch pf,
                  const void* pf_base, std::size_t pf_bytes) {
  if (pf != L2Prefetch::none)
    if (auto why = l2_prefetch_error(pf_base, pf_bytes); !why.empty()) throw Error("kernels::conv_norm_bg: " + why);
  const int threads = reduce_threads(dk);  // qk_norm's block size: the same block_sum, the same bits
  const int vblocks = (nv * dv + threads - 1) / threads;
  launch_maybe_pdl(pdl, pdl ? conv_norm_bg_for<true>(pf) : conv_norm_bg_for<false>(pf), dim3(unsigned(2 * nk + vblocks + 1)), dim3(unsigned(threads)), 0,
                   stream, xc, conv_w, hist, xcv, q, k, ba, a_log, dt_bias, beta, g, nk, dk, nv, dv, ck, vblocks, static_cast<const char*>(pf_base),
                   pf == L2Prefetch::none ? std::size_t(0) : pf_bytes);
  KLAB_CUDA_LAUNCH("conv_norm_bg_kernel");
}

void conv_norm_bg_slots(const float* xc, const float* conv_w, float* hist, std::int64_t hist_stride, float* xcv, float* q, float* k, const float* ba,
                        const float* a_log, const float* dt_bias, float* beta, float* g, int nk, int dk, int nv, int dv, int ck, int slots,
                        cudaStream_t stream, bool pdl) {
  const int threads = reduce_threads(dk);  // conv_norm_bg's block: the same blocks, the same bits
  const int vblocks = (nv * dv + threads - 1) / threads;
  launch_maybe_pdl(pdl, pdl ? conv_norm_bg_slots_kernel<true> : conv_norm_bg_slots_kernel<false>, dim3(unsigned(2 * nk + vblocks + 1), unsigned(slots)),
                   dim3(unsigned(threads)), 0, stream, xc, conv_w, hist, xcv, q, k, ba, a_log, dt_bias, beta, g, nk, dk, nv, dv, ck, vblocks, hist_stride);
  KLAB_CUDA_LAUNCH("conv_norm_bg_slots_kernel");
}

std::string gated_norm_q8_error(int nv, int dv) {
  if (dv % 32 != 0 || dv > 256 || dv <= 0)
    return "dv = " + std::to_string(dv) + ": the q8 epilogue takes a thread per element, so dv a positive multiple of 32 up to 256";
  if (nv <= 0 || std::int64_t(nv) * dv / 32 > q4_gemv::kPreparedStride)
    return "nv dv = " + std::to_string(std::int64_t(nv) * dv) + " activations: the prepared array holds 1 to " +
           std::to_string(32 * q4_gemv::kPreparedStride);
  return "";
}

namespace {
void check_shift(const HistShift& sh, const char* who) {
  if (!sh.hist) return;
  require(sh.xc != nullptr && sh.conv_dim > 0 && sh.ck >= 1 && sh.ck - 1 <= kShiftFrames,
          std::string(who) + ": the history shift needs xc, conv_dim >= 1 and ck in [1, " + std::to_string(kShiftFrames + 1) + "], not conv_dim = " +
              std::to_string(sh.conv_dim) + ", ck = " + std::to_string(sh.ck) + (sh.xc ? "" : ", xc null"));
}
}  // namespace

void gated_norm_q8(const float* o, const float* z, const float* norm_w, float* onn, uint4* xq, int nv, int dv, float eps, cudaStream_t stream,
                   bool pdl, HistShift shift) {
  if (auto why = gated_norm_q8_error(nv, dv); !why.empty()) throw Error("gated_norm_q8: " + why);
  require(o && z && norm_w && onn && xq, "gated_norm_q8: a null buffer");
  check_shift(shift, "gated_norm_q8");
  if (shift.hist)
    launch_maybe_pdl(pdl, pdl ? gated_norm_kernel<true, true, true> : gated_norm_kernel<false, true, true>, dim3(unsigned(nv)), dim3(unsigned(dv)), 0,
                     stream, o, z, norm_w, onn, dv, eps, xq, shift);
  else
    launch_maybe_pdl(pdl, pdl ? gated_norm_kernel<true, true> : gated_norm_kernel<false, true>, dim3(unsigned(nv)), dim3(unsigned(dv)), 0, stream, o, z,
                     norm_w, onn, dv, eps, xq, HistShift{});
  KLAB_CUDA_LAUNCH("gated_norm_kernel<q8>");
}

void gated_norm(const float* o, const float* z, const float* norm_w, float* onn, int nv, int dv, float eps, cudaStream_t stream, bool pdl,
                HistShift shift) {
  check_shift(shift, "gated_norm");
  if (shift.hist)
    launch_maybe_pdl(pdl, pdl ? gated_norm_kernel<true, false, true> : gated_norm_kernel<false, false, true>, dim3(unsigned(nv)),
                     dim3(unsigned(reduce_threads(dv))), 0, stream, o, z, norm_w, onn, dv, eps, nullptr, shift);
  else if (pdl)
    launch_maybe_pdl(true, gated_norm_kernel<true>, dim3(unsigned(nv)), dim3(unsigned(reduce_threads(dv))), 0, stream, o, z, norm_w, onn, dv, eps, nullptr,
                     HistShift{});
  else gated_norm_kernel<false><<<nv, reduce_threads(dv), 0, stream>>>(o, z, norm_w, onn, dv, eps);
  KLAB_CUDA_LAUNCH("gated_norm_kernel");
}

}  // namespace klab::gdn::kernels
