// q4_gemm/map=packed,dot=q8-dp4a,grid=groups,cols=C,rows=R: Y = dequant(W) X with each weight read
// once for all n columns. Written in a session without a device; measured on the H200 in
// reports/h200/run-30bee11 (2026-12-01, stream mode): Y bit for bit impl=loop's, x2.969..x4.479 faster
// than impl=loop at n = 8 and 32, but at n = 32 x5.92..x6.90 its own n = 1 time (claimed <= 2x): the
// dp4a dots over 32 columns, not the weights, bound it (391..458 GB/s at n = 32).
//
// The gemv it batches is q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=launch,pdl=on,rows=R
// (variants/q4_gemv/packed.cu, xprep_kernel and packed_xl_kernel), which reads W once per column:
// n launches read it n times. Here:
//   1. xprep_cols_kernel (grid (ceil(nb/32), n), 32 threads): thread b of column j quantises x_j's
//      block b with q8_prep (packed.hpp) and writes its words to the instance's workspace,
//      word-major per column so that a warp's load is 512 (xe, xo) or 256 (c, d) contiguous bytes:
//        xw  [2j] xe[0..3]   [2j + 1] xo[0..3]    (uint4, index * nb + b)
//        xcd [j] (c, d bits)                       (uint2, j * nb + b)
//   2. gemm_kernel<R, C> (one thread block per group of R rows, one thread per block of 32 weights,
//      as packed_xl_kernel): triggers its dependents, loads its R code blocks and its scales ONCE,
//      waits (griddepcontrol.wait: the workspace and x come from the launches before), then for
//      each column j forms the R block values exactly as packed_xl_kernel<q8, R> (q8_word per word
//      in order from se = c, so = 0; q8_finish with the same scale and d), sums them over the warp
//      with the same transposed butterfly (warp_rows, packed_device.cuh) and writes the warp's row
//      totals to shared memory. Every C columns one barrier; then C R threads each sum one
//      (column, row) over the warps in order from warp 0 and store it.
// Bits: y_j[row] is formed from the same bytes by the same functions in the same order as
// packed_xl_kernel<q8, R> forms y[row] for x = x_j, and the butterfly's bits do not depend on R, so
// column j is bit for bit q4_gemv's q8-dp4a output for x_j (packed::model_as(Form::q8, w, x_j)) and
// impl=loop's, for any R and C.
// part[] alternates between two buffers by step parity: thread e reads part[par] before it reaches
// the next step's barrier, and part[par] is written again only after that barrier (packed_kernel's
// argument).
// Cost, predicted before the run (measured: above): W leaves DRAM once (0.5625 bytes per weight);
// x's prepared words, 40 bytes per column and block, are read from L2 (ld.cg) by every group:
// 40 n / (18 R) bytes of L2 per byte of W, 8.9x at n = 32, R = 8. README.md says what that predicts.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "klab/cuda.hpp"
#include "klab/error.hpp"
#include "q4_gemm/gemm.hpp"
#include "q4_gemm/op.hpp"
#include "q4_gemv/packed.hpp"
#include "q4_gemv/packed_device.cuh"

namespace klab::q4_gemm {

namespace {
namespace pk = q4_gemv::packed;
constexpr int kMaxWarps = 32;  // one thread per block of 32 weights, at most 1024 threads: k <= 32768

__global__ void __launch_bounds__(32) xprep_cols_kernel(const float* __restrict__ x, int k, uint4* __restrict__ xw, uint2* __restrict__ xcd) {
  asm volatile("griddepcontrol.launch_dependents;");
  // x may be the predecessor's output, and the gemm_kernel before us must be done reading the
  // workspace: wait for both before writing it.
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const int nb = k / ref::kQ4Block, b = int(blockIdx.x) * 32 + int(threadIdx.x);
  const std::size_t j = blockIdx.y;
  if (b >= nb) return;
  const float4* xb = reinterpret_cast<const float4*>(x + j * std::size_t(k)) + std::size_t(b) * 8;
  float xv[32];
  for (int w = 0; w < 8; ++w) {
    const float4 v = __ldcg(xb + w);
    xv[4 * w] = v.x, xv[4 * w + 1] = v.y, xv[4 * w + 2] = v.z, xv[4 * w + 3] = v.w;
  }
  const pk::Q8X X = pk::q8_prep(xv);  // = xprep_kernel<q8>'s words
  xw[2 * j * nb + b] = make_uint4(X.xe[0], X.xe[1], X.xe[2], X.xe[3]);
  xw[(2 * j + 1) * nb + b] = make_uint4(X.xo[0], X.xo[1], X.xo[2], X.xo[3]);
  xcd[j * nb + b] = make_uint2(std::uint32_t(X.c), pk::float_bits(X.d));
}

template <int R, int C>
__global__ void __launch_bounds__(kMaxWarps * 32)
gemm_kernel(const std::uint8_t* __restrict__ packed, const uint4* __restrict__ xw, const uint2* __restrict__ xcd, float* __restrict__ y, int m,
            int k, int n) {
  asm volatile("griddepcontrol.launch_dependents;");
  __shared__ float part[2][C][kMaxWarps][R];  // (parity, column of the step, warp, row): the warps' row totals
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, W = blockDim.x >> 5;
  const int nb = k / ref::kQ4Block;
  const bool active = tid < nb;
  constexpr int kTile = R * (pk::kChunk * 16 + pk::kChunk * 2);
  const std::uint8_t* q = packed + (std::size_t(blockIdx.x) * W + warp) * kTile + lane * 16;
  uint4 codes[R];
  pk::Scales<R> sc;
  if (active) {
    for (int r = 0; r < R; ++r) codes[r] = __ldcs(reinterpret_cast<const uint4*>(q + r * pk::kChunk * 16));
    sc.load(q + R * pk::kChunk * 16 + lane * (2 * R - 16));
  }
  // The workspace (and x before it) come from the launches before us: wait for them.
  asm volatile("griddepcontrol.wait;" ::: "memory");
  float s[R];  // half_value is exact: converted once, the same value every column
  for (int r = 0; r < R; ++r) s[r] = pk::half_value(sc.get(r));
  for (int j0 = 0, par = 0; j0 < n; j0 += C, par ^= 1) {
    const int cols = min(C, n - j0);
#pragma unroll
    for (int c = 0; c < C; ++c) {
      if (c >= cols) break;  // the same for the whole block
      const std::size_t j = std::size_t(j0 + c);
      float p[R];
      if (active) {
        const uint4 xe = __ldcg(xw + 2 * j * nb + tid), xo = __ldcg(xw + (2 * j + 1) * nb + tid);
        const uint2 cd = __ldcg(xcd + j * nb + tid);
        const float d = __uint_as_float(cd.y);
        for (int r = 0; r < R; ++r) {  // = packed_xl_kernel<q8>: row by row
          int se = int(cd.x), so = 0;
          for (int w = 0; w < 4; ++w) pk::q8_word(pk::word_of(codes[r], w), pk::word_of(xe, w), pk::word_of(xo, w), se, so);
          p[r] = pk::q8_finish(se, so, s[r], d);
        }
      } else {
        for (int r = 0; r < R; ++r) p[r] = 0.f;
      }
      const float t = pk::warp_rows<R>(p, lane);
      if ((lane & (32 / R - 1)) == 0) part[par][c][warp][lane / (32 / R)] = t;
    }
    __syncthreads();
    for (int e = tid; e < R * cols; e += blockDim.x) {  // consecutive threads: consecutive rows of one column
      const int c = e / R, r = e % R;
      const int row = int(blockIdx.x) * R + r;
      if (row < m) {
        float sum = part[par][c][0][r];
        for (int w = 1; w < W; ++w) sum = q4_gemv::add_rn(sum, part[par][c][w][r]);
        y[std::size_t(j0 + c) * m + row] = sum;
      }
    }
  }
}

template <int R, int C>
void launch(const std::uint8_t* packed, const float* x, float* y, int m, int k, int n, std::uint8_t* workspace, cudaStream_t stream) {
  if (auto why = launch_error(m, k, n); !why.empty()) throw Error("q4_gemm launch: " + why);
  require(packed && x && y && workspace, "q4_gemm launch: a null buffer (the packed weights, x, y and the workspace must all be device pointers)");
  require(reinterpret_cast<std::uintptr_t>(packed) % 16 == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0 &&
              reinterpret_cast<std::uintptr_t>(workspace) % 16 == 0,
          "q4_gemm launch: the packed weights, x and the workspace must be 16-byte aligned");
  const int nb = k / ref::kQ4Block, W = (nb + 31) / 32;
  auto* xw = reinterpret_cast<uint4*>(workspace);
  auto* xcd = reinterpret_cast<uint2*>(workspace + 32 * std::size_t(n) * std::size_t(nb));
  launch_maybe_pdl(true, xprep_cols_kernel, dim3(unsigned((nb + 31) / 32), unsigned(n)), dim3(32), 0, stream, x, k, xw, xcd);
  KLAB_CUDA_LAUNCH("xprep_cols_kernel");
  launch_maybe_pdl(true, gemm_kernel<R, C>, dim3(unsigned((static_cast<long long>(m) + R - 1) / R)), dim3(unsigned(W * 32)), 0, stream, packed,
                   static_cast<const uint4*>(xw), static_cast<const uint2*>(xcd), y, m, k, n);
  KLAB_CUDA_LAUNCH("gemm_kernel");
}

template <int R, int C>
GemmKernel kernel_of() {
  const std::vector<std::pair<std::string, std::string>> axes{
      {"map", "packed"}, {"dot", pk::form_name(pk::Form::q8)}, {"grid", "groups"}, {"cols", std::to_string(C)}, {"rows", std::to_string(R)}};
  return GemmKernel{variant_name(kOp, axes), axes, R, C, &launch<R, C>};
}
}  // namespace

const std::vector<GemmKernel>& gemm_kernels() {
  // Best guess first: rows=8 halves rows=4's x reads from L2 per weight (they dominate at n = 32,
  // see the top of this file); rows=4 has the smaller blocks (more resident, finer waves); cols=4
  // takes twice the barriers of cols=8 with half its shared memory.
  static const std::vector<GemmKernel> v{kernel_of<8, 8>(), kernel_of<4, 8>(), kernel_of<8, 4>()};
  return v;
}

}  // namespace klab::q4_gemm
