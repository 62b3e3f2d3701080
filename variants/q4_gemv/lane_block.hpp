#pragma once
// The block-per-lane q4 mat-vecs (beyond the seed): kernels and bit-models, appended to the family's
// lists by q4_kernels() / q4_models().
#include <vector>

#include "q4_gemv/q4_gemv.hpp"

namespace klab::q4_gemv {
std::vector<Q4Kernel> lane_block_kernels();
std::vector<Q4ModelEntry> lane_block_models();
}  // namespace klab::q4_gemv
