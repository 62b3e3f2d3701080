#pragma once
// The bytes each operator of the GDN decode step moves (one token, one layer), beside the kernels
// they describe (gdn_kernels.hpp, projection.hpp, the recurrence): what a perfect kernel for that
// operator must read and write, split three ways:
//   weights  the layer's parameters it reads (the big three at 4 bytes per weight in the f32 tier,
//            0.5625 in the q4 tier: 4-bit codes and an f16 scale per 32; everything else f32);
//   state    the recurrent state it reads and writes (S, the conv history), each once each way;
//   act      the activations it reads from and writes to memory (h, xc, z, b|a, q, k, v, o, y...):
//            between two launches they go through memory (L2 at best); a fused step keeps them on chip.
// weights + state summed over the operators is exactly step_bytes() (step_op.hpp), gdn_step's byte
// model (tests/cpu/test_gdn_breakdown.cpp holds the two to each other); act is what the step spends
// beyond it by being nine launches. GdnDevice::step_operators attaches these to the launches.
// Pure host code.
#include <array>
#include <vector>

#include "klab/ref/gdn.hpp"

namespace klab::gdn {

struct OperatorBytes {
  double weights = 0, state = 0, act = 0;
  double model() const { return weights + state; }  // the share of step_bytes()
  double total() const { return weights + state + act; }  // what this operator moves as a launch of its own
};

// The step's operators in the order enqueue_step runs them (one launch each in the default kernels).
inline constexpr std::array<const char*, 9> kStepOperators{"in_proj_qkv", "in_proj_z", "in_proj_ba", "beta_g", "conv_silu",
                                                           "qk_norm",     "recurrence", "gated_norm", "out_proj"};
// The same step with beta_g, conv_silu and qk_norm as one launch (GdnDevice::set_fused_prep); with a
// recurrence that runs the gated norm as its epilogue (RecurrenceKernel::gated_norm), recurrence and
// gated_norm are the one operator kRecurrenceNorm in either list.
inline constexpr std::array<const char*, 7> kFusedPrepOperators{"in_proj_qkv", "in_proj_z",  "in_proj_ba", "conv_norm_bg",
                                                                "recurrence",  "gated_norm", "out_proj"};
inline constexpr const char* kRecurrenceNorm = "recurrence_norm";
// With the stacked input projections (GdnDevice::set_merged_in), in_proj_qkv and in_proj_z are the one
// operator kStackedInProj in either list.
inline constexpr const char* kStackedInProj = "in_proj_qkvz";
// With b|a folded into the stacked launch's prep kernel too (GdnDevice::set_fold_ba), kStackedInProj
// and in_proj_ba are the one operator kStackedInProjBa.
inline constexpr const char* kStackedInProjBa = "in_proj_qkvz_ba";

// With in_proj_z forked off the stacked launch (GdnDevice::set_fork_z), the stacked operator is
// kForkStacked (or kForkStackedBa with b|a folded in) and in_proj_z an operator of its own after it.
inline constexpr const char* kForkStacked = "in_proj_qkv";
inline constexpr const char* kForkStackedBa = "in_proj_qkv_ba";
// With a recurrence that forms the conv, the q/k norm and beta/g itself (prep=conv, on the fused
// prep's list), conv_norm_bg and recurrence are the one operator kConvRecurrence.
inline constexpr const char* kConvRecurrence = "conv_recurrence";
// The same with the gated norm in the recurrence too (norm=last with prep=conv,hist=ring): conv_norm_bg,
// recurrence and gated_norm as the one operator kConvRecurrenceNorm.
inline constexpr const char* kConvRecurrenceNorm = "conv_recurrence_norm";

// With b|a's rows in the fused prep's launch (GdnDevice::set_fold_ba_conv), in_proj_ba and conv_norm_bg
// are the one operator kConvNormBa.
inline constexpr const char* kConvNormBa = "conv_norm_ba";

struct OperatorModel {
  const char* name;
  OperatorBytes bytes;
};
// The nine operators' bytes for geometry g, the big three on the q4 tier (q4) or f32, in step order;
// fused_prep: the seven of kFusedPrepOperators, conv_norm_bg with the weights and state of the three
// it replaces and as act only what it reads (b|a, xc) and writes (xcv, q, k, beta, g): the q and k
// parts of xcv are no longer read back by a launch of their own. fused_norm: recurrence and gated_norm
// as kRecurrenceNorm, with both their weights and state, and as act the recurrence's with z in and
// onn out (o is still written, no longer read back). merged_in: in_proj_qkv and in_proj_z as
// kStackedInProj, both their weights, h read once, xc and z written. fold_ba (with merged_in):
// kStackedInProj and in_proj_ba as kStackedInProjBa, the three weights, h read once, xc, z and b|a written.
// fork_z (with merged_in): in_proj_z split back out of the stacked operator, right after it, with
// its own bytes as in the nine (h read again: by z's launch); the stacked one kForkStacked(Ba).
// conv_rec (with fused_prep, without fused_norm): conv_norm_bg and the recurrence as kConvRecurrence,
// with both their weights, S both ways and the history read (state), as act xc and b|a in, xcv, q, k,
// beta, g and o out; the gated norm writes the history (its state) and reads xc and the frames it moves
// again (act). hist_ring (with conv_rec: prep=conv,hist=ring): nothing moves the history; kConvRecurrence
// reads ck-1 frames and writes one (ck frames of state, none at ck = 1), and the gated norm's bytes are
// the fused prep list's; with fused_norm too (norm=last) conv_norm_bg, the recurrence and the gated norm
// are kConvRecurrenceNorm, with kConvRecurrence's bytes and the gated norm's weights, z in and onn out.
// Its history costs (ck-2) conv_dim floats less than step_bytes' read and write of ck-1 frames.
// ba_conv (with merged_in and fused_prep, without fold_ba and conv_rec): in_proj_ba inside the fused prep's
// launch as kConvNormBa, with b|a's weights beside the three it already has, as act h in and b|a out too.
std::vector<OperatorModel> step_operator_bytes(const ref::gdn::Geometry& g, bool q4, bool fused_prep = false, bool fused_norm = false,
                                               bool merged_in = false, bool fold_ba = false, bool fork_z = false, bool conv_rec = false,
                                               bool hist_ring = false, bool ba_conv = false);

}  // namespace klab::gdn
