#include "baselines/baselines.hpp"

namespace klab::baselines {
void register_all(Registry& r) {
  r.add(cublas_sgemv_variant());
  for (auto& v : cublas_q4_variants()) r.add(std::move(v));
  r.add(llama_mmvq_variant());
}
}  // namespace klab::baselines
