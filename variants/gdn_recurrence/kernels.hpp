#pragma once
// The kernel interface every gdn_recurrence variant implements, and the table of them by registry
// name: what the race's instances call, and what GdnDevice can call to run the step's recurrence
// through a named variant (recurrence_kernel("gdn_recurrence/impl=fused,cols=32,rows=4")).
//
// Per sequence b and value head h (key head kh = h / (nv/nk)), all f32, device pointers:
//   q, k   at q + b*q_stride + kh*dk, k + b*k_stride + kh*dk   (dk floats; RAW when normalize_qk)
//   v      at v + b*v_stride + h*dv                             (dv floats)
//   g, beta at g[b*gb_stride + h], beta[b*gb_stride + h]        (g: log-domain decay; beta post-sigmoid)
//   S      at S + b*S_stride + h*dk*dv, (dk, dv) row-major      (read, then written in place)
//   o      at o + b*o_stride + h*dv                             (dv floats, written)
// normalize_qk: q, k are raw; the kernel forms qn = q rsqrt(|q|^2 + 1e-6) / sqrt(dk) and
// kn = k rsqrt(|k|^2 + 1e-6) per key head (ref::gdn::kL2NormEps). Otherwise q and k are taken as
// already normalised (q already scaled): the step's qk_norm kernel output.
// Then: S *= exp(g); t = (v - S^T kn) beta; S += kn t^T; o = S^T qn (the updated S).
// Strides are in elements (floats; bf16 for S of a state=bf16 kernel). Variants that load 16 bytes at a
// time (fused) need S, o and v 16-byte aligned (S 8-byte with state=bf16; every pointer, stride and dv a
// multiple of 4 elements): check_args says which is not.
// No variant writes q, k, v, g or beta; none uses atomics: same inputs, same bits. (prep=conv forms
// them itself from the raw projections where the caller asks, RecurrenceArgs::xc, and writes its copies
// of them to the *_out tensors, never to q, k, v, g, beta.)
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace klab::gdn_recurrence {

struct RecurrenceArgs {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  const float* g = nullptr;
  const float* beta = nullptr;
  float* S = nullptr;
  float* o = nullptr;
  int nk = 0, nv = 0, dk = 0, dv = 0, batch = 1;
  std::int64_t q_stride = 0, k_stride = 0, v_stride = 0, gb_stride = 0, S_stride = 0, o_stride = 0;
  bool normalize_qk = true;
  // Scratch of workspace_floats(args) floats (device; the seed's normalised q and k), or null when
  // the kernel needs none.
  float* workspace = nullptr;
  // The GDN step's gated RMSNorm as an epilogue (kernels with RecurrenceKernel::gated_norm; onn null:
  // none, the op's own races): per sequence and value head, with z and onn at + b*o_stride + h*dv,
  //   onn[c] = o[c] * rsqrt(mean_c o[c]^2 + eps) * norm_w[c] * silu(z[c])   (o still written)
  const float* z = nullptr;
  const float* norm_w = nullptr;  // (dv)
  float* onn = nullptr;
  float eps = 0;
  // With onn: also onn's q8 form, where q4_gemv's xprep=launch kernels read their x
  // (q4_gemv/prepared_x.cuh: xq = q4_gemv::prepared_x(); block (b nv dv + h dv + c) / 32), for
  // out_proj's launch_prepared (GdnDevice::set_norm_q8). Kernels with RecurrenceKernel::norm_q8 only;
  // dv % 32 == 0.
  uint4* xq = nullptr;
  // With onn, for kernels with RecurrenceKernel::counts (norm=last): batch * nv ints, zero before the
  // launch and left zero after it (each head's last column block counts and resets its own).
  int* count = nullptr;
  // prep=conv (kernels with RecurrenceKernel::conv_prep; xc null: none, as in the op's own races): the
  // GDN step's conv + SiLU, q/k L2 norm and beta/g inside the recurrence, from the raw projections, as
  // the step's conv_norm_bg launch forms them (batch 1; q, k, v, g and beta above are then not read):
  //   xcv[ch] = silu(sum_j conv_w[ch][j] hist[j][ch] + conv_w[ch][ck-1] xc[ch])   (ch < conv_dim = 2 nk dk + nv dv;
  //             the q part of key head kh at kh dk, k at nk dk + kh dk, v of head h at 2 nk dk + h dv)
  //   q, k     xcv's parts normalised: the same block_sum order over reduce_threads(dk) threads (block_sum.cuh)
  //   beta, g  from ba (2 nv: b | a), a_log, dt_bias (nv)                                  (step_math.cuh)
  // Written for readback, each element once: xcv_out (conv_dim), q_out, k_out (nk dk), beta_out, g_out
  // (nv). hist is only read (every block of a key head reads its q and k history): the caller shifts
  // it after this launch (variants/gdn: the gated norm's HistShift). With a hist=ring kernel
  // (RecurrenceKernel::hist_ring) and hist_ring set, hist is instead a ring of ck frames (hist_ring.hpp):
  // the launch reads the ck-1 frames of position hist_ring[0], writes xc into the frame it does not read
  // (each channel once, by the block that writes its xcv) and moves the position on (the last block to
  // take a ticket in hist_ring[1], which it leaves 0). Nothing is left for the caller to shift.
  const float* xc = nullptr;
  const float* conv_w = nullptr;  // (conv_dim, ck)
  float* hist = nullptr;          // (ck-1, conv_dim), frame 0 the oldest (written only with hist_ring: (ck, conv_dim))
  const float* ba = nullptr;
  const float* a_log = nullptr;
  const float* dt_bias = nullptr;
  int ck = 0;
  float* xcv_out = nullptr;
  float* q_out = nullptr;
  float* k_out = nullptr;
  float* beta_out = nullptr;
  float* g_out = nullptr;
  int* hist_ring = nullptr;  // hist=ring: {position in [0, ck), ticket (0 between launches)} of this history (above)
};

// The arguments of `batch` densely packed sequences ((batch, nk, dk) q and k, (batch, nv, dv) v and
// o, (batch, nv) g and beta, (batch, nv, dk, dv) S): the race's layout and the export's.
RecurrenceArgs dense_args(int nk, int nv, int dk, int dv, int batch);

// The stamp probe (`klab probe-rec`, experiments/profile_cli.cpp): impl=fused,...,pdl=ahead's kernel with thread 0 of
// each block reading %globaltimer at stamp_points() points of its path (kernels_fused.cu, Stamper: entry; S requested
// and dependents let go; after the wait; pass 1 done; first barrier; pass 2 done; second barrier; exit), written to
// buf[(launch * blocks + block) * stamp_points() + i] for the first `launches` launches after stamp_begin (launch: the
// index of the launch's state copy, (S - state) / state_floats: each launch its own copy). Not a variant: the stamps
// are on the path they measure.
struct StampLauncher {
  void (*launch)(const RecurrenceArgs&, cudaStream_t) = nullptr;  // null: no such shape
  std::string (*can_implement)(const RecurrenceArgs&) = nullptr;
};
int stamp_points();
// pdl "ahead": the pdl=ahead shapes registered, cols x rows in {32x8, 16x8, 16x4, 8x4, 32x16}; "next": pdl=next's (32x8,
// 16x8); "one-ahead": pdl=one-ahead's (32x16, 32x8, 16x8: the stamp kernel launched with its cap). Any other: none.
// o_direct: pdl=ahead's o=direct shapes (32x16, 32x8, 16x8; with another pdl: none), whose points 5 and 6 coincide
// (no second reduction).
StampLauncher stamp_launcher(int cols, int rows, const std::string& pdl = "ahead", bool o_direct = false);
// Points the kernels at buf (device, launches x blocks x stamp_points() values) and at the launches' state copies
// (launch n's S at state + n state_floats), on stream s (synchronised).
void stamp_begin(unsigned long long* buf, int launches, const float* state, long long state_floats, cudaStream_t s);

struct RecurrenceKernel {
  std::string name;  // the variant's registry name: "gdn_recurrence/" + its axes
  std::vector<std::pair<std::string, std::string>> axes;
  std::string description;
  // Why the kernel cannot run these dimensions (empty: it can). Reads nk, nv, dk, dv, batch.
  std::string (*can_implement)(const RecurrenceArgs&) = nullptr;
  // Floats of scratch it needs (0: none).
  std::size_t (*workspace_floats)(const RecurrenceArgs&) = nullptr;
  // Enqueues the step on `stream` (no allocation, no sync).
  void (*launch)(const RecurrenceArgs&, cudaStream_t stream) = nullptr;
  bool vec4 = false;  // loads S, v and stores S, o 16 bytes at a time (alignment: check_args)
  // Launched with PDL and loads S BEFORE its griddepcontrol.wait (impl=fused,...,pdl=on): its caller
  // must guarantee that no kernel that may still run writes this S (kernels_fused.cu). A caller whose
  // kernels let their dependents go early (GdnDevice::set_pdl_chain) cannot, and refuses it.
  bool state_before_wait = false;
  // With state_before_wait, lets its dependents go at its start (pdl=ahead), so launches may run further
  // ahead than the one before: resident_launches says how many of its launches (grids) the current
  // device holds at once for these dimensions (the occupancy query times the SMs, over the grid: a
  // device call), from which a caller rotating state copies knows how many keep the contract
  // (min_state_copies).
  bool state_ahead = false;
  double (*resident_launches)(const RecurrenceArgs&) = nullptr;
  // Can run the gated RMSNorm epilogue (RecurrenceArgs::onn): impl=fused,...,norm=gated.
  bool gated_norm = false;
  // Can also write onn's q8 form (RecurrenceArgs::xq): norm=gated kernels whose block holds a head's
  // whole dv (cols >= dv: no cluster), impl=fused,cols=128,...,norm=gated, and norm=last.
  bool norm_q8 = false;
  // The epilogue needs RecurrenceArgs::count (norm=last: the last column block of a head runs its
  // gated norm, found by an atomic count per head; check_args refuses onn without it).
  bool counts = false;
  // state=bf16: RecurrenceArgs::S points to bf16 elements (the same (dk, dv) layout and strides, in
  // elements; 8-byte aligned), widened to f32 on load and rounded to nearest even on store. With S
  // holding bf16 values, o and the f32 values before the store are its f32 twin's bit for bit.
  bool state_bf16 = false;
  // Can form q, k, v, beta and g itself from the raw projections (RecurrenceArgs::xc): prep=conv.
  bool conv_prep = false;
  // With the conv prep, keeps the conv history as a ring of ck frames and writes its newest frame itself
  // (RecurrenceArgs::hist_ring; check_args refuses the prep without it): prep=conv,hist=ring.
  bool hist_ring = false;
};

// Every kernel, in ladder order (seed first).
const std::vector<RecurrenceKernel>& recurrence_kernels();
// By registry name; throws klab::Error naming the known ones.
const RecurrenceKernel& recurrence_kernel(const std::string& name);
// Why `a` cannot be handed to `kern` (dimensions, nv % nk, null pointers, alignment, workspace);
// empty when it can. Launchers do not check; callers do, once.
std::string check_args(const RecurrenceKernel& kern, const RecurrenceArgs& a);

// The fewest copies of S that back-to-back launches may rotate over and keep the kernel's contract (no
// launch loads a copy that a launch still in flight writes):
//   - 1 when S is loaded after griddepcontrol.wait (the predecessor is complete by then);
//   - 2 when it is loaded before the wait and the dependents are let go after the stores (pdl=on: when
//     launch n starts, launch n - 2 is complete);
//   - 2 + floor(L) with the dependents let go first (pdl=ahead), L = resident_launches: if the launch n - C
//     that wrote n's copy were still running, the C - 1 launches between would all be resident (each held
//     at its wait), which C - 1 > L rules out.
int min_state_copies(bool before_wait, bool ahead, double resident_launches);
// The same for a kernel at these dimensions (a device call for pdl=ahead).
int min_state_copies(const RecurrenceKernel& kern, const RecurrenceArgs& a);

// The kernels of each file (kernels_seed.cu, kernels_fused.cu), gathered by recurrence_kernels().
std::vector<RecurrenceKernel> seed_kernels();
std::vector<RecurrenceKernel> fused_kernels();

}  // namespace klab::gdn_recurrence
