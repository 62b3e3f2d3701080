// The whole-block nibble arithmetic of the kernels beyond the seed (variants/q4_gemv/nibbles.hpp),
// against the q4 format's definition written out here: a weight's code is a 4-bit two's complement
// integer n in [-8, 7]; a block's 32 codes are 16 bytes, column j in byte j/2, even j in the low
// nibble (klab/ref/q4.hpp); read as four little-endian words, word w holds columns 8w..8w+7 as its
// nibbles 0..7. The offset form maps n to v = 1 + (n + 8)/16 in [1, 2) (so n = 16 v - 24), and a
// block's dot sum n_i x_i becomes 16 (sum v_i x_i - 1.5 sum x_i).
// These functions are the same code on the host (the bit-models) and the device (the kernels), and
// the gpu suite holds kernels to models bit for bit: here they are held to the definition.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "klab/problem.hpp"
#include "q4_gemv/nibbles.hpp"

using namespace klab;
using namespace klab::q4_gemv;

namespace {
constexpr double kU = 1.0 / (1 << 24);  // f32 unit roundoff, 2^-24

// Column j's code of a block from its 16 bytes, by the format.
int code_of(const std::uint8_t* bytes, int j) {
  const unsigned u = j % 2 ? bytes[j / 2] >> 4 : bytes[j / 2] & 0xFu;
  return u >= 8 ? int(u) - 16 : int(u);
}
// Word `word` with nibble i replaced by code n's 4 bits.
std::uint32_t with_nibble(std::uint32_t word, int i, int n) {
  const std::uint32_t u = std::uint32_t(n) & 0xFu;  // n's 4-bit two's complement
  return (word & ~(0xFu << (4 * i))) | (u << (4 * i));
}
}  // namespace

TEST_CASE("q4 nibbles: every code at every position of a word reads back as n, and in the offset form as 1 + (n + 8)/16") {
  // The other seven nibbles: all zero, all ones, all 8 (sign bits only), all 7, mixed, random: a
  // shift or mask that lets a neighbour in shows up under one of them.
  std::vector<std::uint32_t> backgrounds{0x00000000u, 0xFFFFFFFFu, 0x88888888u, 0x77777777u, 0x12345678u, 0xF0E1D2C3u};
  Rng rng(5, 0);
  for (int r = 0; r < 16; ++r) backgrounds.push_back(std::uint32_t(rng.uniform() * 4294967296.0));
  int checked = 0;
  for (const std::uint32_t bg : backgrounds)
    for (int i = 0; i < 8; ++i)
      for (int n = -8; n <= 7; ++n) {
        const std::uint32_t word = with_nibble(bg, i, n);
        CAPTURE(word);
        CAPTURE(i);
        CAPTURE(n);
        CHECK(word_nibble(word, i) == n);
        CHECK(nibble_value(word, i) == float(n));
        const float v = nibble_offset_value(word, i);
        CHECK(v == 1.0f + float(n + 8) / 16.0f);  // exact: (n + 8)/16 is a multiple of 2^-4 below 1
        CHECK(16.0f * v - 24.0f == float(n));     // and n comes back exactly
        CHECK(v >= 1.0f);
        CHECK(v < 2.0f);
        ++checked;
      }
  CHECK(checked == int(backgrounds.size()) * 8 * 16);
}

TEST_CASE("q4 nibbles: a block's bytes as four words put column 8w + i at nibble i of word w") {
  Rng rng(6, 0);
  for (int rep = 0; rep < 64; ++rep) {
    std::uint8_t bytes[16];
    for (auto& b : bytes) b = std::uint8_t(rng.uniform() * 256.0);
    std::uint32_t words[4];
    block_words(bytes, words);
    for (int j = 0; j < 32; ++j) {
      CAPTURE(j);
      CHECK(word_nibble(words[j / 8], j % 8) == code_of(bytes, j));
      CHECK(nibble_offset_value(words[j / 8], j % 8) == 1.0f + float(code_of(bytes, j) + 8) / 16.0f);
    }
  }
}

TEST_CASE("q4 nibbles: DotOffset::finish recovers the block's dot, exactly where every sum is exact, within its bound otherwise") {
  SUBCASE("hand-checked: all codes -8 (v = 1) and all codes 7 (v = 31/16)") {
    // v = 1: acc = sum x = sx, so the dot is 16 (sx - 1.5 sx) = -8 sx.
    CHECK(DotOffset::finish(10.0f, 10.0f) == -80.0f);
    // v = 31/16: acc = 31/16 sx, dot = 16 (31/16 - 24/16) sx = 7 sx.
    CHECK(DotOffset::finish(31.0f / 16.0f * 8.0f, 8.0f) == 56.0f);
    CHECK(DotDirect::finish(3.5f, 123.0f) == 3.5f);  // the direct form's acc is the dot
  }

  SUBCASE("exact: integer x in [-64, 64] (and the same scaled by 2^-20)") {
    // v_i x_i is a multiple of 1/16 below 124 in magnitude, every partial sum below 2^12 with 4
    // fraction bits, sum x an integer below 2^11: all exact in f32, so both forms give the integer
    // dot exactly. Scaling x by a power of two keeps every step exact.
    Rng rng(7, 0);
    for (int rep = 0; rep < 500; ++rep) {
      std::uint8_t bytes[16];
      for (auto& b : bytes) b = std::uint8_t(rng.uniform() * 256.0);
      const float scale = rep % 2 ? std::ldexp(1.0f, -20) : 1.0f;
      float x[32];
      double want = 0;
      for (int j = 0; j < 32; ++j) {
        x[j] = float(std::floor(rng.uniform(-64, 65))) * scale;
        want += double(code_of(bytes, j)) * double(x[j]);
      }
      CAPTURE(rep);
      CHECK(double(block_dot_host_as<DotOffset>(bytes, x)) == want);
      CHECK(double(block_dot_host_as<DotDirect>(bytes, x)) == want);
    }
  }

  SUBCASE("random blocks and x of mixed magnitude: within 16 * 113 * 2^-24 * sum|x|") {
    // Offset form, with S = sum |x_i| and u = 2^-24: acc is a chain of 32 fmas of terms below 2 |x_i|,
    // each rounding by at most u times a partial sum below 2 S: error < 64 u S. sx is a chain of
    // 32 adds: error < 32 u S, times 1.5: 48 u S. The final fma rounds once, by u |t| with
    // |t| = |dot|/16 <= S/2 < S. The product by 16 is exact. So |error| < 16 (64 + 48 + 1) u S.
    // The direct form: 32 fmas of terms below 8 |x_i|, partial sums below 8 S: < 256 u S.
    Rng rng(8, 0);
    double worst_offset = 0, worst_direct = 0;
    int differ = 0;
    const int blocks = 20000;
    for (int rep = 0; rep < blocks; ++rep) {
      std::uint8_t bytes[16];
      for (auto& b : bytes) b = std::uint8_t(rng.uniform() * 256.0);
      float x[32];
      double want = 0, s = 0;
      for (int j = 0; j < 32; ++j) {
        x[j] = float(rng.uniform(-1, 1) * std::ldexp(1.0, int(std::floor(rng.uniform(-8, 9)))));
        want += double(code_of(bytes, j)) * double(x[j]);
        s += std::abs(double(x[j]));
      }
      const float off = block_dot_host_as<DotOffset>(bytes, x), dir = block_dot_host_as<DotDirect>(bytes, x);
      const double e_off = std::abs(double(off) - want) / (kU * s), e_dir = std::abs(double(dir) - want) / (kU * s);
      CAPTURE(rep);
      CHECK(e_off < 16 * 113);
      CHECK(e_dir < 256);
      worst_offset = std::max(worst_offset, e_off);
      worst_direct = std::max(worst_direct, e_dir);
      differ += off != dir;
    }
    MESSAGE("over " << blocks << " random blocks, worst error in units of 2^-24 sum|x|: offset " << worst_offset << " (bound 1808), direct "
                    << worst_direct << " (bound 256); the two forms differ on " << differ << " blocks");
    // The offset form rounds differently from the direct one (a different bit-model): if it never
    // did, the two would be one form.
    CHECK(differ > 0);
  }
}
