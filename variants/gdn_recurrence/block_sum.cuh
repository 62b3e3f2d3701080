#pragma once
// The GDN block reduction, one function for both families: the step's q/k norm and gated norm
// (variants/gdn/gdn_kernels.cu) and this family's seed q/k norm (kernels_seed.cu) and norm=last epilogue
// (kernels_fused.cu), so that the epilogue's onn is the gated-norm launch's bits by construction.
#include <cuda_runtime.h>

namespace klab::gdn_recurrence {

// The sum of `v` over the block, returned to every thread, in a fixed order: a butterfly (xor 16, 8,
// 4, 2, 1) inside each warp, then warp 0 adds the warp sums the same way (lanes past the last warp
// add 0). A butterfly hands every lane the bitwise same value (each level adds the same two
// operands, only swapped, and a + b == b + a in IEEE arithmetic). blockDim.x must be a multiple of
// 32 and at most 1024; `smem` holds 33 floats.
__device__ __forceinline__ float block_sum(float v, float* smem) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float t = lane < warps ? smem[lane] : 0.f;
    for (int off = 16; off > 0; off /= 2) t += __shfl_xor_sync(0xffffffffu, t, off);
    if (lane == 0) smem[32] = t;
  }
  __syncthreads();
  return smem[32];
}

// The block size of the step's reductions over n elements (its q/k norm, gated norm and conv_norm_bg):
// a multiple of 32, at most 256 (each thread strides over the rest), at least one warp. The order of a
// block_sum over n elements depends on it, so prep=conv's norm (block_sum_in_warp) takes it from here.
__host__ __device__ constexpr int reduce_threads(int n) {
  const int t = (n + 31) / 32 * 32;
  return t < 32 ? 32 : t > 256 ? 256 : t;
}

// block_sum's sum over T threads (T a multiple of 32, at most 1024) computed by ONE warp, thread t's
// value being part(t): lane l stands for threads l, 32 + l, ...; each such warp's butterfly as
// block_sum's first level, then the butterfly over the warp sums (lanes past the last add 0) as
// block_sum's warp 0 does. The same operands in the same order: the bits of block_sum over T threads
// whose thread t holds part(t), without shared memory or a barrier. Returned to every lane.
template <class Part>
__device__ __forceinline__ float block_sum_in_warp(int T, Part part) {
  const int lane = threadIdx.x % 32, warps = T / 32;
  float t = 0.f;
  for (int w = 0; w < warps; ++w) {
    float v = part(32 * w + lane);
    for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (lane == w) t = v;
  }
  for (int off = 16; off > 0; off /= 2) t += __shfl_xor_sync(0xffffffffu, t, off);
  return t;
}

}  // namespace klab::gdn_recurrence
