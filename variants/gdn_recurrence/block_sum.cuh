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

}  // namespace klab::gdn_recurrence
