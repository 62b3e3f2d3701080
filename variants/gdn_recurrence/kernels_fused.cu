// gdn_recurrence/impl=fused,cols=C,rows=R,pdl=P: the whole recurrence in ONE launch, S read once
// and written once, 16 bytes at a time.
//
// Block (h, tile, b) owns columns [C tile, C tile + C) of value head h of sequence b: grid
// (nv * ceil(dv/C), batch), so at batch 1 and C = 32 the 48 heads give 192 blocks for 132 SMs.
// Threads: Q = C/4 column quads x (32/Q) row slots per warp; G = dk/R row groups over the block's
// warps (W = G Q / 32 of them). Thread (warp w, lane l) owns the 4 columns c0 = C tile + 4 (l % Q)
// and the R rows i = rg + G r (rg = w (32/Q) + l / Q, r < R): R float4 of S in registers, loaded
// before anything else (a warp's load covers 32/Q whole rows of the tile: C*4 contiguous bytes each).
//
// q/k L2 norm fused: every warp sums |q|^2 and |k|^2 of its key head (lane-strided fma, then a
// butterfly: the same bits in every warp and every block of that key head), so no launch, no
// shared memory and no barrier precede the math. Then, per thread and column (fixed order):
//   kn[i] = k[i] inv_k;  qn[i] = (q[i] inv_q) / sqrt(dk)      (inv = 1 / sqrt(sum x^2 + 1e-6))
//   s[i] = exp(g) S[i][c]                                      (the decayed state, in registers)
//   kv[c] = sum over the thread's rows r of s kn (fma, r increasing), then a butterfly over the
//          warp's row slots, then the warps' partials added in warp order 0..W-1 (each thread adds
//          them itself from shared memory: every thread gets the same bits, one barrier)
//   t[c] = (v[c] - kv[c]) beta
//   S[i][c] = fma(kn[i], t[c], s[i])   stored
//   o[c] = the same reduction of S[i][c] qn[i], summed over warps by warp 0's first row slot.
// Deterministic (no atomics, fixed order); not the seed's order (its norm is a block_sum, its rows
// 8 groups of 16), hence a tolerance, not bits, against seed.
//
// PDL (pdl=on: launched with programmatic stream serialization): the S loads are issued BEFORE
// griddepcontrol.wait, the q, k, v, g, beta loads after it; dependents are let go (launch_dependents)
// once every S store of the block is done (after the second barrier). Contract for a caller: no
// kernel that may still run when this one starts writes this S (true in the GDN step: S of a layer
// is written only by that layer's recurrence; true in the race: a stream graph rotates >= 2 copies
// and a predecessor lets this launch go only after its own S stores). pdl=off: the same kernel
// launched plainly (wait and launch_dependents are then no-ops): the twin that measures PDL.
//
// pdl=early (launched as pdl=on): the same arithmetic in the same order (the bits of its pdl=on twin),
// but no load before griddepcontrol.wait: the kernel lets its dependents go FIRST, then prefetches its
// S (and v, q, k, g, beta) into L2 (prefetch.global.L2, each thread its own 16-byte pieces), then
// waits, then loads everything. Why (reports/h200, stream mode, batch 1): pdl=on lets its dependents
// go only after its S stores (its contract: S loaded before the wait), so a launch's S reads start
// only when its predecessor is nearly done, and the best takes 3.93 us for 6.3 MB (44% of a read of
// the same bytes). Here the dependents start at once and request their S while this one computes; a
// prefetch only fills L2, the GPU's point of coherence, so a predecessor's later store of that S
// lands over it and the load after the wait sees it: no contract on the caller beyond PDL's own (a
// dependent reads nothing of ours before its wait).
//
// pdl=ahead (launched as pdl=on): pdl=on's order (S loaded into registers, or the stage, BEFORE
// griddepcontrol.wait; q, k, v, g, beta after it, prefetched into L2 before it) with pdl=early's trigger
// (dependents let go FIRST): the bits of its pdl=on twin. After the wait only the math, the stores and
// the completion remain on the chain: no L2 round trip for S. Contract: pdl=on's (no kernel that may
// still run when this one starts writes this S), which the early trigger makes a statement about
// every earlier launch that may still run, not only the one before: if a launch W that wrote this S
// were still running when this one starts, every launch between them would be resident too (each
// blocked at its wait, W being incomplete), so a caller keeps it by putting between W and this launch
// more blocks than the device holds at once. The race does: its stream mode rotates at least
// min_state_copies (kernels.hpp: 2 + floor of the launches the device holds at once, by the occupancy
// query; RecurrenceInstance::min_stream_copies) copies of S, under --hot too. Cold it rotates more anyway
// (30 at batch 1 in run-f55aa56, 4 at batch 8, 2 at batch 32), where the registered shapes fit 2.75 launches
// of batch 1 on the H200 at once (cols=32 rows=8: 4 blocks an SM, 528 in all, against 192 a launch), under
// one at batch 8 and 32 (1536 and 6144 blocks a launch).
// The GDN step refuses it in its PDL chain (RecurrenceKernel::state_before_wait), as it does pdl=on.
#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include <map>
#include <mutex>
#include <type_traits>

#include "gdn_recurrence/block_sum.cuh"
#include "gdn_recurrence/hist_ring.hpp"
#include "gdn_recurrence/kernels.hpp"
#include "gdn_recurrence/step_math.cuh"
#include "q4_gemv/prepared_x.cuh"  // onn's q8 form for out_proj (norm=gated, cols >= dv)

#include "klab/cuda.hpp"
#include "klab/error.hpp"
#include "klab/ref/gdn.hpp"

namespace klab::gdn_recurrence {

namespace {

constexpr float kEps = static_cast<float>(ref::gdn::kL2NormEps);
// The launch bound, per rows R: 512 threads (at most 128 registers a thread) up to R = 8; 256 (at
// most 255) for R = 16, whose 16 float4 of S (64 registers) plus kn, qn (32) would not fit in 128
// without spills. The registered configurations up to R = 8 keep the bound they were measured with.
constexpr int max_threads(int R) { return R >= 16 ? 256 : 512; }

__device__ __forceinline__ float4 f4_add(float4 a, float4 b) { return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w); }

// The sum over the lanes of a warp that share a column quad (lanes l, l ^ Q, l ^ 2Q, ...): a
// butterfly, so every one of them holds the same bits.
template <int Q>
__device__ __forceinline__ float4 row_slot_sum(float4 p) {
#pragma unroll
  for (int off = Q; off < 32; off *= 2) {
    p.x += __shfl_xor_sync(0xffffffffu, p.x, off);
    p.y += __shfl_xor_sync(0xffffffffu, p.y, off);
    p.z += __shfl_xor_sync(0xffffffffu, p.z, off);
    p.w += __shfl_xor_sync(0xffffffffu, p.w, off);
  }
  return p;
}

__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// Before the wait (pdl=early, pdl=ahead): q and k of value head h's key head in sequence b into L2 (warp 0, 128
// bytes a lane); the callers prefetch v, g and beta beside it.
__device__ __forceinline__ void prefetch_qk(const RecurrenceArgs& a, int b, int h, int w, int lane, int nv, int nk, int dk) {
  if (w == 0 && lane * 32 < dk) {
    const std::int64_t at = b * a.q_stride + static_cast<std::int64_t>(h / (nv / nk)) * dk + lane * 32;
    prefetch_l2(a.q + at), prefetch_l2(a.k + (at - b * a.q_stride + b * a.k_stride));
  }
}

// state=bf16: S lives in memory as bf16 (4 columns = 8 bytes), in registers as f32. A load widens
// exactly; a store rounds each element to nearest even (__floats2bfloat162_rn: the host's
// ref::float_to_bf16). The f32 state loads and stores its float4 as before.
// cache=stream (Cs): the f32 state's loads and stores with the evict-first hint (ld.global.cs /
// st.global.cs), the same values.
template <bool Bf16, bool Cs = false, class T>
__device__ __forceinline__ float4 load_s(const T* p) {
  if constexpr (Bf16) {
    const uint2 u = *reinterpret_cast<const uint2*>(p);
    const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.x));
    const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.y));
    return make_float4(lo.x, lo.y, hi.x, hi.y);
  } else if constexpr (Cs) {
    return __ldcs(reinterpret_cast<const float4*>(p));
  } else {
    return *reinterpret_cast<const float4*>(p);
  }
}
template <bool Bf16, bool Cs = false, class T>
__device__ __forceinline__ void store_s(T* p, float4 v) {
  if constexpr (Bf16) {
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
    uint2 u;
    u.x = *reinterpret_cast<const unsigned*>(&lo);
    u.y = *reinterpret_cast<const unsigned*>(&hi);
    *reinterpret_cast<uint2*>(p) = u;
  } else if constexpr (Cs) {
    __stcs(reinterpret_cast<float4*>(p), v);
  } else {
    *reinterpret_cast<float4*>(p) = v;
  }
}

// silu: step_math.cuh's, the GDN step's gated_norm formula (variants/gdn/gdn_kernels.cu).

// The most blocks of a cluster (norm=gated): the portable cluster size.
constexpr int kMaxCluster = 8;

// norm=gated (RecurrenceArgs::onn, kernels.hpp): the GDN step's gated RMSNorm on o, inside the
// recurrence. A head's dv columns span the ceil(dv / C) blocks of one thread block cluster (the
// launcher's cluster dimension, at most kMaxCluster; the blocks of head h are h tiles .. h tiles +
// tiles - 1, so cluster rank = column tile): each block sums the squares of its C columns of o (per
// quad one fma chain x, y, z, w, then a butterfly over warp 0's Q quads), the cluster syncs, every
// block adds the cluster's partial sums in rank order (the same bits in every block, through
// distributed shared memory), and each quad forms onn = ((o r) norm_w) silu(z), r = 1 / sqrt(ss / dv
// + eps): gated_norm's formula per element, not its reduction order (a block_sum over dv threads),
// so a tolerance against the unfused step, and o itself the bits of the kernel without the epilogue.
__device__ __forceinline__ void gated_norm_epilogue(const RecurrenceArgs& a, const float4* red_o, int W, int Q, int cq, int w, int rs, int lane,
                                                    bool live, int b, int h, int c0) {
  namespace cg = cooperative_groups;
  __shared__ float ss_part;
  cg::cluster_group cluster = cg::this_cluster();
  const std::int64_t at = b * a.o_stride + static_cast<std::int64_t>(h) * a.dv + c0;
  float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
  if (w == 0) {
    if (rs == 0 && live) {
      o = red_o[cq];
      for (int ww = 1; ww < W; ++ww) o = f4_add(o, red_o[ww * Q + cq]);
      *reinterpret_cast<float4*>(a.o + at) = o;
    }
    // ss = sum of o^2 over the block's columns (0 from dead quads and the other row slots' lanes)
    float ss = fmaf(o.w, o.w, fmaf(o.z, o.z, fmaf(o.y, o.y, o.x * o.x)));
    for (int off = Q / 2; off > 0; off /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, off);
    if (lane == 0) ss_part = ss;
  }
  cluster.sync();  // every block's ss_part is written
  if (w == 0 && rs == 0 && live) {
    float tot = 0.f;
    for (unsigned r = 0; r < cluster.num_blocks(); ++r) tot += *cluster.map_shared_rank(&ss_part, r);
    // r = 1 / sqrt(mean(o^2) + eps); onn = o * r * norm_w * silu(z)
    const float rr = 1.f / sqrtf(tot / static_cast<float>(a.dv) + a.eps);
    const float4 z = *reinterpret_cast<const float4*>(a.z + at);
    const float4 nw = *reinterpret_cast<const float4*>(a.norm_w + c0);
    const float4 y = make_float4(o.x * rr * nw.x * silu(z.x), o.y * rr * nw.y * silu(z.y), o.z * rr * nw.z * silu(z.z), o.w * rr * nw.w * silu(z.w));
    *reinterpret_cast<float4*>(a.onn + at) = y;
  }
  cluster.sync();  // no block leaves while another still reads its ss_part
}

// norm=gated with a head's dv columns in this one block (cols >= dv, the launch without a cluster):
// the cluster epilogue's arithmetic with one rank (its sum over the ranks is 0 + ss, as here), and,
// with a.xq, onn's q8 form for out_proj (warp 0's lanes hold 4 consecutive columns each, 8 lanes a
// block of 32: q4_gemv's store_prepared_q8_quads, block (h dv + c0) / 32; check_args: batch 1).
__device__ __forceinline__ void gated_norm_single(const RecurrenceArgs& a, const float4* red_o, int W, int Q, int cq, int w, int rs, int lane, bool live,
                                                  int b, int h, int c0) {
  if (w != 0) return;
  const std::int64_t at = b * a.o_stride + static_cast<std::int64_t>(h) * a.dv + c0;
  const bool mine = rs == 0 && live;
  float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
  if (mine) {
    o = red_o[cq];
    for (int ww = 1; ww < W; ++ww) o = f4_add(o, red_o[ww * Q + cq]);
    *reinterpret_cast<float4*>(a.o + at) = o;
  }
  float ss = fmaf(o.w, o.w, fmaf(o.z, o.z, fmaf(o.y, o.y, o.x * o.x)));
  for (int off = Q / 2; off > 0; off /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  const float tot = 0.f + __shfl_sync(0xffffffffu, ss, 0);  // lane 0's: the cluster epilogue's ss_part of rank 0
  float4 y = make_float4(0.f, 0.f, 0.f, 0.f);
  if (mine) {
    const float rr = 1.f / sqrtf(tot / static_cast<float>(a.dv) + a.eps);
    const float4 z = *reinterpret_cast<const float4*>(a.z + at);
    const float4 nw = *reinterpret_cast<const float4*>(a.norm_w + c0);
    y = make_float4(o.x * rr * nw.x * silu(z.x), o.y * rr * nw.y * silu(z.y), o.z * rr * nw.z * silu(z.z), o.w * rr * nw.w * silu(z.w));
    *reinterpret_cast<float4*>(a.onn + at) = y;
  }
  if (a.xq) q4_gemv::store_prepared_q8_quads(a.xq, mine ? (h * a.dv + c0) / 32 : -1, y, lane);  // uniform: a kernel argument
}

// norm=last: the gated norm of head h by the LAST of its column blocks to finish, with no cluster and
// no block of a whole head. Each block stores its columns of o, fences, and counts itself in
// a.count[b nv + h] (one atomicAdd by thread 0); the block that brings the count to `tiles` resets it
// to 0 for the next launch and runs the GDN step's gated_norm_q8 kernel body on the head's o, read
// back through L2 (variants/gdn/gdn_kernels.cu: one thread a column, blockDim == dv, so
// p = fma(o, o, 0); the same block_sum (block_sum.cuh);
// r = 1 / sqrt(ss / dv + eps); onn = o r norm_w silu(z); the q8 form by store_prepared_q8_warp): the
// same operands in the same order, so onn and its q8 form are the gated-norm launch's bits, and o the
// bits of the kernel without the epilogue. No block waits for another: the count only picks which
// block does the head's work. Needs blockDim.x == dv (can_implement, when onn is asked).
__device__ __forceinline__ void gated_norm_last(const RecurrenceArgs& a, const float4* red_o, int W, int Q, int cq, int w, int rs, bool live, int b, int h,
                                                int c0, int tiles) {
  __shared__ float smem[33];
  __shared__ int last;
  const std::int64_t head = b * a.o_stride + static_cast<std::int64_t>(h) * a.dv;
  if (w == 0 && rs == 0 && live) {
    float4 o = red_o[cq];
    for (int ww = 1; ww < W; ++ww) o = f4_add(o, red_o[ww * Q + cq]);
    *reinterpret_cast<float4*>(a.o + head + c0) = o;
  }
  __threadfence();  // this block's o, device-wide, before it counts
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(a.count + b * a.nv + h, 1) == tiles - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();  // the other blocks fenced their o before counting
  const int c = threadIdx.x, lane = c & 31;
  const float oc = __ldcg(a.o + head + c);
  const float ss = block_sum(fmaf(oc, oc, 0.f), smem);
  const float r = 1.f / sqrtf(ss / static_cast<float>(a.dv) + a.eps);
  const float v = oc * r * a.norm_w[c] * silu(a.z[head + c]);
  a.onn[head + c] = v;
  if (a.xq) q4_gemv::store_prepared_q8_warp(a.xq, int((h * a.dv + c) / 32), v, lane);  // uniform: a kernel argument (batch 1)
  if (c == 0) a.count[b * a.nv + h] = 0;
}

// prep=conv (RecurrenceArgs::xc): the block's inputs formed here from the raw projections, as the GDN
// step's conv_norm_bg forms them (variants/gdn/gdn_kernels.cu), into shared memory `sm`:
//   sm[0, dk)          q of key head kh, conv + SiLU (step_math.cuh's conv_value)
//   sm[dk, 2 dk)       k of key head kh, the same
//   sm[2 dk, 2 dk + C) v of this block's C columns of head h (0 past dv)
//   sm[2 dk + C]       beta of head h, sm[2 dk + C + 1] its g (step_math.cuh)
// then one barrier. Each element is written out once for readback: a key head's q, k (and their xcv)
// by the block of its first value head's first column tile, v's xcv by its own block, beta and g by
// tile 0 of the head. hist is only read. (The norm follows in the kernel, every warp on its own.)
//
// The loads come first: each thread's channels kU at a time, with ck a compile-time constant where it
// is the model's (CK = 4; 0: a.ck), so that every load of xc, the history and the weights of those
// channels is issued before the first fma waits: one L2 round trip, not one a channel. Measured on the
// H200, 2026-12-04 (reports/h200/run-prep-conv, per form): the loop that stored each channel's xcv before
// the next channel's loads ended 8.9 us after in_proj (d0d353c) against 7.3 for conv_norm_bg and the
// recurrence apart; this one 6.5 us (c0b53d5). hist is only read: the v channels' shift here cost more
// than it saved in the gated norm (f70d2d7, through shift_history's reloads: 11.5 us after in_proj;
// c6e7c3b, from frames held in registers: 8.3 us), so the caller shifts every channel (HistShift).
// The conv channel of a prep=conv block's value i (i < 2 dk + C; head h, its key head kh = h / (nv / nk),
// column tile `tile` of C): q of kh for i < dk (channel kh dk + i), its k for i < 2 dk (nk dk + kh dk + i - dk),
// then the tile's columns of v (2 nk dk + h dv + tile C + i - 2 dk); -1 for a column past dv.
__device__ __forceinline__ int conv_channel(int i, int h, int kh, int tile, int C, int nk, int dk, int dv) {
  if (i < 2 * dk) return (i < dk ? 0 : nk * dk - dk) + kh * dk + i;
  return tile * C + (i - 2 * dk) < dv ? 2 * nk * dk + h * dv + tile * C + (i - 2 * dk) : -1;
}
// hist=ring (Ring, hist_ring.hpp): the frames are read at ring position `pos`, which the kernel loads
// right after its wait (the launch's own: no block moves it before every block has taken its ticket),
// beside the state's loads. The block that writes a channel's xcv also writes its xc into the ring's
// write frame, which no block of the launch reads. (A guess of the position loaded before the wait, checked
// after it and formed again when wrong, costs 8-24 bytes of stack a thread at 128 registers: ptxas, sm_90,
// 2026-12-05; the load after the wait costs none.)
template <int CK, bool Ring = false>
__device__ __forceinline__ void conv_prep(const RecurrenceArgs& a, int h, int tile, int C, float* sm, int pos = 0) {
  constexpr int kU = 4;
  const int nk = a.nk, nv = a.nv, dk = a.dk, dv = a.dv, ck = CK > 0 ? CK : a.ck;
  const int conv_dim = 2 * nk * dk + nv * dv, kh = h / (nv / nk), n = 2 * dk + C;
  const bool qk_writer = h % (nv / nk) == 0 && tile == 0;
  float bg[4];  // b, a, A_log, dt_bias of head h (thread 0), loaded with the rest
  if (threadIdx.x == 0) bg[0] = a.ba[h], bg[1] = a.ba[nv + h], bg[2] = a.a_log[h], bg[3] = a.dt_bias[h];
  for (int i0 = int(threadIdx.x); i0 < n; i0 += kU * int(blockDim.x)) {
    float x[kU];
    int ch[kU];
    if constexpr (Ring) {
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int i = i0 + u * int(blockDim.x);
        ch[u] = i < n ? conv_channel(i, h, kh, tile, C, nk, dk, dv) : -1;
        x[u] = ch[u] >= 0 ? conv_value_of(a.xc[ch[u]], a.conv_w + static_cast<std::size_t>(ch[u]) * ck, ck,
                                          [&](int j) { return a.hist[static_cast<std::size_t>(ring_frame(pos, j, ck)) * conv_dim + ch[u]]; })
                          : 0.f;
      }
#pragma unroll
      for (int u = 0; u < kU; ++u)
        if (ch[u] >= 0 && (i0 + u * int(blockDim.x) >= 2 * dk || qk_writer) && ck > 1)
          a.hist[static_cast<std::size_t>(ring_write_frame(pos, ck)) * conv_dim + ch[u]] = a.xc[ch[u]];  // loaded again: no register held
    } else {
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int i = i0 + u * int(blockDim.x);
        ch[u] = i < n ? conv_channel(i, h, kh, tile, C, nk, dk, dv) : -1;
        x[u] = ch[u] >= 0 ? conv_value(a.xc[ch[u]], a.conv_w + static_cast<std::size_t>(ch[u]) * ck, a.hist, conv_dim, ck, ch[u]) : 0.f;
      }
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int i = i0 + u * int(blockDim.x);
      if (i < n) sm[i] = x[u];
      if (ch[u] >= 0 && (i >= 2 * dk || qk_writer)) a.xcv_out[ch[u]] = x[u];
    }
  }
  if (threadIdx.x == 0) {
    const float be = beta_of(bg[0]), g = g_of(bg[1], bg[2], bg[3]);
    sm[2 * dk + C] = be;
    sm[2 * dk + C + 1] = g;
    if (tile == 0) a.beta_out[h] = be, a.g_out[h] = g;
  }
  __syncthreads();
}

// hist=ring: after every thread of the block has formed its channels (conv_prep's barrier: every read of
// the position and the frames is done), thread 0 takes the block's ticket; the last of the launch's
// blocks resets the ticket and moves the position on for the next launch, which reads both after its
// griddepcontrol.wait (this launch complete).
__device__ __forceinline__ void ring_ticket(const RecurrenceArgs& a, int pos) {
  if (threadIdx.x != 0) return;
  if (atomicAdd(a.hist_ring + 1, 1) == int(gridDim.x * gridDim.y) - 1) {
    a.hist_ring[1] = 0;
    a.hist_ring[0] = ring_next(pos, a.ck);
  }
}

// The sum of squares of x[0, n) in conv_norm_bg's order: thread t of reduce_threads(n) accumulates
// x[t], x[t + T], ... by fma from +0, then block_sum (block_sum_in_warp: one warp, the same bits).
__device__ __forceinline__ float norm_ss(const float* x, int n) {
  const int T = reduce_threads(n);
  return block_sum_in_warp(T, [&](int t) {
    float p = 0.f;
    for (int i = t; i < n; i += T) p = fmaf(x[i], x[i], p);
    return p;
  });
}

// Smem floats of prep=conv's inputs (conv_prep's layout).
constexpr std::size_t conv_prep_floats(int dk, int C) { return std::size_t(2 * dk + C + 2); }

// stage=smem (Sm): S goes to shared memory by cp.async (16 bytes a copy, each thread its own R
// float4 at stage[r blockDim + tid]) instead of registers, and both passes read it from there:
// pass 1 forms s = exp(g) S and the kv partial from the stage, pass 2 forms s again (the same product of
// the same operands), then fma(kn, t, s), stores it and the o partial: every value the register form
// computes, in its order, so o and S are its twin's bit for bit. No float4 of S is held across the
// reduction, so the kernel fits 64 registers (fused_sm_kernel's bound: 8 blocks of 128 threads an SM
// at cols=32, rows=8, against 4 of the register form at 126), and 8 x 16 KB of S are in flight an SM,
// not 4 x 16 KB. Each thread reads only what it copied itself (cp.async.wait_all, no barrier).
// Stamp (the stamp probe, `klab probe-rec`; pdl=ahead only): thread 0 of each block reads %globaltimer at
// kStampPoints points of its path into g_stamps[(launch * blocks + block) * kStampPoints + i], launch = the index of
// the launch's state copy ((S - g_stamp_state) / g_stamp_stride: the probe gives every launch a copy of its own);
// launches past g_stamp_launches write nothing. Not a variant: the stamps' stores are on the path they measure. (A
// ticket taken at entry named the launch in the first form: its atomic may reach L2 after the block lets its
// dependents go, so blocks of two launches could swap tickets, and rows came out holed on an H100.)
//   0 entry; 1 S requested, dependents let go, before griddepcontrol.wait; 2 after the wait; 3 pass 1 done (S and
//   the inputs arrived, the kv partial in shared memory); 4 after the first barrier; 5 pass 2 done (S stored);
//   6 after the second barrier; 7 o stored, at exit.
constexpr int kStampPoints = 8;
__device__ unsigned long long* g_stamps;
__device__ const float* g_stamp_state;
__device__ long long g_stamp_stride;
__device__ int g_stamp_launches;
template <bool Stamp>
struct Stamper {
  unsigned long long* row = nullptr;
  __device__ void start(const float* S) {
    if constexpr (Stamp) {
      if (threadIdx.x == 0) {
        const unsigned long long t = now();
        const long long launch = (S - g_stamp_state) / g_stamp_stride;
        const unsigned blocks = gridDim.x * gridDim.y, block = blockIdx.y * gridDim.x + blockIdx.x;
        if (launch >= 0 && launch < g_stamp_launches) row = g_stamps + (std::size_t(launch) * blocks + block) * kStampPoints;
        if (row) row[0] = t;
      }
    }
  }
  __device__ void at(int i) {
    if constexpr (Stamp) {
      if (threadIdx.x == 0 && row) row[i] = now();
    }
  }
  __device__ static unsigned long long now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
    return t;
  }
};

// Od (o=direct, pdl=ahead's register kernel only): o without a second reduction. o = S'^T qn with S' = s + kn t^T is
// s^T qn + t (kn . qn): pass 1 sums s qn beside s kn (the same butterfly and warps' sums, one barrier for both), and
// kq = kn . qn is the key head's k . q times the two norms' factors (the norm loop's third sum). After the barrier each
// thread forms t, stores S' (the same values in the same order as the two-pass form: S bit for bit) and warp 0's first
// row slot writes o = sq + t kq: no second barrier, no o partials. o is the same sum in another order: a tolerance, not
// bits, against the two-pass kernel.
template <int C, int R, bool Early = false, bool Norm = false, bool Bf16 = false, bool Cs = false, bool Last = false, bool Conv = false, bool Ring = false,
          bool Sm = false, bool Ahead = false, bool Stamp = false, bool Next = false, bool Od = false>
__device__ __forceinline__ void fused_body(const RecurrenceArgs& a) {
  static_assert(!Stamp || Ahead, "the stamp probe instruments pdl=ahead");
  static_assert(!Next || (Ahead && !Sm), "pdl=next: pdl=ahead's kernel with its dependents let go after the wait");
  static_assert(!Od || (Ahead && !Sm && !Next), "o=direct: pdl=ahead's register kernel");
  Stamper<Stamp> stamp;
  stamp.start(a.S);
  static_assert(!(Ahead && (Early || Norm || Bf16 || Cs || Last || Conv)), "pdl=ahead: the plain f32 kernel, pdl=on's loads with pdl=early's trigger");
  static_assert(C >= 4 && C <= 128 && (C & (C - 1)) == 0, "cols: a power of two from 4 to 128 (C/4 column quads divide a warp)");
  static_assert(R >= 1 && R <= 16, "rows: 1 to 16 float4 of S a thread (registers)");
  constexpr int Q = C / 4, RW = 32 / Q;
  extern __shared__ float4 red[];  // (2, W, Q): the warps' kv partials, then their o partials
  const int nk = a.nk, nv = a.nv, dk = a.dk, dv = a.dv;
  const int tiles = (dv + C - 1) / C;
  const int h = blockIdx.x / tiles, tile = blockIdx.x % tiles, b = blockIdx.y;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, W = blockDim.x >> 5;
  const int cq = lane % Q, rs = lane / Q;
  const int G = W * RW;  // == dk / R (check_args)
  const int rg = w * RW + rs;
  const int c0 = tile * C + 4 * cq;
  const bool live = c0 < dv;  // dv % 4 == 0: a quad is wholly in or out
  using SElem = std::conditional_t<Bf16, __nv_bfloat16, float>;  // S's element in memory (state=bf16: a.S points to bf16)
  SElem* Sh = reinterpret_cast<SElem*>(a.S) + b * a.S_stride + static_cast<std::int64_t>(h) * dk * dv + c0;

  float4 s[R];
  const bool prep = Conv && a.xc != nullptr;  // uniform: a kernel argument
  if constexpr (Early) {
    asm volatile("griddepcontrol.launch_dependents;");
    if (live) {
#pragma unroll
      for (int r = 0; r < R; ++r) prefetch_l2(Sh + static_cast<std::int64_t>(rg + G * r) * dv);
      if (!prep) prefetch_l2(a.v + b * a.v_stride + static_cast<std::int64_t>(h) * dv + c0);
    }
    if (prep) {  // the conv's history of the block's q, k and v channels (xc: written by the predecessor, read after the wait)
      const int conv_dim = 2 * nk * dk + nv * dv, kh = h / (nv / nk);
      for (int i = int(threadIdx.x) * 32; i < 2 * dk + C; i += int(blockDim.x) * 32) {  // a 128-byte line a thread
        const int ch = conv_channel(i, h, kh, tile, C, nk, dk, dv);
        if (ch < 0) continue;
        for (int j = 0; j < a.ck - (Ring ? 0 : 1); ++j) prefetch_l2(a.hist + static_cast<std::int64_t>(j) * conv_dim + ch);  // the ring: every frame
        for (int l = 0; l < a.ck; ++l) prefetch_l2(a.conv_w + static_cast<std::int64_t>(ch) * a.ck + 32 * l);  // the 32 channels' weights
      }
      if (threadIdx.x == 0) prefetch_l2(a.a_log + h), prefetch_l2(a.dt_bias + h);
    } else {
      prefetch_qk(a, b, h, w, lane, nv, nk, dk);
    }
    if (threadIdx.x == 0 && !prep) prefetch_l2(a.g + b * a.gb_stride + h), prefetch_l2(a.beta + b * a.gb_stride + h);
    asm volatile("griddepcontrol.wait;" ::: "memory");
  }
  // hist=ring (pdl=early only: after its wait): the history's position, issued before the state's loads
  int pos = 0;
  if constexpr (Ring)
    if (prep) pos = __ldcg(a.hist_ring);
  // pdl=on|off: the state first, before the wait: it depends on no predecessor (PDL contract above).
  float4* stage = red + 2 * W * Q;  // stage=smem: R float4 a thread after the warps' partials
  if constexpr (Sm) {
    if (live) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(stage + r * int(blockDim.x) + int(threadIdx.x)));
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(Sh + static_cast<std::int64_t>(rg + G * r) * dv) : "memory");
      }
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  } else {
#pragma unroll
    for (int r = 0; r < R; ++r)
      s[r] = live ? load_s<Bf16, Cs>(Sh + static_cast<std::int64_t>(rg + G * r) * dv) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  if constexpr (Ahead) {  // pdl=ahead: dependents first, S already requested; the inputs the predecessor may write into L2 before the wait
    if constexpr (!Next) asm volatile("griddepcontrol.launch_dependents;");
    if (live) prefetch_l2(a.v + b * a.v_stride + static_cast<std::int64_t>(h) * dv + c0);
    prefetch_qk(a, b, h, w, lane, nv, nk, dk);
    if (threadIdx.x == 0) prefetch_l2(a.g + b * a.gb_stride + h), prefetch_l2(a.beta + b * a.gb_stride + h);
  }
  stamp.at(1);
  if constexpr (!Early) asm volatile("griddepcontrol.wait;" ::: "memory");
  if constexpr (Next) asm volatile("griddepcontrol.launch_dependents;");  // pdl=next: one launch ahead at most
  stamp.at(2);

  const int kh = h / (nv / nk);  // key head of value head h
  const float* qh = a.q + b * a.q_stride + static_cast<std::int64_t>(kh) * dk;
  const float* kh_ = a.k + b * a.k_stride + static_cast<std::int64_t>(kh) * dk;
  float kn[R], qn[R];
  float alpha, beta;
  float4 v;
  if constexpr (Conv) {
    if (prep) {
      // q, k, v, beta, g as conv_norm_bg forms them; the norm per warp in its order (norm_ss), then
      // kn = k inv_k and qn = (q inv_q) / sqrt(dk): conv_norm_bg's norm_write, so its q and k bits.
      float* sm = reinterpret_cast<float*>(red + 2 * W * Q);
      if constexpr (Ring) {
        if (a.ck == 4) conv_prep<4, true>(a, h, tile, C, sm, pos);
        else conv_prep<0, true>(a, h, tile, C, sm, pos);
        ring_ticket(a, pos);
      } else if (a.ck == 4) {
        conv_prep<4>(a, h, tile, C, sm);
      } else {
        conv_prep<0>(a, h, tile, C, sm);
      }
      const float inv_q = l2_inv(norm_ss(sm, dk), kEps), inv_k = l2_inv(norm_ss(sm + dk, dk), kEps);
      const float scale = 1.f / sqrtf(static_cast<float>(dk));
#pragma unroll
      for (int r = 0; r < R; ++r) {
        kn[r] = sm[dk + rg + G * r] * inv_k;
        qn[r] = (sm[rg + G * r] * inv_q) * scale;
      }
      if (w == 0 && h % (nv / nk) == 0 && tile == 0)  // the key head's writer block (conv_prep's) writes its q and k
        for (int i = lane; i < dk; i += 32) {
          a.q_out[static_cast<std::int64_t>(kh) * dk + i] = (sm[i] * inv_q) * scale;
          a.k_out[static_cast<std::int64_t>(kh) * dk + i] = sm[dk + i] * inv_k;
        }
      beta = sm[2 * dk + C];
      alpha = expf(sm[2 * dk + C + 1]);
      v = live ? make_float4(sm[2 * dk + 4 * cq], sm[2 * dk + 4 * cq + 1], sm[2 * dk + 4 * cq + 2], sm[2 * dk + 4 * cq + 3]) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
  if (!prep) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      kn[r] = kh_[rg + G * r];
      qn[r] = qh[rg + G * r];
    }
    alpha = expf(a.g[b * a.gb_stride + h]);
    beta = a.beta[b * a.gb_stride + h];
    v = live ? *reinterpret_cast<const float4*>(a.v + b * a.v_stride + static_cast<std::int64_t>(h) * dv + c0) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  [[maybe_unused]] float kq = 0.f;  // Od: kn . qn over the head's dk rows
  if (a.normalize_qk && !prep) {
    // ss = sum_j x[j]^2 (lane-strided fma, then a butterfly); inv = 1 / sqrt(ss + eps)
    float pk = 0.f, pq = 0.f, pkq = 0.f;
    for (int j = lane; j < dk; j += 32) {
      const float kj = kh_[j], qj = qh[j];
      pk = fmaf(kj, kj, pk);
      pq = fmaf(qj, qj, pq);
      if constexpr (Od) pkq = fmaf(kj, qj, pkq);
    }
    for (int off = 16; off > 0; off /= 2) {
      pk += __shfl_xor_sync(0xffffffffu, pk, off);
      pq += __shfl_xor_sync(0xffffffffu, pq, off);
      if constexpr (Od) pkq += __shfl_xor_sync(0xffffffffu, pkq, off);
    }
    const float inv_k = 1.f / sqrtf(pk + kEps), inv_q = 1.f / sqrtf(pq + kEps);
    const float scale = 1.f / sqrtf(static_cast<float>(dk));
#pragma unroll
    for (int r = 0; r < R; ++r) {
      kn[r] = kn[r] * inv_k;
      qn[r] = (qn[r] * inv_q) * scale;
    }
    if constexpr (Od) kq = ((pkq * inv_k) * inv_q) * scale;
  } else if constexpr (Od) {  // q and k taken as normalised
    float pkq = 0.f;
    for (int j = lane; j < dk; j += 32) pkq = fmaf(kh_[j], qh[j], pkq);
    for (int off = 16; off > 0; off /= 2) pkq += __shfl_xor_sync(0xffffffffu, pkq, off);
    kq = pkq;
  }

  // s = exp(g) S; kv partial = sum_r s kn
  if constexpr (Sm) asm volatile("cp.async.wait_all;" ::: "memory");
  // stage=smem: S of row r from the stage (0 for a dead quad, as the register form's)
  const auto staged = [&](int r) { return live ? stage[r * int(blockDim.x) + int(threadIdx.x)] : make_float4(0.f, 0.f, 0.f, 0.f); };
  float4 p = make_float4(0.f, 0.f, 0.f, 0.f);
  [[maybe_unused]] float4 pq = p;  // Od: the s^T qn partial
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float4 x;
    if constexpr (Sm) x = staged(r);
    else x = s[r];
    x = make_float4(alpha * x.x, alpha * x.y, alpha * x.z, alpha * x.w);
    if constexpr (!Sm) s[r] = x;
    p.x = fmaf(x.x, kn[r], p.x);
    p.y = fmaf(x.y, kn[r], p.y);
    p.z = fmaf(x.z, kn[r], p.z);
    p.w = fmaf(x.w, kn[r], p.w);
    if constexpr (Od) {
      pq.x = fmaf(x.x, qn[r], pq.x);
      pq.y = fmaf(x.y, qn[r], pq.y);
      pq.z = fmaf(x.z, qn[r], pq.z);
      pq.w = fmaf(x.w, qn[r], pq.w);
    }
  }
  p = row_slot_sum<Q>(p);
  if constexpr (Od) {
    pq = row_slot_sum<Q>(pq);
    if (rs == 0) red[W * Q + w * Q + cq] = pq;  // the o partials' half
  }
  if (rs == 0) red[w * Q + cq] = p;
  stamp.at(3);
  __syncthreads();
  stamp.at(4);
  // kv = the warps' partials in warp order; t = (v - kv) beta
  float4 kv = red[cq];
  for (int ww = 1; ww < W; ++ww) kv = f4_add(kv, red[ww * Q + cq]);
  const float4 t = make_float4((v.x - kv.x) * beta, (v.y - kv.y) * beta, (v.z - kv.z) * beta, (v.w - kv.w) * beta);
  if constexpr (Od) {  // S = s + kn t^T stored; o = sq + t kq by warp 0's first row slot, no second reduction
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float4 x = s[r];
      x.x = fmaf(kn[r], t.x, x.x);
      x.y = fmaf(kn[r], t.y, x.y);
      x.z = fmaf(kn[r], t.z, x.z);
      x.w = fmaf(kn[r], t.w, x.w);
      if (live) store_s<false, false>(Sh + static_cast<std::int64_t>(rg + G * r) * dv, x);
    }
    stamp.at(5);
    stamp.at(6);
    if (w == 0 && rs == 0 && live) {
      float4 sq = red[W * Q + cq];
      for (int ww = 1; ww < W; ++ww) sq = f4_add(sq, red[W * Q + ww * Q + cq]);
      const float4 o = make_float4(fmaf(t.x, kq, sq.x), fmaf(t.y, kq, sq.y), fmaf(t.z, kq, sq.z), fmaf(t.w, kq, sq.w));
      *reinterpret_cast<float4*>(a.o + b * a.o_stride + static_cast<std::int64_t>(h) * dv + c0) = o;
    }
    stamp.at(7);
    return;
  }

  // S = s + kn t^T (stored); o partial = sum_r S qn
  p = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float4 x;
    if constexpr (Sm) {
      x = staged(r);
      x = make_float4(alpha * x.x, alpha * x.y, alpha * x.z, alpha * x.w);  // pass 1's s, formed again
    } else {
      x = s[r];
    }
    x.x = fmaf(kn[r], t.x, x.x);
    x.y = fmaf(kn[r], t.y, x.y);
    x.z = fmaf(kn[r], t.z, x.z);
    x.w = fmaf(kn[r], t.w, x.w);
    if (live) store_s<Bf16, Cs>(Sh + static_cast<std::int64_t>(rg + G * r) * dv, x);
    p.x = fmaf(x.x, qn[r], p.x);
    p.y = fmaf(x.y, qn[r], p.y);
    p.z = fmaf(x.z, qn[r], p.z);
    p.w = fmaf(x.w, qn[r], p.w);
  }
  p = row_slot_sum<Q>(p);
  float4* red_o = red + W * Q;
  if (rs == 0) red_o[w * Q + cq] = p;
  stamp.at(5);
  __syncthreads();
  stamp.at(6);
  // Every S store of this block is done: dependents may start (they read only their own state first).
  if constexpr (!Early && !Ahead) asm volatile("griddepcontrol.launch_dependents;");
  if constexpr (Last) {
    if (a.onn) {  // uniform: a kernel argument
      gated_norm_last(a, red_o, W, Q, cq, w, rs, live, b, h, c0, tiles);
      return;
    }
  }
  if constexpr (Norm) {
    if (a.onn) {  // uniform: a kernel argument
      if constexpr (C >= 128) {
        if (tiles == 1) {  // the launch without a cluster (launch<>)
          gated_norm_single(a, red_o, W, Q, cq, w, rs, lane, live, b, h, c0);
          return;
        }
      }
      gated_norm_epilogue(a, red_o, W, Q, cq, w, rs, lane, live, b, h, c0);
      return;
    }
  }
  if (w == 0 && rs == 0 && live) {
    float4 o = red_o[cq];
    for (int ww = 1; ww < W; ++ww) o = f4_add(o, red_o[ww * Q + cq]);
    *reinterpret_cast<float4*>(a.o + b * a.o_stride + static_cast<std::int64_t>(h) * dv + c0) = o;
  }
  stamp.at(7);
}

template <int C, int R, bool Early = false, bool Norm = false, bool Bf16 = false, bool Cs = false, bool Last = false, bool Conv = false, bool Ring = false>
__global__ void __launch_bounds__(max_threads(R)) fused_kernel(RecurrenceArgs a) {
  fused_body<C, R, Early, Norm, Bf16, Cs, Last, Conv, Ring>(a);
}

// stage=smem: at most 64 registers a thread (512 threads, 2 blocks: 65536 / 1024), so that 8 blocks of
// cols=32,rows=8's 128 threads fit an SM by registers.
template <int C, int R, bool Early, bool Ahead = false>
__global__ void __launch_bounds__(512, 2) fused_sm_kernel(RecurrenceArgs a) {
  fused_body<C, R, Early, false, false, false, false, false, false, true, Ahead>(a);
}

// pdl=ahead, S in registers: fused_kernel's bound. Stamp: the stamp probe's instance (probe_rec). Next: pdl=next.
template <int C, int R, bool Stamp = false, bool Next = false, bool Od = false>
__global__ void __launch_bounds__(max_threads(R)) fused_ahead_kernel(RecurrenceArgs a) {
  fused_body<C, R, false, false, false, false, false, false, false, false, true, Stamp, Next, Od>(a);
}

template <int C, int R>
int threads_for(const RecurrenceArgs& a) {
  return a.dk / R * (C / 4);  // G row groups of Q quads
}
// fused_body's `red`: the warps' kv partials, then their o partials, (2, W, Q) float4 for a block of `threads`.
template <int C>
std::size_t partials_bytes(int threads) {
  return 2 * std::size_t(threads / 32) * (C / 4) * sizeof(float4);
}

template <int C, int R>
std::string can(const RecurrenceArgs& a) {
  if (a.dk % R != 0) return "dk (" + std::to_string(a.dk) + ") is not a multiple of rows=" + std::to_string(R);
  if ((a.dk / R) % (32 / (C / 4)) != 0)
    return "dk / rows (" + std::to_string(a.dk / R) + " row groups) is not a multiple of the " + std::to_string(32 / (C / 4)) +
           " row slots of a warp";
  if (threads_for<C, R>(a) > max_threads(R))
    return "dk / rows * cols / 4 = " + std::to_string(threads_for<C, R>(a)) + " threads, over the launch bound " +
           std::to_string(max_threads(R)) + " of rows=" + std::to_string(R);
  if (a.dv % 4 != 0) return "dv (" + std::to_string(a.dv) + ") is not a multiple of 4 (16-byte loads)";
  if (a.batch > 65535) return "batch over 65535 (grid.y)";
  return "";
}

template <int C, int R>
std::string can_norm(const RecurrenceArgs& a) {
  if (auto why = can<C, R>(a); !why.empty()) return why;
  if ((a.dv + C - 1) / C > kMaxCluster)
    return "dv / cols = " + std::to_string((a.dv + C - 1) / C) + " column tiles, over the " + std::to_string(kMaxCluster) +
           " blocks of a portable cluster (norm=gated: a head's tiles are one cluster)";
  return "";
}

// norm=last: can's checks, and with the epilogue asked (onn) one thread a column of a head.
template <int C, int R>
std::string can_last(const RecurrenceArgs& a) {
  if (auto why = can<C, R>(a); !why.empty()) return why;
  if (a.onn && threads_for<C, R>(a) != a.dv)
    return "norm=last runs the gated norm one thread a column: dk / rows * cols / 4 = " + std::to_string(threads_for<C, R>(a)) + " threads, dv " +
           std::to_string(a.dv);
  return "";
}

// pdl=one-ahead: pdl=ahead's kernel (the same instance, the same bits) launched with more dynamic shared memory than it
// uses, so that the SMs hold at most cap = ceil(2 grid / SMs) of its blocks at once: this launch and the next one, no
// more (pdl=ahead: as many as fit, ~3 launches at batch 1). Why (klab probe-rec on the H200, reports/h200/run-fe10a61):
// pdl=ahead's blocks spend 2.82 us after their release (cols=32,rows=8) where pdl=next's, with one launch ahead at most,
// spend 2.05: fewer launches' S loads beside the inputs' L2 reads. But pdl=next lets its dependents go only after its wait,
// so the next launch is launched, and requests its S, one hop later (the hop 0.38 -> 0.77 us). Here the dependents go at
// the start as pdl=ahead's, and the cap, not the trigger, keeps the third launch out. Where the cap does not bind (the
// SMs hold fewer blocks than that anyway: batch 8 and 32), the launch is pdl=ahead's exactly. Returns the dynamic shared
// memory to ask for, base (the kernel's own) where the cap does not bind; sets the kernel's opt-in once. Throws
// klab::Error if no request gives exactly `cap` blocks an SM.
template <int C, int R, bool Stamp>
std::size_t one_ahead_smem(const RecurrenceArgs& a, std::size_t base) {
  const auto kernel = fused_ahead_kernel<C, R, Stamp, false>;
  const int tiles = (a.dv + C - 1) / C, threads = threads_for<C, R>(a);
  const long long grid = static_cast<long long>(a.nv) * tiles * a.batch;
  static std::mutex mu;
  static std::map<std::pair<int, long long>, std::size_t> cache;  // (device, grid) -> the request
  int dev = 0;
  KLAB_CUDA(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  if (const auto it = cache.find({dev, grid}); it != cache.end()) return it->second;
  int sms = 0, per_sm_total = 0, reserved = 0, optin = 0, natural = 0;
  KLAB_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  KLAB_CUDA(cudaDeviceGetAttribute(&per_sm_total, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
  KLAB_CUDA(cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, dev));
  KLAB_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  KLAB_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&natural, kernel, threads, base));
  const long long cap = (2 * grid + sms - 1) / sms;
  std::size_t smem = base;
  if (cap < natural) {
    cudaFuncAttributes fa{};
    KLAB_CUDA(cudaFuncGetAttributes(&fa, kernel));
    // cap + 1 blocks of `smem` bytes (and their static and reserved shares) just over what an SM has
    const long long over = per_sm_total / (cap + 1) - reserved - static_cast<long long>(fa.sharedSizeBytes) + 128;
    smem = std::max(base, static_cast<std::size_t>(std::max(0LL, over)));
    KLAB_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin - static_cast<int>(fa.sharedSizeBytes)));
    int got = 0;
    KLAB_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&got, kernel, threads, smem));
    if (got != cap)
      throw Error("pdl=one-ahead: " + std::to_string(smem) + " bytes of shared memory a block give " + std::to_string(got) + " blocks an SM, not the " +
                  std::to_string(cap) + " that hold two launches of " + std::to_string(grid) + " blocks on " + std::to_string(sms) + " SMs");
  }
  cache[{dev, grid}] = smem;
  return smem;
}

// pdl=ahead's register kernel (pdl=next's with Next, the stamp probe's with Stamp, pdl=one-ahead's with One, o=direct's
// with Od), always with PDL.
template <int C, int R, bool Stamp, bool Next, bool One = false, bool Od = false>
void launch_ahead(const RecurrenceArgs& a, cudaStream_t s) {
  static_assert(!(One && Next), "pdl=one-ahead lets its dependents go at the start, as pdl=ahead");
  static_assert(!(Od && (One || Next)), "o=direct is registered on pdl=ahead alone");
  const int tiles = (a.dv + C - 1) / C, threads = threads_for<C, R>(a);
  std::size_t smem = partials_bytes<C>(threads);
  if constexpr (One) smem = one_ahead_smem<C, R, Stamp>(a, smem);
  launch_maybe_pdl(true, fused_ahead_kernel<C, R, Stamp, Next, Od>, dim3(static_cast<unsigned>(a.nv * tiles), static_cast<unsigned>(a.batch)), dim3(threads), smem,
                   s, a);
}

template <int C, int R, bool Pdl, bool Early = false, bool Norm = false, bool Bf16 = false, bool Cs = false, bool Last = false, bool Conv = false,
          bool Ring = false, bool Sm = false, bool Ahead = false, bool Next = false, bool One = false, bool Od = false>
void launch(const RecurrenceArgs& a, cudaStream_t s) {
  if constexpr (Sm) {  // stage=smem: the warps' partials, then R float4 a thread of S
    const int tiles = (a.dv + C - 1) / C, threads = threads_for<C, R>(a);
    const std::size_t smem = partials_bytes<C>(threads) + std::size_t(R) * threads * sizeof(float4);
    launch_maybe_pdl(Pdl || Early || Ahead, fused_sm_kernel<C, R, Early, Ahead>, dim3(static_cast<unsigned>(a.nv * tiles), static_cast<unsigned>(a.batch)),
                     dim3(threads), smem, s, a);
    return;
  }
  if constexpr (Ahead) {
    launch_ahead<C, R, false, Next, One, Od>(a, s);
    return;
  }
  if constexpr (Conv) {  // prep=conv (with norm=last, hist=ring as asked): its inputs in shared memory after the warps' partials
    const int tiles = (a.dv + C - 1) / C, threads = threads_for<C, R>(a);
    const std::size_t smem = partials_bytes<C>(threads) + conv_prep_floats(a.dk, C) * sizeof(float);
    launch_maybe_pdl(Pdl || Early, fused_kernel<C, R, Early, false, false, false, Last, true, Ring>,
                     dim3(static_cast<unsigned>(a.nv * tiles), static_cast<unsigned>(a.batch)), dim3(threads), smem, s, a);
    return;
  }
  if constexpr (Last) {  // no cluster: the count picks the block that runs a head's norm
    const int tiles = (a.dv + C - 1) / C, threads = threads_for<C, R>(a);
    const std::size_t smem = partials_bytes<C>(threads);
    launch_maybe_pdl(Pdl || Early, fused_kernel<C, R, Early, false, false, false, true>, dim3(static_cast<unsigned>(a.nv * tiles), static_cast<unsigned>(a.batch)),
                     dim3(threads), smem, s, a);
    return;
  }
  static_assert(!(Norm && Bf16), "norm=gated is not registered with state=bf16");
  const int tiles = (a.dv + C - 1) / C;
  const int threads = threads_for<C, R>(a);
  const std::size_t smem = partials_bytes<C>(threads);
  if constexpr (Norm) {  // a head's tiles are one cluster (the epilogue's reduction), with PDL as Pdl / Early say
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(static_cast<unsigned>(a.nv * tiles), static_cast<unsigned>(a.batch));
    cfg.blockDim = dim3(threads);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = static_cast<unsigned>(tiles);
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[1].val.programmaticStreamSerializationAllowed = 1;
    // cols >= 128 with one tile a head: no cluster (gated_norm_single), PDL as asked
    const bool single = C >= 128 && tiles == 1;
    cfg.attrs = single ? attr + 1 : attr;
    cfg.numAttrs = single ? (Pdl || Early ? 1 : 0) : (Pdl || Early ? 2 : 1);
    KLAB_CUDA(cudaLaunchKernelEx(&cfg, fused_kernel<C, R, Early, true>, a));
    return;
  }
  launch_maybe_pdl(Pdl || Early, fused_kernel<C, R, Early, false, Bf16, Cs>, dim3(static_cast<unsigned>(a.nv * tiles), static_cast<unsigned>(a.batch)), dim3(threads),
                   smem, s, a);
}

std::size_t no_workspace(const RecurrenceArgs&) { return 0; }

// pdl=ahead: how many of its launches (grids) at these dimensions the current device holds at once, by the
// occupancy query (blocks an SM for its block size and shared memory, times the SMs) over its grid. One:
// pdl=one-ahead's, with the shared memory its launch asks for.
template <int C, int R, bool Sm, bool One = false>
double ahead_resident_launches(const RecurrenceArgs& a) {
  const int tiles = (a.dv + C - 1) / C, threads = threads_for<C, R>(a);
  std::size_t smem = partials_bytes<C>(threads);
  if constexpr (Sm) smem += std::size_t(R) * threads * sizeof(float4);
  if constexpr (One) smem = one_ahead_smem<C, R, false>(a, smem);
  int per_sm = 0, dev = 0, sms = 0;
  if constexpr (Sm) KLAB_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fused_sm_kernel<C, R, false, true>, threads, smem));
  else KLAB_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fused_ahead_kernel<C, R>, threads, smem));
  KLAB_CUDA(cudaGetDevice(&dev));
  KLAB_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const double grid = double(a.nv) * tiles * a.batch;
  return double(per_sm) * sms / grid;
}

template <int C, int R, bool Pdl, bool Early = false, bool Norm = false, bool Bf16 = false, bool Cs = false, bool Last = false, bool Conv = false,
          bool Ring = false, bool Sm = false, bool Ahead = false, bool Next = false, bool One = false, bool Od = false>
RecurrenceKernel fused() {
  static_assert(!Od || (Ahead && !Next && !One && !Sm), "o=direct is registered on pdl=ahead's register kernel");
  static_assert(!Ahead || (Pdl && !Early), "pdl=ahead is a PDL form of its own: Pdl, not Early");
  static_assert(!One || (Ahead && !Next && !Sm), "pdl=one-ahead is pdl=ahead's register kernel with its blocks an SM capped");
  static_assert(!Next || (Ahead && !Sm), "pdl=next is pdl=ahead's register kernel with its dependents let go after the wait");
  static_assert(!(Cs && (Bf16 || Norm)), "cache=stream is registered on the f32 state without norm=gated");
  static_assert(!(Last && (Norm || Bf16 || Cs)), "norm=last is registered on the f32 state, without the cluster epilogue");
  static_assert(!(Conv && (Norm || Bf16 || Cs)), "prep=conv is registered on the f32 state, its only epilogue norm=last");
  static_assert(!(Conv && Last && !Ring), "prep=conv with norm=last leaves no launch to shift the history: hist=ring");
  static_assert(!Ring || (Conv && Early), "hist=ring is prep=conv's history, on the pdl=early kernel (its position is loaded after the wait and before the state: pdl=early's order)");
  static_assert(!(Sm && (Norm || Bf16 || Cs || Last || Conv)), "stage=smem is registered on the plain f32 kernel");
  RecurrenceKernel k;
  k.axes = {{"impl", "fused"}, {"cols", std::to_string(C)}, {"rows", std::to_string(R)}};
  if (Sm) k.axes.push_back({"stage", "smem"});    // before pdl, as state and cache
  if (Bf16) k.axes.push_back({"state", "bf16"});  // before pdl: a pdl=early name less "early" + "on" is its pdl=on twin's
  if (Cs) k.axes.push_back({"cache", "stream"});  // likewise
  k.axes.push_back({"pdl", One ? "one-ahead" : Next ? "next" : Ahead ? "ahead" : Early ? "early" : Pdl ? "on" : "off"});
  if (Norm) k.axes.push_back({"norm", "gated"});
  if (Last) k.axes.push_back({"norm", "last"});
  if (Conv) k.axes.push_back({"prep", "conv"});
  if (Ring) k.axes.push_back({"hist", "ring"});
  if (Od) k.axes.push_back({"o", "direct"});
  k.description = "one launch, q/k norm fused, S read once into registers as float4: " + std::to_string(C) + " columns x all rows per block, " +
                  std::to_string(R) + " rows x 4 columns per thread" +
                  (One     ? ", programmatic dependent launch, S loaded before the wait (pdl=on's contract) and dependents let go at the start, "
                             "its blocks an SM capped by a shared-memory request so that one launch runs ahead at most"
                   : Next  ? ", programmatic dependent launch, S loaded before the wait (pdl=on's contract) and dependents let go right after "
                             "it (one launch ahead at most)"
                   : Ahead ? ", programmatic dependent launch, S loaded before the wait (pdl=on's contract) and dependents let go at the start"
                   : Early ? ", programmatic dependent launch, dependents let go at the start, S prefetched into L2 before the wait and loaded after it"
                   : Pdl   ? ", programmatic dependent launch (S loads before the wait)"
                           : "") +
                  (Norm ? "; the GDN step's gated RMSNorm as an epilogue where the caller asks for it (a head's column tiles one thread block "
                          "cluster, the sum of o^2 through distributed shared memory)"
                        : "") +
                  (Last ? "; the GDN step's gated RMSNorm (and onn's q8 form) where the caller asks for it, run by the last of a head's column "
                          "blocks to finish (an atomic count per head), with the gated-norm launch's arithmetic"
                        : "") +
                  (Conv ? "; the GDN step's conv + SiLU, q/k L2 norm and beta/g where the caller asks for them (RecurrenceArgs::xc: formed from "
                          "the raw projections as the step's conv_norm_bg launch forms them, the same bits), so that launch goes"
                        : "") +
                  (Ring ? "; the conv history a ring of ck frames (RecurrenceArgs::hist_ring): the newest frame written by the blocks that form "
                          "its channels, into the frame none of them reads, the position moved on by the last block's ticket, so no launch "
                          "shifts it"
                        : "") +
                  (Cs ? "; S loaded and stored with the evict-first hint (ld.global.cs / st.global.cs)" : "") +
                  (Od ? "; o without a second reduction: s^T qn summed in pass 1 beside s^T kn, o = s^T qn + t (kn . qn) (one barrier; S bit "
                        "for bit the two-pass kernel's, o within a tolerance)"
                      : "") +
                  (Sm ? "; S staged in shared memory by cp.async instead of registers (both passes read the stage: at most 64 registers, "
                        "twice the blocks and the bytes of S in flight an SM; the bits of the register form)"
                      : "") +
                  (Bf16 ? "; S stored as bf16 (half the state's bytes; widened on load, each element rounded to nearest even on store, the "
                          "arithmetic f32): a research axis, judged by its own tolerance and by its drift over time (gdn-state-drift)"
                        : "");
  k.can_implement = Norm ? can_norm<C, R> : Last ? can_last<C, R> : can<C, R>;
  k.workspace_floats = no_workspace;
  k.launch = launch<C, R, Pdl, Early, Norm, Bf16, Cs, Last, Conv, Ring, Sm, Ahead, Next, One, Od>;
  k.state_bf16 = Bf16;
  k.state_before_wait = Pdl && !Early;
  k.state_ahead = Ahead && !Next;  // pdl=next: launch N + 1 starts after N's wait, so N - 1 is done (pdl=on's 2 copies)
  if constexpr (Ahead && !Next) k.resident_launches = ahead_resident_launches<C, R, Sm, One>;
  k.vec4 = true;
  k.gated_norm = Norm || Last;
  k.norm_q8 = (Norm && C >= 128) || Last;
  k.counts = Last;
  k.conv_prep = Conv;
  k.hist_ring = Ring;
  return k;
}

}  // namespace

// ---- the stamp probe (kernels.hpp) ----
int stamp_points() { return kStampPoints; }
StampLauncher stamp_launcher(int cols, int rows, const std::string& pdl, bool o_direct) {
  // The registered o=direct shapes, pdl=next's, pdl=one-ahead's, then pdl=ahead's (stage=smem aside).
  if (o_direct) {
    if (pdl != "ahead") return {};
    if (cols == 32 && rows == 16) return {launch_ahead<32, 16, true, false, false, true>, can<32, 16>};
    if (cols == 32 && rows == 8) return {launch_ahead<32, 8, true, false, false, true>, can<32, 8>};
    if (cols == 16 && rows == 8) return {launch_ahead<16, 8, true, false, false, true>, can<16, 8>};
    return {};
  }
  if (pdl == "next") {
    if (cols == 32 && rows == 8) return {launch_ahead<32, 8, true, true>, can<32, 8>};
    if (cols == 16 && rows == 8) return {launch_ahead<16, 8, true, true>, can<16, 8>};
    return {};
  }
  if (pdl == "one-ahead") {
    if (cols == 32 && rows == 16) return {launch_ahead<32, 16, true, false, true>, can<32, 16>};
    if (cols == 32 && rows == 8) return {launch_ahead<32, 8, true, false, true>, can<32, 8>};
    if (cols == 16 && rows == 8) return {launch_ahead<16, 8, true, false, true>, can<16, 8>};
    return {};
  }
  if (pdl != "ahead") return {};
  if (cols == 32 && rows == 8) return {launch_ahead<32, 8, true, false>, can<32, 8>};
  if (cols == 16 && rows == 8) return {launch_ahead<16, 8, true, false>, can<16, 8>};
  if (cols == 16 && rows == 4) return {launch_ahead<16, 4, true, false>, can<16, 4>};
  if (cols == 8 && rows == 4) return {launch_ahead<8, 4, true, false>, can<8, 4>};
  if (cols == 32 && rows == 16) return {launch_ahead<32, 16, true, false>, can<32, 16>};
  return {};
}
void stamp_begin(unsigned long long* buf, int launches, const float* state, long long state_floats, cudaStream_t s) {
  KLAB_CUDA(cudaMemcpyToSymbolAsync(g_stamps, &buf, sizeof buf, 0, cudaMemcpyHostToDevice, s));
  KLAB_CUDA(cudaMemcpyToSymbolAsync(g_stamp_launches, &launches, sizeof launches, 0, cudaMemcpyHostToDevice, s));
  KLAB_CUDA(cudaMemcpyToSymbolAsync(g_stamp_state, &state, sizeof state, 0, cudaMemcpyHostToDevice, s));
  KLAB_CUDA(cudaMemcpyToSymbolAsync(g_stamp_stride, &state_floats, sizeof state_floats, 0, cudaMemcpyHostToDevice, s));
  KLAB_CUDA(cudaStreamSynchronize(s));  // the host values above live on this stack frame
}

// At dk = dv = 128 and batch 1: blocks (threads) 384 (128) for cols=16, 192 (256 or 128) for
// cols=32, 96 (256) for cols=64: the last leaves 36 of 132 SMs idle at batch 1 (kept: it may win
// at batch 32, where every configuration fills the GPU).
//
// Added after the first H200 trial (reports/h200/gdn-recurrence-trial/rec.log, stream mode: best
// at batch 1 cols=16,rows=4,pdl=on 4.03 us; at batch 32 cols=32,rows=8,pdl=off 53.0 us); measured
// in reports/h200/run-30bee11 (stream mode: at batch 1 the one of them faster than cols=16,rows=4,pdl=on,
// 4.04 us, is the pdl=on twin of cols=16,rows=8, 3.91 us; at batch 32 their best is the pdl=on twin of
// cols=32,rows=8, 52.46 us, then rows=16 53.16 / 55.78 us):
//   batch 1, more blocks and warps (the whole 3.1 MB of S is in flight at once there: latency, not
//   bytes, bounds it): cols=8,rows=4 (768 x 64), cols=8,rows=2 (768 x 128), cols=16,rows=2 (384 x
//   256), all pdl=on, and the pdl=on twin of cols=16,rows=8 (384 x 64);
//   batch 32, more bytes in flight a thread: the pdl=on twin of cols=32,rows=8, and rows=16
//   (16 float4 = 256 bytes of S a thread, launch bound 256): cols=32,rows=16,pdl=on (192 x 64 at
//   batch 1), cols=64,rows=16,pdl=off (96 x 128).
std::vector<RecurrenceKernel> fused_kernels() {
  return {fused<32, 4, false>(), fused<16, 4, false>(), fused<16, 8, false>(), fused<32, 8, false>(), fused<64, 8, false>(),
          fused<32, 4, true>(),  fused<16, 4, true>(),
          // first measured in reports/h200/run-30bee11 (above)
          fused<8, 4, true>(), fused<8, 2, true>(), fused<16, 2, true>(), fused<16, 8, true>(), fused<32, 8, true>(),
          fused<32, 16, true>(), fused<64, 16, false>(),
          // pdl=early (above): the twins of the fastest pdl=on configurations at batch 1 (cols=16 rows=8 and
          // rows=4, cols=8 rows=4) and at batch 32 (cols=32 rows=8 and rows=16)
          fused<16, 8, true, true>(), fused<16, 4, true, true>(), fused<8, 4, true, true>(), fused<32, 8, true, true>(), fused<32, 16, true, true>(),
          // norm=gated (above): the GDN step's gated RMSNorm fused in, on the pdl=early twins at batch 1 (cols=16 rows=8: a
          // cluster of 8 at dv = 128; cols=32 rows=8: 4). Raced alone (no epilogue asked) they are their pdl=early twins.
          fused<16, 8, true, true, true>(), fused<32, 8, true, true, true>(),
          // norm=gated with a head in one block (cols=128: 48 blocks of 512 threads at batch 1, no cluster; 2026-12-02): the
          // gated norm block-local, and onn's q8 form for out_proj (RecurrenceArgs::xq), so that the step's gated-norm launch
          // goes (GdnDevice::set_norm_q8 with this recurrence). Its twins without the epilogue, pdl=on and early. Measured in
          // reports/h200/run-123ab72 (stream mode): batch 1 5.8 / 5.1 us (pdl=on / early) against cols=32's 3.37; inside the
          // GDN step x0.956 per layer, x0.954 in the 48-layer graph: a negative result, kept.
          fused<128, 8, true>(), fused<128, 8, true, true>(), fused<128, 8, true, true, true>(),
          // state=bf16 (issue 14's research axis; not yet measured on the H200, written in a session whose device time was
          // spent): the fastest f32 configuration at batch 1 and 32 (cols=32 rows=8; reports/h200/run-105e07b: pdl=early 3.40 /
          // 51.60 us) with S half the bytes, in its three PDL forms. Predicted: at batch 32 S is 50 of 100 MB read and written,
          // so toward ~30 us if the f32 kernel's 86% of the size-matched read carries over; at batch 1 little (latency-bound).
          fused<32, 8, false, false, false, true>(), fused<32, 8, true, false, false, true>(), fused<32, 8, true, true, false, true>(),
          // cache=stream (2026-12-02): batch 32's fastest, cols=32 rows=8 (pdl=early 51.81 us in reports/h200/run-08a86f8;
          // run-4198a57's fastest, rows=16, 51.99 us = 83.5% of the size-matched read; goal 50 us), with S's 100 MB read and
          // written evict-first, so that the lines it leaves dirty make room first and stop crowding L2 for the next heads'
          // reads. Its pdl=on and pdl=early forms (gdn-recurrence pairs each with its twin: stream-bitwise, stream-pays).
          // Measured in reports/h200/run-a9d7934: the same bits; batch 32 x0.996 (pdl=on) and x0.976 (pdl=early), batch 1
          // pdl=early x0.924: a negative result, kept.
          fused<32, 8, true, false, false, false, true>(), fused<32, 8, true, true, false, false, true>(),
          // norm=last (2026-12-02): the step's recurrence (cols=32 rows=8 pdl=early) with the gated norm and onn's q8 form run by
          // the last of a head's four column blocks (gated_norm_last), so that the step's gated-norm launch goes without
          // rec-norm's one block a head (5.1 against 3.37 us) or norm=gated's cluster; the gated-norm launch's bits. Raced alone
          // (no epilogue asked) it is its pdl=early twin. Measured in reports/h200/run-93e3419: the step's bits, x0.982 per layer
          // and x0.960 in the 48-layer graph: a negative result, kept.
          fused<32, 8, true, true, false, false, false, true>(),
          // prep=conv (2026-12-04): the step's recurrence (cols=32 rows=8 pdl=early) forming q, k, v, beta and g itself from
          // the raw projections (conv_prep, norm_ss: conv_norm_bg's formulas and order), so that the step's conv_norm_bg launch
          // goes (six launches a layer -> five) and with it a dependent hop and an L2 round trip. Why (kernel traces,
          // reports/h200/run-4cb578e): in the 48-layer graph conv_norm_bg ends 4.3 us after in_proj and the recurrence 3.4 us
          // after it. Raced alone (no prep asked) it is its pdl=early twin. Measured in reports/h200/run-prep-conv (five forms,
          // the last this one): the candidates' bits, and slower, x0.965 per layer and x0.972 in the 48-layer graph (q4),
          // x0.980 and x0.983 (f32): the hop saved is paid back by the conv and norm before the state math and by the gated
          // norm's history shift. A negative result, kept.
          fused<32, 8, true, true, false, false, false, false, true>(),
          // hist=ring (2026-12-05, hist_ring.hpp): prep=conv with the conv history a ring of ck frames, so that no launch shifts it
          // (the gated norm's shift cost 0.7-1.3 us in run-prep-conv), and the same with norm=last: the gated norm and onn's q8
          // form by each head's last column block, so that the gated-norm launch goes too and the layer is four launches
          // (in_prep_ba, the stacked input projections, this, out_proj: issue 14's aim). The candidates' bits (the same
          // operations on the same frames). Measured on an H100 (reports/h100/run-2c88263) and the H200 (reports/h200/run-f55aa56):
          // the bits held; the ring x0.999 / x1.005 against prep=conv, four launches x0.940 per layer, x0.940 / x0.938 in the
          // graph. Negative, kept.
          fused<32, 8, true, true, false, false, false, false, true, true>(), fused<32, 8, true, true, false, false, false, true, true, true>(),
          // stage=smem (2026-12-05): batch 32's kernel (cols=32 rows=8, pdl=on and pdl=early) with S staged in shared memory by
          // cp.async, so that no float4 of S is held in registers: 64 registers, 8 blocks an SM instead of 4, 128 KB of S in
          // flight an SM instead of 64. Why: at batch 32 the fastest (cols=32 rows=16 pdl=early, 51.66 us in run-0e7f54b)
          // moves 203 MB at 3938 GB/s, above the run's launch-mode copy (3917 GB/s) and 4% short of issue 14's 50 us; S is
          // the only traffic, and the register form holds it in flight only while its 4 blocks an SM wait. The bits of the
          // register twins (the same values in the same order). Predicted: batch 32 toward the stream-mode copy rate
          // (Ceiling::copy_gbps_stream, measured in the same run); batch 1 the same (all of S in flight there either way).
          // Measured (reports/h200/run-f55aa56, H200, stream): the twins' bits, and slower at batch 32, 52.18 -> 54.08 us (pdl=on),
          // 51.77 -> 53.72 (pdl=early); the register form already moves S at the run's copy rate (3925 GB/s back to back). Kept.
          fused<32, 8, true, false, false, false, false, false, false, false, true>(),
          fused<32, 8, true, true, false, false, false, false, false, false, true>(),
          // pdl=ahead (2026-12-05): batch 1's fastest (cols=32 rows=8 pdl=early, 3.41 us in run-0e7f54b, issue 14's goal 2.5) and
          // cols=16 rows=8 with S loaded before the wait as pdl=on and the dependents let go first as pdl=early, and the same on
          // stage=smem. pdl=early pays an L2 round trip for S after its wait (its prefetch before it), pdl=on a trigger only after
          // its stores (the next launch's S requests start late: 4.38 us for cols=32). Predicted: batch 1 toward ~2.5 us (the wait,
          // the math, the stores); batch 32 as pdl=on. The bits of the pdl=on twins. Measured (reports/h200/run-f55aa56, H200,
          // stream): the bits held; batch 1 3.40 -> 3.07 us (cols=32, x1.109) and 3.82 -> 3.08 (cols=16, x1.240) over pdl=early,
          // the fastest at batch 1 (goal 2.5 us: not reached); batch 32 52.98 us (cols=32), as pdl=on.
          fused<32, 8, true, false, false, false, false, false, false, false, false, true>(),
          fused<16, 8, true, false, false, false, false, false, false, false, false, true>(),
          fused<32, 8, true, false, false, false, false, false, false, false, true, true>(),
          // pdl=ahead on the other shapes with a pdl=early twin (first run of the three above, H200, 2026-12-05: cols=32 and cols=16
          // rows=8 3.07 and 3.08 us at batch 1, x1.109 and x1.240 over pdl=early): with S in flight before the wait, more blocks
          // and fewer rows a thread (cols=16 rows=4, cols=8 rows=4) may shorten the math and the stores after it; rows=16 holds
          // twice the state a thread for batch 32. Run on an H100 only (reports/h100/run-118cf7b): the bits of the pdl=on twins;
          // at batch 1 x1.189 / x1.360 / x1.161 over pdl=early there (3.60 / 4.05 / 3.41 us; cols=32,rows=8 3.42). On the H200
          // (reports/h200/run-fe10a61): the bits held; cols=32,rows=16 3.03 us at batch 1, the fastest of ours (cols=16,rows=4
          // 3.4, cols=8,rows=4 3.7).
          fused<16, 4, true, false, false, false, false, false, false, false, false, true>(),
          fused<8, 4, true, false, false, false, false, false, false, false, false, true>(),
          fused<32, 16, true, false, false, false, false, false, false, false, false, true>(),
          // pdl=next (2026-12-05): pdl=ahead with its dependents let go right after its wait instead of at its start, so at
          // most one launch runs ahead (pdl=ahead: ~3 at batch 1). Why (klab probe-rec on an H100, reports/h100/run-probe-rec):
          // at batch 1 pdl=ahead's blocks spend ~1.3 us after their release in "inputs and pass 1" (q, k, v, g, beta from L2
          // and the S already requested), while up to three launches' S loads share the SMs' memory pipes; the hop itself is
          // ~0.3-0.5 us. Predicted: that phase shorter, the period toward ~2.8 us on that card if the queue is the cause; slower
          // if the next launch's S, requested later, arrives late. The bits of pdl=on (the same values in the same order).
          // Measured on an H100 (reports/h100/run-probe-rec, stream): the bits held; slower, 3.41 -> 3.74 us (cols=32) and
          // 3.44 -> 3.85 (cols=16) against pdl=ahead. The probe: the span after the release 3.07 -> 2.30 us, the hop 0.5 -> 1.0.
          // On the H200 (reports/h200/run-fe10a61): the bits held; x0.927 / x0.904 against pdl=ahead (3.05 -> 3.29, 3.07 -> 3.40
          // us); the probe there: after the release 2.82 -> 2.05 us, the hop 0.38 -> 0.77 (cols=32). Kept as negative results.
          fused<32, 8, true, false, false, false, false, false, false, false, false, true, true>(),
          fused<16, 8, true, false, false, false, false, false, false, false, false, true, true>(),
          // pdl=one-ahead (2026-12-05): the three fastest pdl=ahead shapes at batch 1 on the H200 (3.03 / 3.05 / 3.07 us,
          // reports/h200/run-fe10a61) with their blocks an SM capped so that one launch runs ahead at most (one_ahead_smem).
          // Predicted (before any run): pdl=next's span after the release (~2.05 us) with pdl=ahead's hop (~0.4): toward
          // ~2.5 us at batch 1; the same at batch 8 and 32, where the cap does not bind. pdl=ahead's bits.
          // Measured on an H100 (reports/h100/run-one-ahead, 2026-12-05, stream): the bits held; at batch 1 x0.999 / x1.014 /
          // x0.934 against pdl=ahead (3.39 / 3.33 / 3.66 us): same or slower. The probe: the next launches enter later (4.86
          // against 5.76 us before the one before ends) but the span after the release stays 2.56 us at cols=32,rows=16.
          // On the H200 (reports/h200/run-4a53b8f, 2026-12-05, stream): x1.052 / x1.044 / x0.941 against pdl=ahead;
          // cols=32,rows=16 takes 2.89 us at batch 1, the fastest recurrence raced there (the probe: after the release 2.56
          // -> 2.30 us). A card that reads ~1.5x faster pays for a second launch's S loads ahead; the H100 does not.
          fused<32, 16, true, false, false, false, false, false, false, false, false, true, false, true>(),
          fused<32, 8, true, false, false, false, false, false, false, false, false, true, false, true>(),
          fused<16, 8, true, false, false, false, false, false, false, false, false, true, false, true>(),
          // o=direct (2026-12-05): the three fastest pdl=ahead shapes with o formed without a second reduction (fused_body's
          // Od). Why (klab probe-rec on the H200, reports/h200/run-fe10a61): after the release a block spends ~1.0-1.3 us on
          // its inputs and pass 1, then 0.51 us on pass 2 (the S update and store, the o partials' butterfly, a barrier) and
          // 0.26 us on o. Predicted (before any run): pass 2 and o down to the stores, ~0.4-0.6 us off a block's path and
          // the period at batch 1 toward ~2.5 us. S bit for bit pdl=ahead's; o within a tolerance.
          // Measured on an H100 (reports/h100/run-o-direct, 2026-12-05, stream): S bit for bit, o within 1e-4 of the f64
          // reference; at batch 1 x1.001 / x0.985 / x0.984 against pdl=ahead: the same. The probe: pass 1 longer by the second
          // sum, pass 2 shorter, the span after the release unchanged: the block's chain is not what sets the period. On the
          // H200 (reports/h200/run-4a53b8f): x0.987 / x0.962 / x0.969. Kept as negative results.
          fused<32, 16, true, false, false, false, false, false, false, false, false, true, false, false, true>(),
          fused<32, 8, true, false, false, false, false, false, false, false, false, true, false, false, true>(),
          fused<16, 8, true, false, false, false, false, false, false, false, false, true, false, false, true>()};
}

}  // namespace klab::gdn_recurrence
