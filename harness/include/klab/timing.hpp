#pragma once
// Timing near the floor: CUDA events, warm-up, many repetitions, the SM clock recorded beside each
// repetition (repetitions taken while the GPU ran throttled are flagged and left out of the
// summary), and two modes:
//   launch  one launch between two events, after a read flush. An empty kernel costs ~3 us this
//           way on an H200, so a problem whose floor is a few microseconds cannot show it here.
//   stream  K launches back to back in one CUDA graph, launch i on copy i % N of the inputs, the N
//           copies together over 3x the L2: every launch reads cold inputs, as in a decode step
//           where kernels run back to back. Time per launch = graph time / K. The headline mode.
// L2-cold means a READ flush: a read pass over 2x the L2 outside the timed region. A memset flush
// leaves ~2x L2 of dirty lines whose write-back lands inside the next timed kernel (issue 9's
// measurement on the H200, 2026-12-01: a 17.7 MB streaming read 10.1 us after a memset flush, 8.8 us
// after a read flush; cuBLAS bf16 GemmEx paid +19-24%, our ld.cs kernels ~+6%: not neutral between
// kernels). tests/gpu/test_harness.cu holds the read flush to at least 3% below a memset flush.
// Several subjects can be timed with their repetitions interleaved (ABAB...), so that drift over
// the run hits every subject alike.
#include <cuda_runtime.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "klab/cuda.hpp"
#include "klab/device.hpp"
#include "klab/stats.hpp"
#include "klab/trace.hpp"

namespace klab {

enum class TimingMode { launch, stream };
std::string to_string(TimingMode m);
// "launch", "stream"; throws klab::Error naming both otherwise.
TimingMode parse_timing_mode(const std::string& s);

struct TimingOptions {
  int reps = 50;
  int warmup = 5;
  bool l2_cold = true;
  // A repetition whose SM clock is below this share of the run's highest clock counts as throttled.
  double throttle_share = 0.90;
  // stream: at least this many launches per graph (rounded up to a multiple of the copies).
  int min_launches = 32;
  // --trace: after the timed repetitions, each subject's body runs once more under the kernel
  // tracer (klab/trace.hpp) and Timing::trace holds its kernels (untimed: never in the timing statistics).
  bool trace = false;
};

struct Timing {
  TimingMode mode = TimingMode::launch;
  std::vector<double> ms;       // every repetition, in order: time per launch
  std::vector<double> sm_mhz;   // SM clock measured right after each repetition
  std::vector<bool> throttled;
  std::vector<double> kept_ms;  // repetitions not throttled (all of them if fewer than half would remain)
  Summary summary;              // over kept_ms
  double clock_mhz_median = 0;
  int throttled_count = 0;
  bool l2_cold = true;          // a read flush before every repetition
  int launches = 1;             // launches per repetition (stream: K per graph)
  int copies = 1;               // input copies the launches rotate over
  bool traced = false;          // TimingOptions::trace and the tracer was available
  std::vector<KernelSpan> trace;  // the kernels of one untimed run of the body, in start order
};

using Body = std::function<void(cudaStream_t)>;

class Timer {
 public:
  Timer(const DeviceInfo& dev, cudaStream_t stream);
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // One thing to time, prepared once and sampled many times. Built by launch_subject or
  // stream_subject; timed by time_interleaved.
  class Subject {
   public:
    virtual ~Subject() = default;
    virtual TimingMode mode() const = 0;
    virtual int launches() const = 0;
    virtual int copies() const = 0;
    // Enqueues the untimed preparation (before_each) and the timed work for one repetition.
    virtual void before(cudaStream_t s) = 0;
    virtual void body(cudaStream_t s) = 0;
  };

  // launch mode: `body` once between the events; `before_each` (e.g. resetting a recurrent state)
  // runs before every repetition, outside the timed region and before the flush.
  std::unique_ptr<Subject> launch_subject(Body body, Body before_each = {});
  // stream mode: bodies[i % bodies.size()] for i in [0, K), captured into one CUDA graph, with K the
  // smallest multiple of bodies.size() >= opt.min_launches. Each body runs once, uncaptured, first
  // (lazy library initialisation stays out of the graph). Returns nullptr and sets `why` when the
  // bodies cannot be captured (the reason CUDA gave).
  std::unique_ptr<Subject> stream_subject(const std::vector<Body>& bodies, const TimingOptions& opt,
                                          Body before_each, std::string& why);

  // Times the subjects with interleaved repetitions: opt.warmup rounds of every subject, then
  // opt.reps rounds, each round timing every subject once, in order.
  std::vector<Timing> time_interleaved(const std::vector<Subject*>& subjects, const TimingOptions& opt);
  // One subject in launch mode (the GDN experiments' step and run timings).
  Timing time(const Body& body, const TimingOptions& opt, const Body& before_each = {});

  // The read flush: a read pass over 2x the L2 (plain 16-byte loads), enqueued on the stream.
  void flush_l2();
  cudaStream_t stream() const { return stream_; }
  const DeviceInfo& device() const { return dev_; }

  // How many copies of `bytes` of inputs stream mode rotates over: together at least 3x the L2,
  // and at least 2 (so no launch follows one over the same copy).
  int copies_for(double bytes) const;
  // The copies a stream-mode subject of `bytes` rotates over under `l2_cold`: copies_for(bytes) when
  // cold; one when hot (--hot), so that back-to-back launches read the same inputs and, where they
  // fit, find them in L2. Before 2026-12-04 --hot kept the rotation and only skipped the flush, which
  // in stream mode changed nothing (reports/h200/run-49b5c7e-hot: the same times as cold).
  int stream_copies(double bytes, bool l2_cold) const { return l2_cold ? copies_for(bytes) : 1; }

  // The best read of exactly `bytes` in `mode` (same flush, same options): what a perfect kernel
  // that reads those bytes once could reach. In stream mode the read kernel is launched both plain
  // and with programmatic dependent launch (each launch overlaps its predecessor's tail), and the
  // faster is the ceiling. Cached per (bytes, mode, opt.l2_cold); hot (l2_cold false) it reads one
  // copy in stream mode (stream_copies).
  struct Attainable {
    double us = 0;        // per launch
    double gbps = 0;
    bool pdl = false;     // stream mode: the PDL form was the faster
    double plain_us = 0;  // the plain form's time (stream: both were measured)
  };
  const Attainable& attainable(double bytes, TimingMode mode, const TimingOptions& opt);

 private:
  DeviceInfo dev_;
  cudaStream_t stream_;
  DeviceBuffer<uint4> flush_;
  DeviceBuffer<unsigned> sink_;
  std::map<std::pair<long long, int>, Attainable> attainable_;
};

nlohmann::json to_json(const Timing& t, bool with_samples = true);

// The ceilings measured in this run, with the Timer (read flush) in both modes, over a buffer far
// larger than the L2: the big read every "% of ceiling" divides by.
struct Ceiling {
  double read_gbps = 0;         // the better of the two modes' reads
  double read_gbps_launch = 0;  // the best read form, one launch between events
  double read_gbps_stream = 0;  // that form back to back in a graph: the better of
  double read_gbps_stream_plain = 0, read_gbps_stream_pdl = 0;  // plain launches and PDL launches
  int stream_loads = 4;         // the best stream form's loads in flight
  bool stream_pdl = false;      // and whether it was the PDL one
  std::map<int, double> read_gbps_by_loads;  // launch mode, per loads in flight per thread
  int loads = 4;                // loads in flight of the best form
  double copy_gbps = 0;         // copy kernel, bytes read + written (launch mode): the best of copy_gbps_by_loads
  std::map<int, double> copy_gbps_by_loads;  // launch mode, per loads in flight per thread (1: the form of reports before 2026-12-02)
  int copy_loads = 1;           // loads in flight of the best copy form
  // The copy back to back in a graph (stream mode), every form plain and with PDL (key "L" or "L,pdl",
  // L loads in flight per thread), bytes read + written; the best of them and its form.
  double copy_gbps_stream = 0;
  std::map<std::string, double> copy_gbps_stream_by_form;
  int copy_stream_loads = 1;
  bool copy_stream_pdl = false;
  double empty_launch_us = 0;   // an empty kernel between events
  double empty_stream_us = 0;   // an empty kernel in a graph, per launch
  // A dependent hop in a graph, per launch (hop_kernel in timing.cu): each launch reads what the one
  // before it wrote, one block of 32 threads or a full grid, plain or with PDL. What a chain of
  // dependent kernels pays per kernel when it moves no bytes: the floor under every fused-or-not
  // decision (a GDN layer is six such kernels).
  double hop_one_plain_us = 0, hop_one_pdl_us = 0, hop_grid_plain_us = 0, hop_grid_pdl_us = 0;
  std::int64_t bytes = 0;       // buffer size used
  int reps = 0;
  double read_gbps_of(TimingMode m) const;
  double copy_gbps_of(TimingMode m) const;  // the copy measured in that mode (stream: 0 where not measured)
};
Ceiling measure_ceiling(Timer& timer, std::int64_t bytes, const TimingOptions& opt);
nlohmann::json to_json(const Ceiling& c);

// Read kernels for ceilings: a grid-stride pass over n 16-byte words with `loads` independent
// loads in flight per thread (1, 2, 4 or 8), folded into one register; with pdl it triggers its
// dependents at the start and waits for its predecessor before its (never taken) store.
// grid = 4 blocks of 256 threads per SM unless given.
void launch_read(const uint4* p, std::size_t n, unsigned* sink, int loads, bool pdl, cudaStream_t s,
                 unsigned grid = 0);
// An empty kernel (the per-launch floor of a mode).
void launch_empty(cudaStream_t s);
// The current device's SMs.
int sm_count_now();
// One dependent hop (the ceiling's hop_us; klab probe-hop): `grid` blocks of `threads` read in[i] (ld.cg) and
// write out[i] = in[i] + 1 for their grid x threads words; with pdl, launched with programmatic stream
// serialization, triggering its dependents at once and reading only after griddepcontrol.wait.
void launch_hop(bool pdl, unsigned grid, unsigned threads, const float* in, float* out, cudaStream_t s);

// The nodes `body` adds to a CUDA graph: captured on `s` (thread-local capture), counted, never run.
// `kernels` counts kernel nodes, `total` every node (memcpy, memset...). A body that throws ends the
// capture and the exception propagates.
struct GraphNodes {
  int kernels = 0, total = 0;
};
GraphNodes graph_nodes(const Body& body, cudaStream_t s);

}  // namespace klab
