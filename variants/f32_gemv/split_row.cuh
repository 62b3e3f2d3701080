#pragma once
// impl=split-row's kernel body (split_row.cu), for another kernel that runs the same rows in blocks of
// its own grid: the GDN step's b|a folded into the input projections' prep launch
// (variants/gdn/gdn_kernels.cu, in_prep_ba). The same code, so the same bits.
#include <cuda_runtime.h>

#include <cstddef>

namespace klab::f32_gemv::split_row {

constexpr int kThreads = 256, kWarps = kThreads / 32, kMaxPer = 8;
constexpr int kMaxK = 4 * kThreads * kMaxPer;  // 8192

// y[row] = W[row] . x for a block of kThreads threads (split_row_error's k). Pdl: dependents let go
// first, the row's loads before griddepcontrol.wait, x after it (split_row.cu's contract).
template <bool Pdl>
__device__ __forceinline__ void body(const float* __restrict__ w, const float* __restrict__ x, float* __restrict__ y, int k, int row) {
  if constexpr (Pdl) asm volatile("griddepcontrol.launch_dependents;");
  __shared__ float part[kWarps];
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  const float4* w4 = reinterpret_cast<const float4*>(w + static_cast<std::size_t>(row) * k);
  const int n4 = k / 4;
  float4 a[kMaxPer];
#pragma unroll
  for (int i = 0; i < kMaxPer; ++i) {
    const int j = t + kThreads * i;
    a[i] = j < n4 ? __ldcs(w4 + j) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  // x may be the predecessor's output: from here on.
  if constexpr (Pdl) asm volatile("griddepcontrol.wait;" ::: "memory");
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float acc = 0.f;
#pragma unroll
  for (int i = 0; i < kMaxPer; ++i) {
    const int j = t + kThreads * i;
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
    for (int i = 1; i < kWarps; ++i) s += part[i];
    y[row] = s;
  }
}

}  // namespace klab::f32_gemv::split_row
