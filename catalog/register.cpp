// The catalogue: every op, variant and experiment of klab, registered once, explicitly.
#include "klab/catalog.hpp"

#include "baselines/baselines.hpp"
#include "common.hpp"
#include "f32_gemv/variants.hpp"
#include "gdn/step_op.hpp"
#include "gdn_recurrence/variants.hpp"
#include "q4_gemm/variants.hpp"
#include "q4_gemv/variants.hpp"

namespace klab {

const Registry& registry() {
  static const Registry r = [] {
    Registry reg;
    // Ops and their variants first, then the peers (they attach to registered ops), then experiments.
    f32_gemv::register_all(reg);
    q4_gemv::register_all(reg);
    q4_gemm::register_all(reg);
    gdn::register_all(reg);
    gdn_recurrence::register_all(reg);
    baselines::register_all(reg);
    experiments::register_f32_gemv(reg);
    experiments::register_q4_gemv(reg);
    experiments::register_q4_ceiling(reg);
    experiments::register_q4_prep_split(reg);
    experiments::register_q4_gemm_batch(reg);
    experiments::register_gdn_oracle(reg);
    experiments::register_gdn_guards(reg);
    experiments::register_gdn_drift(reg);
    experiments::register_gdn_state_drift(reg);
    experiments::register_gdn_q4_per_op(reg);
    experiments::register_gdn_q4_gates(reg);
    experiments::register_error_budget(reg);
    experiments::register_gdn_layer(reg);
    experiments::register_gdn_recurrence(reg);
    experiments::register_gdn_stack(reg);
    experiments::register_gdn_breakdown(reg);
    experiments::register_gdn_fused(reg);
    experiments::register_gdn_batch(reg);
    return reg;
  }();
  return r;
}

}  // namespace klab
