// The catalogue: every op, variant and experiment of klab, registered once, explicitly.
#include "baselines/baselines.hpp"
#include "common.hpp"
#include "f32_gemv/variants.hpp"
#include "q4_gemv/variants.hpp"
// @q4-register-include@
// @gdn-register-include@

namespace klab {

Registry& registry() {
  static Registry r = [] {
    Registry reg;
    // Ops and their variants first, then the peers (they attach to registered ops), then experiments.
    f32_gemv::register_all(reg);
    q4_gemv::register_all(reg);
    // @q4-register-variants@
    // @gdn-register-variants@
    baselines::register_all(reg);
    experiments::register_f32_gemv(reg);
    experiments::register_q4_gemv(reg);
    experiments::register_q4_ceiling(reg);
    // @q4-register-experiments@
    experiments::register_gdn(reg);
    // @gdn-register-experiments@
    experiments::register_gdn_q4(reg);
    return reg;
  }();
  return r;
}

}  // namespace klab
