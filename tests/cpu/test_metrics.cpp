// Metrics on hand-checked vectors, and the A/B statistics.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "klab/error.hpp"
#include "klab/metrics.hpp"
#include "klab/stats.hpp"

using namespace klab;

TEST_CASE("accuracy on a hand-checked vector") {
  // ref = [1, -4, 2]; out = [1.5, -4, 1]: errors 0.5, 0, 1; max|ref| = 4.
  std::vector<double> ref{1, -4, 2};
  std::vector<float> out{1.5f, -4.f, 1.f};
  auto a = accuracy(out, ref);
  CHECK(a.n == 3);
  CHECK(a.max_abs == doctest::Approx(1.0));
  CHECK(a.max_rel == doctest::Approx(0.25));
  // sum err^2 = 0.25 + 1 = 1.25; sum ref^2 = 21.
  CHECK(a.nmse == doctest::Approx(1.25 / 21));
  CHECK(a.rms_rel == doctest::Approx(std::sqrt(1.25 / 21)));
  CHECK(a.finite());
}

TEST_CASE("accuracy counts NaN, Inf and unwritten (poisoned) outputs separately") {
  std::vector<double> ref{1, 2, 3, 4};
  std::vector<float> out{std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), poison_value(), 4.f};
  auto a = accuracy(out, ref);
  CHECK(a.nan == 1);
  CHECK(a.inf == 1);
  CHECK(a.unwritten == 1);
  CHECK_FALSE(a.finite());
  CHECK(a.max_abs == 0.0);
}

TEST_CASE("the poison pattern is a NaN that ordinary NaNs do not match") {
  CHECK(std::isnan(poison_value()));
  CHECK(is_poison(poison_value()));
  CHECK_FALSE(is_poison(std::numeric_limits<float>::quiet_NaN()));
  CHECK_FALSE(is_poison(0.f));
}

TEST_CASE("bitwise_diff counts differing bit patterns, including -0 vs +0") {
  std::vector<float> a{0.f, 1.f, 2.f, 3.f};
  std::vector<float> b{-0.f, 1.f, std::nextafter(2.f, 3.f), 3.f};
  CHECK(bitwise_diff(a, b) == 2);
  CHECK(bitwise_diff(a, a) == 0);
  std::vector<float> c{1.f};
  CHECK_THROWS_AS(bitwise_diff(a, c), Error);
  CHECK_THROWS_AS(accuracy(std::span<const float>(c), std::span<const double>(std::vector<double>{1, 2})), Error);
}

TEST_CASE("summary statistics") {
  auto s = summarize({5, 1, 3, 2, 4});
  CHECK(s.n == 5);
  CHECK(s.median == 3);
  CHECK(s.min == 1);
  CHECK(s.max == 5);
  CHECK(s.mean == 3);
  CHECK(s.p10 == doctest::Approx(1.4));  // linear interpolation at 0.1*(n-1) = 0.4
  CHECK_THROWS_AS(summarize({}), Error);
}

TEST_CASE("A/B verdict: clearly faster, clearly slower, and noise") {
  std::vector<double> a, b_fast, b_slow, b_same;
  for (int i = 0; i < 40; ++i) {
    double jitter = 0.002 * ((i * 7) % 11);
    a.push_back(1.0 + jitter);
    b_fast.push_back(0.8 + jitter);
    b_slow.push_back(1.3 + jitter);
    b_same.push_back(1.0 + 0.002 * ((i * 5) % 11));
  }
  auto f = compare_times(a, b_fast);
  CHECK(f.verdict == Verdict::faster);
  CHECK(f.speedup == doctest::Approx(1.0 / 0.8).epsilon(0.02));
  CHECK(f.lo <= f.ratio);
  CHECK(f.ratio <= f.hi);
  CHECK(compare_times(a, b_slow).verdict == Verdict::slower);
  CHECK(compare_times(a, b_same).verdict == Verdict::same);
}
