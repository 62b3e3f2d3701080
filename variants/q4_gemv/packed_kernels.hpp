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
// grid=groups,xprep=flag's counters on the current device (packed.cu, packed_xf_kernel): tickets taken
// in the open call, calls begun, prep blocks counted in the open call, the last call published + 1.
// In step between calls: tickets == 0, counted == 0, published == calls. For tests (set_* puts them
// out of step to run the kernel's timeout path); both synchronise with the device. Throw CudaError.
struct XfCounters {
  std::uint32_t tickets, calls, counted, published;
};
XfCounters xf_counters();
void set_xf_counters(const XfCounters& c);
}  // namespace klab::q4_gemv::packed
