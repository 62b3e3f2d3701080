#pragma once
// The CPU truth for mat-vecs: y = W x with W row-major (m x k), accumulated in f64 with Eigen.
#include <cstdint>
#include <span>
#include <vector>

namespace klab::ref {

// y[i] = sum_j W[i*k + j] * x[j], every product and sum in double.
std::vector<double> gemv_f64(std::span<const float> w, std::span<const float> x, std::int64_t m, std::int64_t k);

// The same in plain loops (the reference's own check, used by the tests).
std::vector<double> gemv_naive(std::span<const float> w, std::span<const float> x, std::int64_t m, std::int64_t k);

}  // namespace klab::ref
