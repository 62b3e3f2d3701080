#pragma once
// The raw-q4 weight format (seed-digest.md section 4), its quantiser, the f16/bf16 conversions it
// needs, and the CPU truth for y = dequant(W) x accumulated in f64.
//
// Format of an (m x k) matrix W, k a multiple of 32:
//   value(i, j) = n4(i, j) * scale(i, j / 32)          exactly representable in f32 (and f64)
//   n4     int4, two's complement, in [-8, 7]
//   scale  IEEE binary16 (f16), one per block of 32 consecutive weights along a row
// Byte layout (row-major, no padding, nothing interleaved between rows):
//   codes  (m, k/2) bytes: byte i*(k/2) + j/2 holds column j; even j in the LOW nibble (bits 0-3),
//          odd j in the HIGH nibble (bits 4-7). A block of 32 weights is 16 consecutive bytes.
//   scales (m, k/32) uint16: the f16 bit pattern of scale(i, b) at i*(k/32) + b.
//   0.5625 bytes per weight with the scales.
//
// Quantisation rule (q4_quantize), per block of 32 weights w_0..w_31 of one row:
//   amax  = max |w_t|                                            (computed in f32)
//   scale = f16(amax / 7), f32 division, rounded to nearest-even f16; saturated to 65504 (the
//           largest finite f16) when amax / 7 would overflow, so weights beyond 7 * 65504 are clipped
//   n4_t  = clamp(round(w_t / scale), -8, 7), the quotient in f64, round = nearest, ties away from 0
//   a zero scale (amax == 0, or amax / 7 below half the smallest f16 subnormal) gives n4_t = 0.
// Because |scale - amax/7| <= 2^-11 * amax/7 for a normal f16, the codes stay in [-7, 7]; -8 appears
// only when a subnormal scale rounded down by more than 7% (tiny blocks) and a negative extreme was
// clamped. +0 and -0 weights both give n4 = 0 (int4 has one zero). Non-finite weights are refused.
//
// This header is CUDA-free C++ except the KLAB_HD functions, which nvcc compiles for both host and
// device so the kernels and the CPU bit-models share one implementation.
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#ifndef KLAB_HD
#if defined(__CUDACC__)
#define KLAB_HD __host__ __device__
#else
#define KLAB_HD
#endif
#endif

namespace klab::ref {

constexpr int kQ4Block = 32;  // weights per f16 scale, along a row

// The f32 whose bit pattern is `bits`, on host and device.
KLAB_HD inline float bits_to_float(std::uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

// The int4 code of column j from the byte holding columns (j & ~1, j | 1): sign-extended.
KLAB_HD inline int q4_nibble(std::uint8_t byte, int j) {
  const int nib = (j & 1) ? (byte >> 4) : (byte & 0xF);
  // nib in [0, 15] -> [-8, 7]: two's complement of 4 bits.
  return nib - ((nib & 0x8) << 1);
}

// The seed's software f16 -> f32 conversion: bit manipulation, with a normalisation loop for
// subnormal halves. Exact for every finite half and for +-inf. NaN: the 10-bit payload is shifted
// into the top of the f32 mantissa unchanged (a signalling NaN stays signalling); hardware
// conversions may set the quiet bit instead, the one place the two may differ (with GCC 12 on
// x86-64 the 1022 signalling-NaN halves differ, the 1024 quiet ones do not; both sides stay NaN).
// Scales are never NaN in this format, so no kernel result depends on that edge.
KLAB_HD inline float half_to_float_soft(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1Fu;
  std::uint32_t mant = h & 0x3FFu;
  std::uint32_t bits;
  if (exp == 0x1F) {
    // inf (mant == 0) or NaN (payload kept).
    bits = sign | 0x7F800000u | (mant << 13);
  } else if (exp != 0) {
    // normal: rebias 15 -> 127.
    bits = sign | ((exp + (127 - 15)) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;  // +-0
  } else {
    // subnormal: value = mant * 2^-24. Shift the leading 1 up to the implicit-bit position (bit 10),
    // lowering the exponent once per shift; a half subnormal is always a normal f32.
    exp = 127 - 15 + 1;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3FFu) << 13);
  }
  return bits_to_float(bits);
}

// The compiler's f16 -> f32 conversion on the host (_Float16; libgcc or F16C instructions): the
// "hardware" conversion the software one is checked against on the CPU. Device code uses
// __half2float instead.
float half_to_float_compiler(std::uint16_t h);
// f32 -> f16, round to nearest even (the compiler's conversion); overflow gives +-inf.
std::uint16_t float_to_half(float f);
// bf16 <-> f32. bf16 is the top half of an f32; the narrowing rounds to nearest even (NaN stays NaN).
float bf16_to_float(std::uint16_t b);
std::uint16_t float_to_bf16(float f);
// Whole arrays, element by element as the two above; and f rounded to the nearest bf16 as an f32 (the
// value a bf16 store keeps).
std::vector<std::uint16_t> to_bf16(std::span<const float> x);
std::vector<float> from_bf16(std::span<const std::uint16_t> b);
inline float round_bf16(float f) { return bf16_to_float(float_to_bf16(f)); }

struct Q4Matrix {
  std::int64_t m = 0, k = 0;
  std::vector<std::uint8_t> codes;    // (m, k/2), layout above
  std::vector<std::uint16_t> scales;  // (m, k/32) f16 bits
  std::int64_t blocks_per_row() const { return k / kQ4Block; }
  // Throws std::invalid_argument when the sizes do not fit (m, k) or k is not a multiple of 32.
  void check() const;
  int code(std::int64_t i, std::int64_t j) const { return q4_nibble(codes[std::size_t(i * (k / 2) + j / 2)], int(j & 1)); }
  float scale(std::int64_t i, std::int64_t b) const { return half_to_float_soft(scales[std::size_t(i * (k / kQ4Block) + b)]); }
  // value(i, j) = n4 * scale, exact in f32.
  float value(std::int64_t i, std::int64_t j) const { return float(code(i, j)) * scale(i, j / kQ4Block); }
};

// Empty string when (m, k) can hold a q4 matrix, else the reason (non-positive, k % 32 != 0).
std::string q4_shape_error(std::int64_t m, std::int64_t k);

// Quantises row-major W (m x k) by the rule above. Throws std::invalid_argument on a bad shape, a
// size mismatch or a non-finite weight (naming its row and column).
Q4Matrix q4_quantize(std::span<const float> w, std::int64_t m, std::int64_t k);
// The same from f16 or bf16 tensors (bit patterns): each weight converted to f32 exactly, then as above.
Q4Matrix q4_quantize_f16(std::span<const std::uint16_t> w, std::int64_t m, std::int64_t k);
Q4Matrix q4_quantize_bf16(std::span<const std::uint16_t> w, std::int64_t m, std::int64_t k);

// dequant(W) as row-major f32 (exact).
std::vector<float> q4_dequantize(const Q4Matrix& q);

// y = dequant(W) x, every product and sum in f64 (Eigen). Throws std::invalid_argument on mismatch.
std::vector<double> q4_gemv_f64(const Q4Matrix& q, std::span<const float> x);
// The same in plain loops (the reference's own check).
std::vector<double> q4_gemv_naive(const Q4Matrix& q, std::span<const float> x);

}  // namespace klab::ref
