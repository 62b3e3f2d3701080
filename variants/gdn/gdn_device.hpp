#pragma once
// The GDN decode step as a device object (DESIGN.md "The GDN step as a device object"; contracts from
// seed-digest.md sections 2-4 and 6). One GdnDevice owns, for nl layers of one geometry:
//   - the recurrent state of every layer and slot: S (slots, nl, nv, dk, dv) and the conv history
//     hist (ck-1, conv_dim) a layer and slot, f32, zero at construction; a slot is one sequence (on the
//     device each history holds ck frames and a ring position, gdn_recurrence/hist_ring.hpp: a
//     hist=ring recurrence writes its newest frame into the ring instead of a launch shifting it; every
//     readback, save_state and load_state sees the (ck-1, conv_dim) form, oldest frame first);
//   - the weights of each loaded layer: the three big projections (in_proj_qkv, in_proj_z, out_proj)
//     behind the Projection interface (projection.hpp), either f32 (load_f32: the f32 tier) or q4
//     tensors of the resident pool (use_q4 / load_q4: the q4 tier, q4_pool.hpp), never both; the
//     small ones (b|a, A_log, dt_bias, conv, norm) stay f32 in both tiers; layers may mix tiers;
//   - per loaded layer, the intermediates of that layer's last step (any slot), for get();
//   - the seven operators' kernels (gdn_kernels.hpp) and ONE step body, enqueue_step(), shared by the
//     host-facing step() and the device-resident run()/enqueue_run(); the step body is a list of nine
//     launches with their byte models (step_operators(): enqueue_step runs exactly that list, in order,
//     so the per-operator breakdown times the launches the step runs, not a copy of the step).
// Contracts, each enforced by code:
//   - a geometry a kernel cannot do is refused at construction, before any CUDA call
//     (can_implement says why);
//   - hit-only: stepping, running or reading a layer that was never loaded throws klab::Error naming
//     the layer (a recurrent state that lives on the device cannot silently fall back to the CPU);
//   - get() never truncates: a buffer too small is refused; dst == nullptr asks for the count;
//   - the q4 tier (seed-digest.md section 4): use_q4 is all or nothing (three present, pairwise
//     distinct keys of exactly the expected shapes, or nothing changes and the reason is returned);
//     no silent fallback (a q4 layer whose pooled tensor was erased, cleared or re-put since use_q4
//     makes step/run throw before anything is enqueued); the "both" state is refused both ways
//     (load_f32 on a q4 layer throws before allocating; use_q4 on a layer holding f32 big
//     projections returns the reason and changes nothing); the q4 mat-vec is a q4_gemv variant
//     chosen by name (set_q4_variant; default kDefaultQ4Variant);
//   - save_state/load_state move one layer's state (of one slot) between device and host, size- and
//     geometry-checked, so a sequence can continue on the other side (from_ref/to_ref convert to and
//     from the CPU reference's f64 State).
// Every kernel is deterministic (fixed reduction orders, no atomics): the same weights, state and
// input give the same bits in every layer, every slot and every run.
//
// Streams: every operation is enqueued on stream() (default: the legacy default stream; set_stream
// to use another, e.g. the timer's). step(), run(), get(), save_state() and load_state() synchronise
// that stream before they return; reset() and enqueue_run() do not.
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gdn/gdn_kernels.hpp"
#include "gdn/projection.hpp"
#include "gdn/q4_pool.hpp"
#include "gdn/step_bytes.hpp"
#include "gdn_recurrence/kernels.hpp"
#include "klab/cuda.hpp"
#include "klab/ref/gdn.hpp"

namespace klab::gdn {

using ref::gdn::Geometry;
using ref::gdn::LayerWeights;
using ref::gdn::What;

// One layer's recurrent state (one slot) on the host, f32, in the device layout:
// S (nv, dk, dv) and hist (ck-1, conv_dim), oldest frame first.
struct HostState {
  Geometry g;
  std::vector<float> S;
  std::vector<float> hist;
};
// To and from the CPU reference's f64 State. from_ref rounds to f32 (the device's precision); to_ref
// is exact. Both check sizes against the geometry (klab::Error).
ref::gdn::State to_ref(const HostState& s);
HostState from_ref(const Geometry& g, const ref::gdn::State& s);

// The recurrence the step runs unless told otherwise: the step's own two-pass kernel, now the
// gdn_recurrence family's A (the same code and bits the step ran before the family existed).
inline constexpr const char* kDefaultRecurrence = "gdn_recurrence/impl=seed";

class GdnDevice {
 public:
  // Why this object cannot be built for (g, nl, slots), or "" when it can. Pure host code.
  static std::string can_implement(const Geometry& g, int nl, int slots = 1);

  // Allocates the zeroed state for nl layers x `slots` sequences. Throws klab::Error (before any CUDA
  // call) when can_implement refuses, and klab::Error naming the size when the state does not fit.
  GdnDevice(const Geometry& g, int nl, int slots = 1);
  ~GdnDevice();
  GdnDevice(const GdnDevice&) = delete;
  GdnDevice& operator=(const GdnDevice&) = delete;

  const Geometry& geometry() const { return g_; }
  int layers() const { return nl_; }
  int slots() const { return slots_; }
  cudaStream_t stream() const { return stream_; }
  void set_stream(cudaStream_t s) { stream_ = s; }

  // Loads the f32 tier of `layer` (checked against the geometry and the layer range before anything
  // is allocated). Reloading replaces the weights and keeps the state. The layer's intermediates are
  // poisoned (klab::poison_value) until its first step. Refused (klab::Error, before anything is
  // allocated) when the layer is on the q4 tier: unload_projections first.
  void load_f32(int layer, const LayerWeights& w);
  // Loads (or replaces) only the small weights of `layer`: w_b, w_a, A_log, dt_bias, conv_w, norm_w
  // (w's big three are neither read nor checked and may be empty). The big projections the layer
  // had (f32, q4 or none) stay. Intermediates poisoned as in load_f32. Throws klab::Error naming the
  // tensor when one does not fit the geometry.
  void load_small(int layer, const LayerWeights& w);
  // Puts the big projections of `layer` on the q4 tier: the pool's tensors under the three keys.
  // Returns "" when done; otherwise the reason and NOTHING changed (all or nothing): layer out of
  // range, no weights loaded (load_small first), the layer holds f32 big projections ("both" state:
  // unload_projections first), a key missing, keys not pairwise distinct, a shape not exactly
  // qkv (conv_dim, hidden), z (nv*dv, hidden), out (hidden, nv*dv). A q4 layer may be re-bound.
  [[nodiscard]] std::string use_q4(int layer, int key_qkv, int key_z, int key_out);
  // load_small + use_q4 as one all-or-nothing operation: every check of both first (returning the
  // reason, nothing changed), then the load. A CUDA failure during the load throws, layer unchanged.
  [[nodiscard]] std::string load_q4(int layer, const LayerWeights& w, int key_qkv, int key_z, int key_out);
  // Drops the big projections of `layer` (f32 weights freed, q4 bindings forgotten; the pool keeps its
  // tensors); the small weights and the state stay. The layer cannot step until load_f32 or use_q4.
  void unload_projections(int layer);
  // True when `layer` holds weights (load_f32, load_small or load_q4 happened).
  bool loaded(int layer) const;
  // "f32" or "q4" for a layer whose big projections are loaded, "" otherwise.
  std::string tier(int layer) const;
  // The keys a q4 layer is bound to (nullopt for any other layer).
  std::optional<Q4Keys> q4_keys(int layer) const;
  // What computes the layer's big projections, e.g. "q4/q4_gemv/scale=per-lane,... keys qkv=1 z=2 out=3"
  // or "f32/f32_gemv/impl=warp-row,unroll=1"; "" when none.
  std::string describe(int layer) const;

  // The resident q4 pool of this device (q4_pool.hpp). Clearing it, erasing or re-putting a key
  // leaves the layers bound to those keys unable to step until use_q4 binds them again.
  Q4Pool& q4_pool() { return q4_->pool; }
  const Q4Pool& q4_pool() const { return q4_->pool; }
  // The q4_gemv variant every q4 layer runs from the next step on (a name of q4_gemv::q4_kernels();
  // klab::Error naming the known ones otherwise, nothing changed).
  void set_q4_variant(const std::string& variant);
  std::string q4_variant() const;
  // The gdn_recurrence variant that runs operator 5 (the recurrence) of every layer from the next
  // step on, by its registry name (gdn_recurrence/kernels.hpp), fed the step's own normalised q and k
  // (operators 3-4 stay the step's: their Q and K are readable intermediates). Default
  // kDefaultRecurrence. klab::Error, nothing changed, for an unknown name or one that cannot take this
  // geometry.
  void set_recurrence_variant(const std::string& variant);
  // Why the step cannot run recurrence k at geometry g ("" when it can): k's can_implement on the step's
  // arguments, with the gated-norm epilogue asked where k has one (the step then always asks it: norm=last
  // refuses a block whose threads are not dv). Pure host; set_recurrence_variant and config_error ask it.
  static std::string recurrence_error(const gdn_recurrence::RecurrenceKernel& k, const Geometry& g);
  std::string recurrence_variant() const;
  // A recurrence with prep=conv (RecurrenceKernel::conv_prep) takes the fused prep's place too: it forms
  // q, k, v, beta and g itself from xc and b|a (conv_norm_bg's bits, written to the same intermediates),
  // the conv_norm_bg launch goes, and the gated norm shifts the conv history (kernels::HistShift). It
  // needs the fused prep on and no pf=out (conv_prep_error names what is missing; the step throws). With
  // hist=ring (RecurrenceKernel::hist_ring) it writes the history's newest frame itself into the ring and
  // nothing shifts, so it may also run the gated norm (norm=last: four launches a layer); leaving such a
  // recurrence (set_recurrence_variant) rotates every history back to position 0 (synchronises), and
  // enqueue_batch refuses it (batch_error).
  std::string conv_prep_error() const;
  // The same for recurrence rec (null: none) with the fused prep on or off and L2 prefetch pf; pure host
  // (config_error asks it).
  static std::string conv_prep_error(const gdn_recurrence::RecurrenceKernel* rec, bool fused_prep, kernels::L2Prefetch pf);
  // Operators 1b, 2 and 3-4 (beta/g, conv + SiLU with the history shift, q/k norm) as ONE launch
  // (kernels::conv_norm_bg, bit for bit the three launches' results) from the next step on: the step
  // is then the seven operators of kFusedPrepOperators (step_bytes.hpp) instead of kStepOperators'
  // nine. Every intermediate stays readable (get). Default off.
  void set_fused_prep(bool on) { fused_prep_ = on; }
  bool fused_prep() const { return fused_prep_; }
  // The f32_gemv kernel of the b|a projection (operator 1a, f32 in both tiers) from the next step on,
  // by its registry name (f32_gemv/kernels.hpp); default kDefaultF32Variant. klab::Error naming the
  // known ones, nothing changed, for an unknown name.
  void set_ba_variant(const std::string& variant);
  std::string ba_variant() const { return ba_kernel_; }
  // The f32_gemv kernel of the f32 tier's big three (in_proj_qkv, in_proj_z, out_proj) for the layers
  // load_f32 loads from then on, by its registry name; default kDefaultF32Variant. klab::Error,
  // nothing changed: an unknown name (naming the known ones), or another kernel while an f32 layer is
  // loaded on the current one (its projections hold their kernel: unload_projections first). The
  // same name again is a no-op.
  void set_f32_variant(const std::string& variant);
  std::string f32_variant() const { return f32_kernel_; }
  // The step's small kernels as one PDL chain from the next step on: conv_norm_bg and gated_norm are
  // launched with programmatic stream serialization, let their dependents go first, prefetch their
  // weights and state into L2 and read and write nothing before their griddepcontrol.wait (the same
  // bits). With the projections' and the recurrence's own PDL launches, every kernel of the step then
  // overlaps its predecessor's tail. Every kernel of such a chain must load nothing a still-running
  // kernel may write before its wait, so the step refuses (klab::Error when enqueued, before any
  // launch) a chain without the fused prep, or with a recurrence that loads S before its wait
  // (RecurrenceKernel::state_before_wait: impl=fused,...,pdl=on; pdl=early is the chain's). Default off.
  void set_pdl_chain(bool on) { pdl_chain_ = on; }
  bool pdl_chain() const { return pdl_chain_; }
  // span (q4_gemv/span.hpp; issue 14): from the next operators built on, a step's out_proj and the NEXT step's input
  // side (h's q8 form, b|a and the stacked input projections) as ONE persistent launch, whose ring streams both
  // matrices without a break, its blocks entering beside the small kernels, at pace P (1 to 4 group requests in flight
  // a block; 0: off). The same bits as without it (every q4 row in the paced ring's arithmetic, which the q4 kernels of
  // rows=8 share; b|a in split-row's). Consecutive steps run it through chain_operators; a step alone (enqueue_step,
  // step_operators) runs its out_proj as a span with no next. Needs, checked when operators are built (klab::Error
  // naming the reason, before any launch): span_error. Default 0. Measured (H100, reports/h100/run-span, 2026-12-06): the
  // bits, and x0.76..x0.80 in the 48-layer graph (its consumers, not its bytes: variants/gdn/README.md); a negative result.
  // per_sm: the span's blocks an SM (1 or 2: q4_gemv::SpanCall::per_sm).
  void set_span(int pace, int per_sm = 1) { span_ = pace, span_per_sm_ = per_sm; }
  int span() const { return span_; }
  int span_per_sm() const { return span_per_sm_; }
  // Why the span cannot run with these settings ("" when it can, or pace 0): q4 out_proj on the prepared x (set_norm_q8)
  // in the PDL chain, the stacked launch with b|a in its prep (set_merged_in, set_fold_ba; no fork=z), both q4 kernels
  // in the paced ring's layout (tiles-r8), the geometry within q4_gemv::span_error.
  static std::string span_error(int pace, int per_sm, bool norm_q8, bool chain, bool merged_in, bool fold_ba, bool fork, const q4_gemv::Q4Kernel* out,
                                const q4_gemv::Q4Kernel* stacked, const Geometry& g);
  std::string span_error() const;
  // in_proj_qkv and in_proj_z as ONE q4 launch from the next step on (issue 14: "b|a folded into the
  // input projections' launch"; b|a stays f32, its own launch): both read h, so the q4 kernel runs once
  // over their rows stacked (W_qkv's conv_dim rows, then W_z's nv*dv) and writes xc and z, which lie
  // back to back. The same kernel over the same rows: the same bits (a row's dot does not depend on
  // the rows beside it; tests/gpu/test_gdn_breakdown.cpp). Each q4 layer keeps the stacked copy, in the
  // q4 kernel's layout, built here, by use_q4 / load_q4 and by set_q4_variant (they allocate and
  // synchronise: outside any stream capture); off frees them. The step's operators then begin with
  // kStackedInProj instead of in_proj_qkv, in_proj_z. Refused: on, for a geometry merged_in_error
  // names (klab::Error, nothing changed). An f32 layer with it on runs both as one stacked launch of
  // its f32 kernel instead (f32_stacked_error below: the same bits; refused, before any launch, on a
  // kernel without one). enqueue_batch keeps its three launches. Default off.
  void set_merged_in(bool on);
  bool merged_in() const { return merged_in_; }
  // Why set_merged_in(true) refuses geometry g ("" when it takes it): conv_dim % 4 != 0. Pure host.
  static std::string merged_in_error(const Geometry& g);
  // The q4 kernel of the stacked launch (set_merged_in), by name; "" (the default): the q4 variant.
  // A map=packed kernel: the stacked copy is packed in its layout, which may differ from the q4 variant's
  // (rows=4 beside rows=8: the copy is repacked when the layout the stacked launch reads changes, here or
  // in set_q4_variant). With the same dot form its bits are the q4 variant's (q4-to-ceiling: grid, xprep,
  // rows and pdl change no bit). klab::Error, nothing changed, for an unknown name or a raw-layout kernel.
  void set_stacked_q4_variant(const std::string& variant);
  std::string stacked_q4_variant() const;
  // out_proj without its x-prep launch from the next step on: the gated norm also writes onn's q8
  // form (kernels::gated_norm_q8, onn itself bit for bit) where the q4 kernel's own prep launch would
  // have, and out_proj runs Q4Kernel::launch_prepared (q4_gemv/prepared_x.cuh). The same bits as
  // without it (tests/gpu/test_gdn_breakdown.cpp). Needs, checked when a step is enqueued (klab::Error naming
  // the reason, before any launch): a q4 layer, a q4 variant with launch_prepared
  // (grid=groups,xprep=launch|warps,dot=q8-dp4a), the gated norm a launch of its own or a
  // recurrence whose epilogue writes the q8 x too (RecurrenceKernel::norm_q8: cols=128,...,norm=gated,
  // one block a head). Refused at once (klab::Error, nothing changed): a geometry gated_norm_q8_error names.
  // enqueue_batch (q4_gemm) does not use it. Default off.
  void set_norm_q8(bool on);
  bool norm_q8() const { return norm_q8_; }
  // Why a step cannot run with norm_q8 now ("" when it can, or when it is off).
  std::string norm_q8_error() const;
  // The same for a q4 kernel k (nullptr: none, as on the f32 tier), a recurrence rec (nullptr: the
  // step's default, which has no epilogue) and a geometry: what config_error (step_op.hpp) asks of a
  // configuration's kernels. Pure host.
  static std::string norm_q8_error(const q4_gemv::Q4Kernel* k, const gdn_recurrence::RecurrenceKernel* rec, const Geometry& g);
  // b|a folded into the stacked input projections' launch from the next step on: one prep launch
  // (kernels::in_prep_ba) writes h's q8 form and b|a = W_ba h, then the stacked q4 kernel runs
  // launch_prepared; the step's operators begin with kStackedInProjBa. The same bits as the stacked
  // launch on an xprep=warps kernel with b|a on f32_gemv/impl=split-row,pdl=on (tests/gpu/test_gdn_breakdown.cpp).
  // Needs, checked when a step is enqueued (klab::Error naming the reason, before any launch): the
  // stacked input projections (set_merged_in), a stacked kernel with launch_prepared, the b|a kernel
  // f32_gemv/impl=split-row,pdl=on (whose code it runs), the PDL chain, a geometry in_prep_ba takes.
  // enqueue_batch does not use it. Default off.
  void set_fold_ba(bool on);
  bool fold_ba() const { return fold_ba_; }
  // b|a as f32 rows riding along in the stacked q4 kernel's own grid instead (Q4Kernel::launch_packed_rows;
  // fold=ba-main): one launch fewer, and nothing the q4 rows wait for waits on b|a. Another f32 order than
  // split-row: b|a within f32 rounding of it, not its bits (tests/gpu/test_gdn_breakdown.cpp). Needs the
  // stacked input projections, a stacked kernel with launch_packed_rows, the PDL chain, not set_fold_ba
  // (fold_ba_error names which). On an f32 layer b|a's rows ride along in the f32 stacked launch
  // (f32_stacked_error). Default off.
  void set_fold_ba_main(bool on) { fold_ba_main_ = on; }
  bool fold_ba_main() const { return fold_ba_main_; }
  // The f32 tier's counterpart, for f32 layers: in=qkvz runs in_proj_qkv and in_proj_z as one stacked
  // launch of the f32 kernel (F32Kernel::launch_stacked; each row its own launch's bits), and with
  // fold_main b|a's rows ride along in it (the same kernel's order for b|a, not split-row's). Why an
  // f32 layer cannot step with these settings ("" when it can): fold=ba or a stacked q4 kernel of its
  // own (the q4 tier's), fold=ba-main without in=qkvz, in=qkvz on a kernel without the stacked launch.
  // Pure host; config_error asks it too.
  static std::string f32_stacked_error(bool fold_prep, bool fold_main, bool merged_in, bool stacked_kernel, const std::string& f32_kernel);
  // b|a's rows in the conv_norm_bg launch instead (fold=ba-conv; kernels::conv_norm_ba): the stacked
  // launch's prep kernel writes h's q8 form alone (kernels::in_prep: 20 blocks at hidden 5120, not in_prep_ba's
  // 116), and conv_norm_bg's launch computes b|a = W_ba h (its row weights loaded before its wait, long before
  // the stacked launch ends) and beta/g from it. The same bits as fold=ba (split-row's arithmetic at 256
  // threads; tests/gpu/test_gdn_breakdown.cpp); the operators are kStackedInProj and kConvNormBa. Needs, checked
  // when a step is enqueued (fold_ba_conv_error): the q4 tier's stacked input projections on a kernel that takes
  // its x prepared, the fused prep in its own launch (no prep=conv recurrence, no pf=out), the PDL chain, neither
  // fold=ba nor fold=ba-main, a geometry conv_norm_ba takes. enqueue_batch does not use it. Default off.
  void set_fold_ba_conv(bool on);
  bool fold_ba_conv() const { return fold_ba_conv_; }
  // Why a step cannot run with fold_ba_conv now ("" when it can, or when it is off), as fold_ba_error().
  std::string fold_ba_conv_error() const;
  // The same for the settings it depends on, at g ("" when conv is off): what config_error asks. Pure host.
  static std::string fold_ba_conv_error(bool conv, bool fold_other, bool merged_in, const q4_gemv::Q4Kernel* stacked, bool fused_prep,
                                        const gdn_recurrence::RecurrenceKernel* rec, kernels::L2Prefetch pf, bool chain, const Geometry& g);
  // Why a step cannot run with fold_ba or fold_ba_main now ("" when it can, or when both are off).
  std::string fold_ba_error() const;
  // The same for the two settings, the stacked input projections on or off, the stacked launch's
  // kernel (nullptr: none), the b|a kernel's name and the chain, at g: what config_error asks. Pure host.
  static std::string fold_ba_error(bool prep, bool main, bool merged_in, const q4_gemv::Q4Kernel* stacked, const std::string& ba, bool chain,
                                   const Geometry& g);

  // out_proj's weights prefetched into L2 by conv_norm_bg from the next step on (kernels::L2Prefetch:
  // after its blocks' work, axis pf=out, or before their wait, pf=out-early), so that out_proj's
  // DRAM reads happen while conv_norm_bg, the recurrence and the gated norm leave the DRAM mostly
  // idle. A hint only: the same bits. Needs, checked when a step is enqueued (klab::Error naming the
  // reason, before any launch): the fused prep (conv_norm_bg issues it), a q4 layer whose out_proj is
  // in the q4 variant's packed layout. enqueue_batch does not use it. Default none.
  void set_l2_prefetch(kernels::L2Prefetch pf) { l2_prefetch_ = pf; }
  kernels::L2Prefetch l2_prefetch() const { return l2_prefetch_; }
  // Why a step cannot run with pf ("" when it can, or when pf is none): the fused prep off, or a q4
  // kernel k without a packed layout (nullptr: the f32 tier). Pure host; config_error asks it too.
  static std::string l2_prefetch_error(kernels::L2Prefetch pf, bool fused_prep, const q4_gemv::Q4Kernel* k);

  // in_proj_z forked off the chain from the next step on (axis fork=z): the stacked input projections'
  // launch computes in_proj_qkv's rows (and b|a's, fold=ba / fold=ba-main) only, and in_proj_z runs as a
  // launch of its own on a second stream of this device, forked after the stacked launch and joined
  // before the first operator that reads z (the gated norm, or the recurrence whose epilogue it is). Why:
  // conv_norm_bg and the recurrence are latency-bound and leave the DRAM mostly idle (issue 14's
  // breakdown); z is read by neither, so its weights can stream while they run instead of before
  // them. On the q4 tier z is Q4Kernel::launch_prepared on its pooled tensor, reading the q8 x the
  // stacked launch's prep wrote (nothing on the chain writes that array before the join); on the f32
  // tier the layer's own f32 launch. Either way each of z's rows is computed by the same kernel code
  // as in the stacked launch: the same bits (tests/gpu/test_gdn_breakdown.cpp). step_operators lists
  // z as an operator of its own (StepOperator::forked) after the stacked one, enqueue_step runs it on
  // the branch; a stream capture takes the fork and the join as graph edges. Needs, checked when a
  // step is enqueued (klab::Error naming the reason, before any launch): fork_z_error. enqueue_batch
  // keeps its three launches. Default off. Turning it on creates the stream and its two events
  // (outside any capture).
  void set_fork_z(bool on);
  bool fork_z() const { return fork_z_; }
  // Why a step cannot run with fork=z ("" when it can, or when off): it needs the stacked input
  // projections (merged_in); on the q4 tier (q4 kernel k, stacked: the stacked launch's own kernel or
  // nullptr) a q4 variant with launch_prepared and the stacked launch on that variant itself (its prep
  // writes the q8 x z reads). f32 layers: f32_stacked_error's checks. Pure host.
  static std::string fork_z_error(bool fork, bool merged_in, const q4_gemv::Q4Kernel* k, const q4_gemv::Q4Kernel* stacked);

  // Host-facing: copies h (hidden) in, steps `layer` once in `slot`, copies y (hidden) out, syncs.
  void step(int layer, std::span<const float> h, std::span<float> y, int slot = 0);
  std::vector<float> step(int layer, std::span<const float> h, int slot = 0);
  // Device-resident: one copy in of h_seq (T, hidden), T steps on the device, one copy out of the T
  // outputs, one sync. Same step body as step(): the outputs are bitwise those of T step() calls.
  void run(int layer, int T, std::span<const float> h_seq, std::span<float> y_seq, int slot = 0);
  std::vector<float> run(int layer, int T, std::span<const float> h_seq, int slot = 0);
  // The same T steps on device buffers the caller owns (h_seq, y_seq: T*hidden floats each, 16-byte
  // aligned), enqueued on `stream`, no copy and no sync: for a device-resident layer loop, and for
  // timing the step alone. y_seq may not overlap h_seq.
  void enqueue_run(int layer, int T, const float* d_h_seq, float* d_y_seq, cudaStream_t stream, int slot = 0);

  // Batched slots (README.md "Batched slots"; first run in reports/h200/run-30bee11): ONE token of `layer` for the
  // B slots first_slot .. first_slot+B-1 at once, on device buffers the caller owns: d_h (B, hidden)
  // in, row j slot first_slot+j's input (16-byte aligned), d_y (B, hidden) out (may not overlap d_h).
  // Enqueued on `stream`, no sync. Each big projection is ONE q4_gemm launch over the B columns (its
  // weights read once for all B), b|a one launch of its f32 kernel over the B slots (ba_variant's
  // F32Kernel::launch_cols), beta/g + conv + q/k norm one conv_norm_bg_slots launch, the recurrence one launch at batch B on the slots' own S (strided
  // nl layers apart), the gated norm one launch over the B slots (or the recurrence's epilogue).
  // Bits: every slot's output, S and hist are bit for bit those of step() on that slot alone with the
  // same settings (q4_gemm's column j is the q4 kernel's output for x_j; the other kernels run each
  // slot's elements with the single-slot code; tests/gpu/test_gdn_batch.cpp).
  // Refused before any launch (klab::Error naming the problem): the checks of enqueue_run (range,
  // loaded, bindings, slots, null, alignment, overlap) and batch_error's requirements. The batch's
  // intermediates live in a scratch of the device (one for all layers, grown to the largest B and
  // reused): calls on streams that may run at once must not overlap. Growing it allocates and
  // synchronises, which a stream capture cannot hold: inside one the scratch must already be large
  // enough (reserve_batch), else refused. get() is untouched by a batch step: its intermediates and
  // OUT stay those of the layer's last single-slot step; S and HIST read a slot's state as it is now.
  void enqueue_batch(int layer, int first_slot, int B, const float* d_h, float* d_y, cudaStream_t stream);
  // Why enqueue_batch refuses B slots on the current settings ("" when it takes them; pure host): the
  // q4 kernel must be a map=packed,dot=q8-dp4a kernel of a rows= that a q4_gemm kernel has (its
  // layout is then q4_gemm's and its bits q4_gemm's columns: batch_gemm_variant names the one used),
  // the fused prep on, the recurrence impl=fused (no workspace; batch in grid.y), B in [1, kMaxCols].
  static std::string batch_error(const std::string& q4_variant, const std::string& recurrence, bool fused_prep, int B);
  // The q4_gemm kernel enqueue_batch runs for q4 kernel `q4_variant` (klab::Error when batch_error refuses it).
  static std::string batch_gemm_variant(const std::string& q4_variant);
  // The batch scratch of B slots, by tensor: floats (xc .. onn) and the q4_gemm workspace's bytes.
  struct BatchScratch {
    std::int64_t xc = 0, xcv = 0, z = 0, q = 0, k = 0, ba = 0, beta = 0, g = 0, o = 0, onn = 0;  // floats
    std::size_t workspace_bytes = 0;  // one q4_gemm workspace, the larger of hidden's and nv*dv's (the three launches share it in stream order)
    std::int64_t floats() const { return xc + xcv + z + q + k + ba + beta + g + o + onn; }
  };
  static BatchScratch batch_scratch(const Geometry& g, int B);
  // Grows the batch scratch to B slots now (allocates, synchronises; outside any capture). No-op when it holds B.
  void reserve_batch(int B);
  int batch_capacity() const;

  // One operator of the step: its name (kStepOperators, or kFusedPrepOperators with set_fused_prep), its bytes (step_bytes.hpp, for the layer's
  // tier) and the launch itself, enqueued on the stream it is given (no allocation, no sync; the
  // recurrence checks its arguments first and the q4 projections their bindings, as in the step).
  // forked (fork=z): enqueue_step runs it on the device's second stream, forked from the chain at
  // this point; joins: the chain waits for the forked operator before this one.
  struct StepOperator {
    const char* name = "";
    OperatorBytes bytes;
    std::function<void(cudaStream_t)> enqueue;
    bool forked = false, joins = false;
  };
  // The step of `layer` in `slot` on d_h (hidden) -> d_y (hidden, may not overlap d_h) as the list of
  // its operators, in the order the step runs them: running them one by one IS one step (enqueue_step
  // runs this list; tests/gpu/test_gdn_breakdown.cpp holds them bitwise equal). Checked like
  // enqueue_run (range, loaded, projections bound, slot, non-null, d_h 16-byte aligned). The list
  // holds pointers into this object: it stays valid while the layer keeps its weights and bindings and
  // the q4 and recurrence variants stay as they are (a later set_* or load_* needs a new list).
  std::vector<StepOperator> step_operators(int layer, const float* d_h, float* d_y, int slot = 0) const;
  // Enqueues a list of step_operators on `stream` as the step runs it: in order, a forked operator on
  // this device's second stream from its place in the list until the operator that joins it. One
  // stream at a time: the branch's stream and events are this device's. klab::Error before anything is
  // enqueued when a forked operator has no later join or this device has no branch (set_fork_z).
  void enqueue_operators(const std::vector<StepOperator>& ops, cudaStream_t stream) const;
  // One step of a chain: `layer` in `slot` on d_h -> d_y (as step_operators takes them).
  struct StepRef {
    int layer = 0, slot = 0;
    const float* d_h = nullptr;
    float* d_y = nullptr;
  };
  // The operators of consecutive steps, in order (each checked as step_operators checks it). With the span on,
  // steps[0] runs its own input side, step i's out_proj carries step i + 1's (so step i + 1's list starts with its
  // conv) and the last step's out_proj runs alone; off, the concatenation of the steps' step_operators.
  std::vector<StepOperator> chain_operators(const std::vector<StepRef>& steps) const;

  // Zeroes the state (S and hist) of every layer of every slot, or of one layer of one slot.
  // Enqueued on stream() (no sync). Intermediates are left as they are.
  void reset();
  void reset(int layer, int slot = 0);

  // Readback of one intermediate (of the layer's last step, whichever slot it ran in) or of the
  // state (S, HIST: of `slot`, as it is now). Returns the element count (ref::gdn::count). With
  // dst == nullptr only the count is returned (any layer in range, loaded or not). Otherwise the
  // layer must be loaded and cap >= count, else klab::Error: never truncated, dst left untouched.
  std::int64_t get(int layer, What w, float* dst, std::int64_t cap, int slot = 0) const;
  std::vector<float> get(int layer, What w, int slot = 0) const;
  // Enqueues on `stream` a device-to-device copy of what get(layer, w, .., slot) would read, into d_dst
  // (ref::gdn::count(g, w) floats), with no sync: a snapshot between two of a step's operators (the
  // token-by-token replay of tests/gpu/test_gdn_replay.cpp). HIST is refused (klab::Error: its frames lie
  // wherever the ring's position puts them; get() orders them).
  void enqueue_copy(int layer, What w, float* d_dst, cudaStream_t stream, int slot = 0) const;

  // Copies one layer's state out of / into the device (loaded layers only; load_state checks the
  // geometry and both sizes before it writes anything).
  HostState save_state(int layer, int slot = 0) const;
  void load_state(int layer, const HostState& s, int slot = 0);

 private:
  struct Layer;  // weights and intermediates of one loaded layer

  // The step body: every kernel of one token, enqueued on `stream`. d_h (hidden) in, d_y (hidden) out.
  // It runs operators_of() in order, nothing else.
  void enqueue_step(int layer, int slot, const float* d_h, float* d_y, cudaStream_t stream);
  // The step's operators without the checks of step_operators (the callers made them).
  // With the span on: own_input false leaves out the step's input side (the span before it ran it); next, when
  // given, is the step whose input side this step's out_proj runs.
  std::vector<StepOperator> operators_of(int layer, int slot, const float* d_h, float* d_y, bool own_input = true, const StepRef* next = nullptr) const;
  // The step's operators as the settings other than the span make them (operators_of's list before the span's changes).
  std::vector<StepOperator> step_list(int layer, int slot, const float* d_h, float* d_y) const;
  // Layer L's stacked input projections (set_merged_in) for a launch of kernel k: the pool's bindings of W_qkv and W_z
  // resolved first (a stale tensor throws), then, for a kernel with a layout, its packed copy of `rows` x `hidden` checked
  // to be in that layout (an internal error otherwise) and returned; nullptr for a kernel of the raw layout.
  static const std::uint8_t* stacked_in(const Q4Pool& pool, const Layer& L, const q4_gemv::Q4Kernel& k, int rows, std::int64_t hidden, const char* who);
  // The checks of step_operators on one step.
  void check_step(int layer, int slot, const float* d_h, const float* d_y, const char* what) const;
  void check_layer(int layer, const char* what) const;         // range
  void check_slot(int slot, const char* what) const;           // range
  const Layer& hit(int layer, const char* what) const;         // range + loaded (hit-only)
  // hit + big projections present + (q4) every binding still names its tensor: throws otherwise.
  const Layer& ready(int layer, const char* what) const;
  // A new Layer holding w's small weights and poisoned intermediates (w's small tensors checked first).
  std::unique_ptr<Layer> make_small(int layer, const LayerWeights& w, const char* who);
  std::string small_weights_error(int layer, const LayerWeights& w, const char* who) const;
  // Why the step cannot run as the PDL chain now ("" when it can, or when the chain is off).
  std::string chain_error() const;
  // set_merged_in: the stacked copy of one q4 layer's in_proj_qkv and in_proj_z, and of every q4 layer.
  void stack_in_proj(Layer& L);
  // The stacked launch's kernel: its own (set_stacked_q4_variant), else the q4 kernel (nullptr: no q4 kernel set).
  const q4_gemv::Q4Kernel* stacked_launch_kernel() const;
  // The layout the stacked copies are packed in: the stacked launch's own kernel's, else the q4 kernel's (nullptr: raw).
  const q4_gemv::Q4Layout* stacked_layout() const;
  void stack_all_in_proj();
  float* S_of(int layer, int slot) const;
  // Where intermediate w (not HIST) of the layer lies on the device: get's and enqueue_copy's source.
  const float* source(const Layer& L, int layer, What w, int slot) const;
  float* hist_of(int layer, int slot) const;
  int* hist_ring_of(int layer, int slot) const;  // {position, ticket} of the history's ring (hist=ring; position 0: the shifted form)
  // The ring's position of one history (copied out, synchronises the stream).
  int hist_position(int layer, int slot) const;
  // The ck-1 frames of one history at ring position pos (hist_position), oldest first, into dst (synchronises).
  void copy_hist_out(int layer, int slot, int pos, float* dst) const;
  // Every history at position 0 again, its frames rotated there (allocates, synchronises: outside any capture).
  void unring_histories();
  std::int64_t S_per_layer() const;
  std::int64_t hist_per_layer() const;  // the state's (ck-1) conv_dim floats of a history
  std::int64_t hist_stride() const;     // the ck frames a history holds on the device, from one layer or slot to the next

  Geometry g_;
  int nl_ = 0, slots_ = 1;
  cudaStream_t stream_ = nullptr;
  DeviceBuffer<float> S_;     // (slots, nl, nv, dk, dv)
  DeviceBuffer<float> hist_;  // (slots, nl, ck, conv_dim): the ck-1 frames of the state at ring positions (hist_ring.hpp), one spare
  DeviceBuffer<int> hist_ring_;  // (slots, nl, 2): each history's ring position and ticket (RecurrenceArgs::hist_ring), zero but inside a launch
  std::unique_ptr<Q4Tier> q4_;  // before layers_: their q4 projections refer to it
  const gdn_recurrence::RecurrenceKernel* rec_ = nullptr;
  DeviceBuffer<int> rec_count_;  // a norm=last recurrence's per-head counts (RecurrenceArgs::count), allocated by set_recurrence_variant
  bool fused_prep_ = false;
  bool pdl_chain_ = false;
  bool merged_in_ = false;
  bool norm_q8_ = false;
  bool fold_ba_ = false;
  bool fold_ba_main_ = false;
  bool fold_ba_conv_ = false;
  int span_ = 0;  // set_span: the pace, 0 off
  int span_per_sm_ = 1;
  kernels::L2Prefetch l2_prefetch_ = kernels::L2Prefetch::none;
  bool fork_z_ = false;
  struct Branch;                    // set_fork_z: the second stream and the fork and join events
  std::unique_ptr<Branch> branch_;
  uint4* xq_ = nullptr;  // set_norm_q8: q4_gemv::prepared_x(), resolved outside any capture
  const q4_gemv::Q4Kernel* stacked_kernel_ = nullptr;  // set_stacked_q4_variant; nullptr: the q4 variant
  std::string ba_kernel_ = kDefaultF32Variant;
  std::string f32_kernel_ = kDefaultF32Variant;  // set_f32_variant: the f32 tier's big three
  std::vector<std::unique_ptr<Layer>> layers_;
  DeviceBuffer<float> h_in_;                // step(): (hidden)
  DeviceBuffer<float> h_seq_, y_seq_;       // run(): (T, hidden), grown on demand
  struct Batch;                             // enqueue_batch's scratch
  std::unique_ptr<Batch> batch_;
};

}  // namespace klab::gdn
