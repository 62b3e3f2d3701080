// The error budget of q4 weights: its math and its activation files (error_budget.hpp, namespace
// budget); the `error-budget` experiment over it is error_budget.cpp.
#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <stdexcept>

#include "error_budget.hpp"
#include "klab/error.hpp"
#include "klab/ref/npy.hpp"
#include "klab/ref/q4.hpp"
#include "klab/ref/safetensors.hpp"

namespace klab::experiments {

namespace budget {

void VecErr::add(double y, double ref) {
  const double d = y - ref;
  max_diff = std::max(max_diff, std::abs(d));
  max_ref = std::max(max_ref, std::abs(ref));
  sum_d2 += d * d;
  sum_r2 += ref * ref;
  ++n;
}

Result summarize(std::span<const VecErr> tokens) {
  Result r;
  double d2 = 0, r2 = 0;
  for (const VecErr& v : tokens) {
    d2 += v.sum_d2;
    r2 += v.sum_r2;
    r.n += v.n;
    const double rel = v.max_ref > 0 ? v.max_diff / v.max_ref : (v.max_diff > 0 ? std::numeric_limits<double>::infinity() : 0.0);
    r.max_rel = std::max(r.max_rel, rel);
  }
  r.rms_rel = r2 > 0 ? std::sqrt(d2 / r2) : (d2 > 0 ? std::numeric_limits<double>::infinity() : 0.0);
  r.tokens = int(tokens.size());
  return r;
}

std::vector<float> q8_0_roundtrip(std::span<const float> x) {
  constexpr std::size_t kBlock = 32;
  if (x.size() % kBlock != 0) throw std::invalid_argument("q8_0: " + std::to_string(x.size()) + " values, not a multiple of 32");
  std::vector<float> out(x.size());
  for (std::size_t b = 0; b < x.size(); b += kBlock) {
    float amax = 0.f;
    for (std::size_t j = 0; j < kBlock; ++j) amax = std::max(amax, std::fabs(x[b + j]));
    const float d = amax / 127.f;
    const float id = d != 0.f ? 1.0f / d : 0.0f;
    const float dh = ref::half_to_float_soft(ref::float_to_half(d));  // the scale as stored (f16)
    for (std::size_t j = 0; j < kBlock; ++j) {
      const float q = std::round(x[b + j] * id);  // roundf: halves away from zero, as ggml
      out[b + j] = std::clamp(q, -127.f, 127.f) * dh;
    }
  }
  return out;
}

std::vector<SetResult> run(const RowSource& w, std::int64_t m, std::int64_t k, const std::vector<InputSet>& sets, std::int64_t chunk) {
  if (auto why = ref::q4_shape_error(m, k); !why.empty()) throw std::invalid_argument("error budget: shape " + std::to_string(m) + "x" + std::to_string(k) + ": " + why);
  if (chunk < 1) throw std::invalid_argument("error budget: chunk must be positive");
  // Every set's tokens as the columns of one matrix: X (k, N) and X8 = q8_0(X) (k, N).
  std::int64_t N = 0;
  for (const auto& s : sets) {
    if (std::int64_t(s.x.size()) != std::int64_t(s.tokens) * k)
      throw std::invalid_argument("error budget: a set of " + std::to_string(s.tokens) + " tokens holds " + std::to_string(s.x.size()) + " values, k = " + std::to_string(k));
    N += s.tokens;
  }
  Eigen::MatrixXd X(k, N), X8(k, N);
  {
    std::int64_t col = 0;
    for (const auto& s : sets)
      for (int t = 0; t < s.tokens; ++t, ++col) {
        const std::span<const float> xt(s.x.data() + std::size_t(t) * std::size_t(k), std::size_t(k));
        const auto x8 = q8_0_roundtrip(xt);
        for (std::int64_t j = 0; j < k; ++j) {
          X(j, col) = xt[std::size_t(j)];
          X8(j, col) = x8[std::size_t(j)];
        }
      }
  }
  std::vector<VecErr> e32(static_cast<std::size_t>(N)), ea(static_cast<std::size_t>(N));
  std::vector<float> wc;
  using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  for (std::int64_t r0 = 0; r0 < m; r0 += chunk) {
    const std::int64_t rows = std::min(chunk, m - r0);
    wc.assign(std::size_t(rows * k), 0.f);
    w(r0, rows, wc);
    if (std::int64_t(wc.size()) != rows * k) throw std::invalid_argument("error budget: the row source gave " + std::to_string(wc.size()) + " weights for " + std::to_string(rows) + " rows");
    // Quantised row by row, so chunking does not change the q4 weights.
    const auto dq = ref::q4_dequantize(ref::q4_quantize(wc, rows, k));
    const RowMat W = Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(wc.data(), rows, k).cast<double>();
    const RowMat D = Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(dq.data(), rows, k).cast<double>();
    // ref = W x, y = dequant(W) x, y8 = dequant(W) q8_0(x): (rows, N) each, f64.
    const Eigen::MatrixXd R = W * X, Y = D * X, Y8 = D * X8;
    for (std::int64_t c = 0; c < N; ++c)
      for (std::int64_t i = 0; i < rows; ++i) {
        e32[std::size_t(c)].add(Y(i, c), R(i, c));
        ea[std::size_t(c)].add(Y8(i, c), Y(i, c));
      }
  }
  std::vector<SetResult> out;
  std::size_t c = 0;
  for (const auto& s : sets) {
    const std::size_t n = std::size_t(s.tokens);
    out.push_back({summarize(std::span<const VecErr>(e32.data() + c, n)), summarize(std::span<const VecErr>(ea.data() + c, n))});
    c += std::size_t(s.tokens);
  }
  return out;
}

std::pair<std::string, std::string> split_spec(const std::string& spec) {
  const std::string ext = ".safetensors";
  const auto pos = spec.rfind(ext + ":");
  if (pos == std::string::npos) return {spec, ""};
  return {spec.substr(0, pos + ext.size()), spec.substr(pos + ext.size() + 1)};
}

Activations load_activations(const std::string& spec) {
  namespace fs = std::filesystem;
  const auto [path, tensor] = split_spec(spec);
  Activations a;
  a.source = spec;
  std::vector<std::int64_t> shape;
  try {
    if (fs::path(path).extension() == ".npy") {
      auto arr = ref::npy::read(path);
      shape = arr.shape;
      a.data = std::move(arr.data);
    } else if (fs::path(path).extension() == ".safetensors") {
      const auto f = ref::safetensors::File::open(path);
      if (tensor.empty()) {
        std::string names;
        for (const auto& t : f.tensors()) names += (names.empty() ? "" : ", ") + t.name + " " + t.shape_str();
        throw Error("activations '" + spec + "': name the tensor as PATH.safetensors:TENSOR (the file holds: " + names + ")");
      }
      shape = f.at(tensor).shape;
      a.data = f.read_f32(tensor);
    } else {
      throw Error("activations '" + spec + "': expected PATH.npy or PATH.safetensors:TENSOR");
    }
  } catch (const ref::npy::FormatError& e) {
    throw Error(std::string("activations: ") + e.what());
  } catch (const ref::safetensors::FormatError& e) {
    throw Error(std::string("activations: ") + e.what());
  }
  a.k = shape.empty() ? 1 : shape.back();
  require(a.k > 0 && !a.data.empty(), "activations '" + spec + "': the array is empty");
  a.tokens = std::int64_t(a.data.size()) / a.k;
  for (float v : a.data) require(std::isfinite(v), "activations '" + spec + "': a value is not finite");
  return a;
}

}  // namespace budget

}  // namespace klab::experiments
