// The GDN step's bytes per operator (step_bytes.hpp).
#include "gdn/step_bytes.hpp"

#include <algorithm>

#include "klab/error.hpp"

namespace klab::gdn {

std::vector<OperatorModel> step_operator_bytes(const ref::gdn::Geometry& g, bool q4, bool fused_prep, bool fused_norm, bool merged_in, bool fold_ba,
                                               bool fork_z, bool conv_rec, bool hist_ring, bool ba_conv) {
  require(!conv_rec || fused_prep, "step_operator_bytes: conv_rec (prep=conv) is on the fused prep's list");
  require(!(conv_rec && fused_norm) || hist_ring,
          "step_operator_bytes: conv_rec (prep=conv) with the gated norm in the recurrence leaves no launch to shift the history: only with hist_ring");
  require(!hist_ring || conv_rec, "step_operator_bytes: hist_ring is the history of conv_rec (prep=conv)");
  require(!ba_conv || (merged_in && fused_prep && !fold_ba && !conv_rec),
          "step_operator_bytes: ba_conv (b|a in the fused prep's launch) needs merged_in and fused_prep, without fold_ba and conv_rec");
  // Sizes in elements; every activation and small weight is f32 (4 bytes).
  const double H = g.hidden, C = g.conv_dim(), V = g.value_dim(), K = g.key_dim(), nv = g.nv;
  const double big = q4 ? 0.5625 : 4.0;  // bytes per weight of the big three
  constexpr double f = 4.0;
  std::vector<OperatorModel> m;
  m.reserve(kStepOperators.size());
  auto add = [&](int i, double w, double s, double a) { m.push_back({kStepOperators[std::size_t(i)], {w, s, a}}); };
  // 1a. xc = W_qkv h: W (C, H); h in, xc out.
  add(0, big * C * H, 0, f * (H + C));
  // 1a. z = W_z h: W (V, H); h in, z out.
  add(1, big * V * H, 0, f * (H + V));
  // 1a. b|a = W_b|a h: W (2nv, H), f32 in both tiers; h in, b|a out.
  add(2, f * 2 * nv * H, 0, f * (H + 2 * nv));
  // 1b. beta, g from b|a: A_log and dt_bias (nv each); b|a in, beta and g out.
  add(3, f * 2 * nv, 0, f * (2 * nv + 2 * nv));
  // 2. causal conv + SiLU: conv_w (C, ck); hist (ck-1, C) read and written; xc in, xcv out.
  add(4, f * C * g.ck, f * 2 * (g.ck - 1) * C, f * (C + C));
  // 3-4. q/k L2 norm: the q and k parts of xcv in (2K), q and k out (2K).
  add(5, 0, 0, f * (2 * K + 2 * K));
  // 5. recurrence: S (nv, dk, dv) read and written; q, k (K each), v (V), g, beta (nv each) in, o (V) out.
  add(6, 0, f * 2 * nv * g.dk * g.dv, f * (2 * K + V + 2 * nv + V));
  // 6. gated RMSNorm: norm_w (dv); o and z in, onn out.
  add(7, f * g.dv, 0, f * (3 * V));
  // 7. y = W_out onn: W (H, V); onn in, y out.
  add(8, big * H * V, 0, f * (V + H));
  if (fused_norm) {
    // recurrence (6) + gated_norm (7): z in and onn out beside the recurrence's own act.
    m[6] = {kRecurrenceNorm, {m[6].bytes.weights + m[7].bytes.weights, m[6].bytes.state + m[7].bytes.state, m[6].bytes.act + f * 2 * V}};
    m.erase(m.begin() + 7);
  }
  if (merged_in) {
    // in_proj_qkv (0) + in_proj_z (1): h in once, xc and z out.
    m[0] = {kStackedInProj, {m[0].bytes.weights + m[1].bytes.weights, 0, f * (H + C + V)}};
    m.erase(m.begin() + 1);
    if (fold_ba) {  // + in_proj_ba (now 1): h still read once, b|a out
      m[0] = {kStackedInProjBa, {m[0].bytes.weights + m[1].bytes.weights, 0, m[0].bytes.act + f * 2 * nv}};
      m.erase(m.begin() + 1);
    }
    if (fork_z) {  // z's weights, and its act as a launch of its own, back out of the stacked operator
      const OperatorBytes z{big * V * H, 0, f * (H + V)};
      m[0] = {fold_ba ? kForkStackedBa : kForkStacked, {m[0].bytes.weights - z.weights, 0, m[0].bytes.act - f * V}};
      m.insert(m.begin() + 1, {kStepOperators[1], z});
    }
  }
  if (!fused_prep) return m;
  const std::size_t b = (merged_in ? (fold_ba ? 1 : 2) : 3) + (merged_in && fork_z ? 1 : 0);  // beta_g's index
  // beta_g + conv_silu + qk_norm as one launch: b|a and xc in; xcv, q, k, beta and g out.
  OperatorModel fused{kFusedPrepOperators[3], {m[b].bytes.weights + m[b + 1].bytes.weights + m[b + 2].bytes.weights,
                                               m[b].bytes.state + m[b + 1].bytes.state + m[b + 2].bytes.state, f * (2 * nv + C + C + 2 * K + 2 * nv)}};
  m.erase(m.begin() + long(b), m.begin() + long(b) + 3);
  m.insert(m.begin() + long(b), fused);
  if (ba_conv) {  // in_proj_ba (b - 1) inside it: its weights, h in, b|a out (read back by nothing)
    const OperatorBytes ba = m[b - 1].bytes;
    m[b] = {kConvNormBa, {m[b].bytes.weights + ba.weights, m[b].bytes.state, m[b].bytes.act - f * 2 * nv + f * (H + 2 * nv)}};
    m.erase(m.begin() + long(b) - 1);
    return m;
  }
  if (!conv_rec) return m;
  if (hist_ring) {
    // conv_norm_bg (b) + recurrence (b + 1, with fused_norm recurrence_norm): ck-1 frames read, the newest
    // written (none without a history, ck = 1); nothing moved, the gated norm (if a launch) as before
    const double ring = g.ck > 1 ? f * g.ck * C : 0;
    const OperatorModel cr{fused_norm ? kConvRecurrenceNorm : kConvRecurrence,
                           {m[b].bytes.weights + m[b + 1].bytes.weights, m[b + 1].bytes.state + ring,
                            f * (C + 2 * nv + C + 2 * K + 2 * nv + V) + (fused_norm ? f * 2 * V : 0)}};
    m.erase(m.begin() + long(b));
    m[b] = cr;
    return m;
  }
  // conv_norm_bg (b) + recurrence (b + 1): the history read; its write moves to the gated norm (b + 2), which
  // reads xc and the frames it moves again
  const double hist = f * (g.ck - 1) * C;
  const OperatorModel cr{kConvRecurrence, {m[b].bytes.weights + m[b + 1].bytes.weights, m[b + 1].bytes.state + hist,
                                           f * (C + 2 * nv + C + 2 * K + 2 * nv + V)}};
  const OperatorBytes gn = m[b + 2].bytes;
  m[b + 2].bytes = {gn.weights, gn.state + hist, gn.act + f * (1 + std::max(0, g.ck - 2)) * C};
  m.erase(m.begin() + long(b));
  m[b] = cr;
  return m;
}

}  // namespace klab::gdn
