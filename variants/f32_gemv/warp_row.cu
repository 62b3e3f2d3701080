// f32_gemv/impl=warp-row: one warp per output row; each lane walks the row with 16-byte loads
// (when k % 4 == 0, else 4-byte loads), one accumulator, then a butterfly shuffle reduction.
#include "f32_gemv/variants.hpp"

#include "klab/cuda.hpp"

namespace klab::f32_gemv {

namespace {
constexpr int kWarpsPerBlock = 8;

template <bool Vec4>
__global__ void warp_row_kernel(const float* __restrict__ w, const float* __restrict__ x, float* __restrict__ y, int m, int k) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= m) return;
  const float* wr = w + static_cast<std::size_t>(row) * k;
  float acc = 0.f;
  if constexpr (Vec4) {
    const float4* w4 = reinterpret_cast<const float4*>(wr);
    const float4* x4 = reinterpret_cast<const float4*>(x);
    for (int j = lane; j < k / 4; j += 32) {
      float4 a = __ldcs(w4 + j), b = x4[j];
      acc = fmaf(a.x, b.x, acc);
      acc = fmaf(a.y, b.y, acc);
      acc = fmaf(a.z, b.z, acc);
      acc = fmaf(a.w, b.w, acc);
    }
  } else {
    for (int j = lane; j < k; j += 32) acc = fmaf(__ldcs(wr + j), x[j], acc);
  }
  for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) y[row] = acc;
}

class WarpRow : public Instance {
 public:
  explicit WarpRow(const Workload& wl)
      : m_(int(wl.problem.shape.m)), k_(int(wl.problem.shape.k)), w_(DeviceBuffer<float>::from(wl.w)),
        x_(DeviceBuffer<float>::from(wl.x)), y_(std::size_t(m_)) {}
  void run(cudaStream_t s) override {
    const unsigned grid = unsigned((m_ + kWarpsPerBlock - 1) / kWarpsPerBlock);
    if (k_ % 4 == 0) warp_row_kernel<true><<<grid, kWarpsPerBlock * 32, 0, s>>>(w_.get(), x_.get(), y_.get(), m_, k_);
    else warp_row_kernel<false><<<grid, kWarpsPerBlock * 32, 0, s>>>(w_.get(), x_.get(), y_.get(), m_, k_);
    KLAB_CUDA_LAUNCH("warp_row_kernel");
  }
  void poison(cudaStream_t s) override { poison_device(y_.get(), y_.size(), s); }
  std::vector<float> output() override { return y_.download(); }

 private:
  int m_, k_;
  DeviceBuffer<float> w_, x_, y_;
};
}  // namespace

Variant warp_row_variant() {
  Variant v;
  v.op = "f32_gemv";
  v.axes = {{"impl", "warp-row"}};
  v.name = variant_name(v.op, v.axes);
  v.description = "one warp per row, float4 loads, one accumulator, shuffle reduction";
  v.make = [](const klab::Workload& wl) { return std::unique_ptr<Instance>(new WarpRow(workload_of(wl))); };
  return v;
}

}  // namespace klab::f32_gemv
