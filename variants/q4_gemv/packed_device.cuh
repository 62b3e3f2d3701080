#pragma once
// map=packed's device pieces that another family's kernels share (CUDA only, include from .cu
// files): a lane's R scales in one load, a code word of a 16-byte block, and the transposed
// xor-butterfly that sums R rows over a warp. packed.cu's kernels use exactly these (they were
// defined there until q4_gemm needed them: moved unchanged, every kernel's SASS identical, cuobjdump
// sm_90, nvcc 13.0, 2026-12-01). q4_gemm (variants/q4_gemm/gemm.cu) calls them so that its column j
// is bit for bit packed_xl_kernel<q8>'s y for x_j.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "q4_gemv/packed.hpp"

namespace klab::q4_gemv::packed {

constexpr unsigned kFull = 0xFFFFFFFFu;

// A lane's R scales in one load: R * 2 bytes (R = 16: two 16-byte loads).
template <int R>
struct Scales {
  using V = std::conditional_t<R == 1, unsigned short, std::conditional_t<R == 2, unsigned, std::conditional_t<R == 4, uint2, uint4>>>;
  V v;
  __device__ void load(const std::uint8_t* p) { v = __ldcs(reinterpret_cast<const V*>(p)); }
  __device__ std::uint16_t get(int r) const { return reinterpret_cast<const std::uint16_t*>(&v)[r]; }
};
template <>
struct Scales<16> {
  uint4 v[2];
  __device__ void load(const std::uint8_t* p) {
    v[0] = __ldcs(reinterpret_cast<const uint4*>(p));
    v[1] = __ldcs(reinterpret_cast<const uint4*>(p) + 1);
  }
  __device__ std::uint16_t get(int r) const { return reinterpret_cast<const std::uint16_t*>(v)[r]; }
};

// Code word w (0..3) of a block's 16 bytes.
__device__ __forceinline__ std::uint32_t word_of(const uint4& q, int w) { return w == 0 ? q.x : w == 1 ? q.y : w == 2 ? q.z : q.w; }

// The transposed xor-butterfly: at offsets 16, 8, .. (while a lane carries more than one row) a lane
// keeps half its rows (the upper half where its offset bit is set) and adds its partner's values of
// them; then the plain butterfly over the remaining offsets. Row r ends, summed over the warp, in
// lane r * 32 / R (returned in every lane; meaningful there).
template <int R>
__device__ __forceinline__ float warp_rows(float (&v)[R], int lane) {
  int o = 16;
  for (int n = R; n > 1; n /= 2, o /= 2) {
    const bool hi = (lane & o) != 0;
    for (int i = 0; i < n / 2; ++i) {
      const float send = hi ? v[i] : v[i + n / 2];
      const float keep = hi ? v[i + n / 2] : v[i];
      v[i] = add_rn(keep, __shfl_xor_sync(kFull, send, o));
    }
  }
  float t = v[0];
  for (; o > 0; o /= 2) t = add_rn(t, __shfl_xor_sync(kFull, t, o));
  return t;
}

}  // namespace klab::q4_gemv::packed
