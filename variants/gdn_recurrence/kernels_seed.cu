// gdn_recurrence/impl=seed and impl=once: the step's recurrence as variants/gdn runs it today, with
// the batch in grid.z, and the same kernel with S held in registers between its two passes.
//
//   seed  two launches: qk_norm (one block per (q or k, key head, sequence): block_sum of squares)
//         into the workspace, then the recurrence: grid (nv, ceil(dv/32), batch), block (32, 8);
//         pass 1 reads S for kv = S^T k, pass 2 reads S again, writes it, sums o = S^T q. S crosses
//         the memory bus three times (read, read, write). Its recurrence kernel is the one the GDN
//         step runs (GdnDevice calls it by name, kDefaultRecurrence, with normalize_qk = false and
//         the step's own q/k norm): the code moved here from variants/gdn/gdn_kernels.cu on
//         2026-12-01, batch and strides added, the arithmetic unchanged. The q/k norm below is
//         still a copy of the step's qk_norm kernel (the step keeps its own: its Q and K are
//         readable intermediates).
//   once  the same two launches, the same threads, the same arithmetic order; pass 1 keeps each
//         thread's decayed S column slice (ceil(dk/8) <= 16 values) in registers and pass 2 updates
//         them there: S read once, written once. Bitwise equal to seed by construction (every
//         fma and add in the same order on the same operands); the race's bits_vs_a checks it.
#include "gdn_recurrence/block_sum.cuh"
#include "gdn_recurrence/kernels.hpp"

#include <algorithm>

#include "klab/cuda.hpp"
#include "klab/ref/gdn.hpp"

namespace klab::gdn_recurrence {

namespace {

constexpr float kEps = static_cast<float>(ref::gdn::kL2NormEps);

// Threads for a block that reduces over n elements: a multiple of 32, at most 256 (gdn_kernels.cu).
int reduce_threads(int n) { return std::clamp((n + 31) / 32 * 32, 32, 256); }


// Grid (2 nk, batch): block x < nk normalises q of key head x, block nk + x normalises k of key head x,
// of sequence blockIdx.y. qn, kn (batch, nk, dk) dense.
__global__ void qk_norm_kernel(RecurrenceArgs a, float* __restrict__ qn, float* __restrict__ kn) {
  __shared__ float smem[33];
  const int nk = a.nk, dk = a.dk, b = blockIdx.y;
  const bool is_k = blockIdx.x >= static_cast<unsigned>(nk);
  const int head = is_k ? blockIdx.x - nk : blockIdx.x;
  const float* x = is_k ? a.k + b * a.k_stride + static_cast<std::int64_t>(head) * dk : a.q + b * a.q_stride + static_cast<std::int64_t>(head) * dk;
  float* out = (is_k ? kn : qn) + (static_cast<std::int64_t>(b) * nk + head) * dk;
  // ss = sum_i x[i]^2   (thread-strided partials, then block_sum)
  float p = 0.f;
  for (int i = threadIdx.x; i < dk; i += blockDim.x) p = fmaf(x[i], x[i], p);
  const float ss = block_sum(p, smem);
  // inv = 1 / sqrt(ss + eps); q additionally times 1 / sqrt(dk), after the norm
  const float inv = 1.f / sqrtf(ss + kEps);
  const float scale = is_k ? 1.f : 1.f / sqrtf(static_cast<float>(dk));
  for (int i = threadIdx.x; i < dk; i += blockDim.x) out[i] = is_k ? x[i] * inv : (x[i] * inv) * scale;
}

constexpr int kCols = 32;       // value columns per block: one per lane (a warp reads 128 contiguous bytes of a row)
constexpr int kGroups = 8;      // row groups per block: thread (lane, grp) takes rows grp, grp+8, ...
constexpr int kOnceRows = 16;   // once: S values per thread in registers, so dk <= 8 * 16

// Layout per sequence b: S[h][i][c] at S + b S_stride + (h dk + i) dv + c; block (h, tile, b) owns
// columns c = 32 tile + lane. q, k (nk, dk) per sequence at qs, ks with their strides (normalised:
// the workspace, or the caller's when !normalize_qk). The 8 row-group partials of kv and o are
// added by one thread in group order 0..7: a fixed order, not the serial i order of the CPU formula.
template <bool Once>
__global__ void __launch_bounds__(kCols * kGroups)
recurrence_kernel(RecurrenceArgs a, const float* __restrict__ qs, std::int64_t q_stride, const float* __restrict__ ks, std::int64_t k_stride) {
  __shared__ float part[kGroups][kCols];
  __shared__ float t_shared[kCols];
  const int h = blockIdx.x, b = blockIdx.z;
  const int nk = a.nk, nv = a.nv, dk = a.dk, dv = a.dv;
  const int kh = h / (nv / nk);  // key head of value head h (repeat_interleave, as an index)
  const int lane = threadIdx.x, grp = threadIdx.y;
  const int c = blockIdx.y * kCols + lane;
  const bool live = c < dv;
  const float* qh = qs + b * q_stride + static_cast<std::int64_t>(kh) * dk;
  const float* kk = ks + b * k_stride + static_cast<std::int64_t>(kh) * dk;
  const float* v = a.v + b * a.v_stride + static_cast<std::int64_t>(h) * dv;
  float* Sh = a.S + b * a.S_stride + static_cast<std::int64_t>(h) * dk * dv;
  // alpha = exp(g)   (the decay; g is in the log domain)
  const float alpha = expf(a.g[b * a.gb_stride + h]);
  const float beta = a.beta[b * a.gb_stride + h];

  // Pass 1. kv[c] = sum_i (alpha S[i][c]) k[i]   (alpha*S rounded on its own: __fmul_rn, never fused)
  float acc = 0.f;
  float s_reg[Once ? kOnceRows : 1];
  if constexpr (Once) {
#pragma unroll
    for (int r = 0; r < kOnceRows; ++r) {
      const int i = grp + kGroups * r;
      s_reg[r] = live && i < dk ? __fmul_rn(alpha, Sh[static_cast<std::int64_t>(i) * dv + c]) : 0.f;
    }
#pragma unroll
    for (int r = 0; r < kOnceRows; ++r) {
      const int i = grp + kGroups * r;
      if (live && i < dk) acc = fmaf(s_reg[r], kk[i], acc);
    }
  } else if (live) {
    for (int i = grp; i < dk; i += kGroups) acc = fmaf(__fmul_rn(alpha, Sh[static_cast<std::int64_t>(i) * dv + c]), kk[i], acc);
  }
  part[grp][lane] = acc;
  __syncthreads();
  if (grp == 0) {
    float kv = 0.f;
    for (int r = 0; r < kGroups; ++r) kv += part[r][lane];
    // t[c] = (v[c] - kv[c]) * beta
    t_shared[lane] = live ? (v[c] - kv) * beta : 0.f;
  }
  __syncthreads();  // also orders the reads of `part` above before its reuse below
  const float t = t_shared[lane];

  // Pass 2. S[i][c] = alpha S[i][c] + k[i] t[c] (written once); o[c] = sum_i S[i][c] q[i] (updated S)
  acc = 0.f;
  if constexpr (Once) {
#pragma unroll
    for (int r = 0; r < kOnceRows; ++r) {
      const int i = grp + kGroups * r;
      if (live && i < dk) {
        const float s = fmaf(kk[i], t, s_reg[r]);
        Sh[static_cast<std::int64_t>(i) * dv + c] = s;
        acc = fmaf(s, qh[i], acc);
      }
    }
  } else if (live) {
    for (int i = grp; i < dk; i += kGroups) {
      float* s_ptr = Sh + static_cast<std::int64_t>(i) * dv + c;
      const float s = fmaf(kk[i], t, __fmul_rn(alpha, *s_ptr));
      *s_ptr = s;
      acc = fmaf(s, qh[i], acc);
    }
  }
  part[grp][lane] = acc;
  __syncthreads();
  if (grp == 0 && live) {
    float sum = 0.f;
    for (int r = 0; r < kGroups; ++r) sum += part[r][lane];
    a.o[b * a.o_stride + static_cast<std::int64_t>(h) * dv + c] = sum;
  }
}

std::size_t seed_workspace(const RecurrenceArgs& a) {
  return a.normalize_qk ? 2 * static_cast<std::size_t>(a.batch) * a.nk * a.dk : 0;
}

template <bool Once>
void launch(const RecurrenceArgs& a, cudaStream_t s) {
  const float *qs = a.q, *ks = a.k;
  std::int64_t qst = a.q_stride, kst = a.k_stride;
  if (a.normalize_qk) {
    float* qn = a.workspace;
    float* kn = a.workspace + static_cast<std::int64_t>(a.batch) * a.nk * a.dk;
    qk_norm_kernel<<<dim3(2 * a.nk, a.batch), reduce_threads(a.dk), 0, s>>>(a, qn, kn);
    KLAB_CUDA_LAUNCH("qk_norm_kernel");
    qs = qn, ks = kn, qst = kst = static_cast<std::int64_t>(a.nk) * a.dk;
  }
  const dim3 grid(static_cast<unsigned>(a.nv), static_cast<unsigned>((a.dv + kCols - 1) / kCols), static_cast<unsigned>(a.batch));
  recurrence_kernel<Once><<<grid, dim3(kCols, kGroups), 0, s>>>(a, qs, qst, ks, kst);
  KLAB_CUDA_LAUNCH("recurrence_kernel");
}

std::string seed_can(const RecurrenceArgs& a) {
  if (a.batch > 65535) return "batch over 65535 (grid.z)";
  return "";
}
std::string once_can(const RecurrenceArgs& a) {
  if (a.dk > kGroups * kOnceRows) return "dk > 128: once holds at most 16 rows per thread in registers (8 row groups)";
  return seed_can(a);
}

}  // namespace

std::vector<RecurrenceKernel> seed_kernels() {
  RecurrenceKernel seed;
  seed.axes = {{"impl", "seed"}};
  seed.description = "the step's kernels: qk_norm launch, then (nv, dv/32, batch) blocks of 32x8 reading S twice (kv pass, update+o pass)";
  seed.can_implement = seed_can;
  seed.workspace_floats = seed_workspace;
  seed.launch = launch<false>;
  RecurrenceKernel once = seed;
  once.axes = {{"impl", "once"}};
  once.description = "seed with each thread's S slice kept in registers between the passes: S read once; bitwise equal to seed";
  once.can_implement = once_can;
  once.launch = launch<true>;
  return {seed, once};
}

}  // namespace klab::gdn_recurrence
