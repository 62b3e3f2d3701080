#pragma once
// The gdn_recurrence op: operators 4-5 of the GDN decode step (ref::gdn::recurrence) for `batch`
// sequences at once, one token each: q, k raw -> L2 norm (q also scaled by 1/sqrt(dk)), then per
// value head h (key head h / (nv/nk)): S *= exp(g); t = (v - S^T k) beta; S += k t^T; o = S^T q.
// Params: nv, nk, dk, dv (Qwen3.5-27B: 48, 16, 128, 128) and batch. Outputs "o" (batch, nv, dv)
// and "S" (batch, nv, dk, dv), the state updated in place. Its variants share one kernel interface
// (kernels.hpp).
#include <cstdint>
#include <vector>

#include "klab/registry.hpp"

namespace klab::gdn_recurrence {

// Host data of one problem. Layouts, row-major, sequence b first:
//   q, k (batch, nk, dk) RAW (not normalised); v (batch, nv, dv); g (batch, nv) log-domain decay;
//   beta (batch, nv) post-sigmoid; S0 (batch, nv, dk, dv) the state before the step.
struct Workload : klab::Workload {
  int nv = 0, nk = 0, dk = 0, dv = 0, batch = 0;
  std::vector<float> q, k, v, g, beta, S0;
  std::uint64_t digest() const override;
};

// The f64 truth of a workload, sequence by sequence (ref::gdn::recurrence on the f32 inputs taken
// exactly into f64): o (batch, nv, dv), S (batch, nv, dk, dv), and the normalised qn, kn
// (batch, nk, dk) that `klab export` also writes.
struct Reference {
  std::vector<double> o, S, qn, kn;
};
Reference reference_f64(const Workload& w);

// The registered op (params, generate, references "o" and "S", traffic, validate).
Op make_op();
// Downcasts with a clear error when a variant is handed another op's workload.
const Workload& workload_of(const klab::Workload& w);

}  // namespace klab::gdn_recurrence
