#pragma once
// The q4_gemm op: Y = dequant(W) X for n activation vectors at once (a skinny GEMM: the q4 mat-vec
// at n = B columns, issue 14 part 4 "batched slots"). W (m x k) in the raw-q4 format of
// klab/ref/q4.hpp (q4_gemv's), X n vectors of k f32 (vector j contiguous: x_j at X[j k]), Y n
// vectors of m f32 (y_j at Y[j m]). Its parameters m, k and n are declared (Op::params); its
// workload, generation, f64 reference and byte model are here, its kernels beside this file.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "klab/ref/q4.hpp"
#include "klab/registry.hpp"

namespace klab::q4_gemm {

constexpr const char* kOp = "q4_gemm";
// The most columns a problem may have: the skinny regime this family is for (decode slots). Past it
// the kernel to write is a tiled GEMM that stages X in shared memory (not measured: a design call).
constexpr std::int64_t kMaxCols = 256;

struct Workload : klab::Workload {
  ref::Q4Matrix w;       // q4_gemv's W of the same (m x k, dist, seed)
  std::int64_t n = 0;    // columns
  std::vector<float> x;  // (n, k): x_j at x[j k]
  std::uint64_t digest() const override;
};

// The registered op (params m, k, n; validate, generate, reference, traffic).
Op make_op();
// Why the op cannot have this problem (empty: it can): a missing parameter, q4_gemv's shape limits
// (empty shapes, k % 32 != 0, too large), n outside [1, kMaxCols].
std::string validate(const Problem& p);
// The problem (m, k, n) under `dist` and `seed` (what experiments and tests race).
Problem problem(std::int64_t m, std::int64_t k, std::int64_t n, Dist dist = Dist::uniform, std::uint64_t seed = 1);
// A workload from an existing q4 matrix and n vectors (tests, awkward cases); throws klab::Error on
// mismatch, naming it.
std::unique_ptr<Workload> make_workload(ref::Q4Matrix w, std::vector<float> x, std::int64_t n, const Problem& p);
// Downcasts with a clear error when a variant is handed another op's workload.
const Workload& workload_of(const klab::Workload& w);
// y_j = dequant(W) x_j in f64, column by column through ref::q4_gemv_f64 (q4_gemv's reference):
// (n, m), y_j at [j m].
std::vector<double> reference_f64(const Workload& w);

}  // namespace klab::q4_gemm
