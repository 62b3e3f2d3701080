#include "klab/metrics.hpp"

#include <cstdio>

#include <bit>
#include <cmath>
#include <type_traits>

#include "klab/error.hpp"

namespace klab {

float poison_value() { return std::bit_cast<float>(kPoisonBits); }
bool is_poison(float v) { return std::bit_cast<std::uint32_t>(v) == kPoisonBits; }

namespace {
template <class O, class R>
Accuracy accuracy_impl(std::span<const O> out, std::span<const R> ref) {
  require(out.size() == ref.size(), "accuracy: output has " + std::to_string(out.size()) + " elements, reference " + std::to_string(ref.size()));
  Accuracy a;
  a.n = static_cast<std::int64_t>(out.size());
  double err2 = 0, ref2 = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    double r = static_cast<double>(ref[i]);
    if (std::isfinite(r)) a.max_ref = std::max(a.max_ref, std::abs(r));
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    double r = static_cast<double>(ref[i]);
    const O o = out[i];
    if constexpr (std::is_same_v<O, float>)  // a model's f64 output is never a kernel's poison
      if (is_poison(o)) { ++a.unwritten; continue; }
    if (!std::isfinite(r)) continue;  // the reference itself is not finite: nothing to compare
    if (std::isnan(o)) { ++a.nan; continue; }
    if (std::isinf(o)) { ++a.inf; continue; }
    double e = std::abs(static_cast<double>(o) - r);
    a.max_abs = std::max(a.max_abs, e);
    err2 += e * e;
    ref2 += r * r;
  }
  a.max_rel = a.max_ref > 0 ? a.max_abs / a.max_ref : a.max_abs;
  a.nmse = ref2 > 0 ? err2 / ref2 : err2;
  a.rms_rel = std::sqrt(a.nmse);
  return a;
}
}  // namespace

Accuracy accuracy(std::span<const float> out, std::span<const double> ref) { return accuracy_impl(out, ref); }
Accuracy accuracy(std::span<const float> out, std::span<const float> ref) { return accuracy_impl(out, ref); }
Accuracy accuracy(std::span<const double> out, std::span<const double> ref) { return accuracy_impl(out, ref); }

std::int64_t bitwise_diff(std::span<const float> a, std::span<const float> b) {
  require(a.size() == b.size(), "bitwise_diff: sizes differ (" + std::to_string(a.size()) + " vs " + std::to_string(b.size()) + ")");
  std::int64_t d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d += std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i]);
  return d;
}

std::uint64_t fnv1a64(const void* data, std::size_t bytes, std::uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string hash_hex(std::uint64_t h) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(h));
  return buf;
}

nlohmann::json to_json(const Accuracy& a) {
  return {{"n", a.n}, {"max_abs", a.max_abs}, {"max_rel", a.max_rel}, {"rms_rel", a.rms_rel}, {"nmse", a.nmse},
          {"max_ref", a.max_ref}, {"nan", a.nan}, {"inf", a.inf}, {"unwritten", a.unwritten}};
}

}  // namespace klab
