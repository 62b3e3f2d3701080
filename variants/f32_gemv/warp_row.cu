// f32_gemv/impl=warp-row,unroll=U: one warp per output row; each lane walks the row with 16-byte
// loads (when k % 4 == 0, else 4-byte loads), then a butterfly shuffle reduction.
//   unroll=1: one load in flight per lane, one accumulator (the plain kernel).
//   unroll=4: four independent 16-byte loads issued before their first use, four accumulators
//             summed at the end: more bytes in flight per warp to hide DRAM latency.
//   unroll=8: eight (added 2026-12-02 for the GDN f32 tier's candidate, with pdl=on: more of W in
//             flight before the wait).
#include "f32_gemv/kernels.hpp"
#include "f32_gemv/variants.hpp"
#include "klab/error.hpp"

#include "klab/cuda.hpp"

namespace klab::f32_gemv {

namespace {
constexpr int kWarpsPerBlock = 8;

// The kernel's code for one x and y: warp_row_kernel runs it on its pointers, warp_row_cols_kernel on
// column blockIdx.y's. Pdl (pdl=on): dependents let go first, the lane's first Unroll loads of W
// issued before griddepcontrol.wait, x read and y written after it: the same loads, the same fmas in
// the same order, so the same bits as pdl=off.
// block: the block's index among the matrix's ceil(m / 8) blocks (blockIdx.x, or less in a stacked launch).
template <bool Vec4, int Unroll, bool Pdl = false>
__device__ __forceinline__ void warp_row_body(const float* __restrict__ w, const float* __restrict__ x, float* __restrict__ y, int m, int k, int block) {
  if constexpr (Pdl) asm volatile("griddepcontrol.launch_dependents;");
  const int row = block * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= m) return;
  const float* wr = w + static_cast<std::size_t>(row) * k;
  float acc[Unroll] = {};
  if constexpr (Vec4) {
    const float4* w4 = reinterpret_cast<const float4*>(wr);
    const float4* x4 = reinterpret_cast<const float4*>(x);
    const int n4 = k / 4;
    int j = lane;
    float4 a[Unroll];
    bool loaded = false;  // a[] already holds stride j's loads (pdl=on: issued before the wait)
    if constexpr (Pdl) {
      if (j + 32 * (Unroll - 1) < n4) {
#pragma unroll
        for (int u = 0; u < Unroll; ++u) a[u] = __ldcs(w4 + j + 32 * u);
        loaded = true;
      }
      asm volatile("griddepcontrol.wait;" ::: "memory");
    }
    for (; j + 32 * (Unroll - 1) < n4; j += 32 * Unroll) {
      if (!loaded) {
#pragma unroll
        for (int u = 0; u < Unroll; ++u) a[u] = __ldcs(w4 + j + 32 * u);  // all loads before any use
      }
      loaded = false;
#pragma unroll
      for (int u = 0; u < Unroll; ++u) {
        const float4 b = x4[j + 32 * u];
        acc[u] = fmaf(a[u].x, b.x, acc[u]);
        acc[u] = fmaf(a[u].y, b.y, acc[u]);
        acc[u] = fmaf(a[u].z, b.z, acc[u]);
        acc[u] = fmaf(a[u].w, b.w, acc[u]);
      }
    }
    for (; j < n4; j += 32) {  // the tail: fewer than Unroll strides left
      const float4 a = __ldcs(w4 + j), b = x4[j];
      acc[0] = fmaf(a.x, b.x, acc[0]);
      acc[0] = fmaf(a.y, b.y, acc[0]);
      acc[0] = fmaf(a.z, b.z, acc[0]);
      acc[0] = fmaf(a.w, b.w, acc[0]);
    }
  } else {
    if constexpr (Pdl) asm volatile("griddepcontrol.wait;" ::: "memory");
    for (int j = lane; j < k; j += 32) acc[0] = fmaf(__ldcs(wr + j), x[j], acc[0]);
  }
#pragma unroll
  for (int u = 1; u < Unroll; ++u) acc[0] += acc[u];
  float sum = acc[0];
  for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  if (lane == 0) y[row] = sum;
}

template <bool Vec4, int Unroll, bool Pdl>
__global__ void warp_row_kernel(const float* __restrict__ w, const float* __restrict__ x, float* __restrict__ y, int m, int k) {
  warp_row_body<Vec4, Unroll, Pdl>(w, x, y, m, k, int(blockIdx.x));
}

// Up to three matrices of k columns on one x, their blocks one after the other: matrix 0's blocks
// [0, start1), matrix 1's [start1, start2), matrix 2's [start2, grid). Each a pointer parameter of its
// own (__restrict__, no indexed parameter array): written so after a form that picked the matrix from
// an array in a by-value struct measured 6.17 against the two-branch pair kernel's 5.73 ms per token
// in gdn-stack's f32 tier (H200, 2026-12-02, reports/h200/run-55c260c against run-311735f).
template <bool Vec4, int Unroll, bool Pdl>
__global__ void warp_row_stacked_kernel(const float* __restrict__ w0, float* __restrict__ y0, int m0, const float* __restrict__ w1, float* __restrict__ y1,
                                        int m1, const float* __restrict__ w2, float* __restrict__ y2, int m2, const float* __restrict__ x, int k, int start1,
                                        int start2) {
  const int b = int(blockIdx.x);
  if (b < start1) warp_row_body<Vec4, Unroll, Pdl>(w0, x, y0, m0, k, b);
  else if (b < start2) warp_row_body<Vec4, Unroll, Pdl>(w1, x, y1, m1, k, b - start1);
  else warp_row_body<Vec4, Unroll, Pdl>(w2, x, y2, m2, k, b - start2);
}

// Column j = blockIdx.y: x_j at x + j k, y_j at y + j m.
template <bool Vec4, int Unroll, bool Pdl>
__global__ void warp_row_cols_kernel(const float* __restrict__ w, const float* __restrict__ x, float* __restrict__ y, int m, int k) {
  const std::size_t j = blockIdx.y;
  warp_row_body<Vec4, Unroll, Pdl>(w, x + j * std::size_t(k), y + j * std::size_t(m), m, k, int(blockIdx.x));
}

template <int Unroll, bool Pdl>
void launch_warp_row(const float* w, const float* x, float* y, int m, int k, cudaStream_t s) {
  const unsigned grid = unsigned((m + kWarpsPerBlock - 1) / kWarpsPerBlock);
  if (k % 4 == 0) launch_maybe_pdl(Pdl, warp_row_kernel<true, Unroll, Pdl>, dim3(grid), dim3(kWarpsPerBlock * 32), 0, s, w, x, y, m, k);
  else launch_maybe_pdl(Pdl, warp_row_kernel<false, Unroll, Pdl>, dim3(grid), dim3(kWarpsPerBlock * 32), 0, s, w, x, y, m, k);
  KLAB_CUDA_LAUNCH("warp_row_kernel");
}

template <int Unroll, bool Pdl>
void launch_warp_row_stacked(const StackedRows* rows, int n, const float* x, int k, cudaStream_t s) {
  require(n >= 1 && n <= kMaxStacked, "f32_gemv launch_stacked (impl=warp-row): n = " + std::to_string(n) + " matrices, 1 to " + std::to_string(kMaxStacked));
  require(k >= 1 && x != nullptr, "f32_gemv launch_stacked (impl=warp-row): k = " + std::to_string(k) + " (at least 1) and a non-null x");
  int start[kMaxStacked + 1] = {0, 0, 0, 0};
  for (int i = 0; i < n; ++i) {
    require(rows[i].m >= 1 && rows[i].w && rows[i].y, "f32_gemv launch_stacked (impl=warp-row): matrix " + std::to_string(i) + ": m = " +
                                                          std::to_string(rows[i].m) + " (at least 1) and non-null w and y");
    start[i + 1] = start[i] + (rows[i].m + kWarpsPerBlock - 1) / kWarpsPerBlock;
  }
  for (int i = n; i < kMaxStacked; ++i) start[i + 1] = start[i];  // absent matrices: no blocks
  const StackedRows none{rows[0].w, rows[0].y, rows[0].m};          // never reached (no blocks), but valid pointers
  const StackedRows& r1 = n > 1 ? rows[1] : none;
  const StackedRows& r2 = n > 2 ? rows[2] : none;
  const dim3 grid{unsigned(start[kMaxStacked])}, block{unsigned(kWarpsPerBlock * 32)};
  if (k % 4 == 0)
    launch_maybe_pdl(Pdl, warp_row_stacked_kernel<true, Unroll, Pdl>, grid, block, 0, s, rows[0].w, rows[0].y, rows[0].m, r1.w, r1.y, r1.m, r2.w, r2.y, r2.m, x,
                     k, start[1], start[2]);
  else
    launch_maybe_pdl(Pdl, warp_row_stacked_kernel<false, Unroll, Pdl>, grid, block, 0, s, rows[0].w, rows[0].y, rows[0].m, r1.w, r1.y, r1.m, r2.w, r2.y, r2.m,
                     x, k, start[1], start[2]);
  KLAB_CUDA_LAUNCH("warp_row_stacked_kernel");
}

template <int Unroll, bool Pdl>
void launch_warp_row_cols(const float* w, const float* x, float* y, int m, int k, int n, cudaStream_t s) {
  require(n >= 1 && n <= 65535, "f32_gemv launch_cols (impl=warp-row): n = " + std::to_string(n) + " outside [1, 65535] (grid.y)");
  const dim3 grid(unsigned((m + kWarpsPerBlock - 1) / kWarpsPerBlock), unsigned(n));
  if (k % 4 == 0) launch_maybe_pdl(Pdl, warp_row_cols_kernel<true, Unroll, Pdl>, grid, dim3(kWarpsPerBlock * 32), 0, s, w, x, y, m, k);
  else launch_maybe_pdl(Pdl, warp_row_cols_kernel<false, Unroll, Pdl>, grid, dim3(kWarpsPerBlock * 32), 0, s, w, x, y, m, k);
  KLAB_CUDA_LAUNCH("warp_row_cols_kernel");
}

}  // namespace

F32Instance::F32Instance(const Workload& wl, Launch launch)
    : launch_(launch), m_(int(wl.problem.shape.m)), k_(int(wl.problem.shape.k)), w_(DeviceBuffer<float>::from(wl.w)),
      x_(DeviceBuffer<float>::from(wl.x)), y_(std::size_t(m_)) {}
void F32Instance::run(cudaStream_t s) { launch_(w_.get(), x_.get(), y_.get(), m_, k_, s); }
void F32Instance::poison(cudaStream_t s) { poison_device(y_.get(), y_.size(), s); }
std::vector<float> F32Instance::output() { return y_.download(); }

template <int Unroll, bool Pdl>
Variant warp_row_variant() {
  Variant v;
  v.op = "f32_gemv";
  v.axes = {{"impl", "warp-row"}, {"unroll", std::to_string(Unroll)}};
  if (Pdl) v.axes.push_back({"pdl", "on"});
  v.name = variant_name(v.op, v.axes);
  v.description = (Unroll == 1 ? std::string("one warp per row, float4 loads, one accumulator, shuffle reduction")
                               : "one warp per row, " + std::to_string(Unroll) + " float4 loads in flight per lane, " + std::to_string(Unroll) +
                                     " accumulators, shuffle reduction") +
                  (Pdl ? "; programmatic dependent launch (the first loads of W before the wait, x after it; pdl=off's bits)" : "");
  v.make = [](const klab::Workload& wl) { return std::unique_ptr<Instance>(new F32Instance(workload_of(wl), &launch_warp_row<Unroll, Pdl>)); };
  return v;
}
template Variant warp_row_variant<1, false>();
template Variant warp_row_variant<4, false>();
template Variant warp_row_variant<4, true>();
template Variant warp_row_variant<8, false>();
template Variant warp_row_variant<8, true>();

const std::vector<F32Kernel>& f32_kernels() {
  static const std::vector<F32Kernel> ks{
      {warp_row_variant<1, false>().name, &launch_warp_row<1, false>, nullptr, &launch_warp_row_cols<1, false>, &launch_warp_row_stacked<1, false>},
      {warp_row_variant<4, false>().name, &launch_warp_row<4, false>, nullptr, &launch_warp_row_cols<4, false>, &launch_warp_row_stacked<4, false>},
      {warp_row_variant<4, true>().name, &launch_warp_row<4, true>, nullptr, &launch_warp_row_cols<4, true>, &launch_warp_row_stacked<4, true>},
      {warp_row_variant<8, false>().name, &launch_warp_row<8, false>, nullptr, &launch_warp_row_cols<8, false>, &launch_warp_row_stacked<8, false>},
      {warp_row_variant<8, true>().name, &launch_warp_row<8, true>, nullptr, &launch_warp_row_cols<8, true>, &launch_warp_row_stacked<8, true>},
                                         {split_row_variant<false>().name, split_row_launcher(false), &split_row_error, split_row_cols_launcher(false)},
                                         {split_row_variant<true>().name, split_row_launcher(true), &split_row_error, split_row_cols_launcher(true)}};
  return ks;
}

const F32Kernel& f32_kernel(const std::string& name) {
  std::string known;
  for (const auto& k : f32_kernels()) {
    if (k.name == name) return k;
    known += (known.empty() ? "" : ", ") + k.name;
  }
  throw Error("unknown f32 kernel '" + name + "' (known: " + known + ")");
}

}  // namespace klab::f32_gemv
