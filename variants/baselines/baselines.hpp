#pragma once
// Peer baselines (cuBLAS, ...), registered as variants of the ops they compute so they are raced
// in the same run as ours.
#include <vector>

#include "klab/registry.hpp"

namespace klab::baselines {
Variant cublas_sgemv_variant();
// q4_gemv peers on the dequantised weights: cuBLAS bf16 GemmEx (n=1) and f32 SGEMV.
std::vector<Variant> cublas_q4_variants();
// Registers every baseline whose op is already registered.
void register_all(Registry& r);
}  // namespace klab::baselines
