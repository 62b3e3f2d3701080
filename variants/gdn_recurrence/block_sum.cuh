#pragma once
// The family's block reduction (kernels_seed.cu's q/k norm, kernels_fused.cu's norm=last epilogue): a copy
// of variants/gdn/gdn_kernels.cu's block_sum, the GDN step's (a family does not include another's
// files), so that what it sums comes out in the step's bits.
#include <cuda_runtime.h>

namespace klab::gdn_recurrence {

// The sum of `v` over the block, to every thread, in a fixed order: a butterfly in each warp, then
// warp 0 adds the warp sums the same way. blockDim.x a multiple of 32; `smem` holds 33 floats.
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

}  // namespace klab::gdn_recurrence
