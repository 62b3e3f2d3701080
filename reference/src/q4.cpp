#include "klab/ref/q4.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#if !defined(__FLT16_MAX__)
#error "klab_reference needs the compiler's _Float16 (GCC >= 12 or Clang >= 15 on x86-64 / AArch64) for the host f16 conversion"
#endif

namespace klab::ref {

float half_to_float_compiler(std::uint16_t h) {
  _Float16 v;
  std::memcpy(&v, &h, sizeof v);
  return static_cast<float>(v);
}

std::uint16_t float_to_half(float f) {
  const _Float16 v = static_cast<_Float16>(f);
  std::uint16_t h;
  std::memcpy(&h, &v, sizeof h);
  return h;
}

float bf16_to_float(std::uint16_t b) {
  const std::uint32_t bits = std::uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

std::uint16_t float_to_bf16(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if (std::isnan(f)) return std::uint16_t((bits >> 16) | 0x40u);  // keep it a (quiet) NaN
  // Round to nearest even on the 16 bits dropped: add 0x7FFF plus the lowest kept bit.
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return std::uint16_t(bits >> 16);
}

std::vector<std::uint16_t> to_bf16(std::span<const float> x) {
  std::vector<std::uint16_t> b(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) b[i] = float_to_bf16(x[i]);
  return b;
}

std::vector<float> from_bf16(std::span<const std::uint16_t> b) {
  std::vector<float> x(b.size());
  for (std::size_t i = 0; i < b.size(); ++i) x[i] = bf16_to_float(b[i]);
  return x;
}

std::string q4_shape_error(std::int64_t m, std::int64_t k) {
  if (m <= 0 || k <= 0) return "empty shape " + std::to_string(m) + "x" + std::to_string(k) + " (both dimensions must be positive)";
  if (k % kQ4Block != 0)
    return "K = " + std::to_string(k) + " is not a multiple of 32 (q4 keeps one f16 scale per block of 32 weights along a row)";
  return "";
}

void Q4Matrix::check() const {
  if (auto why = q4_shape_error(m, k); !why.empty()) throw std::invalid_argument("q4 matrix: " + why);
  if (std::int64_t(codes.size()) != m * (k / 2) || std::int64_t(scales.size()) != m * (k / kQ4Block))
    throw std::invalid_argument("q4 matrix " + std::to_string(m) + "x" + std::to_string(k) + ": " + std::to_string(codes.size()) +
                                " code bytes and " + std::to_string(scales.size()) + " scales, expected " + std::to_string(m * (k / 2)) +
                                " and " + std::to_string(m * (k / kQ4Block)));
}

namespace {
void check_input(std::size_t n, std::int64_t m, std::int64_t k, const char* what) {
  if (auto why = q4_shape_error(m, k); !why.empty()) throw std::invalid_argument(std::string(what) + ": " + why);
  if (std::int64_t(n) != m * k)
    throw std::invalid_argument(std::string(what) + ": W has " + std::to_string(n) + " elements for a " + std::to_string(m) + "x" +
                                std::to_string(k) + " matrix");
}

// Quantises weights given by a getter (f32 values), block by block, by the rule in q4.hpp.
template <class Get>
Q4Matrix quantize_with(Get get, std::int64_t m, std::int64_t k) {
  Q4Matrix q;
  q.m = m;
  q.k = k;
  q.codes.assign(std::size_t(m * (k / 2)), 0);
  q.scales.assign(std::size_t(m * (k / kQ4Block)), 0);
  const std::int64_t nb = k / kQ4Block;
  float w[kQ4Block];
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t b = 0; b < nb; ++b) {
      float amax = 0.f;
      for (int t = 0; t < kQ4Block; ++t) {
        const std::int64_t j = b * kQ4Block + t;
        w[t] = get(i * k + j);
        if (!std::isfinite(w[t]))
          throw std::invalid_argument("q4 quantise: weight (" + std::to_string(i) + ", " + std::to_string(j) + ") is not finite");
        amax = std::max(amax, std::abs(w[t]));
      }
      // scale = f16(amax / 7), saturated at the largest finite f16.
      std::uint16_t sh = float_to_half(amax / 7.f);
      if ((sh & 0x7C00u) == 0x7C00u) sh = 0x7BFFu;  // amax / 7 >= 65520 rounded to inf: clip
      q.scales[std::size_t(i * nb + b)] = sh;
      const double s = half_to_float_soft(sh);
      for (int t = 0; t < kQ4Block; t += 2) {
        int n[2] = {0, 0};
        if (s != 0.0)
          for (int u = 0; u < 2; ++u) n[u] = int(std::clamp(std::round(double(w[t + u]) / s), -8.0, 7.0));
        // even column in the low nibble, odd column in the high nibble.
        q.codes[std::size_t(i * (k / 2) + (b * kQ4Block + t) / 2)] = std::uint8_t((n[0] & 0xF) | ((n[1] & 0xF) << 4));
      }
    }
  }
  return q;
}
}  // namespace

Q4Matrix q4_quantize(std::span<const float> w, std::int64_t m, std::int64_t k) {
  check_input(w.size(), m, k, "q4 quantise");
  return quantize_with([&](std::int64_t idx) { return w[std::size_t(idx)]; }, m, k);
}

Q4Matrix q4_quantize_f16(std::span<const std::uint16_t> w, std::int64_t m, std::int64_t k) {
  check_input(w.size(), m, k, "q4 quantise (f16)");
  return quantize_with([&](std::int64_t idx) { return half_to_float_soft(w[std::size_t(idx)]); }, m, k);
}

Q4Matrix q4_quantize_bf16(std::span<const std::uint16_t> w, std::int64_t m, std::int64_t k) {
  check_input(w.size(), m, k, "q4 quantise (bf16)");
  return quantize_with([&](std::int64_t idx) { return bf16_to_float(w[std::size_t(idx)]); }, m, k);
}

std::vector<float> q4_dequantize(const Q4Matrix& q) {
  q.check();
  std::vector<float> out(std::size_t(q.m * q.k));
  for (std::int64_t i = 0; i < q.m; ++i)
    for (std::int64_t j = 0; j < q.k; ++j) out[std::size_t(i * q.k + j)] = q.value(i, j);
  return out;
}

namespace {
void check_x(const Q4Matrix& q, std::span<const float> x) {
  q.check();
  if (std::int64_t(x.size()) != q.k)
    throw std::invalid_argument("q4 gemv reference: x has " + std::to_string(x.size()) + " elements, W has k = " + std::to_string(q.k));
}
}  // namespace

std::vector<double> q4_gemv_f64(const Q4Matrix& q, std::span<const float> x) {
  check_x(q, x);
  const Eigen::VectorXd xd = Eigen::Map<const Eigen::VectorXf>(x.data(), q.k).cast<double>();
  std::vector<double> y(std::size_t(q.m));
  Eigen::Map<Eigen::VectorXd> Y(y.data(), q.m);
  // Dequantise 256 rows at a time into f64 (exact), so the whole f64 W never needs to exist.
  constexpr std::int64_t kRows = 256;
  Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> W;
  for (std::int64_t r0 = 0; r0 < q.m; r0 += kRows) {
    const std::int64_t rows = std::min(kRows, q.m - r0);
    W.resize(rows, q.k);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t b = 0; b < q.blocks_per_row(); ++b) {
        const double s = q.scale(r0 + r, b);
        for (std::int64_t j = b * kQ4Block; j < (b + 1) * kQ4Block; ++j) W(r, j) = double(q.code(r0 + r, j)) * s;
      }
    Y.segment(r0, rows).noalias() = W * xd;
  }
  return y;
}

std::vector<double> q4_gemv_naive(const Q4Matrix& q, std::span<const float> x) {
  check_x(q, x);
  std::vector<double> y(std::size_t(q.m));
  for (std::int64_t i = 0; i < q.m; ++i) {
    double s = 0;
    for (std::int64_t j = 0; j < q.k; ++j) s += double(q.code(i, j)) * double(q.scale(i, j / kQ4Block)) * double(x[std::size_t(j)]);
    y[std::size_t(i)] = s;
  }
  return y;
}

}  // namespace klab::ref
