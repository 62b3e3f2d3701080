#pragma once
// The batched q4_gemm kernels by name, for callers that own their device buffers, and their CPU
// bit-model. Buffers (device memory):
//   packed     W in q4_gemv's map=packed layout of R rows (q4_gemv::packed::pack(w, rows), or a
//              registered rows=R q4_gemv kernel's Q4Kernel::layout), 16-byte aligned
//   x          (n, k) f32, x_j at x + j k, 16-byte aligned
//   y          (n, m) f32, y_j at y + j m (every element written; nothing read)
//   workspace  workspace_bytes(k, n) bytes, 16-byte aligned: the prepared x of every column (the
//              launch writes it, then reads it); one per instance, so launches on different
//              workspaces may run on concurrent streams
#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "klab/ref/q4.hpp"

namespace klab::q4_gemm {

struct GemmKernel {
  std::string name;  // the variant name, e.g. "q4_gemm/map=packed,dot=q8-dp4a,grid=groups,cols=8,rows=8"
  std::vector<std::pair<std::string, std::string>> axes;
  int rows;  // R: rows per thread block, and the packed layout's tile height
  int cols;  // C: columns per step (a barrier and C R row totals per step)
  // Enqueues Y = dequant(W) X on `stream` (two launches, both with PDL). Throws klab::Error, before
  // any CUDA call, when launch_error(m, k, n) says why, a pointer is null or misaligned; a launch
  // failure throws CudaError.
  void (*launch)(const std::uint8_t* packed, const float* x, float* y, int m, int k, int n, std::uint8_t* workspace, cudaStream_t stream);
};

// Every batched kernel, in registration order.
const std::vector<GemmKernel>& gemm_kernels();
// Bytes of the workspace a launch with k and n needs: 40 per column and block of 32 (the q8 words
// 32, (c, d) 8).
std::size_t workspace_bytes(std::int64_t k, std::int64_t n);
// Why the kernels refuse (m, k, n) (empty: they take it): q4_gemv's shape limits, k > 32768 (one
// thread per block of 32 weights), n outside [1, kMaxCols].
std::string launch_error(std::int64_t m, std::int64_t k, std::int64_t n);

// The bit-model of every batched kernel: column j is q4_gemv's q8-dp4a model of x_j
// (packed::model_as(Form::q8, w, x_j)), whatever R and C. x is (n, k); returns (n, m).
std::vector<float> model_batched(const ref::Q4Matrix& w, std::span<const float> x, std::int64_t n);

}  // namespace klab::q4_gemm
