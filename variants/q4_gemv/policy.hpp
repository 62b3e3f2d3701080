#pragma once
// The q4_gemv family's four policy axes and the arithmetic core they share. Compiled by nvcc (the
// kernels, kernel.cu) and by the host compiler (the CPU bit-models, model.cpp): every arithmetic
// step of a variant is written once here, as a KLAB_HD function, and used by both.
//
//   axis    values                  what changes
//   scale   lane0-shfl | per-lane   where the block's f16 scale comes from (same value)
//   chains  1 | 4                   independent f32 accumulators per lane (changes the sum order)
//   f16     soft | hard             how the scale's f16 bits become f32 (same value, non-NaN scales)
//   rows    1 | 4                   rows per warp; x loaded once per block for all of them
//
// Only `chains` changes arithmetic; the other three must leave every bit of y unchanged.
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#else
#include <cmath>
#endif

#include "klab/ref/q4.hpp"

namespace klab::q4_gemv {

// ---- scale read ----
struct ScaleLane0Shfl {
  static constexpr const char* value = "lane0-shfl";
  static constexpr bool per_lane = false;
};
struct ScalePerLane {
  static constexpr const char* value = "per-lane";
  static constexpr bool per_lane = true;
};

// ---- accumulator chains ----
template <int N>
struct Chains {
  static_assert(N == 1 || N == 2 || N == 4, "the block loop is unrolled by 4: chains must divide 4");
  static constexpr int n = N;
  static constexpr const char* value = N == 1 ? "1" : N == 2 ? "2" : "4";
};

// ---- f16 -> f32 conversion ----
struct F16Soft {
  static constexpr const char* value = "soft";
  KLAB_HD static float convert(std::uint16_t h) { return ref::half_to_float_soft(h); }
};
struct F16Hard {
  static constexpr const char* value = "hard";
  KLAB_HD static float convert(std::uint16_t h) {
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(h));
#else
    // The host's hardware-equivalent conversion (the compiler's); equal to __half2float on every
    // non-NaN half (tests/cpu/test_q4_format.cpp and tests/gpu/test_q4.cu check all 65536).
    return ref::half_to_float_compiler(h);
#endif
  }
};

// ---- rows per warp ----
template <int N>
struct Rows {
  static_assert(N >= 1 && N <= 8, "rows per warp: 1..8");
  static constexpr int n = N;
  static constexpr const char* value = N == 1 ? "1" : N == 2 ? "2" : N == 4 ? "4" : "8";
};

template <class ScaleT, class ChainsT, class F16T, class RowsT>
struct Policy {
  using Scale = ScaleT;
  using F16 = F16T;
  static constexpr int chains = ChainsT::n;
  static constexpr int rows = RowsT::n;
  static std::vector<std::pair<std::string, std::string>> axes() {
    return {{"scale", ScaleT::value}, {"chains", ChainsT::value}, {"f16", F16T::value}, {"rows", RowsT::value}};
  }
};

// Calls f.template operator()<P>() for each of the 16 registered policies, in a fixed order.
template <class F>
void for_each_policy(F&& f) {
  auto rows = [&]<class S, class C, class H>() {
    f.template operator()<Policy<S, C, H, Rows<1>>>();
    f.template operator()<Policy<S, C, H, Rows<4>>>();
  };
  auto f16 = [&]<class S, class C>() {
    rows.template operator()<S, C, F16Soft>();
    rows.template operator()<S, C, F16Hard>();
  };
  auto chains = [&]<class S>() {
    f16.template operator()<S, Chains<1>>();
    f16.template operator()<S, Chains<4>>();
  };
  chains.template operator()<ScaleLane0Shfl>();
  chains.template operator()<ScalePerLane>();
}

// ---- the arithmetic core ----
// Lane-to-element mapping (kernel and model alike): for block b of a row, lane l takes column
// j = 32 b + l: it reads the code byte holding j (byte 16 b + l/2; lanes 2t and 2t+1 share a byte,
// low and high nibble), the block's scale, and x[j]. One block per warp step; the 32 lanes cover
// the block's 32 weights. Block b feeds chain b % chains of its lane.

// a*b + c rounded once, on either side (nvcc may not contract or split it differently).
KLAB_HD inline float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
KLAB_HD inline float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

// acc + (n4 * s) * x: the product n4 * s is exact in f32 (a 4-bit integer times an 11-bit
// significand), so only the fma rounds.
KLAB_HD inline float mac(std::uint8_t byte, int lane, float s, float x, float acc) {
  const float w = float(ref::q4_nibble(byte, lane)) * s;
  return fma_rn(w, x, acc);
}

// The chains of one lane summed in a fixed order: ((c0 + c1) + (c2 + c3)) for 4, c0 + c1 for 2.
template <int C>
KLAB_HD inline float combine(const float (&acc)[C]) {
  if constexpr (C == 1) return acc[0];
  else if constexpr (C == 2) return add_rn(acc[0], acc[1]);
  else return add_rn(add_rn(acc[0], acc[1]), add_rn(acc[2], acc[3]));
}

// The warp's butterfly (kernel and model): at offset o = 16, 8, 4, 2, 1 lane l computes
// v_l + v_{l^o}. f32 addition is commutative, so both lanes of a pair get the same bits and every
// lane ends with the same total; lane 0's is stored.
// The butterfly on the host (the models): 32 lane values in, lane 0's total out.
inline float butterfly_host(std::array<float, 32> t) {
  for (int o = 16; o > 0; o /= 2) {
    std::array<float, 32> next{};
    for (int l = 0; l < 32; ++l) next[l] = add_rn(t[l], t[l ^ o]);  // v_l + v_{l^o}, as __shfl_xor_sync
    t = next;
  }
  return t[0];
}

}  // namespace klab::q4_gemv
