#pragma once
// The q8 x of the grid=groups,xprep=launch|warps,dot=q8-dp4a kernels, written by x's PRODUCER
// instead of by the kernel's own prep launch (Q4Kernel::launch_prepared). Why: that prep launch is a
// hop of its own in every call (its producer completes -> prep reads x, quantises, completes -> the
// main kernel, whose weight loads are in flight, reads the prepared x), and a producer that already
// holds x on chip can write the prepared form in its epilogue instead (GdnDevice::set_norm_q8: the
// gated norm for out_proj; measured on the H200 in reports/h200/run-a9d7934: the same bits, x1.045 per
// token through the 48-layer graph).
//
// Contract, for a producer of x (k activations, k % 32 == 0, k <= 32 * kPreparedStride):
//   - for every block b of 32 activations, write what packed.cu's xprep_kernel<q8> writes: q8_prep's
//     xe, xo, (c, d) at prepared_x()[b], [kPreparedStride + b], [2 kPreparedStride + b]. The warp
//     and quad forms below do exactly that (the same bits: max, q8_round and integer sums are exact
//     in any order; tests/gpu/test_q4.cu compares their words with xprep's, test_gdn_breakdown.cpp the
//     steps that use them with the steps that do not);
//   - the producer runs on the stream of the launch_prepared call, before it; with PDL the main
//     kernel reads the prepared x only after griddepcontrol.wait, so the producer may let its
//     dependents go early, and it must itself wait (griddepcontrol.wait) before writing, because the
//     previous call of any xprep=launch kernel reads the same array;
//   - one array per device: calls on concurrent streams would race (as for xprep=launch itself).
#include <cuda_runtime.h>

#include <cstdint>

#include "q4_gemv/packed.hpp"

namespace klab::q4_gemv {

// Blocks of 32 the array holds per word (packed.cu's kXqStride: k <= 32768).
inline constexpr int kPreparedStride = 1024;

// The array on the current device (cudaGetSymbolAddress of packed.cu's g_xq); throws CudaError.
uint4* prepared_x();

#if defined(__CUDACC__)
// Block b of x, column `lane` held by lane `lane` of a whole warp (all 32 lanes call it, every
// lane's v finite or not): q8_prep of the 32 values, written by lane 0.
__device__ __forceinline__ void store_prepared_q8_warp(uint4* xq, int b, float v, int lane) {
  // block_amax starts from +0 and fmaxf drops a NaN operand: so does this (fmaxf(0, |NaN|) = 0)
  float a = fmaxf(0.f, fabsf(v));
  for (int off = 16; off > 0; off /= 2) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, off));
  const int q = packed::q8_round(v, packed::q8_inv(a));
  int s = q;
  for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
  // byte j of xe[w] is column 8w + 2j, of xo[w] column 8w + 2j + 1: OR over the lanes 2 and 4 apart
  std::uint32_t word = (std::uint32_t(q) & 0xFFu) << (8 * ((lane & 7) >> 1));
  word |= __shfl_xor_sync(0xffffffffu, word, 2);
  word |= __shfl_xor_sync(0xffffffffu, word, 4);  // lane 8w: xe[w]; lane 8w + 1: xo[w]
  std::uint32_t e[4], o[4];
  for (int w = 0; w < 4; ++w) e[w] = __shfl_sync(0xffffffffu, word, 8 * w), o[w] = __shfl_sync(0xffffffffu, word, 8 * w + 1);
  if (lane == 0) {
    xq[b] = make_uint4(e[0], e[1], e[2], e[3]);
    xq[kPreparedStride + b] = make_uint4(o[0], o[1], o[2], o[3]);
    xq[2 * kPreparedStride + b] = make_uint4(std::uint32_t(-8 * s), packed::float_bits(packed::q8_step(a)), 0, 0);
  }
}
// Blocks of x held as 4 consecutive columns a lane, 8 aligned lanes a block (sub = lane & 7 holds
// columns 4 sub .. 4 sub + 3 in v.x .. v.w). All 32 lanes of a warp call it; a group of 8 with b < 0
// writes nothing (its v must still be finite or zero). The words of store_prepared_q8_warp: amax4 and
// q8_part are q8_prep's arithmetic split 8 ways (xprep=cluster's, bit for bit), OR and integer sums
// are exact in any order (tests/gpu/test_q4.cu compares the two).
// Stride: the words' stride (kPreparedStride in g_xq; grid=split-k keeps a chunk's 32 blocks in shared memory).
template <int Stride = kPreparedStride>
__device__ __forceinline__ void store_prepared_q8_quads(uint4* xq, int b, float4 v, int lane) {
  const float vv[4] = {v.x, v.y, v.z, v.w};
  float a = packed::amax4(vv);
  for (int off = 1; off < 8; off *= 2) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, off));
  const int sub = lane & 7, base = lane & ~7;
  const packed::Q8Part p = packed::q8_part(vv, sub, packed::q8_inv(a));
  const std::uint32_t e = p.e | __shfl_xor_sync(0xffffffffu, p.e, 1), o = p.o | __shfl_xor_sync(0xffffffffu, p.o, 1);  // lanes 2w, 2w+1: word w
  int s = p.sum;
  for (int off = 1; off < 8; off *= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
  std::uint32_t E[4], O[4];
  for (int w = 0; w < 4; ++w) E[w] = __shfl_sync(0xffffffffu, e, base + 2 * w), O[w] = __shfl_sync(0xffffffffu, o, base + 2 * w);
  if (sub == 0 && b >= 0) {
    xq[b] = make_uint4(E[0], E[1], E[2], E[3]);
    xq[Stride + b] = make_uint4(O[0], O[1], O[2], O[3]);
    xq[2 * Stride + b] = make_uint4(std::uint32_t(-8 * s), packed::float_bits(packed::q8_step(a)), 0, 0);
  }
}
// The xprep=warps prep kernel's body: thread block `block` of 32 WPB threads writes blocks WPB block ..
// WPB block + WPB - 1 of x (those below nb), a warp each, x read through L2 (xprep=warps: WPB 8,
// xprep=warp: 1).
template <int WPB = 8>
__device__ __forceinline__ void prepare_q8_warps(const float* __restrict__ x, uint4* xq, int nb, int block) {
  const int b = block * WPB + int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
  if (b < nb) store_prepared_q8_warp(xq, b, __ldcg(x + std::size_t(b) * 32 + lane), lane);
}
#endif

}  // namespace klab::q4_gemv
