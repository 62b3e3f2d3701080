#pragma once
#include "q4_gemm/gemm.hpp"
#include "q4_gemm/op.hpp"

namespace klab::q4_gemm {
// The q4_gemv kernel impl=loop launches once per column (the baseline that reads W n times).
inline constexpr const char* kLoopGemv = "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=launch,pdl=on,rows=8";
// impl=loop first (A of the experiment), then one variant per kernel of gemm_kernels().
std::vector<Variant> gemm_variants();
// Registers the op and its variants.
void register_all(Registry& r);
}  // namespace klab::q4_gemm
