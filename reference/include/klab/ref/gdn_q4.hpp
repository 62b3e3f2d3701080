#pragma once
// The CPU side of the GDN q4 tier (seed-digest.md section 4): the three big projections of a layer
// (in_proj_qkv, in_proj_z, out_proj) quantised to raw q4 (klab/ref/q4.hpp), and the reference step of
// the q4 tier: the f64 step of klab/ref/gdn.hpp on weights whose big three are dequant(q4). Every
// other weight (in_proj_b, in_proj_a, A_log, dt_bias, conv, norm) stays f32 in the q4 tier, so beta
// and g of the two tiers are the same numbers.
#include <string>

#include "klab/ref/gdn.hpp"
#include "klab/ref/q4.hpp"

namespace klab::ref::gdn {

// The q4 tensors of one layer, row-major as in LayerWeights:
//   qkv (conv_dim, hidden)   z (nv*dv, hidden)   out (hidden, nv*dv)
struct Q4Projections {
  Q4Matrix qkv, z, out;
};

// Why the geometry's big projections cannot be q4 ("" when they can): hidden and nv*dv are the
// columns of the three, and a q4 row is made of blocks of 32.
std::string q4_geometry_error(const Geometry& g);

// Quantises w's big three by q4_quantize. Throws std::invalid_argument (q4_geometry_error, a weight
// that is not finite, or sizes that do not match the geometry).
Q4Projections quantize_projections(const LayerWeights& w);

// A copy of w with w_qkv, w_z and w_out replaced by dequant(q) (exact in f32): step() on it is the
// q4 tier's reference. Throws std::invalid_argument when q's shapes are not w's.
LayerWeights with_q4(const LayerWeights& w, const Q4Projections& q);

}  // namespace klab::ref::gdn
