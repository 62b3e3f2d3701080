// gdn-stack's graph (experiments/gdn_stack.hpp) at a small geometry and a few layers, f32 and q4
// tiers: one token through the layers as one CUDA graph equals, bit for bit, the same layers enqueued
// one after another (output, every layer's S and conv history), and both equal the chain of
// host-facing steps (layer l's output handed to layer l+1 by the host): an independent path to the
// same bits, so a graph that captured nothing, skipped a layer or read the wrong ping-pong buffer fails.
#include <doctest/doctest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "../cpu/cli_util.hpp"
#include "gdn/gdn_device.hpp"
#include "gdn_stack.hpp"
#include "gdn_util.hpp"
#include "klab/error.hpp"
#include "klab/metrics.hpp"
#include "klab/ref/gdn.hpp"
#include "klab/ref/gdn_q4.hpp"
#include "klab/report.hpp"

using namespace klab;
namespace rg = klab::ref::gdn;
using experiments::GdnStack;
using gdn::GdnDevice;
using rg::What;

namespace {
// nv != nk, dk != dv, dv not a multiple of 32; q4-able (hidden and nv*dv multiples of 32).
const rg::Geometry kG{256, 2, 6, 32, 48, 4, 1e-6};

void load(GdnDevice& dev, const std::string& tier, const rg::LayerWeights& w, const rg::Q4Projections& q) {
  if (tier == "q4") experiments::load_stack_q4(dev, w, q);
  else experiments::load_stack_f32(dev, w);
}
}  // namespace

TEST_CASE("gdn-stack: one token through the layers as one CUDA graph equals the sequential enqueue and the host-facing chain, bit for bit") {
  const auto w = rg::random_weights(kG, 21);
  const auto q = rg::quantize_projections(w);
  const auto h = test::gdn_inputs(kG, 1, 4, 900);
  for (const std::string tier : {"f32", "q4"}) {
    for (int nl : {1, 2, 5}) {
      CAPTURE(tier);
      CAPTURE(nl);
      cudaStream_t s = nullptr;
      REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
      {
        GdnDevice dev(kG, nl);
        load(dev, tier, w, q);
        for (int l = 0; l < nl; ++l) CHECK(dev.tier(l) == tier);
        if (tier == "q4") {
          std::set<int> keys;
          for (int l = 0; l < nl; ++l) {
            const auto k = dev.q4_keys(l);
            REQUIRE(k.has_value());
            keys.insert({k->qkv, k->z, k->out});
          }
          CHECK(keys.size() == std::size_t(3 * nl));  // every layer reads tensors of its own
        }
        GdnStack stack(dev, s);
        CHECK_THROWS_AS(stack.launch(), Error);  // no graph yet
        stack.set_input(h);
        const auto c = experiments::check_stack(dev, stack);
        CHECK(stack.captured());
        CHECK(c.out_differ == 0);
        CHECK(c.S_differ == 0);
        CHECK(c.hist_differ == 0);
        CHECK(c.compared == kG.hidden + nl * (rg::count(kG, What::S) + rg::count(kG, What::HIST)));
        CHECK(c.finite);
        CHECK(c.out_max_abs > 0);
        REQUIRE(c.max_abs_by_layer.size() == std::size_t(nl));
        // Every layer's step is the same handful of kernels: the graph holds nl times as many.
        CHECK(stack.kernel_nodes() > 0);
        CHECK(stack.kernel_nodes() % nl == 0);
        CHECK(stack.nodes() >= stack.kernel_nodes());
        CHECK(stack.copy_nodes() == 0);  // a layer is its step's kernels: no copy of its output for get(OUT)
        const auto y_graph = stack.output();
        const auto S_graph = dev.get(nl - 1, What::S);

        // The host-facing chain on a second device with the same weights.
        GdnDevice ref(kG, nl);
        load(ref, tier, w, q);
        std::vector<float> y;
        for (int l = 0; l < nl; ++l) y = ref.step(l, h);  // every layer reads the token (GdnStack::enqueue)
        CHECK(bitwise_diff(y_graph, y) == 0);
        CHECK(bitwise_diff(S_graph, ref.get(nl - 1, What::S)) == 0);
        for (double m : c.max_abs_by_layer) CHECK(m > 0);  // no layer's output vanished

        // The graph again from a zeroed state: the same bits (launches are repeatable); a second
        // token (the state carried) gives other bits.
        dev.reset();
        stack.poison();
        stack.launch();
        CHECK(bitwise_diff(stack.output(), y_graph) == 0);
        stack.launch();
        const auto y2 = stack.output();
        CHECK(bitwise_diff(y2, y_graph) > 0);
        for (float v : y2) REQUIRE(!is_poison(v));
      }
      cudaStreamDestroy(s);
    }
  }
}

// gdn-stack-layers --quick (1, 2 and 4 layers at the small geometry, the q4 tier): every count checked and timed, and
// the fitted line's points are the timed counts' medians, the line through them.
TEST_CASE("gdn-stack-layers --quick: each layer count checked and timed, the line through their medians") {
  namespace fs = std::filesystem;
  const fs::path out = klab::test::temp_out_dir("gpu-stack-layers");
  const auto r = klab::test::klab_cli("run gdn-stack-layers --quick --reps 5 --out " + out.string());
  INFO(r.out);
  REQUIRE(r.code == 0);
  std::vector<double> layers, medians;
  nlohmann::json fit;
  for (const auto& j : read_jsonl(out / "report.jsonl")) {
    if (j.value("tier", std::string()) != "q4") continue;
    if (j.at("kind") == "gdn_stack_layers") {
      CHECK(j.at("bitwise").at("out_differ") == 0);
      REQUIRE(j.at("timed").get<bool>());
      layers.push_back(j.at("layers").get<double>());
      medians.push_back(j.at("ms_per_token").at("median").get<double>());
    }
    if (j.at("kind") == "gdn_stack_layers_fit") fit = j;
  }
  CHECK(layers == std::vector<double>{1, 2, 4});
  REQUIRE_FALSE(fit.is_null());
  CHECK(fit.at("layers").get<std::vector<double>>() == layers);
  CHECK(fit.at("ms_per_token").get<std::vector<double>>() == medians);
  const auto f = experiments::fit_line(layers, medians);
  CHECK(fit.at("us_per_layer").get<double>() == doctest::Approx(1e3 * f.b));
  CHECK(fit.at("fixed_us").get<double>() == doctest::Approx(1e3 * f.a));
  CHECK(fit.at("us_per_layer").get<double>() > 0);
  fs::remove_all(out);
}
