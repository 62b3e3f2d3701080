// q4_gemv/map=block-per-lane,rows=R: beyond the seed. The seed's kernels give each lane one byte of
// a block per step (a warp moves 16 code bytes + 1 scale per step); on the H200 that stayed near
// 12% of the read ceiling (reports/h200/, seed-ladder). Here a lane owns whole blocks: at step t,
// lane l takes block b = l + 32 t of its row(s): one 16-byte load of the block's 32 codes (the
// warp's 32 loads cover 512 contiguous bytes), its f16 scale, and x[32b .. 32b+31] as eight float4
// (x is small and stays in L1/L2). The next step's codes are loaded before this step's math, so
// each lane keeps two 16-byte loads in flight.
//
// Arithmetic (kernel and bit-model alike), per lane and row:
//   dot_b = sum_{i=0..31} n4_i * x_{32b+i}    (fma chain in i order, from 0)
//   acc   = fma(dot_b, scale_b, acc)          (blocks in the lane's order, acc from 0)
// then the xor-butterfly over lanes (offsets 16, 8, 4, 2, 1), lane 0 stores. The scale multiplies
// the block's dot once instead of every weight: a different rounding order from the seed family
// (so not bitwise equal to it), but the same for every rows value (rows=1 and rows=4 must agree bit
// for bit: x is shared, each row's order is unchanged).
//
// Layouts (klab/ref/q4.hpp): codes (m, k/2) bytes, even column in the low nibble, so the 32-bit word
// w of a block holds columns 8w..8w+7 as nibbles 0..7; scales (m, k/32) f16 bits; x (k), y (m) f32.
// codes and x must be 16-byte aligned (cudaMalloc'd buffers are).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>

#include "klab/cuda.hpp"
#include "klab/error.hpp"
#include "klab/registry.hpp"
#include "q4_gemv/lane_block.hpp"
#include "q4_gemv/nibbles.hpp"
#include "q4_gemv/policy.hpp"

namespace klab::q4_gemv {

namespace {
constexpr int kWarps = 8;
constexpr unsigned kFull = 0xFFFFFFFFu;

template <int R>
__global__ void __launch_bounds__(kWarps * 32)
lane_block_kernel(const std::uint8_t* __restrict__ codes, const std::uint16_t* __restrict__ scales, const float* __restrict__ x,
                  float* __restrict__ y, int m, int k) {
  const int lane = threadIdx.x % 32;
  const int row0 = (blockIdx.x * kWarps + threadIdx.x / 32) * R;
  if (row0 >= m) return;  // warp-uniform
  const int nb = k / ref::kQ4Block;
  const uint4* q[R];           // (nb) 16-byte blocks of this row
  const std::uint16_t* s[R];   // (nb) scales
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int row = min(row0 + r, m - 1);  // rows past m recompute m-1, never stored
    q[r] = reinterpret_cast<const uint4*>(codes + std::size_t(row) * std::size_t(k / 2));
    s[r] = scales + std::size_t(row) * std::size_t(nb);
  }
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float acc[R];
  uint4 cur[R];
  std::uint16_t sc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.f;
  int b = lane;
  if (b < nb) {
#pragma unroll
    for (int r = 0; r < R; ++r) cur[r] = __ldcs(q[r] + b), sc[r] = s[r][b];
  }
  while (b < nb) {
    const int bn = b + 32;
    uint4 nxt[R];
    std::uint16_t sn[R];
    if (bn < nb) {  // prefetch the next block before this one's math
#pragma unroll
      for (int r = 0; r < R; ++r) nxt[r] = __ldcs(q[r] + bn), sn[r] = s[r][bn];
    }
    float dot[R];
#pragma unroll
    for (int r = 0; r < R; ++r) dot[r] = 0.f;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const float4 xa = x4[b * 8 + 2 * w], xb = x4[b * 8 + 2 * w + 1];
      const float xs[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const std::uint32_t word = w == 0 ? cur[r].x : w == 1 ? cur[r].y : w == 2 ? cur[r].z : cur[r].w;
        dot[r] = dot8(word, xs, dot[r]);
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      acc[r] = fma_rn(dot[r], __half2float(__ushort_as_half(sc[r])), acc[r]);
      cur[r] = nxt[r];
      sc[r] = sn[r];
    }
    b = bn;
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float t = acc[r];
#pragma unroll
    for (int o = 16; o > 0; o /= 2) t = add_rn(t, __shfl_xor_sync(kFull, t, o));
    if (lane == 0 && row0 + r < m) y[row0 + r] = t;
  }
}

template <int R>
void launch(const std::uint8_t* codes, const std::uint16_t* scales, const float* x, float* y, int m, int k, cudaStream_t stream) {
  if (auto why = launch_error(m, k); !why.empty()) throw Error("q4_gemv launch: " + why);
  require(codes && scales && x && y, "q4_gemv launch: a null buffer (codes, scales, x and y must all be device pointers)");
  require(reinterpret_cast<std::uintptr_t>(codes) % 16 == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0,
          "q4_gemv launch (block-per-lane): codes and x must be 16-byte aligned");
  const long long warps = (static_cast<long long>(m) + R - 1) / R;
  lane_block_kernel<R><<<unsigned((warps + kWarps - 1) / kWarps), kWarps * 32, 0, stream>>>(codes, scales, x, y, m, k);
  KLAB_CUDA_LAUNCH("lane_block_kernel");
}

template <int R>
int resident_warps_per_sm() {
  int blocks = 0;
  KLAB_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, lane_block_kernel<R>, kWarps * 32, 0));
  return blocks * kWarps;
}

template <int R>
std::vector<std::pair<std::string, std::string>> axes() {
  return {{"map", "block-per-lane"}, {"rows", std::to_string(R)}};
}

// The bit-model: 32 lanes simulated, the kernel's block order, fma chain and butterfly.
std::vector<float> model(const ref::Q4Matrix& w, std::span<const float> x) {
  check_model_args(w, x);
  const std::int64_t nb = w.blocks_per_row();
  std::vector<float> y(static_cast<std::size_t>(w.m));
  for (std::int64_t row = 0; row < w.m; ++row) {
    std::array<float, 32> t{};
    for (int l = 0; l < 32; ++l) {
      float acc = 0.f;
      for (std::int64_t b = l; b < nb; b += 32) {
        const float dot = block_dot_host_as<DotDirect>(&w.codes[std::size_t(row * (w.k / 2) + b * 16)], &x[std::size_t(b * 32)]);
        acc = fma_rn(dot, ref::half_to_float_soft(w.scales[std::size_t(row * nb + b)]), acc);
      }
      t[l] = acc;
    }
    y[std::size_t(row)] = butterfly_host(t);
  }
  return y;
}
}  // namespace

namespace {
template <int R>
Q4Kernel kernel_of() {
  return Q4Kernel{variant_name(kOp, axes<R>()), axes<R>(), &launch<R>, R, &resident_warps_per_sm<R>, kWarps};
}
}  // namespace

// rows: each x block a lane loads (eight float4 from L1/L2, 128 bytes per 16 code bytes) serves R
// rows, so L1 traffic for x falls from 8x the code bytes (rows=1) to 8/R x.
std::vector<Q4Kernel> lane_block_kernels() { return {kernel_of<1>(), kernel_of<4>(), kernel_of<8>(), kernel_of<16>()}; }
std::vector<Q4ModelEntry> lane_block_models() {
  // rows does not change any row's arithmetic: one model serves them all.
  std::vector<Q4ModelEntry> out;
  for (const auto& kern : lane_block_kernels()) out.push_back(Q4ModelEntry{kern.name, &model});
  return out;
}

}  // namespace klab::q4_gemv
