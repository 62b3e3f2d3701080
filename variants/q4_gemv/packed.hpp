#pragma once
// q4_gemv/map=packed: the tiled layout and the three dot forms, written once for the kernels
// (packed.cu) and their CPU bit-models. Everything arithmetic here is KLAB_HD: the device runs these
// functions, the models run the same functions on the host, with the device intrinsics (dp4a, HFMA2,
// f16 conversions) emulated exactly.
//
// ---- Layout: tiles of R rows x 32 blocks (one block of 32 weights per lane of a warp) ----
//   groups G = ceil(m / R), chunks C = ceil(nb / 32), nb = k / 32; rows and blocks past the matrix
//   are zero (never stored / never computed). Tile (g, c) starts at byte (g C + c) T, T = 576 R:
//     codes  at r*512 + l*16   the raw 16 code bytes of row gR + r, block 32c + l (unchanged:
//                              two's complement nibbles, even column low)        (R, 32, 16 B)
//     scales at 512 R + (l R + r)*2   f16 bits of scale(gR + r, 32c + l)         (32, R) u16
//   So a warp's code load for one row reads 512 contiguous bytes (lane l its block's 16), its scale
//   load R*2 contiguous bytes per lane (one LDG.64 for R = 4 instead of four LDG.U16), and a whole
//   group (R rows x k) is one contiguous run of 0.5625 R k bytes.
//   Why the codes keep their raw bytes: with one block per lane the raw 16-byte blocks are already
//   what the lane needs, and every form below takes the nibbles where they lie (the xor with 8 that
//   turns two's complement into the biased code u = n + 8 rides in the LOP3 that masks them).
//
// ---- The forms, per row r and block b (p = the block's contribution to y[r]) ----
//   f32 (exact):  the offset form of nibbles.hpp, p = (16 (sum v_i x_i - 1.5 sum x_i)) * s, v_i =
//                 1 + u_i/16 from one shift and one LOP3: bit for bit what block-per-thread,dot=offset
//                 computes per block, and the same sum over blocks, so the same bits as that kernel.
//   f16x2:        x scaled per block by 2^e (max |x| 2^e in [2^7, 2^8)) and rounded to f16; a pair of
//                 codes becomes the f16x2 of their values n from one LOP3 (the 1024 magic, the bias xor
//                 folded in) and one HFMA2 (-1032, or *1/16 - 72 for high nibbles), then one HFMA2 with
//                 the x pair: p = (h.lo + h.hi) * (s * 2^-e), h the block's f16x2 accumulator.
//   q8-dp4a:      x quantised per block of 32 (q8_1-like: d = amax/127, q = rn(x 127/amax) in
//                 [-127, 127]); the codes masked into bytes u (even columns) and 16 u (odd columns):
//                 one LOP3 + one DP4A per 4 weights; p = float(sum u q - 8 sum q) * (s * d).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

#include "q4_gemv/nibbles.hpp"
#include "q4_gemv/policy.hpp"

namespace klab::q4_gemv::packed {

constexpr int kChunk = 32;  // blocks per tile: one per lane

// ---- layout ----
struct Geometry {
  std::int64_t m = 0, k = 0;
  int R = 4;
  KLAB_HD std::int64_t nb() const { return k / ref::kQ4Block; }
  KLAB_HD std::int64_t groups() const { return (m + R - 1) / R; }
  KLAB_HD std::int64_t chunks() const { return (nb() + kChunk - 1) / kChunk; }
  KLAB_HD std::int64_t tile_bytes() const { return std::int64_t(R) * (kChunk * 16 + kChunk * 2); }
  KLAB_HD std::int64_t bytes() const { return groups() * chunks() * tile_bytes(); }
  // Byte offsets of row i's block b: its 16 code bytes, and its scale (2 bytes, little-endian).
  KLAB_HD std::int64_t code_offset(std::int64_t i, std::int64_t b) const {
    return ((i / R) * chunks() + b / kChunk) * tile_bytes() + (i % R) * (kChunk * 16) + (b % kChunk) * 16;
  }
  KLAB_HD std::int64_t scale_offset(std::int64_t i, std::int64_t b) const {
    return ((i / R) * chunks() + b / kChunk) * tile_bytes() + std::int64_t(R) * kChunk * 16 + ((b % kChunk) * R + i % R) * 2;
  }
};

// The packed tensor of w (zeros where the tiles pad past m or nb).
std::vector<std::uint8_t> pack(const ref::Q4Matrix& w, int R);
// Its inverse: pack(unpack(p)) == p for every tensor pack made; unpack(pack(w)) == w.
ref::Q4Matrix unpack(std::span<const std::uint8_t> packed, std::int64_t m, std::int64_t k, int R);

// ---- exact helpers shared by kernel and model ----
KLAB_HD inline std::uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}
KLAB_HD inline float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
// 2^e as an f32, for e in [-126, 127].
KLAB_HD inline float pow2(int e) { return ref::bits_to_float(std::uint32_t(e + 127) << 23); }

// The largest |x_i| of n values from +0 (a max is exact in any order; inputs are finite): a block's
// (n = 32) and, for xprep=cluster, a thread's share of one (amax4).
template <int N>
KLAB_HD inline float amax_of(const float* x) {
  float a = 0.f;
  for (int i = 0; i < N; ++i) {
#if defined(__CUDA_ARCH__)
    a = fmaxf(a, fabsf(x[i]));
#else
    a = std::fmax(a, std::fabs(x[i]));
#endif
  }
  return a;
}
KLAB_HD inline float block_amax(const float* x) { return amax_of<32>(x); }

// The activations of one block as the kernel keeps them: q_i in [-127, 127], even columns of word w
// in xe[w] (byte j = column 8w + 2j), odd columns in xo[w] (byte j = column 8w + 2j + 1), as the
// masks 0x0F0F0F0F / 0xF0F0F0F0 leave the codes of a word; c = -8 sum q_i (the code bias, once per
// block); d = amax / 127, the dequantisation step.
struct Q8X {
  std::uint32_t xe[4], xo[4];
  int c;
  float d;
};
// Blocks whose amax is below 2^-96 quantise to zero (127/amax would leave f32); their products with
// any finite code are below 2^-75 of the weights' scale.
constexpr float kQ8MinAmax = 0x1p-96f;
// q = rn(x * inv) from one fma: x*inv + 1.5*2^23 rounds once, to an integer (|x*inv| <= 127 < 2^22);
// its low byte is q in two's complement. 1.5*2^23 is even, so ties still go to even q.
KLAB_HD inline int q8_round(float x, float inv) { return int(std::int8_t(float_bits(fma_rn(x, inv, 12582912.0f)) & 0xFFu)); }
// inv = 127/amax and the step d = amax/127 of a block from its amax (both 0 below kQ8MinAmax).
KLAB_HD inline float q8_inv(float amax) { return amax >= kQ8MinAmax ? div_rn(127.0f, amax) : 0.f; }
KLAB_HD inline float q8_step(float amax) { return amax >= kQ8MinAmax ? div_rn(amax, 127.0f) : 0.f; }
// Quantises the block's 32 activations (x[0..31], in column order).
KLAB_HD inline Q8X q8_prep(const float* x) {
  const float amax = block_amax(x);
  const float inv = q8_inv(amax);
  Q8X X{};
  X.d = q8_step(amax);
  int sum = 0;
  for (int w = 0; w < 4; ++w)
    for (int j = 0; j < 4; ++j) {
      const int qe = q8_round(x[8 * w + 2 * j], inv), qo = q8_round(x[8 * w + 2 * j + 1], inv);
      X.xe[w] |= (std::uint32_t(qe) & 0xFFu) << (8 * j);
      X.xo[w] |= (std::uint32_t(qo) & 0xFFu) << (8 * j);
      sum += qe + qo;
    }
  X.c = -8 * sum;
  return X;
}
// xprep=cluster (packed_xc_kernel): q8_prep split over the 8 threads of a block, thread `sub` holding
// columns 4 sub .. 4 sub + 3 (v). amax4 is its share of block_amax (the block's is the max of the 8);
// q8_part its codes where q8_prep puts them: sub = 2 w + h covers columns 8 w + 4 h + i, the even
// ones bytes 2 h and 2 h + 1 of xe[w], the odd ones of xo[w]; so xe[w] = part(2w).e | part(2w+1).e,
// likewise xo, and sum q is the parts' sums added (integers: in any order).
struct Q8Part {
  std::uint32_t e, o;
  int sum;
};
KLAB_HD inline float amax4(const float (&v)[4]) { return amax_of<4>(v); }
KLAB_HD inline Q8Part q8_part(const float (&v)[4], int sub, float inv) {
  const int q0 = q8_round(v[0], inv), q1 = q8_round(v[1], inv), q2 = q8_round(v[2], inv), q3 = q8_round(v[3], inv);
  const int shift = 16 * (sub & 1);
  return {((std::uint32_t(q0) & 0xFFu) | ((std::uint32_t(q2) & 0xFFu) << 8)) << shift,
          ((std::uint32_t(q1) & 0xFFu) | ((std::uint32_t(q3) & 0xFFu) << 8)) << shift, q0 + q1 + q2 + q3};
}
// sum over 4 bytes of a_j * b_j + c: a's bytes unsigned (codes u or 16 u, <= 240), b's signed (q).
KLAB_HD inline int dp4a_us(std::uint32_t a, std::uint32_t b, int c) {
#if defined(__CUDA_ARCH__)
  int d;
  asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
#else
  for (int j = 0; j < 4; ++j) c += int((a >> (8 * j)) & 0xFFu) * int(std::int8_t((b >> (8 * j)) & 0xFFu));
  return c;
#endif
}
// (word ^ XK) & MASK in one LOP3 (the compiler would otherwise share the xor and spend an AND more).
template <std::uint32_t XK, std::uint32_t MASK>
KLAB_HD inline std::uint32_t xor_and(std::uint32_t word) {
#if defined(__CUDA_ARCH__)
  std::uint32_t d;
  // lut: (a ^ b) & c = (0xF0 ^ 0xCC) & 0xAA = 0x28
  asm("lop3.b32 %0, %1, %2, %3, 0x28;" : "=r"(d) : "r"(word), "n"(XK), "n"(MASK));
  return d;
#else
  return (word ^ XK) & MASK;
#endif
}
// (word & MASK) ^ XK in one LOP3 (nvcc otherwise spends two LOP3s with one immediate each).
template <std::uint32_t MASK, std::uint32_t XK>
KLAB_HD inline std::uint32_t and_xor(std::uint32_t word) {
#if defined(__CUDA_ARCH__)
  std::uint32_t d;
  // lut: (a & b) ^ c = (0xF0 & 0xCC) ^ 0xAA = 0x6A
  asm("lop3.b32 %0, %1, %2, %3, 0x6A;" : "=r"(d) : "r"(word), "n"(MASK), "n"(XK));
  return d;
#else
  return (word & MASK) ^ XK;
#endif
}

// ---- f32 ----
// The offset form's v_i of nibbles.hpp (nibble_offset_value: the same value, so the same bits), with
// its mask and magic in one LOP3: one shift, one LOP3 and one FFMA per weight.
KLAB_HD inline float offset_value(std::uint32_t word, int i) {
  const std::uint32_t t = i <= 4 ? word << (19 - 4 * i) : word >> (4 * i - 19);  // nibble i to bits 19..22
  return ref::bits_to_float(and_xor<0x00780000u, 0x3FC00000u>(t));
}

// ---- q8-dp4a ----
// One block of one row: p = float(sum_i n_i q_i) * (s * d), n_i = u_i - 8, over its words j = 0..3:
//   even columns: lo = (w ^ 0x88888888) & 0x0F0F0F0F -> bytes u;     se = c + sum lo_j qe_j
//   odd columns:  hi = (w ^ 0x88888888) & 0xF0F0F0F0 -> bytes 16 u;  so = sum hi_j qo_j (a multiple of 16)
//   sum n q = se + so / 16 (exact: |.| <= 32 * 8 * 127)
KLAB_HD inline void q8_word(std::uint32_t w, std::uint32_t xe, std::uint32_t xo, int& se, int& so) {
  se = dp4a_us(xor_and<0x88888888u, 0x0F0F0F0Fu>(w), xe, se);
  so = dp4a_us(xor_and<0x88888888u, 0xF0F0F0F0u>(w), xo, so);
}
KLAB_HD inline float q8_finish(int se, int so, float s, float d) { return mul_rn(float(se + (so >> 4)), mul_rn(s, d)); }
KLAB_HD inline float q8_block(const std::uint32_t (&w)[4], float s, const Q8X& X) {
  int se = X.c, so = 0;
  for (int j = 0; j < 4; ++j) q8_word(w[j], X.xe[j], X.xo[j], se, so);
  return q8_finish(se, so, s, X.d);
}

// ---- f16x2 ----
// f16 arithmetic on bit patterns. The device uses the hardware (HFMA2 rounds once, keeps
// subnormals); the host emulates it exactly (every f16 is an integer multiple of 2^-24, so a*b + c is
// an integer multiple of 2^-48 below 2^81: __int128 holds it, rounded once to nearest even).
std::uint16_t half_fma_host(std::uint16_t a, std::uint16_t b, std::uint16_t c);
KLAB_HD inline std::uint32_t hfma2(std::uint32_t a, std::uint32_t b, std::uint32_t c) {
#if defined(__CUDA_ARCH__)
  std::uint32_t d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
#else
  return std::uint32_t(half_fma_host(std::uint16_t(a), std::uint16_t(b), std::uint16_t(c))) |
         std::uint32_t(half_fma_host(std::uint16_t(a >> 16), std::uint16_t(b >> 16), std::uint16_t(c >> 16))) << 16;
#endif
}
KLAB_HD inline std::uint16_t half_rn(float f) {
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(f));
#else
  return ref::float_to_half(f);
#endif
}
KLAB_HD inline float half_value(std::uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  return ref::half_to_float_soft(h);
#endif
}

// The activations of one block for the f16x2 form: x~ = f16(x 2^e), e such that max |x~| is in
// [2^7, 2^8) (16 products of |n| <= 8 per f16 lane then stay below 2^15). Word w of the codes gives
// four f16x2 pairs of the codes' values n, each from one LOP3 and one HFMA2, exactly:
//   t0 = (w & 0x000F000F) ^ 0x64086408         = 1024 + u      columns (8w, 8w+4)     n = t0 - 1032
//   t1 = (w & 0x00F000F0) ^ 0x64806480         = 1024 + 16 u   columns (8w+1, 8w+5)   n = t1/16 - 72
//   t2, t3: the same from w >> 8                                 columns (8w+2, 8w+6), (8w+3, 8w+7)
// (u = n + 8: the xor with 8 in the magic turns the two's complement nibble into the biased code.)
// X.h[w][t] holds the matching x~ pair (low half first). f = 2^-e.
// Why not the cheaper subnormal masks (u 2^-24 straight from a LOP3, no conversion, the bias -8 sum x
// once per block): u = n + 8 >= 0, so the f16 lanes summed u x~, biased by 8 sum x~, and their 2^-11
// rounding of that sum came back amplified by the cancellation: max_rel 2.4e-2 on a 1x160 uniform
// problem (the bit-model, tests/cpu/test_q4_packed.cpp). Summing n x~ keeps the f16 sums centred.
struct H2X {
  std::uint32_t h[4][4];
  float f;
};
KLAB_HD inline H2X h2_prep(const float* x) {
  const float amax = block_amax(x);
  // e = 7 - floor(log2 amax): amax 2^e in [2^7, 2^8). Clamped to [-120, 126] (amax below 2^-119,
  // zero included, takes e = 126; 2^e and 2^-e stay normal f32).
  const int E = int((float_bits(amax) >> 23) & 0xFFu) - 127;
  int e = 7 - E;
  e = e < -120 ? -120 : e > 126 ? 126 : e;
  const float sc = pow2(e);
  H2X X{};
  X.f = pow2(-e);
  std::uint16_t hx[32];
  for (int i = 0; i < 32; ++i) hx[i] = half_rn(mul_rn(x[i], sc));
  for (int w = 0; w < 4; ++w)
    for (int t = 0; t < 4; ++t) X.h[w][t] = std::uint32_t(hx[8 * w + t]) | std::uint32_t(hx[8 * w + t + 4]) << 16;
  return X;
}
// f16x2 constants (both halves): 1.0, -1032, 1/16, -72.
constexpr std::uint32_t kH2One = 0x3C003C00u, kH2M1032 = 0xE408E408u, kH2Sixteenth = 0x2C002C00u, kH2M72 = 0xD480D480u;
// The codes' values n of word w's pairs t0..t3, exactly, as f16x2.
KLAB_HD inline void h2_codes(std::uint32_t w, std::uint32_t (&n)[4]) {
  const std::uint32_t w8 = w >> 8;
  n[0] = hfma2(and_xor<0x000F000Fu, 0x64086408u>(w), kH2One, kH2M1032);
  n[1] = hfma2(and_xor<0x00F000F0u, 0x64806480u>(w), kH2Sixteenth, kH2M72);
  n[2] = hfma2(and_xor<0x000F000Fu, 0x64086408u>(w8), kH2One, kH2M1032);
  n[3] = hfma2(and_xor<0x00F000F0u, 0x64806480u>(w8), kH2Sixteenth, kH2M72);
}
// One block of one row: h = HFMA2 chain over words j = 0..3 and pairs t0..t3 from +0;
// p = (h.lo + h.hi) * (s * f).
KLAB_HD inline std::uint32_t h2_word(std::uint32_t w, std::uint32_t x0, std::uint32_t x1, std::uint32_t x2, std::uint32_t x3, std::uint32_t h) {
  std::uint32_t n[4];
  h2_codes(w, n);
  h = hfma2(n[0], x0, h);
  h = hfma2(n[1], x1, h);
  h = hfma2(n[2], x2, h);
  return hfma2(n[3], x3, h);
}
KLAB_HD inline float h2_finish(std::uint32_t h, float s, float f) {
  const float a = add_rn(half_value(std::uint16_t(h)), half_value(std::uint16_t(h >> 16)));
  return mul_rn(a, mul_rn(s, f));
}
KLAB_HD inline float h2_block(const std::uint32_t (&w)[4], float s, const H2X& X) {
  std::uint32_t h = 0;
  for (int j = 0; j < 4; ++j) h = h2_word(w[j], X.h[j][0], X.h[j][1], X.h[j][2], X.h[j][3], h);
  return h2_finish(h, s, X.f);
}

// ---- the forms as tags ----
enum class Form { f32, f16x2, q8 };
KLAB_HD constexpr const char* form_name(Form f) { return f == Form::f32 ? "f32" : f == Form::f16x2 ? "f16x2" : "q8-dp4a"; }
// The max_rel (against the f64 reference) each form is held to; 0 = the race's default 1e-5.
//   f32:   0. Exact products, f32 sums: the bits of block-per-thread,dot=offset.
//   f16x2: 1e-2. x rounded to f16 per block (11 bits relative to the block's max), each product and
//          each of a block's 16 additions per f16 lane rounded to 11 bits. The bit-model measures
//          max_rel 5.7e-3 at worst on the gpu suite's problems (1x160: one row, max|ref| = |y|), 3.5e-4
//          to 1.1e-3 (rms 3.3e-4 to 6.3e-4) at 2048x5120 and 1024x6144 on all four input distributions
//          (tests/cpu/test_q4_packed.cpp).
//   q8:    5e-2. x rounded to int8 per block (step amax/127: up to 0.4% of the block's max; a heavy
//          tail's outlier coarsens its whole block), as llama.cpp's q8_1 activations. The bit-model:
//          3.1e-2 at worst on the gpu suite's problems (5x96 Student-t), 4.7e-4 to 7.4e-3 (rms 3.9e-4
//          to 8.9e-3) at 2048x5120 and 1024x6144; experiments/error_budget.cpp puts q8_0 activations at
//          ~3.8e-3 rms on uniform inputs.
constexpr double form_tolerance(Form f) { return f == Form::f32 ? 0.0 : f == Form::f16x2 ? 1e-2 : 5e-2; }

// One block's contribution p on the host, in form F (the models): `bytes` the block's 16 raw code
// bytes, `s` its scale, `x` its 32 activations.
float block_value_host(Form f, const std::uint8_t* bytes, std::uint16_t s, const float* x);

// The row y = sum of p over the blocks, summed as the kernel does: per chunk of 32 blocks the warp's
// xor-butterfly (blocks past nb give +0), then the chunks in order. (Host; the models.)
std::vector<float> model_as(Form f, const ref::Q4Matrix& w, std::span<const float> x);

}  // namespace klab::q4_gemv::packed
