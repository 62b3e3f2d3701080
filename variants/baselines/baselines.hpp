#pragma once
// Peer baselines (cuBLAS, ...), registered as variants of the ops they compute so they are raced
// in the same run as ours.
#include "klab/registry.hpp"

namespace klab::baselines {
Variant cublas_sgemv_variant();
// Registers every baseline whose op is already registered.
void register_all(Registry& r);
}  // namespace klab::baselines
