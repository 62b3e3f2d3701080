#pragma once
// The f32_gemv kernels as raw launchers, by their registry names: what other families compose
// (the GDN step's f32 projections and its b|a projection run one of these, chosen by name), so a
// kernel lives in one place and is chosen one way. Each launcher is the kernel its variant times.
#include <cuda_runtime.h>

#include <string>
#include <vector>

namespace klab::f32_gemv {

struct StackedRows {
  const float* w = nullptr;  // (m, k) row-major
  float* y = nullptr;        // (m)
  int m = 0;
};
inline constexpr int kMaxStacked = 3;

struct F32Kernel {
  std::string name;  // the variant's name, e.g. "f32_gemv/impl=warp-row,unroll=1"
  // Enqueues y = W x on `stream`: w (m, k) row-major, x (k), y (m), device pointers (w and x from
  // cudaMalloc: 16-byte aligned rows when k % 4 == 0). No allocation, no sync. Deterministic: the
  // same inputs give the same bits on every run.
  void (*launch)(const float* w, const float* x, float* y, int m, int k, cudaStream_t stream);
  // Why it cannot take an m x k problem ("" when it can; nullptr: it takes every shape).
  std::string (*can_implement)(std::int64_t m, std::int64_t k) = nullptr;
  // The same kernel over n columns in ONE launch (grid.y = column j, n <= 65535): x_j at x + j k,
  // y_j at y + j m (x as `launch` wants it; with k % 4 == 0 every x_j is then 16-byte aligned). Column j
  // runs the kernel's code for one column (one device function) on x_j and y_j, so y_j is bit for bit
  // `launch` on x_j. W is read once per column (from L2 after the first): one launch, not one read.
  void (*launch_cols)(const float* w, const float* x, float* y, int m, int k, int n, cudaStream_t stream) = nullptr;
  // Up to kMaxStacked matrices of k columns on one x in ONE launch (nullptr: the kernel has none):
  // y_i = W_i x for each StackedRows {w (m, k), y (m), m >= 1}. The grid is their launches' grids one
  // after the other, every row running the kernel's code for one row, so each y_i is bit for bit
  // `launch` on W_i (the GDN f32 tier's in_proj_qkv and in_proj_z, and b|a riding along, as one
  // launch: GdnDevice::set_merged_in, set_fold_ba_main). Throws klab::Error before launching for n
  // outside [1, kMaxStacked], a size below 1 or a null pointer.
  void (*launch_stacked)(const StackedRows* rows, int n, const float* x, int k, cudaStream_t stream) = nullptr;
};

// Our f32 kernels (the cuBLAS peer has no raw launcher), in registration order.
const std::vector<F32Kernel>& f32_kernels();
// The kernel named `name`; throws klab::Error naming the known ones when there is none.
const F32Kernel& f32_kernel(const std::string& name);

}  // namespace klab::f32_gemv
