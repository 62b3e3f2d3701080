// The catalogue: every op, variant and experiment of klab, registered once, explicitly.
#include "baselines/baselines.hpp"
#include "common.hpp"
#include "f32_gemv/variants.hpp"

namespace klab {

Registry& registry() {
  static Registry r = [] {
    Registry reg;
    f32_gemv::register_all(reg);
    baselines::register_all(reg);
    experiments::register_f32_gemv(reg);
    return reg;
  }();
  return r;
}

}  // namespace klab
