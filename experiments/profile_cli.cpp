// `klab profile-one`: one launch of one variant on one problem between cudaProfilerStart and
// cudaProfilerStop, for a profiler started with --profile-from-start off (scripts/profile.py runs
// Nsight Compute this way over the timed variants of a report). Two untimed launches come first, so
// lazy initialisation (module loading, cuBLAS handles) stays out of the profiled range.
#include "profile_cli.hpp"

#include <boost/program_options.hpp>
#include <cuda_profiler_api.h>

#include <iostream>

#include "common.hpp"
#include "klab/cuda.hpp"
#include "klab/device.hpp"
#include "klab/timing.hpp"
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
  po::store(po::command_line_parser(args).options(d).run(), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << d;
    return 0;
  }
  require(!shape.empty(), "--shape MxK is required");
  require(reps >= 1, "--reps must be at least 1");
  const Shape sh = parse_shape(shape);
  if (auto why = q4_gemv::launch_error(sh.m, sh.k); !why.empty()) throw Error(sh.str() + ": " + why);
  if (auto why = q4_gemv::packed::packed_error(sh.k); !why.empty()) throw Error(sh.str() + ": " + why);
  const DeviceInfo dev = select_device(device);
  cudaStream_t s = nullptr;
  KLAB_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  nlohmann::json out;
  {
    Timer timer(dev, s);
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
  }
  cudaStreamDestroy(s);
  std::cout << out.dump() << std::endl;
  return 0;
}

}  // namespace klab::experiments
