#include "klab/ref/gemv.hpp"

#include <Eigen/Dense>
#include <stdexcept>
#include <string>

namespace klab::ref {

namespace {
void check(std::span<const float> w, std::span<const float> x, std::int64_t m, std::int64_t k) {
  if (m <= 0 || k <= 0 || static_cast<std::int64_t>(w.size()) != m * k || static_cast<std::int64_t>(x.size()) != k)
    throw std::invalid_argument("gemv reference: W has " + std::to_string(w.size()) + " elements and x " + std::to_string(x.size()) +
                                " for a " + std::to_string(m) + "x" + std::to_string(k) + " problem");
}
}  // namespace

std::vector<double> gemv_f64(std::span<const float> w, std::span<const float> x, std::int64_t m, std::int64_t k) {
  check(w, x, m, k);
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<const RowMajor> W(w.data(), m, k);
  Eigen::Map<const Eigen::VectorXf> X(x.data(), k);
  const Eigen::VectorXd xd = X.cast<double>();
  std::vector<double> y(static_cast<std::size_t>(m));
  Eigen::Map<Eigen::VectorXd> Y(y.data(), m);
  // Row by row, so the f64 copy of W never needs to exist whole (17408x5120 would be 713 MB).
  constexpr std::int64_t kRows = 256;
  for (std::int64_t r0 = 0; r0 < m; r0 += kRows) {
    const std::int64_t rows = std::min(kRows, m - r0);
    Y.segment(r0, rows).noalias() = W.middleRows(r0, rows).cast<double>() * xd;
  }
  return y;
}

std::vector<double> gemv_naive(std::span<const float> w, std::span<const float> x, std::int64_t m, std::int64_t k) {
  check(w, x, m, k);
  std::vector<double> y(static_cast<std::size_t>(m));
  for (std::int64_t i = 0; i < m; ++i) {
    double s = 0;
    for (std::int64_t j = 0; j < k; ++j) s += double(w[i * k + j]) * double(x[j]);
    y[i] = s;
  }
  return y;
}

}  // namespace klab::ref
