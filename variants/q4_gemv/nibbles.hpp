#pragma once
// Whole-block q4 arithmetic shared by the kernels beyond the seed (lane_block.cu) and their
// bit-models: a block's 32 codes are four little-endian 32-bit words, word w holding columns
// 8w..8w+7 as nibbles 0..7 (klab/ref/q4.hpp: even column in the low nibble).
#include <cstdint>

#include "q4_gemv/policy.hpp"

namespace klab::q4_gemv {

// Signed nibble i (0..7) of a little-endian word: column 8w + i of the block.
KLAB_HD inline int word_nibble(std::uint32_t word, int i) { return static_cast<int>(word << (28 - 4 * i)) >> 28; }

// The value of nibble i as a float, exactly. On the device without I2F (int->float runs at a quarter
// of the FMA rate on sm_90; the guess was that one per weight bounds these kernels): with
// u = the nibble's 4 bits, n = (u ^ 8) - 8, and the f32 whose bits are 0x4B000000 | t is 2^23 + t,
// so bits(0x4B000000 | (u ^ 8)) - (2^23 + 8) = n, exact. Same value as the host's int conversion,
// so the bit-model is unchanged. Measured (H200, 2026-11-30, q4-vs-peers, 17408x5120, rows=4):
// 0.0392 ms with I2F (run of commit f913adf), 0.0393 ms with this (reports/h200/): no gain, so
// the conversion was not what bounds these kernels. Kept: it is exact and no slower.
KLAB_HD inline float nibble_value(std::uint32_t word, int i) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(__uint_as_float(((word >> (4 * i)) & 0xFu) ^ 0x4B000008u), 8388616.0f);
#else
  return float(word_nibble(word, i));
#endif
}

// dot += n4_i * x_i over the 8 nibbles of one word.
KLAB_HD inline float dot8(std::uint32_t word, const float (&x)[8], float dot) {
  for (int i = 0; i < 8; ++i) dot = fma_rn(nibble_value(word, i), x[i], dot);
  return dot;
}

// The offset form of nibble i: v = 1 + (u ^ 8) / 16 in [1, 2), the f32 whose bits are
// 0x3F800000 | ((u ^ 8) << 19), so n = 16 v - 24 exactly. One shift and one LOP3 per weight, no
// subtraction: a block's dot is then 16 * (sum v_i x_i - 1.5 sum x_i), the sum of x shared by
// every row of the block. Not the same rounding as the direct form (a different bit-model).
KLAB_HD inline float nibble_offset_value(std::uint32_t word, int i) {
  const std::uint32_t t = i <= 4 ? word << (19 - 4 * i) : word >> (4 * i - 19);  // nibble i to bits 19..22
  return ref::bits_to_float((t & 0x00780000u) ^ 0x3FC00000u);
}

// a * b rounded once, on either side.
KLAB_HD inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

// The 32 codes of a block (16 bytes) as four little-endian words, on the host.
inline void block_words(const std::uint8_t* bytes, std::uint32_t (&words)[4]) {
  for (int w = 0; w < 4; ++w)
    words[w] = std::uint32_t(bytes[4 * w]) | std::uint32_t(bytes[4 * w + 1]) << 8 | std::uint32_t(bytes[4 * w + 2]) << 16 |
               std::uint32_t(bytes[4 * w + 3]) << 24;
}

// The two dot forms of a block (kernel and model alike), over its four words w and eight nibbles i
// in order, x the block's 32 activations:
//   direct: dot = fma chain of n_i * x_i from 0.
//   offset: a = fma chain of v_i * x_i from 0; sx = add chain of x_i from 0 (once per block, shared
//           by the rows); dot = 16 * fma(-1.5, sx, a).
struct DotDirect {
  static constexpr const char* name = "direct";
  KLAB_HD static float step(std::uint32_t word, int i, float x, float acc) { return fma_rn(nibble_value(word, i), x, acc); }
  KLAB_HD static float finish(float acc, float sx) { return acc; }
  static constexpr bool needs_sx = false;
};
struct DotOffset {
  static constexpr const char* name = "offset";
  KLAB_HD static float step(std::uint32_t word, int i, float x, float acc) { return fma_rn(nibble_offset_value(word, i), x, acc); }
  KLAB_HD static float finish(float acc, float sx) { return mul_rn(16.f, fma_rn(-1.5f, sx, acc)); }
  static constexpr bool needs_sx = true;
};

// A block's dot on the host in form D. `bytes`: the block's 16 code bytes; `x`: its 32 activations.
template <class D>
inline float block_dot_host_as(const std::uint8_t* bytes, const float* x) {
  std::uint32_t words[4];
  block_words(bytes, words);
  float acc = 0.f, sx = 0.f;
  for (int w = 0; w < 4; ++w)
    for (int i = 0; i < 8; ++i) {
      acc = D::step(words[w], i, x[8 * w + i], acc);
      if (D::needs_sx) sx = add_rn(sx, x[8 * w + i]);
    }
  return D::finish(acc, sx);
}

}  // namespace klab::q4_gemv
