#include "f32_gemv/variants.hpp"

namespace klab::f32_gemv {
void register_all(Registry& r) {
  r.add(make_op());
  r.add(warp_row_variant<1>());
  r.add(warp_row_variant<4>());
  r.add(warp_row_variant<4, true>());
  r.add(warp_row_variant<8>());
  r.add(warp_row_variant<8, true>());
  r.add(split_row_variant<false>());
  r.add(split_row_variant<true>());
}
}  // namespace klab::f32_gemv
