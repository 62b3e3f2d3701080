// The Eigen f64 reference against naive loops, on awkward sizes.
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>

#include "klab/problem.hpp"
#include "klab/ref/gemv.hpp"

using namespace klab;

TEST_CASE("gemv_f64 equals the naive double loops") {
  for (auto [m, k] : std::vector<std::pair<int, int>>{{1, 1}, {1, 33}, {33, 160}, {257, 31}, {300, 1000}}) {
    auto w = generate(Dist::student_t, std::size_t(m) * k, 3, 0);
    auto x = generate(Dist::normal, std::size_t(k), 3, 1);
    auto a = ref::gemv_f64(w, x, m, k), b = ref::gemv_naive(w, x, m, k);
    REQUIRE(a.size() == std::size_t(m));
    double worst = 0, scale = 0;
    for (int i = 0; i < m; ++i) {
      worst = std::max(worst, std::abs(a[i] - b[i]));
      scale = std::max(scale, std::abs(b[i]));
    }
    CAPTURE(m);
    CAPTURE(k);
    // Both sum f32 products in double; only the summation order differs: ~k * 2^-53 relative.
    CHECK(worst <= 1e-12 * std::max(1.0, scale));
  }
}

TEST_CASE("gemv reference refuses mismatched buffers") {
  std::vector<float> w(6), x(3);
  CHECK_THROWS_AS(ref::gemv_f64(w, x, 3, 3), std::invalid_argument);
  CHECK_THROWS_AS(ref::gemv_f64(w, x, 2, 4), std::invalid_argument);
  CHECK_NOTHROW(ref::gemv_f64(w, x, 2, 3));
}
