// klab_bench: Google Benchmark over the same registry, for microbenchmark users: one benchmark per
// (variant, seed shape) (ops with declared parameters: Op::declared_problems), timed manually with CUDA
// events, L2 flushed outside the timed region, bytes_per_second from the op's byte model. Variants
// are chosen as `klab run` chooses them (--variants FILTER: a fragment or a glob); Google Benchmark's
// own --benchmark_filter=REGEX and --benchmark_format=json work as usual. Without a device every case
// is skipped.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <iostream>
#include <memory>

#include "klab/catalog.hpp"
#include "klab/cuda.hpp"
#include "klab/device.hpp"
#include "klab/error.hpp"
#include "klab/experiment.hpp"
#include "klab/metrics.hpp"
#include "klab/race.hpp"
#include "klab/timing.hpp"

using namespace klab;

namespace {

struct Shared {
  DeviceInfo dev;
  cudaStream_t stream = nullptr;
  std::unique_ptr<Timer> timer;
};
Shared* shared() {
  static Shared* s = [] {
    if (!has_device()) return static_cast<Shared*>(nullptr);
    auto* p = new Shared;
    p->dev = select_device(0);
    KLAB_CUDA(cudaStreamCreateWithFlags(&p->stream, cudaStreamNonBlocking));
    p->timer = std::make_unique<Timer>(p->dev, p->stream);
    return p;
  }();
  return s;
}

// Cases that failed (a CUDA error, a failed verification): the exit status says so.
int g_errors = 0;

void bench_case(benchmark::State& state, const Op* op, const Variant* v, const Problem& p);

void bench(benchmark::State& state, const Op* op, const Variant* v, Problem p) {
  try {
    bench_case(state, op, v, p);
  } catch (const std::exception& e) {
    ++g_errors;
    state.SkipWithError((std::string("error: ") + e.what()).c_str());
  }
}

void bench_case(benchmark::State& state, const Op* op, const Variant* v, const Problem& p) {
  Shared* sh = shared();
  if (!sh) {
    state.SkipWithError(("skipped: " + no_device_reason()).c_str());
    for (auto _ : state) {}
    return;
  }
  if (auto why = v->can_implement(p); !why.empty()) {
    state.SkipWithError(("skipped: " + why).c_str());
    for (auto _ : state) {}
    return;
  }
  auto work = op->generate(p);
  auto inst = v->make(*work);
  // Verified before it is timed, as in every race: poisoned output, one run (which also keeps library
  // handles and lazy module loading out of the timing), the f64 reference, the variant's tolerance.
  inst->poison(sh->stream);
  inst->run(sh->stream);
  KLAB_CUDA(cudaStreamSynchronize(sh->stream));
  // Every named output against the reference's tensor of that name; the worst counts.
  const Accuracy acc = verify_outputs(v->name, inst->outputs(), op->references_of(*work));
  const double tol = v->tolerance > 0 ? v->tolerance : 1e-5;
  if (!acc.finite() || acc.max_rel > tol) {
    ++g_errors;
    char msg[160];
    std::snprintf(msg, sizeof msg, "verification failed: max_rel %.3g (tolerance %.1g), %lld unwritten", acc.max_rel, tol,
                  static_cast<long long>(acc.unwritten));
    state.SkipWithError(msg);
    for (auto _ : state) {}
    return;
  }
  state.counters["max_rel"] = acc.max_rel;
  cudaEvent_t e0, e1;
  KLAB_CUDA(cudaEventCreate(&e0));
  KLAB_CUDA(cudaEventCreate(&e1));
  for (auto _ : state) {
    inst->reset(sh->stream);
    sh->timer->flush_l2();
    KLAB_CUDA(cudaEventRecord(e0, sh->stream));
    inst->run(sh->stream);
    KLAB_CUDA(cudaEventRecord(e1, sh->stream));
    KLAB_CUDA(cudaEventSynchronize(e1));
    float ms = 0;
    KLAB_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    state.SetIterationTime(ms * 1e-3);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  const Traffic t = op->traffic(p);
  state.SetBytesProcessed(static_cast<std::int64_t>(t.bytes) * state.iterations());
  state.counters["GMAC/s"] = benchmark::Counter(t.macs * 1e-9 * double(state.iterations()), benchmark::Counter::kIsRate);
}

// The problems a variant is benchmarked on: the seed's mat-vec shapes, or an op's declared problems.
std::vector<Problem> problems_of(const Op& op) {
  std::vector<Problem> ps;
  if (!op.params.empty()) ps = op.declared_problems(false);
  else
    for (const auto& s : seed_shapes()) ps.push_back(Problem{s, Dist::uniform, 1});
  return ps;
}

}  // namespace

int main(int argc, char** argv) {
  // --variants FILTER: the filter of `klab run` and `klab list` (a fragment of the name, or a glob with
  // * or ?), applied before Google Benchmark's own --benchmark_filter (a regex over NAME/PROBLEM).
  RunOptions sel;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--variants" && i + 1 < argc) sel.variants = argv[++i];
    else if (a.rfind("--variants=", 0) == 0) sel.variants = a.substr(11);
    else if (a == "--variants") {
      std::cerr << "klab_bench: --variants needs a FILTER (a fragment of a variant's name, or a glob)" << std::endl;
      return 2;
    } else args.push_back(argv[i]);
  }
  argc = int(args.size());
  argv = args.data();
  int registered = 0;
  for (const auto& [name, v] : registry().variants()) {
    const Op* op = &registry().op(v.op);
    if (!op->generate || !sel.selects(name)) continue;
    for (const auto& p : problems_of(*op)) {
      benchmark::RegisterBenchmark((name + "/" + p.key()).c_str(), bench, op, &v, p)->UseManualTime()->Unit(benchmark::kMicrosecond);
      ++registered;
    }
  }
  if (registered == 0) {
    std::cerr << "klab_bench: no variant matches --variants '" << sel.variants << "'" << std::endl;
    return 2;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  if (!has_device()) std::cerr << "klab_bench: " << no_device_reason() << ": every benchmark is skipped" << std::endl;
  const std::size_t ran = benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  // Exit statuses as klab's: 1 a case failed, 2 nothing matched the filter (or it did not compile),
  // 4 device work skipped for want of a device.
  if (ran == 0) {
    std::cerr << "klab_bench: no benchmark matched --benchmark_filter (or the filter is not a valid regex)" << std::endl;
    return 2;
  }
  if (g_errors > 0) {
    std::cerr << "klab_bench: " << g_errors << " case(s) failed (see the errors above)" << std::endl;
    return 1;
  }
  return has_device() ? 0 : 4;
}
