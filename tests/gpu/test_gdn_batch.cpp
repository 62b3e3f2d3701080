// Batched slots (GdnDevice::enqueue_batch; variants/gdn/README.md "Batched slots"): B slots of one
// layer stepped at once give, slot by slot, the output, S and conv history of that slot's own
// single-sequence steps (step(), the same q4 kernel, recurrence and fused prep) bit for bit, token
// after token; slots outside the batch are untouched; what the batch cannot take is refused before
// any launch; f32_gemv's launch_cols (the batch's b|a) is its launch column by column. Not yet run
// on the H200 (written in a session without a device).
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "f32_gemv/kernels.hpp"
#include "gdn/gdn_device.hpp"
#include "gdn/inputs.hpp"
#include "gdn/step_op.hpp"
#include "gdn_common.hpp"
#include "gdn_recurrence/kernels.hpp"
#include "gdn_util.hpp"
#include "klab/cuda.hpp"
#include "klab/error.hpp"
#include "klab/metrics.hpp"
#include "klab/ref/gdn.hpp"
#include "klab/ref/gdn_q4.hpp"
#include "klab/timing.hpp"

using namespace klab;
namespace rg = klab::ref::gdn;
using gdn::GdnDevice;
using rg::Geometry;
using rg::What;

namespace {

// The Qwen3.5-27B state (16/48 heads of 128) with hidden 256: q4-able, and the fused recurrences take it.
const Geometry kG{256, 16, 48, 128, 128, 4, 1e-6};
constexpr const char* kQ4 = "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=launch,pdl=on,rows=8";
constexpr const char* kRec = "gdn_recurrence/impl=fused,cols=16,rows=8,pdl=on";

// Both layers of `dev` on the q4 tier (keys 3l+1..3l+3), the batch's settings.
void load(GdnDevice& dev, const rg::LayerWeights& w, const rg::Q4Projections& q) {
  for (int l = 0; l < dev.layers(); ++l) {
    experiments::put_all(dev.q4_pool(), q, 3 * l + 1, 3 * l + 2, 3 * l + 3);
    REQUIRE(dev.load_q4(l, w, 3 * l + 1, 3 * l + 2, 3 * l + 3) == "");
  }
}

// The settings both devices run: kQ4, kRec and the fused prep, or the step's candidate's base (the
// PDL chain, pdl=early, out=prepared, b|a split-row: the candidate's fold=ba computes b|a in the
// single step's stacked prep kernel, which the batch does not have; the batch's column launch has its own order).
void configure(GdnDevice& dev, bool candidate) {
  if (candidate) {
    gdn::apply(gdn::candidate_twins().ba_own, dev);
    return;
  }
  dev.set_q4_variant(kQ4);
  dev.set_recurrence_variant(kRec);
  dev.set_fused_prep(true);
}

}  // namespace

TEST_CASE("GDN batched slots: every slot of enqueue_batch equals its own single-slot steps bit for bit (out, S, hist), B = 1, 3, 8, two configurations") {
  constexpr int T = 4, nl = 2, layer = 1, first = 1;  // layer 1 of 2 and slots from 1: the strides between a layer's slots are exercised
  const auto w = rg::random_weights(kG, 61);
  const auto q = rg::quantize_projections(w);
  for (bool candidate : {false, true}) {
    for (int B : {1, 3, 8}) {
      CAPTURE(candidate);
      CAPTURE(B);
      const int slots = first + B + 1;  // one slot below and one above the batch, never stepped
      GdnDevice batched(kG, nl, slots), single(kG, nl, slots);
      load(batched, w, q);
      load(single, w, q);
      configure(batched, candidate);
      configure(single, candidate);
      REQUIRE(GdnDevice::batch_error(batched.q4_variant(), batched.recurrence_variant(), batched.fused_prep(), B) == "");
      // Slot j's sequence: its own inputs.
      std::vector<std::vector<float>> h;
      for (int j = 0; j < B; ++j) h.push_back(test::gdn_inputs(kG, T, 62, 1000 + std::uint64_t(j) * 10));
      const std::size_t H = std::size_t(kG.hidden);
      DeviceBuffer<float> d_h(std::size_t(B) * H), d_y(std::size_t(B) * H);
      std::int64_t out_diff = 0, S_diff = 0, hist_diff = 0;
      for (int t = 0; t < T; ++t) {
        std::vector<float> hb(std::size_t(B) * H);
        for (int j = 0; j < B; ++j) {
          const auto x = test::tok(h[std::size_t(j)], kG, t);
          std::copy(x.begin(), x.end(), hb.begin() + std::ptrdiff_t(std::size_t(j) * H));
        }
        KLAB_CUDA(cudaMemcpy(d_h.get(), hb.data(), hb.size() * sizeof(float), cudaMemcpyHostToDevice));
        poison_device(d_y.get(), d_y.size());
        KLAB_CUDA(cudaDeviceSynchronize());
        batched.enqueue_batch(layer, first, B, d_h.get(), d_y.get(), nullptr);
        KLAB_CUDA(cudaDeviceSynchronize());
        const auto yb = d_y.download();
        for (int j = 0; j < B; ++j) {
          const auto y1 = single.step(layer, test::tok(h[std::size_t(j)], kG, t), first + j);
          out_diff += bitwise_diff(std::vector<float>(yb.begin() + std::ptrdiff_t(std::size_t(j) * H), yb.begin() + std::ptrdiff_t(std::size_t(j + 1) * H)), y1);
          S_diff += bitwise_diff(batched.get(layer, What::S, first + j), single.get(layer, What::S, first + j));
          hist_diff += bitwise_diff(batched.get(layer, What::HIST, first + j), single.get(layer, What::HIST, first + j));
        }
      }
      CHECK(out_diff == 0);
      CHECK(S_diff == 0);
      CHECK(hist_diff == 0);
      // The slots outside the batch, and layer 0 of every slot, are still zero.
      auto all_zero = [](const std::vector<float>& v) {
        for (float x : v)
          if (x != 0.f) return false;
        return true;
      };
      for (int s : {0, slots - 1}) {
        CHECK(all_zero(batched.get(layer, What::S, s)));
        CHECK(all_zero(batched.get(layer, What::HIST, s)));
      }
      for (int s = 0; s < slots; ++s) CHECK(all_zero(batched.get(0, What::S, s)));
      CHECK(batched.batch_capacity() == B);
    }
  }
}

TEST_CASE("GDN batched slots: in one CUDA graph (reserve_batch first) the batch gives the same bits as enqueued; inside a capture without room it is refused") {
  constexpr int B = 4;
  const auto w = rg::random_weights(kG, 63);
  const auto q = rg::quantize_projections(w);
  GdnDevice a(kG, 1, B), b(kG, 1, B);
  load(a, w, q);
  load(b, w, q);
  configure(a, true);
  configure(b, true);
  const std::size_t H = std::size_t(kG.hidden);
  auto d_h = DeviceBuffer<float>::from(test::gdn_inputs(kG, B, 64, 1100));  // (B, hidden): one token of each slot
  DeviceBuffer<float> ya(std::size_t(B) * H), yb(std::size_t(B) * H);
  cudaStream_t s = nullptr;
  KLAB_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  // No room yet: refused inside the capture, naming reserve_batch.
  cudaGraph_t graph = nullptr;
  KLAB_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  CHECK_THROWS_WITH_AS(a.enqueue_batch(0, 0, B, d_h.get(), ya.get(), s), doctest::Contains("reserve_batch"), Error);
  KLAB_CUDA(cudaStreamEndCapture(s, &graph));
  if (graph) KLAB_CUDA(cudaGraphDestroy(graph));
  a.reserve_batch(B);
  // The launches: 3 q4_gemm pairs (xprep_cols, gemm), b|a, conv_norm_bg_slots, the recurrence, and the
  // gated norm where the recurrence does not run it as its epilogue (the step's candidate since
  // 2026-12-01's run-08a86f8 does not).
  const bool epilogue = gdn_recurrence::recurrence_kernel(a.recurrence_variant()).gated_norm;
  CHECK(graph_nodes([&](cudaStream_t st) { a.enqueue_batch(0, 0, B, d_h.get(), ya.get(), st); }, s).kernels == 3 * 2 + 3 + (epilogue ? 0 : 1));
  KLAB_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  a.enqueue_batch(0, 0, B, d_h.get(), ya.get(), s);
  KLAB_CUDA(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec = nullptr;
  KLAB_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  KLAB_CUDA(cudaGraphLaunch(exec, s));
  KLAB_CUDA(cudaStreamSynchronize(s));
  b.enqueue_batch(0, 0, B, d_h.get(), yb.get(), nullptr);
  KLAB_CUDA(cudaDeviceSynchronize());
  CHECK(bitwise_diff(ya.download(), yb.download()) == 0);
  for (int j = 0; j < B; ++j) CHECK(bitwise_diff(a.get(0, What::S, j), b.get(0, What::S, j)) == 0);
  KLAB_CUDA(cudaGraphExecDestroy(exec));
  KLAB_CUDA(cudaGraphDestroy(graph));
  KLAB_CUDA(cudaStreamDestroy(s));
}

TEST_CASE("GDN batched slots: enqueue_batch refuses, before any launch, what it cannot take, naming it") {
  constexpr int B = 3, slots = 4;
  const auto w = rg::random_weights(kG, 65);
  const auto q = rg::quantize_projections(w);
  GdnDevice dev(kG, 1, slots);
  const std::size_t H = std::size_t(kG.hidden);
  DeviceBuffer<float> d_h(std::size_t(slots + 1) * H), d_y(std::size_t(slots) * H);
  auto refuse = [&](int first, int b, const float* h, float* y, const char* needle) {
    CAPTURE(needle);
    CHECK_THROWS_WITH_AS(dev.enqueue_batch(0, first, b, h, y, nullptr), doctest::Contains(needle), Error);
  };
  refuse(0, B, d_h.get(), d_y.get(), "never loaded");
  dev.load_f32(0, w);
  refuse(0, B, d_h.get(), d_y.get(), "f32 tier");
  dev.unload_projections(0);
  experiments::put_all(dev.q4_pool(), q);
  REQUIRE(dev.use_q4(0, experiments::kQkv, experiments::kZ, experiments::kOut) == "");
  refuse(0, B, d_h.get(), d_y.get(), "map=packed,dot=q8-dp4a");  // the default q4 kernel
  dev.set_q4_variant(kQ4);
  refuse(0, B, d_h.get(), d_y.get(), "set_fused_prep");
  dev.set_fused_prep(true);
  refuse(0, B, d_h.get(), d_y.get(), "impl=fused");  // the default (seed) recurrence
  dev.set_recurrence_variant(kRec);
  refuse(0, 0, d_h.get(), d_y.get(), "at least one slot");
  refuse(2, B, d_h.get(), d_y.get(), "out of range");
  refuse(-1, B, d_h.get(), d_y.get(), "out of range");
  refuse(0, B, nullptr, d_y.get(), "null buffer");
  refuse(0, B, d_h.get() + 1, d_y.get(), "16-byte aligned");
  refuse(0, B, d_h.get(), d_h.get() + H, "overlaps");
  dev.set_pdl_chain(true);
  refuse(0, B, d_h.get(), d_y.get(), "pdl=early");  // pdl=on loads S before its wait
  dev.set_pdl_chain(false);
  dev.q4_pool().erase(2);
  refuse(0, B, d_h.get(), d_y.get(), "in_proj_z");  // a stale binding: no silent fallback
  // Nothing ran: every slot's state is still zero, and no scratch was allocated.
  CHECK(dev.batch_capacity() == 0);
  for (int s = 0; s < slots; ++s)
    for (float x : dev.get(0, What::S, s)) REQUIRE(x == 0.f);
}

TEST_CASE("f32_gemv launch_cols (the batch's b|a): every column bit for bit the kernel's launch on that column, every kernel") {
  for (const auto& kern : f32_gemv::f32_kernels()) {
    REQUIRE(bool(kern.launch_cols));
    for (auto [m, k] : {std::pair{96, 256}, std::pair{37, 5120}, std::pair{5, 97}}) {
      if (kern.can_implement && !kern.can_implement(m, k).empty()) continue;  // split-row: k % 4 != 0
      CAPTURE(kern.name);
      CAPTURE(m);
      CAPTURE(k);
      constexpr int n = 3;
      const auto w = gdn::inputs(m * k, 1, Dist::normal, 71, 1);
      const auto x = gdn::inputs(k * n, 1, Dist::normal, 71, 2);
      auto d_w = DeviceBuffer<float>::from(w);
      auto d_x = DeviceBuffer<float>::from(x);
      DeviceBuffer<float> y_cols(std::size_t(m) * n), y_one(std::size_t(m) * n);
      poison_device(y_cols.get(), y_cols.size());
      poison_device(y_one.get(), y_one.size());
      kern.launch_cols(d_w.get(), d_x.get(), y_cols.get(), m, k, n, nullptr);
      for (int j = 0; j < n; ++j) kern.launch(d_w.get(), d_x.get() + std::size_t(j) * k, y_one.get() + std::size_t(j) * m, m, k, nullptr);
      KLAB_CUDA(cudaDeviceSynchronize());
      CHECK(bitwise_diff(y_cols.download(), y_one.download()) == 0);
    }
  }
}
