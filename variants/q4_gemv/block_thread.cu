// q4_gemv/map=block-per-thread,rows=R: beyond the seed, after block-per-lane (lane_block.cu) stayed
// at 20-30% of the read ceiling on the H200 (reports/h200/, q4-vs-peers). There a warp walked a row
// block after block (5 steps for k = 5120) with one step of prefetch: few bytes in flight and
// launch waves that do not divide the SMs. Here one thread block owns R rows and has one thread per
// block of 32 weights: thread t of warp w takes block b = 32 w + t, issues all its loads at once
// (R 16-byte code loads, R scales, its 32 x values as eight float4, shared by the R rows) and
// never loops. S = ceil(k / 1024) warps per thread block, so k <= 32768 (S <= 32).
//
// Arithmetic (kernel and bit-model alike), per row:
//   p_b  = dot_b * scale_b   (one mul; p = +0 for threads past the last block), dot_b in one of the
//          two forms of nibbles.hpp: direct (fma chain of n4_i * x_i) or, with the axis dot=offset,
//          16 * (sum v_i x_i - 1.5 sum x_i) with v_i in [1, 2): one instruction less per weight
//   P_w  = xor-butterfly of p over warp w's 32 threads (offsets 16, 8, 4, 2, 1)
//   y    = ((P_0 + P_1) + P_2) + ... + P_{S-1}          (one thread, warps in order)
// Rows share nothing but x: every rows value gives the same bits.
//
// Layouts (klab/ref/q4.hpp): codes (m, k/2) bytes; scales (m, k/32) f16 bits; x (k), y (m) f32.
// codes and x must be 16-byte aligned (cudaMalloc'd buffers are).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <type_traits>

#include "klab/cuda.hpp"
#include "klab/error.hpp"
#include "klab/registry.hpp"
#include "q4_gemv/lane_block.hpp"
#include "q4_gemv/nibbles.hpp"

namespace klab::q4_gemv {

namespace {
constexpr unsigned kFull = 0xFFFFFFFFu;
constexpr int kMaxWarps = 32;  // a thread block of at most 1024 threads: k <= 32 * 1024

template <class D, int R>
__global__ void block_thread_kernel(const std::uint8_t* __restrict__ codes, const std::uint16_t* __restrict__ scales,
                                    const float* __restrict__ x, float* __restrict__ y, int m, int k) {
  __shared__ float part[kMaxWarps][R];  // (S, R): each warp's butterfly total per row
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, S = blockDim.x / 32;
  const int row0 = blockIdx.x * R;
  const int nb = k / ref::kQ4Block;
  const int b = warp * 32 + lane;  // this thread's block
  float p[R];
  if (b < nb) {
    uint4 q[R];
    std::uint16_t sc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int row = min(row0 + r, m - 1);  // rows past m recompute m-1, never stored
      q[r] = __ldcs(reinterpret_cast<const uint4*>(codes + std::size_t(row) * std::size_t(k / 2)) + b);
      sc[r] = scales[std::size_t(row) * std::size_t(nb) + b];
    }
    const float4* xb = reinterpret_cast<const float4*>(x) + std::size_t(b) * 8;
    float acc[R], sx = 0.f;
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = 0.f;
    // Word by word: two float4 of x live at a time (not eight), shared by the R rows.
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const float4 xa = xb[2 * w], xc = xb[2 * w + 1];
      const float xs[8] = {xa.x, xa.y, xa.z, xa.w, xc.x, xc.y, xc.z, xc.w};
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        if constexpr (D::needs_sx) sx = add_rn(sx, xs[i]);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const std::uint32_t word = w == 0 ? q[r].x : w == 1 ? q[r].y : w == 2 ? q[r].z : q[r].w;
          acc[r] = D::step(word, i, xs[i], acc[r]);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) p[r] = mul_rn(D::finish(acc[r], sx), __half2float(__ushort_as_half(sc[r])));
  } else {
#pragma unroll
    for (int r = 0; r < R; ++r) p[r] = 0.f;
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int o = 16; o > 0; o /= 2) p[r] = add_rn(p[r], __shfl_xor_sync(kFull, p[r], o));
    if (lane == 0) part[warp][r] = p[r];
  }
  __syncthreads();
  if (threadIdx.x < R && row0 + int(threadIdx.x) < m) {
    float t = part[0][threadIdx.x];
    for (int w = 1; w < S; ++w) t = add_rn(t, part[w][threadIdx.x]);
    y[row0 + threadIdx.x] = t;
  }
}

int warps_for(int k) { return (k / ref::kQ4Block + 31) / 32; }

std::string k_error(std::int64_t k) {
  if (k > std::int64_t(kMaxWarps) * 32 * ref::kQ4Block)
    return "k = " + std::to_string(k) + " exceeds block-per-thread's 32768 (one thread per block of 32, at most 1024 threads)";
  return "";
}

template <class D, int R>
void launch(const std::uint8_t* codes, const std::uint16_t* scales, const float* x, float* y, int m, int k, cudaStream_t stream) {
  if (auto why = launch_error(m, k); !why.empty()) throw Error("q4_gemv launch: " + why);
  if (auto why = k_error(k); !why.empty()) throw Error("q4_gemv launch: " + why);
  require(codes && scales && x && y, "q4_gemv launch: a null buffer (codes, scales, x and y must all be device pointers)");
  require(reinterpret_cast<std::uintptr_t>(codes) % 16 == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0,
          "q4_gemv launch (block-per-thread): codes and x must be 16-byte aligned");
  const unsigned grid = unsigned((static_cast<long long>(m) + R - 1) / R);
  block_thread_kernel<D, R><<<grid, unsigned(warps_for(k) * 32), 0, stream>>>(codes, scales, x, y, m, k);
  KLAB_CUDA_LAUNCH("block_thread_kernel");
}

template <class D, int R>
int resident_warps_per_sm() {
  // At the seed shapes' k (5120, 6144): 5-6 warps per thread block; report for k = 5120.
  int blocks = 0;
  KLAB_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, block_thread_kernel<D, R>, warps_for(5120) * 32, 0));
  return blocks * warps_for(5120);
}

// The direct form keeps its original name (no dot axis); the offset form says so.
template <class D, int R>
std::vector<std::pair<std::string, std::string>> axes() {
  if constexpr (std::is_same_v<D, DotDirect>) return {{"map", "block-per-thread"}, {"rows", std::to_string(R)}};
  else return {{"map", "block-per-thread"}, {"dot", D::name}, {"rows", std::to_string(R)}};
}

// The bit-model: per row, each simulated warp's 32 block products, its butterfly, warps in order.
template <class D>
std::vector<float> model(const ref::Q4Matrix& w, std::span<const float> x) {
  check_model_args(w, x);
  if (auto why = k_error(w.k); !why.empty()) throw Error("q4_gemv bit-model: " + why);
  const std::int64_t nb = w.blocks_per_row();
  const int S = warps_for(int(w.k));
  std::vector<float> y(static_cast<std::size_t>(w.m));
  for (std::int64_t row = 0; row < w.m; ++row) {
    float t = 0.f;
    for (int wp = 0; wp < S; ++wp) {
      std::array<float, 32> p{};
      for (int l = 0; l < 32; ++l) {
        const std::int64_t b = std::int64_t(wp) * 32 + l;
        if (b >= nb) continue;  // +0
        const float dot = block_dot_host_as<D>(&w.codes[std::size_t(row * (w.k / 2) + b * 16)], &x[std::size_t(b * 32)]);
        p[l] = mul_rn(dot, ref::half_to_float_soft(w.scales[std::size_t(row * nb + b)]));
      }
      const float total = butterfly_host(p);
      t = wp == 0 ? total : add_rn(t, total);
    }
    y[std::size_t(row)] = t;
  }
  return y;
}

template <class D, int R>
Q4Kernel kernel_of() {
  // One thread block of S warps per R rows: report rows_per_warp as R (the rows a block owns).
  return Q4Kernel{variant_name(kOp, axes<D, R>()), axes<D, R>(), &launch<D, R>, R, &resident_warps_per_sm<D, R>, warps_for(5120)};
}
}  // namespace

std::string block_thread_error(std::int64_t k) { return k_error(k); }

std::vector<Q4Kernel> block_thread_kernels() {
  return {kernel_of<DotDirect, 2>(), kernel_of<DotDirect, 4>(), kernel_of<DotDirect, 8>(), kernel_of<DotOffset, 4>(), kernel_of<DotOffset, 8>()};
}
std::vector<Q4ModelEntry> block_thread_models() {
  std::vector<Q4ModelEntry> out;
  for (const auto& kern : block_thread_kernels())
    out.push_back(Q4ModelEntry{kern.name, kern.axes.size() == 3 ? &model<DotOffset> : &model<DotDirect>});
  return out;
}

}  // namespace klab::q4_gemv
