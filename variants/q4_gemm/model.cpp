// q4_gemm's host side: the kernels' limits, the workspace size and the bit-model.
#include <cstring>

#include "klab/error.hpp"
#include "q4_gemm/gemm.hpp"
#include "q4_gemm/op.hpp"
#include "q4_gemv/packed.hpp"
#include "q4_gemv/packed_kernels.hpp"
#include "q4_gemv/q4_gemv.hpp"

namespace klab::q4_gemm {

std::string launch_error(std::int64_t m, std::int64_t k, std::int64_t n) {
  if (auto why = q4_gemv::launch_error(m, k); !why.empty()) return why;
  // The batched kernel keeps map=packed's mapping (one thread per block of 32 weights), so its limit.
  if (auto why = q4_gemv::packed::packed_error(k); !why.empty()) return why;
  if (n < 1 || n > kMaxCols) return "n = " + std::to_string(n) + " is outside [1, " + std::to_string(kMaxCols) + "]";
  return "";
}

std::size_t workspace_bytes(std::int64_t k, std::int64_t n) { return std::size_t(n) * std::size_t(k / ref::kQ4Block) * 40; }

std::vector<float> model_batched(const ref::Q4Matrix& w, std::span<const float> x, std::int64_t n) {
  if (auto why = launch_error(w.m, w.k, n); !why.empty()) throw Error("q4_gemm bit-model: " + why);
  require(std::int64_t(x.size()) == n * w.k, "q4_gemm bit-model: X has " + std::to_string(x.size()) + " elements, n k = " + std::to_string(n * w.k));
  const std::size_t m = std::size_t(w.m), k = std::size_t(w.k);
  std::vector<float> y(std::size_t(n) * m);
  for (std::size_t j = 0; j < std::size_t(n); ++j) {
    const auto yj = q4_gemv::packed::model_as(q4_gemv::packed::Form::q8, w, x.subspan(j * k, k));
    std::memcpy(&y[j * m], yj.data(), m * sizeof(float));
  }
  return y;
}

}  // namespace klab::q4_gemm
