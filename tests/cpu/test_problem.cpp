// Problems: shape parsing refuses malformed input; generation is deterministic in the seed.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "klab/error.hpp"
#include "klab/problem.hpp"

using namespace klab;

TEST_CASE("parse_shape accepts MxK and refuses everything else") {
  CHECK(parse_shape("17408x5120") == Shape{17408, 5120});
  CHECK(parse_shape("1x1") == Shape{1, 1});
  for (const char* bad : {"", "x", "12x", "x12", "12", "0x5", "5x0", "-3x4", "3x4x5", "3X4", "1.5x2", "99999999999x2", " 3x4"})
    CHECK_THROWS_AS(parse_shape(bad), Error);
}

TEST_CASE("parse_dist knows the four distributions and names them on error") {
  for (Dist d : all_dists()) CHECK(parse_dist(to_string(d)) == d);
  CHECK(parse_dist("heavy-tailed") == Dist::student_t);
  try {
    parse_dist("gaussian");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("student-t") != std::string::npos);
  }
}

TEST_CASE("generation is deterministic for a seed and differs across seeds and streams") {
  for (Dist d : all_dists()) {
    auto a = generate(d, 1000, 42, 0), b = generate(d, 1000, 42, 0);
    CHECK(a == b);
    CHECK(a != generate(d, 1000, 43, 0));
    CHECK(a != generate(d, 1000, 42, 1));
  }
}

TEST_CASE("distributions have the shapes they claim") {
  const std::size_t n = 200000;
  auto u = generate(Dist::uniform, n, 7, 0);
  CHECK(*std::min_element(u.begin(), u.end()) >= -1.f);
  CHECK(*std::max_element(u.begin(), u.end()) < 1.f);
  auto moments = [](const std::vector<float>& v) {
    double m = 0, m2 = 0;
    for (float x : v) { m += x; m2 += double(x) * x; }
    m /= double(v.size());
    return std::pair{m, m2 / double(v.size()) - m * m};
  };
  auto [nm, nv] = moments(generate(Dist::normal, n, 7, 0));
  CHECK(std::abs(nm) < 0.01);
  CHECK(nv == doctest::Approx(1.0).epsilon(0.02));
  // Student-t(3): heavier tails than the normal: far more samples beyond 5.
  auto t = generate(Dist::student_t, n, 7, 0), g = generate(Dist::normal, n, 7, 0);
  auto beyond = [](const std::vector<float>& v) { return std::count_if(v.begin(), v.end(), [](float x) { return std::abs(x) > 5; }); };
  CHECK(beyond(t) > 100 * (beyond(g) + 1));
  // Outlier channels: every 64th element is scaled by 30.
  auto o = generate(Dist::outlier, 64 * 1000, 7, 0);
  double big = 0, small = 0;
  for (std::size_t i = 0; i < o.size(); ++i) (i % 64 == 0 ? big : small) += std::abs(o[i]);
  CHECK(big / 1000 > 20 * small / (63 * 1000));
}
