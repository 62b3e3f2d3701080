// The f32 tier of the GDN projections: a plain warp-per-row f32 mat-vec (GDN's own copy: a variant
// never includes another variant's file). Tuning: none; on the H200 the f32 step runs at 67% of
// the read ceiling (reports/h200/, gdn-q4-layer: 0.152 ms per layer per token, 442 MB of weights).
#include "gdn/projection.hpp"

#include "klab/cuda.hpp"
#include "klab/error.hpp"

namespace klab::gdn {

namespace {
constexpr int kWarpsPerBlock = 8;

// w (rows, cols) row-major; x (cols); y (rows). Warp `row` computes
//   y[row] = sum_j w[row][j] * x[j]
// lane l sums j = l, l+32, ... (Vec4: the float4 groups l, l+32, ...) in increasing j, one fma chain;
// then the 32 lane sums meet in a butterfly (xor 16, 8, 4, 2, 1). Fixed order => deterministic.
template <bool Vec4>
__global__ void f32_matvec_kernel(const float* __restrict__ w, const float* __restrict__ x, float* __restrict__ y,
                                  std::int64_t rows, std::int64_t cols) {
  const std::int64_t row = std::int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;  // whole warps leave together: the shuffles below see full warps
  const float* wr = w + row * cols;
  float acc = 0.f;
  if constexpr (Vec4) {
    const float4* w4 = reinterpret_cast<const float4*>(wr);
    const float4* x4 = reinterpret_cast<const float4*>(x);
    for (std::int64_t j = lane; j < cols / 4; j += 32) {
      // Weights are read once per step: stream them past the caches (evict-first).
      const float4 a = __ldcs(w4 + j), b = x4[j];
      acc = fmaf(a.x, b.x, acc);
      acc = fmaf(a.y, b.y, acc);
      acc = fmaf(a.z, b.z, acc);
      acc = fmaf(a.w, b.w, acc);
    }
  } else {
    for (std::int64_t j = lane; j < cols; j += 32) acc = fmaf(__ldcs(wr + j), x[j], acc);
  }
  for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) y[row] = acc;
}

std::size_t checked(std::span<const float> w, std::int64_t rows, std::int64_t cols) {
  const std::string shape = std::to_string(rows) + "x" + std::to_string(cols);
  require(rows > 0 && cols > 0, "f32 projection: empty shape " + shape);
  require(std::int64_t(w.size()) == rows * cols, "f32 projection " + shape + ": given " + std::to_string(w.size()) + " weights");
  return w.size();
}

class F32Projection final : public Projection {
 public:
  // Checks the shape before allocating anything.
  F32Projection(std::span<const float> w, std::int64_t rows, std::int64_t cols) : rows_(rows), cols_(cols), w_(checked(w, rows, cols)) {
    w_.upload(w.data(), w.size());
  }
  std::int64_t rows() const override { return rows_; }
  std::int64_t cols() const override { return cols_; }
  std::string describe() const override { return "f32/warp-row"; }
  void enqueue(const float* x, float* y, cudaStream_t stream) const override { enqueue_f32_matvec(w_.get(), x, y, rows_, cols_, stream); }

 private:
  std::int64_t rows_, cols_;
  DeviceBuffer<float> w_;
};
}  // namespace

void enqueue_f32_matvec(const float* w, const float* x, float* y, std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  const auto grid = static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  // float4 loads need every row start 16-byte aligned: true when cols % 4 == 0 and w, x come from
  // cudaMalloc (256-byte aligned). The choice depends on the shape only, never on an address, so
  // every layer of one geometry takes the same path (the cross-layer bitwise check relies on it).
  if (cols % 4 == 0) f32_matvec_kernel<true><<<grid, kWarpsPerBlock * 32, 0, stream>>>(w, x, y, rows, cols);
  else f32_matvec_kernel<false><<<grid, kWarpsPerBlock * 32, 0, stream>>>(w, x, y, rows, cols);
  KLAB_CUDA_LAUNCH("f32_matvec_kernel");
}

std::unique_ptr<Projection> make_f32_projection(std::span<const float> w, std::int64_t rows, std::int64_t cols) {
  return std::make_unique<F32Projection>(w, rows, cols);
}

}  // namespace klab::gdn
