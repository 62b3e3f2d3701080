#pragma once
#include "q4_gemv/op.hpp"
#include "q4_gemv/q4_gemv.hpp"

namespace klab::q4_gemv {
// The 16 variants (one per policy combination of policy.hpp), each with its CPU bit-model.
std::vector<Variant> kernel_variants();
// Registers the op and its variants.
void register_all(Registry& r);
}  // namespace klab::q4_gemv
