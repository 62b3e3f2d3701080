#pragma once
// The map=packed kernels (packed.cu) and their bit-models (packed_model.cpp), appended to the
// family's lists by q4_kernels() / q4_models().
#include <cstdint>
#include <string>
#include <vector>

#include "q4_gemv/q4_gemv.hpp"

namespace klab::q4_gemv::packed {
std::vector<Q4Kernel> packed_kernels();
std::vector<Q4ModelEntry> packed_models();
// Why map=packed cannot take k (empty: it can): k > 32768.
std::string packed_error(std::int64_t k);
}  // namespace klab::q4_gemv::packed
