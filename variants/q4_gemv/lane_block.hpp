#pragma once
// The block-per-lane q4 mat-vecs (beyond the seed): kernels and bit-models, appended to the family's
// lists by q4_kernels() / q4_models().
#include <cstdint>
#include <string>
#include <vector>

#include "q4_gemv/q4_gemv.hpp"

namespace klab::q4_gemv {
std::vector<Q4Kernel> lane_block_kernels();
std::vector<Q4ModelEntry> lane_block_models();
// block-per-thread (block_thread.cu): one thread per block of 32 weights, split-K over warps.
std::vector<Q4Kernel> block_thread_kernels();
std::vector<Q4ModelEntry> block_thread_models();
// Why block-per-thread cannot take k (empty: it can): k > 32768.
std::string block_thread_error(std::int64_t k);
}  // namespace klab::q4_gemv
