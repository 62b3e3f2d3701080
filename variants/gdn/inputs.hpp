#pragma once
// GDN layer inputs, drawn the same way by the experiments and the gpu tests: T tokens of (T, hidden)
// layer input from one distribution, token t from stream stream0 + t of `seed`, so a prefix of the
// sequence does not depend on T.
#include <cstdint>
#include <span>
#include <vector>

#include "klab/problem.hpp"

namespace klab::gdn {

// T tokens of GDN layer input, (T, hidden), drawn from `dist`.
inline std::vector<float> inputs(int hidden, int T, Dist dist, std::uint64_t seed, std::uint64_t stream0) {
  std::vector<float> h;
  h.reserve(std::size_t(T) * std::size_t(hidden));
  for (int t = 0; t < T; ++t) {
    const auto x = generate(dist, std::size_t(hidden), seed, stream0 + std::uint64_t(t));
    h.insert(h.end(), x.begin(), x.end());
  }
  return h;
}

// Token t of a (T, hidden) sequence.
inline std::span<const float> token(const std::vector<float>& seq, int hidden, int t) {
  return {seq.data() + std::size_t(t) * std::size_t(hidden), std::size_t(hidden)};
}

}  // namespace klab::gdn
