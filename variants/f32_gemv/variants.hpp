#pragma once
#include "f32_gemv/op.hpp"

namespace klab::f32_gemv {
template <int Unroll>
Variant warp_row_variant();
// Registers the op and its variants.
void register_all(Registry& r);
}  // namespace klab::f32_gemv
