// The llama-mmvq peer on the device (klab built with -DKLAB_GGML_DIR; skipped, saying so, without):
// within its tolerance on the accuracy problems, deterministic, and capturable in a CUDA graph the
// way the race's stream mode captures it (ggml's stream forked from and joined to the captured one),
// the replay giving the plain run's bits.
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include "../q4_cases.hpp"
#include "baselines/baselines.hpp"
#include "gpu_util.hpp"
#include "klab/catalog.hpp"
#include "klab/cuda.hpp"
#include "klab/metrics.hpp"

using namespace klab;

namespace {
const Variant& mmvq() { return registry().variant("q4_gemv/impl=llama-mmvq"); }
}  // namespace

TEST_CASE("llama-mmvq: within its tolerance on the accuracy problems, the same bits twice" *
          doctest::skip(!baselines::llama_mmvq_built())) {
  const Op& op = registry().op("q4_gemv");
  std::vector<Problem> problems = test::q4_accuracy_problems();
  problems.push_back(Problem{{1024, 512}, Dist::uniform, 1});
  problems.push_back(Problem{{6144, 5120}, Dist::uniform, 1});
  for (const Problem& p : problems) {
    CAPTURE(p.str());
    auto wl = op.generate(p);
    REQUIRE(mmvq().can_implement(p).empty());
    const auto y = test::run_once(mmvq(), *wl);
    const auto a = accuracy(y, op.reference(*wl));
    CHECK(a.finite());
    CHECK(a.max_rel < mmvq().tolerance);
    CHECK(bitwise_diff(y, test::run_once(mmvq(), *wl)) == 0);
  }
}

TEST_CASE("llama-mmvq: captured in a CUDA graph over two instances (ggml's stream forked and joined), the replay equal to a plain run" *
          doctest::skip(!baselines::llama_mmvq_built())) {
  const Op& op = registry().op("q4_gemv");
  auto wl = op.generate(Problem{{1000, 2048}, Dist::uniform, 3});
  const auto plain = test::run_once(mmvq(), *wl);
  auto a = mmvq().make(*wl), b = mmvq().make(*wl);
  cudaStream_t s;
  KLAB_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  a->run(s);  // lazy initialisation (ggml's stream, its pool) outside the capture, as the race does
  b->run(s);
  KLAB_CUDA(cudaStreamSynchronize(s));
  a->poison(s);
  b->poison(s);
  KLAB_CUDA(cudaStreamSynchronize(s));
  cudaGraph_t graph = nullptr;
  KLAB_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < 3; ++i) (i % 2 ? b : a)->run(s);
  const cudaError_t end = cudaStreamEndCapture(s, &graph);
  REQUIRE_MESSAGE(end == cudaSuccess, cudaGetErrorString(end));
  REQUIRE(graph != nullptr);
  std::size_t nodes = 0;
  KLAB_CUDA(cudaGraphGetNodes(graph, nullptr, &nodes));
  MESSAGE("3 captured runs: " << nodes << " graph nodes");
  CHECK(nodes >= 6);  // at least ggml's two kernels per run
  cudaGraphExec_t exec = nullptr;
  KLAB_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  // The graph must write nothing before it is launched: both outputs still poisoned.
  CHECK(accuracy(a->output(), op.reference(*wl)).unwritten == std::int64_t(plain.size()));
  KLAB_CUDA(cudaGraphLaunch(exec, s));
  KLAB_CUDA(cudaStreamSynchronize(s));
  CHECK(bitwise_diff(a->output(), plain) == 0);
  CHECK(bitwise_diff(b->output(), plain) == 0);
  KLAB_CUDA(cudaGraphExecDestroy(exec));
  KLAB_CUDA(cudaGraphDestroy(graph));
  KLAB_CUDA(cudaStreamDestroy(s));
}
