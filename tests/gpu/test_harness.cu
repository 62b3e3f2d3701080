// The harness on the device: poisoning, the ceiling, timing, the clock probe, L2-cold vs hot.
#include <doctest/doctest.h>

#include "klab/cuda.hpp"
#include "klab/device.hpp"
#include "klab/cluster_probe.hpp"
#include "klab/load_probe.hpp"
#include "klab/metrics.hpp"
#include "klab/timing.hpp"

#include <memory>
#include <string>
#include <vector>

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

// A fixture: the device, a non-blocking stream and a Timer on it.
struct OnDevice {
  DeviceInfo d = select_device(0);
  cudaStream_t s = nullptr;
  std::unique_ptr<Timer> t;
  OnDevice() {
    KLAB_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    t = std::make_unique<Timer>(d, s);
  }
  ~OnDevice() {
    t.reset();
    cudaStreamDestroy(s);
  }
};

TEST_CASE("the measured ceiling is a plausible share of the bus, in both modes") {
  OnDevice o;
  CHECK(o.d.sm_count > 0);
  CHECK(o.d.l2_bytes > 0);
  auto c = measure_ceiling(*o.t, std::int64_t(512) << 20, TimingOptions{.reps = 10, .warmup = 2});
  // A streaming read of 512 MiB on any recent GPU reaches well over half of the bus's theoretical
  // rate (the H200: ~95%), and can never beat it.
  CHECK(c.read_gbps_launch > 0.6 * o.d.theoretical_gbps);
  CHECK(c.read_gbps_stream > 0.6 * o.d.theoretical_gbps);
  CHECK(c.read_gbps <= 1.02 * o.d.theoretical_gbps);
  CHECK(c.copy_gbps > 0.4 * o.d.theoretical_gbps);
  // the copy back to back: every form measured (1, 2, 4, 8 loads, plain and PDL), the best of them kept
  CHECK(c.copy_gbps_stream > 0.4 * o.d.theoretical_gbps);
  CHECK(c.copy_gbps_stream <= 1.02 * o.d.theoretical_gbps);
  CHECK(c.copy_gbps_stream_by_form.size() == 8);
  CHECK(c.copy_gbps_stream_by_form.at(std::to_string(c.copy_stream_loads) + (c.copy_stream_pdl ? ",pdl" : "")) == doctest::Approx(c.copy_gbps_stream));
  CHECK(c.read_gbps_by_loads.size() == 4);
  CHECK(c.read_gbps_by_loads.at(c.loads) == doctest::Approx(c.read_gbps_launch));
  // An empty kernel: a few microseconds between events, far less per launch inside a graph.
  CHECK(c.empty_launch_us > 0);
  CHECK(c.empty_stream_us < c.empty_launch_us);
  // A dependent hop in a graph: measured (never 0), of the order of what an empty kernel costs there, and
  // below one launch between events (a hop is a kernel waiting on its predecessor, not a host round trip).
  // Not "at least an empty kernel": on an H100 (2026-12-05, reports/h100/run-2c88263) one block's PDL hop took
  // 0.70 us against an empty kernel's 0.99 us in a graph (on the H200 the hop was the larger).
  for (double hop : {c.hop_one_plain_us, c.hop_one_pdl_us, c.hop_grid_plain_us, c.hop_grid_pdl_us}) {
    CHECK(hop >= 0.5 * c.empty_stream_us);
    CHECK(hop < c.empty_launch_us + 5.0);
  }
}

TEST_CASE("probe-hop: the hop and the L2 chase measured alone and beside a background that covers them") {
  OnDevice o;
  cudaStream_t bg = nullptr;
  KLAB_CUDA(cudaStreamCreateWithFlags(&bg, cudaStreamNonBlocking));
  CHECK_THROWS_WITH_AS(measure_hop_under_load({4, 2}, 16, 1, o.s, o.s), doctest::Contains("two streams"), Error);
  CHECK_THROWS_WITH_AS(measure_hop_under_load({3, 2}, 16, 1, o.s, bg), doctest::Contains("1, 2, 4 or 8"), Error);
  const HopUnderLoad idle = measure_hop_under_load({}, 16, 2, o.s, bg);
  const HopUnderLoad busy = measure_hop_under_load({4, 2}, 16, 2, o.s, bg);
  cudaStreamDestroy(bg);
  CHECK(idle.bg_gbps == 0);
  CHECK(idle.bg_passes == 0);
  for (const HopUnderLoad& h : {idle, busy}) {
    CHECK(h.reps == 2);
    // measured, never 0; a hop in a graph well under a host round trip; an L2 round trip under 20 us even queued
    CHECK(h.hop_one_us > 0);
    CHECK(h.hop_grid_us > 0);
    CHECK(h.hop_one_us < 50);
    CHECK(h.hop_grid_us < 50);
    CHECK(h.chase_ns > 10);
    CHECK(h.chase_ns < 20000);
  }
  // The background reads at a real share of the bus alone and beside the foreground (which it outlasted in every run
  // counted: measure_hop_under_load repeats the others), never above the bus.
  CHECK(busy.bg_gbps > 0.3 * o.d.theoretical_gbps);
  CHECK(busy.bg_gbps <= 1.02 * o.d.theoretical_gbps);
  CHECK(busy.bg_gbps_with > 0.3 * o.d.theoretical_gbps);
  CHECK(busy.bg_gbps_with <= 1.02 * o.d.theoretical_gbps);
  CHECK(busy.bg_passes >= 8);
}

TEST_CASE("probe-cluster: a PDL grid without clusters enters early, a plain one after the grid before, each period at least the spin after the wait, the blocks held at once") {
  OnDevice o;
  CHECK_THROWS_WITH_AS(measure_cluster_entry({9, true, 0, 1}, 16, 2, 3, o.s), doctest::Contains("0 (none) to 8"), Error);
  CHECK_THROWS_WITH_AS(measure_cluster_entry({0, true, 0, 1}, 4, 2, 3, o.s), doctest::Contains("at least 8"), Error);
  const ClusterEntry pdl = measure_cluster_entry({0, true, 0, 1}, 64, 2, 3, o.s);
  const ClusterEntry plain = measure_cluster_entry({0, false, 0, 1}, 64, 2, 3, o.s);
  const ClusterEntry c5 = measure_cluster_entry({5, true, 80, 1}, 64, 2, 3, o.s);
  CHECK(pdl.grid == o.d.sm_count);
  CHECK(c5.grid == o.d.sm_count / 5 * 5);
  CHECK(pdl.launches == 64 - 16 - 1);
  // With PDL every block triggers its dependents at entry and one block an SM of 256 threads leaves room: the next grid's
  // blocks enter while this one spins; without it they enter only after it ends, and spin `pre` before their wait.
  CHECK(pdl.entry_gap_us < 0);
  CHECK(plain.entry_gap_us > 0);
  CHECK(plain.period_us >= 2 + 3);
  for (const ClusterEntry& e : {pdl, plain, c5}) {
    CHECK(e.period_us >= 3);  // a grid's spin after its wait follows the grid before's end
    CHECK(e.period_us < 1000);
  }
  // 0 KB blocks of 256 threads: 8 an SM (2048 threads); 80 KB ones in clusters of 5: at most 2 an SM, whole clusters.
  CHECK(pdl.resident_blocks == 8 * o.d.sm_count);
  CHECK(c5.resident_blocks % 5 == 0);
  CHECK(c5.resident_blocks >= 5);
  CHECK(c5.resident_blocks <= 2 * o.d.sm_count);
}

TEST_CASE("timing: repetitions, clock readings, and L2-cold slower than hot on a cache-sized buffer") {
  OnDevice o;
  // A working set that fits in L2 (a quarter of it): hot repetitions hit the cache.
  const std::size_t n = std::size_t(o.d.l2_bytes) / 4 / sizeof(float) / 2;
  DeviceBuffer<float> x(n), y(n);
  KLAB_CUDA(cudaMemset(x.get(), 0, x.bytes()));
  auto body = [&](cudaStream_t st) { scale_kernel<<<o.d.sm_count * 4, 256, 0, st>>>(x.get(), y.get(), n); };
  auto cold = o.t->time(body, TimingOptions{30, 3, true});
  auto hot = o.t->time(body, TimingOptions{30, 3, false});
  CHECK(cold.ms.size() == 30);
  CHECK(cold.sm_mhz.size() == 30);
  CHECK(cold.mode == TimingMode::launch);
  CHECK(cold.clock_mhz_median > 100);
  CHECK(cold.clock_mhz_median < 5000);
  CHECK(cold.summary.min <= cold.summary.median);
  CHECK(cold.summary.median <= cold.summary.max);
  CHECK(cold.l2_cold);
  CHECK_FALSE(hot.l2_cold);
  CHECK(hot.summary.median < cold.summary.median);
}

TEST_CASE("the read flush leaves no write-back in the timed region (a memset flush does)") {
  OnDevice o;
  // A pure read of 16 MiB, after the Timer's read flush, and after a memset of 2x L2 (the old flush,
  // whose dirty lines are written back while the next kernel runs). On the H200 the memset flush
  // added 13-15% to such a read (2026-12-01); the read flush must not pay that.
  const std::size_t n16 = (std::size_t(16) << 20) / 16;
  DeviceBuffer<uint4> buf(n16), dirty(std::size_t(o.d.l2_bytes) * 2 / 16);
  DeviceBuffer<unsigned> sink(1);
  KLAB_CUDA(cudaMemset(buf.get(), 1, buf.bytes()));
  KLAB_CUDA(cudaDeviceSynchronize());
  auto read = [&](cudaStream_t st) { launch_read(buf.get(), n16, sink.get(), 4, false, st); };
  const auto clean = o.t->time(read, TimingOptions{.reps = 40, .warmup = 3});
  auto memset_first = [&](cudaStream_t st) { KLAB_CUDA(cudaMemsetAsync(dirty.get(), 0, dirty.bytes(), st)); };
  // l2_cold off: the memset is the only flush here.
  const auto dirtied = o.t->time(read, TimingOptions{.reps = 40, .warmup = 3, .l2_cold = false}, memset_first);
  INFO("read flush " << clean.summary.median * 1e3 << " us, memset flush " << dirtied.summary.median * 1e3 << " us");
  CHECK(clean.summary.median < 0.97 * dirtied.summary.median);
}

TEST_CASE("stream mode: K launches over rotating copies in one graph, per-launch time") {
  OnDevice o;
  CHECK(o.t->copies_for(1e9) == 2);
  CHECK(o.t->copies_for(3.0 * double(o.d.l2_bytes) / 5.0) == 5);
  CHECK(o.t->copies_for(1.0) == 64);  // capped: a tiny problem cannot be made cold this way
  // Hot (--hot): one copy, so back-to-back launches read inputs L2 may hold; cold: the rotation.
  CHECK(o.t->stream_copies(3.0 * double(o.d.l2_bytes) / 5.0, true) == 5);
  CHECK(o.t->stream_copies(3.0 * double(o.d.l2_bytes) / 5.0, false) == 1);
  CHECK(o.t->stream_copies(1e9, false) == 1);
  std::vector<int> calls;
  std::vector<Body> bodies;
  for (int c = 0; c < 3; ++c)
    bodies.push_back([&calls, c](cudaStream_t st) {
      calls.push_back(c);
      launch_empty(st);
    });
  std::string why;
  auto sub = o.t->stream_subject(bodies, TimingOptions{.min_launches = 10}, {}, why);
  REQUIRE(sub);
  CHECK(why.empty());
  CHECK(sub->launches() == 12);  // the smallest multiple of 3 copies >= 10
  CHECK(sub->copies() == 3);
  // Once uncaptured (lazy initialisation), then 12 captured launches in rotation.
  CHECK(calls == std::vector<int>{0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2});
  auto launch = o.t->launch_subject([](cudaStream_t st) { launch_empty(st); });
  auto ts = o.t->time_interleaved({sub.get(), launch.get()}, TimingOptions{.reps = 20, .warmup = 2, .l2_cold = false});
  CHECK(ts[0].mode == TimingMode::stream);
  CHECK(ts[0].launches == 12);
  CHECK(ts[1].mode == TimingMode::launch);
  // Per launch, a graph hides most of the launch cost that events around one launch show.
  CHECK(ts[0].summary.median < 0.7 * ts[1].summary.median);
}

TEST_CASE("stream mode refuses, with CUDA's reason, a body that cannot be captured") {
  OnDevice o;
  std::string why;
  // Synchronising a stream is illegal while it is being captured.
  auto sub = o.t->stream_subject({[&](cudaStream_t st) {
                                   launch_empty(st);
                                   KLAB_CUDA(cudaStreamSynchronize(st));
                                 }},
                                 TimingOptions{.min_launches = 2}, {}, why);
  CHECK_FALSE(sub);
  CHECK(why.find("cannot be captured") != std::string::npos);
  // The timer still works afterwards.
  CHECK(o.t->time([](cudaStream_t st) { launch_empty(st); }, TimingOptions{.reps = 3, .warmup = 1}).ms.size() == 3);
}

TEST_CASE("interleaved timing alternates subjects repetition by repetition") {
  OnDevice o;
  std::string order;
  auto a = o.t->launch_subject([&](cudaStream_t st) { order += 'A'; launch_empty(st); });
  auto b = o.t->launch_subject([&](cudaStream_t st) { order += 'B'; launch_empty(st); });
  auto ts = o.t->time_interleaved({a.get(), b.get()}, TimingOptions{.reps = 3, .warmup = 1, .l2_cold = false});
  CHECK(order == "ABABABAB");
  CHECK(ts.size() == 2);
  CHECK(ts[0].ms.size() == 3);
}

TEST_CASE("the size-matched read: a plausible share of the big read, cached") {
  OnDevice o;
  const TimingOptions opt{.reps = 10, .warmup = 2};
  const double bytes = 64.0 * (1 << 20);
  const auto& a = o.t->attainable(bytes, TimingMode::stream, opt);
  CHECK(a.gbps > 0.4 * o.d.theoretical_gbps);
  CHECK(a.gbps < 1.02 * o.d.theoretical_gbps);
  CHECK(a.us <= a.plain_us);  // the PDL form is kept only where it was faster
  CHECK(&o.t->attainable(bytes, TimingMode::stream, opt) == &a);
}

TEST_CASE("--trace: every kernel of a timed subject once, in start order; PDL-chained reads overlap, plain ones do not") {
  OnDevice o;
  KernelTracer& tracer = KernelTracer::instance();
  REQUIRE_MESSAGE(tracer.available(), tracer.why());
  const std::size_t n16 = (std::size_t(16) << 20) / sizeof(uint4);  // 16 MiB a copy, 8 copies
  DeviceBuffer<uint4> buf(n16 * 8);
  DeviceBuffer<unsigned> sink(1);
  KLAB_CUDA(cudaMemset(buf.get(), 0x3c, buf.bytes()));
  KLAB_CUDA(cudaMemset(sink.get(), 0, sink.bytes()));
  std::vector<Body> plain, pdl;
  for (int c = 0; c < 8; ++c) {
    const uint4* p = buf.get() + std::size_t(c) * n16;
    plain.push_back([p, n16, &sink](cudaStream_t st) { launch_read(p, n16, sink.get(), 4, false, st); });
    pdl.push_back([p, n16, &sink](cudaStream_t st) { launch_read(p, n16, sink.get(), 4, true, st); });
  }
  std::string why;
  auto sp = o.t->stream_subject(plain, TimingOptions{.min_launches = 16}, {}, why);
  auto sq = o.t->stream_subject(pdl, TimingOptions{.min_launches = 16}, {}, why);
  REQUIRE(sp);
  REQUIRE(sq);
  auto e = o.t->launch_subject([](cudaStream_t st) { launch_empty(st); });
  const auto ts = o.t->time_interleaved({sp.get(), sq.get(), e.get()}, TimingOptions{.reps = 5, .warmup = 1, .trace = true});
  REQUIRE(ts.size() == 3);
  for (const auto& t : ts) CHECK(t.traced);
  REQUIRE(ts[0].trace.size() == 16);
  REQUIRE(ts[1].trace.size() == 16);
  REQUIRE(ts[2].trace.size() == 1);
  CHECK(short_kernel_name(ts[2].trace[0].name) == "empty_kernel");
  for (int j = 0; j < 2; ++j)
    for (std::size_t i = 0; i < 16; ++i) {
      CHECK(short_kernel_name(ts[j].trace[i].name) == "read_kernel");
      CHECK(ts[j].trace[i].end_ns > ts[j].trace[i].start_ns);
      if (i > 0) CHECK(ts[j].trace[i].start_ns >= ts[j].trace[i - 1].start_ns);
    }
  const TraceSummary a = summarize_trace(ts[0].trace), b = summarize_trace(ts[1].trace);
  const auto key = std::make_pair(std::string("read_kernel"), std::string("read_kernel"));
  // Plain launches in one stream: each starts after the one before it has ended.
  CHECK(a.pairs.at(key).median_gap_us >= 0);
  // PDL: each starts while the one before it is still running (its reads overlap that tail).
  CHECK(b.pairs.at(key).median_gap_us < 0);
  // The traced run is the timed graph run once more: its span per launch near the timed median.
  for (int j = 0; j < 2; ++j) {
    const double per_launch_us = summarize_trace(ts[j].trace).span_us / 16;
    CHECK(per_launch_us > 0.67 * ts[j].summary.median * 1e3);
    CHECK(per_launch_us < 1.5 * ts[j].summary.median * 1e3);
  }
  // Without --trace nothing is traced.
  CHECK_FALSE(o.t->time_interleaved({e.get()}, TimingOptions{.reps = 2, .warmup = 0}).front().traced);
}
