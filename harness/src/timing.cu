#include "klab/timing.hpp"

#include <algorithm>
#include <cmath>

#include "klab/error.hpp"

namespace klab {

int sm_count_now() {
  int dev = 0, sms = 0;
  KLAB_CUDA(cudaGetDevice(&dev));
  KLAB_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

std::string to_string(TimingMode m) { return m == TimingMode::stream ? "stream" : "launch"; }

TimingMode parse_timing_mode(const std::string& s) {
  if (s == "launch") return TimingMode::launch;
  if (s == "stream") return TimingMode::stream;
  throw Error("unknown timing mode '" + s + "' (launch or stream)");
}

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

__global__ void empty_kernel() {}

// A dependent hop: each thread reads the word the launch before it wrote (that launch's `out` is this
// one's `in`) and writes one word for the next. With PDL it lets its dependent launch at once and
// waits for its predecessor before the read, as every chained kernel of the lab does; in a graph of
// such launches the time per launch is what one dependent kernel costs when it moves (almost) no
// bytes: grid completion, the dependent's release, an L2 round trip, its own completion.
template <bool PDL>
__global__ void hop_kernel(const float* __restrict__ in, float* __restrict__ out) {
  if constexpr (PDL) {
    asm volatile("griddepcontrol.launch_dependents;");
    asm volatile("griddepcontrol.wait;" ::: "memory");
  }
  const std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  out[i] = __ldcg(in + i) + 1.0f;
}

__global__ void copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    dst[i] = __ldcs(src + i);
}

// The copy with U independent 16-byte loads in flight per thread before its U stores (U >= 2; U = 1
// is copy_kernel, the form of every report before 2026-12-02). With PDL (stream mode's chained form)
// it lets its dependents launch at once, issues its first U loads, and waits for its predecessor
// before its first store: a copy's reads overlap the kernel before it, its writes never do.
template <int U, bool PDL = false>
__global__ void copy_kernel_u(const uint4* __restrict__ src, uint4* __restrict__ dst, std::size_t n) {
  if constexpr (PDL) asm volatile("griddepcontrol.launch_dependents;");
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  bool waited = !PDL;
  for (; i + (U - 1) * stride < n; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int j = 0; j < U; ++j) v[j] = __ldcs(src + i + j * stride);
    if (!waited) {
      asm volatile("griddepcontrol.wait;" ::: "memory");
      waited = true;
    }
#pragma unroll
    for (int j = 0; j < U; ++j) dst[i + j * stride] = v[j];
  }
  if (!waited) asm volatile("griddepcontrol.wait;" ::: "memory");
  for (; i < n; i += stride) dst[i] = __ldcs(src + i);
}

// Folds n 16-byte words with U independent loads in flight per thread. The one store depends on
// every load and is never taken (no fold equals the sentinel for the data the callers read: a
// sentinel hit would only write one word), so the compiler keeps every load. With PDL the kernel
// lets its dependents launch at once and waits for its predecessor only before that store.
template <int U, bool PDL>
__global__ void __launch_bounds__(256) read_kernel(const uint4* __restrict__ p, std::size_t n, unsigned* sink) {
  if constexpr (PDL) asm volatile("griddepcontrol.launch_dependents;");
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  unsigned acc = 0;
  for (; i + (U - 1) * stride < n; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = p[i + u * stride];
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) {
    const uint4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if constexpr (PDL) asm volatile("griddepcontrol.wait;" ::: "memory");
  if (acc == 0x9E3779B9u) sink[0] = acc;
}

template <bool PDL>
void launch_read_u(const uint4* p, std::size_t n, unsigned* sink, int loads, unsigned grid, cudaStream_t s) {
  switch (loads) {
    case 1: launch_maybe_pdl(PDL, read_kernel<1, PDL>, grid, 256, 0, s, p, n, sink); break;
    case 2: launch_maybe_pdl(PDL, read_kernel<2, PDL>, grid, 256, 0, s, p, n, sink); break;
    case 4: launch_maybe_pdl(PDL, read_kernel<4, PDL>, grid, 256, 0, s, p, n, sink); break;
    case 8: launch_maybe_pdl(PDL, read_kernel<8, PDL>, grid, 256, 0, s, p, n, sink); break;
    default: throw Error("launch_read: loads in flight must be 1, 2, 4 or 8 (got " + std::to_string(loads) + ")");
  }
}

// The copy forms of the ceiling: U = 1, 2, 4, 8 loads in flight per thread, 8 blocks of 512 per SM
// asked (4 resident), plain or PDL (copy_kernel_u<U, true>; U = 1 plain is copy_kernel).
void launch_copy(const uint4* src, uint4* dst, std::size_t n, int loads, bool pdl, cudaStream_t s) {
  const unsigned grid = unsigned(sm_count_now()) * 8;
  if (!pdl && loads == 1) {
    copy_kernel<<<grid, 512, 0, s>>>(src, dst, n);
    KLAB_CUDA_LAUNCH("copy_kernel");
    return;
  }
  switch (loads) {
    case 1: launch_maybe_pdl(true, copy_kernel_u<1, true>, grid, 512, 0, s, src, dst, n); break;
    case 2: launch_maybe_pdl(pdl, pdl ? copy_kernel_u<2, true> : copy_kernel_u<2>, grid, 512, 0, s, src, dst, n); break;
    case 4: launch_maybe_pdl(pdl, pdl ? copy_kernel_u<4, true> : copy_kernel_u<4>, grid, 512, 0, s, src, dst, n); break;
    case 8: launch_maybe_pdl(pdl, pdl ? copy_kernel_u<8, true> : copy_kernel_u<8>, grid, 512, 0, s, src, dst, n); break;
    default: throw Error("launch_copy: loads in flight must be 1, 2, 4 or 8 (got " + std::to_string(loads) + ")");
  }
}

class LaunchSubject : public Timer::Subject {
 public:
  LaunchSubject(Body body, Body before) : body_(std::move(body)), before_(std::move(before)) {}
  TimingMode mode() const override { return TimingMode::launch; }
  int launches() const override { return 1; }
  int copies() const override { return 1; }
  void before(cudaStream_t s) override {
    if (before_) before_(s);
  }
  void body(cudaStream_t s) override { body_(s); }

 private:
  Body body_, before_;
};

class StreamSubject : public Timer::Subject {
 public:
  StreamSubject(cudaGraphExec_t exec, int launches, int copies, Body before)
      : exec_(exec), launches_(launches), copies_(copies), before_(std::move(before)) {}
  ~StreamSubject() override { cudaGraphExecDestroy(exec_); }
  TimingMode mode() const override { return TimingMode::stream; }
  int launches() const override { return launches_; }
  int copies() const override { return copies_; }
  void before(cudaStream_t s) override {
    if (before_) before_(s);
  }
  void body(cudaStream_t s) override { KLAB_CUDA(cudaGraphLaunch(exec_, s)); }

 private:
  cudaGraphExec_t exec_;
  int launches_, copies_;
  Body before_;
};
}  // namespace

void launch_read(const uint4* p, std::size_t n, unsigned* sink, int loads, bool pdl, cudaStream_t s, unsigned grid) {
  if (grid == 0) grid = unsigned(sm_count_now()) * 4;
  if (pdl) launch_read_u<true>(p, n, sink, loads, grid, s);
  else launch_read_u<false>(p, n, sink, loads, grid, s);
}

void launch_empty(cudaStream_t s) {
  empty_kernel<<<1, 32, 0, s>>>();
  KLAB_CUDA_LAUNCH("empty_kernel");
}

void launch_hop(bool pdl, unsigned grid, unsigned threads, const float* in, float* out, cudaStream_t s) {
  if (pdl) launch_maybe_pdl(true, hop_kernel<true>, grid, threads, 0, s, in, out);
  else launch_maybe_pdl(false, hop_kernel<false>, grid, threads, 0, s, in, out);
}

Timer::Timer(const DeviceInfo& dev, cudaStream_t stream)
    : dev_(dev), stream_(stream),
      flush_(static_cast<std::size_t>(std::max<std::int64_t>(dev.l2_bytes, 1 << 20)) * 2 / sizeof(uint4)), sink_(1) {
  // Written once, synchronously, so that no dirty line of it is left for a timed kernel; from then
  // on the flush only reads it.
  KLAB_CUDA(cudaMemset(flush_.get(), 0x5a, flush_.bytes()));
  KLAB_CUDA(cudaMemset(sink_.get(), 0, sink_.bytes()));
  KLAB_CUDA(cudaDeviceSynchronize());
}

Timer::~Timer() = default;

void Timer::flush_l2() {
  // Reading twice the L2 evicts what a previous repetition left there, and writes nothing back.
  launch_read(flush_.get(), flush_.size(), sink_.get(), 4, false, stream_);
}

int Timer::copies_for(double bytes) const {
  require(bytes > 0, "copies_for: a problem of no bytes");
  const double need = 3.0 * double(std::max<std::int64_t>(dev_.l2_bytes, 1 << 20)) / bytes;
  // 64 at most: tiny (smoke-test) problems cannot be made cold this way, and say so through copies.
  return int(std::clamp(std::ceil(need), 2.0, 64.0));
}

std::unique_ptr<Timer::Subject> Timer::launch_subject(Body body, Body before_each) {
  return std::make_unique<LaunchSubject>(std::move(body), std::move(before_each));
}

std::unique_ptr<Timer::Subject> Timer::stream_subject(const std::vector<Body>& bodies, const TimingOptions& opt,
                                                      Body before_each, std::string& why) {
  require(!bodies.empty(), "stream_subject: no bodies");
  const int n = int(bodies.size());
  const int launches = n * ((std::max(opt.min_launches, 1) + n - 1) / n);
  if (before_each) before_each(stream_);
  for (const auto& b : bodies) b(stream_);  // lazy initialisation outside the graph
  KLAB_CUDA(cudaStreamSynchronize(stream_));
  cudaGraph_t graph = nullptr;
  KLAB_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  std::string thrown;
  try {
    for (int i = 0; i < launches; ++i) bodies[std::size_t(i % n)](stream_);
  } catch (const std::exception& e) {
    thrown = e.what();
  }
  const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
  cudaGetLastError();  // a failed capture leaves its error behind
  if (!thrown.empty() || end != cudaSuccess || graph == nullptr) {
    if (graph) cudaGraphDestroy(graph);
    why = "cannot be captured in a CUDA graph: " +
          (!thrown.empty() ? thrown : std::string(cudaGetErrorName(end)) + " (" + cudaGetErrorString(end) + ")");
    return nullptr;
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (inst != cudaSuccess) {
    cudaGetLastError();
    why = std::string("its CUDA graph cannot be instantiated: ") + cudaGetErrorName(inst) + " (" + cudaGetErrorString(inst) + ")";
    return nullptr;
  }
  return std::make_unique<StreamSubject>(exec, launches, n, std::move(before_each));
}

std::vector<Timing> Timer::time_interleaved(const std::vector<Subject*>& subjects, const TimingOptions& opt) {
  require(opt.reps >= 1, "timing needs at least 1 repetition (--reps)");
  require(!subjects.empty(), "time_interleaved: nothing to time");
  const std::size_t ns = subjects.size(), reps = std::size_t(opt.reps);
  std::vector<cudaEvent_t> ev(2 * reps * ns);
  for (auto& e : ev) KLAB_CUDA(cudaEventCreate(&e));
  DeviceBuffer<unsigned long long> clocks(2 * reps * ns);
  for (int r = -opt.warmup; r < opt.reps; ++r) {
    for (std::size_t j = 0; j < ns; ++j) {
      Subject& sub = *subjects[j];
      sub.before(stream_);
      if (opt.l2_cold) flush_l2();
      const std::size_t slot = r >= 0 ? (std::size_t(r) * ns + j) : 0;
      if (r >= 0) KLAB_CUDA(cudaEventRecord(ev[2 * slot], stream_));
      sub.body(stream_);
      if (r >= 0) {
        KLAB_CUDA(cudaEventRecord(ev[2 * slot + 1], stream_));
        clock_probe<<<1, 1, 0, stream_>>>(clocks.get() + 2 * slot);
        KLAB_CUDA_LAUNCH("clock_probe");
      }
    }
    // Keep the queue short: the host never runs more than one round ahead of the device.
    if (r >= 0) KLAB_CUDA(cudaEventSynchronize(ev[2 * (std::size_t(r) * ns + ns - 1) + 1]));
  }
  KLAB_CUDA(cudaStreamSynchronize(stream_));
  const auto ck = clocks.download();
  std::vector<Timing> out(ns);
  for (std::size_t j = 0; j < ns; ++j) {
    Timing& t = out[j];
    t.mode = subjects[j]->mode();
    t.launches = subjects[j]->launches();
    t.copies = subjects[j]->copies();
    t.l2_cold = opt.l2_cold;
    for (std::size_t r = 0; r < reps; ++r) {
      const std::size_t slot = r * ns + j;
      float ms = 0;
      KLAB_CUDA(cudaEventElapsedTime(&ms, ev[2 * slot], ev[2 * slot + 1]));
      t.ms.push_back(double(ms) / t.launches);
      const double ns_ = double(ck[2 * slot + 1]);
      t.sm_mhz.push_back(ns_ > 0 ? double(ck[2 * slot]) / ns_ * 1e3 : 0.0);
    }
    const double top = *std::max_element(t.sm_mhz.begin(), t.sm_mhz.end());
    for (std::size_t r = 0; r < reps; ++r) {
      const bool thr = t.sm_mhz[r] < opt.throttle_share * top;
      t.throttled.push_back(thr);
      t.throttled_count += thr;
      if (!thr) t.kept_ms.push_back(t.ms[r]);
    }
    if (t.kept_ms.size() * 2 < t.ms.size()) t.kept_ms = t.ms;  // mostly "throttled": the clock simply varies
    t.summary = summarize(t.kept_ms);
    t.clock_mhz_median = summarize(t.sm_mhz).median;
  }
  for (auto e : ev) cudaEventDestroy(e);
  if (opt.trace && KernelTracer::instance().available()) {
    KernelTracer& tracer = KernelTracer::instance();
    for (std::size_t j = 0; j < ns; ++j) {
      subjects[j]->before(stream_);
      if (opt.l2_cold) flush_l2();
      tracer.start();  // waits for the preparation and the flush: neither is in the trace
      subjects[j]->body(stream_);
      out[j].trace = tracer.stop();
      out[j].traced = true;
    }
  }
  return out;
}

Timing Timer::time(const Body& body, const TimingOptions& opt, const Body& before_each) {
  auto s = launch_subject(body, before_each);
  return time_interleaved({s.get()}, opt).front();
}

const Timer::Attainable& Timer::attainable(double bytes, TimingMode mode, const TimingOptions& given) {
  TimingOptions opt = given;
  opt.trace = false;  // the size-matched read is a yardstick, not a subject of the trace
  const auto key = std::make_pair(static_cast<long long>(bytes), int(mode) * 2 + int(opt.l2_cold));
  if (auto it = attainable_.find(key); it != attainable_.end()) return it->second;
  const std::size_t n16 = std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(bytes / 16.0)));
  const int copies = mode == TimingMode::stream ? stream_copies(bytes, opt.l2_cold) : 1;
  DeviceBuffer<uint4> buf(n16 * std::size_t(copies));
  KLAB_CUDA(cudaMemset(buf.get(), 0x3c, buf.bytes()));
  KLAB_CUDA(cudaDeviceSynchronize());
  const int loads = 4;
  Attainable a;
  if (mode == TimingMode::launch) {
    auto s = launch_subject([&](cudaStream_t st) { launch_read(buf.get(), n16, sink_.get(), loads, false, st); });
    a.us = a.plain_us = time_interleaved({s.get()}, opt).front().summary.median * 1e3;
  } else {
    std::vector<Body> plain, pdl;
    for (int c = 0; c < copies; ++c) {
      const uint4* p = buf.get() + std::size_t(c) * n16;
      plain.push_back([this, p, n16, loads](cudaStream_t st) { launch_read(p, n16, sink_.get(), loads, false, st); });
      pdl.push_back([this, p, n16, loads](cudaStream_t st) { launch_read(p, n16, sink_.get(), loads, true, st); });
    }
    std::string why;
    auto sp = stream_subject(plain, opt, {}, why);
    auto sq = stream_subject(pdl, opt, {}, why);
    require(sp && sq, "the size-matched read " + why);
    const auto t = time_interleaved({sp.get(), sq.get()}, opt);
    a.plain_us = t[0].summary.median * 1e3;
    const double pdl_us = t[1].summary.median * 1e3;
    a.pdl = pdl_us < a.plain_us;
    a.us = std::min(a.plain_us, pdl_us);
  }
  a.gbps = bytes / (a.us * 1e-6) / 1e9;
  return attainable_[key] = a;
}

Ceiling measure_ceiling(Timer& timer, std::int64_t bytes, const TimingOptions& base) {
  require(bytes >= (1 << 20), "measure_ceiling: at least 1 MiB");
  TimingOptions opt = base;
  opt.l2_cold = true;
  opt.min_launches = 8;
  const std::size_t n4 = static_cast<std::size_t>(bytes) / sizeof(uint4);
  DeviceBuffer<uint4> a(n4), b(n4);
  KLAB_CUDA(cudaMemset(a.get(), 0x3c, a.bytes()));
  KLAB_CUDA(cudaDeviceSynchronize());
  Ceiling c;
  c.bytes = static_cast<std::int64_t>(n4 * sizeof(uint4));
  c.reps = opt.reps;
  DeviceBuffer<unsigned> sinkbuf(1);
  unsigned* sink = sinkbuf.get();
  // launch mode: the read kernel with 1, 2, 4 and 8 loads in flight per thread; the best is the
  // ceiling (and the form the stream-mode and size-matched reads use).
  std::vector<std::unique_ptr<Timer::Subject>> subs;
  std::vector<Timer::Subject*> ptrs;
  const int forms[] = {1, 2, 4, 8};
  for (int l : forms) {
    subs.push_back(timer.launch_subject([=, &a](cudaStream_t st) { launch_read(a.get(), n4, sink, l, false, st); }));
    ptrs.push_back(subs.back().get());
  }
  // the copy with 1, 2, 4 and 8 loads in flight per thread (8 blocks of 512 per SM): the best is copy_gbps
  for (int l : forms) {
    subs.push_back(timer.launch_subject([=, &a, &b](cudaStream_t st) { launch_copy(a.get(), b.get(), n4, l, false, st); }));
    ptrs.push_back(subs.back().get());
  }
  subs.push_back(timer.launch_subject([](cudaStream_t st) { launch_empty(st); }));
  ptrs.push_back(subs.back().get());
  const auto t = timer.time_interleaved(ptrs, opt);
  for (std::size_t i = 0; i < 4; ++i) {
    const double g = double(c.bytes) / (t[i].summary.median * 1e-3) / 1e9;
    c.read_gbps_by_loads[forms[i]] = g;
    if (g > c.read_gbps_launch) {
      c.read_gbps_launch = g;
      c.loads = forms[i];
    }
  }
  for (std::size_t i = 0; i < 4; ++i) {
    const double g = 2.0 * double(c.bytes) / (t[4 + i].summary.median * 1e-3) / 1e9;
    c.copy_gbps_by_loads[forms[i]] = g;
    if (g > c.copy_gbps) {
      c.copy_gbps = g;
      c.copy_loads = forms[i];
    }
  }
  c.empty_launch_us = t[8].summary.median * 1e3;
  // stream mode: the best form over two copies (each launch reads the copy its predecessor did
  // not), plain and with programmatic dependent launch (each read overlaps its predecessor's tail:
  // on the H200, reports/h200 (commit ade16ef, 2026-12-01): 1 GiB back to back 4517 GB/s plain,
  // 4568 GB/s with PDL; one launch between events 4478 GB/s), and the empty kernel in a graph.
  {
    std::string why;
    // Every loads-in-flight form, plain and PDL: the form that wins one launch need not win back
    // to back (same report: 8 loads in flight won in launch mode, 2 with PDL in a graph; 1 load
    // per iteration reached only 3794 GB/s in launch mode).
    std::vector<std::unique_ptr<Timer::Subject>> rs;
    std::vector<Timer::Subject*> rp;
    std::vector<std::pair<int, bool>> what;
    for (int l : forms)
      for (bool pdl : {false, true}) {
        rs.push_back(timer.stream_subject({[&, l, pdl](cudaStream_t st) { launch_read(a.get(), n4, sink, l, pdl, st); },
                                           [&, l, pdl](cudaStream_t st) { launch_read(b.get(), n4, sink, l, pdl, st); }},
                                          opt, {}, why));
        require(rs.back() != nullptr, "the ceiling's read " + why);
        rp.push_back(rs.back().get());
        what.emplace_back(l, pdl);
      }
    TimingOptions eopt = opt;
    eopt.min_launches = 64;
    eopt.l2_cold = false;
    auto es = timer.stream_subject({[](cudaStream_t st) { launch_empty(st); }}, eopt, {}, why);
    require(es != nullptr, "the empty kernel " + why);
    const auto ts = timer.time_interleaved(rp, opt);
    for (std::size_t i = 0; i < ts.size(); ++i) {
      const double g = double(c.bytes) / (ts[i].summary.median * 1e-3) / 1e9;
      double& best = what[i].second ? c.read_gbps_stream_pdl : c.read_gbps_stream_plain;
      if (g > best) best = g;
      if (g > c.read_gbps_stream) {
        c.read_gbps_stream = g;
        c.stream_loads = what[i].first;
        c.stream_pdl = what[i].second;
      }
    }
    c.empty_stream_us = timer.time_interleaved({es.get()}, eopt).front().summary.median * 1e3;
    // The copy back to back (what a kernel that reads and writes its bytes once, as the GDN recurrence
    // its state, can reach in a graph): every form plain and PDL, launches alternating between the
    // halves a_lo -> b_lo and b_hi -> a_hi, so that no launch reads what the one before it writes
    // (a PDL copy reads before its wait); each moves half the buffer both ways.
    {
      const std::size_t h4 = n4 / 2;
      std::vector<std::unique_ptr<Timer::Subject>> cs;
      std::vector<Timer::Subject*> cp;
      std::vector<std::pair<int, bool>> cwhat;
      for (int l : forms)
        for (bool pdl : {false, true}) {
          cs.push_back(timer.stream_subject({[&, l, pdl, h4](cudaStream_t st) { launch_copy(a.get(), b.get(), h4, l, pdl, st); },
                                             [&, l, pdl, h4](cudaStream_t st) { launch_copy(b.get() + h4, a.get() + h4, h4, l, pdl, st); }},
                                            opt, {}, why));
          require(cs.back() != nullptr, "the ceiling's copy " + why);
          cp.push_back(cs.back().get());
          cwhat.emplace_back(l, pdl);
        }
      const auto tc = timer.time_interleaved(cp, opt);
      for (std::size_t i = 0; i < tc.size(); ++i) {
        const double g = 2.0 * double(h4 * sizeof(uint4)) / (tc[i].summary.median * 1e-3) / 1e9;
        c.copy_gbps_stream_by_form[std::to_string(cwhat[i].first) + (cwhat[i].second ? ",pdl" : "")] = g;
        if (g > c.copy_gbps_stream) {
          c.copy_gbps_stream = g;
          c.copy_stream_loads = cwhat[i].first;
          c.copy_stream_pdl = cwhat[i].second;
        }
      }
    }
    // The dependent hop (hop_kernel), one block of 32 threads and a full grid (4 blocks of 256 per
    // SM), plain and PDL, ping-ponging between two buffers.
    const unsigned full = unsigned(sm_count_now()) * 4;
    DeviceBuffer<float> h0(std::size_t(full) * 256), h1(std::size_t(full) * 256);
    KLAB_CUDA(cudaMemset(h0.get(), 0, h0.bytes()));
    KLAB_CUDA(cudaMemset(h1.get(), 0, h1.bytes()));
    KLAB_CUDA(cudaDeviceSynchronize());
    std::vector<std::unique_ptr<Timer::Subject>> hs;
    std::vector<Timer::Subject*> hp;
    for (unsigned grid : {1u, full})
      for (bool pdl : {false, true}) {
        const unsigned threads = grid == 1 ? 32 : 256;
        auto hop = [grid, threads, pdl](const float* in, float* out, cudaStream_t st) { launch_hop(pdl, grid, threads, in, out, st); };
        hs.push_back(timer.stream_subject({[&, hop](cudaStream_t st) { hop(h0.get(), h1.get(), st); },
                                           [&, hop](cudaStream_t st) { hop(h1.get(), h0.get(), st); }},
                                          eopt, {}, why));
        require(hs.back() != nullptr, "the dependent hop " + why);
        hp.push_back(hs.back().get());
      }
    const auto th = timer.time_interleaved(hp, eopt);
    c.hop_one_plain_us = th[0].summary.median * 1e3;
    c.hop_one_pdl_us = th[1].summary.median * 1e3;
    c.hop_grid_plain_us = th[2].summary.median * 1e3;
    c.hop_grid_pdl_us = th[3].summary.median * 1e3;
  }
  c.read_gbps = std::max(c.read_gbps_stream, c.read_gbps_launch);
  return c;
}

double Ceiling::read_gbps_of(TimingMode m) const { return m == TimingMode::stream ? read_gbps_stream : read_gbps_launch; }
double Ceiling::copy_gbps_of(TimingMode m) const { return m == TimingMode::stream ? copy_gbps_stream : copy_gbps; }

nlohmann::json to_json(const Ceiling& c) {
  nlohmann::json by_loads = nlohmann::json::object();
  for (const auto& [l, g] : c.read_gbps_by_loads) by_loads[std::to_string(l)] = g;
  nlohmann::json copy_by_loads = nlohmann::json::object();
  for (const auto& [l, g] : c.copy_gbps_by_loads) copy_by_loads[std::to_string(l)] = g;
  nlohmann::json copy_stream = nlohmann::json::object();
  for (const auto& [f, g] : c.copy_gbps_stream_by_form) copy_stream[f] = g;
  return {{"read_gbps", c.read_gbps},
          {"copy_gbps", c.copy_gbps},
          {"bytes", c.bytes},
          {"reps", c.reps},
          {"flush", "read"},
          {"mode", "launch and stream"},
          {"modes", {{"launch", {{"read_gbps", c.read_gbps_launch}}},
                     {"stream", {{"read_gbps", c.read_gbps_stream}, {"plain_gbps", c.read_gbps_stream_plain}, {"pdl_gbps", c.read_gbps_stream_pdl},
                                 {"loads_in_flight", c.stream_loads}, {"pdl", c.stream_pdl}, {"copy_gbps", c.copy_gbps_stream},
                                 {"copy_loads_in_flight", c.copy_stream_loads}, {"copy_pdl", c.copy_stream_pdl},
                                 {"copy_gbps_by_form", copy_stream}}}}},
          {"loads_in_flight", c.loads},
          {"read_gbps_by_loads_launch", by_loads},
          {"copy_loads_in_flight", c.copy_loads},
          {"copy_gbps_by_loads_launch", copy_by_loads},
          {"empty_kernel_us", {{"launch", c.empty_launch_us}, {"stream", c.empty_stream_us}}},
          {"hop_us", {{"one_block", {{"plain", c.hop_one_plain_us}, {"pdl", c.hop_one_pdl_us}}},
                      {"full_grid", {{"plain", c.hop_grid_plain_us}, {"pdl", c.hop_grid_pdl_us}}},
                      {"kernel", "a graph of dependent launches, each reading after griddepcontrol.wait (pdl) the words its predecessor "
                                 "wrote and writing the next: one block of 32 threads, or 4 blocks of 256 per SM; per launch"}}},
          {"kernel", "read: grid-stride 16-byte loads, 4 blocks of 256 per SM, 1/2/4/8 independent loads in flight per "
                     "thread (best kept), folded into one register; copy: float4 loads + stores, 1/2/4/8 in flight per thread (best kept); stream: a graph of "
                     "back-to-back reads over two copies, plain and with programmatic dependent launch (the faster kept); the copy likewise "
                     "back to back over two halves of the buffer (modes.stream.copy_gbps)"}};
}

GraphNodes graph_nodes(const Body& body, cudaStream_t s) {
  cudaGraph_t graph = nullptr;
  KLAB_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  try {
    body(s);
  } catch (...) {
    cudaStreamEndCapture(s, &graph);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();  // a failed capture leaves its error behind
    throw;
  }
  KLAB_CUDA(cudaStreamEndCapture(s, &graph));
  std::size_t n = 0;
  KLAB_CUDA(cudaGraphGetNodes(graph, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  if (n) KLAB_CUDA(cudaGraphGetNodes(graph, nodes.data(), &n));
  GraphNodes g;
  g.total = int(n);
  for (auto node : nodes) {
    cudaGraphNodeType t{};
    KLAB_CUDA(cudaGraphNodeGetType(node, &t));
    g.kernels += t == cudaGraphNodeTypeKernel;
  }
  KLAB_CUDA(cudaGraphDestroy(graph));
  return g;
}

nlohmann::json to_json(const Timing& t, bool with_samples) {
  nlohmann::json j = to_json(t.summary);
  j["mode"] = to_string(t.mode);
  j["flush"] = t.l2_cold ? "read" : "none";
  j["reps"] = t.ms.size();
  j["kept"] = t.kept_ms.size();
  j["throttled"] = t.throttled_count;
  j["clock_mhz"] = t.clock_mhz_median;
  j["l2_cold"] = t.l2_cold;
  if (t.mode == TimingMode::stream) {
    j["launches"] = t.launches;
    j["copies"] = t.copies;
  }
  if (t.traced) j["trace"] = to_json(t.trace);
  if (with_samples) {
    j["samples_ms"] = t.ms;
    j["samples_clock_mhz"] = t.sm_mhz;
  }
  return j;
}

}  // namespace klab
