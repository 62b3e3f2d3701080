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

}  // namespace klab::experiments
