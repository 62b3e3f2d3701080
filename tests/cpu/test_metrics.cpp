// Metrics on hand-checked vectors, and the A/B statistics.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "klab/error.hpp"
#include "klab/metrics.hpp"
#include "klab/catalog.hpp"
#include "klab/registry.hpp"
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

// The verdict near the floor. The rule (klab/stats.hpp): faster iff the whole 95% bootstrap interval
// of median(B)/median(A) lies below 1 - noise (1%), slower iff above 1 + noise, same otherwise. Each
// case below is one that a plain "compare the medians" rule (faster iff median(B) < median(A)) gets
// wrong, or one that pins the interval itself.
namespace {
// 51 repetitions center * (1 + width * t), t = -1, -0.96, ..., 1 in a scrambled order (7 is prime to
// 51, so i -> 7i mod 51 visits every t once): the median is exactly `center` (t = 0), every sample
// lies within center * (1 +- width).
std::vector<double> reps(double center, double width) {
  std::vector<double> v;
  for (int i = 0; i < 51; ++i) v.push_back(center * (1 + width * double((i * 7) % 51 - 25) / 25));
  return v;
}
double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
double mean_of(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / double(v.size()); }
}  // namespace

TEST_CASE("A/B verdict: a 0.5% shift with tight samples is inside the 1% noise band: same") {
  // B's median is 0.5% lower and the samples (+-0.1%) do not overlap: the interval excludes 1, so
  // "median(B) < median(A)" and "the interval excludes 1" would both say faster. Inside the band it
  // is not a result.
  const auto a = reps(1.0, 0.001), b = reps(0.995, 0.001);
  REQUIRE(median_of(b) < median_of(a));  // the naive rule's answer would be "faster"
  const auto c = compare_times(a, b);
  CHECK(c.ratio == doctest::Approx(0.995).epsilon(1e-12));
  CHECK(c.hi < 1.0);   // the whole interval below 1 ...
  CHECK(c.lo > 0.99);  // ... and above 1 - noise
  CHECK(c.verdict == Verdict::same);
  // Mirrored: 0.5% slower is same too.
  CHECK(compare_times(a, reps(1.005, 0.001)).verdict == Verdict::same);
}

TEST_CASE("A/B verdict: a clear 3% shift with tight samples is faster / slower, the interval pinned by the samples") {
  // Every resampled median lies within its sample's range, so the interval of the ratio must lie in
  // [min(B)/max(A), max(B)/min(A)] and hold the ratio of the medians (symmetric samples).
  const auto a = reps(1.0, 0.001);
  for (double shift : {0.97, 1.03}) {
    CAPTURE(shift);
    const auto b = reps(shift, 0.001);
    const auto c = compare_times(a, b);
    const double lo_bound = shift * 0.999 / 1.001, hi_bound = shift * 1.001 / 0.999;
    CHECK(c.ratio == doctest::Approx(shift).epsilon(1e-12));
    CHECK(c.speedup == doctest::Approx(1 / shift).epsilon(1e-12));
    CHECK(c.lo >= lo_bound);
    CHECK(c.hi <= hi_bound);
    CHECK(c.lo <= c.ratio);
    CHECK(c.ratio <= c.hi);
    CHECK(c.lo < c.hi);  // an interval, not the point estimate twice
    CHECK(c.verdict == (shift < 1 ? Verdict::faster : Verdict::slower));
  }
}

TEST_CASE("A/B verdict: a 1.5% shift with wide, overlapping samples is same: the interval crosses the band") {
  // +-20% spread, 51 repetitions: the median is known to ~+-3%, so a 1.5% lower median is no result.
  // "median(B) < median(A)" says faster, and so does "median ratio below 1 - noise" (0.985 < 0.99):
  // only the interval says same.
  const auto a = reps(1.0, 0.2), b = reps(0.985, 0.2);
  const auto c = compare_times(a, b);
  CHECK(c.ratio == doctest::Approx(0.985).epsilon(1e-12));
  CHECK(c.ratio < 1 - 0.01);
  CHECK(c.lo < 0.99);  // the interval reaches below the band ...
  CHECK(c.hi > 1.0);   // ... and past 1
  CHECK(c.verdict == Verdict::same);
  // The same 1.5% shift with tight samples (+-0.1%) is a result: faster.
  CHECK(compare_times(reps(1.0, 0.001), reps(0.985, 0.001)).verdict == Verdict::faster);
}

TEST_CASE("A/B verdict: same median, very different spread: same, and the interval holds 1") {
  SUBCASE("B spread both ways") {
    // A tight (+-0.1%), B +-20% around the same median: the ratio is exactly 1 but B's median is
    // uncertain by a few percent, and the interval must say so.
    const auto c = compare_times(reps(1.0, 0.001), reps(1.0, 0.2));
    CHECK(c.ratio == 1.0);
    CHECK(c.lo <= 1.0);
    CHECK(c.hi >= 1.0);
    CHECK(c.lo < 0.99);
    CHECK(c.hi > 1.01);
    CHECK(c.verdict == Verdict::same);
  }
  SUBCASE("B with a long slow tail") {
    // Half of B's repetitions sit just under A's median, the other half trail up to +50%: the mean
    // of B is ~12% above A's, so "compare the means" says slower; the medians agree exactly.
    auto a = reps(1.0, 0.001), b = reps(1.0, 0.001);
    for (auto& t : b)
      if (t > 1.0) t = 1.0 + 500 * (t - 1.0);  // (1, 1.001] -> (1, 1.5]
    REQUIRE(median_of(b) == 1.0);
    REQUIRE(mean_of(b) > 1.1 * mean_of(a));
    const auto c = compare_times(a, b);
    CHECK(c.ratio == 1.0);
    CHECK(c.lo <= 1.0);
    CHECK(c.hi >= 1.0);
    CHECK(c.hi > 1.01);  // the tail widens the interval upwards only
    CHECK(c.lo > 0.99);
    CHECK(c.verdict == Verdict::same);
  }
}

TEST_CASE("fnv1a64: the published test vectors, and its text form") {
  // FNV-1a 64 of "" is the offset basis; of "a" and "foobar" the values published with the algorithm.
  CHECK(fnv1a64("", 0) == 0xcbf29ce484222325ull);
  CHECK(fnv1a64("a", 1) == 0xaf63dc4c8601ec8cull);
  CHECK(fnv1a64("foobar", 6) == 0x85944171f73967e8ull);
  // Chaining: hashing "foo" then "bar" is hashing "foobar".
  CHECK(fnv1a64("bar", 3, fnv1a64("foo", 3)) == fnv1a64("foobar", 6));
  CHECK(hash_hex(0xaf63dc4c8601ec8cull) == "0xaf63dc4c8601ec8c");
  CHECK(hash_hex(1) == "0x0000000000000001");
}

TEST_CASE("a problem's input digest: the same for the same seed, different for another seed or shape") {
  for (const char* opname : {"f32_gemv", "q4_gemv"}) {
    CAPTURE(opname);
    const Op& op = registry().op(opname);
    const Problem p{{64, 96}, Dist::student_t, 7};
    const auto a = op.generate(p), b = op.generate(p);
    CHECK(a->digest() != 0);
    CHECK(a->digest() == b->digest());
    CHECK(op.generate(Problem{{64, 96}, Dist::student_t, 8})->digest() != a->digest());
    CHECK(op.generate(Problem{{96, 64}, Dist::student_t, 7})->digest() != a->digest());
    CHECK(op.generate(Problem{{64, 96}, Dist::uniform, 7})->digest() != a->digest());
  }
}

TEST_CASE("speedup_text: the speed-up and its interval point the same way") {
  // B twice as fast as A: time ratio B/A 0.5 in [0.4, 0.625]; speed-up A/B 2 in [1/0.625, 1/0.4] = [1.6, 2.5].
  Comparison c;
  c.ratio = 0.5;
  c.speedup = 2.0;
  c.lo = 0.4;
  c.hi = 0.625;
  c.verdict = Verdict::faster;
  CHECK(speedup_text(c) == "x2.000 faster (speed-up 95% CI x1.600..x2.500)");
  c = Comparison{.ratio = 1.25, .lo = 1.2, .hi = 1.3, .speedup = 0.8, .verdict = Verdict::slower};
  CHECK(speedup_text(c) == "x0.800 slower (speed-up 95% CI x0.769..x0.833)");
}
