#include "baselines/baselines.hpp"

namespace klab::baselines {
void register_all(Registry& r) {
  r.add(cublas_sgemv_variant());
}
}  // namespace klab::baselines
