// The q4_gemm family on the device (written without a device: not yet run on the H200): every
// variant equal to its CPU bit-model bit for bit and every batched kernel equal to impl=loop bit for
// bit on awkward problems (m not a multiple of 4 or 8, one and several warps, n of 1, a remainder of
// the column step and the limit), every element written; the raw launchers on caller-owned buffers
// (nothing written past Y, two workspaces on two streams at once). The reference within tolerance is
// tests/gpu/test_variants.cpp's (every op with params, on its declared problems).
#include <doctest/doctest.h>

#include "gpu_util.hpp"
#include "klab/catalog.hpp"
#include "klab/cuda.hpp"
#include "klab/metrics.hpp"
#include "q4_gemm/variants.hpp"
#include "q4_gemv/packed.hpp"

using namespace klab;

namespace {
struct Case {
  std::int64_t m, k, n;
  Dist dist;
};
const std::vector<Case>& cases() {
  static const std::vector<Case> c{{1, 32, 1, Dist::uniform},        {37, 160, 3, Dist::student_t},  {37, 160, 33, Dist::uniform},
                                   {1061, 2080, 9, Dist::outlier},   {301, 6144, 32, Dist::student_t}, {4099, 96, 17, Dist::normal},
                                   {1024, 5120, 8, Dist::uniform},   {5, 1088, 256, Dist::uniform}};
  return c;
}
}  // namespace

TEST_CASE("every q4_gemm variant equals its bit-model bit for bit; the batched kernels equal impl=loop bit for bit") {
  const Op& op = registry().op(q4_gemm::kOp);
  const auto variants = registry().variants_of(q4_gemm::kOp);
  const Variant& loop = registry().variant(q4_gemm::gemm_variants().front().name);
  int compared = 0;
  for (const Case& c : cases()) {
    const Problem p = q4_gemm::problem(c.m, c.k, c.n, c.dist, 3);
    CAPTURE(p.str());
    auto wl = op.generate(p);
    const auto want_loop = test::run_once(loop, *wl);
    for (const Variant* v : variants) {
      CAPTURE(v->name);
      REQUIRE(v->can_implement(p).empty());
      const auto y = test::run_once(*v, *wl);
      const auto want = v->cpu_model(*wl);
      REQUIRE(y.size() == std::size_t(c.m * c.n));
      std::int64_t unwritten = 0;
      for (float f : y) unwritten += is_poison(f);
      CHECK(unwritten == 0);
      CHECK(bitwise_diff(y, want) == 0);
      CHECK(bitwise_diff(y, want_loop) == 0);
      ++compared;
    }
  }
  CHECK(compared == int(cases().size() * variants.size()));
}

TEST_CASE("q4_gemm raw launchers: the model's bits, nothing written past Y, two workspaces on two streams at once") {
  cudaStream_t streams[2];
  for (auto& s : streams) KLAB_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const Op& op = registry().op(q4_gemm::kOp);
  for (const auto& kern : q4_gemm::gemm_kernels()) {
    CAPTURE(kern.name);
    // Two problems of one W shape with different X, one per stream, launched back to back.
    std::vector<std::unique_ptr<klab::Workload>> wls;
    for (std::uint64_t seed : {1u, 2u}) wls.push_back(op.generate(q4_gemm::problem(37, 5120, 11, Dist::student_t, seed)));
    struct Bufs {
      DeviceBuffer<std::uint8_t> packed, ws;
      DeviceBuffer<float> x, y;
    };
    constexpr std::size_t kGuard = 64;  // poisoned floats after Y: a write past n m shows here
    std::vector<Bufs> bufs;
    for (const auto& wl : wls) {
      const auto& w = q4_gemm::workload_of(*wl);
      bufs.push_back(Bufs{DeviceBuffer<std::uint8_t>::from(q4_gemv::packed::pack(w.w, kern.rows)), DeviceBuffer<std::uint8_t>(q4_gemm::workspace_bytes(w.w.k, w.n)),
                          DeviceBuffer<float>::from(w.x), DeviceBuffer<float>(std::size_t(w.n * w.w.m) + kGuard)});
    }
    for (std::size_t i = 0; i < 2; ++i) poison_device(bufs[i].y.get(), bufs[i].y.size(), streams[i]);
    for (int rep = 0; rep < 3; ++rep)
      for (std::size_t i = 0; i < 2; ++i) {
        const auto& w = q4_gemm::workload_of(*wls[i]);
        kern.launch(bufs[i].packed.get(), bufs[i].x.get(), bufs[i].y.get(), int(w.w.m), int(w.w.k), int(w.n), bufs[i].ws.get(), streams[i]);
      }
    for (auto& s : streams) KLAB_CUDA(cudaStreamSynchronize(s));
    for (std::size_t i = 0; i < 2; ++i) {
      const auto& w = q4_gemm::workload_of(*wls[i]);
      auto y = bufs[i].y.download();
      std::int64_t guard_written = 0;
      for (std::size_t g = std::size_t(w.n * w.w.m); g < y.size(); ++g) guard_written += !is_poison(y[g]);
      CHECK(guard_written == 0);
      y.resize(std::size_t(w.n * w.w.m));
      CHECK(bitwise_diff(y, q4_gemm::model_batched(w.w, w.x, w.n)) == 0);
    }
  }
  for (auto& s : streams) KLAB_CUDA(cudaStreamDestroy(s));
}
