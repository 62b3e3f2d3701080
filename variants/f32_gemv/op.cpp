#include "f32_gemv/op.hpp"

#include <cmath>

#include "klab/error.hpp"
#include "klab/metrics.hpp"
#include "klab/ref/gemv.hpp"

namespace klab::f32_gemv {

Op make_op() {
  Op op;
  op.name = "f32_gemv";
  op.description = "y = W x; W row-major f32 (m x k), x, y f32";
  op.validate = [](const Problem& p) -> std::string {
    if (double(p.shape.m) * double(p.shape.k) * 4.0 > 32e9) return "W would take over 32 GB";
    return "";
  };
  op.generate = [](const Problem& p) {
    auto w = std::make_unique<Workload>();
    w->problem = p;
    const auto n = static_cast<std::size_t>(p.shape.m * p.shape.k);
    // Weights scaled by 1/sqrt(k) so outputs stay O(1) whatever k is.
    w->w = generate(p.dist, n, p.seed, 0, 1.0 / std::sqrt(double(p.shape.k)));
    w->x = generate(p.dist, static_cast<std::size_t>(p.shape.k), p.seed, 1);
    return std::unique_ptr<klab::Workload>(std::move(w));
  };
  op.reference = [](const klab::Workload& wl) {
    const auto& w = workload_of(wl);
    return ref::gemv_f64(w.w, w.x, w.problem.shape.m, w.problem.shape.k);
  };
  // A perfect kernel reads W and x once and writes y once.
  op.traffic = [](const Problem& p) {
    const double m = double(p.shape.m), k = double(p.shape.k);
    return Traffic{4.0 * (m * k + k + m), m * k};
  };
  return op;
}

std::uint64_t Workload::digest() const {
  const std::int64_t dims[2] = {problem.shape.m, problem.shape.k};
  std::uint64_t h = fnv1a64(dims, sizeof dims);
  h = fnv1a64(std::span<const float>(w), h);
  return fnv1a64(std::span<const float>(x), h);
}

const Workload& workload_of(const klab::Workload& w) {
  auto* p = dynamic_cast<const Workload*>(&w);
  require(p != nullptr, "an f32_gemv variant was handed the workload of another op");
  return *p;
}

}  // namespace klab::f32_gemv
