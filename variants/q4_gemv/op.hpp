#pragma once
// The q4_gemv op: y = dequant(W) x, W (m x k) in the raw-q4 format of klab/ref/q4.hpp (int4 codes,
// one f16 scale per 32 weights along a row), x and y f32. Its workload, reference and byte model;
// the 16-variant kernel family lives beside this file, its cuBLAS peers in baselines/.
#include <vector>

#include "klab/ref/q4.hpp"
#include "klab/registry.hpp"

namespace klab::q4_gemv {

struct Workload : klab::Workload {
  ref::Q4Matrix w;       // quantised from a generated f32 W
  std::vector<float> x;  // (k)
  std::uint64_t digest() const override;
};

// The registered op (validate, generate, reference, traffic).
Op make_op();
// Why the op cannot have this shape (empty: it can): empty shapes, K % 32 != 0, too large.
std::string validate(const Problem& p);
// A workload from an existing q4 matrix and x (tests, awkward cases); throws klab::Error on mismatch.
std::unique_ptr<Workload> make_workload(ref::Q4Matrix w, std::vector<float> x, const Problem& p);
// Downcasts with a clear error when a variant is handed another op's workload.
const Workload& workload_of(const klab::Workload& w);

}  // namespace klab::q4_gemv
