#pragma once
// impl=split-row's kernel body (split_row.cu), for another kernel that runs the same rows in blocks of
// its own grid: the GDN step's b|a folded into the input projections' prep launch
// (variants/gdn/gdn_kernels.cu, in_prep_ba: the same code at kThreads, so the same bits), and q4_gemv's
// f32 rows riding along in a q4 grid (packed.cu, packed_xl_rows_kernel: T = that grid's block size,
// the same order over T threads, so other bits than at 256).
#include <cuda_runtime.h>

#include <cstddef>

namespace klab::f32_gemv::split_row {

constexpr int kThreads = 256, kMaxPer = 8;
constexpr int kMaxK = 4 * kThreads * kMaxPer;  // 8192

// W[row] . x for a block of T threads standing for T Ways threads (T a multiple of 32, T Ways up to 1024),
// with k / 4 <= kMaxPer T Ways (split_row_error's k at T Ways = kThreads): thread t runs the fma chains of
// the threads t, t + T, ..., t + (Ways - 1) T of a block of T Ways, each over the float4s v, v + T Ways, ...
// in order, a butterfly over the warp each (a warp's lanes are those threads' lanes), thread 0 adding the
// T Ways / 32 warps' sums in warp order: the bits of T Ways threads; thread 0 then calls finish(total).
// Pdl: dependents let go first, the row's loads before
// griddepcontrol.wait, x after it (split_row.cu's contract).
// Ways > 1: the GDN step's b|a rows in its conv_norm_bg launch of fewer threads (gdn_kernels.cu, fold=ba-conv),
// in split-row's bits at kThreads.
// Bar > 0: the block's threads 0 .. T - 1 meet at named barrier Bar (bar.sync Bar, T) instead of __syncthreads, for a
// kernel whose other warps do other work meanwhile (q4_gemv's span kernel: its b|a rows by 128 of its consumer threads).
template <bool Pdl, int Ways = 1, int Bar = 0, class Finish>
__device__ __forceinline__ void row_total(const float* __restrict__ w, const float* __restrict__ x, int k, int row, int T, Finish&& finish) {
  if constexpr (Pdl) asm volatile("griddepcontrol.launch_dependents;");
  __shared__ float part[32];
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5, V = T * Ways;
  const float4* w4 = reinterpret_cast<const float4*>(w + static_cast<std::size_t>(row) * k);
  const int n4 = k / 4;
  float4 a[Ways][kMaxPer];
#pragma unroll
  for (int v = 0; v < Ways; ++v)
#pragma unroll
    for (int i = 0; i < kMaxPer; ++i) {
      const int j = t + T * v + V * i;
      a[v][i] = j < n4 ? __ldcs(w4 + j) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  // x may be the predecessor's output: from here on.
  if constexpr (Pdl) asm volatile("griddepcontrol.wait;" ::: "memory");
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float acc[Ways];
#pragma unroll
  for (int v = 0; v < Ways; ++v) {
    acc[v] = 0.f;
#pragma unroll
    for (int i = 0; i < kMaxPer; ++i) {
      const int j = t + T * v + V * i;
      if (j < n4) {
        const float4 b = __ldcg(x4 + j);
        acc[v] = fmaf(a[v][i].x, b.x, acc[v]);
        acc[v] = fmaf(a[v][i].y, b.y, acc[v]);
        acc[v] = fmaf(a[v][i].z, b.z, acc[v]);
        acc[v] = fmaf(a[v][i].w, b.w, acc[v]);
      }
    }
  }
#pragma unroll
  for (int v = 0; v < Ways; ++v)
    for (int off = 16; off > 0; off /= 2) acc[v] += __shfl_xor_sync(0xffffffffu, acc[v], off);
  if (lane == 0)
#pragma unroll
    for (int v = 0; v < Ways; ++v) part[warp + v * (T / 32)] = acc[v];
  if constexpr (Bar == 0) __syncthreads();
  else asm volatile("bar.sync %0, %1;" ::"n"(Bar), "r"(T) : "memory");
  if (t == 0) {
    float s = part[0];
    for (int i = 1; i < V / 32; ++i) s += part[i];
    finish(s);
  }
}

// y[row] = W[row] . x for a block of T threads (row_total at Ways = 1, written by thread 0).
template <bool Pdl>
__device__ __forceinline__ void body(const float* __restrict__ w, const float* __restrict__ x, float* __restrict__ y, int k, int row, int T = kThreads) {
  row_total<Pdl>(w, x, k, row, T, [&](float s) { y[row] = s; });
}

}  // namespace klab::f32_gemv::split_row
