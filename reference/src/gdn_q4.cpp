#include "klab/ref/gdn_q4.hpp"

#include <stdexcept>

namespace klab::ref::gdn {

namespace {
void check_shape(const char* name, const Q4Matrix& q, std::int64_t m, std::int64_t k) {
  q.check();
  if (q.m != m || q.k != k)
    throw std::invalid_argument(std::string("with_q4: ") + name + " is " + std::to_string(q.m) + "x" + std::to_string(q.k) + ", the geometry needs " +
                                std::to_string(m) + "x" + std::to_string(k));
}
}  // namespace

std::string q4_geometry_error(const Geometry& g) {
  if (auto why = g.validate(); !why.empty()) return why;
  if (auto why = q4_shape_error(g.conv_dim(), g.hidden); !why.empty()) return "in_proj_qkv (conv_dim, hidden): " + why;
  if (auto why = q4_shape_error(g.value_dim(), g.hidden); !why.empty()) return "in_proj_z (nv*dv, hidden): " + why;
  if (auto why = q4_shape_error(g.hidden, g.value_dim()); !why.empty()) return "out_proj (hidden, nv*dv): " + why;
  return "";
}

Q4Projections quantize_projections(const LayerWeights& w) {
  if (auto why = q4_geometry_error(w.g); !why.empty()) throw std::invalid_argument("quantize_projections: geometry " + w.g.str() + ": " + why);
  w.check();
  const std::int64_t H = w.g.hidden, C = w.g.conv_dim(), V = w.g.value_dim();
  return Q4Projections{q4_quantize(w.w_qkv, C, H), q4_quantize(w.w_z, V, H), q4_quantize(w.w_out, H, V)};
}

LayerWeights with_q4(const LayerWeights& w, const Q4Projections& q) {
  const std::int64_t H = w.g.hidden, C = w.g.conv_dim(), V = w.g.value_dim();
  check_shape("qkv", q.qkv, C, H);
  check_shape("z", q.z, V, H);
  check_shape("out", q.out, H, V);
  LayerWeights d = w;
  d.w_qkv = q4_dequantize(q.qkv);
  d.w_z = q4_dequantize(q.z);
  d.w_out = q4_dequantize(q.out);
  return d;
}

}  // namespace klab::ref::gdn
