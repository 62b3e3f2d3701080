// q4_gemv kernels: y = dequant(W) x, one template over the four policy axes of policy.hpp.
//
// Layout (klab/ref/q4.hpp): codes (m, k/2) bytes, even column in the low nibble; scales (m, k/32)
// f16 bits; x (k) f32; y (m) f32.
// Mapping (seed-digest.md section 5): a warp owns `rows` consecutive rows; it walks the row's
// blocks of 32 weights in order, one block per step; at block b lane l takes column j = 32 b + l:
// the code byte 16 b + l/2 (lanes 2t, 2t+1 read the same byte, low and high nibble), the block's
// f16 scale, and x[j]. Per block a lane does one multiply-add per row: 3 loads (byte, scale, x)
// per 32 MACs for rows=1; with rows=4, x is loaded once for the 4 rows (9 loads per 128 MACs
// instead of 12). The block loop is unrolled by 4 for every chain count, so `chains` changes only
// the dependency chains, not the loop overhead. At the end each lane sums its chains in a fixed
// order and the warp's xor-butterfly sums the lanes; lane 0 stores.
#include <cuda_runtime.h>

#include <climits>

#include "klab/cuda.hpp"
#include "klab/error.hpp"
#include "q4_gemv/lane_block.hpp"
#include "q4_gemv/packed_kernels.hpp"
#include "q4_gemv/policy.hpp"
#include "q4_gemv/q4_gemv.hpp"
#include "klab/registry.hpp"

namespace klab::q4_gemv {

namespace {
constexpr int kWarpsPerBlock = 8;
constexpr unsigned kFull = 0xFFFFFFFFu;

template <class Scale>
__device__ __forceinline__ std::uint16_t read_scale(const std::uint16_t* __restrict__ p, int lane) {
  if constexpr (Scale::per_lane) {
    // Every lane loads the same address: one broadcast transaction.
    return *p;
  } else {
    // The seed's original: lane 0 loads, the shuffle hands it to the other 31.
    unsigned v = 0;
    if (lane == 0) v = *p;
    return std::uint16_t(__shfl_sync(kFull, v, 0));
  }
}

template <class P>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
q4_gemv_kernel(const std::uint8_t* __restrict__ codes, const std::uint16_t* __restrict__ scales, const float* __restrict__ x,
               float* __restrict__ y, int m, int k) {
  constexpr int R = P::rows, C = P::chains;
  const int lane = threadIdx.x % 32;
  const int row0 = (blockIdx.x * kWarpsPerBlock + threadIdx.x / 32) * R;
  if (row0 >= m) return;  // warp-uniform: the whole warp leaves, so the shuffles below stay full
  const int nb = k / ref::kQ4Block;
  // Rows past m (the last warp when m % R != 0) recompute row m-1 and are never stored: the warp
  // stays converged and every load stays in bounds.
  const std::uint8_t* wr[R];    // (k/2) this row's code bytes, offset to this lane's byte
  const std::uint16_t* sr[R];   // (k/32) this row's scales
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int row = min(row0 + r, m - 1);
    wr[r] = codes + std::size_t(row) * std::size_t(k / 2) + lane / 2;
    sr[r] = scales + std::size_t(row) * std::size_t(nb);
  }
  const float* xl = x + lane;

  float acc[R][C];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int c = 0; c < C; ++c) acc[r][c] = 0.f;

  // One block: x[32 b + l] loaded once for the R rows; per row its byte and scale; acc += (n4*s)*x.
  auto step = [&](int b, int c) {
    const float xv = xl[b * ref::kQ4Block];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float s = P::F16::convert(read_scale<typename P::Scale>(sr[r] + b, lane));
      acc[r][c] = mac(wr[r][b * (ref::kQ4Block / 2)], lane, s, xv, acc[r][c]);
    }
  };
  int b = 0;
  for (; b + 4 <= nb; b += 4) {
#pragma unroll
    for (int u = 0; u < 4; ++u) step(b + u, u % C);
  }
  // Tail: b is a multiple of 4, so block b + u still feeds chain (b + u) % C = u % C.
#pragma unroll
  for (int u = 0; u < 3; ++u)
    if (b + u < nb) step(b + u, u % C);

#pragma unroll
  for (int r = 0; r < R; ++r) {
    float t = combine<C>(acc[r]);
#pragma unroll
    for (int o = 16; o > 0; o /= 2) t = add_rn(t, __shfl_xor_sync(kFull, t, o));
    if (lane == 0 && row0 + r < m) y[row0 + r] = t;
  }
}

template <class P>
void launch(const std::uint8_t* codes, const std::uint16_t* scales, const float* x, float* y, int m, int k, cudaStream_t stream) {
  if (auto why = launch_error(m, k); !why.empty()) throw Error("q4_gemv launch: " + why);
  require(codes && scales && x && y, "q4_gemv launch: a null buffer (codes, scales, x and y must all be device pointers)");
  const long long warps = (static_cast<long long>(m) + P::rows - 1) / P::rows;
  const unsigned grid = unsigned((warps + kWarpsPerBlock - 1) / kWarpsPerBlock);
  q4_gemv_kernel<P><<<grid, kWarpsPerBlock * 32, 0, stream>>>(codes, scales, x, y, m, k);
  KLAB_CUDA_LAUNCH("q4_gemv_kernel");
}

template <class P>
int resident_warps_per_sm() {
  int blocks = 0;
  KLAB_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, q4_gemv_kernel<P>, kWarpsPerBlock * 32, 0));
  return blocks * kWarpsPerBlock;
}

struct Collect {
  std::vector<Q4Kernel>* out;
  template <class P>
  void operator()() const {
    out->push_back(Q4Kernel{variant_name(kOp, P::axes()), P::axes(), &launch<P>, P::rows, &resident_warps_per_sm<P>, kWarpsPerBlock});
  }
};
}  // namespace

std::string launch_error(std::int64_t m, std::int64_t k) {
  if (auto why = ref::q4_shape_error(m, k); !why.empty()) return why;
  if (m > INT_MAX || k > INT_MAX) return "shape " + std::to_string(m) + "x" + std::to_string(k) + " exceeds the kernels' int indexing";
  return "";
}

const std::vector<Q4Kernel>& q4_kernels() {
  static const std::vector<Q4Kernel> all = [] {
    std::vector<Q4Kernel> v;
    for_each_policy(Collect{&v});
    for (auto& kern : lane_block_kernels()) v.push_back(std::move(kern));
    for (auto& kern : block_thread_kernels()) v.push_back(std::move(kern));
    for (auto& kern : packed::packed_kernels()) v.push_back(std::move(kern));
    return v;
  }();
  return all;
}

const Q4Kernel& q4_kernel(const std::string& name) {
  for (const auto& kern : q4_kernels())
    if (kern.name == name) return kern;
  std::string known;
  for (const auto& kern : q4_kernels()) known += (known.empty() ? "" : ", ") + kern.name;
  throw Error("no q4_gemv kernel named '" + name + "' (known: " + known + ")");
}

}  // namespace klab::q4_gemv
