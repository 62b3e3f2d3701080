#pragma once
#include <cuda_runtime.h>

#include "f32_gemv/op.hpp"
#include "klab/cuda.hpp"

namespace klab::f32_gemv {
// impl=warp-row,unroll=U[,pdl=on] (warp_row.cu): a warp per row; unroll 1, 4, 8; pdl=on with 4 and 8.
template <int Unroll, bool Pdl = false>
Variant warp_row_variant();
// impl=split-row,pdl=P (split_row.cu): a thread block per row, every load of the row issued at once.
template <bool Pdl>
Variant split_row_variant();
// Its raw launcher (kernels.hpp's F32Kernel::launch), and why it cannot take an m x k problem.
void (*split_row_launcher(bool pdl))(const float*, const float*, float*, int, int, cudaStream_t);
void (*split_row_cols_launcher(bool pdl))(const float*, const float*, float*, int, int, int, cudaStream_t);
std::string split_row_error(std::int64_t m, std::int64_t k);

// One f32_gemv kernel bound to a workload: W and x uploaded once; run() only launches.
class F32Instance : public Instance {
 public:
  using Launch = void (*)(const float* w, const float* x, float* y, int m, int k, cudaStream_t s);
  F32Instance(const Workload& wl, Launch launch);
  void run(cudaStream_t s) override;
  void poison(cudaStream_t s) override;
  std::vector<float> output() override;

 private:
  Launch launch_;
  int m_, k_;
  DeviceBuffer<float> w_, x_, y_;
};
// Registers the op and its variants.
void register_all(Registry& r);
}  // namespace klab::f32_gemv
