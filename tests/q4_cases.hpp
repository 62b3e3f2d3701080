#pragma once
// Problems for the q4_gemv bitwise guards, shared by the cpu suite (through the bit-models) and the
// gpu suite (through the kernels): generated problems at awkward sizes, and hand-built matrices
// with the scales and weights where conversions and signs of zero could go astray.
#include <cstdint>
#include <string>
#include <vector>

#include "klab/catalog.hpp"
#include "klab/problem.hpp"
#include "klab/ref/q4.hpp"
#include "klab/registry.hpp"
#include "q4_gemv/op.hpp"

namespace klab::test {

struct Q4Case {
  std::string what;
  ref::Q4Matrix w;
  std::vector<float> x;
};

// The 16 kernel variant names from the four axes.
inline std::string q4_name(const std::string& scale, const std::string& chains, const std::string& f16, const std::string& rows) {
  return variant_name("q4_gemv", {{"scale", scale}, {"chains", chains}, {"f16", f16}, {"rows", rows}});
}
inline std::vector<std::vector<std::pair<std::string, std::string>>> q4_all_axes() {
  std::vector<std::vector<std::pair<std::string, std::string>>> out;
  for (const char* s : {"lane0-shfl", "per-lane"})
    for (const char* c : {"1", "4"})
      for (const char* f : {"soft", "hard"})
        for (const char* r : {"1", "4"}) out.push_back({{"scale", s}, {"chains", c}, {"f16", f}, {"rows", r}});
  return out;
}
// True when a and b differ in exactly one axis and it is one of scale, f16, rows (not chains).
inline bool differ_only_in_invariant_axis(const std::vector<std::pair<std::string, std::string>>& a,
                                          const std::vector<std::pair<std::string, std::string>>& b) {
  int differ = 0;
  bool chains = false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].second != b[i].second) {
      ++differ;
      chains = chains || a[i].first == "chains";
    }
  return differ == 1 && !chains;
}
// Calls f(a, b) for every pair of indices a < b into `axes` whose axis sets differ only in an axis
// documented to change no bit; returns how many pairs there were.
template <class F>
int for_each_guarded_pair(const std::vector<std::vector<std::pair<std::string, std::string>>>& axes, F f) {
  int pairs = 0;
  for (std::size_t a = 0; a < axes.size(); ++a)
    for (std::size_t b = a + 1; b < axes.size(); ++b)
      if (differ_only_in_invariant_axis(axes[a], axes[b])) {
        f(a, b);
        ++pairs;
      }
  return pairs;
}

// Random finite f16 bit patterns (both signs, subnormals and zeros included; no inf, no NaN).
inline std::uint16_t random_finite_half(Rng& rng) {
  for (;;) {
    const auto h = std::uint16_t(rng.uniform() * 65536.0);
    if ((h & 0x7C00u) != 0x7C00u) return h;
  }
}

// A raw-q4 matrix of every code (-8 included) and random finite f16 scales, from stream 9 of seed.
inline ref::Q4Matrix random_q4_matrix(std::int64_t m, std::int64_t k, std::uint64_t seed) {
  Rng rng(seed, 9);
  ref::Q4Matrix q;
  q.m = m;
  q.k = k;
  q.codes.resize(std::size_t(m * k / 2));
  q.scales.resize(std::size_t(m * k / 32));
  for (auto& c : q.codes) c = std::uint8_t(rng.uniform() * 256.0);
  for (auto& s : q.scales) s = random_finite_half(rng);
  return q;
}

inline Q4Case q4_generated(Shape s, Dist d, std::uint64_t seed) {
  Problem p{s, d, seed};
  auto wl = registry().op("q4_gemv").generate(p);
  const auto& w = q4_gemv::workload_of(*wl);
  return {p.str(), w.w, w.x};
}

// Sizes: rows 1, 5, 33 and not multiples of 4 (38, 7); K = 32, 96, 5120.
inline std::vector<Shape> q4_guard_shapes() { return {{1, 32}, {1, 5120}, {5, 96}, {33, 32}, {33, 160}, {38, 96}, {7, 5120}}; }

// The gpu suite's accuracy problems for every variant and peer (the cpu suite checks the same
// problems through the bit-models and a simulation of the bf16 peer's rounding).
inline std::vector<Problem> q4_accuracy_problems() {
  std::vector<Problem> out;
  for (Shape s : std::vector<Shape>{{1, 32}, {5, 96}, {33, 160}, {38, 96}, {7, 5120}, {512, 5120}})
    for (Dist d : {Dist::uniform, Dist::normal, Dist::student_t, Dist::outlier}) out.push_back(Problem{s, d, 11});
  return out;
}

inline std::vector<Q4Case> q4_awkward_cases() {
  std::vector<Q4Case> out;
  Rng rng(77, 3);
  auto matrix = [&](std::int64_t m, std::int64_t k) {
    ref::Q4Matrix q;
    q.m = m;
    q.k = k;
    q.codes.resize(std::size_t(m * k / 2));
    q.scales.resize(std::size_t(m * k / 32));
    for (auto& c : q.codes) c = std::uint8_t(rng.uniform() * 256.0);  // every code, -8 included
    return q;
  };
  auto xs = [&](std::int64_t k, bool zeros) {
    std::vector<float> x(static_cast<std::size_t>(k));
    for (std::size_t j = 0; j < x.size(); ++j) x[j] = float(rng.uniform(-1, 1));
    if (zeros)
      for (std::size_t j = 0; j < x.size(); j += 5) x[j] = (j / 5) % 2 ? -0.f : 0.f;
    return x;
  };
  {
    // Subnormal (both signs; smallest, middle, largest), zero (+0 and -0), largest finite (both
    // signs), smallest normal and 1, cycling over the blocks.
    const std::uint16_t special[] = {0x0001, 0x8001, 0x0200, 0x03FF, 0x0000, 0x8000, 0x7BFF, 0xFBFF, 0x0400, 0x3C00, 0x83FF};
    auto q = matrix(9, 96);
    for (std::size_t i = 0; i < q.scales.size(); ++i) q.scales[i] = special[i % std::size(special)];
    out.push_back({"subnormal, zero and largest scales, 9x96", q, xs(96, true)});
  }
  {
    auto q = matrix(33, 2048);
    for (auto& s : q.scales) s = random_finite_half(rng);
    out.push_back({"random finite f16 scales of both signs, 33x2048", q, xs(2048, false)});
  }
  {
    // +-0 weights: code 0 under positive and negative scales gives +0 and -0 products; some rows
    // all zero (y must be +0 or -0 identically in every variant), some with one nonzero code.
    auto q = matrix(6, 64);
    for (auto& c : q.codes) c = 0;
    for (std::size_t i = 0; i < q.scales.size(); ++i) q.scales[i] = i % 2 ? 0xBC00 : 0x3C00;
    q.codes[3 * 32 + 5] = 0x80;  // row 3: one -8 in a high nibble
    q.codes[5 * 32 + 31] = 0x07;
    auto x = xs(64, true);
    for (auto& v : x) v = -v;
    out.push_back({"+-0 weights under +-scales, 6x64", q, x});
  }
  {
    // Largest scales everywhere, extreme codes: big but finite sums.
    auto q = matrix(5, 5120);
    for (std::size_t i = 0; i < q.scales.size(); ++i) q.scales[i] = i % 3 ? 0x7BFF : 0xFBFF;
    out.push_back({"largest scales, 5x5120", q, xs(5120, false)});
  }
  return out;
}

}  // namespace klab::test
