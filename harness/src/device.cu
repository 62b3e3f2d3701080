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

// Read-only: every thread reads 16-byte vectors and folds them; one value per thread is written
// only if the (data-dependent) sum is a sentinel, so the compiler cannot drop the loads.
__global__ void read_kernel(const float4* __restrict__ p, std::size_t n, float* sink) {
  float acc = 0.f;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    float4 v = __ldcs(p + i);
    acc += v.x + v.y + v.z + v.w;
  }
  if (acc == 1234.5678f) sink[0] = acc;
}
__global__ void copy_kernel(const float4* __restrict__ src, float4* __restrict__ dst, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    dst[i] = __ldcs(src + i);
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

Ceiling measure_ceiling(std::int64_t bytes, int reps) {
  require(bytes >= (1 << 20) && reps >= 1, "measure_ceiling: at least 1 MiB and 1 repetition");
  std::size_t n4 = static_cast<std::size_t>(bytes) / sizeof(float4);
  DeviceBuffer<float4> a(n4), b(n4);
  DeviceBuffer<float> sink(1);
  KLAB_CUDA(cudaMemset(a.get(), 0x3c, a.bytes()));
  int dev = 0, sms = 0;
  KLAB_CUDA(cudaGetDevice(&dev));
  KLAB_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const unsigned grid = unsigned(sms) * 8, block = 512;
  cudaEvent_t e0, e1;
  KLAB_CUDA(cudaEventCreate(&e0));
  KLAB_CUDA(cudaEventCreate(&e1));
  auto time_one = [&](auto launch) {
    std::vector<double> ms;
    for (int r = 0; r < reps + 2; ++r) {
      KLAB_CUDA(cudaEventRecord(e0));
      launch();
      KLAB_CUDA(cudaEventRecord(e1));
      KLAB_CUDA(cudaEventSynchronize(e1));
      float t = 0;
      KLAB_CUDA(cudaEventElapsedTime(&t, e0, e1));
      if (r >= 2) ms.push_back(t);  // two warm-ups
    }
    return summarize(ms).median;
  };
  double read_ms = time_one([&] { read_kernel<<<grid, block>>>(a.get(), n4, sink.get()); KLAB_CUDA_LAUNCH("read_kernel"); });
  double copy_ms = time_one([&] { copy_kernel<<<grid, block>>>(a.get(), b.get(), n4); KLAB_CUDA_LAUNCH("copy_kernel"); });
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  Ceiling c;
  c.bytes = static_cast<std::int64_t>(n4 * sizeof(float4));
  c.reps = reps;
  c.read_gbps = c.bytes / (read_ms * 1e-3) / 1e9;
  c.copy_gbps = 2.0 * c.bytes / (copy_ms * 1e-3) / 1e9;
  return c;
}

nlohmann::json to_json(const DeviceInfo& d) {
  return {{"index", d.index}, {"name", d.name}, {"sm_count", d.sm_count},
          {"compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
          {"l2_bytes", d.l2_bytes}, {"global_mem_bytes", d.global_mem_bytes},
          {"sm_clock_peak_mhz", d.sm_clock_khz / 1000.0}, {"mem_clock_peak_mhz", d.mem_clock_khz / 1000.0},
          {"mem_bus_width_bits", d.mem_bus_width_bits}, {"theoretical_gbps", d.theoretical_gbps},
          {"driver_version", d.driver_version}, {"runtime_version", d.runtime_version}};
}
nlohmann::json to_json(const Ceiling& c) {
  return {{"read_gbps", c.read_gbps}, {"copy_gbps", c.copy_gbps}, {"bytes", c.bytes}, {"reps", c.reps},
          {"kernel", "read: grid-stride float4 loads (ld.cs), folded into one register; copy: float4 load+store"}};
}

}  // namespace klab
