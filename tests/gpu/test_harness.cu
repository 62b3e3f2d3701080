// The harness on the device: poisoning, the ceiling, timing, the clock probe, L2-cold vs hot.
#include <doctest/doctest.h>

#include "klab/cuda.hpp"
#include "klab/device.hpp"
#include "klab/metrics.hpp"
#include "klab/timing.hpp"

using namespace klab;

namespace {
__global__ void scale_kernel(const float* x, float* y, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) y[i] = 2.f * x[i];
}
}  // namespace

TEST_CASE("poison_device writes the poison pattern everywhere") {
  DeviceBuffer<float> b(1000);
  poison_device(b.get(), b.size());
  KLAB_CUDA(cudaDeviceSynchronize());
  for (float v : b.download()) REQUIRE(is_poison(v));
}

TEST_CASE("CUDA errors name the call") {
  try {
    KLAB_CUDA(cudaMemcpy(nullptr, reinterpret_cast<void*>(16), 4, cudaMemcpyDeviceToHost));
    FAIL("no error");
  } catch (const CudaError& e) {
    CHECK(std::string(e.what()).find("cudaMemcpy") != std::string::npos);
    CHECK(std::string(e.what()).find("test_harness.cu") != std::string::npos);
  }
  cudaGetLastError();
}

TEST_CASE("device info and the measured ceiling are plausible") {
  auto d = select_device(0);
  CHECK(d.sm_count > 0);
  CHECK(d.l2_bytes > 0);
  auto c = measure_ceiling(std::int64_t(256) << 20, 5);
  CHECK(c.read_gbps > 50);
  CHECK(c.read_gbps < 1.2 * d.theoretical_gbps + 1);  // a read cannot beat the bus
  CHECK(c.copy_gbps > 50);
}

TEST_CASE("timing: repetitions, clock readings, and L2-cold slower than hot on a cache-sized buffer") {
  auto d = select_device(0);
  cudaStream_t s;
  KLAB_CUDA(cudaStreamCreate(&s));
  {
    Timer t(d, s);
    // A working set that fits in L2 (a quarter of it): hot repetitions hit the cache.
    const std::size_t n = std::size_t(d.l2_bytes) / 4 / sizeof(float) / 2;
    DeviceBuffer<float> x(n), y(n);
    KLAB_CUDA(cudaMemset(x.get(), 0, x.bytes()));
    auto body = [&](cudaStream_t st) { scale_kernel<<<d.sm_count * 4, 256, 0, st>>>(x.get(), y.get(), n); };
    auto cold = t.time(body, TimingOptions{30, 3, true});
    auto hot = t.time(body, TimingOptions{30, 3, false});
    CHECK(cold.ms.size() == 30);
    CHECK(cold.sm_mhz.size() == 30);
    CHECK(cold.clock_mhz_median > 100);
    CHECK(cold.clock_mhz_median < 5000);
    CHECK(cold.summary.min <= cold.summary.median);
    CHECK(cold.summary.median <= cold.summary.max);
    CHECK(cold.l2_cold);
    CHECK_FALSE(hot.l2_cold);
    CHECK(hot.summary.median < cold.summary.median);
  }
  cudaStreamDestroy(s);
}
