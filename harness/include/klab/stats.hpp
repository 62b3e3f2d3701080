#pragma once
// Summary statistics of repetitions and the A/B verdict.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace klab {

struct Summary {
  int n = 0;
  double median = 0, min = 0, max = 0, p10 = 0, p90 = 0, mean = 0;
};
Summary summarize(std::vector<double> samples);  // throws on empty
double quantile_sorted(const std::vector<double>& sorted, double q);

enum class Verdict { faster, slower, same };
std::string to_string(Verdict v);

// B against A from their time samples: ratio = median(B)/median(A) (< 1 means B is faster), with a
// percentile-bootstrap 95% interval of that ratio. Verdict: faster if the whole interval lies
// below 1 - noise, slower if above 1 + noise, same otherwise. `noise` (default 1%) is the spread
// we see between two timings of the same kernel: a smaller difference is not a result.
struct Comparison {
  double ratio = 1, lo = 1, hi = 1;
  double speedup = 1;  // median(A)/median(B)
  Verdict verdict = Verdict::same;
};
Comparison compare_times(const std::vector<double>& a, const std::vector<double>& b,
                         std::uint64_t seed = 12345, int resamples = 2000, double noise = 0.01);

// B against A in one direction: "x1.036 faster (speed-up 95% CI x1.035..x1.037)": the speed-up
// median(A)/median(B) and its interval (1/hi .. 1/lo of the time ratio's), then the verdict.
std::string speedup_text(const Comparison& c);

// A percentile-bootstrap 95% interval of the median of `samples`: `resamples` resamplings with
// replacement (deterministic in `seed`), their medians' 2.5% and 97.5% quantiles. One sample gives
// {it, it}; none throws. For a time measured alone (no A to compare with): gdn-step-breakdown.
struct Interval {
  double lo = 0, hi = 0;
};
Interval median_ci95(const std::vector<double>& samples, std::uint64_t seed = 12345, int resamples = 2000);

nlohmann::json to_json(const Summary& s);
nlohmann::json to_json(const Comparison& c);

}  // namespace klab
