// The f32 tier of the GDN projections: an f32_gemv kernel chosen by its registry name
// (f32_gemv/kernels.hpp), the same kernel its variant times. The default is the plain warp-row
// kernel (f32_gemv/impl=warp-row,unroll=1): the GDN step's own copy of it, kept until 2026-12-01,
// computed the same bits (one fma chain per lane over float4 groups l, l+32, ..., then a butterfly).
#include "gdn/projection.hpp"

#include "f32_gemv/kernels.hpp"
#include "klab/cuda.hpp"
#include "klab/error.hpp"

namespace klab::gdn {

namespace {

std::size_t checked(std::span<const float> w, std::int64_t rows, std::int64_t cols) {
  const std::string shape = std::to_string(rows) + "x" + std::to_string(cols);
  require(rows > 0 && cols > 0, "f32 projection: empty shape " + shape);
  require(rows < (std::int64_t(1) << 31) && cols < (std::int64_t(1) << 31), "f32 projection " + shape + ": a dimension past 2^31");
  require(std::int64_t(w.size()) == rows * cols, "f32 projection " + shape + ": given " + std::to_string(w.size()) + " weights");
  return w.size();
}

class F32Projection final : public Projection {
 public:
  // Checks the shape and the kernel's name before allocating anything.
  F32Projection(std::span<const float> w, std::int64_t rows, std::int64_t cols, const std::string& kernel)
      : kernel_(&f32_gemv::f32_kernel(kernel)), rows_(rows), cols_(cols), w_(checked(w, rows, cols)) {
    w_.upload(w.data(), w.size());
  }
  std::int64_t rows() const override { return rows_; }
  std::int64_t cols() const override { return cols_; }
  std::string describe() const override { return "f32/" + kernel_->name; }
  void enqueue(const float* x, float* y, cudaStream_t stream) const override {
    kernel_->launch(w_.get(), x, y, int(rows_), int(cols_), stream);
  }
  const float* f32_weights() const override { return w_.get(); }

 private:
  const f32_gemv::F32Kernel* kernel_;
  std::int64_t rows_, cols_;
  DeviceBuffer<float> w_;
};

}  // namespace

void enqueue_f32_matvec(const float* w, const float* x, float* y, std::int64_t rows, std::int64_t cols, cudaStream_t stream, const std::string& kernel) {
  f32_gemv::f32_kernel(kernel).launch(w, x, y, int(rows), int(cols), stream);
}

std::unique_ptr<Projection> make_f32_projection(std::span<const float> w, std::int64_t rows, std::int64_t cols, const std::string& kernel) {
  return std::make_unique<F32Projection>(w, rows, cols, kernel);
}

}  // namespace klab::gdn
