#pragma once
// Kernel timelines: when each kernel of a timed subject started and ended on the GPU, read from
// CUPTI's activity API (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, the hardware's timestamps; kernels
// are not serialised). `klab run ... --trace` records every timed subject once, after its timed
// repetitions (Timer::time_interleaved), so a reader sees where a chain of launches waits: in a
// graph of PDL-chained kernels, a kernel that starts before its predecessor ends overlaps it, and
// the start-to-start interval of one kernel name is the chain's period.
// Why (2026-12-02): the q4 mat-vec's small shapes take 6.7 us against a 3.9 us read of the same
// bytes, and moving work between the GDN step's launches has not paid (docs/DEVICE-RUNBOOK.md);
// Nsight Systems does not run on the lent H200 (.library/device/KINDS.md), so the lab reads the
// timeline itself.
// CUPTI is loaded at run time (dlopen), never linked: libcupti.so.13 beside the klab binary, on the
// library path, or under /usr/local/cuda. Without it, tracing says why and records nothing (a
// missing trace is never estimated).
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace klab {

struct KernelSpan {
  std::string name;           // the kernel's (mangled) name, as CUPTI gives it
  std::uint64_t start_ns = 0, end_ns = 0;  // GPU timestamps
  std::uint32_t stream = 0;
  int grid = 0, block = 0;    // gridX*gridY*gridZ, blockX*blockY*blockZ
};

// What a list of spans says, computed from the spans alone (sorted by start first):
//   span_us       first start to last end
//   per kernel name: count, median duration, median start-to-start interval between consecutive
//                 kernels of that name (the chain's period, when the name recurs once a period)
//   per transition (the kernel started before -> this one, by start order): count, median of
//                 this start minus the previous end (negative: it started before the other ended)
struct TraceSummary {
  struct PerName {
    int count = 0;
    double median_us = 0;
    double period_us = 0;  // 0 with a single launch
  };
  struct PerPair {
    int count = 0;
    double median_gap_us = 0;
  };
  int kernels = 0;
  double span_us = 0;
  std::map<std::string, PerName> names;
  std::map<std::pair<std::string, std::string>, PerPair> pairs;
};
TraceSummary summarize_trace(std::vector<KernelSpan> spans);
// A kernel's name as a reader wants it: the function name of a mangled C++ name (templates and
// arguments dropped: "_Z12empty_kernelv" -> "empty_kernel", "_ZN4klab12_GLOBAL__N_15probeILi4EEEvPf" ->
// "probe"); anything else unchanged.
std::string short_kernel_name(const std::string& name);
// The record form: {"kernels": N, "span_us", "names": {NAME: {count, median_us, period_us}},
// "pairs": [{from, to, count, median_gap_us}], "spans": [[name index, start_us, end_us], ...],
// "span_names": [...]} with times relative to the first start and names shortened.
nlohmann::json to_json(const std::vector<KernelSpan>& spans);
// One line of it for a log: "64 kernels over 215.3 us; xprep_kernel 32 x 1.21 us every 6.72 us; ...;
// xprep_kernel->packed_xl_kernel -0.85 us; ..." (gaps: the next start minus the previous end).
std::string trace_line(const std::vector<KernelSpan>& spans);

class KernelTracer {
 public:
  // The process's tracer (CUPTI keeps one set of activity callbacks per process).
  static KernelTracer& instance();
  // Loads CUPTI on first use; false (and why()) when it cannot be loaded or refuses.
  bool available();
  const std::string& why() const { return why_; }
  const std::string& library() const { return library_; }
  // Records every kernel the device runs until stop(); stop() synchronises the device, flushes
  // CUPTI's buffers and returns the kernels in start order. Throws klab::Error when unavailable or
  // when a CUPTI call fails (naming it).
  void start();
  std::vector<KernelSpan> stop();

 private:
  KernelTracer() = default;
  bool tried_ = false, ok_ = false, running_ = false;
  std::string why_, library_;
};

}  // namespace klab
