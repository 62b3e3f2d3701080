// f32_gemv/impl=split-row,pdl=P: one thread block of 256 threads per output row, for the short-and-
// wide mat-vecs of a decode step (the GDN step's b|a: 96 x 5120, 2 MB). Measured on the H200
// (reports/h200/run-30bee11, 2026-12-01, stream mode): at 96x5120 pdl=on 0.0023 ms against
// warp-row,unroll=1's 0.0155 ms (x6.8), pdl=off 0.0028 ms; at the four seed shapes slower than
// warp-row,unroll=4 (17408x5120: pdl=off 0.0865, pdl=on 0.0923 against 0.0811 ms).
//
// Why: warp-row gives b|a 12 thread blocks of 8 warps, one warp walking a whole 20 KB row with one
// (unroll=1) or four 16-byte loads in flight; Nsight measured the b|a launch at 12.1 us inside the
// step (H200, issue 14's table) for 2 MB, a byte floor of 0.4 us. Here each of the m blocks holds its
// whole row in flight at once: thread t loads the float4s t, t + 256, ... (at most kMaxPer = 8 each,
// so k <= 8192), every load issued before the first use, then dots them with x.
//
// pdl=on (launched with programmatic stream serialization): dependents are let go first, the row's
// loads (W depends on no predecessor) are issued before griddepcontrol.wait, and x, which a
// predecessor may write, is read after it; nothing is written before it. pdl=off: the same kernel
// launched plainly (the wait and the trigger are then no-ops). The same bits either way.
//
// Arithmetic (fixed order, no atomics): a thread's fma chain over its float4s in order (x, y, z, w
// within each), a butterfly over the warp (xor 16 .. 1), then thread 0 adds the 8 warps' sums in
// warp order. Not warp-row's order: a tolerance against it, not bits.
#include "f32_gemv/kernels.hpp"
#include "f32_gemv/split_row.cuh"
#include "f32_gemv/variants.hpp"
#include "klab/cuda.hpp"
#include "klab/error.hpp"

namespace klab::f32_gemv {

namespace {
using split_row::kMaxK;
using split_row::kMaxPer;
using split_row::kThreads;
}  // namespace

std::string split_row_error(std::int64_t m, std::int64_t k) {
  if (m < 1 || k < 1) return "empty shape";
  if (k % 4 != 0) return "k = " + std::to_string(k) + " is not a multiple of 4 (impl=split-row loads float4)";
  if (k > kMaxK) return "k = " + std::to_string(k) + " exceeds impl=split-row's " + std::to_string(kMaxK) + " (256 threads x 8 float4 in flight)";
  if (m > 2147483647) return "m over 2^31 - 1 (grid.x)";
  return "";
}

namespace {

// The kernel's code for one x and y (split_row.cuh: split_row::body, also run by the GDN step's
// in_prep_ba): split_row_kernel runs it on its pointers, split_row_cols_kernel on column blockIdx.y's.
template <bool Pdl>
__device__ __forceinline__ void split_row_body(const float* __restrict__ w, const float* __restrict__ x, float* __restrict__ y, int k) {
  split_row::body<Pdl>(w, x, y, k, int(blockIdx.x));
}

template <bool Pdl>
__global__ void __launch_bounds__(kThreads) split_row_kernel(const float* __restrict__ w, const float* __restrict__ x, float* __restrict__ y, int k) {
  split_row_body<Pdl>(w, x, y, k);
}

// Column j = blockIdx.y: x_j at x + j k, y_j at y + j m.
template <bool Pdl>
__global__ void __launch_bounds__(kThreads) split_row_cols_kernel(const float* __restrict__ w, const float* __restrict__ x, float* __restrict__ y, int m,
                                                                  int k) {
  const std::size_t j = blockIdx.y;
  split_row_body<Pdl>(w, x + j * std::size_t(k), y + j * std::size_t(m), k);
}

template <bool Pdl>
void launch_split_row(const float* w, const float* x, float* y, int m, int k, cudaStream_t s) {
  if (auto why = split_row_error(m, k); !why.empty()) throw Error("f32_gemv launch (impl=split-row): " + why);
  require(w && x && y, "f32_gemv launch (impl=split-row): a null buffer");
  require(reinterpret_cast<std::uintptr_t>(w) % 16 == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0,
          "f32_gemv launch (impl=split-row): w and x must be 16-byte aligned");
  launch_maybe_pdl(Pdl, split_row_kernel<Pdl>, dim3(unsigned(m)), dim3(kThreads), 0, s, w, x, y, k);
  KLAB_CUDA_LAUNCH("split_row_kernel");
}
template <bool Pdl>
void launch_split_row_cols(const float* w, const float* x, float* y, int m, int k, int n, cudaStream_t s) {
  if (auto why = split_row_error(m, k); !why.empty()) throw Error("f32_gemv launch_cols (impl=split-row): " + why);
  require(n >= 1 && n <= 65535, "f32_gemv launch_cols (impl=split-row): n = " + std::to_string(n) + " outside [1, 65535] (grid.y)");
  require(w && x && y, "f32_gemv launch_cols (impl=split-row): a null buffer");
  require(reinterpret_cast<std::uintptr_t>(w) % 16 == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0,
          "f32_gemv launch_cols (impl=split-row): w and x must be 16-byte aligned");
  launch_maybe_pdl(Pdl, split_row_cols_kernel<Pdl>, dim3(unsigned(m), unsigned(n)), dim3(kThreads), 0, s, w, x, y, m, k);
  KLAB_CUDA_LAUNCH("split_row_cols_kernel");
}
}  // namespace

template <bool Pdl>
Variant split_row_variant() {
  Variant v;
  v.op = "f32_gemv";
  v.axes = {{"impl", "split-row"}, {"pdl", Pdl ? "on" : "off"}};
  v.name = variant_name(v.op, v.axes);
  v.description = std::string("a thread block of 256 per row, the whole row's float4 loads in flight at once (k <= 8192), a warp butterfly and the "
                              "warps summed in order") +
                  (Pdl ? "; programmatic dependent launch (W loaded before the wait, x after it)" : "; plain launch");
  v.can_implement = [](const Problem& p) { return split_row_error(p.shape.m, p.shape.k); };
  v.make = [](const klab::Workload& wl) { return std::unique_ptr<Instance>(new F32Instance(workload_of(wl), &launch_split_row<Pdl>)); };
  return v;
}
template Variant split_row_variant<false>();
template Variant split_row_variant<true>();

void (*split_row_launcher(bool pdl))(const float*, const float*, float*, int, int, cudaStream_t) {
  return pdl ? &launch_split_row<true> : &launch_split_row<false>;
}

void (*split_row_cols_launcher(bool pdl))(const float*, const float*, float*, int, int, int, cudaStream_t) {
  return pdl ? &launch_split_row_cols<true> : &launch_split_row_cols<false>;
}

}  // namespace klab::f32_gemv
