#pragma once
// The f32_gemv op: y = W x, W row-major (m x k) f32, x and y f32. Its workload, reference and
// byte model; variants of it live beside this file and in baselines/.
#include <vector>

#include "klab/registry.hpp"

namespace klab::f32_gemv {

struct Workload : klab::Workload {
  std::vector<float> w;  // (m, k) row-major
  std::vector<float> x;  // (k)
  std::uint64_t digest() const override;
};

// The registered op (generate, reference, traffic).
Op make_op();
// Downcasts with a clear error when a variant is handed another op's workload.
const Workload& workload_of(const klab::Workload& w);

}  // namespace klab::f32_gemv
