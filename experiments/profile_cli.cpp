// `klab profile-one`: one launch of one variant on one problem between cudaProfilerStart and
// cudaProfilerStop, for a profiler started with --profile-from-start off (scripts/profile.py runs
// Nsight Compute this way over the timed variants of a report). Two untimed launches come first, so
// lazy initialisation (module loading, cuBLAS handles) stays out of the profiled range.
#include "profile_cli.hpp"

#include <boost/program_options.hpp>
#include <cuda_profiler_api.h>

#include <algorithm>
#include <iostream>
#include <limits>

#include "common.hpp"
#include "klab/cuda.hpp"
#include "klab/device.hpp"
#include "klab/cluster_probe.hpp"
#include "klab/load_probe.hpp"
#include "klab/stats.hpp"
#include "klab/timing.hpp"
#include "gdn_recurrence/kernels.hpp"
#include "q4_gemv/packed_kernels.hpp"

namespace po = boost::program_options;

namespace klab::experiments {

const char* const kProfileOneUsage =
    "klab profile-one VARIANT --shape MxK [--input DIST] [--seed S] [--device N]  (one launch inside cudaProfilerStart/Stop)";

int profile_one_command(const Registry& reg, const std::vector<std::string>& args, int, char**) {
  std::string shape, input = "uniform";
  std::uint64_t seed = 1;
  int device = 0;
  po::options_description d(kProfileOneUsage);
  d.add_options()("shape", po::value<std::string>(&shape), "problem shape MxK (required)")
    ("input", po::value<std::string>(&input), "input distribution")("seed", po::value<std::uint64_t>(&seed), "problem seed")
    ("device", po::value<int>(&device), "CUDA device index")("variant", po::value<std::string>(), "")("help,h", "this help");
  po::positional_options_description pos;
  pos.add("variant", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(d).positional(pos).run(), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << d;
    return 0;
  }
  require(vm.count("variant") == 1, "name one variant (`klab list variants`)");
  require(!shape.empty(), "--shape MxK is required");
  const Variant& v = reg.variant(vm["variant"].as<std::string>());
  const Op& op = reg.op(v.op);
  const Problem p{parse_shape(shape), parse_dist(input), seed};
  if (auto why = op.validate(p); !why.empty()) throw Error(op.name + " " + p.shape.str() + ": " + why);
  if (auto why = v.can_implement(p); !why.empty()) throw Error(v.name + " cannot run " + p.str() + ": " + why);
  select_device(device);
  auto work = op.generate(p);
  auto inst = v.make(*work);
  cudaStream_t s = nullptr;
  KLAB_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int i = 0; i < 2; ++i) {
    inst->reset(s);
    inst->run(s);
  }
  inst->reset(s);
  KLAB_CUDA(cudaStreamSynchronize(s));
  KLAB_CUDA(cudaProfilerStart());
  inst->run(s);
  KLAB_CUDA(cudaStreamSynchronize(s));
  KLAB_CUDA(cudaProfilerStop());
  cudaStreamDestroy(s);
  const Traffic t = op.traffic(p);
  std::cout << nlohmann::json{{"variant", v.name}, {"problem", p.str()}, {"bytes", t.bytes}, {"macs", t.macs}}.dump() << std::endl;
  return 0;
}

namespace {
// A q4 probe's --shape: MxK parsed, refused (klab::Error, naming the shape) where map=packed cannot take it.
Shape q4_probe_shape(const std::string& shape) {
  require(!shape.empty(), "--shape MxK is required");
  const Shape sh = parse_shape(shape);
  if (auto why = q4_gemv::launch_error(sh.m, sh.k); !why.empty()) throw Error(sh.str() + ": " + why);
  if (auto why = q4_gemv::packed::packed_error(sh.k); !why.empty()) throw Error(sh.str() + ": " + why);
  return sh;
}
// A probe's non-blocking stream of its own, destroyed with it (on a throw too).
struct ProbeStream {
  cudaStream_t s = nullptr;
  ProbeStream() { KLAB_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~ProbeStream() { cudaStreamDestroy(s); }
  ProbeStream(const ProbeStream&) = delete;
  ProbeStream& operator=(const ProbeStream&) = delete;
};
// A probe's run: body(dev, stream, timer) on `device`, with a ProbeStream and the run's Timer; prints the JSON line body
// returns, only once body is done.
template <class Body>
int probe_line(int device, Body body) {
  const DeviceInfo dev = select_device(device);
  const ProbeStream ps;
  nlohmann::json out;
  {
    Timer timer(dev, ps.s);
    out = body(dev, ps.s, timer);
  }
  std::cout << out.dump() << std::endl;
  return 0;
}
// The stamp probes' run: launch(n, s) for n < launches captured into one graph, run three times on s, each after
// zeroing `stamps` and calling begin(s) (the stamps of the last run are the ones left); the graph goes after, on a throw
// too.
template <class Launch, class Begin>
void run_stamped_graph(cudaStream_t s, int launches, DeviceBuffer<unsigned long long>& stamps, Launch launch, Begin begin) {
  cudaGraph_t graph = nullptr;
  KLAB_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int n = 0; n < launches; ++n) launch(n, s);
  KLAB_CUDA(cudaStreamEndCapture(s, &graph));
  struct Exec {
    cudaGraphExec_t e = nullptr;
    ~Exec() {
      if (e) cudaGraphExecDestroy(e);
    }
  } exec;
  const cudaError_t e = cudaGraphInstantiate(&exec.e, graph, 0);
  cudaGraphDestroy(graph);
  KLAB_CUDA(e);
  for (int rep = 0; rep < 3; ++rep) {
    KLAB_CUDA(cudaMemsetAsync(stamps.get(), 0, stamps.size() * sizeof(unsigned long long), s));
    begin(s);
    KLAB_CUDA(cudaGraphLaunch(exec.e, s));
    KLAB_CUDA(cudaStreamSynchronize(s));
  }
}
// Parses args into vm by d; true when --help was asked (d printed): the command returns 0.
bool parse_or_help(const std::vector<std::string>& args, const po::options_description& d, po::variables_map& vm) {
  po::store(po::command_line_parser(args).options(d).run(), vm);
  po::notify(vm);
  if (!vm.count("help")) return false;
  std::cout << d;
  return true;
}
}  // namespace

const char* const kProbeRingUsage =
    "klab probe-ring --shape MxK [--reps N] [--device N]  (the q4 ring's loads alone, stream mode, beside the read of the same bytes)";

// The probe over copies of ring_probe_bytes(m, k) (as many as stream mode rotates over for those bytes, so every
// launch reads cold bytes), one graph of launches, then the Timer's size-matched read in stream mode: what the ring's
// TMA stages, waits and barriers cost against a plain read of the same bytes.
int probe_ring_command(const std::vector<std::string>& args, int, char**) {
  std::string shape;
  int reps = 50, device = 0;
  po::options_description d(kProbeRingUsage);
  d.add_options()("shape", po::value<std::string>(&shape), "problem shape MxK (required; k a multiple of 32, at most 32768)")
    ("reps", po::value<int>(&reps), "timed repetitions (default 50)")("device", po::value<int>(&device), "CUDA device index")("help,h", "this help");
  po::variables_map vm;
  if (parse_or_help(args, d, vm)) return 0;
  const Shape sh = q4_probe_shape(shape);
  require(reps >= 1, "--reps must be at least 1");
  return probe_line(device, [&](const DeviceInfo& dev, cudaStream_t s, Timer& timer) {
    nlohmann::json out;
    const int m = int(sh.m), k = int(sh.k);
    const std::int64_t bytes = q4_gemv::packed::ring_probe_bytes(m, k);
    const int copies = timer.copies_for(double(bytes));
    DeviceBuffer<std::uint8_t> packed{std::size_t(bytes) * std::size_t(copies)};
    DeviceBuffer<float> y{std::size_t(m)};
    KLAB_CUDA(cudaMemsetAsync(packed.get(), 0x11, packed.size(), s));
    std::vector<Body> bodies;
    for (int c = 0; c < copies; ++c) {
      const std::uint8_t* src = packed.get() + std::size_t(bytes) * std::size_t(c);
      bodies.push_back([=, yp = y.get()](cudaStream_t st) { q4_gemv::packed::launch_ring_probe(src, yp, m, k, st); });
    }
    TimingOptions opt;
    opt.reps = reps;
    std::string why;
    auto subject = timer.stream_subject(bodies, opt, {}, why);
    require(subject != nullptr, "the probe's launches cannot be captured into a graph: " + why);
    const Timing t = timer.time_interleaved({subject.get()}, opt).at(0);
    const auto& read = timer.attainable(double(bytes), TimingMode::stream, opt);
    const double us = t.summary.median * 1e3;
    out = {{"probe", "ring-read"}, {"device", dev.name}, {"shape", sh.str()}, {"bytes", bytes}, {"copies", t.copies},
           {"launches", t.launches}, {"ring_read_us", us}, {"ring_read_us_p10", t.summary.p10 * 1e3},
           {"ring_read_us_p90", t.summary.p90 * 1e3}, {"ring_read_gbps", double(bytes) / (us * 1e3)}, {"read_us", read.us},
           {"read_gbps", read.gbps}, {"read_pdl", read.pdl}, {"clock_mhz", t.clock_mhz_median}};
    return out;
  });
}

const char* const kProbeHopUsage =
    "klab probe-hop [--form none|L,B]... [--launches 128] [--reps 5] [--device N]  (the dependent hop and an L2 round trip "
    "while a background keeps L 16-byte loads a thread, B blocks of 256 an SM, in flight)";

int probe_hop_command(const std::vector<std::string>& args, int, char**) {
  std::vector<std::string> forms;
  int launches = 128, reps = 5, device = 0;
  po::options_description d(kProbeHopUsage);
  d.add_options()("form", po::value<std::vector<std::string>>(&forms),
                  "a background: none, or L,B (L loads in flight a thread: 1, 2, 4 or 8; B blocks of 256 per SM: 1 to 4); "
                  "repeatable; default none, 1,2, 2,2, 4,2, 8,2, 8,4")
    ("launches", po::value<int>(&launches), "hops in each graph (default 128)")("reps", po::value<int>(&reps), "runs a form (default 5)")
    ("device", po::value<int>(&device), "CUDA device index")("help,h", "this help");
  po::variables_map vm;
  if (parse_or_help(args, d, vm)) return 0;
  std::vector<LoadForm> lf;
  for (const auto& f : forms) lf.push_back(parse_load_form(f));
  if (lf.empty()) lf = default_load_forms();
  require(launches >= 8 && launches <= 4096, "--launches must be in [8, 4096]");
  require(reps >= 1 && reps <= 100, "--reps must be in [1, 100]");
  const DeviceInfo dev = select_device(device);
  const ProbeStream fg, bg;
  std::vector<nlohmann::json> lines;  // printed once every form is measured: a failure prints none
  for (const auto& f : lf) {
    const HopUnderLoad h = measure_hop_under_load(f, launches, reps, fg.s, bg.s);
    lines.push_back({{"probe", "hop-under-load"}, {"device", dev.name}, {"background", f.str()}, {"bg_loads", f.loads},
                     {"bg_blocks_per_sm", f.blocks_per_sm}, {"bg_inflight_kb_per_sm", double(f.inflight_bytes_per_sm()) / 1024.0},
                     {"bg_gbps", h.bg_gbps}, {"bg_gbps_with", h.bg_gbps_with}, {"bg_passes", h.bg_passes},
                     {"hop_one_us", h.hop_one_us}, {"hop_grid_us", h.hop_grid_us}, {"chase_ns", h.chase_ns},
                     {"launches", launches}, {"reps", h.reps}});
  }
  for (const auto& l : lines) std::cout << l.dump() << std::endl;
  return 0;
}

const char* const kProbeClusterUsage =
    "klab probe-cluster [--form C,on|off,KB,N]... [--launches 400] [--pre 2] [--post 3] [--device N]  (whether a PDL grid of "
    "clusters of C blocks enters before the grid before it ends)";

int probe_cluster_command(const std::vector<std::string>& args, int, char**) {
  std::vector<std::string> forms;
  int launches = 400, device = 0;
  double pre = 2, post = 3;
  po::options_description d(kProbeClusterUsage);
  d.add_options()("form", po::value<std::vector<std::string>>(&forms),
                  "C,on|off,KB,N: C blocks a cluster (0: no cluster attribute) to 8, PDL on or off, KB of shared memory a block (0 to "
                  "200), N blocks an SM's worth (1 to 4); repeatable; default clusters 0, 1, 2, 5, 6, 8 with PDL on and off at 80 KB "
                  "one and two blocks an SM, and at 0 KB one")
    ("launches", po::value<int>(&launches), "launches back to back a form (default 400; the first quarter is dropped)")
    ("pre", po::value<double>(&pre), "us each block spins before griddepcontrol.wait (default 2)")
    ("post", po::value<double>(&post), "us each block spins after it (default 3)")("device", po::value<int>(&device), "CUDA device index")
    ("help,h", "this help");
  po::variables_map vm;
  if (parse_or_help(args, d, vm)) return 0;
  std::vector<ClusterForm> cf;
  for (const auto& f : forms) cf.push_back(parse_cluster_form(f));
  if (cf.empty()) cf = default_cluster_forms();
  require(launches >= 8 && launches <= 100000, "--launches must be in [8, 100000]");
  require(pre >= 0 && pre <= 1000 && post >= 0 && post <= 1000, "--pre and --post must be in [0, 1000] us");
  const DeviceInfo dev = select_device(device);
  const ProbeStream ps;
  std::vector<nlohmann::json> lines;  // printed once every form is measured: a failure prints none
  for (const auto& f : cf) {
    const ClusterEntry e = measure_cluster_entry(f, launches, pre, post, ps.s);
    lines.push_back({{"probe", "cluster-entry"}, {"device", dev.name}, {"form", f.str()}, {"cluster", f.cluster}, {"pdl", f.pdl},
                     {"smem_kb", f.smem_kb}, {"per_sm", f.per_sm}, {"grid", e.grid}, {"resident_blocks", e.resident_blocks}, {"pre_us", pre}, {"post_us", post},
                     {"entry_gap_us", e.entry_gap_us}, {"period_us", e.period_us}, {"launches", e.launches}});
  }
  for (const auto& l : lines) std::cout << l.dump() << std::endl;
  return 0;
}

const char* const kProbeRecUsage =
    "klab probe-rec [--cols 32] [--rows 8] [--pdl ahead|next|one-ahead] [--o direct] [--batch 1] [--launches 64] [--copies N] [--device N]  (the recurrence's "
    "pdl=ahead, pdl=next or pdl=one-ahead kernel with in-kernel timer stamps, stream mode)";

namespace {
// The median (klab/stats.hpp's summarize), NaN for none.
double median_of(std::vector<double> v) { return v.empty() ? std::numeric_limits<double>::quiet_NaN() : summarize(std::move(v)).median; }
}  // namespace

nlohmann::json stamp_reading(const std::vector<unsigned long long>& stamps, int launches, int blocks, int points, int skip) {
  return stamp_reading(stamps, launches, blocks, points, skip, {"request_s", "wait", "inputs_pass1", "barrier1", "kv_pass2_stores", "barrier2", "o_exit"});
}

nlohmann::json stamp_reading(const std::vector<unsigned long long>& stamps, int launches, int blocks, int points, int skip,
                             const std::vector<std::string>& phase_names) {
  require(launches > 0 && blocks > 0 && points >= 4, "stamp_reading: launches, blocks > 0 and at least 4 points (entry, request, release, exit)");
  require(phase_names.size() == std::size_t(points - 1), "stamp_reading: a name for each of the points - 1 phases");
  require(stamps.size() == std::size_t(launches) * std::size_t(blocks) * std::size_t(points), "stamp_reading: launches x blocks x points stamps");
  require(skip >= 1 && skip < launches, "stamp_reading: skip in [1, launches)");
  auto at = [&](int n, int b, int i) { return stamps[(std::size_t(n) * blocks + std::size_t(b)) * points + std::size_t(i)]; };
  struct Launch {
    double entry = 0, release_first = 0, release_last = 0, exit_last = 0;
  };
  std::vector<Launch> ls(static_cast<std::size_t>(launches));
  unsigned long long resolution = std::numeric_limits<unsigned long long>::max();
  std::vector<std::vector<double>> phase(std::size_t(points - 1));
  int missing = 0;
  for (int n = 0; n < launches; ++n) {
    Launch& l = ls[std::size_t(n)];
    l.entry = l.release_first = std::numeric_limits<double>::infinity();
    l.release_last = l.exit_last = -std::numeric_limits<double>::infinity();
    for (int b = 0; b < blocks; ++b) {
      bool whole = true;
      for (int i = 0; i < points; ++i) whole = whole && at(n, b, i) != 0;
      if (!whole) {
        ++missing;
        continue;
      }
      l.entry = std::min(l.entry, double(at(n, b, 0)));
      l.release_first = std::min(l.release_first, double(at(n, b, 2)));
      l.release_last = std::max(l.release_last, double(at(n, b, 2)));
      l.exit_last = std::max(l.exit_last, double(at(n, b, points - 1)));
      for (int i = 0; i + 1 < points; ++i) {
        const unsigned long long t0 = at(n, b, i), t1 = at(n, b, i + 1);
        if (t1 > t0) resolution = std::min(resolution, t1 - t0);
        if (n >= skip) phase[std::size_t(i)].push_back(double(t1) - double(t0));
      }
    }
  }
  require(missing == 0, "stamp_reading: " + std::to_string(missing) + " block(s) without every stamp (a launch the kernels did not reach?)");
  std::vector<double> period, hop, after, release_spread;
  for (int n = skip; n < launches; ++n) {
    const Launch &l = ls[std::size_t(n)], &p = ls[std::size_t(n - 1)];
    period.push_back(l.exit_last - p.exit_last);
    hop.push_back(l.release_first - p.exit_last);
    after.push_back(l.exit_last - l.release_first);
    release_spread.push_back(l.release_last - l.release_first);
  }
  nlohmann::json phases = nlohmann::json::object();
  for (int i = 0; i + 1 < points; ++i) phases[phase_names[std::size_t(i)]] = median_of(phase[std::size_t(i)]);
  std::vector<double> ahead;  // how long before the previous launch's last exit this launch's first block entered
  for (int n = skip; n < launches; ++n) ahead.push_back(ls[std::size_t(n - 1)].exit_last - ls[std::size_t(n)].entry);
  return {{"launches_read", launches - skip},
          {"period_ns", median_of(period)},
          {"hop_ns", median_of(hop)},
          {"after_release_ns", median_of(after)},
          {"release_spread_ns", median_of(release_spread)},
          {"entry_ahead_ns", median_of(ahead)},
          {"block_phase_ns", phases},
          {"timer_step_ns", resolution == std::numeric_limits<unsigned long long>::max() ? nlohmann::json(nullptr) : nlohmann::json(resolution)}};
}

// The pdl=ahead kernel at the Qwen3.5-27B heads (nk 16, nv 48, dk = dv = 128), every launch on a state copy of its own
// (at least `copies`, the kernel's contract (min_state_copies) and the race's cold-rotation count),
// q, k, v, g and beta shared (g = beta = 0: every launch alike); `launches` launches back to back in one graph, run
// three times (stamps read after the last).
int probe_rec_command(const std::vector<std::string>& args, int, char**) {
  int cols = 32, rows = 8, batch = 1, launches = 64, copies = 0, device = 0;
  std::string pdl = "ahead", o_form;
  po::options_description d(kProbeRecUsage);
  d.add_options()("cols", po::value<int>(&cols), "columns a block (32, 16 or 8)")("rows", po::value<int>(&rows), "float4 rows of S a thread (8, 4 or 16)")
    ("pdl", po::value<std::string>(&pdl), "ahead (dependents let go at the start), next (after the wait) or one-ahead (at the start, blocks an SM capped)")
    ("o", po::value<std::string>(&o_form), "direct: the o=direct kernel (o without a second reduction; pdl=ahead only)")
    ("batch", po::value<int>(&batch), "sequences (default 1)")("launches", po::value<int>(&launches), "launches in the graph (default 64)")
    ("copies", po::value<int>(&copies), "state copies rotated (default and at least: one a launch)")
    ("device", po::value<int>(&device), "CUDA device index")("help,h", "this help");
  po::variables_map vm;
  if (parse_or_help(args, d, vm)) return 0;
  require(pdl == "ahead" || pdl == "next" || pdl == "one-ahead", "--pdl " + pdl + ": ahead, next or one-ahead");
  require(o_form.empty() || o_form == "direct", "--o " + o_form + ": direct (or leave it out)");
  require(o_form.empty() || pdl == "ahead", "--o direct: pdl=ahead only, not pdl=" + pdl);
  const bool o_direct = !o_form.empty();
  const gdn_recurrence::StampLauncher sl = gdn_recurrence::stamp_launcher(cols, rows, pdl, o_direct);
  const std::string what = "pdl=" + pdl + (o_direct ? ",o=" + o_form : "");  // the variant's last axes
  if (sl.launch == nullptr) {  // the shapes stamp_launcher has for these axes
    std::string shapes;
    for (int c : {8, 16, 32, 64, 128})
      for (int r : {1, 2, 4, 8, 16})
        if (gdn_recurrence::stamp_launcher(c, r, pdl, o_direct).launch) shapes += (shapes.empty() ? "" : ", ") + std::to_string(c) + "x" + std::to_string(r);
    throw Error("--cols " + std::to_string(cols) + " --rows " + std::to_string(rows) + ": no " + what + " kernel of that shape (" + shapes + ")");
  }
  require(batch >= 1 && batch <= 256, "--batch must be in [1, 256]");
  require(launches >= 8 && launches <= 4096, "--launches must be in [8, 4096]");
  require(copies >= 0, "--copies must not be negative");
  constexpr int nk = 16, nv = 48, dk = 128, dv = 128;
  gdn_recurrence::RecurrenceArgs a = gdn_recurrence::dense_args(nk, nv, dk, dv, batch);
  if (auto why = sl.can_implement(a); !why.empty()) throw Error("probe-rec: " + why);
  return probe_line(device, [&](const DeviceInfo& dev, cudaStream_t s, Timer& timer) {
    nlohmann::json out;
    const std::size_t s_floats = std::size_t(batch) * nv * dk * dv;
    // The contract of the registered kernel of that shape (kernels.hpp, min_state_copies).
    const auto& kern = gdn_recurrence::recurrence_kernel("gdn_recurrence/impl=fused,cols=" + std::to_string(cols) + ",rows=" + std::to_string(rows) +
                                                         "," + what);
    const int contract = gdn_recurrence::min_state_copies(kern, a);
    const int cold = timer.copies_for(double(s_floats * sizeof(float)));
    // Every launch its own copy: the stamps name a launch by it (kernels_fused.cu, Stamper).
    const int n_copies = std::max({copies, contract, cold, launches});
    std::vector<float> host(std::size_t(batch) * std::size_t(std::max(nk * dk, nv * dv)));
    std::uint32_t r = 12345;
    for (float& f : host) f = float(int((r = r * 1664525u + 1013904223u) >> 9) % 2001 - 1000) * 1e-3f;
    DeviceBuffer<float> q = DeviceBuffer<float>::from(host), k = DeviceBuffer<float>::from(host), v = DeviceBuffer<float>::from(host);
    DeviceBuffer<float> g{std::size_t(batch) * nv}, beta{std::size_t(batch) * nv}, o{std::size_t(batch) * nv * dv};
    KLAB_CUDA(cudaMemsetAsync(g.get(), 0, g.size() * sizeof(float), s));        // exp(0) = 1: no decay
    KLAB_CUDA(cudaMemsetAsync(beta.get(), 0, beta.size() * sizeof(float), s));  // beta 0: S unchanged, every launch alike
    DeviceBuffer<float> S{s_floats * std::size_t(n_copies)};
    KLAB_CUDA(cudaMemsetAsync(S.get(), 0, S.size() * sizeof(float), s));
    a.q = q.get(), a.k = k.get(), a.v = v.get(), a.g = g.get(), a.beta = beta.get(), a.o = o.get();
    const int blocks = nv * ((dv + cols - 1) / cols) * batch, points = gdn_recurrence::stamp_points();
    DeviceBuffer<unsigned long long> stamps{std::size_t(launches) * std::size_t(blocks) * std::size_t(points)};
    run_stamped_graph(
        s, launches, stamps,
        [&](int n, cudaStream_t st) {
          gdn_recurrence::RecurrenceArgs an = a;
          an.S = S.get() + s_floats * std::size_t(n % n_copies);
          sl.launch(an, st);
        },
        [&](cudaStream_t st) { gdn_recurrence::stamp_begin(stamps.get(), launches, S.get(), static_cast<long long>(s_floats), st); });
    const auto host_stamps = stamps.download();
    out = {{"probe", "rec-stamps"}, {"device", dev.name}, {"cols", cols}, {"rows", rows}, {"pdl", what.substr(4)}, {"batch", batch}, {"blocks", blocks},
           {"launches", launches}, {"copies", n_copies}};
    out.update(stamp_reading(host_stamps, launches, blocks, points, 4));
    return out;
  });
}


const char* const kProbeQ4Usage =
    "klab probe-q4 --shape MxK [--grid fill|groups|paced|split-k|split-k1|split-k4|split-k-last] [--depth 0|1|2|3] [--prepared] [--launches 64] [--device N]  (a q4 main kernel with "
    "in-kernel timer stamps, after its prep launch or alone on prepared x, stream mode)";

// Rung 11's ring (--grid fill, depth 0), depth=D's, rung 10's grid=groups kernel (--grid groups) or rung 85's paced ring
// (--grid paced), or grid=split-k's rung 115, 116, 121 or 119 (--grid split-k, split-k1, split-k4, split-k-last), `launches` calls back to back in one graph, each call on a copy of the weights of its own (at least
// as many as stream mode rotates over, so every call reads cold bytes; the stamps name a call by its copy), x shared;
// the graph runs three times and the stamps of the last are read. --prepared: the main kernel alone on the x in g_xq (filled by one call with its
// prep launch first), as xprep=producer times it.
int probe_q4_command(const std::vector<std::string>& args, int, char**) {
  std::string shape, grid_name = "fill";
  int depth = 0, launches = 64, device = 0;
  po::options_description d(kProbeQ4Usage);
  d.add_options()("shape", po::value<std::string>(&shape), "problem shape MxK (required; k a multiple of 32, at most 32768)")
    ("grid", po::value<std::string>(&grid_name),
     "fill: the TMA ring (rung 11, or depth=D's); groups: grid=groups,xprep=launch (rung 10); paced: pace=1,xprep=warps (rung 85); "
     "split-k, split-k1, split-k-last: grid=split-k,owners=8,stages=2,rows=8 at per-sm=2 (rung 115), per-sm=1 (116), fold=last (119); "
     "split-k4: owners=8,stages=4,per-sm=1,rows=4 (121)")
    ("depth", po::value<int>(&depth), "the ring's: 0 its own stages (rung 11), or 1, 2, 3: depth=D's ring")
    ("prepared", "the main kernel alone on x already prepared (no prep launch)")
    ("launches", po::value<int>(&launches), "calls in the graph (default 64)")("device", po::value<int>(&device), "CUDA device index")
    ("help,h", "this help");
  po::variables_map vm;
  if (parse_or_help(args, d, vm)) return 0;
  const Shape sh = q4_probe_shape(shape);
  using q4_gemv::packed::StampGrid;
  const std::vector<std::pair<std::string, StampGrid>> grids{{"fill", StampGrid::fill},         {"groups", StampGrid::groups},
                                                             {"paced", StampGrid::paced},       {"split-k", StampGrid::split_k},
                                                             {"split-k1", StampGrid::split_k1}, {"split-k4", StampGrid::split_k4},
                                                             {"split-k-last", StampGrid::split_k_last}};
  const auto named = std::find_if(grids.begin(), grids.end(), [&](const auto& e) { return e.first == grid_name; });
  require(named != grids.end(), "--grid " + grid_name + ": fill, groups, paced, split-k, split-k1, split-k4 or split-k-last");
  const StampGrid g = named->second;
  const auto depths = q4_gemv::packed::ring_stamp_depths();
  if (std::find(depths.begin(), depths.end(), depth) == depths.end()) {
    std::string list;
    for (int x : depths) list += (list.empty() ? "" : ", ") + std::to_string(x);
    throw Error("--depth " + std::to_string(depth) + ": one of " + list + " (0: the ring's own stages)");
  }
  require(depth == 0 || g == q4_gemv::packed::StampGrid::fill,
          "--depth " + std::to_string(depth) + ": the ring's (--grid fill); grid=groups, the paced ring and grid=split-k have none");
  require(launches >= 8 && launches <= 1024, "--launches must be in [8, 1024]");
  const bool prepared = vm.count("prepared") > 0;
  return probe_line(device, [&](const DeviceInfo& dev, cudaStream_t s, Timer& timer) {
    nlohmann::json out;
    const int m = int(sh.m), k = int(sh.k);
    const std::int64_t bytes = q4_gemv::packed::ring_probe_bytes(m, k);  // rows=8's packed bytes, either grid
    const long long stride = (bytes + 255) / 256 * 256;
    const int copies = std::max(launches, timer.copies_for(double(bytes)));
    std::size_t free_bytes = 0, total_bytes = 0;
    KLAB_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
    const double need = double(stride) * copies;
    if (need > 0.9 * double(free_bytes))
      throw Error("probe-q4: " + std::to_string(copies) + " copies of the weights (one a call: the stamps name a call by its copy) take " +
                  std::to_string(need / 1e9) + " GB, over 90% of the device's free " + std::to_string(double(free_bytes) / 1e9) +
                  " GB: ask for fewer --launches");
    const int grid = q4_gemv::packed::q4_stamp_grid(g, m, k), points = q4_gemv::packed::q4_stamp_points();
    DeviceBuffer<std::uint8_t> packed{std::size_t(stride) * std::size_t(copies)};
    KLAB_CUDA(cudaMemsetAsync(packed.get(), 0x11, packed.size(), s));  // codes 1, scales 0x1111: finite, any values time alike
    std::vector<float> xh(static_cast<std::size_t>(k));
    for (std::size_t i = 0; i < xh.size(); ++i) xh[i] = float(int(i % 61) - 30) * 0.05f;
    DeviceBuffer<float> x = DeviceBuffer<float>::from(xh), y{std::size_t(m)};
    DeviceBuffer<unsigned long long> stamps{std::size_t(launches) * std::size_t(grid) * std::size_t(points)}, waits{std::size_t(launches) * std::size_t(grid)};
    KLAB_CUDA(cudaMemsetAsync(waits.get(), 0, waits.size() * sizeof(unsigned long long), s));  // grid=groups writes none
    // One call with its prep launch first (no stamps yet: none asked for): g_xq holds x prepared for --prepared.
    q4_gemv::packed::launch_q4_stamped(g, depth, false, packed.get(), x.get(), y.get(), m, k, s);
    run_stamped_graph(
        s, launches, stamps,
        [&](int n, cudaStream_t st) {
          q4_gemv::packed::launch_q4_stamped(g, depth, prepared, packed.get() + std::size_t(stride) * std::size_t(n % copies), x.get(), y.get(), m,
                                             k, st);
        },
        [&](cudaStream_t st) { q4_gemv::packed::q4_stamp_begin(stamps.get(), waits.get(), launches, packed.get(), stride, st); });
    const auto host_stamps = stamps.download();
    const auto host_waits = waits.download();
    q4_gemv::packed::q4_stamp_begin(nullptr, nullptr, 0, nullptr, 1, s);  // stamps off before the buffers go
    constexpr int skip = 4;
    out = {{"probe", "q4-stamps"}, {"device", dev.name}, {"shape", sh.str()}, {"grid", grid_name}, {"depth", depth}, {"prepared", prepared},
           {"bytes", bytes}, {"blocks", grid}, {"launches", launches}, {"copies", copies}};
    if (g != q4_gemv::packed::StampGrid::groups) {  // the ring's points (the paced ring's too), or grid=split-k's
      out.update(stamp_reading(host_stamps, launches, grid, points, skip,
                               is_split_k(g) ? std::vector<std::string>{"request", "wait", "x", "started", "first_bytes", "tiles", "fold_exit"}
                                             : std::vector<std::string>{"request", "wait", "x", "first_bytes", "first_group", "rest", "last_group_exit"}));
      // Each block's waits for its stages' bytes, and their share of its span from the release to its exit.
      std::vector<double> waited, share;
      for (int n = skip; n < launches; ++n)
        for (int b = 0; b < grid; ++b) {
          const std::size_t row = (std::size_t(n) * grid + std::size_t(b)) * std::size_t(points);
          const double w = double(host_waits[std::size_t(n) * grid + std::size_t(b)]);
          const double span = double(host_stamps[row + std::size_t(points) - 1]) - double(host_stamps[row + 2]);
          waited.push_back(w);
          if (span > 0) share.push_back(w / span);
        }
      out["bytes_wait_ns"] = median_of(waited);
      out["bytes_wait_share"] = median_of(share);
    } else {
      out.update(stamp_reading(host_stamps, launches, grid, points, skip, {"request", "wait", "x", "bytes", "dots", "barrier", "store_exit"}));
    }
    const double period = out["period_ns"].get<double>();
    out["period_gbps"] = period > 0 ? double(bytes) / period : 0.0;
    return out;
  });
}

}  // namespace klab::experiments
