#pragma once
// Inputs for the GDN gpu tests: T tokens of N(0,1) layer input, one generator stream per token.
#include <cstdint>
#include <span>
#include <vector>

#include "klab/problem.hpp"
#include "klab/ref/gdn.hpp"

namespace klab::test {

// (T, hidden): token t drawn from stream `stream0 + t` of `seed`.
inline std::vector<float> gdn_inputs(const ref::gdn::Geometry& g, int T, std::uint64_t seed, std::uint64_t stream0) {
  std::vector<float> h;
  for (int t = 0; t < T; ++t) {
    auto x = generate(Dist::normal, std::size_t(g.hidden), seed, stream0 + std::uint64_t(t));
    h.insert(h.end(), x.begin(), x.end());
  }
  return h;
}
// Token t of a (T, hidden) sequence.
inline std::span<const float> tok(const std::vector<float>& seq, const ref::gdn::Geometry& g, int t) {
  return {seq.data() + std::size_t(t) * g.hidden, std::size_t(g.hidden)};
}

}  // namespace klab::test
