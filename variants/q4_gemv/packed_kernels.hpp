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
// The counters of a flag-released kernel on the current device: grid=groups,xprep=flag's (packed.cu,
// packed_xf_kernel) or wait=flag's (the ring's tickets and its prep kernel's count and flag,
// xprep_wf_kernel): tickets taken in the open call, calls begun, prep blocks counted in the open call,
// the last call published + 1. In step between calls: tickets == 0, counted == 0, published == calls.
// For tests (set_* puts them out of step to run the kernels' timeout path); both synchronise with the
// device. Throw CudaError.
enum class FlagSet { xprep_flag, wait_flag };
struct XfCounters {
  std::uint32_t tickets, calls, counted, published;
};
XfCounters xf_counters(FlagSet which = FlagSet::xprep_flag);
void set_xf_counters(const XfCounters& c, FlagSet which = FlagSet::xprep_flag);
// The ring read probe (`klab probe-ring`): rung 32's ring kernel (grid=fill, load=bulk, rows=8, pdl=on) with its
// stages, waits, barriers and refills over `packed` (ring_probe_bytes(m, k) bytes, 16-byte aligned, any content)
// but no x and no dots: y[0..m) gets +0. Not a variant (it computes no product): it times the ring's loads alone,
// to set beside the read ceiling and rung 32. Refuses, before any CUDA call, what rung 32 would (k, null buffers,
// alignment). Throws klab::Error (refusals) or CudaError.
void launch_ring_probe(const std::uint8_t* packed, float* y, int m, int k, cudaStream_t stream);
std::int64_t ring_probe_bytes(int m, int k);
}  // namespace klab::q4_gemv::packed
