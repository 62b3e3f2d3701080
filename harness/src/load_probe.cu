#include "klab/load_probe.hpp"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>

#include "klab/cuda.hpp"
#include "klab/error.hpp"
#include "klab/stats.hpp"
#include "klab/timing.hpp"
#include "global_ns.cuh"

namespace klab {

namespace {

constexpr std::size_t kBgBytes = std::size_t(1) << 30;  // the background's buffer: far larger than any L2
constexpr int kRingLines = 8192;                        // the chase's ring: 8192 lines of 128 bytes (1 MB)
constexpr int kLineWords = 32;
constexpr int kChaseHops = 1024;
constexpr int kHopGridPerSm = 2;  // the grid hop's blocks of 256 per SM (beside at most 4 background blocks)

// The background: `passes` grid-stride passes over n 16-byte words, U independent loads in flight per thread,
// ld.global.cs (evict-first) through volatile asm so no pass can be merged with another; the fold's one store
// is never taken for the memset pattern the probe fills the buffer with.
template <int U>
__global__ void __launch_bounds__(256) bg_read_kernel(const uint4* __restrict__ p, std::size_t n, int passes, unsigned* sink) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  unsigned acc = 0;
  for (int pass = 0; pass < passes; ++pass)
    for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i + (U - 1) * stride < n; i += U * stride) {
      unsigned v[U][4];
#pragma unroll
      for (int u = 0; u < U; ++u)
        asm volatile("ld.global.cs.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v[u][0]), "=r"(v[u][1]), "=r"(v[u][2]), "=r"(v[u][3])
                     : "l"(p + i + u * stride));
#pragma unroll
      for (int u = 0; u < U; ++u) acc ^= v[u][0] ^ v[u][1] ^ v[u][2] ^ v[u][3];
    }
  if (acc == 0x9E3779B9u) sink[0] = acc;
}

// One thread: `hops` dependent ld.global.cg (L2, never L1) along the ring; out = {ns for all hops, where it ended}.
__global__ void chase_kernel(const unsigned* __restrict__ next, int hops, unsigned long long* out) {
  unsigned j = 0;
  const unsigned long long t0 = global_ns();
  for (int h = 0; h < hops; ++h) asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(j) : "l"(next + j) : "memory");
  const unsigned long long t1 = global_ns();
  out[0] = t1 - t0;
  out[1] = j;
}

// One thread spins for `ns`: the foreground's head start for the background to reach its rate.
__global__ void spin_kernel(unsigned long long ns) { spin_ns(ns); }

// The words of n a background pass reads: n rounded down to whole rounds of U loads over the grid, so that every
// thread reads the same number of words and the rate counts only bytes read.
std::size_t bg_words(const LoadForm& f, std::size_t n, int sms) {
  const std::size_t round = std::size_t(f.loads) * std::size_t(sms) * std::size_t(f.blocks_per_sm) * 256u;
  return n - n % round;
}

void launch_bg(const LoadForm& f, const uint4* p, std::size_t n, int passes, unsigned* sink, int sms, cudaStream_t s) {
  const unsigned grid = unsigned(sms * f.blocks_per_sm);
  n = bg_words(f, n, sms);
  switch (f.loads) {
    case 1: bg_read_kernel<1><<<grid, 256, 0, s>>>(p, n, passes, sink); break;
    case 2: bg_read_kernel<2><<<grid, 256, 0, s>>>(p, n, passes, sink); break;
    case 4: bg_read_kernel<4><<<grid, 256, 0, s>>>(p, n, passes, sink); break;
    case 8: bg_read_kernel<8><<<grid, 256, 0, s>>>(p, n, passes, sink); break;
    default: throw Error("probe-hop: no background of " + std::to_string(f.loads) + " loads (1, 2, 4 or 8)");
  }
  KLAB_CUDA_LAUNCH("bg_read_kernel");
}

// A graph of `launches` PDL hops ping-ponging between a and b.
struct HopGraph {
  cudaGraphExec_t exec = nullptr;
  HopGraph(unsigned grid, unsigned threads, int launches, float* a, float* b, cudaStream_t s) {
    cudaGraph_t g = nullptr;
    KLAB_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < launches; ++i) launch_hop(true, grid, threads, i % 2 ? b : a, i % 2 ? a : b, s);
    KLAB_CUDA(cudaStreamEndCapture(s, &g));
    const cudaError_t e = cudaGraphInstantiate(&exec, g, 0);
    cudaGraphDestroy(g);
    KLAB_CUDA(e);
  }
  HopGraph(const HopGraph&) = delete;
  HopGraph& operator=(const HopGraph&) = delete;
  ~HopGraph() {
    if (exec) cudaGraphExecDestroy(exec);
  }
};

struct Events {
  std::vector<cudaEvent_t> e;
  explicit Events(int n) : e(std::size_t(n), nullptr) {
    for (auto& x : e) KLAB_CUDA(cudaEventCreate(&x));
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  ~Events() {
    for (auto x : e)
      if (x) cudaEventDestroy(x);
  }
  float ms(int a, int b) const {
    float t = 0;
    KLAB_CUDA(cudaEventElapsedTime(&t, e[std::size_t(a)], e[std::size_t(b)]));
    return t;
  }
};

}  // namespace

std::string LoadForm::str() const { return loads == 0 ? "none" : std::to_string(loads) + " loads x " + std::to_string(blocks_per_sm) + " blocks"; }

std::string load_form_error(const LoadForm& f) {
  if (f.loads == 0) return f.blocks_per_sm == 0 ? "" : "a form without loads has no blocks (none, or L,B)";
  if (f.loads != 1 && f.loads != 2 && f.loads != 4 && f.loads != 8) return "loads in flight " + std::to_string(f.loads) + ": 1, 2, 4 or 8";
  if (f.blocks_per_sm < 1 || f.blocks_per_sm > 4) return "blocks per SM " + std::to_string(f.blocks_per_sm) + ": 1 to 4";
  return "";
}

LoadForm parse_load_form(const std::string& s) {
  if (s == "none") return {};
  const auto comma = s.find(',');
  LoadForm f;
  try {
    require(comma != std::string::npos, "");
    std::size_t used = 0;
    f.loads = std::stoi(s.substr(0, comma), &used);
    require(used == comma, "");
    const std::string b = s.substr(comma + 1);
    f.blocks_per_sm = std::stoi(b, &used);
    require(used == b.size(), "");
  } catch (const std::exception&) {
    throw Error("--form " + s + ": none, or L,B (L loads in flight a thread: 1, 2, 4 or 8; B blocks of 256 per SM: 1 to 4)");
  }
  if (auto why = load_form_error(f); !why.empty()) throw Error("--form " + s + ": " + why);
  return f;
}

std::vector<LoadForm> default_load_forms() { return {{0, 0}, {1, 2}, {2, 2}, {4, 2}, {8, 2}, {8, 4}}; }

HopUnderLoad measure_hop_under_load(const LoadForm& form, int launches, int reps, cudaStream_t fg, cudaStream_t bg) {
  if (auto why = load_form_error(form); !why.empty()) throw Error("probe-hop: " + why);
  require(launches >= 8, "probe-hop: at least 8 launches a graph");
  require(reps >= 1, "probe-hop: at least one run");
  require(fg != bg, "probe-hop: the foreground and the background need two streams");
  const int sms = sm_count_now();
  const bool with_bg = form.loads > 0;

  // The chase's ring: every line once, in a shuffled order closed into one cycle; word 0 of a line holds the index
  // of the next line's word 0.
  std::vector<unsigned> ring(std::size_t(kRingLines) * kLineWords, 0u);
  {
    std::vector<int> order(kRingLines);
    std::iota(order.begin(), order.end(), 0);
    std::mt19937 rng(20261205u);
    for (int i = kRingLines - 1; i > 0; --i) std::swap(order[std::size_t(i)], order[std::size_t(std::uniform_int_distribution<int>(0, i - 1)(rng))]);
    for (int i = 0; i < kRingLines; ++i)
      ring[std::size_t(order[std::size_t(i)]) * kLineWords] = unsigned(order[std::size_t((i + 1) % kRingLines)] * kLineWords);
  }
  DeviceBuffer<unsigned> d_ring = DeviceBuffer<unsigned>::from(ring);
  DeviceBuffer<unsigned long long> d_chase(2);
  const unsigned grid_hop = unsigned(sms * kHopGridPerSm);
  DeviceBuffer<float> h0(std::size_t(grid_hop) * 256), h1(std::size_t(grid_hop) * 256);
  KLAB_CUDA(cudaMemsetAsync(h0.get(), 0, h0.bytes(), fg));
  KLAB_CUDA(cudaMemsetAsync(h1.get(), 0, h1.bytes(), fg));
  DeviceBuffer<uint4> d_bg(with_bg ? kBgBytes / sizeof(uint4) : 0);
  DeviceBuffer<unsigned> sink(1);
  if (with_bg) KLAB_CUDA(cudaMemsetAsync(d_bg.get(), 0x5A, d_bg.bytes(), bg));
  KLAB_CUDA(cudaStreamSynchronize(bg));
  KLAB_CUDA(cudaStreamSynchronize(fg));
  const HopGraph one(1, 32, launches, h0.get(), h1.get(), fg), full(grid_hop, 256, launches, h0.get(), h1.get(), fg);
  // Warm: the graphs once, and the chase around the whole ring (its lines into L2).
  KLAB_CUDA(cudaGraphLaunch(one.exec, fg));
  KLAB_CUDA(cudaGraphLaunch(full.exec, fg));
  chase_kernel<<<1, 1, 0, fg>>>(d_ring.get(), kRingLines, d_chase.get());
  KLAB_CUDA_LAUNCH("chase_kernel");
  KLAB_CUDA(cudaStreamSynchronize(fg));

  HopUnderLoad out;
  out.form = form;
  const std::size_t n = d_bg.size();
  const double pass_bytes = with_bg ? double(bg_words(form, n, sms)) * sizeof(uint4) : 0.0;
  Events ev(6);  // 0, 1: the background's; 2..5: the foreground's
  int passes = 8;
  if (with_bg) {  // the background alone
    KLAB_CUDA(cudaEventRecord(ev.e[0], bg));
    launch_bg(form, d_bg.get(), n, passes, sink.get(), sms, bg);
    KLAB_CUDA(cudaEventRecord(ev.e[1], bg));
    KLAB_CUDA(cudaStreamSynchronize(bg));
    out.bg_gbps = double(passes) * pass_bytes / (double(ev.ms(0, 1)) * 1e-3) / 1e9;
    // Long enough for the foreground (~launches x a few us twice, the chase, the head start) five times over.
    const double bg_pass_ms = double(ev.ms(0, 1)) / passes;
    const double fg_ms = 0.03 + 2.0 * launches * 5e-3 + kChaseHops * 2e-3;
    passes = std::max(passes, int(5.0 * fg_ms / bg_pass_ms) + 1);
  }
  std::vector<double> one_us, grid_us, chase_ns, with_gbps;
  for (int tries = 0; int(one_us.size()) < reps; ++tries) {
    require(tries < 4 * reps + 8, "probe-hop: the background (" + form.str() + ", " + std::to_string(passes) +
                                      " passes over 1 GiB) kept ending before the foreground");
    if (with_bg) {
      KLAB_CUDA(cudaEventRecord(ev.e[0], bg));
      launch_bg(form, d_bg.get(), n, passes, sink.get(), sms, bg);
      KLAB_CUDA(cudaEventRecord(ev.e[1], bg));
      spin_kernel<<<1, 1, 0, fg>>>(30000ull);  // 30 us for the background to start and reach its rate
      KLAB_CUDA_LAUNCH("spin_kernel");
    }
    KLAB_CUDA(cudaEventRecord(ev.e[2], fg));
    KLAB_CUDA(cudaGraphLaunch(one.exec, fg));
    KLAB_CUDA(cudaEventRecord(ev.e[3], fg));
    KLAB_CUDA(cudaGraphLaunch(full.exec, fg));
    KLAB_CUDA(cudaEventRecord(ev.e[4], fg));
    chase_kernel<<<1, 1, 0, fg>>>(d_ring.get(), kChaseHops, d_chase.get());
    KLAB_CUDA_LAUNCH("chase_kernel");
    KLAB_CUDA(cudaEventRecord(ev.e[5], fg));
    KLAB_CUDA(cudaStreamSynchronize(fg));
    KLAB_CUDA(cudaStreamSynchronize(bg));
    if (with_bg && !(ev.ms(0, 2) > 0.0f && ev.ms(5, 1) > 0.0f)) {  // the background did not cover the foreground
      passes *= 2;
      continue;
    }
    const auto chase = d_chase.download();
    one_us.push_back(double(ev.ms(2, 3)) * 1e3 / launches);
    grid_us.push_back(double(ev.ms(3, 4)) * 1e3 / launches);
    chase_ns.push_back(double(chase[0]) / kChaseHops);
    if (with_bg) with_gbps.push_back(double(passes) * pass_bytes / (double(ev.ms(0, 1)) * 1e-3) / 1e9);
  }
  out.reps = reps;
  out.bg_passes = with_bg ? passes : 0;
  out.hop_one_us = summarize(one_us).median;
  out.hop_grid_us = summarize(grid_us).median;
  out.chase_ns = summarize(chase_ns).median;
  out.bg_gbps_with = with_bg ? summarize(with_gbps).median : 0.0;
  return out;
}

}  // namespace klab
