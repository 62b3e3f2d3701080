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

// y[row] = W[row] . x for a block of T threads, a multiple of 32 up to 1024, with k / 4 <= kMaxPer T
// (split_row_error's k at T = kThreads): thread t's fma chain over the float4s t, t + T, ... in order,
// a butterfly over the warp, thread 0 adding the warps' sums in warp order. Pdl: dependents let go
// first, the row's loads before griddepcontrol.wait, x after it (split_row.cu's contract).
template <bool Pdl>
__device__ __forceinline__ void body(const float* __restrict__ w, const float* __restrict__ x, float* __restrict__ y, int k, int row, int T = kThreads) {
  if constexpr (Pdl) asm volatile("griddepcontrol.launch_dependents;");
  __shared__ float part[32];
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  const float4* w4 = reinterpret_cast<const float4*>(w + static_cast<std::size_t>(row) * k);
  const int n4 = k / 4;
  float4 a[kMaxPer];
#pragma unroll
  for (int i = 0; i < kMaxPer; ++i) {
    const int j = t + T * i;
    a[i] = j < n4 ? __ldcs(w4 + j) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  // x may be the predecessor's output: from here on.
  if constexpr (Pdl) asm volatile("griddepcontrol.wait;" ::: "memory");
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float acc = 0.f;
#pragma unroll
  for (int i = 0; i < kMaxPer; ++i) {
    const int j = t + T * i;
    if (j < n4) {
      const float4 b = __ldcg(x4 + j);
      acc = fmaf(a[i].x, b.x, acc);
      acc = fmaf(a[i].y, b.y, acc);
      acc = fmaf(a[i].z, b.z, acc);
      acc = fmaf(a[i].w, b.w, acc);
    }
  }
  for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) part[warp] = acc;
  __syncthreads();
  if (t == 0) {
    float s = part[0];
    for (int i = 1; i < T / 32; ++i) s += part[i];
    y[row] = s;
  }
}

}  // namespace klab::f32_gemv::split_row
