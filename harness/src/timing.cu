#include "klab/timing.hpp"

#include <algorithm>

namespace klab {

namespace {
// Measures the SM clock: one thread spins for a fixed number of cycles and reads %globaltimer
// before and after (both on the same SM, so the clock64 counter is consistent). ~50 us.
__global__ void clock_probe(unsigned long long* out) {
  unsigned long long t0, t1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  long long c0 = clock64(), c1 = c0;
  while (c1 - c0 < 100000) c1 = clock64();
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
  out[0] = static_cast<unsigned long long>(c1 - c0);
  out[1] = t1 - t0;
}
}  // namespace

Timer::Timer(const DeviceInfo& dev, cudaStream_t stream)
    : stream_(stream), flush_(static_cast<std::size_t>(std::max<std::int64_t>(dev.l2_bytes, 1 << 20)) * 2) {}

Timer::~Timer() = default;

void Timer::flush_l2() {
  // Writing twice the L2 evicts everything a previous repetition left there.
  KLAB_CUDA(cudaMemsetAsync(flush_.get(), 0, flush_.bytes(), stream_));
}

Timing Timer::time(const std::function<void(cudaStream_t)>& body, const TimingOptions& opt,
                   const std::function<void(cudaStream_t)>& before_each) {
  require(opt.reps >= 1, "timing needs at least 1 repetition (--reps)");
  const int total = opt.warmup + opt.reps;
  std::vector<cudaEvent_t> ev(2 * static_cast<std::size_t>(opt.reps));
  for (auto& e : ev) KLAB_CUDA(cudaEventCreate(&e));
  if (clock_.size() < 2 * static_cast<std::size_t>(opt.reps)) clock_ = DeviceBuffer<unsigned long long>(2 * static_cast<std::size_t>(opt.reps));
  for (int r = 0; r < total; ++r) {
    if (before_each) before_each(stream_);
    if (opt.l2_cold) flush_l2();
    const int i = r - opt.warmup;
    if (i >= 0) KLAB_CUDA(cudaEventRecord(ev[2 * i], stream_));
    body(stream_);
    if (i >= 0) {
      KLAB_CUDA(cudaEventRecord(ev[2 * i + 1], stream_));
      clock_probe<<<1, 1, 0, stream_>>>(clock_.get() + 2 * i);
      KLAB_CUDA_LAUNCH("clock_probe");
    }
  }
  KLAB_CUDA(cudaStreamSynchronize(stream_));
  Timing t;
  t.l2_cold = opt.l2_cold;
  auto clocks = clock_.download();
  for (int i = 0; i < opt.reps; ++i) {
    float ms = 0;
    KLAB_CUDA(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
    t.ms.push_back(ms);
    double ns = double(clocks[2 * i + 1]);
    t.sm_mhz.push_back(ns > 0 ? double(clocks[2 * i]) / ns * 1e3 : 0.0);
  }
  for (auto e : ev) cudaEventDestroy(e);
  const double top = *std::max_element(t.sm_mhz.begin(), t.sm_mhz.end());
  for (int i = 0; i < opt.reps; ++i) {
    bool thr = t.sm_mhz[i] < opt.throttle_share * top;
    t.throttled.push_back(thr);
    t.throttled_count += thr;
    if (!thr) t.kept_ms.push_back(t.ms[i]);
  }
  if (t.kept_ms.size() * 2 < t.ms.size()) t.kept_ms = t.ms;  // mostly "throttled": the clock simply varies
  t.summary = summarize(t.kept_ms);
  t.clock_mhz_median = summarize(t.sm_mhz).median;
  return t;
}

nlohmann::json to_json(const Timing& t, bool with_samples) {
  nlohmann::json j = to_json(t.summary);
  j["reps"] = t.ms.size();
  j["kept"] = t.kept_ms.size();
  j["throttled"] = t.throttled_count;
  j["clock_mhz"] = t.clock_mhz_median;
  j["l2_cold"] = t.l2_cold;
  if (with_samples) {
    j["samples_ms"] = t.ms;
    j["samples_clock_mhz"] = t.sm_mhz;
  }
  return j;
}

}  // namespace klab
