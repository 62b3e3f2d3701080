#include "klab/stats.hpp"

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <numeric>

#include "klab/error.hpp"
#include "klab/problem.hpp"

namespace klab {

double quantile_sorted(const std::vector<double>& s, double q) {
  require(!s.empty(), "quantile of an empty sample");
  double pos = q * double(s.size() - 1);
  auto lo = static_cast<std::size_t>(std::floor(pos));
  auto hi = std::min(lo + 1, s.size() - 1);
  double f = pos - double(lo);
  return s[lo] * (1 - f) + s[hi] * f;
}

Summary summarize(std::vector<double> v) {
  require(!v.empty(), "summarize: no samples");
  std::sort(v.begin(), v.end());
  Summary s;
  s.n = static_cast<int>(v.size());
  s.min = v.front();
  s.max = v.back();
  s.median = quantile_sorted(v, 0.5);
  s.p10 = quantile_sorted(v, 0.1);
  s.p90 = quantile_sorted(v, 0.9);
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
  return s;
}

std::string to_string(Verdict v) {
  switch (v) {
    case Verdict::faster: return "faster";
    case Verdict::slower: return "slower";
    case Verdict::same: return "same";
  }
  return "?";
}

namespace {
double median_of(std::vector<double>& v) {
  std::sort(v.begin(), v.end());
  return quantile_sorted(v, 0.5);
}
}  // namespace

Comparison compare_times(const std::vector<double>& a, const std::vector<double>& b, std::uint64_t seed, int resamples, double noise) {
  require(!a.empty() && !b.empty(), "compare_times: both samples need repetitions");
  Comparison c;
  std::vector<double> aa = a, bb = b;
  double ma = median_of(aa), mb = median_of(bb);
  c.ratio = mb / ma;
  c.speedup = ma / mb;
  Rng rng(seed, 99);
  std::vector<double> ratios(static_cast<std::size_t>(resamples)), ra(a.size()), rb(b.size());
  for (auto& r : ratios) {
    for (auto& x : ra) x = a[static_cast<std::size_t>(rng.uniform() * double(a.size()))];
    for (auto& x : rb) x = b[static_cast<std::size_t>(rng.uniform() * double(b.size()))];
    r = median_of(rb) / median_of(ra);
  }
  std::sort(ratios.begin(), ratios.end());
  c.lo = quantile_sorted(ratios, 0.025);
  c.hi = quantile_sorted(ratios, 0.975);
  c.verdict = c.hi < 1.0 - noise ? Verdict::faster : c.lo > 1.0 + noise ? Verdict::slower : Verdict::same;
  return c;
}

Interval median_ci95(const std::vector<double>& samples, std::uint64_t seed, int resamples) {
  require(!samples.empty(), "median_ci95: no samples");
  require(resamples >= 1, "median_ci95: at least one resample");
  Rng rng(seed, 98);
  std::vector<double> meds(static_cast<std::size_t>(resamples)), rs(samples.size());
  for (auto& m : meds) {
    for (auto& x : rs) x = samples[std::min(static_cast<std::size_t>(rng.uniform() * double(samples.size())), samples.size() - 1)];
    m = median_of(rs);
  }
  std::sort(meds.begin(), meds.end());
  return {quantile_sorted(meds, 0.025), quantile_sorted(meds, 0.975)};
}

std::string speedup_text(const Comparison& c) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "x%.3f %s (speed-up 95%% CI x%.3f..x%.3f)", c.speedup, to_string(c.verdict).c_str(), 1.0 / c.hi,
                1.0 / c.lo);
  return buf;
}

nlohmann::json to_json(const Summary& s) {
  return {{"n", s.n}, {"median_ms", s.median}, {"min_ms", s.min}, {"max_ms", s.max}, {"p10_ms", s.p10}, {"p90_ms", s.p90}, {"mean_ms", s.mean}};
}
nlohmann::json to_json(const Comparison& c) {
  return {{"ratio", c.ratio}, {"ci95_lo", c.lo}, {"ci95_hi", c.hi}, {"speedup", c.speedup}, {"verdict", to_string(c.verdict)}};
}

}  // namespace klab
