#pragma once
// Inputs for the GDN gpu tests: T tokens of N(0,1) layer input, as the experiments draw them.
#include <cstdint>
#include <span>
#include <vector>

#include "gdn/inputs.hpp"
#include "klab/ref/gdn.hpp"

namespace klab::test {

// A test geometry and the assumption it breaks.
struct Named {
  const char* why;
  ref::gdn::Geometry g;
};

inline std::vector<float> gdn_inputs(const ref::gdn::Geometry& g, int T, std::uint64_t seed, std::uint64_t stream0) {
  return gdn::inputs(g.hidden, T, Dist::normal, seed, stream0);
}
inline std::span<const float> tok(const std::vector<float>& seq, const ref::gdn::Geometry& g, int t) {
  return gdn::token(seq, g.hidden, t);
}

}  // namespace klab::test
