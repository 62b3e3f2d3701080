// cluster_hop: do the blocks of a PDL-launched grid with a cluster dimension enter before the grid before them ends?
// (2026-12-06, fourteenth session; why: q4_gemv's grid=split-k, clusters over k, took a constant 2.1-2.6 us a call more
// than the paced ring on an H100, reports/h100/run-call64.) Each launch n: every block's thread 0 records %globaltimer at
// entry (atomicMin into entry[n]) and at exit (atomicMax into leave[n]); between them it spins `pre` ns before
// griddepcontrol.wait (the weight loads) and `post` ns after it (x and the dots). 132 blocks rounded down to whole
// clusters, 256 threads, `smem` bytes of dynamic shared memory (80 KB leaves room for one block of the next grid an SM).
// Printed per case: the median over n of entry[n + 1] - leave[n] (negative: the next grid's blocks entered early) and of
// leave[n + 1] - leave[n] (the period).
// Build: nvcc -O2 -arch=sm_90 -std=c++17 cluster_hop.cu -o cluster_hop
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

__device__ __forceinline__ unsigned long long now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void spin(unsigned long long ns) {
  const unsigned long long t0 = now();
  while (now() - t0 < ns) {
  }
}
__global__ void hop(unsigned long long* entry, unsigned long long* leave, int n, unsigned long long pre, unsigned long long post) {
  const unsigned long long t0 = now();
  asm volatile("griddepcontrol.launch_dependents;");
  if (threadIdx.x == 0) atomicMin(&entry[n], t0);
  if (threadIdx.x == 0) spin(pre);
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (threadIdx.x == 0) spin(post);
  __syncthreads();
  if (threadIdx.x == 0) atomicMax(&leave[n], now());
}

static void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::printf("%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

int main() {
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "attr");
  check(cudaFuncSetAttribute(hop, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024), "smem");
  check(cudaFuncSetAttribute(hop, cudaFuncAttributeNonPortableClusterSizeAllowed, 1), "nonportable");
  const int N = 400;
  unsigned long long *entry, *leave;
  check(cudaMalloc(&entry, N * sizeof(unsigned long long)), "malloc");
  check(cudaMalloc(&leave, N * sizeof(unsigned long long)), "malloc");
  std::printf("C pdl smem_KB per_sm grid | entry(n+1)-leave(n) us | period us\n");
  for (int per_sm : {1, 2})
    for (int smem_kb : {0, 80})
      for (int pdl : {1, 0})
        for (int C : {0, 1, 2, 5, 6, 8}) {
          const int grid = C > 0 ? per_sm * sms / C * C : per_sm * sms;
          std::vector<unsigned long long> hi(N, ~0ull), lo(N, 0);
          check(cudaMemcpy(entry, hi.data(), N * 8, cudaMemcpyHostToDevice), "cpy");
          check(cudaMemcpy(leave, lo.data(), N * 8, cudaMemcpyHostToDevice), "cpy");
          cudaLaunchConfig_t cfg{};
          cudaLaunchAttribute attr[2]{};
          int na = 0;
          if (C > 0) {
            attr[na].id = cudaLaunchAttributeClusterDimension;
            attr[na].val.clusterDim.x = unsigned(C), attr[na].val.clusterDim.y = 1, attr[na].val.clusterDim.z = 1;
            ++na;
          }
          if (pdl) {
            attr[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
            attr[na].val.programmaticStreamSerializationAllowed = 1;
            ++na;
          }
          cfg.gridDim = dim3(unsigned(grid));
          cfg.blockDim = dim3(256);
          cfg.dynamicSmemBytes = std::size_t(smem_kb) * 1024;
          cfg.attrs = attr;
          cfg.numAttrs = unsigned(na);
          for (int n = 0; n < N; ++n) check(cudaLaunchKernelEx(&cfg, hop, entry, leave, n, 2000ull, 3000ull), "launch");
          check(cudaDeviceSynchronize(), "sync");
          std::vector<unsigned long long> e(N), l(N);
          check(cudaMemcpy(e.data(), entry, N * 8, cudaMemcpyDeviceToHost), "cpy");
          check(cudaMemcpy(l.data(), leave, N * 8, cudaMemcpyDeviceToHost), "cpy");
          std::vector<double> gap, period;
          for (int n = 50; n + 1 < N; ++n) {  // the first 50 warm up
            gap.push_back((double(e[n + 1]) - double(l[n])) * 1e-3);
            period.push_back((double(l[n + 1]) - double(l[n])) * 1e-3);
          }
          std::nth_element(gap.begin(), gap.begin() + gap.size() / 2, gap.end());
          std::nth_element(period.begin(), period.begin() + period.size() / 2, period.end());
          std::printf("%d %d %d %d %d | %.2f | %.2f\n", C, pdl, smem_kb, per_sm, grid, gap[gap.size() / 2], period[period.size() / 2]);
        }
  return 0;
}
