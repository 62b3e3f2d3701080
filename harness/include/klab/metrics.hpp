#pragma once
// Accuracy of an output against a reference, and bitwise comparison between two outputs.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace klab {

struct Accuracy {
  std::int64_t n = 0;
  double max_abs = 0;   // max |out - ref|
  double max_rel = 0;   // max |out - ref| / max |ref|   (normalised by the vector's largest |ref|, as in the seed)
  double rms_rel = 0;   // sqrt(sum (out-ref)^2 / sum ref^2)
  double nmse = 0;      // sum (out-ref)^2 / sum ref^2
  double max_ref = 0;   // max |ref|
  std::int64_t nan = 0, inf = 0;   // non-finite outputs where the reference is finite
  std::int64_t unwritten = 0;      // outputs still holding the poison pattern
  bool finite() const { return nan == 0 && inf == 0 && unwritten == 0; }
};

Accuracy accuracy(std::span<const float> out, std::span<const double> ref);
Accuracy accuracy(std::span<const float> out, std::span<const float> ref);
// A model's f64 output against an f64 reference (no poison check: a model writes every element).
Accuracy accuracy(std::span<const double> out, std::span<const double> ref);

// Number of elements whose bit patterns differ (sizes must match, else klab::Error).
std::int64_t bitwise_diff(std::span<const float> a, std::span<const float> b);

// A 64-bit FNV-1a hash of bytes, chained through `h` (determinism: the same seed must give the same
// inputs and the same verified outputs, bit for bit, run after run), and its text form "0x%016x"
// (JSON numbers cannot carry 64 bits to the scripts).
constexpr std::uint64_t kFnvOffset = 0xcbf29ce484222325ull;
std::uint64_t fnv1a64(const void* data, std::size_t bytes, std::uint64_t h = kFnvOffset);
template <class T>
std::uint64_t fnv1a64(std::span<const T> v, std::uint64_t h = kFnvOffset) {
  return fnv1a64(v.data(), v.size_bytes(), h);
}
std::string hash_hex(std::uint64_t h);

// The poison pattern written into outputs before each run: a quiet NaN with payload 0x0BAD.
constexpr std::uint32_t kPoisonBits = 0x7FC00BADu;
float poison_value();
bool is_poison(float v);

nlohmann::json to_json(const Accuracy& a);

}  // namespace klab
