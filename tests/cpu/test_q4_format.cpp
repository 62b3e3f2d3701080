// The raw-q4 format (klab/ref/q4.hpp): the f16/bf16 conversions, the quantisation rule and byte
// layout on hand-worked blocks, refusals, and the f64 reference against plain loops.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "klab/problem.hpp"
#include "klab/ref/gemv.hpp"
#include "klab/ref/q4.hpp"

using namespace klab;

namespace {
std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }
bool is_nan_half(std::uint16_t h) { return (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0; }
// A 1 x 32 matrix from one block of weights.
ref::Q4Matrix one_block(const std::vector<float>& w) {
  REQUIRE(w.size() == 32);
  return ref::q4_quantize(w, 1, 32);
}
}  // namespace

TEST_CASE("software f16->f32 equals the compiler's conversion on all 65536 halves, NaN payloads aside") {
  int mismatched = 0, nans = 0, nan_payload_differs = 0;
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float soft = ref::half_to_float_soft(std::uint16_t(h));
    const float hw = ref::half_to_float_compiler(std::uint16_t(h));
    if (is_nan_half(std::uint16_t(h))) {
      ++nans;
      // The documented edge: both are NaN (same sign), the payload may differ (quiet bit).
      CHECK(std::isnan(soft));
      CHECK(std::isnan(hw));
      CHECK(std::signbit(soft) == std::signbit(hw));
      nan_payload_differs += bits(soft) != bits(hw);
      // soft keeps the 10-bit payload in the top of the f32 mantissa, unchanged.
      CHECK(((bits(soft) >> 13) & 0x3FFu) == (h & 0x3FFu));
    } else {
      mismatched += bits(soft) != bits(hw);
    }
  }
  CHECK(nans == 2 * 1023 * 1);  // exponent all ones, payload 1..1023, two signs
  CHECK(mismatched == 0);
  MESSAGE("NaN halves whose f32 bits differ between soft and the compiler's conversion: " << nan_payload_differs << " of " << nans);
}

TEST_CASE("software f16->f32 on hand-checked values, subnormals included") {
  CHECK(ref::half_to_float_soft(0x3C00) == 1.0f);
  CHECK(ref::half_to_float_soft(0xC000) == -2.0f);
  CHECK(ref::half_to_float_soft(0x3555) == 0.333251953125f);
  CHECK(ref::half_to_float_soft(0x7BFF) == 65504.0f);                 // largest finite
  CHECK(ref::half_to_float_soft(0x0400) == std::ldexp(1.0f, -14));    // smallest normal
  CHECK(ref::half_to_float_soft(0x0001) == std::ldexp(1.0f, -24));    // smallest subnormal
  CHECK(ref::half_to_float_soft(0x03FF) == 1023 * std::ldexp(1.0f, -24));  // largest subnormal
  CHECK(ref::half_to_float_soft(0x8001) == -std::ldexp(1.0f, -24));
  CHECK(bits(ref::half_to_float_soft(0x0000)) == 0x00000000u);
  CHECK(bits(ref::half_to_float_soft(0x8000)) == 0x80000000u);  // -0 keeps its sign
  CHECK(ref::half_to_float_soft(0x7C00) == std::numeric_limits<float>::infinity());
  CHECK(ref::half_to_float_soft(0xFC00) == -std::numeric_limits<float>::infinity());
}

TEST_CASE("f32->f16 rounds to nearest even and round-trips every non-NaN half") {
  CHECK(ref::float_to_half(1.0f) == 0x3C00);
  CHECK(ref::float_to_half(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);      // tie -> even
  CHECK(ref::float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3C02);  // tie -> even (up)
  CHECK(ref::float_to_half(65519.0f) == 0x7BFF);
  CHECK(ref::float_to_half(65520.0f) == 0x7C00);  // overflow -> inf
  CHECK(ref::float_to_half(std::ldexp(1.0f, -25)) == 0x0000);  // half of the smallest subnormal: tie -> 0
  CHECK(ref::float_to_half(std::ldexp(1.5f, -25)) == 0x0001);
  int bad = 0;
  for (std::uint32_t h = 0; h < 65536; ++h)
    if (!is_nan_half(std::uint16_t(h))) bad += ref::float_to_half(ref::half_to_float_soft(std::uint16_t(h))) != h;
  CHECK(bad == 0);
}

TEST_CASE("bf16 conversions") {
  CHECK(ref::bf16_to_float(0x3F80) == 1.0f);
  CHECK(ref::bf16_to_float(0xC040) == -3.0f);
  CHECK(ref::float_to_bf16(1.0f) == 0x3F80);
  CHECK(ref::float_to_bf16(std::bit_cast<float>(0x3F808000u)) == 0x3F80);  // tie -> even (down)
  CHECK(ref::float_to_bf16(std::bit_cast<float>(0x3F818000u)) == 0x3F82);  // tie -> even (up)
  CHECK(ref::float_to_bf16(std::bit_cast<float>(0x3F808001u)) == 0x3F81);  // above the tie
  CHECK(std::isnan(ref::bf16_to_float(ref::float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(std::isnan(ref::bf16_to_float(ref::float_to_bf16(std::bit_cast<float>(0x7F800001u)))));  // a payload in the low bits only
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const float f = ref::bf16_to_float(std::uint16_t(b));
    if (!std::isnan(f)) REQUIRE(ref::float_to_bf16(f) == b);
  }
  // The array forms and round_bf16 are the scalar conversions element by element.
  const std::vector<float> xs{1.0f, std::bit_cast<float>(0x3F808000u), std::bit_cast<float>(0x3F818000u), -3.0f, 0.0f};
  const auto bs = ref::to_bf16(xs);
  REQUIRE(bs.size() == xs.size());
  const auto back = ref::from_bf16(bs);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    CHECK(bs[i] == ref::float_to_bf16(xs[i]));
    CHECK(back[i] == ref::bf16_to_float(bs[i]));
    CHECK(ref::round_bf16(xs[i]) == back[i]);
  }
  CHECK(back[1] == 1.0f);  // the tie went down to even
}

TEST_CASE("q4 quantisation: scale = f16(amax/7), codes = round(w/scale), byte layout") {
  SUBCASE("amax 7: scale 1, codes round half away from zero") {
    std::vector<float> w(32, 0.f);
    const float v[] = {7.f, -7.f, 0.5f, -0.5f, 1.49f, 2.5f, -2.5f, 3.7f, -0.f, 6.5f};
    std::copy(std::begin(v), std::end(v), w.begin());
    auto q = one_block(w);
    CHECK(q.scales[0] == 0x3C00);
    const int want[] = {7, -7, 1, -1, 1, 3, -3, 4, 0, 7};
    for (int j = 0; j < 10; ++j) {
      CAPTURE(j);
      CHECK(q.code(0, j) == want[j]);
    }
    // Even column low nibble, odd column high: (7, -7) -> 0x7 | 0x9 << 4; (0.5, -0.5) -> 0x1 | 0xF << 4.
    CHECK(q.codes[0] == 0x97);
    CHECK(q.codes[1] == 0xF1);
    CHECK(q.codes.size() == 16);
    CHECK(q.value(0, 7) == 4.f);
  }
  SUBCASE("amax 14: scale 2") {
    std::vector<float> w(32, 1.f);
    w[3] = -14.f;
    w[4] = -3.f;
    auto q = one_block(w);
    CHECK(q.scales[0] == 0x4000);
    CHECK(q.code(0, 3) == -7);
    CHECK(q.code(0, 4) == -2);  // -1.5 -> -2
    CHECK(q.code(0, 0) == 1);   // 0.5 -> 1
  }
  SUBCASE("a zero block, +0 and -0 weights: scale 0, codes 0") {
    std::vector<float> w(32, 0.f);
    w[1] = -0.f;
    auto q = one_block(w);
    CHECK(q.scales[0] == 0x0000);
    for (auto c : q.codes) CHECK(c == 0);
  }
  SUBCASE("a tiny block underflows to a zero scale") {
    std::vector<float> w(32, 1e-9f);
    auto q = one_block(w);
    CHECK(q.scales[0] == 0x0000);
    for (auto c : q.codes) CHECK(c == 0);
  }
  SUBCASE("a subnormal scale") {
    std::vector<float> w(32, 0.f);
    w[0] = 7 * std::ldexp(1.f, -20);  // scale 2^-20 = 16 * 2^-24: subnormal half 0x0010
    w[1] = -std::ldexp(1.f, -20);
    auto q = one_block(w);
    CHECK(q.scales[0] == 0x0010);
    CHECK(q.code(0, 0) == 7);
    CHECK(q.code(0, 1) == -1);
  }
  SUBCASE("a scale rounded down to the smallest subnormal: -8 appears by clamping") {
    std::vector<float> w(32, 0.f);
    w[0] = -9.8f * std::ldexp(1.f, -24);  // amax/7 = 1.4 * 2^-24 -> f16 2^-24
    w[1] = 9.8f * std::ldexp(1.f, -24);
    auto q = one_block(w);
    CHECK(q.scales[0] == 0x0001);
    CHECK(q.code(0, 0) == -8);
    CHECK(q.code(0, 1) == 7);
  }
  SUBCASE("the largest scale, and clipping beyond it") {
    std::vector<float> w(32, 0.f);
    w[0] = 7 * 65504.f;
    w[1] = -65504.f;
    auto q = one_block(w);
    CHECK(q.scales[0] == 0x7BFF);
    CHECK(q.code(0, 0) == 7);
    CHECK(q.code(0, 1) == -1);
    w[0] = 1e6f;  // amax/7 rounds to f16 inf: saturated to 65504, the extremes clipped
    w[1] = -1e6f;
    q = one_block(w);
    CHECK(q.scales[0] == 0x7BFF);
    CHECK(q.code(0, 0) == 7);
    CHECK(q.code(0, 1) == -8);
  }
}

TEST_CASE("q4 quantisation error is at most half a scale step per weight, and rows/blocks do not mix") {
  for (Dist d : {Dist::uniform, Dist::student_t, Dist::outlier}) {
    const std::int64_t m = 7, k = 96;
    auto w = generate(d, std::size_t(m * k), 5, 0);
    auto q = ref::q4_quantize(w, m, k);
    REQUIRE(q.codes.size() == std::size_t(m * k / 2));
    REQUIRE(q.scales.size() == std::size_t(m * k / 32));
    auto dq = ref::q4_dequantize(q);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < k; ++j) {
        const float s = q.scale(i, j / 32);
        float amax = 0;
        for (std::int64_t t = j / 32 * 32; t < j / 32 * 32 + 32; ++t) amax = std::max(amax, std::abs(w[std::size_t(i * k + t)]));
        CAPTURE(i);
        CAPTURE(j);
        // the scale is amax/7 to f16 precision (2^-11 relative), for this block only
        CHECK(std::abs(double(s) - amax / 7.0) <= amax / 7.0 * (std::ldexp(1.0, -11) + 1e-7));  // + the f32 division's rounding
        CHECK(std::abs(double(dq[std::size_t(i * k + j)]) - w[std::size_t(i * k + j)]) <= 0.5 * s * (1 + 1e-6));
        CHECK(q.code(i, j) >= -7);
        CHECK(q.code(i, j) <= 7);
      }
  }
}

TEST_CASE("quantising f16 and bf16 tensors equals quantising their f32 values") {
  const std::int64_t m = 5, k = 64;
  auto w = generate(Dist::student_t, std::size_t(m * k), 9, 0);
  std::vector<std::uint16_t> h(w.size()), b(w.size());
  std::vector<float> hf(w.size()), bf(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) {
    h[i] = ref::float_to_half(w[i]);
    hf[i] = ref::half_to_float_soft(h[i]);
    b[i] = ref::float_to_bf16(w[i]);
    bf[i] = ref::bf16_to_float(b[i]);
  }
  auto qh = ref::q4_quantize_f16(h, m, k), qhf = ref::q4_quantize(hf, m, k);
  auto qb = ref::q4_quantize_bf16(b, m, k), qbf = ref::q4_quantize(bf, m, k);
  CHECK(qh.codes == qhf.codes);
  CHECK(qh.scales == qhf.scales);
  CHECK(qb.codes == qbf.codes);
  CHECK(qb.scales == qbf.scales);
}

TEST_CASE("q4 quantisation refuses bad shapes, mismatched buffers and non-finite weights, saying why") {
  auto says = [](auto f, const char* what) {
    try {
      f();
      FAIL("no error");
    } catch (const std::invalid_argument& e) {
      CAPTURE(e.what());
      CHECK(std::string(e.what()).find(what) != std::string::npos);
    }
  };
  std::vector<float> w(66, 0.f);
  says([&] { ref::q4_quantize(w, 2, 33); }, "not a multiple of 32");
  says([&] { ref::q4_quantize(std::span<const float>(), 0, 32); }, "empty shape");
  says([&] { ref::q4_quantize(w, 1, 0); }, "empty shape");
  says([&] { ref::q4_quantize(w, 2, 32); }, "66 elements");
  std::vector<float> bad(64, 1.f);
  bad[40] = std::numeric_limits<float>::quiet_NaN();
  says([&] { ref::q4_quantize(bad, 2, 32); }, "(1, 8) is not finite");
  bad[40] = std::numeric_limits<float>::infinity();
  says([&] { ref::q4_quantize(bad, 2, 32); }, "not finite");
  std::vector<std::uint16_t> h(32, 0x7E00);  // f16 NaN
  says([&] { ref::q4_quantize_f16(h, 1, 32); }, "not finite");
  ref::Q4Matrix q = ref::q4_quantize(std::vector<float>(64, 1.f), 2, 32);
  q.scales.pop_back();
  says([&] { q.check(); }, "expected");
  std::vector<float> x(31);
  auto good = ref::q4_quantize(std::vector<float>(64, 1.f), 2, 32);
  says([&] { ref::q4_gemv_f64(good, x); }, "x has 31 elements");
  says([&] { ref::q4_gemv_naive(good, x); }, "x has 31 elements");
}

TEST_CASE("q4 f64 reference: a hand-worked row, plain loops, and the f32 gemv reference on dequant(W)") {
  // codes all 1, scale 0.5, x = 1..32: y = 0.5 * (1 + ... + 32) = 264.
  ref::Q4Matrix q;
  q.m = 1;
  q.k = 32;
  q.codes.assign(16, 0x11);
  q.scales.assign(1, 0x3800);
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = float(j + 1);
  CHECK(ref::q4_gemv_f64(q, x)[0] == 264.0);

  for (auto [m, k] : std::vector<std::pair<int, int>>{{1, 32}, {5, 96}, {33, 160}, {300, 1024}}) {
    auto w = generate(Dist::student_t, std::size_t(m) * k, 3, 0);
    auto xx = generate(Dist::normal, std::size_t(k), 3, 1);
    auto qq = ref::q4_quantize(w, m, k);
    auto a = ref::q4_gemv_f64(qq, xx), b = ref::q4_gemv_naive(qq, xx), c = ref::gemv_f64(ref::q4_dequantize(qq), xx, m, k);
    REQUIRE(a.size() == std::size_t(m));
    double worst = 0, scale = 0;
    for (int i = 0; i < m; ++i) {
      worst = std::max({worst, std::abs(a[i] - b[i]), std::abs(a[i] - c[i])});
      scale = std::max(scale, std::abs(b[i]));
    }
    CAPTURE(m);
    CAPTURE(k);
    // All three sum the same exact f64 products; only the order differs: ~k * 2^-53 relative.
    CHECK(worst <= 1e-12 * std::max(1.0, scale));
  }
}
