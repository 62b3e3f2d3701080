#pragma once
// The GDN step's per-element formulas, one definition for both families: the step's small kernels
// (variants/gdn/gdn_kernels.cu: conv + SiLU, beta/g, the gated norm) and this family's kernels that
// compute the same values themselves (kernels_fused.cu: the gated-norm epilogues, and prep=conv, which
// forms q, k, v, beta and g from the raw projections). The same operations on the same operands give
// the same bits in either kernel. Precise libm functions (expf, log1pf, sqrtf; no fast-math).
#include <cuda_runtime.h>

#include <cstddef>

namespace klab::gdn_recurrence {

// silu(x) = x * sigmoid(x) = x / (1 + exp(-x))
__device__ __forceinline__ float silu(float x) { return x / (1.f + expf(-x)); }

// softplus(x) = log(1 + exp(x)) as torch and the reference define it: x itself past the threshold 20.
// (The seed's extra branch, exp(x) for x < -20, equals log1p(exp(x)) there to f32 rounding.)
__device__ __forceinline__ float softplus(float x) { return x > 20.f ? x : log1pf(expf(x)); }

// beta = sigmoid(b) = 1 / (1 + exp(-b))
__device__ __forceinline__ float beta_of(float b) { return 1.f / (1.f + expf(-b)); }
// g = -exp(A_log) * softplus(a + dt_bias)   (log of the decay; alpha = exp(g) in the recurrence)
__device__ __forceinline__ float g_of(float a, float a_log, float dt_bias) { return -expf(a_log) * softplus(a + dt_bias); }

// The causal conv + SiLU of channel ch, nothing written: x = xc[ch], the channel's ck weights at wc,
// its ck-1 history frames at hist + j conv_dim + ch (frame 0 the oldest):
//   acc = sum_{j<ck-1} w[j] * hist[j][ch] + w[ck-1] * x   (oldest frame first, fma from +0)
//   xcv = silu(acc)
// conv_value_of: the same with frame j's value given by frame(j) (hist=ring: physical frame
// ring_frame(n, j, ck), hist_ring.hpp), the same operations in the same order.
template <class Frame>
__device__ __forceinline__ float conv_value_of(float x, const float* __restrict__ wc, int ck, Frame frame) {
  float acc = 0.f;
  for (int j = 0; j < ck - 1; ++j) acc = fmaf(wc[j], frame(j), acc);
  acc = fmaf(wc[ck - 1], x, acc);
  return silu(acc);
}
__device__ __forceinline__ float conv_value(float x, const float* __restrict__ wc, const float* __restrict__ hist, int conv_dim, int ck, int ch) {
  return conv_value_of(x, wc, ck, [hist, conv_dim, ch](int j) { return hist[static_cast<std::size_t>(j) * conv_dim + ch]; });
}

// hist[j][ch] = hist[j+1][ch] for j < ck-2; hist[ck-2][ch] = x   (channel ch's history shifted left one
// frame, x = xc[ch] the newest, last)
__device__ __forceinline__ void shift_history(float* __restrict__ hist, int conv_dim, int ck, int ch, float x) {
  for (int j = 0; j + 1 < ck - 1; ++j) hist[static_cast<std::size_t>(j) * conv_dim + ch] = hist[static_cast<std::size_t>(j + 1) * conv_dim + ch];
  if (ck > 1) hist[static_cast<std::size_t>(ck - 2) * conv_dim + ch] = x;
}

// The L2 norm's factor: inv = 1 / sqrt(ss + eps) (transformers' l2norm: x * rsqrt(sum x^2 + eps)).
__device__ __forceinline__ float l2_inv(float ss, float eps) { return 1.f / sqrtf(ss + eps); }

}  // namespace klab::gdn_recurrence
