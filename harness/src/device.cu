#include "klab/device.hpp"

#include <algorithm>
#include <vector>

#include "klab/cuda.hpp"
#include "klab/stats.hpp"

namespace klab {

namespace {
struct Probe {
  bool ok = false;
  std::string reason;
};
const Probe& probe() {
  static const Probe p = [] {
    Probe r;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      r.reason = std::string("no CUDA device: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
      cudaGetLastError();
    } else if (n == 0) {
      r.reason = "no CUDA device: cudaGetDeviceCount returned 0";
    } else {
      r.ok = true;
    }
    return r;
  }();
  return p;
}

int attr(cudaDeviceAttr a, int dev) {
  int v = 0;
  KLAB_CUDA(cudaDeviceGetAttribute(&v, a, dev));
  return v;
}

}  // namespace

bool has_device() { return probe().ok; }
std::string no_device_reason() { return probe().reason; }

DeviceInfo select_device(int index) {
  require(has_device(), no_device_reason());
  int n = 0;
  KLAB_CUDA(cudaGetDeviceCount(&n));
  require(index >= 0 && index < n, "--device " + std::to_string(index) + ": there are " + std::to_string(n) + " CUDA device(s)");
  KLAB_CUDA(cudaSetDevice(index));
  cudaDeviceProp p{};
  KLAB_CUDA(cudaGetDeviceProperties(&p, index));
  DeviceInfo d;
  d.index = index;
  d.name = p.name;
  d.sm_count = p.multiProcessorCount;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.l2_bytes = p.l2CacheSize;
  d.global_mem_bytes = static_cast<std::int64_t>(p.totalGlobalMem);
  d.sm_clock_khz = attr(cudaDevAttrClockRate, index);
  d.mem_clock_khz = attr(cudaDevAttrMemoryClockRate, index);
  d.mem_bus_width_bits = attr(cudaDevAttrGlobalMemoryBusWidth, index);
  // DDR: two transfers per clock.
  d.theoretical_gbps = 2.0 * d.mem_clock_khz * 1e3 * (d.mem_bus_width_bits / 8.0) / 1e9;
  KLAB_CUDA(cudaDriverGetVersion(&d.driver_version));
  KLAB_CUDA(cudaRuntimeGetVersion(&d.runtime_version));
  return d;
}

nlohmann::json to_json(const DeviceInfo& d) {
  return {{"index", d.index}, {"name", d.name}, {"sm_count", d.sm_count},
          {"compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
          {"l2_bytes", d.l2_bytes}, {"global_mem_bytes", d.global_mem_bytes},
          {"sm_clock_peak_mhz", d.sm_clock_khz / 1000.0}, {"mem_clock_peak_mhz", d.mem_clock_khz / 1000.0},
          {"mem_bus_width_bits", d.mem_bus_width_bits}, {"theoretical_gbps", d.theoretical_gbps},
          {"driver_version", d.driver_version}, {"runtime_version", d.runtime_version}};
}
}  // namespace klab
