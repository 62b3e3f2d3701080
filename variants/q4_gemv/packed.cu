// q4_gemv/map=packed,dot=D,grid=G,pdl=P,rows=R: the q4 mat-vec at the read ceiling (issue 13).
//
// What is new against block-per-thread (block_thread.cu, the fastest before: 35-48% of the read
// ceiling on the H200, Nsight: 66 registers, occupancy 39%, issue- and latency-bound):
//   - the tiled layout of packed.hpp, made once when the weights are loaded (Instance constructor;
//     the GDN pool packs on the device when a packed kernel is chosen): a group of R rows is one
//     contiguous run, each warp load 512 contiguous bytes, a lane's R scales one load;
//   - grid=fill: persistent thread blocks (as many as the SMs hold at once), each walking groups
//     g = blockIdx.x, + gridDim.x, ... with the NEXT group's R code loads and scale load issued before
//     the current group's math (two register buffers): every thread keeps R 16-byte loads in flight
//     while it computes, and its x preparation (below) is paid once per thread, not once per group.
//     grid=groups: one group per thread block (the block scheduler balances; x prepared per group);
//   - PDL (pdl=on, launched with cudaLaunchAttributeProgrammaticStreamSerialization): the kernel
//     triggers its dependents first, issues its first group's weight loads, and only then waits
//     (griddepcontrol.wait) for its predecessor, before it reads x and long before it writes y; the
//     same kernel without the attribute (pdl=off) waits for nothing, the twin that measures PDL;
//   - fewer instructions per weight: the dot forms of packed.hpp. Thread t of warp c owns block
//     b = 32 c + t of every row it visits (one thread per block of 32 weights, k <= 32768).
//
// Per group, per thread: p_r = the form's block value for row r (+0 past nb); the warp sums each
// row over its 32 lanes by a transposed xor-butterfly (offsets 16 .. 32/R halve the rows a lane
// carries, the rest sum one row; every addition is the plain butterfly's, so each row's bits are the
// plain butterfly's); lane r*32/R writes row r's warp total to shared memory; thread r of warp 0 sums
// the warps in order and stores y. Bits therefore depend on neither R, grid nor pdl, and the f32 form
// gives exactly the bits of block-per-thread,dot=offset (same block values, same sum order).
//
// Instruction budget (predicted from the source and the SASS of this file, sm_90, nvcc 13.0; not
// measured: the lead measures on the H200), lane instructions per weight in the group loop:
//   form     math per 8 weights (one 32-bit code word, one row)           per block and row    total*
//   f32      8 SHF/LOP3 pairs + 8 FFMA = 24 (3.0)                         FFMA, 2 FMUL, cvt    ~3.2
//   f16x2    4 LOP3 + 1 SHF + 4 HFMA2 (codes) + 4 HFMA2 (dot) = 13       2 cvt, FADD, 2 FMUL  ~1.9
//            (1.625)
//   q8-dp4a  2 LOP3 + 2 IDP4A = 4 (0.5)                                   SHF+IADD, I2F, 2 FMUL ~0.75
//   * with loads (R+1 per 32 R weights), the row reduction (~3 R per 32 R) and loop overhead;
//     the counts measured on this file's SASS are in variants/q4_gemv/README.md (section "map=packed").
// Registers and spills (ptxas, sm_90) are in the README too.
#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <utility>

#include "klab/cuda.hpp"
#include "klab/error.hpp"
#include "klab/registry.hpp"
#include "q4_gemv/lane_block.hpp"
#include "q4_gemv/packed.hpp"
#include "q4_gemv/packed_device.cuh"
#include "q4_gemv/packed_kernels.hpp"
#include "q4_gemv/packed_ring.hpp"
#include "f32_gemv/split_row.cuh"
#include "f32_gemv/variants.hpp"
#include "q4_gemv/prepared_x.cuh"
#include "q4_gemv/span.hpp"

namespace klab::q4_gemv::packed {

namespace {
constexpr int kMaxWarps = 32;  // one thread per block of 32 weights, at most 1024 threads: k <= 32768
// grid=half,last=regs (packed_ring_kernel<..., Held>): at most 512 threads (k <= 16384), so that
// ptxas may give a thread up to 128 registers; larger k runs the kernel without the held group.
constexpr int kHeldMaxWarps = 16;

// One group's weights for one thread: R blocks of codes and their scales.
template <int R>
struct Buf {
  uint4 q[R];
  Scales<R> s;
};

// The x side a thread keeps for its block across groups: scalars in registers, the prepared words
// in shared memory (thread-private, word-major so that a warp's access is conflict-free):
//   q8     8 u32 per thread: xe[j] at [2j][tid], xo[j] at [2j+1][tid]      (u32 granules)
//   f16x2  4 uint4 per thread: the pairs of word j at [j][tid]                (uint4 granules)
//   f32    nothing: x itself is re-read per group (L1; the codes stream past it with ld.cs)
template <Form F>
constexpr int kXBytes = F == Form::f32 ? 0 : F == Form::q8 ? 32 : 64;
template <Form F>
struct XState;
template <>
struct XState<Form::f32> {
  float sx;  // the block's sum of x (the offset form's correction)
};
template <>
struct XState<Form::q8> {
  int c;    // -8 sum q
  float d;  // amax / 127
};
template <>
struct XState<Form::f16x2> {
  float f;  // 2^-e
};

template <Form F>
__device__ __forceinline__ void prep(const float* __restrict__ x, int b, XState<F>& st, void* xs) {
  const float4* xb = reinterpret_cast<const float4*>(x) + std::size_t(b) * 8;
  if constexpr (F == Form::f32) {
    // sx as block_thread.cu forms it: an add chain over the block's columns in order, from +0.
    float sx = 0.f;
    for (int w = 0; w < 8; ++w) {
      const float4 v = __ldg(xb + w);
      sx = add_rn(add_rn(add_rn(add_rn(sx, v.x), v.y), v.z), v.w);
    }
    st.sx = sx;
  } else {
    float xv[32];
    for (int w = 0; w < 8; ++w) {
      const float4 v = __ldg(xb + w);
      xv[4 * w] = v.x, xv[4 * w + 1] = v.y, xv[4 * w + 2] = v.z, xv[4 * w + 3] = v.w;
    }
    const int bd = blockDim.x;
    if constexpr (F == Form::q8) {
      const Q8X X = q8_prep(xv);
      auto* s32 = static_cast<std::uint32_t*>(xs);
      for (int j = 0; j < 4; ++j) {
        s32[(2 * j) * bd + b] = X.xe[j];
        s32[(2 * j + 1) * bd + b] = X.xo[j];
      }
      st.c = X.c;
      st.d = X.d;
    } else {
      const H2X X = h2_prep(xv);
      auto* s4 = static_cast<uint4*>(xs);
      for (int j = 0; j < 4; ++j) s4[j * bd + b] = make_uint4(X.h[j][0], X.h[j][1], X.h[j][2], X.h[j][3]);
      st.f = X.f;
    }
  }
}

// xpf=l2: x prefetched into L2 before anything else a kernel issues (one TMA bulk prefetch per warp:
// the x of the warp's 32 blocks, 4 KB, less in the last warp). Why (reports/h200, stream mode): x is
// read only after griddepcontrol.wait, by then behind the weight loads this launch (and the launches
// co-resident with it) issued before the wait -- up to the whole problem in flight at the small seed
// shapes, so x's read waits for nearly all of them and every dot waits for x. Requested first, x lands
// ahead of the weights. Safe before the wait: L2 is the GPU's point of coherence, so a predecessor's
// later write of x lands in L2 over the prefetched line, and x is read after the wait with ld.cg (or by
// xprep_kernel after its own wait), never from L1. Changes no bit (the same values reach the same math).
__device__ __forceinline__ void prefetch_x_warp(const float* x, int first_block, int nb) {
  if ((threadIdx.x & 31) == 0 && first_block < nb) {
    const unsigned bytes = unsigned(min(32, nb - first_block)) * unsigned(ref::kQ4Block * sizeof(float));  // a multiple of 16
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(x + std::size_t(first_block) * ref::kQ4Block), "r"(bytes) : "memory");
  }
}

// p[r] = the form's value of this thread's block in row r of the group held by `buf`. Word by word,
// the R rows' chains side by side (each row's own order is the form's, packed.hpp).
template <Form F, int R>
__device__ __forceinline__ void block_values(const Buf<R>& buf, const XState<F>& st, const float* __restrict__ x, const void* xs, int b,
                                             float (&p)[R]) {
  if constexpr (F == Form::f32) {
    const float4* xb = reinterpret_cast<const float4*>(x) + std::size_t(b) * 8;
    float acc[R];
    for (int r = 0; r < R; ++r) acc[r] = 0.f;
    for (int w = 0; w < 4; ++w) {
      const float4 xa = __ldg(xb + 2 * w), xc = __ldg(xb + 2 * w + 1);
      const float xv[8] = {xa.x, xa.y, xa.z, xa.w, xc.x, xc.y, xc.z, xc.w};
      for (int i = 0; i < 8; ++i)
        for (int r = 0; r < R; ++r) acc[r] = fma_rn(offset_value(word_of(buf.q[r], w), i), xv[i], acc[r]);  // = DotOffset::step
    }
    for (int r = 0; r < R; ++r) p[r] = mul_rn(DotOffset::finish(acc[r], st.sx), half_value(buf.s.get(r)));
  } else if constexpr (F == Form::q8) {
    const auto* s32 = static_cast<const std::uint32_t*>(xs);
    const int bd = blockDim.x;
    int se[R], so[R];
    for (int r = 0; r < R; ++r) se[r] = st.c, so[r] = 0;
    for (int j = 0; j < 4; ++j) {
      const std::uint32_t xe = s32[(2 * j) * bd + b], xo = s32[(2 * j + 1) * bd + b];
      for (int r = 0; r < R; ++r) q8_word(word_of(buf.q[r], j), xe, xo, se[r], so[r]);
    }
    for (int r = 0; r < R; ++r) p[r] = q8_finish(se[r], so[r], half_value(buf.s.get(r)), st.d);
  } else {
    const auto* s4 = static_cast<const uint4*>(xs);
    const int bd = blockDim.x;
    std::uint32_t h[R];
    for (int r = 0; r < R; ++r) h[r] = 0;
    for (int j = 0; j < 4; ++j) {
      const uint4 xp = s4[j * bd + b];
      for (int r = 0; r < R; ++r) h[r] = h2_word(word_of(buf.q[r], j), xp.x, xp.y, xp.z, xp.w, h[r]);
    }
    for (int r = 0; r < R; ++r) p[r] = h2_finish(h[r], half_value(buf.s.get(r)), st.f);
  }
}

template <Form F, int R, bool XPf = false>
__global__ void __launch_bounds__(kMaxWarps * 32)
packed_kernel(const std::uint8_t* __restrict__ packed, const float* __restrict__ x, float* __restrict__ y, int m, int k) {
  // A template flag, not an argument: the kernels without it keep their code (a runtime flag cost
  // grid=fill q8-dp4a 32 more bytes of stack, ptxas, sm_90, nvcc 13.0).
  if constexpr (XPf) prefetch_x_warp(x, int(threadIdx.x >> 5) * 32, k / ref::kQ4Block);
  // Dependents may launch now: they too start with their weights, and wait for us before their x.
  asm volatile("griddepcontrol.launch_dependents;");
  __shared__ float part[2][kMaxWarps][R];  // (parity, warp, row): the warps' row totals
  extern __shared__ uint4 xs[];             // the prepared x words (kXBytes<F> per thread)
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, W = blockDim.x >> 5;
  const int nb = k / ref::kQ4Block;
  const bool active = tid < nb;  // this thread's block b = tid exists
  const int groups = (m + R - 1) / R;
  constexpr int kTile = R * (kChunk * 16 + kChunk * 2);
  const std::size_t gstride = std::size_t(W) * kTile;  // bytes of one group (W = chunks)
  const std::uint8_t* qbase = packed + std::size_t(warp) * kTile + lane * 16;                       // + g gstride + r 512
  const std::uint8_t* sbase = packed + std::size_t(warp) * kTile + R * kChunk * 16 + lane * (2 * R);  // + g gstride

  // The group's codes at q (row r at + 512 r), its scales at q + 512 R - 8 R lane... kept as one
  // pointer walking the groups: + gridDim.x * gstride per group.
  const std::uint8_t* q = qbase + std::size_t(blockIdx.x) * gstride;
  const std::size_t qstep = std::size_t(gridDim.x) * gstride;
  const std::ptrdiff_t s_off = sbase - qbase;
  auto load = [&](Buf<R>& buf, const std::uint8_t* at) {
    for (int r = 0; r < R; ++r) buf.q[r] = __ldcs(reinterpret_cast<const uint4*>(at + r * kChunk * 16));
    buf.s.load(at + s_off);
  };

  int g = blockIdx.x;
  Buf<R> A, B;
  if (g < groups && active) load(A, q);
  // x may be the predecessor's output: wait for it (and for it to finish with y) from here on.
  asm volatile("griddepcontrol.wait;" ::: "memory");
  XState<F> st;
  if (active) prep<F>(x, tid, st, xs);

  auto step = [&](const Buf<R>& buf, int gg, int par) {
    float p[R];
    if (active) block_values<F, R>(buf, st, x, xs, tid, p);
    else
      for (int r = 0; r < R; ++r) p[r] = 0.f;
    const float t = warp_rows<R>(p, lane);
    if ((lane & (32 / R - 1)) == 0) part[par][warp][lane / (32 / R)] = t;
    __syncthreads();
    if (tid < R) {
      const int row = gg * R + tid;
      if (row < m) {
        float s = part[par][0][tid];
        for (int w = 1; w < W; ++w) s = add_rn(s, part[par][w][tid]);
        y[row] = s;
      }
    }
  };
  // Two buffers, the loop unrolled by two so that they swap roles without copies. part[] alternates
  // too: thread r reads part[par] before it reaches the next step's barrier, and part[par] is written
  // again only after that barrier.
  while (g < groups) {
    const int g1 = g + gridDim.x;
    q += qstep;
    if (g1 < groups && active) load(B, q);
    step(A, g, 0);
    if (g1 >= groups) break;
    const int g2 = g1 + gridDim.x;
    q += qstep;
    if (g2 < groups && active) load(A, q);
    step(B, g1, 1);
    g = g2;
  }
}

// ---- xprep=launch: x prepared once per launch (a first, tiny kernel), then one block per group ----
// Why: grid=groups was 2x slower than grid=fill (q8-dp4a 32.2 vs 15.5 us on 17408x5120, H200): each
// thread block re-prepared x for its R rows (q8: ~200 lane instructions per thread, against ~80 for
// the 4 rows' dots). Prepared once, the R-row block keeps only its loads and its dots, and grid=groups
// keeps what grid=fill lacks: balanced waves (fill's 792 persistent blocks take 5.5 / 3.2 / 1.9
// groups each at the seed shapes: a 9-19% tail) and every load of a block issued at once.
// The prepared x lives in g_xq (a static device array, kXqWords uint4 per block of 32, word-major:
// word i of block b at g_xq[i * 1024 + b], so a warp's load is 512 contiguous bytes, read via L2):
//   q8     [0] xe[0..3]  [1] xo[0..3]  [2] (c, d bits, 0, 0)
//   f16x2  [j] h[j][0..3] (j = 0..3)  [4] (f bits, 0, 0, 0)
//   f32    [0] (sx bits, 0, 0, 0)  (the offset form's sum of x, the add chain of prep<f32>)
// Ordering (pdl=on, both launches with the PDL attribute): prep N+1 triggers, WAITS for main N (x may
// be its predecessor's output; main N must be done reading g_xq), then writes g_xq; main N+1 triggers,
// issues its weight loads, waits for prep N+1, then reads g_xq (and, f32, x) with ld.cg (never a
// possibly stale L1 line). One g_xq per device: launches on concurrent streams would race (the lab
// and the GDN tier launch on one stream).
template <Form F>
constexpr int kXqWords = F == Form::f32 ? 1 : F == Form::q8 ? 3 : 5;
constexpr int kXqStride = kMaxWarps * 32;  // blocks of 32 (k <= 32768)
static_assert(kXqStride == kPreparedStride, "prepared_x.cuh states g_xq's layout for producers of a prepared x");
__device__ uint4 g_xq[5 * kXqStride];

// wpf=l2 (wpf_bytes > 0): the prep kernel also prefetches the first wpf_bytes of the main kernel's
// packed weights into L2 (TMA bulk prefetches of 32 KB, spread over its threads), after x and before
// it lets the main kernel go. Why: a PDL-chained prep kernel is tiny (a few 32-thread blocks), so it
// becomes resident as soon as the main kernel before it has started, long before its own main
// kernel's blocks find room (the main kernels fill the SMs: 6 blocks of 160 threads at k = 5120); its
// prefetches keep DRAM busy with this call's weights while the previous call computes, drains and
// exits, and the main kernel then reads them from L2. The same bytes leave DRAM once; nothing of a
// later call is touched (each call prefetches its own weights). wpf_bytes is capped at half the L2
// (launch_xl) so that the prefetched lines outlive the previous call's streaming reads.
constexpr unsigned kWpfChunk = 32 * 1024;
// Late (trigger=late, 2026-12-05): the block lets its dependents go only once its x has arrived and is quantised, not
// at its start, so the main kernel's blocks request their weights after the prep's x reads, not in front of them
// (klab probe-hop: a dependent L2 load waits ~0.5-1 us behind 32-128 KB an SM of loads in flight on an H100). It lost
// (x0.80..x0.94 on an H100, reports/h100/run-late): see packed_kernels.
template <Form F, bool XPf = false, bool WPf = false, bool Late = false>
__global__ void __launch_bounds__(32) xprep_kernel(const float* __restrict__ x, int nb, const std::uint8_t* wpf, long long wpf_bytes) {
  static_assert(!Late || F == Form::q8, "trigger=late: the q8 prep (the ring's)");
  if constexpr (XPf) prefetch_x_warp(x, int(blockIdx.x) * 32, nb);  // before the trigger: ahead of the main kernel's weight loads
  if constexpr (WPf) {
    const long long T = static_cast<long long>(gridDim.x) * 32;
    for (long long c = static_cast<long long>(blockIdx.x) * 32 + threadIdx.x; c * kWpfChunk < wpf_bytes; c += T) {
      const long long left = wpf_bytes - c * kWpfChunk;
      const unsigned bytes = left < kWpfChunk ? unsigned(left) & ~15u : kWpfChunk;
      if (bytes) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(wpf + c * kWpfChunk), "r"(bytes) : "memory");
    }
  }
  if constexpr (!Late) asm volatile("griddepcontrol.launch_dependents;");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const int b = blockIdx.x * 32 + threadIdx.x;
  if (b >= nb) return;
  const float4* xb = reinterpret_cast<const float4*>(x) + std::size_t(b) * 8;
  float xv[32];
  for (int w = 0; w < 8; ++w) {
    const float4 v = __ldcg(xb + w);
    xv[4 * w] = v.x, xv[4 * w + 1] = v.y, xv[4 * w + 2] = v.z, xv[4 * w + 3] = v.w;
  }
  if constexpr (F == Form::f32) {
    float sx = 0.f;
    for (int i = 0; i < 32; ++i) sx = add_rn(sx, xv[i]);  // = prep<f32>: columns in order from +0
    g_xq[b] = make_uint4(float_bits(sx), 0, 0, 0);
  } else if constexpr (F == Form::q8) {
    const Q8X X = q8_prep(xv);
    if constexpr (Late) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");  // x in and quantised
    g_xq[b] = make_uint4(X.xe[0], X.xe[1], X.xe[2], X.xe[3]);
    g_xq[kXqStride + b] = make_uint4(X.xo[0], X.xo[1], X.xo[2], X.xo[3]);
    g_xq[2 * kXqStride + b] = make_uint4(std::uint32_t(X.c), float_bits(X.d), 0, 0);
  } else {
    const H2X X = h2_prep(xv);
    for (int j = 0; j < 4; ++j) g_xq[j * kXqStride + b] = make_uint4(X.h[j][0], X.h[j][1], X.h[j][2], X.h[j][3]);
    g_xq[4 * kXqStride + b] = make_uint4(float_bits(X.f), 0, 0, 0);
  }
}

// xprep=warps: xprep_kernel<q8>'s words written by a warp per block of 32 (prepared_x.cuh's
// store_prepared_q8_warp: the same bits, tests/gpu/test_q4.cu), 8 warps a thread block. Why: in
// xprep_kernel one thread quantises its block alone (8 loads, then ~300 dependent instructions:
// block_amax and 32 q8_rounds in a chain), and every call's main kernel waits for that chain after
// its predecessor completes; a warp's lane loads one activation and the block's amax, codes and sum
// take a few shuffles (written 2026-12-02 after the gated norm's q8 epilogue, which uses the same
// function, took out_proj's prep launch out of the GDN step: reports/h200/run-a9d7934).
// WPB warps a thread block: 8 (xprep=warps), or 1 (xprep=warp). Why one (2026-12-02, kernel traces of
// the GDN step's 48-layer graph, reports/h200/run-4cb578e): a main kernel of 160-192 threads and 64
// registers fills an SM 5 or 6 blocks deep, leaving ~4096 registers; a 256-thread prep block does not
// fit there until those blocks leave, so the chain pays its launch after them (out_proj's end to the
// warps prep's end 4.5 us, to the 32-thread xprep_kernel's 3.3 us). A 32-thread block fits beside them,
// is resident long before its wait, and quantises with a warp's shuffles: the same bits.
// Measured (reports/h200/run-e75fb18, H200, 2026-12-02, stream mode, rows=8 against xprep=warps): x1.027 and
// x1.032 at 17408x5120 and 10240x5120 (64.1%, the fastest rung there), x0.984 and x0.975 at 6144x5120 and
// 5120x6144; in the GDN step's 48-layer graph x0.984 (the base) and x0.972 (fold=ba-main). Kept as a rung.
template <int WPB>
__global__ void __launch_bounds__(WPB * 32) xprep_warps_kernel(const float* __restrict__ x, int nb) {
  asm volatile("griddepcontrol.launch_dependents;");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  prepare_q8_warps<WPB>(x, g_xq, nb, int(blockIdx.x));
}
// wpf=lines (xprep=warp only): the one-warp prep blocks, resident beside the previous call's main
// kernel from its start, also request their call's packed weights into L2 (the first wpf_bytes: at most
// half the L2), one `prefetch.global.L2` of a 128-byte line per lane and step, lane-consecutive lines,
// the grid's warps sweeping the matrix front to back -- after the trigger (the main kernel is not held
// back by their issue) and before griddepcontrol.wait. Why (reports/h200/run-4341948, 6144x5120):
// with its weights in L2 (--hot) the xprep=launch chain takes 4.97 us a call, 6.80 cold; the main
// kernel is one wave, so the next call's blocks request their weights only as this call's leave, and
// ~1.5 us of reads a call stay unhidden. wpf=l2 (xprep_kernel) tried the same with TMA prefetches
// from 5 blocks of 32 threads, before the trigger: 5 SMs' copy engines for the whole matrix, and
// the main kernel held until they were issued (x0.19..x0.57, reports/h200/run-30bee11). Here 160
// warps (k = 5120) spread over the SMs issue 27 line prefetches a lane. A hint: the same bits.
__global__ void __launch_bounds__(32) xprep_warp_lines_kernel(const float* __restrict__ x, int nb, const std::uint8_t* __restrict__ wpf,
                                                              long long wpf_bytes) {
  asm volatile("griddepcontrol.launch_dependents;");
  const long long step = static_cast<long long>(gridDim.x) * 32 * 128;
  for (long long off = (static_cast<long long>(blockIdx.x) * 32 + threadIdx.x) * 128; off < wpf_bytes; off += step)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(wpf + off));
  asm volatile("griddepcontrol.wait;" ::: "memory");
  prepare_q8_warps<1>(x, g_xq, nb, int(blockIdx.x));
}

template <bool Pdl, int WPB>
void launch_xprep_warps(const float* x, int nb, cudaStream_t stream) {
  launch_maybe_pdl(Pdl, xprep_warps_kernel<WPB>, dim3(unsigned((nb + WPB - 1) / WPB)), dim3(unsigned(WPB * 32)), 0, stream, x, nb);
  KLAB_CUDA_LAUNCH("xprep_warps_kernel");
}
// The q8 prep launch of a main kernel reading g_xq: xprep_warps_kernel<Warps> (xprep=warps: 8, =warp: 1), else
// xprep_kernel<q8> (xprep=launch: a thread a block of x, no prefetch); the same words either way.
template <bool Pdl, int Warps = 0>
void launch_q8_prep(const float* x, int nb, const std::uint8_t* packed, cudaStream_t stream) {
  if constexpr (Warps > 0) {
    launch_xprep_warps<Pdl, Warps>(x, nb, stream);
  } else {
    launch_maybe_pdl(Pdl, xprep_kernel<Form::q8>, dim3(unsigned((nb + 31) / 32)), dim3(32), 0, stream, x, nb, packed, 0LL);
    KLAB_CUDA_LAUNCH("xprep_kernel");
  }
}

// Stamp (the stamp probe, `klab probe-q4`: the ring, grid=fill,load=bulk, with no other axis but depth and a prepared
// x; or grid=groups,xprep=launch,q8-dp4a's main kernel, xl_body): thread 0 of each block reads %globaltimer at
// kQ4StampPoints points of its path into
// g_q4_stamps[(launch * blocks + block) * kQ4StampPoints + i] and adds up the time it spends in the stages' mbarrier
// waits into g_q4_waits[launch * blocks + block]; launch = the index of the launch's copy of the weights
// ((packed - g_q4_stamp_base) / g_q4_stamp_stride: the probe gives every launch a copy of its own); launches past
// g_q4_stamp_launches write nothing. Not a variant: the stamps are on the path they measure.
//   the ring: 0 entry; 1 the prologue's stage requests issued, before griddepcontrol.wait; 2 after the wait; 3 x's
//   words in registers (a branch on them orders the read); 4 the first stage's bytes arrived; 5 the first group done
//   (after its barrier, its row stored); 6 the last stage's bytes arrived; 7 the last group done, at exit.
//   grid=groups: 0 entry; 1 the group's loads issued, before the wait; 2 after the wait; 3 x's words in registers; 4
//   the thread's weights in registers; 5 its dots done; 6 after the block's barrier (every warp's row totals in
//   shared memory); 7 y stored, at exit.
// start and finish, which name the probe's __device__ globals, are defined with them further down (before
// packed_ring_kernel): declared after every other global of this file, so that the other kernels' constant-bank slots
// (and so their SASS) stay as they were.
constexpr int kQ4StampPoints = 8;
template <bool Stamp>
struct Q4Stamper {
  unsigned long long* row = nullptr;
  unsigned long long waited = 0, t0 = 0;
  __device__ static unsigned long long now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
    return t;
  }
  __device__ void start(const std::uint8_t* packed);
  __device__ void at(int i) {
    if constexpr (Stamp) {
      if (threadIdx.x == 0 && row) row[i] = now();
    }
  }
  // Point i once `word` (a loaded value) is in: the branch on it waits for the load, the timer read follows it.
  __device__ void after(int i, std::uint32_t word) {
    if constexpr (Stamp) {
      if (threadIdx.x == 0 && row) {
        if (word == 0x7FC00BADu) asm volatile("nanosleep.u32 0;" ::: "memory");
        row[i] = now();
      }
    }
  }
  __device__ void wait_begins() {
    if constexpr (Stamp) {
      if (threadIdx.x == 0) t0 = now();
    }
  }
  __device__ void wait_ends() {
    if constexpr (Stamp) {
      if (threadIdx.x == 0) waited += now() - t0;
    }
  }
  __device__ void finish();
};

// The pieces grid=groups' kernels share (packed_xl_kernel, packed_xc_kernel):
// group_base / load_group: thread `lane` of warp `warp` loads its block of 32 of the thread block's
// group of R rows (R code blocks, their scales), streaming (ld.cs); issued before griddepcontrol.wait.
template <int R>
__device__ __forceinline__ const std::uint8_t* group_base(const std::uint8_t* __restrict__ packed, int W, int warp, int lane) {
  constexpr int kTile = R * (kChunk * 16 + kChunk * 2);
  return packed + (std::size_t(blockIdx.x) * W + warp) * kTile + lane * 16;
}
template <int R>
__device__ __forceinline__ void load_group(const std::uint8_t* __restrict__ q, int lane, Buf<R>& buf) {
  for (int r = 0; r < R; ++r) buf.q[r] = __ldcs(reinterpret_cast<const uint4*>(q + r * kChunk * 16));
  buf.s.load(q + R * kChunk * 16 + lane * (2 * R - 16));
}
// q8_rows: the q8 dots of the thread's block for its R rows, row by row (a row's code registers die
// with its chain), from the prepared x (xe, xo, c, d).
template <int R>
__device__ __forceinline__ void q8_rows(const Buf<R>& buf, uint4 xe, uint4 xo, int c, float d, float (&p)[R]) {
  for (int r = 0; r < R; ++r) {
    int se = c, so = 0;
    for (int j = 0; j < 4; ++j) q8_word(word_of(buf.q[r], j), word_of(xe, j), word_of(xo, j), se, so);
    p[r] = q8_finish(se, so, half_value(buf.s.get(r)), d);
  }
}
// store_rows: the transposed butterfly of each warp's R row values, the warps' totals in `part`, and
// threads r < R summing them in warp order into y[blockIdx.x * R + r] (rows past m not stored).
// `after_barrier` (the stamp probe's): called by every thread right after the barrier.
struct NoHook {
  __device__ void operator()() const {}
};
template <int R, class Hook = NoHook>
__device__ __forceinline__ void store_rows(float (&p)[R], float (&part)[kMaxWarps][R], int tid, int lane, int warp, int W, float* __restrict__ y, int m,
                                           Hook after_barrier = {}) {
  const float t = warp_rows<R>(p, lane);
  if ((lane & (32 / R - 1)) == 0) part[warp][lane / (32 / R)] = t;
  __syncthreads();
  after_barrier();
  if (tid < R) {
    const int row = blockIdx.x * R + tid;
    if (row < m) {
      float s = part[0][tid];
      for (int w = 1; w < W; ++w) s = add_rn(s, part[w][tid]);
      y[row] = s;
    }
  }
}

// One thread block per group of R rows (grid = groups), one thread per block of 32 weights; the
// block values, the transposed butterfly and the warps' sum exactly as packed_kernel: the same bits.
// xl_body is the kernel's code (packed_xl_rows_kernel runs it too), for the block of group blockIdx.x.
// Stamp: the stamp probe's instance (packed_xl_stamp_kernel; q8 only).
template <Form F, int R, bool Stamp = false>
__device__ __forceinline__ void xl_body(const std::uint8_t* __restrict__ packed, const float* __restrict__ x, float* __restrict__ y, int m, int k) {
  static_assert(!Stamp || F == Form::q8, "the stamp probe instruments the q8-dp4a main kernel");
  Q4Stamper<Stamp> stamp;
  stamp.start(packed);
  asm volatile("griddepcontrol.launch_dependents;");
  __shared__ float part[kMaxWarps][R];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, W = blockDim.x >> 5;
  const int nb = k / ref::kQ4Block;
  const bool active = tid < nb;
  const std::uint8_t* q = group_base<R>(packed, W, warp, lane);
  Buf<R> buf;
  if (active) load_group<R>(q, lane, buf);
  stamp.at(1);
  // g_xq (and x) come from the launches before us: wait for them.
  asm volatile("griddepcontrol.wait;" ::: "memory");
  stamp.at(2);
  float p[R];
  if (active) {
    if constexpr (F == Form::f32) {
      const float sx = __uint_as_float(__ldcg(&g_xq[tid].x));
      const float4* xb = reinterpret_cast<const float4*>(x) + std::size_t(tid) * 8;
      float acc[R];
      for (int r = 0; r < R; ++r) acc[r] = 0.f;
      for (int w = 0; w < 4; ++w) {
        const float4 xa = __ldcg(xb + 2 * w), xc = __ldcg(xb + 2 * w + 1);
        const float xv[8] = {xa.x, xa.y, xa.z, xa.w, xc.x, xc.y, xc.z, xc.w};
        for (int i = 0; i < 8; ++i)
          for (int r = 0; r < R; ++r) acc[r] = fma_rn(offset_value(word_of(buf.q[r], w), i), xv[i], acc[r]);
      }
      for (int r = 0; r < R; ++r) p[r] = mul_rn(DotOffset::finish(acc[r], sx), half_value(buf.s.get(r)));
    } else if constexpr (F == Form::q8) {
      const uint4 xe = __ldcg(&g_xq[tid]), xo = __ldcg(&g_xq[kXqStride + tid]), cd = __ldcg(&g_xq[2 * kXqStride + tid]);
      stamp.after(3, xe.x ^ xo.x ^ cd.y);
      stamp.after(4, buf.q[0].x ^ buf.q[R - 1].w);
      q8_rows<R>(buf, xe, xo, int(cd.x), __uint_as_float(cd.y), p);
      stamp.after(5, float_bits(p[0]) ^ float_bits(p[R - 1]));
    } else {
      uint4 xp[4];
      for (int j = 0; j < 4; ++j) xp[j] = __ldcg(&g_xq[j * kXqStride + tid]);
      const float f = __uint_as_float(__ldcg(&g_xq[4 * kXqStride + tid].x));
      for (int r = 0; r < R; ++r) {
        std::uint32_t h = 0;
        for (int j = 0; j < 4; ++j) h = h2_word(word_of(buf.q[r], j), xp[j].x, xp[j].y, xp[j].z, xp[j].w, h);
        p[r] = h2_finish(h, half_value(buf.s.get(r)), f);
      }
    }
  } else {
    for (int r = 0; r < R; ++r) p[r] = 0.f;
  }
  if constexpr (Stamp) {
    store_rows<R>(p, part, tid, lane, warp, W, y, m, [&stamp] { stamp.at(6); });
    stamp.finish();
  } else {
    store_rows<R>(p, part, tid, lane, warp, W, y, m);
  }
}
template <Form F, int R>
__global__ void __launch_bounds__(kMaxWarps * 32)
packed_xl_kernel(const std::uint8_t* __restrict__ packed, const float* __restrict__ x, float* __restrict__ y, int m, int k) {
  xl_body<F, R>(packed, x, y, m, k);
}
// The stamp probe's grid=groups main kernel (q8-dp4a; launch_q4_stamped).
template <int R>
__global__ void __launch_bounds__(kMaxWarps * 32)
packed_xl_stamp_kernel(const std::uint8_t* __restrict__ packed, const float* __restrict__ x, float* __restrict__ y, int m, int k) {
  xl_body<Form::q8, R, true>(packed, x, y, m, k);
}
// regs=48: the same body with at most 48 registers a thread (__maxnreg__ in place of the launch bound, which
// it cannot share a kernel with; 1024 threads x 48 registers still fit an SM). Why (docs/DEVICE-RUNBOOK.md's
// lead; reports/h200/run-4341948, q4-prep-split): at 64 registers rows=8's 160-thread blocks fit 6 an SM, one
// call's worth at 6144x5120, so the next call's blocks find no room until this call's leave and request their
// weights only then (the producer twin: 5.49 us cold against 3.96 hot). At 48, 8 fit: a third of the next
// call's blocks are resident and loading while this one waits, without rung 50's shared-memory path (43
// registers, 1.48 SASS instructions a weight against 1.03).
template <Form F, int R>
__global__ void __maxnreg__(48)
packed_xl_r48_kernel(const std::uint8_t* __restrict__ packed, const float* __restrict__ x, float* __restrict__ y, int m, int k) {
  xl_body<F, R>(packed, x, y, m, k);
}
template <Form F, int R, bool Regs48>
constexpr auto xl_kernel() {
  if constexpr (Regs48) return packed_xl_r48_kernel<F, R>;
  else return packed_xl_kernel<F, R>;
}

// ---- f32 rows riding along (Q4Kernel::launch_packed_rows): the q8 main kernel's grid with m32 more
// blocks, block groups + r computing y32[r] = W32[r] . x in f32 (W32 row-major m32 x k), so that a
// small f32 mat-vec over the same x (the GDN step's b|a) needs no launch of its own. Why: in the GDN
// step's 48-layer graph b|a's own launch costs a hop (1.64 us in gdn-step-breakdown, run-e0dc546);
// folding it into the prep kernel (fold=ba) saved the hop but delayed the prep's completion, which
// the main kernel waits for (x0.994 in the graph). Here it delays nothing the q4 rows wait for.
// Arithmetic: f32_gemv split-row's body over this grid's T threads (f32_gemv/split_row.cuh: fixed
// order, no atomics; at T != 256 not split-row's bits, a tolerance against it). W32 is loaded before
// griddepcontrol.wait, x after it.
template <int R>
__global__ void __launch_bounds__(kMaxWarps * 32)
packed_xl_rows_kernel(const std::uint8_t* __restrict__ packed, const float* __restrict__ x, float* __restrict__ y, int m, int k,
                      const float* __restrict__ w32, float* __restrict__ y32) {
  const int groups = (m + R - 1) / R;
  if (int(blockIdx.x) >= groups) {
    f32_gemv::split_row::body<true>(w32, x, y32, k, int(blockIdx.x) - groups, int(blockDim.x));
    return;
  }
  xl_body<Form::q8, R>(packed, x, y, m, k);
}

// ---- grid=groups,xprep=cluster: x prepared inside the launch, shared over a cluster of 8 blocks ----
// Why (reports/h200/run-30bee11, H200, 2026-12-01, stream mode): grid=groups,xprep=launch,q8-dp4a,rows=8,
// the fastest rung at the three smaller seed shapes, takes 6.83 us at 6144x5120 against 3.87 us for
// its bytes, and each launch boundary carries a chain of its own: main N done -> prep N+1 released,
// reads x from L2, quantises, writes g_xq, completes -> main N+1 released, reads g_xq from L2, dots.
// Its twin without the prep kernel (grid=groups,pdl=on,rows=4: every thread quantises its own block
// of 32, ~200 lane instructions per thread per group) took 12.62 us: the work after the wait is on
// the path. Here the prep is one launch's and costs each thread 1/8 of a block: the grid's blocks
// form clusters of kXcCluster = 8 (grid rounded up to a multiple of 8; the padding blocks load and
// store no rows); after griddepcontrol.wait member r quantises the x blocks b = r, r + 8, ... with 8
// threads per block (4 columns each: one float4 ld.cg, the block's amax and its sum of q by xor-
// shuffles within the 8 lanes, which are exact in any order), into its shared memory; one cluster
// barrier (release / acquire); then thread tid reads its block's words from member tid % 8 over
// distributed shared memory and does packed_xl_kernel's q8 dots. A second cluster barrier, arrived
// at after those reads and waited on just before the block exits, keeps every member's shared memory
// alive while others read it. Bits: the values q8_prep gives (the same amax, inv = 127/amax, d =
// amax/127, q = q8_round(x, inv), c = -8 sum q, the same byte positions) and then packed_xl_kernel's
// functions in its order: y is bit for bit grid=groups,xprep=launch,q8-dp4a of the same rows. No
// g_xq: safe on concurrent streams.
constexpr int kXcCluster = 8;
constexpr int kXcBlocks = kMaxWarps * 32 / kXcCluster;  // x blocks one member prepares, at most (k <= 32768)

// x block b's prepared words by the 8 lanes `group` of a warp (sub = the lane's place among them; uniform
// within the 8): xs_e[j], xs_o[j], xs_cd[j] as q8_prep's words, so xprep_kernel's bits (see above).
__device__ __forceinline__ void xc_block(const float* __restrict__ x, int b, int sub, unsigned group, uint4* xs_e, uint4* xs_o, int2* xs_cd,
                                         int j) {
  const float4 v4 = __ldcg(reinterpret_cast<const float4*>(x) + std::size_t(b) * 8 + sub);  // columns 4 sub .. 4 sub + 3
  const float v[4] = {v4.x, v4.y, v4.z, v4.w};
  float a = amax4(v);
  for (int o = 1; o < 8; o *= 2) a = fmaxf(a, __shfl_xor_sync(group, a, o));  // = block_amax (a max is exact in any order)
  Q8Part q8 = q8_part(v, sub, q8_inv(a));
  q8.e |= __shfl_xor_sync(group, q8.e, 1);
  q8.o |= __shfl_xor_sync(group, q8.o, 1);
  for (int o = 1; o < 8; o *= 2) q8.sum += __shfl_xor_sync(group, q8.sum, o);  // integers: exact in any order
  const int h = sub & 1;
  if (h == 0) {
    reinterpret_cast<std::uint32_t*>(&xs_e[j])[sub >> 1] = q8.e;
    reinterpret_cast<std::uint32_t*>(&xs_o[j])[sub >> 1] = q8.o;
  }
  if (sub == 0) xs_cd[j] = make_int2(-8 * q8.sum, int(float_bits(q8_step(a))));
}

template <int R>
__global__ void __launch_bounds__(kMaxWarps * 32)
packed_xc_kernel(const std::uint8_t* __restrict__ packed, const float* __restrict__ x, float* __restrict__ y, int m, int k) {
  asm volatile("griddepcontrol.launch_dependents;");
  __shared__ uint4 xs_e[kXcBlocks], xs_o[kXcBlocks];
  __shared__ int2 xs_cd[kXcBlocks];
  __shared__ float part[kMaxWarps][R];
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, W = blockDim.x >> 5;
  const int nb = k / ref::kQ4Block;
  const bool rows_live = static_cast<long long>(blockIdx.x) * R < m;  // not a padding block
  const bool active = tid < nb && rows_live;
  const std::uint8_t* q = group_base<R>(packed, W, warp, lane);
  Buf<R> buf;
  if (active) load_group<R>(q, lane, buf);
  // x comes from the launch before us: wait for it.
  asm volatile("griddepcontrol.wait;" ::: "memory");
  {
    const int rank = int(cluster.block_rank()), sub = tid & 7;
    const int mine = rank < nb ? (nb - rank + kXcCluster - 1) / kXcCluster : 0;  // blocks rank, rank + 8, ... below nb
    const unsigned group = 0xFFu << (lane & 24);                                     // the 8 lanes of one block
    for (int j = tid >> 3; j < mine; j += int(blockDim.x) >> 3)  // uniform within the 8 lanes
      xc_block(x, rank + kXcCluster * j, sub, group, xs_e, xs_o, xs_cd, j);
  }
  // Not .aligned: the barriers sit after branches that may leave a warp diverged.
  asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
  uint4 xe{}, xo{};
  int2 cd{};
  if (active) {
    const int owner = tid % kXcCluster, j = tid / kXcCluster;
    xe = *cluster.map_shared_rank(&xs_e[j], owner), xo = *cluster.map_shared_rank(&xs_o[j], owner);
    cd = *cluster.map_shared_rank(&xs_cd[j], owner);
  }
  float p[R];
  if (active) {
    q8_rows<R>(buf, xe, xo, cd.x, __int_as_float(cd.y), p);  // = packed_xl_kernel<q8>
  } else {
    for (int r = 0; r < R; ++r) p[r] = 0.f;
  }
  // Our reads of the others' memory are done: release orders them before the arrive. A relaxed arrive
  // may be observed before its loads return (ptxas dropped the operand meant to tie it to them), and a
  // member that has exited cannot be read: the likely cause of the first H200 run's "unspecified
  // launch failure" at 17408x5120 (2026-12-01), where memcheck's serialised run passed. After the dots,
  // so that its fence waits for nothing they do not need.
  asm volatile("barrier.cluster.arrive.release;" ::: "memory");
  store_rows<R>(p, part, tid, lane, warp, W, y, m);
  asm volatile("barrier.cluster.wait.acquire;" ::: "memory");  // every member is done reading our memory
}

// ---- grid=groups,xprep=flag: x prepared inside the launch ONCE, by its first P blocks, behind a flag ----
// Why (2026-12-02, kernel traces of reports/h200/run-4cb578e and run-e75fb18/slice, H200, stream mode):
// at 6144x5120 grid=groups,xprep=launch|warps,rows=8 takes 6.7-6.8 us against 3.9 us for its bytes, and
// its period is a chain of two dependent launches: main N completes, prep N+1 completes 2.8 us later,
// main N+1 3.8 us after that. Every x-dependent instruction lies after both hops. xprep=cluster took
// the prep into the launch but paid it per cluster (9.9 us, run-e75fb18); xprep=block per thread block
// (12.7 us). Here the launch prepares x once, as the prep kernel would, and publishes it with a flag:
//   - ticket: thread 0 of every block takes one from g_xf_ctr ((calls << 32) | tickets of this call)
//     BEFORE the block triggers its dependents. The block that takes the call's last ticket (G - 1)
//     moves the counter on to the next call ((calls + 1) << 32) and waits for that atomic's result
//     before it triggers. A PDL successor launches only once every block of this grid has triggered, so
//     every ticket of call N is taken before any of call N + 1: `calls` names the call, the low word
//     orders its blocks. Tickets go to running blocks, so the P blocks holding tickets 0 .. P - 1 are
//     running: nothing waits on a block that has no slot (no deadlock whatever the scheduler's order);
//   - prep: after griddepcontrol.wait, the blocks with tickets t < P write the x blocks t XB, t XB + 1, ..
//     (then + P XB, ...) of g_xq by prepared_x.cuh's quad writer (8 threads a block of 32: xprep_kernel's
//     words, bit for bit, tests/gpu/test_q4.cu), fence, and count themselves in g_xf_cnt; the last of the
//     P resets the count and publishes (release) g_xf_pub = calls + 1;
//   - every block (the prep blocks too) polls g_xf_pub (acquire, thread 0) until it reads its call's
//     value, then reads its words from g_xq (ld.cg) and does packed_xl_kernel's q8 dots, butterfly and
//     warps' sum: y is bit for bit grid=groups,xprep=launch,q8-dp4a of the same rows;
//   - a block that polls kXfSpins times without seeing its value quantises its own block of x by
//     q8_prep (the same words) and goes on: a guard against a hang, slow. In a live context the
//     counters cannot leave step (every block of a launched grid runs; a launch that dies takes the
//     context with it); tests/gpu/test_q4.cu puts them out of step by hand to run this path.
// One set of counters and one g_xq per device: calls on concurrent streams would race (as xprep=launch)
// and, with the counters out of step, could read another call's x.
__device__ unsigned long long g_xf_ctr;  // (calls << 32) | tickets taken in this call
__device__ unsigned g_xf_cnt;            // prep blocks done in this call
__device__ unsigned g_xf_pub;            // calls + 1 of the last call whose x is in g_xq
constexpr unsigned kXfSpins = 1u << 16;  // ~50 ms of polls through L2

__device__ __forceinline__ unsigned ld_acquire_gpu(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_gpu(unsigned* p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// xprep=block's words of block b of x (xprep_kernel<q8>'s, kept in registers): its 32 activations read through L2
// (ld.cg: a predecessor may have written them), q8_prep.
__device__ __forceinline__ void q8_block_words(const float* __restrict__ x, int b, uint4& xe, uint4& xo, uint4& cd) {
  const float4* xb = reinterpret_cast<const float4*>(x) + std::size_t(b) * 8;
  float xv[32];
  for (int w = 0; w < 8; ++w) {
    const float4 v = __ldcg(xb + w);
    xv[4 * w] = v.x, xv[4 * w + 1] = v.y, xv[4 * w + 2] = v.z, xv[4 * w + 3] = v.w;
  }
  const Q8X X = q8_prep(xv);
  xe = make_uint4(X.xe[0], X.xe[1], X.xe[2], X.xe[3]);
  xo = make_uint4(X.xo[0], X.xo[1], X.xo[2], X.xo[3]);
  cd = make_uint4(std::uint32_t(X.c), float_bits(X.d), 0, 0);
}

// q8_prep of the 32 activations at xb (8 float4, read through L2) in two passes, so that it needs few
// registers beside a thread's R code blocks: the amax by amax4 over the float4s (a max is exact in any
// order), then each float4's codes by q8_part (xprep=cluster's split of q8_prep: float4 w is its `sub` w)
// OR-ed into place and their sums added (integers: exact in any order): q8_prep's words.
__device__ __forceinline__ Q8X q8_prep_two_pass(const float4* xb) {
  float a = 0.f;
  for (int w = 0; w < 8; ++w) {
    const float4 v4 = __ldcg(xb + w);
    const float v[4] = {v4.x, v4.y, v4.z, v4.w};
    a = fmaxf(a, amax4(v));
  }
  const float inv = q8_inv(a);
  Q8X X{};
  X.d = q8_step(a);
  int sum = 0;
  for (int w = 0; w < 8; ++w) {
    const float4 v4 = __ldcg(xb + w);
    const float v[4] = {v4.x, v4.y, v4.z, v4.w};
    const Q8Part p = q8_part(v, w, inv);
    X.xe[w >> 1] |= p.e, X.xo[w >> 1] |= p.o, sum += p.sum;
  }
  X.c = -8 * sum;
  return X;
}

template <int R>
__global__ void __launch_bounds__(kMaxWarps * 32)
packed_xf_kernel(const std::uint8_t* __restrict__ packed, const float* __restrict__ x, float* __restrict__ y, int m, int k, int P) {
  __shared__ float part[kMaxWarps][R];
  __shared__ unsigned s_ticket, s_call;
  __shared__ int s_self;
  __shared__ volatile unsigned s_moved;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, W = blockDim.x >> 5;
  const int nb = k / ref::kQ4Block;
  const bool active = tid < nb;
  const std::uint8_t* q = group_base<R>(packed, W, warp, lane);
  Buf<R> buf;
  if (active) load_group<R>(q, lane, buf);
  if (tid == 0) {
    const unsigned long long old = atomicAdd(&g_xf_ctr, 1ull);
    const unsigned t = unsigned(old & 0xFFFFFFFFull), call = unsigned(old >> 32);
    // The next call's tickets start at 0. The volatile store needs the atomic's result, so the atomic has
    // been performed before this block reaches the barrier, and so before its trigger.
    if (t == gridDim.x - 1) s_moved = unsigned(atomicAdd(&g_xf_ctr, (1ull << 32) - gridDim.x));
    s_ticket = t, s_call = call, s_self = 0;
  }
  __syncthreads();
  asm volatile("griddepcontrol.launch_dependents;");
  // x comes from the launch before us, and that launch may still read g_xq: wait for it.
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const unsigned t = s_ticket, call = s_call;
  if (int(t) < P) {
    const int per = int(blockDim.x) >> 3;  // x blocks one pass of this block writes (8 threads each)
    for (int b0 = int(t) * per; b0 < nb; b0 += P * per) {  // uniform over the block
      const int b = b0 + (tid >> 3);
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (b < nb) v = __ldcg(reinterpret_cast<const float4*>(x) + std::size_t(b) * 8 + (tid & 7));
      store_prepared_q8_quads(g_xq, b < nb ? b : -1, v, lane);
    }
    __threadfence();  // our words are visible at the GPU before we count ourselves
    __syncthreads();
    if (tid == 0 && atomicAdd(&g_xf_cnt, 1u) == unsigned(P) - 1) {
      atomicExch(&g_xf_cnt, 0u);  // the next call's prep blocks count only after their wait, i.e. after we completed
      __threadfence();            // every prep block's words (each fenced before its count) before the flag
      st_release_gpu(&g_xf_pub, call + 1);
    }
  }
  if (tid == 0) {
    unsigned spins = 0;
    while (ld_acquire_gpu(&g_xf_pub) != call + 1)
      if (++spins == kXfSpins) {
        s_self = 1;
        break;
      }
  }
  __syncthreads();
  float p[R];
  if (active) {
    uint4 xe, xo;
    int c;
    float d;
    if (!s_self) {
      const uint4 e = __ldcg(&g_xq[tid]), o = __ldcg(&g_xq[kXqStride + tid]), cd = __ldcg(&g_xq[2 * kXqStride + tid]);
      xe = e, xo = o, c = int(cd.x), d = __uint_as_float(cd.y);
    } else {  // the counters are out of step: this thread's own block of x, q8_prep's words
      const Q8X X = q8_prep_two_pass(reinterpret_cast<const float4*>(x) + std::size_t(tid) * 8);
      xe = make_uint4(X.xe[0], X.xe[1], X.xe[2], X.xe[3]), xo = make_uint4(X.xo[0], X.xo[1], X.xo[2], X.xo[3]), c = X.c, d = X.d;
    }
    q8_rows<R>(buf, xe, xo, c, d, p);  // = packed_xl_kernel<q8>
  } else {
    for (int r = 0; r < R; ++r) p[r] = 0.f;
  }
  store_rows<R>(p, part, tid, lane, warp, W, y, m);
}

// ---- wait=flag (grid=fill,xprep=launch,load=bulk): the ring released by its prep kernel's flag ----
// Why (2026-12-05, q4-prep-split on an H100, reports/h100/run-prep-ring): the ring's xprep=producer twin (its main
// kernel alone, x already prepared) takes 16.21 us at 17408x5120 against 18.48 with the prep launch, 7.31 against
// 9.37 at 6144x5120: the prep launch costs 2.1-2.3 us a call. Its chain is two grid completions: main N completes,
// prep N+1 (released by it) reads x, quantises and completes, and only then is main N+1 released from its
// griddepcontrol.wait. In-launch preps lost in four forms (xprep=block, =cluster on groups and on the ring, =flag on
// groups: their x work sat behind the call's weight requests in every block, or clusters scheduled late). Here the
// prep stays a launch of its own, the few blocks that do it for all, but the main kernel does not wait for its
// completion: it polls a flag the prep's last block sets once every block's words are written.
//   - tickets (the main kernel, as xprep=flag's): thread 0 of every block takes one from g_wf_ctr ((calls << 32) |
//     tickets of this call) after the prologue's fills and before the block triggers its dependents; the block
//     that takes the last (G - 1) moves the counter on to the next call and waits for that atomic's result before
//     it triggers. So every ticket of call N is taken before prep N+1 launches (a PDL successor launches once every
//     block has triggered) and `calls` names the main kernel's call;
//   - prep (xprep_wf_kernel, 8 threads a block of 32: prepared_x.cuh's quad writer, xprep_kernel's words): thread 0
//     of each block reads `calls` BEFORE its trigger (so before main N+1 can take a ticket: it is N+1, main N
//     having moved it), waits (griddepcontrol.wait: x may be main N's predecessor's output, and main N must be done
//     reading g_xq), writes its words, fences, counts itself in g_wf_cnt; the last block resets the count and
//     publishes (release) g_wf_pub = calls + 1;
//   - main N+1 never executes griddepcontrol.wait: thread 0 polls g_wf_pub (acquire) until it reads its call + 1,
//     then the block reads its words from g_xq (ld.cg). The flag orders everything before the prep's wait (all
//     earlier launches, complete) before main N+1's reads and its stores of y.
//   - no deadlock: main N+1 launches only once every block of prep N+1 has triggered, i.e. runs; prep N+1 waits
//     only for main N, whose blocks all run (they triggered before prep N+1 launched) and wait for prep N's flag;
//   - a block that polls kXfSpins times without its value (the counters out of step: a stale `calls` can only make
//     the prep publish a value no main kernel waits for) quantises its own block of x by q8_prep and goes on: the
//     same words, slow; tests/gpu/test_q4.cu puts the counters out of step by hand to run that path.
// The words are xprep_kernel's and the rest is the ring's: y is bit for bit grid=fill,xprep=launch's. One set of
// counters and one g_xq per device: calls on concurrent streams would race (as xprep=launch).
__device__ unsigned long long g_wf_ctr;  // (calls << 32) | tickets taken in this call (the main kernel's)
__device__ unsigned g_wf_cnt;            // prep blocks done in this call
__device__ unsigned g_wf_pub;            // calls + 1 of the last call whose x is in g_xq

__device__ __forceinline__ unsigned long long ld_relaxed_gpu_u64(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

constexpr int kWfPrepThreads = 128;  // 16 blocks of x a prep block (8 threads each)
__global__ void __launch_bounds__(kWfPrepThreads) xprep_wf_kernel(const float* __restrict__ x, int nb) {
  unsigned call = 0;
  if (threadIdx.x == 0) call = unsigned(ld_relaxed_gpu_u64(&g_wf_ctr) >> 32);  // before our trigger: main N moved it
  asm volatile("griddepcontrol.launch_dependents;");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const int b = int((blockIdx.x * blockDim.x + threadIdx.x) >> 3);  // uniform over 8 aligned lanes
  float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
  if (b < nb) v = __ldcg(reinterpret_cast<const float4*>(x) + std::size_t(b) * 8 + (threadIdx.x & 7));
  store_prepared_q8_quads(g_xq, b < nb ? b : -1, v, int(threadIdx.x & 31));
  __threadfence();  // our words are visible at the GPU before we count ourselves
  __syncthreads();
  if (threadIdx.x == 0 && atomicAdd(&g_wf_cnt, 1u) == gridDim.x - 1) {
    atomicExch(&g_wf_cnt, 0u);  // the next call's prep blocks count only after their wait, i.e. after main N+1 completed
    __threadfence();            // every prep block's words (each fenced before its count) before the flag
    st_release_gpu(&g_wf_pub, call + 1);
  }
}

// ---- grid=warp: one WARP per group of R rows, every chunk's loads in flight before the wait ----
// Why (reports/h200, 2026-12-01, stream mode): grid=groups,xprep=launch,q8-dp4a,rows=8 takes 6.85 us
// at 6144x5120 against a 3.8 us byte floor, and Nsight reads its blocks as latency-bound (long
// scoreboard): each thread holds R 16-byte loads, then its block meets a __syncthreads and a shared-
// memory sum before it exits and the next block may load. Here a warp owns a whole group: lane l
// walks chunks c = 0, 1, ..., W-1 (block 32 c + l of each of the R rows) and issues the loads of up
// to C chunks at once (C R code loads + C scale loads per lane: R = 4, C = 6 keeps 432 bytes per lane
// in flight, the whole group at k <= 6144), with no shared memory and no barrier: a warp that is done
// leaves at once, and a PDL successor's warps take its place and load.
// Bits: per chunk the block values and the transposed butterfly of packed_xl_kernel (same functions,
// same bytes); the chunk totals are then summed in chunk order from chunk 0, as packed_xl_kernel's
// thread r sums part[w][r] over warps w in order: y is bit for bit that kernel's (model_as(q8)).
// x comes prepared by xprep_kernel<q8> (g_xq), read with ld.cg after griddepcontrol.wait.
constexpr int kWarpBlockWarps = 4;  // warps (groups) per thread block
template <int R, int C>
__global__ void __launch_bounds__(kWarpBlockWarps * 32)
packed_warp_kernel(const std::uint8_t* __restrict__ packed, float* __restrict__ y, int m, int k) {
  asm volatile("griddepcontrol.launch_dependents;");
  const int lane = threadIdx.x & 31;
  const long long g = static_cast<long long>(blockIdx.x) * kWarpBlockWarps + (threadIdx.x >> 5);
  const int nb = k / ref::kQ4Block, W = (nb + kChunk - 1) / kChunk;
  const bool live = g < (static_cast<long long>(m) + R - 1) / R;  // a warp past the last group only waits
  constexpr int kTile = R * (kChunk * 16 + kChunk * 2);
  const std::uint8_t* base = packed + static_cast<std::size_t>(g) * W * kTile + lane * 16;
  float tot = 0.f;
  Buf<R> buf[C];
  for (int c0 = 0; c0 < W; c0 += C) {
#pragma unroll
    for (int i = 0; i < C; ++i) {
      const int c = c0 + i;
      if (live && c < W && c * kChunk + lane < nb) {
        const std::uint8_t* q = base + std::size_t(c) * kTile;
        for (int r = 0; r < R; ++r) buf[i].q[r] = __ldcs(reinterpret_cast<const uint4*>(q + r * kChunk * 16));
        buf[i].s.load(q + R * kChunk * 16 + lane * (2 * R - 16));
      }
    }
    // g_xq comes from the launch before us (and x from before it): wait once, after the first loads.
    if (c0 == 0) asm volatile("griddepcontrol.wait;" ::: "memory");
    if (!live) return;
#pragma unroll
    for (int i = 0; i < C; ++i) {
      const int c = c0 + i;
      if (c >= W) break;
      const int b = c * kChunk + lane;
      float p[R];
      if (b < nb) {
        const uint4 xe = __ldcg(&g_xq[b]), xo = __ldcg(&g_xq[kXqStride + b]), cd = __ldcg(&g_xq[2 * kXqStride + b]);
        const float d = __uint_as_float(cd.y);
        for (int r = 0; r < R; ++r) {
          int se = int(cd.x), so = 0;
          for (int j = 0; j < 4; ++j) q8_word(word_of(buf[i].q[r], j), word_of(xe, j), word_of(xo, j), se, so);
          p[r] = q8_finish(se, so, half_value(buf[i].s.get(r)), d);
        }
      } else {
        for (int r = 0; r < R; ++r) p[r] = 0.f;
      }
      const float t = warp_rows<R>(p, lane);
      tot = c == 0 ? t : add_rn(tot, t);
    }
  }
  if ((lane & (32 / R - 1)) == 0) {
    const long long row = g * R + lane / (32 / R);
    if (row < m) y[row] = tot;
  }
}

// ---- load=bulk | cp-async: persistent blocks over a ring of shared-memory stages (packed_ring.hpp) ----
// Why: grid=groups,xprep=launch,q8-dp4a,rows=8 is latency-bound (Nsight, 17408x5120, H200: DRAM
// 68.5% of peak, long_scoreboard 21.8 cycles per issue, 64 registers, occupancy 41%): its loads sit
// in registers and its blocks stop loading while they compute, reduce and exit. Here each block
// keeps S whole groups (S x 576 R W bytes: 92 KB at k = 5120, two blocks per SM) in flight in
// shared memory, independent of registers, and refills a stage as soon as the block has read it.
// x comes prepared by xprep_kernel<q8> (g_xq) as in packed_xl_kernel; a thread reads its block's
// words ONCE, after griddepcontrol.wait, and keeps them in registers across its groups.
// Bits: every value a thread forms, the butterfly and the warps' sum are packed_xl_kernel<q8, R>'s
// (the same functions on the same bytes), so y is bit for bit that kernel's (model_ring, the cpu
// suite, asserts it against model_as(q8)).
// Order of a block: trigger dependents; thread 0 initialises the stages' mbarriers (bulk); the
// first min(S, mine) groups are issued (weights: independent of the predecessor); wait for the
// predecessors (griddepcontrol.wait); read x's words; then per group n: wait for stage n % S
// (mbarrier parity (n / S) & 1 / cp.async.wait_group S - 1), dots, transposed butterfly, the warp's
// row totals to part[n & 1], __syncthreads (every read of stage n % S is done), refill it with group
// n + S, threads r < R sum the warps in order and store y.
__device__ __forceinline__ std::uint32_t smem_addr(const void* p) { return static_cast<std::uint32_t>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void mbar_init(std::uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
// Arms the barrier's current phase for `bytes` of transactions and arrives (thread 0, once per fill).
__device__ __forceinline__ void mbar_arrive_expect_tx(std::uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
// Arrives once on the barrier's current phase (pace=P's consumers: a stage read).
__device__ __forceinline__ void mbar_arrive(std::uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}
// Arrives once, as mbar_arrive, but only once `dep` is in registers: dep is to be the caller's loaded words folded
// together and masked with a runtime zero the compiler cannot fold, and it offsets the barrier's address, so that the
// arrive cannot issue before the loads that produced it have completed. Why (defer=D, packed_paced_kernel, 2026-12-06):
// there each warp releases its stage right after its LDS of it, before any use of what they loaded, and in its SASS
// (sm_90, nvcc 13.0) the SYNCS.ARRIVE followed the four LDS.128 and the LDS.64 with no wait on them: an issued load
// was all that stood between the release and the producer's refill. The GDN step with rung 110 as its projections
// replayed other bits now and then on an H100 (reports/h100/run-call70: 122 elements of out; run-call74: 20480, four
// whole tokens from token 8, S the same: a first group of a block, read after its stage was refilled). Verified on an
// H100 (reports/h100/run-call75, 2026-12-07): rung 110 in the step, 200 replays, 4 differed before and 0 in 600 after.
__device__ __forceinline__ void mbar_arrive_after(std::uint64_t* bar, std::uint32_t dep) {
  asm volatile("{\n\t.reg .b32 a;\n\tadd.u32 a, %0, %1;\n\tmbarrier.arrive.shared::cta.b64 _, [a];\n\t}" ::"r"(smem_addr(bar)), "r"(dep) : "memory");
}
// Returns once the phase of parity `parity` has completed (every thread of the block polls).
__device__ __forceinline__ void mbar_wait(std::uint64_t* bar, unsigned parity) {
  const std::uint32_t a = smem_addr(bar);
  std::uint32_t done;
  do {
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(a), "r"(parity)
        : "memory");
  } while (!done);
}
// One 1-D TMA copy of `bytes` (a multiple of 16, both addresses 16-byte aligned) from global to
// shared memory, completing its bytes on `bar`; the weights are read once: L2 evict-first.
__device__ __forceinline__ void bulk_g2s(void* dst, const void* src, unsigned bytes, std::uint64_t* bar, std::uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar)), "l"(policy)
      : "memory");
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async8(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Waits until at most n of this thread's committed groups are pending (n is an immediate in PTX).
__device__ __forceinline__ void cp_async_wait(int n) {
  switch (n) {
    case 0: asm volatile("cp.async.wait_group 0;" ::: "memory"); break;
    case 1: asm volatile("cp.async.wait_group 1;" ::: "memory"); break;
    case 2: asm volatile("cp.async.wait_group 2;" ::: "memory"); break;
    case 3: asm volatile("cp.async.wait_group 3;" ::: "memory"); break;
    case 4: asm volatile("cp.async.wait_group 4;" ::: "memory"); break;
    case 5: asm volatile("cp.async.wait_group 5;" ::: "memory"); break;
    case 6: asm volatile("cp.async.wait_group 6;" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 7;" ::: "memory"); break;  // S <= kRingMaxStages = 8
  }
}

// The stamp probe's globals (q4_stamp_begin sets them) and Q4Stamper's members that name them (see Q4Stamper).
__device__ unsigned long long* g_q4_stamps;
__device__ unsigned long long* g_q4_waits;
__device__ const std::uint8_t* g_q4_stamp_base;
__device__ long long g_q4_stamp_stride;
__device__ int g_q4_stamp_launches;
template <bool Stamp>
__device__ void Q4Stamper<Stamp>::start(const std::uint8_t* packed) {
  if constexpr (Stamp) {
    if (threadIdx.x == 0) {
      const unsigned long long t = now();
      if (g_q4_stamp_launches > 0) {  // q4_stamp_begin has run (the stride is set)
        const long long launch = (packed - g_q4_stamp_base) / g_q4_stamp_stride;
        if (launch >= 0 && launch < g_q4_stamp_launches) row = g_q4_stamps + (std::size_t(launch) * gridDim.x + blockIdx.x) * kQ4StampPoints;
      }
      if (row) row[0] = t;
    }
  }
}
template <bool Stamp>
__device__ void Q4Stamper<Stamp>::finish() {
  if constexpr (Stamp) {
    if (threadIdx.x == 0 && row) {
      row[kQ4StampPoints - 1] = now();
      g_q4_waits[(row - g_q4_stamps) / kQ4StampPoints] = waited;
    }
  }
}

// XB (xprep=block, grid=half or fill; packed_ring.hpp): each thread prepares its block of x itself, after
// griddepcontrol.wait, by q8_prep on x read through L2 (ld.cg) -- the values xprep_kernel<q8> would
// have written to g_xq, so the same bits -- instead of reading g_xq. x is unused otherwise.
// Half (grid=half): the warps' row totals in dynamic shared memory after the S stages, part[2][W][R]
// (grid=fill: static, part[2][32][R]); the arithmetic and its order are unchanged.
// Held (grid=half,last=regs): when the ring's S stages do not hold all of the block's groups, its last
// group (n = mine - 1) is loaded into registers (load_group, as packed_xl_kernel) before
// griddepcontrol.wait instead of into a refilled stage, so the block's whole share is in flight
// before the wait whenever mine <= S + 1. It is consumed as the last step with the same values in the
// same order: the same bits. 36 more registers at R = 8: the kernel takes at most kHeldMaxWarps warps.
// L2pf (grid=half,last=l2): the groups after the ring's first S are requested into L2 ahead of their
// refills, S at a time, by one TMA prefetch each (thread 0): groups S .. 2S-1 before
// griddepcontrol.wait, group n + 2S when stage n % S is refilled. No register or shared memory; the
// refills then copy from L2. The bytes and arithmetic are the ring's: the same bits.
// Pre1 (grid=half,pre=1, bulk): only stage 0 is filled before griddepcontrol.wait, stages 1 .. S-1 right
// after it (before x is read): half the bytes a launch requests ahead of its predecessor's end.
// Split (row-split=2|4, bulk; packed_ring.hpp): Split threads per block of 32 weights, Split W warps a block;
// warp h W + w takes chunk w's rows h R/Split .. (h+1) R/Split - 1 of each group (its R/Split scales one
// piece at + 2 h R/Split). Each row's block values, butterfly (warp_rows adds as the plain butterfly
// does, whatever the rows a lane carries) and warps' sum in order are those of Split = 1: the same bits.
// Split = 1 is the kernel as it was (every Split expression folds to the old one).
// NoDots (the ring read probe, launch_ring_probe): the ring's stages, waits, barriers and refills without x and
// without the dots; y gets +0 sums. Not a variant: it computes no product, it times what the ring's loads cost.
// Tail (tail=split, bulk; packed_ring.hpp tail_pieces): the last round's groups cut into q pieces of R / q rows,
// one a block (RingPlan::items, group_at): a piece's stage gets its rows' codes and its group's scales, 2 W bulk
// copies on one mbarrier; the block computes and stores the piece's rows only (the others +0 in the butterfly,
// which adds rows apart). Each stored row's arithmetic is the ring's: the same bits.
// XC (xprep=cluster on the ring, XC = the cluster's blocks, 4 or 8; grid=fill, bulk): no prep kernel. After
// griddepcontrol.wait member r of each cluster prepares the x blocks [r J, (r + 1) J), J = ceil(nb / XC), 8 threads
// a block (xc_block: one coalesced float4 ld.cg a lane, xprep_kernel's words) into its shared memory; one cluster
// barrier (release / acquire); thread b reads its block's words from member b / J over distributed shared memory
// and arrives (release) at a second barrier, waited on just before the block exits, so no member's memory goes while
// another reads it. With XPf thread 0 requests the member's J blocks of x into L2 (one TMA prefetch) before the
// ring's first fills. The weights come by TMA (the async proxy), so the release of the first barrier waits for
// none of them (grid=groups,xprep=cluster's did: its weights were in registers). The words are xprep_kernel's and
// the rest is the ring's: y is bit for bit grid=fill,xprep=launch's. Padding blocks (grid rounded to whole
// clusters) prepare and take no group.
// WF (wait=flag; grid=fill, bulk, after xprep_wf_kernel): no griddepcontrol.wait. After the prologue's fills thread 0
// takes the block's ticket (the call's number), the block triggers its dependents, thread 0 polls g_wf_pub until
// the prep kernel of its call has published, then the block reads g_xq as after the wait (see xprep_wf_kernel; on
// a timeout each thread quantises its own block, xprep=block's words). The ring's bits.
template <int R, Load L, bool XB = false, bool Half = false, bool XPf = false, bool Held = false, bool L2pf = false, bool Pre1 = false,
          int Split = 1, bool NoDots = false, bool Tail = false, int XC = 0, bool WF = false, bool Stamp = false>
__global__ void __launch_bounds__(Held ? kHeldMaxWarps * 32 : kMaxWarps * 32)
packed_ring_kernel(const std::uint8_t* __restrict__ packed, const float* __restrict__ x, float* __restrict__ y, int m, int k, int S) {
  Q4Stamper<Stamp> stamp;
  stamp.start(packed);
  static_assert(R == 4 || R == 8, "the ring takes R = 4 or 8 (its scales: one 8- or 16-byte piece per lane)");
  static_assert(L == Load::bulk || L == Load::cp_async);
  static_assert(!(Held && L2pf), "last=regs or last=l2, not both");
  static_assert(!Pre1 || L == Load::bulk, "pre=1: load=bulk (cp-async counts its commit groups from the prologue)");
  static_assert(Split == 1 || ((Split == 2 || Split == 4) && R % Split == 0 && L == Load::bulk && !Held),
                "row-split=2|4: load=bulk (a cp-async thread reads only what it copied), no last=regs");
  static_assert(!Tail || (L == Load::bulk && !Held && !L2pf), "tail=split: load=bulk (its pieces are bulk copies), no last=regs or last=l2");
  static_assert(XC == 0 || ((XC == 4 || XC == 8) && L == Load::bulk && !XB && !Half && !Held && !L2pf && !Pre1 && Split == 1 && !NoDots && !Tail),
                "xprep=cluster on the ring: clusters of 4 or 8, grid=fill, load=bulk, no other axis");
  static_assert(!WF || (L == Load::bulk && !XB && !Half && !XPf && !Held && !L2pf && !Pre1 && Split == 1 && !NoDots && !Tail && XC == 0),
                "wait=flag: the plain ring (grid=fill, load=bulk) after xprep_wf_kernel, no other axis");
  static_assert(!Stamp || (L == Load::bulk && !XB && !Half && !XPf && !Held && !L2pf && !Pre1 && Split == 1 && !NoDots && !Tail && XC == 0 && !WF),
                "the stamp probe: the plain ring (grid=fill, load=bulk; depth and a prepared x are the launcher's)");
  constexpr int RS = R / Split;  // rows a thread takes of each group
  if constexpr (XB && XPf) prefetch_x_warp(x, int(threadIdx.x >> 5) * 32, k / ref::kQ4Block);  // xprep=launch: xprep_kernel prefetches
  int xc_j = 0, xc_first = 0, xc_mine = 0;  // XC: J, the member's first x block, how many it prepares
  if constexpr (XC > 0) {
    xc_j = (k / ref::kQ4Block + XC - 1) / XC;
    xc_first = int(cooperative_groups::this_cluster().block_rank()) * xc_j;
    xc_mine = max(0, min(xc_j, k / ref::kQ4Block - xc_first));
  }
  if constexpr (XC > 0 && XPf) {
    if (threadIdx.x == 0 && xc_mine > 0)
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(x + std::size_t(xc_first) * ref::kQ4Block),
                   "r"(unsigned(xc_mine) * unsigned(ref::kQ4Block * sizeof(float)))
                   : "memory");
  }
  if constexpr (!WF) asm volatile("griddepcontrol.launch_dependents;");  // WF: after its ticket
  extern __shared__ __align__(128) std::uint8_t ring[];  // S stages of plan.stage_bytes()
  __shared__ __align__(8) std::uint64_t full[kRingMaxStages];  // bulk: one mbarrier per stage
  __shared__ float part_s[Half ? 1 : 2][Half ? 1 : kMaxWarps][R];  // (parity, warp, row); Half: after the ring
  const int tid = threadIdx.x, lane = tid & 31;
  RingPlan plan;
  plan.W = int(blockDim.x >> 5) / Split;  // chunks of 32 blocks
  const int h = Split == 1 ? 0 : int(tid >> 5) / plan.W;  // the thread's share of the rows
  const int warp = Split == 1 ? int(tid >> 5) : int(tid >> 5) - h * plan.W;  // its chunk
  const int b = Split == 1 ? tid : warp * 32 + lane;  // its block of 32 weights
  const int nb = k / ref::kQ4Block;
  const bool active = b < nb;
  plan.R = R;
  plan.S = S;
  plan.grid = int(gridDim.x);
  plan.groups = (m + R - 1) / R;
  const int j = int(blockIdx.x);
  // Tail: the block's piece, its item tail_n (-1: none), its group and rows [tail_r0, tail_r1), found once.
  int tail_n = -1, tail_r0 = 0, tail_r1 = R;
  std::int64_t tail_group = 0;
  if constexpr (Tail) {
    plan.q = tail_pieces(plan.groups, plan.grid, R);
    if (plan.q > 1 && plan.items(j) > plan.rounds()) {
      tail_n = plan.rounds();
      tail_group = plan.group_at(j, tail_n);
      tail_r0 = plan.row0(j, tail_n);
      tail_r1 = tail_r0 + plan.rows_of(tail_n);
    }
  }
  const int mine = Tail ? plan.items(j) : plan.mine(j);
  auto group_n = [&](int n) -> std::int64_t { return Tail && n == tail_n ? tail_group : plan.group_of(j, n); };
  const int ring_n = Held && mine > S ? mine - 1 : mine;  // groups that go through the ring
  const unsigned stage_bytes = unsigned(plan.stage_bytes());
  const int code0 = plan.code_at(warp, lane, h * RS), sc0 = plan.scales_at(warp, lane) + 2 * h * RS;
  float* const part_d = reinterpret_cast<float*>(ring + std::size_t(S) * stage_bytes);  // Half: [2][W][R]
  auto part = [&](int par, int w, int r) -> float& {
    if constexpr (Half) return part_d[(par * plan.W + w) * R + r];
    else return part_s[par][w][r];
  };

  std::uint64_t policy = 0;
  if constexpr (L == Load::bulk) {
    if (tid == 0) {
      for (int s = 0; s < S; ++s) mbar_init(&full[s], 1);
      // The inits visible to the async proxy (the TMA unit) before any copy names the barriers.
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    }
    __syncthreads();
  }
  // Fills stage s with the block's n-th group (Tail: its n-th item, a group or a piece).
  auto fill = [&](int n, int s) {
    const std::uint8_t* src = packed + plan.group_offset(group_n(n));
    std::uint8_t* dst = ring + std::size_t(s) * stage_bytes;
    if (Tail && n == tail_n) {  // tile by tile: the piece's rows' codes, then the tile's scales
      if (tid == 0) {
        const unsigned codes = unsigned((tail_r1 - tail_r0) * (kChunk * 16)), scales = unsigned(R * (kChunk * 2));
        const int c0 = tail_r0 * (kChunk * 16);
        mbar_arrive_expect_tx(&full[s], unsigned(plan.piece_bytes()));
        for (int w = 0; w < plan.W; ++w) {
          const int t = w * plan.tile();
          bulk_g2s(dst + t + c0, src + t + c0, codes, &full[s], policy);
          bulk_g2s(dst + t + R * (kChunk * 16), src + t + R * (kChunk * 16), scales, &full[s], policy);
        }
      }
    } else if constexpr (L == Load::bulk) {
      if (tid == 0) {
        mbar_arrive_expect_tx(&full[s], stage_bytes);
        bulk_g2s(dst, src, stage_bytes, &full[s], policy);
      }
    } else {
      if (active) {
        for (int r = 0; r < R; ++r) cp_async16(dst + code0 + r * (kChunk * 16), src + code0 + r * (kChunk * 16));
        if constexpr (R == 8) cp_async16(dst + sc0, src + sc0);
        else cp_async8(dst + sc0, src + sc0);
      }
    }
  };
  auto prefetch_l2 = [&](int n) {  // L2pf: group n into L2
    if (tid == 0)
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(packed + plan.group_offset(plan.group_of(j, n))), "r"(stage_bytes) : "memory");
  };
  // The prologue: groups 0 .. S-1 (cp-async commits one group of copies per stage, empty or not,
  // so that "group n done" is always "at most S - 1 pending" at step n).
  for (int n = 0; n < (Pre1 ? 1 : S); ++n) {
    if (n < ring_n) fill(n, n);
    if constexpr (L == Load::cp_async) cp_async_commit();
  }
  if constexpr (L2pf) {
    for (int n = S; n < 2 * S && n < mine; ++n) prefetch_l2(n);
  }
  Buf<R> held;  // Held: group ring_n's codes and scales, when ring_n < mine
  if constexpr (Held) {
    if (ring_n < mine && active) load_group<R>(packed + plan.group_offset(plan.group_of(j, ring_n)) + code0, lane, held);
  }
  stamp.at(1);
  // g_xq (prepared by xprep_kernel, which waited for our predecessor) or x (XB) from here on.
  bool wf_self = false;  // WF: the counters out of step, every thread quantises its own block
  if constexpr (WF) {
    __shared__ unsigned s_wf_call;
    __shared__ int s_wf_self;
    __shared__ volatile unsigned s_wf_moved;
    if (tid == 0) {
      const unsigned long long old = atomicAdd(&g_wf_ctr, 1ull);
      // The volatile store needs the second atomic's result: performed before the barrier, so before our trigger.
      if (unsigned(old & 0xFFFFFFFFull) == gridDim.x - 1) s_wf_moved = unsigned(atomicAdd(&g_wf_ctr, (1ull << 32) - gridDim.x));
      s_wf_call = unsigned(old >> 32), s_wf_self = 0;
    }
    __syncthreads();
    asm volatile("griddepcontrol.launch_dependents;");
    if (tid == 0) {
      unsigned spins = 0;
      while (ld_acquire_gpu(&g_wf_pub) != s_wf_call + 1)
        if (++spins == kXfSpins) {
          s_wf_self = 1;
          break;
        }
    }
    __syncthreads();
    wf_self = s_wf_self != 0;
  } else {
    asm volatile("griddepcontrol.wait;" ::: "memory");
  }
  stamp.at(2);
  if constexpr (Pre1) {
    for (int n = 1; n < S && n < ring_n; ++n) fill(n, n);
  }
  uint4 xe = make_uint4(0, 0, 0, 0), xo = xe, cd = xe;
  if constexpr (NoDots) {
  } else if constexpr (XC > 0) {
    constexpr int kXs = (kMaxWarps * 32 + XC - 1) / XC;  // x blocks one member prepares, at most
    __shared__ uint4 xs_e[kXs], xs_o[kXs];
    __shared__ int2 xs_cd[kXs];
    const int sub = tid & 7;
    const unsigned group = 0xFFu << (lane & 24);  // the 8 lanes of one x block
    for (int jj = tid >> 3; jj < xc_mine; jj += int(blockDim.x) >> 3)  // uniform within the 8 lanes
      xc_block(x, xc_first + jj, sub, group, xs_e, xs_o, xs_cd, jj);
    // Not .aligned: the barriers sit after branches that may leave a warp diverged.
    asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
    if (active) {
      const cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
      const unsigned owner = unsigned(b / xc_j);
      const int jj = b - int(owner) * xc_j;
      xe = *cluster.map_shared_rank(&xs_e[jj], owner), xo = *cluster.map_shared_rank(&xs_o[jj], owner);
      const int2 c2 = *cluster.map_shared_rank(&xs_cd[jj], owner);
      cd = make_uint4(std::uint32_t(c2.x), std::uint32_t(c2.y), 0, 0);
    }
    // Our reads of the others' memory are done (release orders them before the arrive).
    asm volatile("barrier.cluster.arrive.release;" ::: "memory");
  } else if constexpr (XB) {
    if (active) q8_block_words(x, b, xe, xo, cd);  // = xprep_kernel<q8> for block b, kept in registers
  } else if (WF && wf_self) {
    if (active) {  // q8_prep's words, as xprep=block's
      const Q8X X = q8_prep_two_pass(reinterpret_cast<const float4*>(x) + std::size_t(b) * 8);
      xe = make_uint4(X.xe[0], X.xe[1], X.xe[2], X.xe[3]), xo = make_uint4(X.xo[0], X.xo[1], X.xo[2], X.xo[3]);
      cd = make_uint4(std::uint32_t(X.c), float_bits(X.d), 0, 0);
    }
  } else {
    if (active) xe = __ldcg(&g_xq[b]), xo = __ldcg(&g_xq[kXqStride + b]), cd = __ldcg(&g_xq[2 * kXqStride + b]);
  }
  const float d = __uint_as_float(cd.y);
  stamp.after(3, xe.x ^ xo.x ^ cd.y);

  int s = 0;
  unsigned parity = 0;
  for (int n = 0; n < mine; ++n) {
    const bool in_regs = Held && n == ring_n;  // the held group (the last step)
    const std::uint8_t* st = ring + std::size_t(s) * stage_bytes;
    if (!in_regs) {
      stamp.wait_begins();
      if constexpr (L == Load::bulk) mbar_wait(&full[s], parity);
      else cp_async_wait(S - 1);
      stamp.wait_ends();
      if (n == 0) stamp.at(4);
      if (n == mine - 1 && n > 0) stamp.at(6);
    }
    float p[RS];
    if (!NoDots && active) {
      Scales<RS> sc;
      if constexpr (Held) {
        if (in_regs) sc = held.s;
        else sc.v = *reinterpret_cast<const typename Scales<RS>::V*>(st + sc0);
      } else {
        sc.v = *reinterpret_cast<const typename Scales<RS>::V*>(st + sc0);
      }
      for (int r = 0; r < RS; ++r) {  // = packed_xl_kernel<q8>: row by row
        if (Tail && n == tail_n && (h * RS + r < tail_r0 || h * RS + r >= tail_r1)) {  // a piece: its rows alone
          p[r] = 0.f;
          continue;
        }
        uint4 q;
        if constexpr (Held) q = in_regs ? held.q[r] : *reinterpret_cast<const uint4*>(st + code0 + r * (kChunk * 16));
        else q = *reinterpret_cast<const uint4*>(st + code0 + r * (kChunk * 16));
        int se = int(cd.x), so = 0;
        for (int w = 0; w < 4; ++w) q8_word(word_of(q, w), word_of(xe, w), word_of(xo, w), se, so);
        p[r] = q8_finish(se, so, half_value(sc.get(r)), d);
      }
    } else {
      for (int r = 0; r < RS; ++r) p[r] = 0.f;
    }
    const float t = warp_rows<RS>(p, lane);
    if ((lane & (32 / RS - 1)) == 0) part(n & 1, warp, h * RS + lane / (32 / RS)) = t;
    // Every thread's reads of stage s are done (their values are in t): the stage may be refilled.
    // part[n & 1] is complete. part[n & 1] is written again at step n + 2, after the barrier of
    // step n + 1, which threads r < R reach only after reading it below.
    __syncthreads();
    if (n + S < ring_n) fill(n + S, s);
    if constexpr (L2pf) {
      if (n + 2 * S < mine) prefetch_l2(n + 2 * S);
    }
    if constexpr (L == Load::cp_async) cp_async_commit();
    if (Tail && n == tail_n ? tid >= tail_r0 && tid < tail_r1 : tid < R) {
      const std::int64_t row = group_n(n) * R + tid;
      if (row < m) {
        float sum = part(n & 1, 0, tid);
        for (int w = 1; w < plan.W; ++w) sum = add_rn(sum, part(n & 1, w, tid));
        y[row] = sum;
      }
    }
    if (n == 0) {
      stamp.at(5);
      if (mine == 1) stamp.at(6);  // one group: its bytes are the last too (the phase 5 -> 6 is empty)
    }
    if (++s == S) s = 0, parity ^= 1u;
  }
  stamp.finish();
  // cp-async: what is still committed at exit is empty (fills stop at mine); bulk: every issued
  // copy was waited for (fills stop at mine, each filled stage is consumed).
  if constexpr (XC > 0) asm volatile("barrier.cluster.wait.acquire;" ::: "memory");  // every member is done reading our memory
}

// ---- launching ----
KLAB_HD int warps_for(int k) { return (k / ref::kQ4Block + 31) / 32; }

std::string k_error(std::int64_t k) {
  if (k > std::int64_t(kMaxWarps) * 32 * ref::kQ4Block)
    return "k = " + std::to_string(k) + " exceeds map=packed's 32768 (one thread per block of 32, at most 1024 threads)";
  return "";
}

int sm_count() {
  static std::array<std::atomic<int>, 64> cache{};
  int dev = 0;
  KLAB_CUDA(cudaGetDevice(&dev));
  auto& c = cache[std::size_t(dev) % cache.size()];
  int n = c.load(std::memory_order_relaxed);
  if (n == 0) {
    KLAB_CUDA(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    c.store(n, std::memory_order_relaxed);
  }
  return n;
}

// Thread blocks of `warps` warps one SM holds at once (registers and threads permitting).
template <Form F, int R, bool XPf = false>
int blocks_per_sm(int warps) {
  static std::array<std::atomic<int>, kMaxWarps + 1> cache{};
  auto& c = cache[std::size_t(warps)];
  int n = c.load(std::memory_order_relaxed);
  if (n == 0) {
    KLAB_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, packed_kernel<F, R, XPf>, warps * 32, std::size_t(warps) * 32 * kXBytes<F>));
    if (n < 1) n = 1;
    c.store(n, std::memory_order_relaxed);
  }
  return n;
}

// wpf=l2: the bytes the prep kernel prefetches: all of the packed weights, at most half the L2.
long long wpf_bytes(long long bytes) {
  static std::array<std::atomic<long long>, 64> cache{};
  int dev = 0;
  KLAB_CUDA(cudaGetDevice(&dev));
  auto& c = cache[std::size_t(dev) % cache.size()];
  long long half = c.load(std::memory_order_relaxed);
  if (half == 0) {
    int l2 = 0;
    KLAB_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    half = std::max(1LL, static_cast<long long>(l2) / 2);
    c.store(half, std::memory_order_relaxed);
  }
  return std::min(bytes, half);
}

// Every map=packed launcher's refusals, before any CUDA call: the shape, k, null and misaligned buffers.
void check_launch(const std::uint8_t* packed, const float* x, const float* y, int m, int k) {
  if (auto why = launch_error(m, k); !why.empty()) throw Error("q4_gemv launch: " + why);
  if (auto why = k_error(k); !why.empty()) throw Error("q4_gemv launch: " + why);
  require(packed && x && y, "q4_gemv launch: a null buffer (the packed weights, x and y must all be device pointers)");
  require(reinterpret_cast<std::uintptr_t>(packed) % 16 == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0,
          "q4_gemv launch (map=packed): the packed weights and x must be 16-byte aligned");
}

template <Form F, int R, bool Fill, bool Pdl, bool XPf = false>
void launch_packed(const std::uint8_t* packed, const float* x, float* y, int m, int k, cudaStream_t stream) {
  check_launch(packed, x, y, m, k);
  const int W = warps_for(k);
  const long long groups = (static_cast<long long>(m) + R - 1) / R;
  long long grid = groups;
  if constexpr (Fill) grid = std::min<long long>(groups, static_cast<long long>(blocks_per_sm<F, R, XPf>(W)) * sm_count());
  const std::size_t smem = std::size_t(W) * 32 * kXBytes<F>;
  if (smem > 48 * 1024) {  // f16x2 beyond k = 24576: opt in once
    static std::once_flag once;
    std::call_once(once, [] { KLAB_CUDA(cudaFuncSetAttribute(packed_kernel<F, R, XPf>, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024)); });
  }
  launch_maybe_pdl(Pdl, packed_kernel<F, R, XPf>, dim3(unsigned(grid)), dim3(unsigned(W * 32)), smem, stream, packed, x, y, m, k);
  KLAB_CUDA_LAUNCH("packed_kernel");
}

// launch_prepared: the main kernel alone; its producer wrote g_xq (prepared_x.cuh).
template <int R, bool Pdl, bool Regs48 = false>
void launch_xl_prepared(const std::uint8_t* packed, const float* x, float* y, int m, int k, cudaStream_t stream) {
  check_launch(packed, x, y, m, k);
  launch_maybe_pdl(Pdl, xl_kernel<Form::q8, R, Regs48>(), dim3(unsigned((static_cast<long long>(m) + R - 1) / R)), dim3(unsigned(warps_for(k) * 32)), 0,
                   stream, packed, x, y, m, k);
  KLAB_CUDA_LAUNCH("packed_xl_kernel");
}

// xprep=launch's first kernel: x prepared into g_xq (xprep_kernel<F>, one thread per block of 32).
template <Form F, int R, bool Pdl, bool XPf, bool WPf>
void launch_xprep(const std::uint8_t* packed, const float* x, int m, int k, cudaStream_t stream) {
  const int nb = k / ref::kQ4Block;
  launch_maybe_pdl(Pdl, xprep_kernel<F, XPf, WPf>, dim3(unsigned((nb + 31) / 32)), dim3(32), 0, stream, x, nb, packed,
                   WPf ? wpf_bytes(Geometry{m, k, R}.bytes()) : 0LL);
  KLAB_CUDA_LAUNCH("xprep_kernel");
}

template <Form F, int R, bool Pdl, bool XPf = false, bool WPf = false, bool Regs48 = false>
void launch_xl(const std::uint8_t* packed, const float* x, float* y, int m, int k, cudaStream_t stream) {
  check_launch(packed, x, y, m, k);
  launch_xprep<F, R, Pdl, XPf, WPf>(packed, x, m, k, stream);
  launch_maybe_pdl(Pdl, xl_kernel<F, R, Regs48>(), dim3(unsigned((static_cast<long long>(m) + R - 1) / R)), dim3(unsigned(warps_for(k) * 32)), 0,
                   stream, packed, x, y, m, k);
  KLAB_CUDA_LAUNCH("packed_xl_kernel");
}

// parts=P (q8, PDL): the main kernel as P launches, part p over the groups [G p / P, G (p+1) / P) of the
// G = ceil(m / R); each part is packed_xl_kernel on the packed matrix of its rows (the run of groups from its
// first row's first tile: packed.hpp's Geometry::code_offset) and y from its first row, so every row gets
// rung 10's bits.
// Each part waits for the launch before it (the part before, or the prep): it passes its wait only
// after that one completed, which passed its own wait only after the x producer did, so x and g_xq
// are ready for every part, and a consumer of y that waits for the last part finds every row stored.
// Prepared: without the prep launch (launch_prepared, g_xq written by the producer).
template <int R, int Parts, bool Prepared>
void launch_xl_parts(const std::uint8_t* packed, const float* x, float* y, int m, int k, cudaStream_t stream) {
  check_launch(packed, x, y, m, k);
  if constexpr (!Prepared) launch_xprep<Form::q8, R, true, false, false>(packed, x, m, k, stream);
  const Geometry geo{m, k, R};
  for (int p = 0; p < Parts; ++p) {
    const long long g0 = geo.groups() * p / Parts, g1 = geo.groups() * (p + 1) / Parts;
    if (g1 == g0) continue;  // fewer groups than parts
    const long long row0 = g0 * R, rows = std::min<long long>(m, g1 * R) - row0;
    launch_maybe_pdl(true, xl_kernel<Form::q8, R, false>(), dim3(unsigned(g1 - g0)), dim3(unsigned(warps_for(k) * 32)), 0, stream,
                     packed + geo.code_offset(row0, 0), x, y + row0, int(rows), k);
    KLAB_CUDA_LAUNCH("packed_xl_kernel");
  }
}

// launch_packed_rows: the kernel's own prep launch (Warps > 0, xprep=warps|warp: xprep_warps_kernel<Warps>;
// 0, xprep=launch: xprep_kernel<q8>), then the main kernel with the m32 f32 rows (packed_xl_rows_kernel).
template <int R, bool Pdl, int Warps>
void launch_xl_rows(const std::uint8_t* packed, const float* x, float* y, int m, int k, const float* w32, float* y32, int m32, cudaStream_t stream) {
  check_launch(packed, x, y, m, k);
  require(w32 && y32 && m32 >= 1, "q4_gemv launch_packed_rows: the f32 rows need W32, y32 and m32 >= 1");
  require(reinterpret_cast<std::uintptr_t>(w32) % 16 == 0, "q4_gemv launch_packed_rows: W32 must be 16-byte aligned (float4 loads)");
  require(!(y32 < y + m && y < y32 + m32), "q4_gemv launch_packed_rows: y32 overlaps y");
  const int nb = k / ref::kQ4Block, groups = (m + R - 1) / R;
  launch_q8_prep<Pdl, Warps>(x, nb, packed, stream);
  launch_maybe_pdl(Pdl, packed_xl_rows_kernel<R>, dim3(unsigned(groups + m32)), dim3(unsigned(warps_for(k) * 32)), 0, stream, packed, x, y, m, k, w32, y32);
  KLAB_CUDA_LAUNCH("packed_xl_rows_kernel");
}

// grid=groups,xprep=warps|warp: xprep_warps_kernel<WPB>, then the main kernel of xprep=launch.
template <int R, bool Pdl, int WPB>
void launch_xw(const std::uint8_t* packed, const float* x, float* y, int m, int k, cudaStream_t stream) {
  check_launch(packed, x, y, m, k);
  launch_xprep_warps<Pdl, WPB>(x, k / ref::kQ4Block, stream);
  launch_xl_prepared<R, Pdl>(packed, x, y, m, k, stream);
}

// grid=groups,xprep=warp,wpf=lines: xprep_warp_lines_kernel, then the main kernel of xprep=launch.
template <int R, bool Pdl>
void launch_xw_lines(const std::uint8_t* packed, const float* x, float* y, int m, int k, cudaStream_t stream) {
  check_launch(packed, x, y, m, k);
  const int nb = k / ref::kQ4Block;
  launch_maybe_pdl(Pdl, xprep_warp_lines_kernel, dim3(unsigned(nb)), dim3(32u), 0, stream, x, nb, packed, wpf_bytes(Geometry{m, k, R}.bytes()));
  KLAB_CUDA_LAUNCH("xprep_warp_lines_kernel");
  launch_xl_prepared<R, Pdl>(packed, x, y, m, k, stream);
}

// The launch of `grid` blocks of W warps in clusters of C, with the PDL attribute when Pdl.
struct ClusterLaunch {
  cudaLaunchConfig_t cfg{};
  cudaLaunchAttribute attr[2]{};
  ClusterLaunch(int grid, int W, std::size_t smem, int C, bool pdl, cudaStream_t stream) {
    cfg.gridDim = dim3(unsigned(grid));
    cfg.blockDim = dim3(unsigned(W * 32));
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = unsigned(C);
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[1].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 2 : 1;
  }
};
// grid=groups,xprep=cluster: one launch, clusters of kXcCluster blocks (cudaLaunchKernelEx with the
// cluster dimension, and the PDL attribute when Pdl); the grid is the groups rounded up to a whole
// number of clusters.
template <int R, bool Pdl>
void launch_xc(const std::uint8_t* packed, const float* x, float* y, int m, int k, cudaStream_t stream) {
  check_launch(packed, x, y, m, k);
  const long long groups = (static_cast<long long>(m) + R - 1) / R;
  ClusterLaunch l(int((groups + kXcCluster - 1) / kXcCluster * kXcCluster), warps_for(k), 0, kXcCluster, Pdl, stream);
  KLAB_CUDA(cudaLaunchKernelEx(&l.cfg, packed_xc_kernel<R>, packed, x, y, m, k));
  KLAB_CUDA_LAUNCH("packed_xc_kernel");
}

// grid=groups,xprep=flag: one launch; P = the blocks that prepare x (a pass of 8 threads per block of
// 32 each, at most the grid).
template <int R, bool Pdl>
void launch_xf(const std::uint8_t* packed, const float* x, float* y, int m, int k, cudaStream_t stream) {
  check_launch(packed, x, y, m, k);
  const long long groups = (static_cast<long long>(m) + R - 1) / R;
  const int threads = warps_for(k) * 32, nb = k / ref::kQ4Block;
  const int P = int(std::min<long long>(groups, (nb + threads / 8 - 1) / (threads / 8)));
  launch_maybe_pdl(Pdl, packed_xf_kernel<R>, dim3(unsigned(groups)), dim3(unsigned(threads)), 0, stream, packed, x, y, m, k, P);
  KLAB_CUDA_LAUNCH("packed_xf_kernel");
}

template <int R, int C, bool Pdl>
void launch_warp(const std::uint8_t* packed, const float* x, float* y, int m, int k, cudaStream_t stream) {
  check_launch(packed, x, y, m, k);
  const int nb = k / ref::kQ4Block;
  const long long groups = (static_cast<long long>(m) + R - 1) / R;
  launch_q8_prep<Pdl>(x, nb, packed, stream);
  launch_maybe_pdl(Pdl, packed_warp_kernel<R, C>, dim3(unsigned((groups + kWarpBlockWarps - 1) / kWarpBlockWarps)),
                   dim3(unsigned(kWarpBlockWarps * 32)), 0, stream, packed, y, m, k);
  KLAB_CUDA_LAUNCH("packed_warp_kernel");
}

// Warps of Kernel resident an SM in blocks of block_warps warps with smem bytes of dynamic shared memory
// (the occupancy query, once per kernel: the lab uses one device per process).
template <auto Kernel>
int resident_warps_of(int block_warps, std::size_t smem = 0) {
  static std::atomic<int> cache{0};
  int n = cache.load(std::memory_order_relaxed);
  if (n == 0) {
    KLAB_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, Kernel, block_warps * 32, smem));
    cache.store(n, std::memory_order_relaxed);
  }
  return n * block_warps;
}
template <int R, int C>
int resident_warps_warp() {
  return resident_warps_of<packed_warp_kernel<R, C>>(kWarpBlockWarps);
}
// The grid=groups kernels at k = 5120 (their block: one thread per block of 32 weights).
template <Form F, int R, bool Regs48 = false>
int resident_warps_xl() {
  return resident_warps_of<xl_kernel<F, R, Regs48>()>(warps_for(5120));
}
template <int R>
int resident_warps_xc() {
  return resident_warps_of<packed_xc_kernel<R>>(warps_for(5120));
}
template <int R>
int resident_warps_xf() {
  return resident_warps_of<packed_xf_kernel<R>>(warps_for(5120));
}

// ---- load=bulk | cp-async: the ring's launcher ----
// Opts the ring kernel into up to kRingMaxSmem of dynamic shared memory and the largest shared
// memory carveout (two 92 KB blocks per SM), once per kernel (the lab uses one device per process).
// The grid=fill ring kernel with Split threads per block of 32 weights (row-split; Split = 1: none); XB
// (xprep=block): x quantised by each thread after the wait, prefetched into L2 by the kernel itself with XPf;
// NoDots: the ring read probe (launch_ring_probe); Tail: tail=split; WF: wait=flag.
template <int R, Load L, int Split = 1, bool XB = false, bool XPf = false, bool NoDots = false, bool Tail = false, bool WF = false, bool Stamp = false>
constexpr auto ring_kernel = packed_ring_kernel<R, L, XB, false, XB && XPf, false, false, false, Split, NoDots, Tail, 0, WF, Stamp>;
// row-split=Split takes Split x warps_for(k) warps a block, at most kMaxWarps: larger k runs Split = 1 (the same bits).
static_assert(split_in_use(2, kMaxWarps / 2) == 2 && split_in_use(2, kMaxWarps / 2 + 1) == 1, "split_in_use's bound is kMaxWarps");
template <int Split>
bool split_fits(int k) {
  return split_in_use(Split, warps_for(k)) == Split;
}
// Opts a ring-shaped kernel into kRingMaxSmem of dynamic shared memory and the largest carveout, once per kernel.
template <auto Kernel>
void opt_into_ring_smem() {
  static std::once_flag once;
  std::call_once(once, [] {
    KLAB_CUDA(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kRingMaxSmem));
    KLAB_CUDA(cudaFuncSetAttribute(Kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  });
}
// Blocks one SM holds of a ring-shaped kernel (its dynamic shared memory the ring's stages of `warps` chunks of R rows)
// at `threads` threads a block, after opting the kernel in (opt_into_ring_smem); cached per kernel and warps (a kernel's
// block size is a function of its warps).
template <auto Kernel, int R>
int ring_occupancy(int warps, int threads) {
  opt_into_ring_smem<Kernel>();
  static std::array<std::atomic<int>, kMaxWarps + 1> cache{};
  auto& c = cache[std::size_t(warps)];
  int n = c.load(std::memory_order_relaxed);
  if (n == 0) {
    const RingPlan plan{warps, R, ring_stages(warps, R)};
    KLAB_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, Kernel, threads, std::size_t(plan.S) * plan.stage_bytes()));
    if (n < 1) n = 1;
    c.store(n, std::memory_order_relaxed);
  }
  return n;
}
// The ring's blocks an SM (Split warps a chunk: Split * warps * 32 threads a block).
template <int R, Load L, int Split = 1, bool XB = false, bool XPf = false, bool NoDots = false, bool Tail = false, bool WF = false, bool Stamp = false>
int ring_blocks_per_sm(int warps) {
  return ring_occupancy<ring_kernel<R, L, Split, XB, XPf, NoDots, Tail, WF, Stamp>, R>(warps, Split * warps * 32);
}
template <int R, Load L, int Split = 1, bool XB = false, bool XPf = false, bool Tail = false, bool WF = false>
int resident_warps_ring() {
  return ring_blocks_per_sm<R, L, Split, XB, XPf, false, Tail, WF>(warps_for(5120)) * Split * warps_for(5120);
}

// XB (xprep=block): no prep kernel; the ring kernel quantises x itself (one launch a call). NoDots (the probe):
// no prep kernel either, and x is never read. Tail: tail=split (the grid and stages as without it).
// Prepared: launch_prepared (prepared_x.cuh), the ring kernel alone on the x its producer wrote into g_xq.
// WF: wait=flag, xprep_wf_kernel then the ring kernel that polls its flag instead of waiting for its completion.
// Depth (depth=D, D > 0): the kernel fills at most D of the stages its shared memory holds; the request stays
// ring_stages' S stages, so the grid and the residency are the ring's and only the bytes in flight a block change.
// Late (trigger=late): the prep kernel lets the main kernel go once its x is in (xprep_kernel's Late).
// Stamp: the stamp probe's ring kernel (launch_q4_stamped), on the grid of the ring without stamps.
// Warps (xprep=warps|warp: 8 or 1): the prep launch is xprep_warps_kernel<Warps> (a warp a block of 32: xprep_kernel's
// words), not xprep_kernel (a thread a block).
template <int R, Load L, bool Pdl, bool XPf = false, bool WPf = false, int Split = 1, bool XB = false, bool NoDots = false, bool Tail = false,
          bool Prepared = false, bool WF = false, int Depth = 0, bool Late = false, bool Stamp = false, int Warps = 0>
void launch_ring(const std::uint8_t* packed, const float* x, float* y, int m, int k, cudaStream_t stream) {
  static_assert(Warps == 0 || ((Warps == 8 || Warps == 1) && !XPf && !WPf && !XB && !NoDots && !Late && !WF),
                "xprep=warps|warp: the prep launch without prefetches, trigger=late or wait=flag (xprep_warps_kernel has none)");
  static_assert(!Late || (Pdl && !XB && !NoDots && !Prepared && !WF), "trigger=late: a PDL prep launch (xprep=launch) to move the trigger of");
  static_assert(!((XB || NoDots) && WPf), "xprep=block and the probe have no prep kernel to prefetch the weights");
  static_assert(!(Prepared && (XB || NoDots || XPf || WPf)), "a prepared x: the main kernel of xprep=launch alone, nothing to prefetch");
  static_assert(!WF || (Pdl && L == Load::bulk && !XPf && !WPf && Split == 1 && !XB && !NoDots && !Tail && !Prepared),
                "wait=flag: the plain ring with PDL (its flag replaces the wait for the prep launch)");
  if constexpr (Split > 1) {
    if (!split_fits<Split>(k)) return launch_ring<R, L, Pdl, XPf, WPf, 1, XB, NoDots, Tail, Prepared, false, Depth, Late, Stamp, Warps>(packed, x, y, m, k, stream);
  }
  check_launch(packed, x, y, m, k);
  const int W = warps_for(k), nb = k / ref::kQ4Block;
  RingPlan plan{W, R, ring_stages(W, R)};
  plan.groups = int((static_cast<long long>(m) + R - 1) / R);
  plan.grid = int(std::min<long long>(plan.groups, static_cast<long long>(ring_blocks_per_sm<R, L, Split, XB, XPf, NoDots, Tail, WF>(W)) * sm_count()));
  if constexpr (WF) {
    launch_maybe_pdl(true, xprep_wf_kernel, dim3(unsigned((nb * 8 + kWfPrepThreads - 1) / kWfPrepThreads)), dim3(unsigned(kWfPrepThreads)), 0, stream, x, nb);
    KLAB_CUDA_LAUNCH("xprep_wf_kernel");
  } else if constexpr (!XB && !NoDots && !Prepared && Warps > 0) {
    launch_xprep_warps<Pdl, Warps>(x, nb, stream);
  } else if constexpr (!XB && !NoDots && !Prepared) {
    launch_maybe_pdl(Pdl, xprep_kernel<Form::q8, XPf, WPf, Late>, dim3(unsigned((nb + 31) / 32)), dim3(32), 0, stream, x, nb, packed,
                     WPf ? wpf_bytes(Geometry{m, k, R}.bytes()) : 0LL);
    KLAB_CUDA_LAUNCH("xprep_kernel");
  }
  const int stages = Depth > 0 ? std::min(plan.S, Depth) : plan.S;
  if constexpr (Stamp) {
    const int stamped = ring_blocks_per_sm<R, L, Split, XB, XPf, NoDots, Tail, WF, true>(W), plain = ring_blocks_per_sm<R, L, Split, XB, XPf, NoDots, Tail, WF>(W);
    require(stamped == plain, "the stamp probe's ring kernel fits " + std::to_string(stamped) + " blocks an SM, the ring " + std::to_string(plain) +
                                  ": its launches would not be the ring's");
  }
  launch_maybe_pdl(Pdl, ring_kernel<R, L, Split, XB, XPf, NoDots, Tail, WF, Stamp>, dim3(unsigned(plan.grid)), dim3(unsigned(Split * W * 32)), std::size_t(plan.S) * plan.stage_bytes(),
                   stream, packed, x, y, m, k, stages);
  KLAB_CUDA_LAUNCH("packed_ring_kernel");
}

// ---- grid=fill,pace=P: the ring fed by a producer warp, at most P stage requests in flight a block ----
// Why (2026-12-05, sixth session, written without a device): the ring's blocks request their first S stages at once
// (rung 11: 4 x 23 KB a block, 2 blocks an SM at k = 5120) and depth=D caps the stages; at the 17.7 MB shapes depth=2
// beat the ring by x1.08..x1.13 and depth=3 did not (H200, run-4a53b8f), and `klab probe-hop` puts a dependent L2 load
// at ~390 ns beside 32-64 KB an SM in flight but ~790 ns beside 128 KB, a grid's hop at ~1.55 us against 8 us: the
// bytes in flight at the release are paid for by the chain's critical accesses (the prep's x read, the main kernel's,
// the grid completions), while the read rate stops growing at ~32 KB an SM. Here the ring keeps its S stages of
// buffer but its requests are paced: one warp of the block (the producer, its lane 0) issues stage n only once stage
// n - P has arrived (at most P requests in flight a block) and, from n = S on, once the consumers have released the
// stage (an `empty` mbarrier each); it never waits for the predecessor (it reads nothing one writes), so before the
// release it fills the buffer at the pace the memory returns bytes, not in a burst. The W consumer warps are the
// ring's: griddepcontrol.wait, x from g_xq, each group as packed_ring_kernel forms it (the same values in the same
// order: the ring's bits), a named barrier over the consumers in place of __syncthreads, then one arrive on the
// stage's `empty`. Registered pace=1 and pace=2 (46 or 92 KB an SM in flight at most at k = 5120). k > 31744 (32
// consumer warps and the producer would pass 1024 threads) runs the ring itself (launch_paced), the same bits.
// ilp=G (G > 1): the consumers take G stages a step once all G are full (fewer at the end, and 1 when the ring holds
// fewer than G stages), each thread forming the G groups' rows as independent chains, then G transposed butterflies, one
// named barrier, G `empty` arrivals and the G groups' rows stored by threads r < G R. Every group's values and order are
// the ring's (so its bits); only how many groups share a step changes. A step's G chains need more registers than the
// launch bound of 1024 threads allows (64): the kernel is bound to kPacedIlpThreads, and its launcher takes it only up to
// that many consumers and the producer (k <= 15360 at 512 threads), else G = 1's kernel (the same bits).
constexpr int kPacedIlpThreads = 512;
// row-split=Split (Split > 1): each block of 32 weights over Split threads, each taking R / Split of a group's rows (Split W
// consumer warps, the ring's Split: the same bits), on ilp=G's path and bound.
template <int G, int Split = 1>
constexpr int paced_bound() { return G == 1 && Split == 1 ? kMaxWarps * 32 : kPacedIlpThreads; }
// rows=R: R rows a group (8, or 4: stages of half the bytes, twice the groups; the ring's layout and bits at R).
// pace=P-PA (PA > 0): P requests in flight a block until the block's consumers have passed griddepcontrol.wait (thread 0
// sets a shared flag after it), PA from then on; the producer reads the flag before each request. The arithmetic is
// untouched (the ring's bits).
// Stamp: the stamp probe's paced kernel (launch_q4_stamped, StampGrid::paced; G = Split = 1 only): the ring's points,
// thread 0 being the first consumer (1: the consumers at their wait, the producer's first request issued or on its way).
// defer=D (D > 0; G = Split = 1, no Stamp): each consumer warp releases a stage itself (its lane 0 arrives on `empty`,
// whose count is then the W consumer warps) once its codes and scales are in registers, before its dots; the warps'
// row totals of a window of D groups go to part[] and the cross-warp sums (in warp order: the ring's bits) follow one
// named barrier a window, by the threads of warp 0 (D R <= 32), instead of one barrier and one sum a group. Its part[]
// holds kDeferMaxWarps warps (static shared memory within what kRingMaxSmem leaves a block): launch_paced runs D = 0's
// kernel (the same bits) for more consumer warps (k > 16384). "In registers" is enforced since 2026-12-06: the release
// takes the xor of every loaded word over the warp (mbar_arrive_after), where before it followed the loads' issue only
// (a race the GDN step's replays caught with rung 110; every defer figure measured before then had that release).
constexpr int kDeferMaxWarps = 16;
// RestL2 (rest=l2): once the producer has requested the ring's first S groups (its last request before it must wait for
// a stage to be released), it asks the L2 for the block's remaining groups (cp.async.bulk.prefetch.L2, a hint: nothing
// waits on it), so that their refills after the release read the L2. The arithmetic is untouched (the ring's bits).
template <int P, bool XB = false, int G = 1, int Split = 1, int R = 8, int PA = 0, bool Stamp = false, int D = 0, bool RestL2 = false>
__global__ void __launch_bounds__(paced_bound<G, Split>())
packed_paced_kernel(const std::uint8_t* __restrict__ packed, float* __restrict__ y, int m, int k, int S, const float* __restrict__ x) {
  static_assert(P >= 1 && P <= kRingMaxStages);
  static_assert(G >= 1 && G <= kRingMaxStages);
  static_assert(Split == 1 || Split == 2 || Split == 4);
  static_assert(R == 8 || R == 4);
  static_assert(PA >= 0 && PA <= kRingMaxStages);
  static_assert(!Stamp || (G == 1 && Split == 1), "the stamp probe's paced kernel: one stage a step, no row-split");
  static_assert(D == 0 || (G == 1 && Split == 1 && !Stamp && D * R <= 32), "defer=D: one stage a step, no row-split, no stamps, D R <= 32");
  constexpr int RS = R / Split;
  Q4Stamper<Stamp> stamp;
  stamp.start(packed);
  asm volatile("griddepcontrol.launch_dependents;");
  extern __shared__ __align__(128) std::uint8_t ring[];  // S stages of plan.stage_bytes()
  __shared__ __align__(8) std::uint64_t full[kRingMaxStages], empty[kRingMaxStages];
  // (parity, group of the step, warp, row); defer=D: (parity D + group of the window, 0, warp, row)
  __shared__ float part[D > 0 ? 2 * D : 2][G][D > 0 ? kDeferMaxWarps : kMaxWarps][R];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  RingPlan plan;
  plan.W = (int(blockDim.x >> 5) - 1) / Split;  // chunks of 32 blocks (Split consumer warps each); the last warp produces
  plan.R = R;
  plan.S = S;
  plan.grid = int(gridDim.x);
  plan.groups = (m + R - 1) / R;
  const int j = int(blockIdx.x), mine = plan.mine(j);
  const unsigned stage_bytes = unsigned(plan.stage_bytes());
  __shared__ volatile int released;  // PA > 0: the consumers have passed their wait
  if (tid == 0) {
    for (int s = 0; s < S; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], D > 0 ? unsigned(plan.W) : 1u);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    if constexpr (PA > 0) released = 0;
  }
  __syncthreads();
  if (warp == plan.W * Split) {  // the producer
    if (lane == 0) {
      std::uint64_t policy;
      asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
      for (int n = 0; n < mine; ++n) {
        const int s = n % S;
        int pace = P;
        if constexpr (PA > 0) pace = released ? PA : P;
        const PaceWaits pw = pace_waits(n, S, pace);  // packed_ring.hpp: the stage's last use read, request n - pace arrived
        if (pw.empty) mbar_wait(&empty[pw.empty_stage], pw.empty_parity);
        if (pw.full) mbar_wait(&full[pw.full_stage], pw.full_parity);
        mbar_arrive_expect_tx(&full[s], stage_bytes);
        bulk_g2s(ring + std::size_t(s) * stage_bytes, packed + plan.group_offset(plan.group_of(j, n)), stage_bytes, &full[s], policy);
        if constexpr (RestL2) {
          if (n == S - 1)
            for (int r = S; r < mine; ++r)
              asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(packed + plan.group_offset(plan.group_of(j, r))), "r"(stage_bytes) : "memory");
        }
      }
    }
    return;  // the consumers wait for every stage it requested before they exit
  }
  stamp.at(1);
  asm volatile("griddepcontrol.wait;" ::: "memory");  // g_xq comes from the prep kernel, which waited for our predecessor
  stamp.at(2);
  if constexpr (PA > 0) {
    if (tid == 0) released = 1;
  }
  const int h = Split == 1 ? 0 : warp / plan.W;          // the thread's share of the rows
  const int cw = Split == 1 ? warp : warp - h * plan.W;  // its chunk
  const int b = Split == 1 ? tid : cw * 32 + lane, nb = k / ref::kQ4Block;  // its block of 32 weights
  const bool active = b < nb;
  const int code0 = plan.code_at(cw, lane, h * RS), sc0 = plan.scales_at(cw, lane) + 2 * h * RS;
  uint4 xe = make_uint4(0, 0, 0, 0), xo = xe, cd = xe;
  if constexpr (XB) {
    if (active) q8_block_words(x, b, xe, xo, cd);  // xprep=block, as packed_ring_kernel's XB
  } else {
    if (active) xe = __ldcg(&g_xq[b]), xo = __ldcg(&g_xq[kXqStride + b]), cd = __ldcg(&g_xq[2 * kXqStride + b]);
  }
  const float d = __uint_as_float(cd.y);
  stamp.after(3, xe.x ^ xo.x ^ cd.y);
  const unsigned consumers = unsigned(Split * plan.W) * 32u;
  if constexpr (G == 1 && Split == 1 && D == 0) {  // the loop as before ilp= (its SASS unchanged)
    for (int n = 0; n < mine; ++n) {
      const int s = n % S;
      stamp.wait_begins();
      mbar_wait(&full[s], unsigned((n / S) & 1));
      stamp.wait_ends();
      if (n == 0) stamp.at(4);
      if (n == mine - 1 && n > 0) stamp.at(6);
      const std::uint8_t* st = ring + std::size_t(s) * stage_bytes;
      float p[R];
      if (active) {
        Scales<R> sc;
        sc.v = *reinterpret_cast<const typename Scales<R>::V*>(st + sc0);
        for (int r = 0; r < R; ++r) {  // = packed_ring_kernel's rows
          const uint4 q = *reinterpret_cast<const uint4*>(st + code0 + r * (kChunk * 16));
          int se = int(cd.x), so = 0;
          for (int w = 0; w < 4; ++w) q8_word(word_of(q, w), word_of(xe, w), word_of(xo, w), se, so);
          p[r] = q8_finish(se, so, half_value(sc.get(r)), d);
        }
      } else {
        for (int r = 0; r < R; ++r) p[r] = 0.f;
      }
      const float t = warp_rows<R>(p, lane);
      if ((lane & (32 / R - 1)) == 0) part[n & 1][0][warp][lane / (32 / R)] = t;
      // Every consumer's reads of stage s are done and part[n & 1] is complete (as the ring's __syncthreads).
      asm volatile("bar.sync 1, %0;" ::"r"(consumers) : "memory");
      if (tid == 0) mbar_arrive(&empty[s]);
      if (tid < R) {
        const std::int64_t row = plan.group_of(j, n) * R + tid;
        if (row < m) {
          float sum = part[n & 1][0][0][tid];
          for (int w = 1; w < plan.W; ++w) sum = add_rn(sum, part[n & 1][0][w][tid]);
          y[row] = sum;
        }
      }
      if (n == 0) {
        stamp.at(5);
        if (mine == 1) stamp.at(6);  // one group: its bytes are the last too
      }
    }
    stamp.finish();
  } else if constexpr (D > 0) {
    const std::uint32_t zero = std::uint32_t(S) >> 16;  // 0 (S <= kRingMaxStages), unknown to the compiler
    for (int n = 0; n < mine; ++n) {
      const int s = n % S;
      mbar_wait(&full[s], unsigned((n / S) & 1));
      const std::uint8_t* st = ring + std::size_t(s) * stage_bytes;
      Buf<R> buf;
      std::uint32_t dep = 0;  // the words this thread loaded, folded: its release waits for them (mbar_arrive_after)
      if (active) {
        buf.s.v = *reinterpret_cast<const typename Scales<R>::V*>(st + sc0);
        for (int r = 0; r < R; ++r) buf.q[r] = *reinterpret_cast<const uint4*>(st + code0 + r * (kChunk * 16));
        for (int r = 0; r < R; ++r) dep ^= buf.q[r].x ^ buf.q[r].y ^ buf.q[r].z ^ buf.q[r].w;
        for (int i = 0; i < int(sizeof(buf.s.v) / 4); ++i) dep ^= reinterpret_cast<const std::uint32_t*>(&buf.s.v)[i];
      }
      // Every lane's loads of stage s have completed (the xor over the warp consumes them all, and lane 0's arrive, a
      // release, takes the result): the producer may refill it.
      dep = __reduce_xor_sync(0xffffffffu, dep) & zero;
      if (lane == 0) mbar_arrive_after(&empty[s], dep);
      float p[R];
      if (active) {
        q8_rows<R>(buf, xe, xo, int(cd.x), d, p);  // = packed_ring_kernel's rows
      } else {
        for (int r = 0; r < R; ++r) p[r] = 0.f;
      }
      const float t = warp_rows<R>(p, lane);
      const int half = ((n / D) & 1) * D;
      if ((lane & (32 / R - 1)) == 0) part[half + n % D][0][warp][lane / (32 / R)] = t;
      if (n % D == D - 1 || n == mine - 1) {
        // The window's part[half ..] is complete. It is written again two windows on, after the next window's barrier,
        // which warp 0 passes only after reading it below.
        asm volatile("bar.sync 1, %0;" ::"r"(consumers) : "memory");
        const int first = n - n % D;
        if (tid < (n - first + 1) * R) {
          const int i = tid / R, r = tid % R;
          const std::int64_t row = plan.group_of(j, first + i) * R + r;
          if (row < m) {
            float sum = part[half + i][0][0][r];
            for (int w = 1; w < plan.W; ++w) sum = add_rn(sum, part[half + i][0][w][r]);
            y[row] = sum;
          }
        }
      }
    }
  } else {
    // ilp=G: the producer requests group n + G - 1 only after the group n + G - 1 - S of an earlier step released its stage:
    // G stages a step need S >= G.
    const int step = S >= G ? G : 1;
    for (int n = 0, par = 0; n < mine; n += step, par ^= 1) {
      const int g = mine - n < step ? mine - n : step;  // groups this step
      float p[G][RS];
      for (int i = 0; i < G; ++i) {
        if (i >= g) break;
        const int s = (n + i) % S;
        mbar_wait(&full[s], unsigned(((n + i) / S) & 1));
      }
      // The rows of the step's groups from their stages (= packed_ring_kernel's rows), `gs` groups at once,
      // straight-line, so that their chains interleave; the rest zero.
      auto dots = [&](auto gs) {
        constexpr int Gs = decltype(gs)::value;
        const std::uint8_t* st[Gs];
        Scales<RS> sc[Gs];
#pragma unroll
        for (int i = 0; i < Gs; ++i) {
          st[i] = ring + std::size_t((n + i) % S) * stage_bytes;
          sc[i].v = *reinterpret_cast<const typename Scales<RS>::V*>(st[i] + sc0);
        }
#pragma unroll
        for (int r = 0; r < RS; ++r) {
          uint4 q[Gs];
#pragma unroll
          for (int i = 0; i < Gs; ++i) q[i] = *reinterpret_cast<const uint4*>(st[i] + code0 + r * (kChunk * 16));
#pragma unroll
          for (int i = 0; i < Gs; ++i) {
            int se = int(cd.x), so = 0;
            for (int w = 0; w < 4; ++w) q8_word(word_of(q[i], w), word_of(xe, w), word_of(xo, w), se, so);
            p[i][r] = q8_finish(se, so, half_value(sc[i].get(r)), d);
          }
        }
      };
#pragma unroll
      for (int i = 0; i < G; ++i)
        for (int r = 0; r < RS; ++r) p[i][r] = 0.f;
      if (active)  // g of them at once (the last step may have fewer than G)
        [&]<int... I>(std::integer_sequence<int, I...>) {
          ((g == I + 1 ? dots(std::integral_constant<int, I + 1>{}) : void()), ...);
        }(std::make_integer_sequence<int, G>{});
#pragma unroll
      for (int i = 0; i < G; ++i) {
        const float t = warp_rows<RS>(p[i], lane);
        if ((lane & (32 / RS - 1)) == 0) part[par][i][cw][h * RS + lane / (32 / RS)] = t;
      }
      // Every consumer's reads of the step's stages are done and part[par] is complete (as the ring's __syncthreads);
      // part[par] is written again two steps on, after the next step's barrier, which threads < G R pass only after
      // reading it below.
      asm volatile("bar.sync 1, %0;" ::"r"(consumers) : "memory");
      if (tid == 0)
        for (int i = 0; i < g; ++i) mbar_arrive(&empty[(n + i) % S]);
      if (tid < g * R) {
        const int i = tid / R, r = tid % R;
        const std::int64_t row = plan.group_of(j, n + i) * R + r;
        if (row < m) {
          float sum = part[par][i][0][r];
          for (int w = 1; w < plan.W; ++w) sum = add_rn(sum, part[par][i][w][r]);
          y[row] = sum;
        }
      }
    }
  }
}

// pace=P's blocks an SM: the ring's stages and one producer warp beside the warps chunks.
// (ring_occupancy also opts the kernel into the ring's shared memory: every launched kernel asks it once.)
template <int P, bool XB = false, int G = 1, int Split = 1, int R = 8, int PA = 0, bool Stamp = false, int D = 0, bool RestL2 = false>
int paced_blocks_per_sm(int warps) {
  return ring_occupancy<packed_paced_kernel<P, XB, G, Split, R, PA, Stamp, D, RestL2>, R>(warps, (Split * warps + 1) * 32);
}
// per-sm=PerSm's blocks an SM where `fit` fit (PerSm = 0: all of them).
template <int PerSm>
constexpr int per_sm_of(int fit) { return PerSm > 0 && PerSm < fit ? PerSm : fit; }
// per-sm=N past 2 (kSharedPerSm and up): the ring's stages shrink so that N blocks share an SM. Why (Nsight Compute on an H100,
// reports/h100/run-span/ncu, 2026-12-06): the paced kernels alone are consumer-bound, rung 85's stacked kernel at 2.93 warps
// a scheduler, 0.27 of them eligible, 70.6% of the DRAM's peak; a third block an SM brings its consumer warps and its own
// chain of groups. The stages: as many of `stage` bytes as an SM's shared memory holds for N blocks (less each block's
// reserved and static shared memory), at most `most` (ring_stages'), at least 1. Returns {stages, blocks an SM that fit}.
constexpr int kSharedPerSm = 3;
template <auto Kernel>
std::pair<int, int> shared_ring(int per_sm, int threads, int stage, int most) {
  int dev = 0, smem = 0, reserved = 0;
  KLAB_CUDA(cudaGetDevice(&dev));
  KLAB_CUDA(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
  KLAB_CUDA(cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, dev));
  cudaFuncAttributes fa{};
  KLAB_CUDA(cudaFuncGetAttributes(&fa, Kernel));
  const int S = shared_stages(smem, per_sm, reserved, int(fa.sharedSizeBytes), stage, most);
  int fit = 0;
  KLAB_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, Kernel, threads, std::size_t(S) * std::size_t(stage)));
  return {S, std::max(fit, 1)};
}
template <int P, bool XB = false, int G = 1, int Split = 1, int R = 8, int PA = 0, int D = 0, int PerSm = 0, bool RestL2 = false>
int resident_warps_paced() {
  const int W = warps_for(5120), threads = (Split * W + 1) * 32;
  int fit = paced_blocks_per_sm<P, XB, G, Split, R, PA, false, D, RestL2>(W);  // opts the kernel in
  if constexpr (PerSm >= kSharedPerSm) {
    const RingPlan plan{W, R, ring_stages(W, R)};
    fit = shared_ring<packed_paced_kernel<P, XB, G, Split, R, PA, false, D, RestL2>>(PerSm, threads, plan.stage_bytes(), plan.S).second;
  }
  return per_sm_of<PerSm>(fit) * (Split * W + 1);
}
// pace=P: the prep kernel (xprep_kernel<q8>, as the ring's) unless Prepared or XB (xprep=block: each consumer thread
// quantises its block of x after the wait, one launch a call), then the paced ring on the ring's stages.
// Warps (xprep=warps: 8, xprep=warp: 1, as the depth rings' rungs 76-79): the prep launch a warp per block of x
// (xprep_warps_kernel, xprep_kernel's words) instead of xprep_kernel. G (ilp=G): G stages a consumer step; Split
// (row-split): Split W consumer warps; either up to paced_bound threads a block (past it G = 1's kernel without
// row-split, the same bits). R: rows a group (rows=R), the ring's R past 31744. PA: the pace after the release.
// Stamp: the stamp probe's kernel (paced_stamped) on the grid of the kernel without stamps, refused where the stamps
// would change its blocks an SM. D: defer=D's kernel (packed_paced_kernel's D). PerSm (per-sm=N, N > 0): a grid of
// at most N blocks an SM (the same kernel and bits; only the grid shrinks), so that a later kernel's blocks fit beside.
// St (stages=N, N > 0): a ring of N stages where N of them fit kRingMaxSmem (else ring_stages'), for per-sm=1's one block
// an SM to hold more of its bytes (the same kernel and bits; the stages are a launch argument).
template <int P, bool Prepared = false, bool XB = false, int Warps = 0, int G = 1, int Split = 1, int R = 8, int PA = 0, bool Stamp = false,
          int D = 0, int PerSm = 0, int St = 0, bool RestL2 = false>
void launch_paced(const std::uint8_t* packed, const float* x, float* y, int m, int k, cudaStream_t stream) {
  static_assert(!(Prepared && XB), "xprep=block has no prepared form: it reads f32 x");
  static_assert(Warps == 0 || (!Prepared && !XB), "xprep=warps: a prep launch");
  check_launch(packed, x, y, m, k);
  const int W = warps_for(k), nb = k / ref::kQ4Block;
  if (W + 1 > kMaxWarps)
    return launch_ring<R, Load::bulk, true, false, false, 1, XB, false, false, Prepared, false, 0, false, false, Warps>(packed, x, y, m, k, stream);
  if constexpr (G > 1 || Split > 1) {
    if ((Split * W + 1) * 32 > paced_bound<G, Split>())
      return launch_paced<P, Prepared, XB, Warps, 1, 1, R, PA, false, 0, PerSm, St, RestL2>(packed, x, y, m, k, stream);
  }
  if constexpr (D > 0) {
    if (W > kDeferMaxWarps) return launch_paced<P, Prepared, XB, Warps, G, Split, R, PA, Stamp, 0, PerSm, St, RestL2>(packed, x, y, m, k, stream);
  }
  RingPlan plan{W, R, ring_stages(W, R)};
  if (St > 0 && St <= kRingMaxStages && std::size_t(St) * plan.stage_bytes() <= std::size_t(kRingMaxSmem)) plan.S = St;
  plan.groups = int((static_cast<long long>(m) + R - 1) / R);
  int fit = paced_blocks_per_sm<P, XB, G, Split, R, PA, false, D, RestL2>(W);  // opts the kernel in
  if constexpr (PerSm >= kSharedPerSm) {
    static_assert(St == 0 && !Stamp, "per-sm=N past 2 sets its own stages");
    std::tie(plan.S, fit) =
        shared_ring<packed_paced_kernel<P, XB, G, Split, R, PA, false, D, RestL2>>(PerSm, (Split * W + 1) * 32, plan.stage_bytes(), plan.S);
  }
  const int per_sm = per_sm_of<PerSm>(fit);
  if constexpr (Stamp) {
    const int stamped = paced_blocks_per_sm<P, XB, G, Split, R, PA, true>(W);
    require(stamped == fit, "the stamp probe's paced kernel fits " + std::to_string(stamped) + " blocks an SM, its variant " +
                                std::to_string(fit) + ": its launches would not be the variant's");
  }
  plan.grid = int(std::min<long long>(plan.groups, static_cast<long long>(per_sm) * sm_count()));
  if constexpr (!Prepared && !XB) launch_q8_prep<true, Warps>(x, nb, packed, stream);
  launch_maybe_pdl(true, packed_paced_kernel<P, XB, G, Split, R, PA, Stamp, D, RestL2>, dim3(unsigned(plan.grid)), dim3(unsigned((Split * W + 1) * 32)), std::size_t(plan.S) * plan.stage_bytes(),
                   stream, packed, y, m, k, plan.S, x);
  KLAB_CUDA_LAUNCH("packed_paced_kernel");
}

// ---- grid=own: each consumer warp owns its groups and one stage of its own (no producer warp, no barrier a group) ----
// Why (2026-12-06, thirteenth session, written before any run): at the 17.7 MB shapes the paced ring's blocks spend the
// span after their release on their own chain, not on bytes (the stamp probe on an H100: a block waits for bytes 5-8%
// of it), and as the GDN layer's out_proj rung 98's tail after the gated norm (5.5 us on the H200, its 17.7 MB 3.9 us at
// the read ceiling) is its blocks' chain, 5 groups a block one after another, each group spread over all the block's
// warps with a named barrier and a serial sum of the warps' totals. Here a block's groups are shared out among its
// warps: warp w of block j takes the block's groups w, w + NW, ... (block j's groups being j, j + grid, ... as the
// ring's), each brought by one TMA copy into the warp's own stage, requested by its lane 0 before griddepcontrol.wait
// (the weights depend on no predecessor) and again as soon as the warp has read it. After the wait the block copies x's
// prepared words (g_xq, or each thread quantising blocks of x itself with xprep=block) into shared memory once, one
// __syncthreads, then each warp runs its groups alone: no barrier, no shared sum, its groups' chains beside the other
// warps'. A warp walks its group's chunks c = 0..W-1 (lane l: block 32 c + l, the ring's offsets in the stage), per chunk
// the ring's block values and transposed butterfly, the chunk totals summed in chunk order from chunk 0: the ring's
// values in the ring's order (its warps' totals summed in warp order), so the ring's bits (model_ring). One block an SM:
// its NW stages and x fill the SM (at most kRingMaxSmem); NW = Owners, or fewer where Owners' stages do not fit.
constexpr int kOwnMaxWarps = 16;
template <int R, bool XB>
__global__ void __launch_bounds__(kOwnMaxWarps * 32)
packed_own_kernel(const std::uint8_t* __restrict__ packed, float* __restrict__ y, int m, int k, const float* __restrict__ x) {
  static_assert(R == 8 || R == 4);
  asm volatile("griddepcontrol.launch_dependents;");
  extern __shared__ __align__(128) std::uint8_t own[];  // x's words (xe[nb], xo[nb], cd[nb]), then the warps' stages
  __shared__ __align__(8) std::uint64_t full[kOwnMaxWarps];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = int(blockDim.x >> 5), nb = k / ref::kQ4Block;
  const RingPlan plan{warps_for(k), R, 1, int(gridDim.x), (m + R - 1) / R};
  const int j = int(blockIdx.x), held = plan.mine(j);   // the block's groups: its i-th is group_of(j, i)
  const int mine = held > warp ? (held - 1 - warp) / nw + 1 : 0;  // the warp's: i = warp, warp + nw, ...
  const unsigned stage_bytes = unsigned(plan.stage_bytes());
  uint4* sx = reinterpret_cast<uint4*>(own);
  std::uint8_t* stage = own + own_x_bytes(nb) + std::size_t(warp) * stage_bytes;
  if (tid == 0) {  // one thread initialises every warp's barrier, so that its fences cover them all (as the ring's)
    for (int w = 0; w < nw; ++w) mbar_init(&full[w], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();
  std::uint64_t policy = 0;
  if (lane == 0) {
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    if (mine > 0) {
      mbar_arrive_expect_tx(&full[warp], stage_bytes);
      bulk_g2s(stage, packed + plan.group_offset(plan.group_of(j, warp)), stage_bytes, &full[warp], policy);
    }
  }
  asm volatile("griddepcontrol.wait;" ::: "memory");  // g_xq (or x) comes from before us
  for (int b = tid; b < nb; b += int(blockDim.x)) {
    uint4 xe, xo, cd;
    if constexpr (XB) {
      q8_block_words(x, b, xe, xo, cd);  // xprep=block: xprep_kernel<q8>'s words
    } else {
      xe = __ldcg(&g_xq[b]), xo = __ldcg(&g_xq[kXqStride + b]), cd = __ldcg(&g_xq[2 * kXqStride + b]);
    }
    sx[b] = xe, sx[nb + b] = xo, sx[2 * nb + b] = cd;
  }
  __syncthreads();
  for (int n = 0; n < mine; ++n) {
    const std::int64_t g = plan.group_of(j, n * nw + warp);
    mbar_wait(&full[warp], unsigned(n & 1));
    float acc = 0.f;
    for (int c = 0; c < plan.W; ++c) {
      const int b = c * kChunk + lane;
      float p[R];
      // packed_ring_kernel's rows for block b, written out: through q8_rows rows=8 takes 64 registers, not 60 (the code measured).
      if (b < nb) {
        const uint4 xe = sx[b], xo = sx[nb + b], cd = sx[2 * nb + b];
        const float d = __uint_as_float(cd.y);
        Scales<R> sc;
        sc.v = *reinterpret_cast<const typename Scales<R>::V*>(stage + plan.scales_at(c, lane));
        for (int r = 0; r < R; ++r) {
          const uint4 q = *reinterpret_cast<const uint4*>(stage + plan.code_at(c, lane, r));
          int se = int(cd.x), so = 0;
          for (int w = 0; w < 4; ++w) q8_word(word_of(q, w), word_of(xe, w), word_of(xo, w), se, so);
          p[r] = q8_finish(se, so, half_value(sc.get(r)), d);
        }
      } else {
        for (int r = 0; r < R; ++r) p[r] = 0.f;
      }
      const float t = warp_rows<R>(p, lane);
      acc = c == 0 ? t : add_rn(acc, t);  // the ring's sum of its warps' totals, in warp (= chunk) order
    }
    // Every lane's reads of the stage are done (the butterflies took every value): lane 0 refills it with the warp's next.
    __syncwarp();
    if (lane == 0 && n + 1 < mine) {
      mbar_arrive_expect_tx(&full[warp], stage_bytes);
      bulk_g2s(stage, packed + plan.group_offset(plan.group_of(j, (n + 1) * nw + warp)), stage_bytes, &full[warp], policy);
    }
    if ((lane & (32 / R - 1)) == 0) {
      const std::int64_t row = g * R + lane / (32 / R);
      if (row < m) y[row] = acc;
    }
  }
}
template <int R, int Owners, bool XB>
int resident_warps_own() {
  opt_into_ring_smem<packed_own_kernel<R, XB>>();
  return own_warps(5120, R, Owners);
}
// grid=own: the prep launch (xprep=warps' warp per block of x) unless Prepared or XB, then one block an SM (at most one
// a group's worth of warps: ceil(groups / NW) blocks where fewer).
template <int R, int Owners, bool Prepared = false, bool XB = false>
void launch_own(const std::uint8_t* packed, const float* x, float* y, int m, int k, cudaStream_t stream) {
  static_assert(Owners >= 1 && Owners <= kOwnMaxWarps);
  static_assert(!(Prepared && XB), "xprep=block has no prepared form: it reads f32 x");
  check_launch(packed, x, y, m, k);
  const int nb = k / ref::kQ4Block, nw = own_warps(k, R, Owners);
  const RingPlan plan{warps_for(k), R, 1};
  const long long groups = (static_cast<long long>(m) + R - 1) / R;
  const int grid = int(std::min<long long>((groups + nw - 1) / nw, sm_count()));
  opt_into_ring_smem<packed_own_kernel<R, XB>>();
  if constexpr (!Prepared && !XB) launch_q8_prep<true, 8>(x, nb, packed, stream);
  launch_maybe_pdl(true, packed_own_kernel<R, XB>, dim3(unsigned(grid)), dim3(unsigned(nw * 32)),
                   std::size_t(own_x_bytes(nb)) + std::size_t(nw) * std::size_t(plan.stage_bytes()), stream, packed, y, m, k, x);
  KLAB_CUDA_LAUNCH("packed_own_kernel");
}

// ---- grid=split-k: clusters of C blocks, member c one chunk of k of the cluster's groups; x's chunk quantised in the launch ----
// Why (2026-12-06, fourteenth session, written before any run): at the 17.7 MB shapes on the H200 every fast rung's call is
// its prep launch's hop (main N done -> prep N+1 -> main N+1 released: 2.6-3.3 us on the H100's stamp probe, 0.5-1.8 us
// without the prep) plus a block's groups one after another after the release; 6.1 us a call for 3.9 us of bytes. Every
// form of quantising x inside the main launch lost because each block needs all of x: xprep=block reads 20 KB of f32 x a
// block after the wait (5.3 MB from L2 over 264 blocks) and quantises 160 blocks of it; xprep=cluster shares that over 8
// blocks behind a cluster barrier before any dot; xprep=flag is seven dependent L2 round trips. Split over k in clusters,
// a block needs only its chunk of x: 1024 activations (4 KB, one float4 a thread at 256 threads), quantised by its own
// threads (store_prepared_q8_quads: q8_prep's words bit for bit) into shared memory, one __syncthreads, and no barrier
// across the cluster before the dots but the one that says every member has started (its arrival at the block's start, its wait
// before the dots). The barrier that matters comes after every dot: each warp stores its tiles' chunk
// totals into the shared memory of the member that folds them (tile i: member i % C) over distributed shared memory, and
// after the barrier each member folds its tiles' totals in chunk order from chunk 0 and stores y. A chunk's values and
// transposed butterfly are the ring's warp c's, and the ring sums its warps' totals in warp (= chunk) order from warp 0:
// the ring's bits (model_ring). Weights: each warp's lane 0 requests its first Sw tiles (one TMA copy each) before
// griddepcontrol.wait and refills a stage as soon as the warp has read it (grid=own's ring, a tile deep rather than a group).
// Prepared: x's words read from g_xq (a producer's, prepared_x.cuh) instead of quantised here.
// Flat (fold=last): no cluster launch. The blocks j = q C + c form the same groups of C, but nothing runs them together:
// each warp stores its tiles' chunk totals to g_kc_ws, and after its last tile (one __threadfence) counts each of its
// tiles in on the group's counter g_kc_cnt (atomicAdd); the warp that brings a group's count to C folds it (a fence, its
// C chunk totals read through L2, summed in chunk order from chunk 0: the same bits) and sets the counter back to 0 for
// the next call, which touches it only after its griddepcontrol.wait. Why: run-call64 found grid=split-k 2.1-2.6 us a call
// slower than the paced ring at every size and on every grid, a cost of the launch rather than of its work; this twin
// asks whether the cluster launch is that cost. Like g_xq, the workspace is one per device (not for concurrent streams).
// Stamp: the stamp probe's kernel (launch_q4_stamped, StampGrid::split_k*), thread 0 (warp 0's lane 0) stamping: 0 entry;
// 1 its warp's first tiles requested, before the wait; 2 after the wait; 3 the chunk's x words in shared memory (after
// the block's barrier); 4 every member started (after the cluster wait; Flat: 3 again); 5 warp 0's first tile's bytes
// in; 6 warp 0's last tile done; 7 exit (after the fold); its waits for its tiles' bytes. Written after run-call66 left
// open what split-k's calls pay.
constexpr int kKcFlatMaxRows = 65536;  // m past it: the paced ring
__device__ float g_kc_ws[kKcFlatMaxRows * kKcMaxChunks];
__device__ unsigned g_kc_cnt[kKcFlatMaxRows / 4];
template <int R, bool Prepared, bool Flat = false, bool Stamp = false>
__global__ void __launch_bounds__(kKcMaxWarps * 32)
packed_kc_kernel(const std::uint8_t* __restrict__ packed, float* __restrict__ y, int m, int k, int Sw, const float* __restrict__ x) {
  static_assert(R == 8 || R == 4);
  Q4Stamper<Stamp> stamp;
  stamp.start(packed);
  asm volatile("griddepcontrol.launch_dependents;");
  extern __shared__ __align__(128) std::uint8_t kc[];  // KcPlan: x's words of the chunk, tot, the warps' stages
  __shared__ __align__(8) std::uint64_t full[kKcMaxWarps][kKcMaxStages];
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nb = k / ref::kQ4Block;
  unsigned cid = 0, ncl = 1;
  if constexpr (!Flat) {
    asm("mov.u32 %0, %%clusterid.x;" : "=r"(cid));
    asm("mov.u32 %0, %%nclusterid.x;" : "=r"(ncl));
  }
  KcPlan kp;
  kp.C = Flat ? warps_for(k) : int(cluster.num_blocks()), kp.R = R, kp.owners = int(blockDim.x >> 5), kp.Sw = Sw;
  kp.Q = Flat ? int(gridDim.x) / kp.C : int(ncl), kp.groups = (m + R - 1) / R;
  const int c = Flat ? int(blockIdx.x) % kp.C : int(cluster.block_rank()), q = Flat ? int(blockIdx.x) / kp.C : int(cid), held = kp.held(q);
  const int mine = held > warp ? (held - 1 - warp) / kp.owners + 1 : 0;  // the warp's tiles: i = warp, warp + owners, ...
  const RingPlan plan{kp.C, R, 1, kp.Q, kp.groups};                     // group_of(q, i), group_offset(g) + c tile: tile (i, c)
  const unsigned tile = unsigned(kp.tile());
  uint4* sx = reinterpret_cast<uint4*>(kc);
  float* tot = reinterpret_cast<float*>(kc + kp.x_bytes());
  auto stage = [&](int s) { return kc + kp.stage_at(warp, s); };
  auto tile_src = [&](int n) { return packed + plan.group_offset(plan.group_of(q, n * kp.owners + warp)) + std::size_t(c) * tile; };
  if (tid == 0) {  // one thread initialises every warp's barriers, so that its fences cover them all (as grid=own's)
    for (int w = 0; w < kp.owners; ++w)
      for (int s = 0; s < Sw; ++s) mbar_init(&full[w][s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();
  // Distributed shared memory may be written only once its block has started: every thread arrives here and waits before
  // the dots (whose totals go to other members), by when the cluster's co-scheduled blocks have long arrived.
  if constexpr (!Flat) asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
  std::uint64_t policy = 0;
  if (lane == 0) {
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    for (int n = 0; n < mine && n < Sw; ++n) {
      mbar_arrive_expect_tx(&full[warp][n], tile);
      bulk_g2s(stage(n), tile_src(n), tile, &full[warp][n], policy);
    }
  }
  stamp.at(1);
  asm volatile("griddepcontrol.wait;" ::: "memory");  // x (or g_xq) comes from before us
  stamp.at(2);
  if constexpr (Prepared) {
    if (tid < kChunk) {
      const int b = c * kChunk + tid;
      if (b < nb) sx[tid] = __ldcg(&g_xq[b]), sx[kChunk + tid] = __ldcg(&g_xq[kXqStride + b]), sx[2 * kChunk + tid] = __ldcg(&g_xq[2 * kXqStride + b]);
    }
  } else {
    // Thread t: float4 t % 8 of the chunk's block t / 8 (whole warps each round: every lane of a warp shuffles).
    for (int t = tid; t < kChunk * 8; t += int(blockDim.x)) {
      const int b = c * kChunk + t / 8;
      const float4 v = b < nb ? __ldcg(reinterpret_cast<const float4*>(x) + std::size_t(b) * 8 + (t & 7)) : make_float4(0.f, 0.f, 0.f, 0.f);
      store_prepared_q8_quads<kChunk>(sx, b < nb ? t / 8 : -1, v, lane);
    }
  }
  __syncthreads();
  stamp.at(3);
  if constexpr (!Flat) asm volatile("barrier.cluster.wait;" ::: "memory");  // every member has started
  stamp.at(4);
  const int b = c * kChunk + lane;  // the lane's block of 32 weights in every tile
  const bool active = b < nb;
  uint4 xe = make_uint4(0, 0, 0, 0), xo = xe, cd = xe;
  if (active) xe = sx[lane], xo = sx[kChunk + lane], cd = sx[2 * kChunk + lane];
  const float d = __uint_as_float(cd.y);
  for (int n = 0; n < mine; ++n) {
    const int s = n % Sw, i = n * kp.owners + warp;
    stamp.wait_begins();
    mbar_wait(&full[warp][s], unsigned((n / Sw) & 1));
    stamp.wait_ends();
    if (n == 0) stamp.at(5);
    const std::uint8_t* st = stage(s);
    float p[R];
    // packed_ring_kernel's rows for block b (written out, as packed_own_kernel's)
    if (active) {
      Scales<R> sc;
      sc.v = *reinterpret_cast<const typename Scales<R>::V*>(st + plan.scales_at(0, lane));
      for (int r = 0; r < R; ++r) {
        const uint4 w4 = *reinterpret_cast<const uint4*>(st + plan.code_at(0, lane, r));
        int se = int(cd.x), so = 0;
        for (int w = 0; w < 4; ++w) q8_word(word_of(w4, w), word_of(xe, w), word_of(xo, w), se, so);
        p[r] = q8_finish(se, so, half_value(sc.get(r)), d);
      }
    } else {
      for (int r = 0; r < R; ++r) p[r] = 0.f;
    }
    const float t = warp_rows<R>(p, lane);
    // Every lane's reads of the stage are done (the butterfly took every value): lane 0 refills it with the warp's tile n + Sw.
    __syncwarp();
    if (lane == 0 && n + Sw < mine) {
      mbar_arrive_expect_tx(&full[warp][s], tile);
      bulk_g2s(stage(s), tile_src(n + Sw), tile, &full[warp][s], policy);
    }
    if ((lane & (32 / R - 1)) == 0) {
      if constexpr (Flat) {
        g_kc_ws[(std::size_t(plan.group_of(q, i)) * kp.C + c) * R + lane / (32 / R)] = t;
      } else {
        float* dst = cluster.map_shared_rank(tot, unsigned(i % kp.C));
        dst[((i / kp.C) * kp.C + c) * R + lane / (32 / R)] = t;
      }
    }
  }
  if (mine == 0) stamp.at(5);
  stamp.at(6);
  if constexpr (Flat) {
    // The warp's totals are visible device-wide before any of its counts (the threadFenceReduction pattern): then lane l
    // counts the warp's tiles n = l, l + 32, ... in (after the __syncwarp: a tile's totals were stored by other lanes of the
    // warp than the one that counts it), and the lanes that complete a group fold it, R lanes a group.
    __threadfence();
    __syncwarp();
    for (int n0 = 0; n0 < mine; n0 += 32) {
      const int n = n0 + lane;
      std::int64_t g = 0;
      bool last = false;
      if (n < mine) {
        g = plan.group_of(q, n * kp.owners + warp);
        last = atomicAdd(&g_kc_cnt[g], 1u) == unsigned(kp.C - 1);
      }
      unsigned done = __ballot_sync(0xffffffffu, last);
      if (done != 0) __threadfence();  // the other chunks' totals, stored before their counts, are visible to the reads below
      while (done != 0) {
        const int src = __ffs(done) - 1;
        done &= done - 1;
        const std::int64_t gg = __shfl_sync(0xffffffffu, g, src);
        if (lane < R) {
          const std::int64_t row = gg * R + lane;
          const float* v = g_kc_ws + std::size_t(gg) * kp.C * R + lane;
          float sum = __ldcg(v);
          for (int cc = 1; cc < kp.C; ++cc) sum = add_rn(sum, __ldcg(v + cc * R));  // the ring's warps' totals in warp (= chunk) order
          if (row < m) y[row] = sum;
        }
        if (lane == 0) g_kc_cnt[gg] = 0u;  // every chunk has counted in: the next call starts from 0
      }
    }
    stamp.finish();
    return;
  }
  // Every member's totals are in place (release / acquire at cluster scope); no member exits before the others have
  // written into its shared memory.
  asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
  const int mine_slots = held > c ? (held - 1 - c) / kp.C + 1 : 0;  // this member's tiles: i = c, c + C, ...
  for (int e = tid; e < mine_slots * R; e += int(blockDim.x)) {
    const int slot = e / R, r = e % R, i = slot * kp.C + c;
    const std::int64_t row = plan.group_of(q, i) * R + r;
    if (row < m) {
      const float* v = tot + std::size_t(slot) * kp.C * R + r;
      float sum = v[0];
      for (int cc = 1; cc < kp.C; ++cc) sum = add_rn(sum, v[cc * R]);  // the ring's warps' totals in warp (= chunk) order
      y[row] = sum;
    }
  }
  stamp.finish();
}
// The clusters of C blocks (owners warps, Sw stages each) the device holds at once (cudaOccupancyMaxActiveClusters; at
// least 1), once per kernel and (C, owners, Sw); Flat: the groups of C blocks its SMs hold (blocks an SM x SMs / C).
// Stamp: the stamp probe's kernel's (which must hold as many as the kernel it stamps).
template <int R, bool Prepared, bool Flat, bool Stamp = false>
int kc_device_clusters(const KcPlan& kp) {
  static std::mutex mu;
  static std::map<std::array<int, 3>, int> cache;
  const std::array<int, 3> key{kp.C, kp.owners, kp.Sw};
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  opt_into_ring_smem<packed_kc_kernel<R, Prepared, Flat, Stamp>>();
  int n = 0;
  if constexpr (Flat) {
    KLAB_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, packed_kc_kernel<R, Prepared, Flat, Stamp>, kp.owners * 32, std::size_t(kp.smem())));
    n = n * sm_count() / kp.C;
  } else {
    ClusterLaunch l(kp.C * sm_count(), kp.owners, std::size_t(kp.smem()), kp.C, false, nullptr);
    KLAB_CUDA(cudaOccupancyMaxActiveClusters(&n, packed_kc_kernel<R, Prepared, Flat, Stamp>, &l.cfg));
  }
  return cache[key] = n < 1 ? 1 : n;
}
// grid=split-k's plan at (m, k): Q = at most PerSm blocks an SM's worth of clusters (PerSm sm_count / C), at most the
// device's, at most one a group. Q = 0 where the split does not apply (C past kKcMaxChunks, the stages past kRingMaxSmem,
// a cluster's rows past kKcMaxRows; Flat: m past kKcFlatMaxRows, its workspace's): the launcher then runs the paced
// ring (the same bits).
template <int R, bool Prepared, bool Flat = false>
KcPlan kc_plan(int m, int k, int owners, int Sw, int per_sm) {
  KcPlan kp;
  kp.C = warps_for(k), kp.R = R, kp.owners = owners, kp.Sw = Sw, kp.groups = int((static_cast<long long>(m) + R - 1) / R), kp.Q = 0;
  if (kp.C > kKcMaxChunks || kp.smem() > kRingMaxSmem || (Flat && m > kKcFlatMaxRows)) return kp;
  kp.Q = std::max(1, std::min({kc_device_clusters<R, Prepared, Flat>(kp), per_sm * sm_count() / kp.C, kp.groups}));
  if (!Flat && kp.held(0) * R > kKcMaxRows) kp.Q = 0;
  return kp;
}
template <int R, int Owners, int Sw, int PerSm, bool Prepared, bool Flat = false, bool Stamp = false>
void launch_kc(const std::uint8_t* packed, const float* x, float* y, int m, int k, cudaStream_t stream) {
  static_assert(Owners >= 1 && Owners <= kKcMaxWarps && Sw >= 1 && Sw <= kKcMaxStages && PerSm >= 1);
  check_launch(packed, x, y, m, k);
  const KcPlan kp = kc_plan<R, Prepared, Flat>(m, k, Owners, Sw, PerSm);
  if constexpr (Stamp) {
    require(kp.Q > 0, "the stamp probe: grid=split-k runs the paced ring at this shape (k past 8192 or a cluster's rows past 1024)");
    const int stamped = kc_device_clusters<R, Prepared, Flat, true>(kp), plain = kc_device_clusters<R, Prepared, Flat>(kp);
    require(stamped == plain, "the stamp probe's grid=split-k kernel fits " + std::to_string(stamped) + (Flat ? " groups of blocks" : " clusters") +
                                  " on this device, the kernel it stamps " + std::to_string(plain) + ": its launches would not be that kernel's");
  }
  if (kp.Q == 0) {  // the paced ring with its prep a warp per block of x (rung 85's, rows=4: rung 92's), or its main kernel alone
    if constexpr (Prepared)
      launch_paced<1, true, false, 0, 1, 1, R>(packed, x, y, m, k, stream);
    else
      launch_paced<1, false, false, 8, 1, 1, R>(packed, x, y, m, k, stream);
    return;
  }
  if constexpr (Flat) {
    launch_maybe_pdl(true, packed_kc_kernel<R, Prepared, true, Stamp>, dim3(unsigned(kp.Q * kp.C)), dim3(unsigned(kp.owners * 32)), std::size_t(kp.smem()),
                     stream, packed, y, m, k, Sw, x);
  } else {
    ClusterLaunch l(kp.Q * kp.C, kp.owners, std::size_t(kp.smem()), kp.C, true, stream);
    KLAB_CUDA(cudaLaunchKernelEx(&l.cfg, packed_kc_kernel<R, Prepared, false, Stamp>, packed, y, m, k, Sw, x));
  }
  KLAB_CUDA_LAUNCH("packed_kc_kernel");
}
template <int R, int Owners, int Sw, int PerSm, bool Flat = false>
int resident_warps_kc() {
  const KcPlan kp = kc_plan<R, false, Flat>(6144, 5120, Owners, Sw, PerSm);
  return kp.Q * kp.C * kp.owners / sm_count();
}

// ---- span (span.hpp): out_proj and the next stacked launch as one persistent ring ----
// The span's grid-wide barrier: sync[0] counts arrivals, sync[1] is the generation. Self-resetting (the last arriver
// zeroes the count before it bumps the generation), so one zeroed pair serves every launch in stream order: a launch
// arrives only after its griddepcontrol.wait, when the launch before it is complete.
__device__ unsigned g_span_sync[2];
// Block j's groups of one matrix, as packed_paced_kernel's G = 1 loop consumes them (its values in its order), on the
// span's stage counter c (stage c % S, parity (c / S) & 1), continued across the span's phases. The rows' code is that
// loop's, written twice on purpose: the paced kernels calling one shared function instead changed the SASS of 9 of them
// (register allocation and scheduling; nvcc 13.0, sm_90, 2026-12-06), whose measured figures describe the code as it is.
template <int R>
__device__ __forceinline__ void span_consume(const RingPlan& plan, int j, int mine, std::uint8_t* ring, unsigned slot, std::uint64_t* full,
                                             std::uint64_t* empty, float (*part)[kMaxWarps][R], int& c, int S, float* __restrict__ y, int m,
                                             const uint4& xe, const uint4& xo, const uint4& cd, bool active, unsigned consumers) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int code0 = plan.code_at(warp, lane, 0), sc0 = plan.scales_at(warp, lane);
  const float d = __uint_as_float(cd.y);
  for (int n = 0; n < mine; ++n, ++c) {
    const int s = c % S;
    mbar_wait(&full[s], unsigned((c / S) & 1));
    const std::uint8_t* st = ring + std::size_t(s) * slot;
    float p[R];
    if (active) {
      Scales<R> sc;
      sc.v = *reinterpret_cast<const typename Scales<R>::V*>(st + sc0);
      for (int r = 0; r < R; ++r) {
        const uint4 q = *reinterpret_cast<const uint4*>(st + code0 + r * (kChunk * 16));
        int se = int(cd.x), so = 0;
        for (int w = 0; w < 4; ++w) q8_word(word_of(q, w), word_of(xe, w), word_of(xo, w), se, so);
        p[r] = q8_finish(se, so, half_value(sc.get(r)), d);
      }
    } else {
      for (int r = 0; r < R; ++r) p[r] = 0.f;
    }
    const float t = warp_rows<R>(p, lane);
    if ((lane & (32 / R - 1)) == 0) part[c & 1][warp][lane / (32 / R)] = t;
    asm volatile("bar.sync 1, %0;" ::"r"(consumers) : "memory");
    if (tid == 0) mbar_arrive(&empty[s]);
    if (tid < R) {
      const std::int64_t row = plan.group_of(j, n) * R + tid;
      if (row < m) {
        float sum = part[c & 1][0][tid];
        for (int w = 1; w < plan.W; ++w) sum = add_rn(sum, part[c & 1][w][tid]);
        y[row] = sum;
      }
    }
  }
}
constexpr int kSpanBaThreads = 128;  // b|a rows by consumer threads 0..127, standing for split-row's 256 (Ways 2)
template <int P>
__global__ void __launch_bounds__(kMaxWarps * 32) packed_span_kernel(SpanCall a, int S, unsigned slot) {
  constexpr int R = 8;
  asm volatile("griddepcontrol.launch_dependents;");
  extern __shared__ __align__(128) std::uint8_t ring[];  // S slots of `slot` bytes (the larger group)
  __shared__ __align__(8) std::uint64_t full[kRingMaxStages], empty[kRingMaxStages];
  __shared__ float part[2][kMaxWarps][R];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, cw = int(blockDim.x >> 5) - 1;  // the last warp produces
  const int j = int(blockIdx.x), grid = int(gridDim.x);
  RingPlan p1{warps_for(a.out_k), R, S, grid, (a.out_m + R - 1) / R};
  RingPlan p2{warps_for(a.in_k), R, S, grid, (a.in_m + R - 1) / R};
  if (tid == 0) {
    for (int s = 0; s < S; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();
  if (warp == cw) {  // the producer: out_proj's groups, then the stacked matrix's, on one stage counter
    if (lane == 0) {
      std::uint64_t policy;
      asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
      int c = 0;
      for (int phase = 0; phase < 2; ++phase) {
        const RingPlan& plan = phase == 0 ? p1 : p2;
        const std::uint8_t* base = phase == 0 ? a.out_packed : a.in_packed;
        const unsigned bytes = unsigned(plan.stage_bytes());
        const int mine = plan.mine(j);
        for (int n = 0; n < mine; ++n, ++c) {
          const int s = c % S;
          const PaceWaits pw = pace_waits(c, S, P);
          if (pw.empty) mbar_wait(&empty[pw.empty_stage], pw.empty_parity);
          if (pw.full) mbar_wait(&full[pw.full_stage], pw.full_parity);
          mbar_arrive_expect_tx(&full[s], bytes);
          bulk_g2s(ring + std::size_t(s) * slot, base + plan.group_offset(plan.group_of(j, n)), bytes, &full[s], policy);
        }
      }
    }
    return;  // the consumers wait for every stage it requested before they exit
  }
  const unsigned consumers = unsigned(cw) * 32u;
  asm volatile("griddepcontrol.wait;" ::: "memory");  // the prepared x: written by our predecessor
  int c = 0;
  {
    const bool active = tid < a.out_k / ref::kQ4Block;
    uint4 xe = make_uint4(0, 0, 0, 0), xo = xe, cd = xe;
    if (active) xe = __ldcg(&g_xq[tid]), xo = __ldcg(&g_xq[kXqStride + tid]), cd = __ldcg(&g_xq[2 * kXqStride + tid]);
    span_consume<R>(p1, j, p1.mine(j), ring, slot, full, empty, part, c, S, a.out_y, a.out_m, xe, xo, cd, active, consumers);
  }
  // The grid-wide barrier: every block's out_y stores before any block's reads of h.
  __threadfence();
  asm volatile("bar.sync 1, %0;" ::"r"(consumers) : "memory");
  if (tid == 0) {
    const unsigned gen = ld_acquire_gpu(&g_span_sync[1]);
    __threadfence();
    if (atomicAdd(&g_span_sync[0], 1u) == unsigned(grid) - 1u) {
      atomicExch(&g_span_sync[0], 0u);
      __threadfence();
      atomicAdd(&g_span_sync[1], 1u);
    } else {
      while (ld_acquire_gpu(&g_span_sync[1]) == gen) __nanosleep(32);
    }
    __threadfence();
  }
  asm volatile("bar.sync 1, %0;" ::"r"(consumers) : "memory");
  if (a.in_m > 0) {
    const bool active = tid < a.in_k / ref::kQ4Block;
    uint4 xe = make_uint4(0, 0, 0, 0), xo = xe, cd = xe;
    if (active) q8_block_words(a.h, tid, xe, xo, cd);  // = the prep launches' words of block tid of h
    span_consume<R>(p2, j, p2.mine(j), ring, slot, full, empty, part, c, S, a.in_y, a.in_m, xe, xo, cd, active, consumers);
  }
  // b|a: row r by block grid - 1 - r mod grid (the last blocks take one stacked group fewer), split-row's bits.
  if (tid < kSpanBaThreads)
    for (int r = (grid - 1 - j); r < a.ba_rows; r += grid) {
      f32_gemv::split_row::row_total<false, 256 / kSpanBaThreads, 2>(a.w_ba, a.h, a.in_k, r, kSpanBaThreads, [&](float v) { a.ba[r] = v; });
      asm volatile("bar.sync 2, %0;" ::"r"(kSpanBaThreads) : "memory");  // thread 0 has read row_total's part[] before the next row writes it
    }
}

// ---- grid=fill,xprep=cluster: the ring in clusters of C blocks, x prepared in the launch ----
template <int R, bool XPf, int C>
constexpr auto ring_xc_kernel = packed_ring_kernel<R, Load::bulk, false, false, XPf, false, false, false, 1, false, false, C>;
// Its static shared memory (the members' prepared words, 5-10 KB) comes off what a block may opt into: returns
// the dynamic shared memory a block may take (at most kRingMaxSmem).
template <int R, bool XPf, int C>
int ring_xc_attributes() {
  static std::once_flag once;
  static int dynamic = 0;
  std::call_once(once, [] {
    int dev = 0, optin = 0;
    KLAB_CUDA(cudaGetDevice(&dev));
    KLAB_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    cudaFuncAttributes fa{};
    KLAB_CUDA(cudaFuncGetAttributes(&fa, ring_xc_kernel<R, XPf, C>));
    dynamic = std::min(kRingMaxSmem, optin - int(fa.sharedSizeBytes));
    KLAB_CUDA(cudaFuncSetAttribute(ring_xc_kernel<R, XPf, C>, cudaFuncAttributeMaxDynamicSharedMemorySize, dynamic));
    KLAB_CUDA(cudaFuncSetAttribute(ring_xc_kernel<R, XPf, C>, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  });
  return dynamic;
}
// The ring's stages for W warps, fewer where they and the static words would not fit a block (near k = 24576 at
// cluster=4): the same bits with any stage count.
template <int R, bool XPf, int C>
RingPlan ring_xc_plan(int W) {
  RingPlan plan{W, R, ring_stages(W, R)};
  const int dynamic = ring_xc_attributes<R, XPf, C>();
  while (plan.S > 1 && plan.S * plan.stage_bytes() > dynamic) --plan.S;
  return plan;
}
// Clusters of the ring's blocks of W warps the device holds at once (cudaOccupancyMaxActiveClusters): the
// grid is that many whole clusters at most, so that no cluster waits for another to leave.
template <int R, bool XPf, int C>
int ring_xc_clusters(int W) {
  static std::array<std::atomic<int>, kMaxWarps + 1> cache{};
  auto& c = cache[std::size_t(W)];
  int n = c.load(std::memory_order_relaxed);
  if (n == 0) {
    const RingPlan plan = ring_xc_plan<R, XPf, C>(W);
    ClusterLaunch l(C, W, std::size_t(plan.S) * plan.stage_bytes(), C, false, nullptr);
    KLAB_CUDA(cudaOccupancyMaxActiveClusters(&n, ring_xc_kernel<R, XPf, C>, &l.cfg));
    if (n < 1) n = 1;
    c.store(n, std::memory_order_relaxed);
  }
  return n;
}
template <int R, bool XPf, int C>
int resident_warps_ring_xc() {
  const int W = warps_for(5120);
  return ring_xc_clusters<R, XPf, C>(W) * C * W / sm_count();
}
template <int R, bool Pdl, bool XPf, int C>
void launch_ring_xc(const std::uint8_t* packed, const float* x, float* y, int m, int k, cudaStream_t stream) {
  check_launch(packed, x, y, m, k);
  const int W = warps_for(k);
  const RingPlan plan = ring_xc_plan<R, XPf, C>(W);
  const long long groups = (static_cast<long long>(m) + R - 1) / R;
  const int grid = int(std::min<long long>((groups + C - 1) / C * C, static_cast<long long>(ring_xc_clusters<R, XPf, C>(W)) * C));
  ClusterLaunch l(grid, W, std::size_t(plan.S) * plan.stage_bytes(), C, Pdl, stream);
  KLAB_CUDA(cudaLaunchKernelEx(&l.cfg, ring_xc_kernel<R, XPf, C>, packed, x, y, m, k, plan.S));
  KLAB_CUDA_LAUNCH("packed_ring_kernel");
}

// ---- grid=half: the ring in half an SM (packed_ring.hpp, half_stages) ----
template <int R, bool XB, bool XPf, bool Held = false, bool L2pf = false, bool Pre1 = false, int Split = 1>
void half_attributes() {
  opt_into_ring_smem<packed_ring_kernel<R, Load::bulk, XB, true, XB && XPf, Held, L2pf, Pre1, Split>>();
}
// Warps one launch keeps per SM at k = 5120 (the lab's resident-warps figure): P blocks of W warps.
template <int P, int Split = 1>
int resident_warps_half() {
  return P * Split * warps_for(5120);
}

// Grid = min(groups, P x SMs), whatever the occupancy query says: P blocks per SM is the design
// (half the shared memory; the other half is the next launch's). Blocks never wait on each other,
// so a grid larger than what is resident only runs later, never deadlocks.
// Held (last=regs): past kHeldMaxWarps warps (k > 16384) the kernel without the held group.
// Split (row-split): past kMaxWarps / Split warps the kernel with Split = 1 (the same bits).
template <int R, bool XB, int P, bool Pdl, bool XPf = false, bool Held = false, bool L2pf = false, bool Pre1 = false, int Split = 1>
void launch_half(const std::uint8_t* packed, const float* x, float* y, int m, int k, cudaStream_t stream) {
  if constexpr (Held) {
    if (warps_for(k) > kHeldMaxWarps) return launch_half<R, XB, P, Pdl, XPf, false, L2pf, Pre1>(packed, x, y, m, k, stream);
  }
  if constexpr (Split > 1) {
    if (!split_fits<Split>(k)) return launch_half<R, XB, P, Pdl, XPf, Held, L2pf, Pre1, 1>(packed, x, y, m, k, stream);
  }
  check_launch(packed, x, y, m, k);
  half_attributes<R, XB, XPf, Held, L2pf, Pre1, Split>();
  const int W = warps_for(k), nb = k / ref::kQ4Block;
  RingPlan plan{W, R, half_stages(W, R, P)};
  plan.groups = int((static_cast<long long>(m) + R - 1) / R);
  plan.grid = int(std::min<long long>(plan.groups, static_cast<long long>(P) * sm_count()));
  if constexpr (!XB) {
    launch_maybe_pdl(Pdl, xprep_kernel<Form::q8, XPf>, dim3(unsigned((nb + 31) / 32)), dim3(32), 0, stream, x, nb, packed, 0LL);
    KLAB_CUDA_LAUNCH("xprep_kernel");
  }
  launch_maybe_pdl(Pdl, packed_ring_kernel<R, Load::bulk, XB, true, XB && XPf, Held, L2pf, Pre1, Split>, dim3(unsigned(plan.grid)), dim3(unsigned(Split * W * 32)),
                   std::size_t(half_smem(W, R, P)), stream, packed, x, y, m, k, plan.S);
  KLAB_CUDA_LAUNCH("packed_ring_kernel");
}

// grid=groups,xprep=launch,load=bulk: the ring kernel (grid=half's form: the warps' row totals after the
// stage) with ONE stage and one block per group (grid = groups): grid=groups,xprep=launch's schedule with
// the group's weights brought by one TMA copy into shared memory instead of registers. Why (traces of
// xprep=warps at 6144x5120, reports/h200/run-c00d582): main N+1 ends 4.54 us after its prep kernel (median); its
// blocks (64 registers x 160 threads, 6 an SM, 792 slots for 768 groups) become resident only as main N's
// leave, so its weight loads start after main N's dots. Here a block holds 43 registers x 160 threads and
// 23.4 KB of shared memory (k = 5120, rows=8): 8 an SM, 1056 slots, so a third of the next call's blocks
// are resident, their copies in flight, while this call waits for x and computes.
// Measured (reports/h200/run-3772b2a, H200, 2026-12-02, stream mode, against grid=groups,xprep=launch,rows=8):
// 16.07 / 11.20 / 6.89 / 6.82 us against 14.98 / 10.49 / 6.82 / 6.89 at the four seed shapes: the same at the
// two small shapes (traced period 6.43 us at 6144x5120, xprep=warps 6.64), slower at the two large ones.
// The same bits. Co-resident blocks alone do not shorten the small shapes' chain. Kept as a negative result.
// Dynamic shared memory of a grid=groups,load=bulk block: one stage (the group) and the warps' row totals.
std::size_t ring_groups_smem(int W, int R) { return std::size_t(RingPlan{W, R, 1}.stage_bytes()) + std::size_t(half_part_bytes(W, R)); }
// launch_prepared (prepared_x.cuh): the ring kernel alone, on the x its producer prepared in g_xq
// (it reads g_xq after griddepcontrol.wait, as after xprep_kernel).
template <int R, bool Pdl>
void launch_ring_groups_prepared(const std::uint8_t* packed, const float* x, float* y, int m, int k, cudaStream_t stream) {
  check_launch(packed, x, y, m, k);
  half_attributes<R, false, false>();
  const int W = warps_for(k);
  const long long groups = (static_cast<long long>(m) + R - 1) / R;
  launch_maybe_pdl(Pdl, packed_ring_kernel<R, Load::bulk, false, true, false>, dim3(unsigned(groups)), dim3(unsigned(W * 32)), ring_groups_smem(W, R),
                   stream, packed, x, y, m, k, 1);
  KLAB_CUDA_LAUNCH("packed_ring_kernel");
}
// The prep kernel (xprep_kernel<q8>; with Warps, xprep_warps_kernel<Warps>: the same words), then the ring kernel on
// its g_xq (as launch_xw before launch_xl_prepared).
template <int R, bool Pdl, int Warps = 0>
void launch_ring_groups(const std::uint8_t* packed, const float* x, float* y, int m, int k, cudaStream_t stream) {
  check_launch(packed, x, y, m, k);
  launch_q8_prep<Pdl, Warps>(x, k / ref::kQ4Block, packed, stream);
  launch_ring_groups_prepared<R, Pdl>(packed, x, y, m, k, stream);
}
template <int R>
int resident_warps_ring_groups() {
  half_attributes<R, false, false>();
  const int W = warps_for(5120);
  return resident_warps_of<packed_ring_kernel<R, Load::bulk, false, true, false>>(W, ring_groups_smem(W, R));
}

// The raw launcher of a packed kernel: refuses (its weights come packed, through launch_packed).
void refuse_raw(const std::uint8_t*, const std::uint16_t*, const float*, float*, int, int, cudaStream_t) {
  throw Error("q4_gemv launch: a map=packed kernel takes its weights in its own layout: pack them with Q4Kernel::layout "
              "(pack_device or pack_host) and call Q4Kernel::launch_packed");
}

template <Form F, int R>
int resident_warps_per_sm() {
  return blocks_per_sm<F, R>(warps_for(5120)) * warps_for(5120);
}

// ---- the device repack ----
__global__ void pack_kernel(const std::uint8_t* __restrict__ codes, const std::uint16_t* __restrict__ scales, std::uint8_t* __restrict__ out,
                            Geometry geo) {
  const std::int64_t nb = geo.nb();
  const std::int64_t t = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;  // one (row, block)
  if (t >= geo.m * nb) return;
  const std::int64_t i = t / nb, b = t % nb;
  *reinterpret_cast<uint4*>(out + geo.code_offset(i, b)) = *reinterpret_cast<const uint4*>(codes + i * (geo.k / 2) + b * 16);
  *reinterpret_cast<std::uint16_t*>(out + geo.scale_offset(i, b)) = scales[i * nb + b];
}

template <int R>
void pack_device(const std::uint8_t* codes, const std::uint16_t* scales, int m, int k, std::uint8_t* out, cudaStream_t stream) {
  if (auto why = launch_error(m, k); !why.empty()) throw Error("q4_gemv pack: " + why);
  require(codes && scales && out, "q4_gemv pack: a null buffer");
  require(reinterpret_cast<std::uintptr_t>(codes) % 16 == 0 && reinterpret_cast<std::uintptr_t>(out) % 16 == 0,
          "q4_gemv pack: codes and the packed buffer must be 16-byte aligned");
  const Geometry geo{m, k, R};
  KLAB_CUDA(cudaMemsetAsync(out, 0, std::size_t(geo.bytes()), stream));  // the padding
  const std::int64_t n = geo.m * geo.nb();
  pack_kernel<<<unsigned((n + 255) / 256), 256, 0, stream>>>(codes, scales, out, geo);
  KLAB_CUDA_LAUNCH("pack_kernel");
}

template <int R>
std::size_t packed_bytes(std::int64_t m, std::int64_t k) {
  return std::size_t(Geometry{m, k, R}.bytes());
}
template <int R>
std::vector<std::uint8_t> pack_host(const ref::Q4Matrix& w) {
  return pack(w, R);
}

template <int R>
const Q4Layout& layout() {
  static const Q4Layout l{"tiles-r" + std::to_string(R), &packed_bytes<R>, &pack_device<R>, &pack_host<R>};
  return l;
}

// The axes of a kernel with xpf=l2 (prefetch_x_warp): its name has xpf=l2 right after `after` (the
// kernels without it keep their names).
using Axes = std::vector<std::pair<std::string, std::string>>;
Axes with_xpf(Axes axes, bool xpf, const std::string& after) {
  if (!xpf) return axes;
  const auto it = std::find_if(axes.begin(), axes.end(), [&](const auto& a) { return a.first == after; });
  axes.insert(it == axes.end() ? it : it + 1, {"xpf", "l2"});
  return axes;
}
// wpf=l2 (xprep_kernel's weight prefetch) follows xpf=l2.
Axes with_wpf(Axes axes, bool wpf) {
  if (!wpf) return axes;
  const auto it = std::find_if(axes.begin(), axes.end(), [](const auto& a) { return a.first == "xpf"; });
  axes.insert(it == axes.end() ? it : it + 1, {"wpf", "l2"});
  return axes;
}

template <Form F, int R, bool Fill, bool Pdl, bool XPf = false>
Q4Kernel kernel_of() {
  const Axes axes = with_xpf(
      {{"map", "packed"}, {"dot", form_name(F)}, {"grid", Fill ? "fill" : "groups"}, {"pdl", Pdl ? "on" : "off"}, {"rows", std::to_string(R)}}, XPf, "grid");
  Q4Kernel kern{variant_name(kOp, axes), axes, &refuse_raw, R, &resident_warps_per_sm<F, R>, warps_for(5120)};
  kern.layout = &layout<R>();
  kern.launch_packed = &launch_packed<F, R, Fill, Pdl, XPf>;
  kern.tolerance = form_tolerance(F);
  return kern;
}

// grid=groups,xprep=launch: x prepared by a first kernel, one thread block per group of R rows.
// Regs48: the main kernel at 48 registers (packed_xl_r48_kernel; axis regs=48, q8 without xpf/wpf only), whose
// f32 rows (launch_packed_rows) are not registered: packed_xl_rows_kernel is the 64-register body's.
template <Form F, int R, bool Pdl, bool XPf = false, bool WPf = false, bool Regs48 = false>
Q4Kernel kernel_xl() {
  static_assert(!Regs48 || (F == Form::q8 && !XPf && !WPf), "regs=48 is registered on q8-dp4a without xpf or wpf");
  Axes axes = with_wpf(with_xpf({{"map", "packed"}, {"dot", form_name(F)}, {"grid", "groups"}, {"xprep", "launch"}, {"pdl", Pdl ? "on" : "off"},
                                 {"rows", std::to_string(R)}},
                                XPf, "xprep"),
                       WPf);
  if (Regs48) axes.insert(axes.begin() + 4, {"regs", "48"});  // after xprep=
  Q4Kernel kern{variant_name(kOp, axes), axes, &refuse_raw, R, &resident_warps_xl<F, R, Regs48>, warps_for(5120)};
  kern.layout = &layout<R>();
  kern.launch_packed = &launch_xl<F, R, Pdl, XPf, WPf, Regs48>;
  if constexpr (F == Form::q8 && !XPf && !WPf) {
    kern.launch_prepared = &launch_xl_prepared<R, Pdl, Regs48>;
    if constexpr (!Regs48) kern.launch_packed_rows = &launch_xl_rows<R, Pdl, 0>;
  }
  kern.tolerance = form_tolerance(F);
  return kern;
}

// grid=groups,xprep=launch,parts=P,pdl=on,rows=R: rung 10's kernels as a prep launch and P main launches
// (launch_xl_parts), with launch_prepared (its xprep=producer twin); no f32 rows riding along.
template <int R, int Parts>
Q4Kernel kernel_xl_parts() {
  Q4Kernel kern = kernel_xl<Form::q8, R, true>();
  kern.axes.insert(kern.axes.begin() + 4, {"parts", std::to_string(Parts)});  // after xprep=
  kern.name = variant_name(kOp, kern.axes);
  kern.launch_packed = &launch_xl_parts<R, Parts, false>;
  kern.launch_prepared = &launch_xl_parts<R, Parts, true>;
  kern.launch_packed_rows = nullptr;
  return kern;
}

// A q8-dp4a kernel of R-row tiles named from its axes: its launcher, its resident-warps query (blocks of
// block_warps warps), the form's tolerance.
template <int R>
Q4Kernel q8_kernel(const Axes& axes, decltype(Q4Kernel::launch_packed) launch, int (*resident)(), int block_warps = warps_for(5120)) {
  Q4Kernel kern{variant_name(kOp, axes), axes, &refuse_raw, R, resident, block_warps};
  kern.layout = &layout<R>();
  kern.launch_packed = launch;
  kern.tolerance = form_tolerance(Form::q8);
  return kern;
}

// grid=groups,xprep=warps|warp (q8-dp4a): xprep=launch's kernels with the prep a warp per block of 32,
// 8 warps a prep block (warps) or 1 (warp).
template <int R, bool Pdl, int WPB = 8>
Q4Kernel kernel_xw() {
  static_assert(WPB == 8 || WPB == 1);
  const Axes axes{{"map", "packed"}, {"dot", form_name(Form::q8)}, {"grid", "groups"}, {"xprep", WPB == 8 ? "warps" : "warp"}, {"pdl", Pdl ? "on" : "off"},
                  {"rows", std::to_string(R)}};
  Q4Kernel kern{variant_name(kOp, axes), axes, &refuse_raw, R, &resident_warps_xl<Form::q8, R>, warps_for(5120)};
  kern.layout = &layout<R>();
  kern.launch_packed = &launch_xw<R, Pdl, WPB>;
  kern.launch_prepared = &launch_xl_prepared<R, Pdl>;
  kern.launch_packed_rows = &launch_xl_rows<R, Pdl, WPB>;
  kern.tolerance = form_tolerance(Form::q8);
  return kern;
}

// grid=groups,xprep=warp,wpf=lines (q8-dp4a): xprep=warp whose prep blocks also request the call's
// weights into L2. No launch_prepared: without its prep launch it would be xprep=warp's main kernel.
template <int R, bool Pdl>
Q4Kernel kernel_xw_lines() {
  const Axes axes{{"map", "packed"}, {"dot", form_name(Form::q8)}, {"grid", "groups"}, {"xprep", "warp"}, {"wpf", "lines"}, {"pdl", Pdl ? "on" : "off"},
                  {"rows", std::to_string(R)}};
  return q8_kernel<R>(axes, &launch_xw_lines<R, Pdl>, &resident_warps_xl<Form::q8, R>);
}

// grid=groups,xprep=cluster (q8-dp4a): x prepared in the launch, shared over clusters of 8 blocks.
template <int R, bool Pdl>
Q4Kernel kernel_xc() {
  const Axes axes{{"map", "packed"}, {"dot", form_name(Form::q8)}, {"grid", "groups"}, {"xprep", "cluster"}, {"pdl", Pdl ? "on" : "off"},
                  {"rows", std::to_string(R)}};
  return q8_kernel<R>(axes, &launch_xc<R, Pdl>, &resident_warps_xc<R>);
}

// grid=groups,xprep=flag (q8-dp4a): x prepared once in the launch by its first P blocks, behind a flag.
template <int R, bool Pdl>
Q4Kernel kernel_xf() {
  const Axes axes{{"map", "packed"}, {"dot", form_name(Form::q8)}, {"grid", "groups"}, {"xprep", "flag"}, {"pdl", Pdl ? "on" : "off"},
                  {"rows", std::to_string(R)}};
  return q8_kernel<R>(axes, &launch_xf<R, Pdl>, &resident_warps_xf<R>);
}

// grid=warp,xprep=launch,inflight=C (q8-dp4a): one warp per group, C chunks' loads in flight.
template <int R, int C, bool Pdl>
Q4Kernel kernel_warp() {
  const std::vector<std::pair<std::string, std::string>> axes{{"map", "packed"},    {"dot", form_name(Form::q8)}, {"grid", "warp"},
                                                              {"xprep", "launch"}, {"inflight", std::to_string(C)}, {"pdl", Pdl ? "on" : "off"},
                                                              {"rows", std::to_string(R)}};
  return q8_kernel<R>(axes, &launch_warp<R, C, Pdl>, &resident_warps_warp<R, C>, kWarpBlockWarps);
}

// grid=fill,xprep=launch,load=L (q8-dp4a): persistent blocks over a ring of shared-memory stages.
// row-split=Split (Split > 1): Split threads per block of 32 weights, each R / Split rows of a group.
// XB: xprep=block (no prep kernel, each thread quantises its block of x). Tail: tail=split (the last round's
// groups in pieces).
// WF: wait=flag (the main kernel released by its prep kernel's flag, not by the prep's completion).
// Depth: depth=D (at most D stages filled a block; launch_ring).
// Late: trigger=late (the prep kernel lets the main kernel go once its x is in).
// Warps: xprep=warps (8) or xprep=warp (1), the prep launch a warp a block of 32 (launch_ring's Warps).
template <int R, Load L, bool Pdl, bool XPf = false, bool WPf = false, int Split = 1, bool XB = false, bool Tail = false, bool WF = false, int Depth = 0,
          bool Late = false, int Warps = 0>
Q4Kernel kernel_ring() {
  Axes axes{{"map", "packed"}, {"dot", form_name(Form::q8)}, {"grid", "fill"}, {"xprep", XB ? "block" : Warps == 8 ? "warps" : Warps == 1 ? "warp" : "launch"}};
  if (WF) axes.emplace_back("wait", "flag");
  if (Late) axes.emplace_back("trigger", "late");
  axes.emplace_back("load", load_name(L));
  if (Depth > 0) axes.emplace_back("depth", std::to_string(Depth));
  if (Tail) axes.emplace_back("tail", "split");
  if (Split > 1) axes.emplace_back("row-split", std::to_string(Split));
  axes.emplace_back("pdl", Pdl ? "on" : "off");
  axes.emplace_back("rows", std::to_string(R));
  Q4Kernel kern = q8_kernel<R>(with_wpf(with_xpf(axes, XPf, "xprep"), WPf),
                               &launch_ring<R, L, Pdl, XPf, WPf, Split, XB, false, Tail, false, WF, Depth, Late, false, Warps>,
                               &resident_warps_ring<R, L, Split, XB, XPf, Tail, WF>);
  // The plain ring's main kernel alone (its xprep=producer twin): without xpf/wpf (the prefetching twins
  // run the same main kernel), xprep=block, tail=split or wait=flag (whose main kernel waits for its flag),
  // trigger=late or xprep=warps|warp (another prep kernel: its main kernel alone is its twin's).
  if constexpr (!XPf && !WPf && !XB && !Tail && !WF && !Late && Warps == 0)
    kern.launch_prepared = &launch_ring<R, L, Pdl, false, false, Split, false, false, false, true, false, Depth>;
  return kern;
}

// grid=fill,xprep=cluster,load=bulk (q8-dp4a): the ring in clusters of C, x prepared in the launch (cluster=4
// named; 8 as grid=groups,xprep=cluster's).
// grid=fill,pace=P (q8-dp4a, rows=8|4): the ring fed by a producer warp, at most P stage requests in flight a block
// (packed_paced_kernel), with its prep launch (xprep=launch, or =warps|warp: Warps) or none (xprep=block: XB);
// launch_prepared its main kernel alone (xprep=launch's only: the others' main kernel is the same or reads f32 x).
// ilp=G, row-split=Split, rows=R (R = 4) and pace=P-PA (packed_paced_kernel): launch_prepared their main kernel alone
// (for the GDN step's prepared x; their xprep=warps prep launch does not enter it).
template <int P, bool XB = false, int Warps = 0, int G = 1, int Split = 1, int R = 8, int PA = 0, int D = 0, int PerSm = 0, int St = 0,
          bool RestL2 = false>
Q4Kernel kernel_paced() {
  static_assert(Warps == 0 || Warps == 8 || Warps == 1);
  const char* prep = XB ? "block" : Warps == 8 ? "warps" : Warps == 1 ? "warp" : "launch";
  std::string pace = std::to_string(P);
  if (PA > 0) pace.append(1, '-').append(std::to_string(PA));
  Axes axes{{"map", "packed"}, {"dot", form_name(Form::q8)}, {"grid", "fill"}, {"xprep", prep}, {"load", load_name(Load::bulk)}, {"pace", pace}};
  if (G > 1) axes.emplace_back("ilp", std::to_string(G));
  if (Split > 1) axes.emplace_back("row-split", std::to_string(Split));
  if (D > 0) axes.emplace_back("defer", std::to_string(D));
  if (PerSm > 0) axes.emplace_back("per-sm", std::to_string(PerSm));
  if (St > 0) axes.emplace_back("stages", std::to_string(St));
  if (RestL2) axes.emplace_back("rest", "l2");
  axes.emplace_back("pdl", "on");
  axes.emplace_back("rows", std::to_string(R));
  Q4Kernel kern = q8_kernel<R>(axes, &launch_paced<P, false, XB, Warps, G, Split, R, PA, false, D, PerSm, St, RestL2>,
                               &resident_warps_paced<P, XB, G, Split, R, PA, D, PerSm, RestL2>, Split * warps_for(5120) + 1);
  // The main kernel alone: xprep=launch's, and any other axis's but xprep=warps|warp at rung 82's main kernel (theirs
  // is xprep=launch's) and xprep=block (no prepared form).
  if constexpr (!XB && (Warps == 0 || G > 1 || Split > 1 || R != 8 || PA > 0 || D > 0 || PerSm > 0 || RestL2))
    kern.launch_prepared = &launch_paced<P, true, false, 0, G, Split, R, PA, false, D, PerSm, St, RestL2>;
  return kern;
}
// grid=own (q8-dp4a, rows=8|4): each consumer warp owns its groups and a stage (packed_own_kernel), Owners of them a block,
// one block an SM; its prep launch a warp per block of x (xprep=warps: launch_prepared its main kernel alone) or none
// (xprep=block: the block's threads quantise x into its shared memory).
template <int R, int Owners, bool XB = false>
Q4Kernel kernel_own() {
  const Axes axes{{"map", "packed"}, {"dot", form_name(Form::q8)}, {"grid", "own"},           {"xprep", XB ? "block" : "warps"},
                  {"load", load_name(Load::bulk)}, {"owners", std::to_string(Owners)}, {"pdl", "on"}, {"rows", std::to_string(R)}};
  Q4Kernel kern = q8_kernel<R>(axes, &launch_own<R, Owners, false, XB>, &resident_warps_own<R, Owners, XB>, Owners);
  if constexpr (!XB) kern.launch_prepared = &launch_own<R, Owners, true>;
  return kern;
}
// grid=split-k (q8-dp4a, rows=8|4): clusters of C blocks, member c one chunk of k of the cluster's groups, x's chunk
// quantised in the launch (xprep=chunk: one launch a call), Owners warps a block, Sw stages a warp, at most PerSm blocks an
// SM's worth of clusters (packed_kc_kernel); launch_prepared the same kernel reading g_xq's words of its chunk.
// Flat: fold=last (no cluster launch; the last of a group's blocks folds it through global memory).
template <int R, int Owners, int Sw, int PerSm, bool Flat = false>
Q4Kernel kernel_kc() {
  Axes axes{{"map", "packed"}, {"dot", form_name(Form::q8)}, {"grid", "split-k"}, {"xprep", "chunk"}, {"load", load_name(Load::bulk)}};
  if (Flat) axes.emplace_back("fold", "last");
  axes.emplace_back("owners", std::to_string(Owners));
  axes.emplace_back("stages", std::to_string(Sw));
  axes.emplace_back("per-sm", std::to_string(PerSm));
  axes.emplace_back("pdl", "on");
  axes.emplace_back("rows", std::to_string(R));
  Q4Kernel kern = q8_kernel<R>(axes, &launch_kc<R, Owners, Sw, PerSm, false, Flat>, &resident_warps_kc<R, Owners, Sw, PerSm, Flat>, Owners);
  kern.launch_prepared = &launch_kc<R, Owners, Sw, PerSm, true, Flat>;
  return kern;
}
template <int R, bool Pdl, bool XPf, int C>
Q4Kernel kernel_ring_xc() {
  Axes axes{{"map", "packed"}, {"dot", form_name(Form::q8)}, {"grid", "fill"}, {"xprep", "cluster"}, {"load", load_name(Load::bulk)}};
  if (C != 8) axes.emplace_back("cluster", std::to_string(C));
  axes.emplace_back("pdl", Pdl ? "on" : "off");
  axes.emplace_back("rows", std::to_string(R));
  return q8_kernel<R>(with_xpf(axes, XPf, "xprep"), &launch_ring_xc<R, Pdl, XPf, C>, &resident_warps_ring_xc<R, XPf, C>);
}

// grid=groups,xprep=launch|warps,load=bulk (q8-dp4a): one block per group, its weights by one TMA copy; xprep=warps
// (Warps = 8) its prep a warp per block of x (the same main kernel, so launch_prepared is xprep=launch's alone).
template <int R, bool Pdl, int Warps = 0>
Q4Kernel kernel_ring_groups() {
  static_assert(Warps == 0 || Warps == 8);
  const Axes axes{{"map", "packed"}, {"dot", form_name(Form::q8)}, {"grid", "groups"}, {"xprep", Warps ? "warps" : "launch"}, {"load", load_name(Load::bulk)},
                  {"pdl", Pdl ? "on" : "off"}, {"rows", std::to_string(R)}};
  Q4Kernel kern = q8_kernel<R>(axes, &launch_ring_groups<R, Pdl, Warps>, &resident_warps_ring_groups<R>);
  if constexpr (Warps == 0) kern.launch_prepared = &launch_ring_groups_prepared<R, Pdl>;
  return kern;
}

// grid=half,xprep=X,load=bulk,per-sm=P[,last=regs|l2] (q8-dp4a): the ring in half an SM, P persistent
// blocks per SM; last=regs holds each block's last group in registers, last=l2 prefetches the groups
// after the ring's into L2, pre=1 fills only the first stage before the wait (packed_ring_kernel, Held /
// L2pf / Pre1).
template <int R, bool XB, int P, bool Pdl, bool XPf = false, bool Held = false, bool L2pf = false, bool Pre1 = false, int Split = 1>
Q4Kernel kernel_half() {
  Axes axes{{"map", "packed"}, {"dot", form_name(Form::q8)}, {"grid", "half"}, {"xprep", XB ? "block" : "launch"}, {"load", load_name(Load::bulk)},
            {"per-sm", std::to_string(P)}};
  if (Held || L2pf) axes.emplace_back("last", Held ? "regs" : "l2");
  if (Pre1) axes.emplace_back("pre", "1");
  if (Split > 1) axes.emplace_back("row-split", std::to_string(Split));
  axes.emplace_back("pdl", Pdl ? "on" : "off");
  axes.emplace_back("rows", std::to_string(R));
  return q8_kernel<R>(with_xpf(axes, XPf, "xprep"), &launch_half<R, XB, P, Pdl, XPf, Held, L2pf, Pre1, Split>, &resident_warps_half<P, Split>);
}

template <Form F, int R>
void add_form(std::vector<Q4Kernel>& v) {
  v.push_back(kernel_of<F, R, true, true>());
  v.push_back(kernel_of<F, R, true, false>());
  v.push_back(kernel_of<F, R, false, true>());
}
}  // namespace

std::string packed_error(std::int64_t k) { return k_error(k); }

// ---- the ring read probe (packed_kernels.hpp, `klab probe-ring`) ----
// Rung 32's launcher (grid=fill, load=bulk, rows=8, PDL) with NoDots: its grid (as many blocks as the SMs hold, two
// by shared memory), stages, TMA copies, mbarrier waits, block barriers and refills over the packed bytes; no prep
// kernel, no x, no dots (y = +0). x is never read: `packed` stands in for it in launch_ring's checks (non-null, aligned).
// Measured on the H200 (reports/h200/run-f55aa56, 2026-12-05): the loads alone 11.45 us at 17408x5120 against the PDL
// read's 11.01 (96%), 7.03 / 6.49 at 10240x5120, 4.75 / 3.95 and 4.51 / 3.97 at the 17.7 MB shapes.
void launch_ring_probe(const std::uint8_t* packed, float* y, int m, int k, cudaStream_t stream) {
  launch_ring<8, Load::bulk, true, false, false, 1, false, true>(packed, reinterpret_cast<const float*>(packed), y, m, k, stream);
}
std::int64_t ring_probe_bytes(int m, int k) { return Geometry{m, k, 8}.bytes(); }

// ---- the stamp probe (packed_kernels.hpp; Q4Stamper above) ----
int q4_stamp_points() { return kQ4StampPoints; }
std::vector<int> ring_stamp_depths() { return {0, 1, 2, 3}; }
namespace {
// The split-k kernel each StampGrid::split_k* stamps, as compile-time values: on_kc_form calls f with it, so that the
// probe's grid (kc_plan) and its launch (launch_kc) read one table.
template <int R_, int Owners_, int Sw_, int PerSm_, bool Flat_>
struct KcForm {
  static constexpr int R = R_, Owners = Owners_, Sw = Sw_, PerSm = PerSm_;
  static constexpr bool Flat = Flat_;
};
template <class F>
decltype(auto) on_kc_form(StampGrid g, F&& f) {
  switch (g) {
    case StampGrid::split_k: return f(KcForm<8, 8, 2, 2, false>{});   // rung 115
    case StampGrid::split_k1: return f(KcForm<8, 8, 2, 1, false>{});  // rung 116
    case StampGrid::split_k4: return f(KcForm<4, 8, 4, 1, false>{});  // rung 121
    case StampGrid::split_k_last: return f(KcForm<8, 8, 2, 2, true>{});  // rung 119
    default: throw Error("the stamp probe: not a grid=split-k kernel");
  }
}
}  // namespace
int q4_stamp_grid(StampGrid g, int m, int k) {
  if (auto why = launch_error(m, k); !why.empty()) throw Error("the stamp probe: " + why);
  if (auto why = k_error(k); !why.empty()) throw Error("the stamp probe: " + why);
  const int W = warps_for(k);
  const long long groups = (static_cast<long long>(m) + 7) / 8;
  if (g == StampGrid::groups) return int(groups);
  if (is_split_k(g)) {
    const KcPlan kp = on_kc_form(g, [&](auto form) {
      using Form = decltype(form);
      return kc_plan<Form::R, false, Form::Flat>(m, k, Form::Owners, Form::Sw, Form::PerSm);
    });
    if (kp.Q == 0)
      throw Error("the stamp probe: grid=split-k at " + std::to_string(m) + "x" + std::to_string(k) +
                  " runs the paced ring (k past 8192, a cluster's rows past 1024 or m past 65536): --grid paced");
    return kp.Q * kp.C;
  }
  if (g == StampGrid::paced) {
    if (W + 1 > kMaxWarps)
      throw Error("the stamp probe: --grid paced at k = " + std::to_string(k) + " (" + std::to_string(W) +
                  " consumer warps and the producer pass 1024 threads; pace=1 runs the ring there: --grid fill)");
    return int(std::min<long long>(groups, static_cast<long long>(paced_blocks_per_sm<1>(W)) * sm_count()));
  }
  return int(std::min<long long>(groups, static_cast<long long>(ring_blocks_per_sm<8, Load::bulk>(W)) * sm_count()));
}
namespace {
template <int Depth>
void stamped(bool prepared, const std::uint8_t* packed, const float* x, float* y, int m, int k, cudaStream_t stream) {
  if (prepared) launch_ring<8, Load::bulk, true, false, false, 1, false, false, false, true, false, Depth, false, true>(packed, x, y, m, k, stream);
  else launch_ring<8, Load::bulk, true, false, false, 1, false, false, false, false, false, Depth, false, true>(packed, x, y, m, k, stream);
}
// grid=groups,xprep=launch,q8-dp4a,rows=8,pdl=on (rung 10): its prep launch (unless prepared), then the stamped main
// kernel, refused where it would not hold the blocks an SM rung 10's main kernel does.
void groups_stamped(bool prepared, const std::uint8_t* packed, const float* x, float* y, int m, int k, cudaStream_t stream) {
  check_launch(packed, x, y, m, k);
  const int threads = warps_for(k) * 32;
  int plain = 0, stamped = 0;
  KLAB_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&plain, packed_xl_kernel<Form::q8, 8>, threads, 0));
  KLAB_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&stamped, packed_xl_stamp_kernel<8>, threads, 0));
  require(stamped == plain, "the stamp probe's grid=groups kernel fits " + std::to_string(stamped) + " blocks an SM, rung 10's " +
                                std::to_string(plain) + ": its launches would not be rung 10's");
  if (!prepared) launch_xprep<Form::q8, 8, true, false, false>(packed, x, m, k, stream);
  launch_maybe_pdl(true, packed_xl_stamp_kernel<8>, dim3(unsigned((static_cast<long long>(m) + 7) / 8)), dim3(unsigned(threads)), 0, stream, packed, x, y, m, k);
  KLAB_CUDA_LAUNCH("packed_xl_stamp_kernel");
}
// pace=1,xprep=warps,rows=8 (rung 85): launch_paced's Stamp, with its prep launch a warp per block of x or on prepared x.
// q4_stamp_grid refuses first where pace=1 would run the ring (launch_paced's own fallback has no stamps).
void paced_stamped(bool prepared, const std::uint8_t* packed, const float* x, float* y, int m, int k, cudaStream_t stream) {
  q4_stamp_grid(StampGrid::paced, m, k);
  if (prepared) launch_paced<1, true, false, 0, 1, 1, 8, 0, true>(packed, x, y, m, k, stream);
  else launch_paced<1, false, false, 8, 1, 1, 8, 0, true>(packed, x, y, m, k, stream);
}
}  // namespace
void launch_q4_stamped(StampGrid g, int depth, bool prepared, const std::uint8_t* packed, const float* x, float* y, int m, int k, cudaStream_t stream) {
  if (g == StampGrid::groups) {
    if (depth != 0) throw Error("the stamp probe: grid=groups has no depth (" + std::to_string(depth) + ")");
    return groups_stamped(prepared, packed, x, y, m, k, stream);
  }
  if (g == StampGrid::paced) {
    if (depth != 0) throw Error("the stamp probe: the paced ring has no depth (" + std::to_string(depth) + ")");
    return paced_stamped(prepared, packed, x, y, m, k, stream);
  }
  if (is_split_k(g)) {
    if (depth != 0) throw Error("the stamp probe: grid=split-k has no depth (" + std::to_string(depth) + ")");
    q4_stamp_grid(g, m, k);  // refuses where the launcher would run the paced ring
    // launch_kc's Stamp, quantising x's chunk in the launch or on prepared x
    return on_kc_form(g, [&](auto form) {
      using Form = decltype(form);
      if (prepared) launch_kc<Form::R, Form::Owners, Form::Sw, Form::PerSm, true, Form::Flat, true>(packed, x, y, m, k, stream);
      else launch_kc<Form::R, Form::Owners, Form::Sw, Form::PerSm, false, Form::Flat, true>(packed, x, y, m, k, stream);
    });
  }
  switch (depth) {
    case 0: return stamped<0>(prepared, packed, x, y, m, k, stream);
    case 1: return stamped<1>(prepared, packed, x, y, m, k, stream);
    case 2: return stamped<2>(prepared, packed, x, y, m, k, stream);
    case 3: return stamped<3>(prepared, packed, x, y, m, k, stream);
    default: throw Error("the ring's stamp probe: depth " + std::to_string(depth) + " (0: the ring's stages, or 1, 2, 3: depth=D's)");
  }
}
void q4_stamp_begin(unsigned long long* stamps, unsigned long long* waits, int launches, const std::uint8_t* base, long long stride, cudaStream_t s) {
  require(stride > 0 && launches >= 0, "q4_stamp_begin: the copies' stride must be positive and launches not negative (0: stamps off)");
  KLAB_CUDA(cudaMemcpyToSymbolAsync(g_q4_stamps, &stamps, sizeof stamps, 0, cudaMemcpyHostToDevice, s));
  KLAB_CUDA(cudaMemcpyToSymbolAsync(g_q4_waits, &waits, sizeof waits, 0, cudaMemcpyHostToDevice, s));
  KLAB_CUDA(cudaMemcpyToSymbolAsync(g_q4_stamp_launches, &launches, sizeof launches, 0, cudaMemcpyHostToDevice, s));
  KLAB_CUDA(cudaMemcpyToSymbolAsync(g_q4_stamp_base, &base, sizeof base, 0, cudaMemcpyHostToDevice, s));
  KLAB_CUDA(cudaMemcpyToSymbolAsync(g_q4_stamp_stride, &stride, sizeof stride, 0, cudaMemcpyHostToDevice, s));
  KLAB_CUDA(cudaStreamSynchronize(s));  // the host values above live on this stack frame
}

std::vector<Q4Kernel> packed_kernels() {
  std::vector<Q4Kernel> v;
  add_form<Form::f32, 4>(v);
  add_form<Form::f16x2, 4>(v);
  add_form<Form::q8, 4>(v);
  // xprep=launch (see packed_xl_kernel), in the ladder's best-guess order.
  v.push_back(kernel_xl<Form::q8, 8, true>());
  v.push_back(kernel_xl<Form::q8, 4, true>());
  v.push_back(kernel_xl<Form::q8, 4, false>());
  v.push_back(kernel_xl<Form::f16x2, 4, true>());
  v.push_back(kernel_xl<Form::f32, 8, true>());
  // rows=16: half rows=8's x reads per weight (48 bytes of prepared x per block serve 16 rows, not 8);
  // grid=warp (reports/h200/q4-warp-trial) read x traffic as a cost: rows=2 was its slowest.
  v.push_back(kernel_xl<Form::q8, 16, true>());
  // load=bulk | cp-async (packed_ring_kernel), best guess first; pdl=off is bulk rows=8's twin.
  v.push_back(kernel_ring<8, Load::bulk, true>());
  v.push_back(kernel_ring<4, Load::bulk, true>());
  v.push_back(kernel_ring<8, Load::cp_async, true>());
  v.push_back(kernel_ring<8, Load::bulk, false>());
  // grid=warp (packed_warp_kernel): a warp per group, whole groups in flight; best guess first, then
  // fewer rows (more warps), more rows (fewer x reads per weight), and rows=4's pdl=off twin.
  v.push_back(kernel_warp<4, 6, true>());
  v.push_back(kernel_warp<2, 8, true>());
  v.push_back(kernel_warp<8, 3, true>());
  v.push_back(kernel_warp<4, 6, false>());
  v.push_back(kernel_warp<4, 3, true>());  // half the registers (ptxas: 153 -> fewer): a PDL successor co-resides
  // grid=half (packed_ring.hpp): the ring in half an SM so that the next launch co-resides, best
  // guess first; xprep=launch isolates the residency, pdl=off is the first one's twin.
  v.push_back(kernel_half<8, true, 1, true>());
  v.push_back(kernel_half<8, true, 2, true>());
  v.push_back(kernel_half<8, false, 1, true>());
  v.push_back(kernel_half<8, true, 1, false>());
  // xpf=l2 (prefetch_x_warp): x requested ahead of the weights, on the fastest rungs of each shape
  // and the single-launch ones (xprep=block, grid=fill), where x's read lies on the path to every dot.
  v.push_back(kernel_xl<Form::q8, 8, true, true>());
  v.push_back(kernel_xl<Form::q8, 4, true, true>());
  v.push_back(kernel_xl<Form::q8, 16, true, true>());
  v.push_back(kernel_ring<8, Load::bulk, true, true>());
  v.push_back(kernel_of<Form::q8, 4, true, true, true>());
  v.push_back(kernel_half<8, true, 2, true, true>());
  v.push_back(kernel_half<8, false, 1, true, true>());
  // wpf=l2 (xprep_kernel): the prep kernel also prefetches its call's weights into L2 (at most half
  // the L2), on the xpf=l2 rungs with a prep kernel of grid=groups and the ring.
  v.push_back(kernel_xl<Form::q8, 8, true, true, true>());
  v.push_back(kernel_xl<Form::q8, 4, true, true, true>());
  v.push_back(kernel_xl<Form::q8, 16, true, true, true>());
  v.push_back(kernel_ring<8, Load::bulk, true, true, true>());
  // xprep=cluster (packed_xc_kernel): no prep kernel, x quantised once per cluster of 8 blocks and
  // shared over distributed shared memory; rows=8 is rung 10's twin, rows=4 rung 19's.
  v.push_back(kernel_xc<8, true>());
  v.push_back(kernel_xc<4, true>());
  // xprep=warps (xprep_warps_kernel): twins of the xprep=launch rows=8, 4 and 16 kernels. Measured in
  // reports/h200/run-7a808bf (stream mode): x0.963..x1.029 of their twins, the same bits (claim warps-pay not
  // held); in the GDN step's 48-layer graph x1.013, so the step's candidate uses rows=8.
  v.push_back(kernel_xw<8, true>());
  v.push_back(kernel_xw<4, true>());
  v.push_back(kernel_xw<16, true>());
  // xprep=warp: xprep=warps' prep in blocks of one warp (fits beside a full main kernel's blocks);
  // the twin of rung 42.
  v.push_back(kernel_xw<8, true, 1>());
  // xprep=flag (packed_xf_kernel): no prep kernel; x quantised once, by the launch's first blocks,
  // published by a flag; the twins of rungs 42 and 43 (xprep=warps rows=8, 4) and rows=8's pdl=off twin.
  // Measured (reports/h200/run-c00d582, H200, 2026-12-02, stream mode, against xprep=warps rows=8): 18.48 /
  // 12.61 / 8.03 / 8.02 us at the four seed shapes against 14.74 / 10.29 / 6.79 / 6.78 (x0.80 .. x0.85),
  // rows=4 slower still; the same bits (the gpu suite's xprep=flag case). The trace: one launch per call
  // but a period of 7.78 us at 6144x5120 (xprep=warps 6.69): after the hop the prep blocks' x read, their
  // stores, fence, count, the flag's release and every block's poll and g_xq read are seven dependent L2
  // round trips, each slow behind the call's 17.7 MB of weight loads; at 17408x5120 each later wave's
  // block pays the ticket atomic before its trigger and the poll before its dots. Kept as a negative result.
  v.push_back(kernel_xf<8, true>());
  v.push_back(kernel_xf<4, true>());
  v.push_back(kernel_xf<8, false>());
  // grid=half,xprep=launch,per-sm=2: two persistent blocks of the ring per SM in half its shared memory
  // with the prep kernel, the missing twin of per-sm=2's xprep=block (rung 16) and of per-sm=1's
  // xprep=launch (rung 17). Why (trace of xprep=warps at 6144x5120, reports/h200/run-c00d582): main
  // N+1 ends 4.54 us after its prep kernel (median), its blocks resident only once main N's have left, so its
  // weight loads (3.9 us of DRAM) start after main N's dots; co-resident blocks load during them.
  // Measured (reports/h200, the reference run of bafbb21, stream): 7.02 us at 6144x5120 against per-sm=1's
  // 8.58 (more consumer warps pay) and rung 10's 6.82; 19.58 against 16.98 at 17408x5120. Kept as a rung.
  v.push_back(kernel_half<8, false, 2, true>());
  // grid=groups,xprep=launch,load=bulk: rung 10's schedule (a block per group) with the weights in shared
  // memory by one TMA copy, fewer registers, more blocks an SM (launch_ring_groups).
  v.push_back(kernel_ring_groups<8, true>());
  // grid=half,xprep=launch,per-sm=2,last=regs: rung 49 with each block's last group in registers. Why
  // (rung 49 at 6144x5120: 7.02 us against rung 10's 6.82, reports/h200 of bafbb21): its two stages of
  // 23 KB preload 2 of a block's 2.9 groups (768 groups over 264 blocks; 2.4 at 5120x6144) before
  // griddepcontrol.wait; the third is requested only after the first is consumed, behind the call's
  // other loads. Held in registers (36 a thread; 640 threads an SM for two launches leave ~100 each), the
  // block's whole share is requested before the wait at the two small shapes.
  v.push_back(kernel_half<8, false, 2, true, false, true>());
  // Measured (reports/h200/run-866a17b, H200, 2026-12-03, stream, against rung 49): 19.3 / 10.2 / 7.8 / 7.8 us
  // against 18.9 / 11.6 / 6.9 / 7.5 at the four seed shapes. The trace at 6144x5120: the main kernel now ends
  // 3.23 us after its prep (rung 49: 4.26), but the prep ends 4.27 us after the main kernel before it (2.63).
  // The guess then: the prep's x read waits behind the next call's weight loads, a third more of them now
  // issued before the wait. Hence the xpf=l2 twins (the prep kernel requests x into L2 before its trigger,
  // before any weight load of its call) of rungs 49 and 51, and last=l2 (the later groups requested into L2
  // by TMA prefetches: no register, and nothing in the SM's load queue ahead of x) with xpf=l2.
  // Measured (reports/h200/run-4530fab, stream, 6144x5120): 6.77 / 7.63 / 6.88 us against their twins' 6.87 /
  // 7.77 / 6.87 (rung 54's twin: rung 52); rung 53's prep still ends 4.16 us after the main kernel before it,
  // so x's read was not the delay. At 10240x5120 rung 53 10.08 us, the fastest of that run. Kept as negative
  // results.
  v.push_back(kernel_half<8, false, 2, true, true>());
  v.push_back(kernel_half<8, false, 2, true, true, true>());
  v.push_back(kernel_half<8, false, 2, true, true, false, true>());
  // grid=half,xprep=launch,per-sm=2,pre=1: rung 49 with only its first stage requested before the wait.
  // Why (traces of rungs 49, 51-54, reports/h200/run-4530fab, 6144x5120): the more bytes a call requests before
  // its wait, the later its prep kernel ends after the main kernel before it (2.5-2.75 us for rung 49's 12 MB,
  // 4.2 for last=regs' 17.7 MB, 3.2 for last=l2's), the period unchanged or worse; at 17408x5120 it is 1.4 us.
  // If the prep's few L2 accesses queue behind the flood of requests to DRAM, fewer of them (6 MB at
  // 6144x5120: about what 4.7 TB/s times the ~1.5 us latency under load keeps in flight) shorten the hop.
  // Measured (reports/h200/run-019f260, stream): 19.08 / 11.70 / 6.94 / 7.24 us against rung 49's 18.93 /
  // 11.20 / 6.86 / 7.53. The prep now ends 1.76 us after the main kernel before it (2.53) but the main kernel 4.54 after its prep
  // (4.19): at 6144x5120 the bytes cost the same on either side of the wait. Kept as a negative result.
  v.push_back(kernel_half<8, false, 2, true, false, false, false, true>());
  // grid=groups,xprep=warp,wpf=lines: rung 45 whose one-warp prep blocks request the call's weights into L2
  // (at most half the L2) while the previous call runs (xprep_warp_lines_kernel).
  // Measured (reports/h200/run-839bf35, H200, 2026-12-04, stream): 17.69 / 13.81 / 8.64 / 9.63 us against rung
  // 45's 14.47 / 10.07 / 6.91 / 6.91 at the four seed shapes (x0.72..x0.82), and hot (weights in L2 already)
  // 6.68 against 4.92 at 6144x5120: the prefetches' issue makes the prep kernel end 1.7 us later (4.54 us after
  // the main kernel before it, rung 45 2.86) and the main kernel after it is no shorter (3.94 against 4.00).
  // Kept as a negative result.
  v.push_back(kernel_xw_lines<8, true>());
  // grid=groups,xprep=launch,regs=48: rung 10 (and, through launch_prepared, its xprep=producer twin) at 48
  // registers a thread (packed_xl_r48_kernel), the same bits. ptxas (sm_90, nvcc 13.0): 48 registers and 40
  // bytes of stack; every weight load is still issued before griddepcontrol.wait, but the first group's codes
  // are spilled after it, so the x loads wait for them (cuobjdump). Predicted: the producer twin from 5.49
  // toward ~5.2 us at 6144x5120 (rung 50's 8 blocks an SM gained 0.05-0.2 us there with its slower path).
  // Measured (reports/h200/run-r48, H200, 2026-12-04, stream, against rung 10 and its producer twin): slower on
  // every seed shape in both forms, x0.870 / x0.929 / x0.953 / x0.922 (launch) and x0.830 / x0.894 / x0.881 /
  // x0.924 (producer, 6.2 against 5.4 us at 6144x5120), hot too (x0.946): the blocks are resident ~9 us early,
  // but the spilled codes lengthen the chain after the wait. Kept as a negative result; not in q4-to-ceiling.
  v.push_back(kernel_xl<Form::q8, 8, true, false, false, true>());
  // grid=groups,xprep=launch,parts=2|3: rung 10's main kernel as 2 or 3 PDL launches over runs of its groups
  // (launch_xl_parts), the same bits. Why (reports/h200/run-r48, H200, 2026-12-04): rung 10's producer twin
  // takes 3.9 us at 6144x5120 with its weights in L2 (100.7% of the read ceiling) and 5.4 us cold. One call's
  // blocks fill the SMs (768 of the 792 that fit) and hold their weights while they wait, so the next call's
  // loads begin only as they leave: DRAM idles at every call's turn. A part holds a share of the SMs' room;
  // the next part's blocks are resident and loading while it waits and computes. Each part adds a dependent
  // hop (~0.9 us: the run's ceiling), so 2 parts a call: 2 x (hop + the part's tail, ~1.5 us) is under the
  // call's DRAM time at every seed shape (3.9 us at 6144x5120); 3 parts are not at the small shapes.
  // Predicted: the producer twin from 5.4 toward ~4.5 us at 6144x5120; with the prep launch, 3 hops a call.
  // Measured (reports/h200/run-parts, H200, 2026-12-04, stream, against rung 10 and its producer twin): slower
  // everywhere (parts=2 x0.83..x0.95, parts=3 x0.74..x0.92) but parts=2 with the prep launch at 10240x5120, 9.83
  // against 10.39 us (x1.058; rung 10 there is 1.6 waves, each part one). At 6144x5120 each producer part ends
  // 3.1 us after the one before for half the bytes: the next part's blocks are resident early, but their loads
  // queue in the same memory pipes as the part that must finish first. parts=2 is rung 57 of q4-to-ceiling; its
  // claim parts-10240 held there too (reports/h200/run-f57df58: 10.73 -> 10.37 us, x1.035).
  v.push_back(kernel_xl_parts<8, 2>());
  v.push_back(kernel_xl_parts<8, 3>());
  // row-split=2|4: the ring with 2 or 4 threads per block of 32 weights, each taking 4 or 2 of a group's 8
  // rows (packed_ring_kernel's Split), the same stages, grid and bits. Why (Nsight Compute on rung 32,
  // grid=fill,xpf=l2,load=bulk, reports/h200/run-f57df58/q4, H200, 2026-12-04): 10 warps an SM (occupancy 15%),
  // issue 24% of peak at 17408x5120, 1.10 SASS instructions per MAC; and its stream time is the same hot and
  // cold (13.8-14.2 us, run-4341948): its bound looked like its own issue rate, not DRAM. 1.10 x 89.1 M MACs over 132
  // SMs at ~1 warp instruction a cycle is ~12 us. Twice (four times) the warps on the same work should raise
  // the issue rate. Predicted: rung 32 at 17408x5120 from 14.2 toward ~12 us (the read floor 10.9); little at
  // the small shapes, where the hop and the prep launch bound the ring. Twins of rung 32 and, for row-split=2,
  // of rung 52 (grid=half,per-sm=2,xpf=l2, the fastest at 10240x5120 in run-f57df58). ptxas: 46 registers
  // (row-split=2, both grids), 32 (row-split=4), no spills.
  // Measured (reports/h200/run-split, H200, 2026-12-04, stream, against their twins; 17408x5120 / 10240x5120 /
  // 6144x5120 / 5120x6144): row-split=2 x1.008 (same) / x1.012 / x1.113 / x0.982, row-split=4 x0.994 / x0.915 /
  // x0.910 / x0.891, grid=half row-split=2 x0.982 / x1.051 (same) / x0.880 / x1.012 (same); the twins' bits on
  // every pair. The prediction missed: at 17408x5120 rung 32 stays 14.2 us. Its trace there: the main kernel
  // now ends 9.8 us after its prep kernel (11.8 before), but the prep kernel ends 4.3 us after the main kernel
  // before it (2.5): the period is unchanged. The next call's blocks request their first four stages (24 MB)
  // as this call's blocks leave, and the prep's few loads and stores queue behind them: the time moved across
  // the wait, as with every rung that moved bytes across it. Kept as negative results; rungs 58-60.
  v.push_back(kernel_ring<8, Load::bulk, true, true, false, 2>());
  v.push_back(kernel_ring<8, Load::bulk, true, true, false, 4>());
  v.push_back(kernel_half<8, false, 2, true, true, false, false, false, 2>());
  // grid=fill,xprep=block: rung 32 and its row-split=2 twin without the prep kernel, one launch a call, each
  // thread quantising its block of x after the wait (xprep=block's q8_prep: the same bits). Why (the trace of
  // row-split=2 at 17408x5120, reports/h200/run-split): the prep kernel ends 2.5-4.3 us after the main kernel
  // before it, a hop and a few loads and stores that queue behind the next call's 24 MB of stage requests.
  // Predicted: 17408x5120 from 14.2 toward ~13 us (one hop fewer; the x read after the wait still queues).
  // Measured (reports/h200/run-0e7f54b, H200, 2026-12-04, the q4-to-ceiling ladder, stream; 17408x5120 / 10240x5120 /
  // 6144x5120 / 5120x6144): 16.8 / 14.1 / 11.0 / 11.8 us against rung 32's 14.2 / 10.7 / 8.0 / 7.8 (x0.66..x0.85), and
  // with row-split=2 24.0 / 18.6 / 15.8 / 17.3 (x0.46..x0.59): far slower. Every thread's x read and quantisation
  // after the wait sit behind the call's stage requests; the prep kernel's few blocks did it for all. Kept as
  // negative results, as grid=half's xprep=block (rungs 15, 16) before them.
  v.push_back(kernel_ring<8, Load::bulk, true, true, false, 1, true>());
  v.push_back(kernel_ring<8, Load::bulk, true, true, false, 2, true>());
  // tail=split: rung 32 and its row-split=2 twin (rung 58) with the last round's groups cut into pieces of
  // R / q rows (packed_ring.hpp tail_pieces), so that no block takes a whole group more than the others. Why
  // (2026-12-05, from the plan alone): at 17408x5120 the ring's 2176 groups are 8 rounds of 264 blocks and
  // 64 groups; 64 blocks take a ninth, and the call (and its successor's wait) ends with them. Cut in 4, the
  // last round is 256 quarter groups (8.25 against 9 groups a block at most); at 5120x6144 640 groups are 2
  // rounds and 112 groups: 224 halves (2.5 against 3). The other two seed shapes keep q = 1 (their L is over
  // grid / 2): the kernel there is the ring's. Predicted: at most 8.25 / 9 of the ring's time at
  // 17408x5120 where the last round is exposed (toward 13 us), less where the next call's blocks hide it.
  // The same bits (each stored row's arithmetic is the ring's); each piece reads its group's scales (1/9 of a
  // group's bytes), so about 1% more bytes at 17408x5120 and 2% at 5120x6144. ptxas (sm_90, nvcc 13.0) for that first
  // form: 43 and 46 registers, no stack, as their twins; the other 45 kernels of this file keep their SASS
  // (scripts/sass_diff.py --flags-off --default-arg Li1E against 32002a8).
  // Measured first on an H100 (2026-12-05): the first kernel, which formed all R rows of a piece,
  // x0.830 at 17408x5120 and x0.829 at 5120x6144 (reports/h100/run-2c88263: the ring is bound by its consumption, so
  // a piece cost a whole group's work); the kernel here (a piece's rows alone, 38 and 32 registers) x0.972 / x1.009
  // (same) / x0.972 with row-split=2, and x0.972 at 16896x5120 where it cuts nothing (reports/h100/run-6346147): the
  // code costs ~3% and the ninth group it removes cost ~2% there. On the H200 (reports/h200/run-f55aa56, klab ab,
  // stream): x0.947 at 17408x5120 (14.3 -> 15.1 us), x1.006 (same) at 5120x6144, x0.930 with row-split=2, x0.969 at
  // 16896x5120. Kept as negative results.
  v.push_back(kernel_ring<8, Load::bulk, true, true, false, 1, false, true>());
  v.push_back(kernel_ring<8, Load::bulk, true, true, false, 2, false, true>());
  // grid=fill,xprep=cluster: rung 32's ring without its prep kernel, x prepared inside the launch, shared over
  // clusters of 8 (or 4) blocks by distributed shared memory (packed_ring_kernel's XC). Why (2026-12-05,
  // q4-prep-split on an H100, reports/h100/run-prep-ring): the ring's xprep=producer twin, its main kernel alone
  // on x already prepared, takes 16.21 us at 17408x5120 against 18.48 with the prep launch (99.0% against 86.8%
  // of that card's read ceiling), 7.31 against 9.37 at 6144x5120: the prep launch is what the ring loses. A
  // prep inside the launch lost before in two forms: per thread (xprep=block: 128 bytes of x a thread through
  // L2, every block all of x, ~5 MB of reads of the same 20 KB at the seed shapes) and per cluster in
  // grid=groups (its first cluster barrier's fence waited for the weight loads held in registers). Here each
  // member reads 1/C of x, coalesced, and the weights travel by TMA, which the fence does not wait for.
  // Predicted: between the producer twin and rung 32 at every seed shape; on the H200 toward ~12.5 us at
  // 17408x5120 (rung 32 14.1-14.3). xpf=l2's twin asks whether x's early L2 request matters; cluster=4
  // whether the cluster size does (twice the x reads, half the cluster's co-scheduling constraint).
  // Measured on an H100 only (reports/h100/run-ring-xc, 2026-12-05, stream, cold; 17408x5120 / 10240x5120 / 6144x5120 /
  // 5120x6144): 23.9 / 16.4 / 12.1 / 12.4 us (clusters of 8, xpf=l2), 24.1 / 16.3 / 12.1 / 12.2 (no prefetch), 21.5 / 15.9
  // / 12.0 / 12.4 (clusters of 4) against the ring's 18.4 / 12.7 / 9.3 / 9.2: x0.75..x0.85, the ring's bits. The
  // prediction missed: a launch of clusters lasts far longer (38 against 24 us first block to last at 17408x5120),
  // its clusters entering only where C slots of a GPC are free at once, every member waiting at the first cluster
  // barrier for the slowest one's x. Kept as negative results (rungs 65-67).
  v.push_back(kernel_ring_xc<8, true, true, 8>());
  v.push_back(kernel_ring_xc<8, true, false, 8>());
  v.push_back(kernel_ring_xc<8, true, true, 4>());
  // grid=fill,xprep=launch,wait=flag: the ring (rung 11: no xpf) whose main kernel is released by its prep kernel's
  // flag instead of the prep's completion (packed_ring_kernel's WF, xprep_wf_kernel). Why (2026-12-05, the H100's
  // q4-prep-split, reports/h100/run-prep-ring): the prep launch costs the ring 2.1-2.3 us a call, two grid
  // completions on the chain where its producer twin has one; in-launch preps lost in four forms. Predicted (before
  // any run): at most one hop (~0.5-0.9 us) less a call, less what the poll's L2 round trip behind the call's
  // stage requests costs: the small shapes gain most, if any; the prep's own x read still queues behind them.
  // Measured (reports/h200/run-fe10a61, H200, 2026-12-05, stream, against the ring): q4-prep-split 15.18 / 11.52 / 8.56 /
  // 8.69 us at the four seed shapes against 14.33 / 10.83 / 8.01 / 7.76 (x0.945 / x0.940 / x0.936 / x0.894), the whole
  // ladder x0.931 / x0.936 / x0.932 / x0.892; the ring's bits everywhere (and the gpu suite's wait=flag case, the timeout
  // path too). The poll, an L2 round trip behind the call's stage requests and then the block's barrier, costs more
  // than the grid completion it replaces (as grid=groups,xprep=flag's chain did, run-c00d582). Kept as a negative result.
  v.push_back(kernel_ring<8, Load::bulk, true, false, false, 1, false, false, true>());
  // depth=2|1 (2026-12-05, fifth session): rung 11's ring filling at most 2 or 1 of its stages a block (launch_ring's
  // Depth; the same kernel, its shared memory request and grid unchanged: the ring's bits). Why: `klab probe-hop` on an
  // H100 (reports/h100/run-depth): a dependent L2 round trip takes 141 ns idle, ~490 ns with 32-64 KB an SM of reads
  // in flight and ~1000 ns with 128 KB, at the same read rate (3.05-3.12 TB/s): bytes in flight past the knee add
  // queueing, not bandwidth, and the ring keeps 2 x 4 x 23 KB an SM in flight at k = 5120 while its chain's x reads
  // (the prep's, then the main kernel's) wait behind them. depth=2 keeps 92 KB an SM, depth=1 46 KB.
  // Measured on an H100 only (2026-12-05; reports/h100/run-depth, run-depth3, run-blockdepth; stream, against the ring
  // in the same run, 17408x5120 / 10240x5120 / 6144x5120 / 5120x6144): depth=2 x1.011..x1.013 / x1.071..x1.077 /
  // x1.173..x1.177 / x1.113..x1.119, depth=1 x0.955..x0.961 / x1.068..x1.078 / x1.157..x1.178 / x1.146..x1.149; the
  // ring's bits. On the H200 (reports/h200/run-4a53b8f, the whole ladder): depth=2 14.0 / 9.6 / 7.1 / 7.2 us and depth=1
  // 16.4 / 10.4 / 7.3 / 7.1 against the ring's 14.1 / 10.7 / 8.0 / 7.8 (depth=3: 9.6 us, 67.4% of the read ceiling at
  // 10240x5120, the fastest rung there).
  v.push_back(kernel_ring<8, Load::bulk, true, false, false, 1, false, false, false, 2>());
  v.push_back(kernel_ring<8, Load::bulk, true, false, false, 1, false, false, false, 1>());
  // trigger=late (2026-12-05, fifth session): the depth=2|1 rings with their prep kernel letting the main kernel go
  // only once its x is in and quantised (xprep_kernel's Late). Why: the ring's main blocks become resident as the call
  // before leaves, about when the prep's x read is issued, and their stage requests queue in front of it (run-depth:
  // the prep launch still costs the depth rings ~2 us a call on an H100, two hops being ~1.7 us idle). The same bits.
  // Measured (H100, reports/h100/run-late and run-blockdepth): x0.80..x0.94 against their twins at every seed shape: the
  // main kernel's early launch is worth more than the prep's shorter queue. Kept as a negative result.
  v.push_back(kernel_ring<8, Load::bulk, true, false, false, 1, false, false, false, 2, true>());
  v.push_back(kernel_ring<8, Load::bulk, true, false, false, 1, false, false, false, 1, true>());
  // depth=3 (the same session): between depth=2 and the ring's 4 stages at k = 5120 (138 KB an SM). Why
  // (reports/h100/run-depth, an H100): depth=2 led at 17408x5120 and 10240x5120, depth=1 at 5120x6144; the H200 reads
  // ~1.5x faster, so the depth its reads need is likely deeper (a read's bytes in flight grow with the rate).
  // Measured (H100, reports/h100/run-depth3): x1.000 / x1.105 / x0.994 / x0.999 against the ring (81.5% of that card's
  // read ceiling at 10240x5120, the fastest ring there); at the 17.7 MB shapes 3 stages already hold a block's groups.
  v.push_back(kernel_ring<8, Load::bulk, true, false, false, 1, false, false, false, 3>());
  // xprep=block at depth=2|1 (the same session): the ring without its prep launch, each thread quantising its block of
  // x after the wait (rung 61's form without xpf=l2), filling at most 2 or 1 stages. Why: rung 61 lost (x0.46..x0.85,
  // reports/h200/run-0e7f54b) with every thread's x read behind the call's ~24 MB of stage requests; at depth=1 ~6 MB
  // are in flight, and one hop a call is left instead of two. The same bits (xprep=block's words are xprep_kernel's).
  // Measured (H100, reports/h100/run-blockdepth): x0.76..x0.87 against their xprep=launch twins at every seed shape;
  // the quantisation after the wait costs more than the prep's hop even with the queue short. A negative result.
  v.push_back(kernel_ring<8, Load::bulk, true, false, false, 1, true, false, false, 2>());
  v.push_back(kernel_ring<8, Load::bulk, true, false, false, 1, true, false, false, 1>());
  // xprep=warp|warps on the depth rings (2026-12-05, sixth session, written without a device): rungs 69 (depth=2) and
  // 73 (depth=3), the fastest at 17408x5120 and 10240x5120 on the H200 (reports/h200/run-4a53b8f), with their prep
  // launch a warp a block of 32 (xprep_warps_kernel<1> or <8>: xprep_kernel's words, prepared_x.cuh) instead of a
  // thread a block (xprep_kernel: 5 blocks of 32 threads at k = 5120, each thread 8 loads and ~300 dependent
  // instructions after the wait). Why: on grid=groups xprep=warps paid at every seed shape, xprep=warp at the two large
  // ones (rungs 42 and 45 against rung 10, run-4a53b8f, ratios of medians: xprep=warps x1.016 / x1.019 / x1.004 /
  // x1.020, xprep=warp x1.032 / x1.030 / x0.984 / x0.994), and the depth rings carry the same prep launch, which costs
  // them 1.3-1.7 us a call there (their producer twins).
  // Predicted (before any run): x1.01..x1.03 at the two large shapes, within 2% either way at the 17.7 MB ones. The
  // main kernel and its model are the twin's (the same words in g_xq): the same bits. No launch_prepared (the twin's).
  // Measured on an H100 (reports/h100/run-pace, against their twins): xprep=warps x1.005..x1.022, and x1.117 on depth=3
  // at 6144x5120; xprep=warp x0.984..x1.009, x1.090 there. Negative results (claims not held), kept registered.
  v.push_back(kernel_ring<8, Load::bulk, true, false, false, 1, false, false, false, 2, false, 1>());
  v.push_back(kernel_ring<8, Load::bulk, true, false, false, 1, false, false, false, 3, false, 1>());
  v.push_back(kernel_ring<8, Load::bulk, true, false, false, 1, false, false, false, 2, false, 8>());
  v.push_back(kernel_ring<8, Load::bulk, true, false, false, 1, false, false, false, 3, false, 8>());
  // row-split=2 on the depth rings (the same session, written without a device): rungs 69 (depth=2) and 73 (depth=3)
  // with each group's rows over two threads a block of 32 weights (twice the warps; packed_ring_kernel's Split, the
  // same bits). Why: the two changes take different parts of the ring's time; on the H200 (run-4a53b8f, the whole
  // ladder, ratios of medians at 17408x5120 / 10240x5120 / 6144x5120 / 5120x6144) depth=2 (fewer bytes in flight at the
  // release) x1.007 / x1.114 / x1.130 / x1.084 against the ring (rung 11), row-split=2 (more warps on a group's work
  // after the wait; rung 58 against rung 32, both xpf=l2) x1.007 / x1.010 / x1.061 / x0.958. Predicted (before any run):
  // if they compose, ~6.7 us at 6144x5120 (the ring 7.99, depth=2 7.07; the fastest rung there 6.76), the same as
  // depth=2 at the large shapes, slower at 5120x6144. Measured on an H100 (reports/h100/run-pace, against their
  // twins): depth=2 x0.992..x1.017, depth=3 x0.964..x1.082 (x1.082 at 6144x5120): negative results, kept registered.
  v.push_back(kernel_ring<8, Load::bulk, true, false, false, 2, false, false, false, 2>());
  v.push_back(kernel_ring<8, Load::bulk, true, false, false, 2, false, false, false, 3>());
  // pace=1|2 (the same session, written without a device): rung 11's ring fed by a producer warp that keeps at most
  // 1 or 2 stage requests in flight a block, before the wait too, its S stages still the buffer (packed_paced_kernel
  // says why). The ring's bits. Predicted (before any run): at the 17.7 MB shapes between depth=2 and better (the
  // buffer fills before the release as depth=3's would, with depth=1's bytes in flight at most); at 17408x5120 the
  // same as the ring or slower (one request a block in flight may not keep the reads at the rate there).
  // Measured on an H100 (reports/h100/run-pace, 2026-12-05, the whole ladder twice, stream; 17408x5120 / 10240x5120 /
  // 6144x5120 / 5120x6144): pace=1 16.24 / 10.15 / 7.50 / 8.25 us, 96.2 / 90.5 / 73.6 / 66.9% of that card's read
  // ceiling, x1.117 / x1.248 / x1.257 / x1.106 over the ring and the fastest rung at the first three shapes (rung 50
  // ahead at 5120x6144); its main kernel alone 96.5 / 98.6 / 92.8 / 90.2%. pace=2 the ring's time (x0.98..x1.02): the
  // prediction missed at 17408x5120 (one request a block keeps the reads at the rate there too). The ring's bits.
  // On the H200 (reports/h200/run-pace, the whole ladder, stream): pace=1 12.17 / 8.51 / 6.66 / 7.25 us, **90.4** / 76.0 /
  // 58.3 / 53.5% of the read ceiling (issue 13's goal at 17408x5120: held), x1.167 / x1.264 / x1.199 / x1.074 over the
  // ring; pace=2 the ring's time.
  v.push_back(kernel_paced<1>());
  v.push_back(kernel_paced<2>());
  // pace=1,xprep=block (2026-12-05, seventh session, written without a device): pace=1 without its prep launch, each
  // consumer thread quantising its block of x after the wait (q8_prep on x through L2: xprep_kernel's words, so the
  // ring's bits), one launch a call. Why: xprep=block lost on the ring (rung 61: every thread's x read behind the call's
  // ~24 MB of stage requests) and at depth=1|2 (rungs 74, 75, x0.76..x0.87 on an H100: fewer requests in flight, but a
  // block holds only 1 or 2 stages when its wait ends, so most of its bytes still stream after it). pace=1 keeps both
  // conditions: its 4 stages are full at the release while one request a block is in flight, so the x read after the
  // wait meets a short queue (`klab probe-hop`: ~390 ns beside 32-64 KB an SM in flight), and the prep launch's second
  // grid completion (1.7-2.0 us a call on the H200, the ring's producer twin, run-fe10a61) is gone.
  // Predicted (before any run): faster than pace=1 at 6144x5120 and 5120x6144 (toward its main kernel alone there),
  // within 3% at 17408x5120. Measured (H100, reports/h100/run-pace-warps, stream): x0.88 / x0.78 / x0.72 / x0.73 against
  // pace=1 at the four seed shapes: every block's 20 KB of f32 x and its quantisation after the wait cost more than the
  // prep's second grid completion. A negative result.
  v.push_back(kernel_paced<1, true>());
  // pace=1,xprep=warps (the same session): pace=1 with its prep launch a warp per block of x (xprep_warps_kernel<8>,
  // xprep_kernel's words: the same main kernel and bits). Why: on the depth rings xprep=warps was x1.005..x1.022 over
  // xprep=launch on an H100 and x1.117 at 6144x5120 on depth=3 (reports/h100/run-pace); depth=2 with it is the
  // fastest rung at 6144x5120 on the H200 (reports/h200/run-pace). Predicted: x1.00..x1.03 over pace=1. Measured (H100,
  // reports/h100/run-pace-warps): x1.000 / x1.034 / x1.066 / x1.045 over pace=1, 98.2 / 95.3 / 80.6 / 71.0% of that
  // card's read ceiling: the fastest rung at every seed shape there.
  v.push_back(kernel_paced<1, false, 8>());
  // pace=1,xprep=warp (the same session, after an H100 put xprep=warps at x1.034 / x1.066 / x1.045 over pace=1 at the
  // three smaller seed shapes, reports/h100/run-pace-warps): the prep blocks one warp each (160 blocks at k = 5120), so
  // they spread over more SMs. Predicted: within 2% of xprep=warps (on grid=groups the two were x0.98..x1.03 apart).
  v.push_back(kernel_paced<1, false, 1>());
  // grid=groups,xprep=warps,load=bulk (the same session, written after the device time was spent): rung 50 with its prep
  // a warp per block of x. Why: rung 50 is the fastest at 5120x6144 on the H200 (57.9%, reports/h200/run-pace), and the
  // prep a warp per block paid x1.045 at that shape on pace=1 (H100, reports/h100/run-pace-warps) and x1.020 on rung
  // 10 (H200, run-4a53b8f). Predicted: x1.01..x1.05 over rung 50 at the 17.7 MB shapes. Measured (H100,
  // reports/h100/run-pace-warp, a ladder slice): 8.01 against 7.99 us at 6144x5120, 8.39 against 7.77 at 5120x6144: not
  // faster. A negative result.
  v.push_back(kernel_ring_groups<8, true, 8>());
  // pace=1,xprep=warps,ilp=2|3 (2026-12-06, eighth session, written before any run): rung 85 with its consumers taking
  // 2 or 3 stages a step (packed_paced_kernel's G), the ring's bits. Why: at the 17.7 MB shapes a block has at most 3
  // groups and its 4 stages (3 at k = 6144) hold them all before the release, so what is left after it is latency, not
  // bytes. `klab probe-q4` on an H100 (reports/h100/run-pace, the ring at 6144x5120): a block's first group takes
  // 0.77 us of its own work after x arrives and the next two 1.02 us more, against no wait for bytes (0.19 us); pace=1's
  // main kernel alone reaches 92.7% there (H100, reports/h100/run-pace-warp) but the call 78.6%. With G groups a step
  // the G groups' dot chains, butterflies and the step's barrier overlap: 3 groups in 2 steps (ilp=2) or 1 (ilp=3).
  // Predicted: x1.03..x1.10 over rung 85 at 6144x5120 and 5120x6144, within 2% at 17408x5120 (bandwidth-bound there).
  // Measured (H100, reports/h100/run-ilp, a ladder slice, stream): slower at every seed shape, ilp=2 x0.955 / x0.921 /
  // x0.900 / x0.961 and ilp=3 x0.938 / x0.898 / x0.915 / x0.942 against rung 85. A block's groups are not all in its
  // stages at the release: pace=1 requests a stage once the one before has arrived, so a step of several stages waits for
  // the last of them. Negative results, kept.
  v.push_back(kernel_paced<1, false, 8, 2>());
  v.push_back(kernel_paced<1, false, 8, 3>());
  // pace=1,xprep=warps,row-split=2 (the same session, written before any run): rung 85 with each block of 32 weights over
  // two consumer threads, 4 of a group's 8 rows each (packed_paced_kernel's Split; the ring's bits). Why: the other way
  // to shorten a group's own work after the release (half the rows a thread, twice the warps); on the ring (run-split)
  // row-split=2 took ~2 us off the main kernel's work after the wait at 17408x5120 but the prep then queued behind the
  // ring's 24 MB of requests; pace=1 keeps at most one request a block in flight. Predicted: x1.02..x1.06 over rung 85 at
  // the 17.7 MB shapes, within 2% at 17408x5120. Measured (H100, reports/h100/run-ilp): x1.007 / x1.010 / x0.956 / x1.005,
  // rung 85's time. Kept.
  v.push_back(kernel_paced<1, false, 8, 1, 2>());
  // pace=1|2,xprep=warps,rows=4 (the same session, after run-ilp, written before any run): rung 85 on groups of 4 rows, so
  // stages of half the bytes (11.5 KB at k = 5120, 8 of them), with one or two requests in flight a block (pace=2: rung
  // 85's bytes in flight). The ring's bits (every q8 rung's). Why: run-ilp showed pace=1's blocks waiting for their
  // groups' bytes, one loaded round trip a stage, and 5120x6144's 640 groups of 8 over 264 blocks leave 152 blocks with 2
  // and 112 with 3 (the slowest sets the call: 81% of the blocks' time used), against 1280 groups of 4 (4 or 5 a block,
  // 97%); 6144x5120 (768 groups: 2 or 3) 97% either way. Predicted: pace=2,rows=4 x1.05..x1.12 over rung 85 at
  // 5120x6144, within 3% elsewhere; pace=1,rows=4 slower at the large shapes (half the bytes in flight).
  // Measured (H100, reports/h100/run-rows4, the whole ladder): pace=2,rows=4 slower at all four (x0.80 / x0.86 at the 17.7
  // MB shapes); pace=1,rows=4 x0.93 / x0.92 / x0.96 and **x1.095 at 5120x6144** (7.28 us, 77.8%: the fastest rung there on
  // that card). Half stages alone do not pay; fewer bytes in flight a block does, where a block's stage is largest.
  v.push_back(kernel_paced<2, false, 8, 1, 1, 4>());
  v.push_back(kernel_paced<1, false, 8, 1, 1, 4>());
  // pace=1-2,xprep=warps,rows=4|8 (the same session, after the whole ladder on an H100, reports/h100/run-rows4, written
  // before any run): one request in flight a block until its consumers pass their wait, two from then on. Why: on that
  // card rows=4 at pace=1 (11.5 KB a block in flight) was x1.095 over rung 85 (23 KB) at 5120x6144 but x0.93 / x0.92 / x0.96
  // at the other three shapes, and pace=2 at rows=4 (23 KB) lost at all four; pace=1's main kernel alone on prepared x
  // reaches 92-94% at both 17.7 MB shapes there. So the bytes in flight while the prep kernel runs (before the release)
  // cost the prep's chain, and the bytes in flight after it feed the reads: fewer before, more after. Predicted:
  // rows=4 at pace=1-2 x1.05..x1.10 over rung 85 at 5120x6144, within 3% elsewhere; rows=8 at pace=1-2 between rung 85
  // and pace=2 at the large shapes.
  // Measured (H100, reports/h100/run-pace-late, the whole ladder, 2026-12-06): rows=4 at pace=1-2 17.02 / 10.74 / 7.42 /
  // 7.41 us against pace=1,rows=4's 17.04 / 10.56 / 7.27 / 7.21 (x1.075 over rung 85 at 5120x6144, short of rows=4 at
  // pace=1); rows=8 at pace=1-2 rung 85's time (x0.990 / x0.995 at the 17.7 MB shapes). More requests after the release do
  // not pay: negative results, kept.
  v.push_back(kernel_paced<1, false, 8, 1, 1, 4, 2>());
  v.push_back(kernel_paced<1, false, 8, 1, 1, 8, 2>());
  // pace=1,xprep=warps,defer=4,rows=8|4 (2026-12-06, ninth session, written before any run): rung 85 and rung 92 with each
  // consumer warp releasing a stage itself once its codes are in registers, and the cross-warp sums of 4 groups after one
  // named barrier (packed_paced_kernel's D; the ring's bits). Why: the paced ring's stamp probe (H100,
  // reports/h100/run-pace-late) puts a block's time after the release on its own chain at the 17.7 MB shapes (x in
  // ~1 us, ~0.5 us a group, ~0.8 us to its exit; bytes waited for 5-8% of it), and a group's chain ends in a barrier over
  // the block's warps and a serial sum of W partials by R threads before the next group's dots may start; a block has 2-3
  // groups of 8 there (5-6 of 4). Predicted: x1.03..x1.08 over rung 85 at the 17.7 MB shapes (rows=4 over rung 92 by more:
  // twice the groups), within 2% at the large shapes.
  // Measured (H100, reports/h100/run-defer, a ladder slice, 2026-12-06): rows=4 **6.87 / 6.97 us at the 17.7 MB shapes
  // (80.3 / 79.2%), the fastest rung there on that card**, x1.060 / x1.037 over rows=4 at pace=1 and x1.022 / x1.135 over
  // rung 85; rows=8 rung 85's time or slower (x0.98..x0.99). The gpu case: the ring's bits. Not yet on the H200.
  v.push_back(kernel_paced<1, false, 8, 1, 1, 8, 0, 4>());
  v.push_back(kernel_paced<1, false, 8, 1, 1, 4, 0, 4>());
  // pace=1,xprep=warps,defer=8,rows=4 (the same session, after run-defer, written without a device): a window of 8 groups
  // of 4, so that a block of the 17.7 MB shapes (5-6 groups) sums once, after its last group. Predicted: x1.00..x1.03
  // over defer=4 at rows=4 there (one barrier and sum fewer a block), within 2% elsewhere. Measured (H100,
  // reports/h100/run-call35, run-out1c): 6.84 / 6.90 us, 80.7 / 80.0% at the 17.7 MB shapes, defer=4's time or a hair under.
  v.push_back(kernel_paced<1, false, 8, 1, 1, 4, 0, 8>());
  // pace=1,xprep=warps,per-sm=1,rows=8 (2026-12-06, tenth session): rung 85's kernel and bits on a grid of one block an SM
  // (132 on the H100 and the H200, not 264). Why: in the GDN layer out_proj's blocks fill the SMs' shared memory (two of
  // 96 KB an SM) from ~13 us before its release to its end, so the next layer's stacked input projections (47 MB) can
  // place no block, and request no byte, until out_proj's blocks leave; traced on an H100 (reports/h100/run-ba-conv) the
  // stacked launch then takes 19.1 us from out_proj's end, 2.5 TB/s. With out_proj on one block an SM, one stacked block
  // an SM fits beside it and fills its ring (12 MB in all) while the small kernels run. Alone it has half the bytes in
  // flight of rung 85: predicted slower there (x0.8..x0.95 at the 17.7 MB shapes); the GDN twin pace_split decides.
  v.push_back(kernel_paced<1, false, 8, 1, 1, 8, 0, 0, 1>());
  // pace=1,xprep=warps,per-sm=1,stages=4,rows=8 (the same session, after reports/h100/run-out1): rung 98 with a ring of 4
  // stages, which at k = 6144 (3 stages by ring_stages) holds 110 KB: 14.6 MB of out_proj's 17.7 in 132 blocks before
  // the release, not 10.9, and one 96 KB block of the stacked launch still fits beside it. Why: as the GDN layer's
  // out_proj (the twin pace_out1) it ends 5.5 us after the gated norm, against 4.3 on two blocks an SM, its bytes past its
  // rings streamed after the release. At k = 5120 it is rung 98 (4 stages either way).
  v.push_back(kernel_paced<1, false, 8, 1, 1, 8, 0, 0, 1, 4>());
  // Measured (H100, reports/h100/run-out1, run-out1b, 2026-12-06): rung 98 alone 84.6 / 78.9 / 73.2 / 71.1% (rung 85 96.1 /
  // 93.4 / 78.8 / 69.1%), rung 99 the same but 76.3% at 5120x6144; as the GDN layer's out_proj rung 98 makes the 48-layer
  // graph x1.08 faster (pace_out1), rung 99 x0.98 against it.
  // pace=1-2,per-sm=1 and defer=4,per-sm=1,rows=4 (the same session, after run-out1b): as out_proj beside the stacked
  // block, rung 98 ends 5.5 us after the gated norm, its rings holding 10.9 of 17.7 MB: the rest (about 2 groups a block)
  // follows the release one request at a time. Two requests in flight after the release (pace=1-2), or the window sums of
  // defer=4 at rows=4 (the fastest rung alone at 5120x6144), may shorten that tail. Predicted: 0.3-1 us a layer.
  // Measured (H100, reports/h100/run-out1c): alone 75.3 / 75.7 / 74.0 / 72.8% and 68.9 / 66.4 / 61.3 / 64.9%; as out_proj
  // in the GDN layer x0.994 and x0.952 in the 48-layer graph against rung 98. Negative results, kept.
  v.push_back(kernel_paced<1, false, 8, 1, 1, 8, 2, 0, 1>());
  v.push_back(kernel_paced<1, false, 8, 1, 1, 4, 0, 4, 1>());
  // pace=1,per-sm=1,rest=l2,rows=8 (the same session, after run-out1c): rung 98 whose producer, once its ring's first
  // requests are out, asks the L2 for the block's remaining groups. Why: as out_proj beside the stacked block rung 98 ends
  // 5.5 us after the gated norm, 6.8 of its 17.7 MB requested only after the release, one stage a block at a time from
  // the DRAM, while the DRAM has room in the ~8 us before it (the small kernels). Predicted: out_proj's tail 1-2 us
  // shorter in the GDN layer (the twin pace_out1_l2); alone within 3% of rung 98. Measured (H100, reports/h100/run-out1-l2):
  // the ring's bits (gpu case); as out_proj x0.957 in the 48-layer graph, its tail unchanged: the blocks' chain, not bytes.
  v.push_back(kernel_paced<1, false, 8, 1, 1, 8, 0, 0, 1, 0, true>());
  // pace=1,ilp=3,per-sm=1 and pace=1,row-split=2,per-sm=1 (the same session, after run-out1-l2, written after the device
  // time was spent): as out_proj beside the stacked block rung 98's tail after the gated norm (5.5 us) is its blocks'
  // chain, 5 groups a block at 5120x6144, 3 of them in its stages at the release; ilp=3 takes those 3 in one step (rung
  // 89's kernel), row-split=2 halves each group's rows a thread (rung 90's kernel, 12 consumer warps at k = 6144).
  // Predicted: 0.5-1.5 us a layer faster than pace_out1 (the twins pace_out1_ilp, pace_out1_split). Measured as out_proj
  // (H100, reports/h100/run-call44): the ring's bits; ilp=3 x0.930 and row-split=2 x0.996 in the 48-layer graph (negative).
  // Alone (H100, reports/h100/run-slice104, stream): ilp=3 66.8 / 61.6 / 59.4 / 56.1% of the read ceiling, row-split=2
  // 86.0 / 80.4 / 75.8 / 71.8% (rung 98: 84.6 / 79.0 / 73.2 / 71.0%). On the H200 (reports/h200/run-call48): 49.1 / 46.0 /
  // 44.9 / 42.8% and 68.8 / 63.7 / 55.5 / 57.4% (rung 98 66.5 / 61.0 / 54.3 / 56.1%); row-split=2 is out_proj's kernel in
  // the GDN step's candidate since (gdn::kPace1SplitPerSm1: x1.019 over rung 98 there in the 48-layer graph).
  v.push_back(kernel_paced<1, false, 8, 3, 1, 8, 0, 0, 1>());
  v.push_back(kernel_paced<1, false, 8, 1, 2, 8, 0, 0, 1>());
  // pace=1,per-sm=3,rows=8 and pace=1,defer=4,per-sm=3,rows=4 (2026-12-06, eleventh session, written after the device time
  // was spent): rung 85's and rung 96's kernels on three blocks an SM, each ring shrunk to fit (shared_ring: at k = 5120
  // 3 stages of 23 KB at rows=8, 6 of 11.5 KB at rows=4; at k = 6144 2 and 5). Why (Nsight Compute on an H100, run-span/ncu):
  // the paced kernels alone are consumer-bound (1.6-2.9 warps a scheduler, 0.2-0.27 eligible), so a third block an SM
  // brings consumers, not bytes. Predicted: faster than rungs 85 and 96 at the 17.7 MB shapes, where a launch's ramp and
  // drain weigh most; the same or slower at 17408x5120 (fewer stages a block). Measured (H200, reports/h200/run-call48,
  // 2026-12-06, stream): 89.3 / 67.3 / 56.6 / 58.2% and 90.0 / 78.5 / 63.9 / 58.9% of the read ceiling (rungs 85 and 96
  // 91.3 / 79.9 / 64.2 / 55.6% and 77.6 / 72.1 / 62.1 / 61.2%): x1.046 at 5120x6144 for the first, x1.028 at 6144x5120 for
  // the second, slower at the other 17.7 MB shape each (claim pace-per-sm3-pays not held). Kept as a negative result.
  v.push_back(kernel_paced<1, false, 8, 1, 1, 8, 0, 0, 3>());
  v.push_back(kernel_paced<1, false, 8, 1, 1, 4, 0, 4, 3>());
  // pace=1,row-split=2,per-sm=2,stages=2,rows=8 (2026-12-06, twelfth session, before any run): rung 104's kernel (row-split=2,
  // the GDN candidate's out_proj since 2026-12-06) on two blocks an SM, each ring 2 stages (launcher-only: no new kernel).
  // Why: the H200 put out_proj's end 5.5 us after the gated norm on rung 98 (reports/h200/run-call48, traced), its 17.7 MB
  // taking 3.9 us at the read ceiling, and twice the consumer warps (row-split=2) paid there (x1.019 in the 48-layer graph):
  // the paced consumers set the pace. Two blocks of 2 stages at k = 6144 (55 KB a block: 14.6 MB in the rings before the
  // release, not 10.9) give 24 consumer warps an SM and leave a stacked kPace1 block room beside them (shared memory
  // 2 x 59.5 + 96 KB, registers 2 x 416 x 64 + 192 x 56 = 64000 of 65536). Predicted alone: below rung 85 at 17408x5120
  // (2 stages a block), within 3% at the 17.7 MB shapes; as out_proj (the twin pace_split_x2) 0.3-1 us a layer under the
  // candidate on the H200. Beside it its twin without row-split (rung 85's kernel on the same grid and rings).
  // Measured (H100, reports/h100/run-call56, 2026-12-06, stream): rung 107 75.5 / 74.2 / 76.4 / 77.7% of that card's read
  // ceiling (rung 85 96.1 / 93.3 / 78.9 / 69.4%: x1.120 at 5120x6144, where its 2 stages of 27.6 KB beat 3), rung 108
  // 90.7 / 86.6 / 79.2 / 75.0% (rung 90 96.7 / 94.4 / 75.2 / 69.8%); as the GDN layer's out_proj rung 108 loses (the twin
  // pace_split_x2: x0.94 a layer, x0.951 in the 48-layer graph). Not yet on the H200.
  v.push_back(kernel_paced<1, false, 8, 1, 1, 8, 0, 0, 2, 2>());
  v.push_back(kernel_paced<1, false, 8, 1, 2, 8, 0, 0, 2, 2>());
  // pace=1,defer=8,stages=4|3,rows=4 (2026-12-06, twelfth session, after reports/h100/run-call56; launcher-only): rung 97
  // (defer=8 at rows=4, the H200's fastest at 5120x6144: 62.9%, reports/h200/run-call48) with its ring cut from 8 stages
  // (k = 5120) or 7 (k = 6144) to 4 or 3. Why: rung 107 (rung 85 on 2 stages a block, not 3) was x1.120 over rung 85 at
  // 5120x6144 on an H100, and the paced ring's comment above says why bytes in flight before the release cost the chain
  // (the prep's accesses and the grid completions behind them); at 5120x6144 rung 97's 4.8 groups a block all fit its 7
  // stages, so all of them are requested before the release. Predicted: faster than rung 97 at the 17.7 MB shapes.
  // Measured (H100, reports/h100/run-call58, 2026-12-06, stream): stages=4 87.6 / 81.4 / 75.3 / 84.2% of that card's read
  // ceiling, the fastest there at 5120x6144 (rung 97 91.4 / 88.2 / 80.5 / 80.0%: x1.052), x0.935 at 6144x5120; stages=3
  // 77.6 / 74.7 / 66.6 / 73.2%, slower everywhere. The stage count that pays depends on the shape. Not yet on the H200.
  v.push_back(kernel_paced<1, false, 8, 1, 1, 4, 0, 8, 0, 4>());
  v.push_back(kernel_paced<1, false, 8, 1, 1, 4, 0, 8, 0, 3>());
  // grid=own,owners=N (2026-12-06, thirteenth session, written before any run; packed_own_kernel says why): each warp of a
  // block owns its groups and one stage, one block an SM, no barrier a group. rows=8 on 8 warps (7 at k = 6144) and on 4
  // (out_proj's grid in the GDN layer: 120 KB at k = 6144, room for a stacked kPace1 block beside it), rows=4 on 16 warps
  // (15 at k = 6144: twice the groups, each half the rows) with its prep launch and with xprep=block (one launch a call).
  // Predicted: at the 17.7 MB shapes a warp takes at most one group of 8 rows (768 and 640 groups over 132 x 8 warps),
  // its bytes in its stage before the release, so the call's span after the release is x's copy and one group's chain,
  // not a block's 2-3 groups one after another: faster than rung 85 and rung 97 there (claim own-pays); at 17408x5120
  // within 3% of rung 85. The ring's bits.
  // Measured (H100, reports/h100/run-call61, 2026-12-06, stream; % of that card's read ceiling at 17408x5120 / 10240x5120 /
  // 6144x5120 / 5120x6144): owners=8 74.2 / 65.9 / 66.3 / 67.8, owners=4 63.4 / 55.2 / 53.2 / 55.4, owners=16,rows=4 73.2 /
  // 69.8 / 66.5 / 68.6, its xprep=block twin 76.4 / 69.5 / 58.6 / 57.0 (rung 85 97.1 / 94.0 / 79.2 / 69.5, rung 97 92.4 / 88.5
  // / 81.0 / 80.2): slower everywhere, the ring's bits. One warp walking a group's 5-6 chunks (each a butterfly of dependent
  // shuffles and a serial sum) is a longer chain than a block's warps sharing the group behind one barrier, and a warp's
  // next group waits for its own refill. Negative results (claims own-pays, own-block-pays would not hold), kept. (Measured
  // at fd8244e; since e19fe7f thread 0 initialises every warp's barrier, a change to the prologue only, run since by the
  // whole gpu suite, reports/h100/run-call62, not timed.)
  v.push_back(kernel_own<8, 8>());
  v.push_back(kernel_own<8, 4>());
  v.push_back(kernel_own<4, 16>());
  v.push_back(kernel_own<4, 16, true>());
  // grid=split-k (2026-12-06, fourteenth session, written before any run; packed_kc_kernel says why): clusters of C = k / 1024
  // blocks, each block one chunk of k of its cluster's groups, so that a block quantises only its chunk of x (4 KB) after
  // the wait: one launch a call, no prep launch, no barrier before the dots, one cluster barrier after them. rows=8 and
  // rows=4 on 8 warps of 2 stages a block, two blocks an SM's worth of clusters; rows=8 on one; rows=4 on 16 warps.
  // Predicted: at the 17.7 MB shapes faster than rung 85 and rung 97 (the prep launch's hop gone, a warp's 2 tiles of one
  // chunk after the release rather than a block's 2-3 groups); at 17408x5120 within 3% of rung 90. The ring's bits.
  // Measured (H100, reports/h100/run-call64, 2026-12-06, stream; % of that card's read ceiling at 17408x5120 / 10240x5120 /
  // 6144x5120 / 5120x6144): rows=8 per-sm=2 86.6 / 75.3 / 62.5 / 62.9, per-sm=1 71.4 / 68.6 / 61.9 / 61.8, rows=4 on 8 warps
  // 70.0 / 68.0 / 61.8 / 60.5, on 16 81.9 / 70.1 / 53.7 / 55.2 (rung 85 98.2 / 95.6 / 80.8 / 70.6, rung 97 91.5 / 88.5 / 81.5 /
  // 81.3): slower everywhere, the ring's bits; 2.1-2.6 us a call over rung 85 at every size, all four at 9.1-9.2 us at
  // 6144x5120 whatever the grid: a cost of the launch, not of the work. Negative results (claim split-k-pays would not hold), kept.
  v.push_back(kernel_kc<8, 8, 2, 2>());
  v.push_back(kernel_kc<8, 8, 2, 1>());
  v.push_back(kernel_kc<4, 8, 2, 2>());
  v.push_back(kernel_kc<4, 16, 2, 2>());
  // grid=split-k,fold=last (2026-12-06, fourteenth session, after reports/h100/run-call64, written before any run;
  // packed_kc_kernel's Flat says why): rungs 115 and 117 without the cluster launch, each group folded by the last of its
  // C blocks through global memory (a fence, a counter, the C chunk totals read back). Predicted: if the cluster launch is
  // what split-k's calls pay (2.1-2.6 us at every size), faster than their cluster twins at every shape. Measured (H100,
  // reports/h100/run-call66, 2026-12-06, stream; % of that card's read ceiling at the four seed shapes): rows=8 84.7 / 71.3 /
  // 57.7 / 50.4 (its cluster twin 85.9 / 74.2 / 61.7 / 62.6), rows=4 51.8 / 52.6 / 45.7 / 42.9 (twin 69.8 / 67.9 / 60.3 / 60.4):
  // not faster anywhere, the ring's bits. So the cluster launch is not split-k's cost (klab probe-cluster, the same call: PDL
  // cluster grids enter before the grid before them ends). Negative results (claim split-k-flat-pays would not hold), kept.
  v.push_back(kernel_kc<8, 8, 2, 2, true>());
  v.push_back(kernel_kc<4, 8, 2, 2, true>());
  // grid=split-k at one block an SM, rows=4, its rings as deep as two calls' blocks allow beside each other (79.5 KB a block:
  // 8 warps of 4 stages, 16 of 2; 2026-12-06, fifteenth session, after the stamp probe, written before any run). The
  // probe (reports/h100/run-call68, H100, 6144x5120): rung 115's blocks cannot enter beside the call before (two of 79.5 KB
  // an SM), so its releases spread over 4.4 us and a late block's 2.5 us from entry to its requests lie on the period
  // (9.9 us); rung 116 enters a whole call early (one block an SM) and is released within 1.3 us, but holds 16 of a
  // block's ~29 tiles at the release and each warp asks for its next only once it has read one: 2.7 us of its 5.6 us of
  // tiles wait for bytes. Here the same bytes are held in half-size tiles, each warp 4 deep (8 warps) or twice the warps
  // 2 deep: a refill is asked for ~4 tiles' dots ahead of its use. Predicted: faster than rung 97 at the 17.7 MB shapes.
  // Measured (H100, reports/h100/run-call69, 2026-12-06, stream; % of that card's read ceiling at the four seed shapes):
  // owners=8 of 4 stages 71.2 / 66.8 / 57.1 / 57.6, owners=16 of 2 69.7 / 64.9 / 57.4 / 57.6 (rung 116 71.3 / 67.7 / 61.2 /
  // 61.6, rung 97 91.3 / 88.1 / 80.9 / 81.1): slower, the ring's bits. The stamps: byte waits 2.72 -> 0.83 us, but warp 0's
  // tiles 6.40 us (~0.8 us a 4-row tile, one after another): bound by a warp's chain of tiles. Negative results, kept.
  v.push_back(kernel_kc<4, 8, 4, 1>());
  v.push_back(kernel_kc<4, 16, 2, 1>());
  return v;
}

}  // namespace klab::q4_gemv::packed

namespace klab::q4_gemv::packed {
namespace {
// The three symbols of a flag set, by address.
struct FlagSymbols {
  unsigned long long* ctr;
  unsigned* cnt;
  unsigned* pub;
};
FlagSymbols flag_symbols(FlagSet which) {
  void *ctr = nullptr, *cnt = nullptr, *pub = nullptr;
  const bool xf = which == FlagSet::xprep_flag;
  KLAB_CUDA(xf ? cudaGetSymbolAddress(&ctr, g_xf_ctr) : cudaGetSymbolAddress(&ctr, g_wf_ctr));
  KLAB_CUDA(xf ? cudaGetSymbolAddress(&cnt, g_xf_cnt) : cudaGetSymbolAddress(&cnt, g_wf_cnt));
  KLAB_CUDA(xf ? cudaGetSymbolAddress(&pub, g_xf_pub) : cudaGetSymbolAddress(&pub, g_wf_pub));
  return {static_cast<unsigned long long*>(ctr), static_cast<unsigned*>(cnt), static_cast<unsigned*>(pub)};
}
}  // namespace
XfCounters xf_counters(FlagSet which) {
  const FlagSymbols f = flag_symbols(which);
  unsigned long long ctr = 0;
  XfCounters c{};
  KLAB_CUDA(cudaMemcpy(&ctr, f.ctr, sizeof ctr, cudaMemcpyDeviceToHost));
  KLAB_CUDA(cudaMemcpy(&c.counted, f.cnt, sizeof c.counted, cudaMemcpyDeviceToHost));
  KLAB_CUDA(cudaMemcpy(&c.published, f.pub, sizeof c.published, cudaMemcpyDeviceToHost));
  c.tickets = std::uint32_t(ctr & 0xFFFFFFFFull), c.calls = std::uint32_t(ctr >> 32);
  return c;
}
void set_xf_counters(const XfCounters& c, FlagSet which) {
  const FlagSymbols f = flag_symbols(which);
  const unsigned long long ctr = (static_cast<unsigned long long>(c.calls) << 32) | c.tickets;
  KLAB_CUDA(cudaMemcpy(f.ctr, &ctr, sizeof ctr, cudaMemcpyHostToDevice));
  KLAB_CUDA(cudaMemcpy(f.cnt, &c.counted, sizeof c.counted, cudaMemcpyHostToDevice));
  KLAB_CUDA(cudaMemcpy(f.pub, &c.published, sizeof c.published, cudaMemcpyHostToDevice));
}
}  // namespace klab::q4_gemv::packed

namespace klab::q4_gemv {
namespace {
int span_slot(int out_k, int in_k) {
  const int a = packed::RingPlan{packed::warps_for(out_k), 8}.stage_bytes(), b = packed::RingPlan{packed::warps_for(in_k), 8}.stage_bytes();
  return std::max(a, b);
}
template <int P>
void launch_span_at(const SpanCall& c, cudaStream_t stream) {
  using namespace packed;
  const int slot = span_slot(c.out_k, c.in_m > 0 ? c.in_k : c.out_k), S = span_stages(c.out_k, c.in_m > 0 ? c.in_k : c.out_k, c.per_sm);
  const int W = std::max(std::max(warps_for(c.out_k), c.in_m > 0 ? warps_for(c.in_k) : 1), c.ba_rows > 0 ? kSpanBaThreads / 32 : 1);
  const int threads = (W + 1) * 32;
  const std::size_t smem = std::size_t(S) * std::size_t(slot);
  opt_into_ring_smem<packed_span_kernel<P>>();
  int fit = 0;
  KLAB_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, packed_span_kernel<P>, threads, smem));
  // The grid-wide barrier needs every block resident at once: per_sm an SM, each SM able to hold them.
  require(fit >= c.per_sm, "q4_gemv span: " + std::to_string(c.per_sm) + " blocks of " + std::to_string(threads) + " threads and " + std::to_string(smem) +
                               " bytes of shared memory do not fit an SM: its grid-wide barrier could never pass");
  launch_maybe_pdl(true, packed_span_kernel<P>, dim3(unsigned(c.per_sm * sm_count())), dim3(unsigned(threads)), smem, stream, c, S, unsigned(slot));
  KLAB_CUDA_LAUNCH("packed_span_kernel");
}
}  // namespace

int span_stages(int out_k, int in_k, int per_sm) { return std::min(packed::kRingMaxStages, kSpanSmem / std::max(per_sm, 1) / span_slot(out_k, in_k)); }

std::string span_error(const SpanCall& c, int pace) {
  if (pace < 1 || pace > 4) return "pace " + std::to_string(pace) + ": 1 to 4 group requests in flight a block";
  if (c.per_sm != 1 && c.per_sm != 2) return std::to_string(c.per_sm) + " blocks an SM: 1 or 2";
  if (auto why = launch_error(c.out_m, c.out_k); !why.empty()) return "out_proj: " + why;
  if (auto why = packed::k_error(c.out_k); !why.empty()) return "out_proj: " + why;
  if (c.in_m < 0 || c.ba_rows < 0) return "negative rows";
  if (c.in_m > 0 || c.ba_rows > 0) {
    if (c.in_m > 0)
      if (auto why = launch_error(c.in_m, c.in_k); !why.empty()) return "the stacked projections: " + why;
    if (auto why = packed::k_error(c.in_k); !why.empty()) return "the stacked projections: " + why;
  }
  const int W = std::max(packed::warps_for(c.out_k), c.in_m > 0 ? packed::warps_for(c.in_k) : 1);
  if (W + 1 > packed::kMaxWarps) return "k past " + std::to_string((packed::kMaxWarps - 1) * 32 * ref::kQ4Block) + ": the consumers and the producer pass 1024 threads";
  if (span_stages(c.out_k, c.in_m > 0 ? c.in_k : c.out_k, c.per_sm) < 2)
    return "a group of the larger k takes more than half of a span block's ring (" + std::to_string(kSpanSmem / c.per_sm) + " bytes)";
  if (c.ba_rows > 0)
    if (auto why = f32_gemv::split_row_error(c.ba_rows, c.in_k); !why.empty()) return "b|a rows: " + why;
  return "";
}

void launch_span(const SpanCall& c, int pace, cudaStream_t stream) {
  if (auto why = span_error(c, pace); !why.empty()) throw Error("q4_gemv span: " + why);
  require(c.out_packed && c.out_y, "q4_gemv span: a null out_proj buffer");
  require((c.in_m == 0 || (c.in_packed && c.in_y)) && ((c.in_m == 0 && c.ba_rows == 0) || c.h) && (c.ba_rows == 0 || (c.w_ba && c.ba)),
          "q4_gemv span: a null buffer (the stacked weights and output, h, W_ba and ba where their rows are asked)");
  for (const void* p : {static_cast<const void*>(c.out_packed), static_cast<const void*>(c.in_packed), static_cast<const void*>(c.h), static_cast<const void*>(c.w_ba)})
    require(reinterpret_cast<std::uintptr_t>(p) % 16 == 0, "q4_gemv span: the packed weights, h and W_ba must be 16-byte aligned");
  switch (pace) {
    case 1: return launch_span_at<1>(c, stream);
    case 2: return launch_span_at<2>(c, stream);
    case 3: return launch_span_at<3>(c, stream);
    default: return launch_span_at<4>(c, stream);
  }
}

uint4* prepared_x() {
  void* p = nullptr;
  KLAB_CUDA(cudaGetSymbolAddress(&p, packed::g_xq));
  return static_cast<uint4*>(p);
}
}  // namespace klab::q4_gemv
