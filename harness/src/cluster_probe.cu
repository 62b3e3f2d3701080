#include "klab/cluster_probe.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "klab/cuda.hpp"
#include "klab/error.hpp"
#include "klab/stats.hpp"
#include "global_ns.cuh"

namespace klab {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxSmemKb = 200;

// Launch n: every block's thread 0 stamps its entry (atomicMin into entry[n]) and its exit (atomicMax into leave[n]).
__global__ void __launch_bounds__(kThreads) cluster_hop_kernel(unsigned long long* entry, unsigned long long* leave, int n, unsigned long long pre,
                                                               unsigned long long post) {
  const unsigned long long t0 = global_ns();
  asm volatile("griddepcontrol.launch_dependents;");
  if (threadIdx.x == 0) {
    atomicMin(&entry[n], t0);
    spin_ns(pre);
  }
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (threadIdx.x == 0) spin_ns(post);
  __syncthreads();
  if (threadIdx.x == 0) atomicMax(&leave[n], global_ns());
}

}  // namespace

std::string ClusterForm::str() const {
  return std::to_string(cluster) + "," + (pdl ? "on" : "off") + "," + std::to_string(smem_kb) + "," + std::to_string(per_sm);
}

std::string cluster_form_error(const ClusterForm& f) {
  if (f.cluster < 0 || f.cluster > 8) return "blocks a cluster " + std::to_string(f.cluster) + ": 0 (none) to 8";
  if (f.smem_kb < 0 || f.smem_kb > kMaxSmemKb) return "shared memory " + std::to_string(f.smem_kb) + " KB a block: 0 to " + std::to_string(kMaxSmemKb);
  if (f.per_sm < 1 || f.per_sm > 4) return "blocks an SM " + std::to_string(f.per_sm) + ": 1 to 4";
  return "";
}

ClusterForm parse_cluster_form(const std::string& s) {
  ClusterForm f;
  const std::string allowed = ": C,on|off,KB,N (C blocks a cluster, 0 for none, to 8; PDL on or off; KB of shared memory a block, 0 to " +
                              std::to_string(kMaxSmemKb) + "; N blocks an SM, 1 to 4)";
  std::vector<std::string> parts;
  for (std::size_t at = 0;;) {
    const std::size_t comma = s.find(',', at);
    parts.push_back(s.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  auto number = [&](const std::string& t) {
    std::size_t used = 0;
    const int v = std::stoi(t, &used);
    require(used == t.size(), "");
    return v;
  };
  try {
    require(parts.size() == 4 && (parts[1] == "on" || parts[1] == "off"), "");
    f.cluster = number(parts[0]);
    f.pdl = parts[1] == "on";
    f.smem_kb = number(parts[2]);
    f.per_sm = number(parts[3]);
  } catch (const std::exception&) {
    throw Error("--form " + s + allowed);
  }
  if (auto why = cluster_form_error(f); !why.empty()) throw Error("--form " + s + ": " + why);
  return f;
}

std::vector<ClusterForm> default_cluster_forms() {
  std::vector<ClusterForm> v;
  for (const auto& [kb, per_sm] : {std::pair{80, 1}, std::pair{80, 2}, std::pair{0, 1}})
    for (bool pdl : {true, false})
      for (int c : {0, 1, 2, 5, 6, 8}) v.push_back({c, pdl, kb, per_sm});
  return v;
}

ClusterEntry measure_cluster_entry(const ClusterForm& f, int launches, double pre_us, double post_us, cudaStream_t stream) {
  if (auto why = cluster_form_error(f); !why.empty()) throw Error("probe-cluster: " + why);
  require(launches >= 8, "probe-cluster: at least 8 launches");
  require(pre_us >= 0 && post_us >= 0 && pre_us <= 1000 && post_us <= 1000, "probe-cluster: the spins before and after the wait: 0 to 1000 us");
  int dev = 0, sms = 0;
  KLAB_CUDA(cudaGetDevice(&dev));
  KLAB_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  KLAB_CUDA(cudaFuncSetAttribute(cluster_hop_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmemKb * 1024));
  const int C = f.cluster;
  const int grid = C > 0 ? f.per_sm * sms / C * C : f.per_sm * sms;
  require(grid > 0, "probe-cluster: no whole cluster of " + std::to_string(C) + " in " + std::to_string(f.per_sm * sms) + " blocks");
  cudaLaunchConfig_t cfg{};
  cudaLaunchAttribute attr[2]{};
  unsigned na = 0;
  if (C > 0) {
    attr[na].id = cudaLaunchAttributeClusterDimension;
    attr[na].val.clusterDim.x = unsigned(C), attr[na].val.clusterDim.y = 1, attr[na].val.clusterDim.z = 1;
    ++na;
  }
  if (f.pdl) {
    attr[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[na].val.programmaticStreamSerializationAllowed = 1;
    ++na;
  }
  cfg.gridDim = dim3(unsigned(grid));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = std::size_t(f.smem_kb) * 1024;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = na;
  int resident = 0;  // blocks of this form the device holds at once
  if (C > 0) {
    int clusters = 0;
    cudaLaunchConfig_t q = cfg;
    q.numAttrs = 1;  // the cluster dimension alone
    KLAB_CUDA(cudaOccupancyMaxActiveClusters(&clusters, cluster_hop_kernel, &q));
    require(clusters >= 1, "probe-cluster: the device holds no cluster of " + std::to_string(C) + " blocks of " + std::to_string(f.smem_kb) + " KB");
    resident = clusters * C;
  } else {
    int per_sm = 0;
    KLAB_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, cluster_hop_kernel, kThreads, cfg.dynamicSmemBytes));
    resident = per_sm * sms;
  }
  const std::size_t bytes = std::size_t(launches) * sizeof(unsigned long long);
  DeviceBuffer<unsigned long long> entry{std::size_t(launches)}, leave{std::size_t(launches)};
  KLAB_CUDA(cudaMemsetAsync(entry.get(), 0xFF, bytes, stream));
  KLAB_CUDA(cudaMemsetAsync(leave.get(), 0, bytes, stream));
  const auto pre = static_cast<unsigned long long>(pre_us * 1e3), post = static_cast<unsigned long long>(post_us * 1e3);
  for (int n = 0; n < launches; ++n) KLAB_CUDA(cudaLaunchKernelEx(&cfg, cluster_hop_kernel, entry.get(), leave.get(), n, pre, post));
  KLAB_CUDA(cudaStreamSynchronize(stream));
  const auto e = entry.download(), l = leave.download();
  std::vector<double> gap, period;
  for (int n = launches / 4; n + 1 < launches; ++n) {
    require(e[std::size_t(n) + 1] != std::numeric_limits<unsigned long long>::max() && l[std::size_t(n)] != 0, "probe-cluster: a launch left no stamp");
    gap.push_back((double(e[std::size_t(n) + 1]) - double(l[std::size_t(n)])) * 1e-3);
    period.push_back((double(l[std::size_t(n) + 1]) - double(l[std::size_t(n)])) * 1e-3);
  }
  ClusterEntry r;
  r.form = f;
  r.grid = grid;
  r.resident_blocks = resident;
  r.launches = int(gap.size());
  r.entry_gap_us = summarize(gap).median;
  r.period_us = summarize(period).median;
  return r;
}

}  // namespace klab
