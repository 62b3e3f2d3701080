#pragma once
// The device's %globaltimer (ns) and a spin on it, for the harness's probes (load_probe.cu, cluster_probe.cu).
namespace klab {

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
  return t;
}
// Returns once `ns` have passed on the timer.
__device__ __forceinline__ void spin_ns(unsigned long long ns) {
  const unsigned long long t0 = global_ns();
  while (global_ns() - t0 < ns) {
  }
}

}  // namespace klab
