// The GDN decode step on the device (variants/gdn/gdn_device.hpp), f32 tier, against the f64 Eigen
// reference (klab/ref/gdn.hpp) and against itself: every intermediate at every token on several
// geometries; bitwise reset replay, cross-layer, step vs run, save/load continuation and slots; every
// refusal (readback, hit-only, load, geometry).
#include <doctest/doctest.h>

#include <cstdlib>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "common.hpp"
#include "gdn/gdn_device.hpp"
#include "klab/cuda.hpp"
#include "klab/error.hpp"
#include "klab/metrics.hpp"
#include "klab/problem.hpp"
#include "gdn_util.hpp"
#include "klab/ref/gdn.hpp"
#include "klab/ref/q4.hpp"
#include "gdn_recurrence/kernels.hpp"

using namespace klab;
namespace rg = klab::ref::gdn;
namespace fs = std::filesystem;
using gdn::GdnDevice;
using rg::Geometry;
using rg::What;

namespace {

// f32 against f64: sums of at most a few hundred products per output here, ~1e-6 of the vector's
// largest |value| at worst over 64 tokens; a wrong index, a stale buffer or a lost block gives O(1).
constexpr double kTol = 1e-4;

using test::Named;
// Geometries that each break an assumption a kernel could have made.
const std::vector<Named>& geometries() {
  static const std::vector<Named> v{
      {"nv != nk, dk != dv", Geometry{64, 2, 4, 16, 32, 4, 1e-6}},
      {"hidden % 4 != 0 (scalar mat-vec), dv < 32 (one partial column tile), ck 3", Geometry{100, 1, 3, 48, 20, 3, 1e-6}},
      {"nv == nk, ck 1 (no history)", Geometry{256, 4, 4, 40, 40, 1, 1e-5}},
      {"odd dk, dv over three column tiles, ck 5", Geometry{96, 2, 6, 33, 70, 5, 1e-6}},
      {"dk 300 > a reduction block, dv 130 not a power of two", Geometry{128, 1, 2, 300, 130, 4, 1e-6}},
      {"the Qwen3.5-27B state (16/48 heads of 128) with hidden 256", Geometry{256, 16, 48, 128, 128, 4, 1e-6}},
  };
  return v;
}
const Geometry& small() { return geometries()[0].g; }

std::vector<float> inputs(const Geometry& g, int T, std::uint64_t seed) { return test::gdn_inputs(g, T, seed, 500); }
using test::tok;

std::vector<std::vector<float>> all_intermediates(const GdnDevice& dev, int layer, int slot = 0) {
  std::vector<std::vector<float>> v;
  for (What w : rg::all_whats()) v.push_back(dev.get(layer, w, slot));
  return v;
}
std::int64_t diff(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  REQUIRE(a.size() == b.size());
  std::int64_t d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d += bitwise_diff(a[i], b[i]);
  return d;
}

struct Refusal {
  bool refused = false;  // a klab::Error that is not a CUDA error
  std::string msg;
};
Refusal refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const CudaError& e) {
    return {false, std::string("CUDA error, not a refusal: ") + e.what()};
  } catch (const Error& e) {
    return {true, e.what()};
  }
  return {false, "not refused"};
}
#define CHECK_REFUSED(expr, needle)                                  \
  do {                                                               \
    const Refusal r_ = refusal([&] { expr; });                       \
    CAPTURE(r_.msg);                                                 \
    CHECK(r_.refused);                                               \
    CHECK(r_.msg.find(needle) != std::string::npos);                 \
  } while (0)

// The committed fixtures, found as the experiments find them.
std::vector<fs::path> fixture_files() {
  std::string looked;
  return experiments::gdn_fixture_files(looked);
}

}  // namespace

TEST_CASE("GDN f32 tier: every intermediate matches the f64 reference at every token (6 geometries, 64 tokens)") {
  constexpr int T = 64;
  for (const auto& [why, g] : geometries()) {
    CAPTURE(why);
    CAPTURE(g.str());
    REQUIRE(GdnDevice::can_implement(g, 1) == "");
    const auto w = rg::random_weights(g, 11);
    GdnDevice dev(g, 1);
    dev.load_f32(0, w);
    // Before any step the intermediates hold the poison pattern: after one, every one must be written.
    CHECK(is_poison(dev.get(0, What::OUT)[0]));
    auto st = rg::State::zeros(g);
    const auto h = inputs(g, T, 5);
    double worst = 0;
    for (int t = 0; t < T; ++t) {
      const auto y = dev.step(0, tok(h, g, t));
      rg::Intermediates im;
      const auto yr = rg::step(w, st, tok(h, g, t), &im);
      CAPTURE(t);
      const Accuracy ay = accuracy(y, yr);
      CHECK(ay.finite());
      CHECK(ay.max_rel <= kTol);
      for (What wh : rg::all_whats()) {
        CAPTURE(rg::to_string(wh));
        const auto got = dev.get(0, wh);
        const auto want = im.get(wh, st);
        REQUIRE(std::int64_t(got.size()) == rg::count(g, wh));
        REQUIRE(got.size() == want.size());
        const Accuracy a = accuracy(got, want);
        CHECK(a.finite());
        CHECK(a.max_rel <= kTol);
        worst = std::max(worst, a.max_rel);
      }
      // get(OUT) is the output step() returned.
      CHECK(bitwise_diff(dev.get(0, What::OUT), y) == 0);
    }
    MESSAGE(g.str() << ": worst max_rel over every intermediate and token " << worst);
  }
}

TEST_CASE("GDN: long-memory decay (exp(g) ~0.99..0.99999) stays within tolerance over 256 tokens") {
  const Geometry g{128, 2, 4, 32, 48, 4, 1e-6};
  auto w = rg::random_weights(g, 3);
  for (std::size_t i = 0; i < w.a_log.size(); ++i) w.a_log[i] = float(std::log(0.01 + 0.09 * double(i) / double(w.a_log.size())));
  GdnDevice dev(g, 1);
  dev.load_f32(0, w);
  auto st = rg::State::zeros(g);
  const auto h = inputs(g, 256, 9);
  const auto y = dev.run(0, 256, h);
  double worst = 0;
  for (int t = 0; t < 256; ++t) {
    const auto yr = rg::step(w, st, tok(h, g, t));
    const Accuracy a = accuracy(std::span<const float>(y.data() + std::size_t(t) * g.hidden, std::size_t(g.hidden)), yr);
    CHECK(a.finite());
    worst = std::max(worst, a.max_rel);
  }
  CHECK(worst <= kTol);
  const Accuracy as = accuracy(dev.get(0, What::S), st.S);
  CHECK(as.max_rel <= kTol);
  MESSAGE("worst output max_rel " << worst << ", final S max_rel " << as.max_rel);
}

TEST_CASE("GDN: reset replays token 0 bitwise (reset() and reset(layer, slot))") {
  for (const auto& [why, g] : geometries()) {
    CAPTURE(g.str());
    GdnDevice dev(g, 2);
    dev.load_f32(1, rg::random_weights(g, 4));
    const auto h = inputs(g, 9, 2);
    const auto y0 = dev.step(1, tok(h, g, 0));
    const auto first = all_intermediates(dev, 1);
    for (int t = 1; t < 9; ++t) dev.step(1, tok(h, g, t));
    CHECK(diff(first, all_intermediates(dev, 1)) > 0);  // the later tokens did change things
    dev.reset();
    CHECK(bitwise_diff(dev.step(1, tok(h, g, 0)), y0) == 0);
    CHECK(diff(first, all_intermediates(dev, 1)) == 0);
    for (int t = 1; t < 9; ++t) dev.step(1, tok(h, g, t));
    dev.reset(1, 0);
    CHECK(bitwise_diff(dev.step(1, tok(h, g, 0)), y0) == 0);
    CHECK(diff(first, all_intermediates(dev, 1)) == 0);
  }
}

TEST_CASE("GDN: same weights in the first and last layer give the same bits; layers do not share state") {
  for (const auto& [why, g] : geometries()) {
    CAPTURE(g.str());
    const int nl = 5;
    const auto w = rg::random_weights(g, 6);
    GdnDevice dev(g, nl);
    dev.load_f32(0, w);
    dev.load_f32(nl - 1, w);
    const auto h = inputs(g, 12, 8);
    // Interleaved: each token goes to layer 0, then to layer nl-1.
    for (int t = 0; t < 12; ++t) {
      const auto a = dev.step(0, tok(h, g, t));
      const auto b = dev.step(nl - 1, tok(h, g, t));
      CHECK(bitwise_diff(a, b) == 0);
    }
    CHECK(diff(all_intermediates(dev, 0), all_intermediates(dev, nl - 1)) == 0);
    // Layer nl-1's steps leave layer 0's state alone.
    const auto before = dev.save_state(0);
    dev.run(nl - 1, 12, h);
    const auto after = dev.save_state(0);
    CHECK(bitwise_diff(before.S, after.S) == 0);
    CHECK(bitwise_diff(before.hist, after.hist) == 0);
    // And the states of the two layers now differ (nl-1 ran 12 more tokens).
    CHECK(bitwise_diff(before.S, dev.save_state(nl - 1).S) > 0);
  }
}

TEST_CASE("GDN: step and run share one step body: T host-facing steps equal one run of T tokens, bitwise") {
  for (const auto& [why, g] : geometries()) {
    CAPTURE(g.str());
    constexpr int T = 20;
    GdnDevice dev(g, 1);
    dev.load_f32(0, rg::random_weights(g, 12));
    const auto h = inputs(g, T, 13);
    std::vector<float> ys;
    for (int t = 0; t < T; ++t) {
      const auto y = dev.step(0, tok(h, g, t));
      ys.insert(ys.end(), y.begin(), y.end());
    }
    const auto end_step = all_intermediates(dev, 0);
    dev.reset();
    const auto yr = dev.run(0, T, h);
    CHECK(bitwise_diff(ys, yr) == 0);
    CHECK(diff(end_step, all_intermediates(dev, 0)) == 0);  // incl. OUT: the last token's output
    // Split runs (7 + 13) give the same bits as one run.
    dev.reset();
    const std::vector<float> h1(h.begin(), h.begin() + 7 * g.hidden), h2(h.begin() + 7 * g.hidden, h.end());
    auto y1 = dev.run(0, 7, h1);
    const auto y2 = dev.run(0, T - 7, h2);
    y1.insert(y1.end(), y2.begin(), y2.end());
    CHECK(bitwise_diff(ys, y1) == 0);
  }
}

TEST_CASE("GDN: enqueue_run on caller buffers equals run(); refuses misaligned, overlapping and unloaded") {
  const Geometry& g = small();
  constexpr int T = 6;
  GdnDevice dev(g, 2);
  dev.load_f32(0, rg::random_weights(g, 1));
  const auto h = inputs(g, T, 1);
  const auto yr = dev.run(0, T, h);
  dev.reset();
  auto d_h = DeviceBuffer<float>::from(h);
  DeviceBuffer<float> d_y(h.size());
  dev.enqueue_run(0, T, d_h.get(), d_y.get(), nullptr);
  KLAB_CUDA(cudaDeviceSynchronize());
  CHECK(bitwise_diff(d_y.download(), yr) == 0);
  CHECK_REFUSED(dev.enqueue_run(0, 1, d_h.get() + 1, d_y.get(), nullptr), "aligned");
  CHECK_REFUSED(dev.enqueue_run(0, 2, d_h.get(), d_h.get() + g.hidden, nullptr), "overlaps");
  CHECK_REFUSED(dev.enqueue_run(1, 1, d_h.get(), d_y.get(), nullptr), "layer 1");
  CHECK_REFUSED(dev.enqueue_run(0, 0, d_h.get(), d_y.get(), nullptr), "T = 0");
}

TEST_CASE("GDN: readback: counts, too-small buffers, unknown and unloaded layers") {
  const Geometry& g = small();
  GdnDevice dev(g, 3);
  dev.load_f32(0, rg::random_weights(g, 2));
  const auto h = inputs(g, 1, 3);
  dev.step(0, tok(h, g, 0));
  for (What w : rg::all_whats()) {
    CAPTURE(rg::to_string(w));
    const std::int64_t n = rg::count(g, w);
    // dst == nullptr asks for the count, on any layer in range, loaded or not.
    CHECK(dev.get(0, w, nullptr, 0) == n);
    CHECK(dev.get(1, w, nullptr, 0) == n);
    // A buffer one too small is refused and left untouched: never truncated.
    std::vector<float> buf(std::size_t(n), 42.f);
    CHECK_REFUSED(dev.get(0, w, buf.data(), n - 1), "never truncated");
    CHECK(std::all_of(buf.begin(), buf.end(), [](float v) { return v == 42.f; }));
    // A buffer large enough is filled, and only its first n elements.
    std::vector<float> big(std::size_t(n) + 3, 42.f);
    CHECK(dev.get(0, w, big.data(), n + 3) == n);
    CHECK(std::none_of(big.begin(), big.begin() + n, [](float v) { return is_poison(v); }));
    CHECK(std::all_of(big.begin() + n, big.end(), [](float v) { return v == 42.f; }));
    // Unknown layers, unloaded layers, unknown slots.
    CHECK_REFUSED(dev.get(-1, w, nullptr, 0), "out of range");
    CHECK_REFUSED(dev.get(3, w, buf.data(), n), "out of range");
    CHECK_REFUSED(dev.get(1, w, buf.data(), n), "layer 1 was never loaded");
    CHECK_REFUSED(dev.get(0, w, buf.data(), n, 1), "slot 1 out of range");
  }
}

TEST_CASE("GDN: hit-only: every operation on a never-loaded layer is refused, naming the layer") {
  const Geometry& g = small();
  GdnDevice dev(g, 3);
  dev.load_f32(0, rg::random_weights(g, 2));
  const auto h = inputs(g, 2, 3);
  std::vector<float> y(std::size_t(g.hidden));
  const auto st = dev.save_state(0);
  CHECK_FALSE(dev.loaded(2));
  CHECK(dev.tier(2) == "");
  CHECK(dev.tier(0) == "f32");
  CHECK_REFUSED(dev.step(2, tok(h, g, 0), y), "layer 2");
  CHECK_REFUSED(dev.run(2, 2, h), "layer 2");
  CHECK_REFUSED(dev.save_state(2), "layer 2");
  CHECK_REFUSED(dev.load_state(2, st), "layer 2");
  CHECK_REFUSED(dev.step(3, tok(h, g, 0), y), "out of range");
  CHECK_REFUSED(dev.step(-1, tok(h, g, 0), y), "out of range");
  CHECK_REFUSED(dev.step(0, tok(h, g, 0), y, 1), "slot 1");
  // Wrong input and output sizes.
  CHECK_REFUSED(dev.step(0, std::span<const float>(h.data(), std::size_t(g.hidden - 1)), y), "input has");
  CHECK_REFUSED(dev.run(0, 3, h), "T*hidden");
  // None of the refusals loaded anything or touched layer 0's state.
  CHECK_FALSE(dev.loaded(2));
  CHECK(bitwise_diff(dev.save_state(0).S, st.S) == 0);
}

TEST_CASE("GDN: load_f32 checks geometry, shapes and layer range before it changes anything") {
  const Geometry& g = small();
  GdnDevice dev(g, 2);
  const auto good = rg::random_weights(g, 1);
  Geometry other = g;
  other.dv = g.dv + 4;
  CHECK_REFUSED(dev.load_f32(0, rg::random_weights(other, 1)), "geometry");
  auto bad = good;
  bad.w_qkv.pop_back();
  CHECK_REFUSED(dev.load_f32(0, bad), "w_qkv");
  bad = good;
  bad.norm_w.push_back(1.f);
  CHECK_REFUSED(dev.load_f32(0, bad), "norm_w");
  CHECK_REFUSED(dev.load_f32(2, good), "out of range");
  CHECK_FALSE(dev.loaded(0));
  // A refused reload leaves the loaded layer as it was.
  dev.load_f32(0, good);
  const auto h = inputs(g, 2, 4);
  const auto y0 = dev.step(0, tok(h, g, 0));
  CHECK_REFUSED(dev.load_f32(0, bad), "norm_w");
  REQUIRE(dev.loaded(0));
  dev.reset();
  CHECK(bitwise_diff(dev.step(0, tok(h, g, 0)), y0) == 0);
}

TEST_CASE("GDN: geometries the device object cannot hold are refused with the reason") {
  Geometry g = small();
  g.nv = 5;  // not a multiple of nk = 2
  CHECK_REFUSED(GdnDevice(g, 1), "multiple of nk");
  CHECK_REFUSED(GdnDevice(small(), 0), "nl = 0");
  CHECK_REFUSED(GdnDevice(small(), 1, 0), "slots = 0");
  // 100000 layers of Qwen3.5-27B state: ~315 GB, more than any device has: refused with its size,
  // and the device still works afterwards.
  CHECK_REFUSED(GdnDevice(rg::qwen35_27b(), 100000), "does not fit");
  GdnDevice ok(small(), 1);
  ok.load_f32(0, rg::random_weights(small(), 1));
  const auto y = ok.step(0, tok(inputs(small(), 1, 1), small(), 0));
  CHECK(accuracy(y, std::vector<float>(y.size(), 0.f)).finite());
}

TEST_CASE("GDN: save_state/load_state continue a sequence bitwise; the state moves to and from the CPU reference") {
  for (const auto& [why, g] : geometries()) {
    CAPTURE(g.str());
    constexpr int T1 = 10, T2 = 10;
    const auto w = rg::random_weights(g, 21);
    const auto h = inputs(g, T1 + T2, 22);
    const std::vector<float> h1(h.begin(), h.begin() + T1 * g.hidden), h2(h.begin() + T1 * g.hidden, h.end());
    GdnDevice dev(g, 2);
    dev.load_f32(0, w);
    dev.load_f32(1, w);
    dev.run(0, T1, h1);
    const auto saved = dev.save_state(0);
    CHECK(std::int64_t(saved.S.size()) == rg::count(g, What::S));
    CHECK(std::int64_t(saved.hist.size()) == rg::count(g, What::HIST));
    const auto ya = dev.run(0, T2, h2);
    // Back to the saved point in the same layer, and into another layer: the same continuation.
    dev.load_state(0, saved);
    CHECK(bitwise_diff(dev.run(0, T2, h2), ya) == 0);
    dev.load_state(1, saved);
    CHECK(bitwise_diff(dev.run(1, T2, h2), ya) == 0);
    // And into another device object.
    GdnDevice dev2(g, 1);
    dev2.load_f32(0, w);
    dev2.load_state(0, saved);
    CHECK(bitwise_diff(dev2.run(0, T2, h2), ya) == 0);

    // GPU -> CPU: the reference continues from the device's state, within tolerance of the device.
    auto st = gdn::to_ref(saved);
    for (int t = 0; t < T2; ++t) {
      const auto yr = rg::step(w, st, tok(h2, g, t));
      const Accuracy a = accuracy(std::span<const float>(ya.data() + std::size_t(t) * g.hidden, std::size_t(g.hidden)), yr);
      CHECK(a.max_rel <= kTol);
    }
    // CPU -> GPU: the reference runs the first T1 tokens, the device continues.
    auto st_cpu = rg::State::zeros(g);
    for (int t = 0; t < T1; ++t) rg::step(w, st_cpu, tok(h1, g, t));
    dev.load_state(0, gdn::from_ref(g, st_cpu));
    const auto yc = dev.run(0, T2, h2);
    for (int t = 0; t < T2; ++t) {
      const auto yr = rg::step(w, st_cpu, tok(h2, g, t));
      const Accuracy a = accuracy(std::span<const float>(yc.data() + std::size_t(t) * g.hidden, std::size_t(g.hidden)), yr);
      CHECK(a.max_rel <= kTol);
    }
  }
}

TEST_CASE("GDN: load_state refuses a state of the wrong size or geometry") {
  const Geometry& g = small();
  GdnDevice dev(g, 1);
  dev.load_f32(0, rg::random_weights(g, 1));
  const auto good = dev.save_state(0);
  auto bad = good;
  bad.S.pop_back();
  CHECK_REFUSED(dev.load_state(0, bad), "S has");
  bad = good;
  bad.hist.push_back(0.f);
  CHECK_REFUSED(dev.load_state(0, bad), "hist has");
  bad = good;
  bad.g.ck = g.ck + 1;
  CHECK_REFUSED(dev.load_state(0, bad), "geometry");
}

TEST_CASE("GDN: slots hold independent sequences; interleaving them changes no bit") {
  const Geometry& g = geometries()[3].g;
  constexpr int T = 16;
  const auto w = rg::random_weights(g, 31);
  const auto ha = inputs(g, T, 32), hb = inputs(g, T, 33);
  GdnDevice two(g, 1, 2);
  two.load_f32(0, w);
  std::vector<float> ya, yb;
  for (int t = 0; t < T; ++t) {
    const auto a = two.step(0, tok(ha, g, t), 0);
    const auto b = two.step(0, tok(hb, g, t), 1);
    ya.insert(ya.end(), a.begin(), a.end());
    yb.insert(yb.end(), b.begin(), b.end());
  }
  GdnDevice one(g, 1);
  one.load_f32(0, w);
  CHECK(bitwise_diff(one.run(0, T, ha), ya) == 0);
  const auto sa = one.save_state(0);
  one.reset();
  CHECK(bitwise_diff(one.run(0, T, hb), yb) == 0);
  CHECK(bitwise_diff(two.get(0, What::S, 0), sa.S) == 0);
  CHECK(bitwise_diff(two.get(0, What::S, 1), one.get(0, What::S)) == 0);
  // reset of one slot leaves the other alone.
  two.reset(0, 1);
  CHECK(bitwise_diff(two.get(0, What::S, 0), sa.S) == 0);
  const auto zs = two.get(0, What::S, 1);
  CHECK(std::all_of(zs.begin(), zs.end(), [](float v) { return v == 0.f; }));
  CHECK_REFUSED(two.step(0, tok(ha, g, 0), 2), "slot 2");
}

TEST_CASE("GDN f32 tier reproduces the transformers oracle fixtures (skipped while none are committed)" * doctest::skip(fixture_files().empty())) {
  for (const auto& file : fixture_files()) {
    CAPTURE(file.string());
    const auto w = rg::load_weights(file);
    const auto in = rg::load_inputs(file, w.g);
    const auto ex = rg::load_expected(file, w.g);
    REQUIRE(in.tokens == ex.tokens);
    GdnDevice dev(w.g, 1);
    dev.load_f32(0, w);
    auto st = rg::State::zeros(w.g);
    const std::size_t H = std::size_t(w.g.hidden);
    double worst = 0;
    for (int t = 0; t < in.tokens; ++t) {
      const auto y = dev.step(0, tok(in.h, w.g, t));
      const Accuracy a = accuracy(y, std::span<const float>(ex.y.data() + std::size_t(t) * H, H));
      CHECK(a.finite());
      worst = std::max(worst, a.max_rel);
      rg::Intermediates im;
      rg::step(w, st, tok(in.h, w.g, t), &im);
      for (What wh : rg::all_whats()) {
        CAPTURE(rg::to_string(wh));
        CHECK(accuracy(dev.get(0, wh), im.get(wh, st)).max_rel <= kTol);
      }
    }
    CHECK(worst <= kTol);
    if (!ex.S.empty()) CHECK(accuracy(dev.get(0, What::S), ex.S).max_rel <= kTol);
    if (!ex.hist.empty()) CHECK(accuracy(dev.get(0, What::HIST), ex.hist).max_rel <= kTol);
    MESSAGE(file.filename().string() << ": worst output max_rel vs transformers " << worst);
  }
}

TEST_CASE("GDN: the recurrence is a gdn_recurrence variant chosen by name; impl=once gives the default's bits, fused ones meet the reference") {
  const Geometry g = geometries().back().g;  // the Qwen3.5-27B heads (16/48 of 128) with hidden 256
  constexpr int T = 8;
  const auto w = rg::random_weights(g, 3);
  const auto h = inputs(g, T, 9);
  GdnDevice dev(g, 1);
  dev.load_f32(0, w);
  CHECK(dev.recurrence_variant() == gdn::kDefaultRecurrence);
  CHECK_REFUSED(dev.set_recurrence_variant("gdn_recurrence/impl=nope"), "gdn_recurrence/impl=seed");
  CHECK(dev.recurrence_variant() == gdn::kDefaultRecurrence);  // nothing changed
  auto run = [&](const std::string& name) {
    dev.set_recurrence_variant(name);
    dev.reset();
    auto y = dev.run(0, T, h);
    auto all = all_intermediates(dev, 0);
    all.push_back(std::move(y));
    return all;
  };
  const auto base = run(gdn::kDefaultRecurrence);
  CHECK(diff(run("gdn_recurrence/impl=once"), base) == 0);
  auto st = rg::State::zeros(g);
  std::vector<double> yref;
  for (int t = 0; t < T; ++t) {
    const auto y = rg::step(w, st, tok(h, g, t));
    yref.insert(yref.end(), y.begin(), y.end());
  }
  int fused = 0;
  for (const auto& k : gdn_recurrence::recurrence_kernels()) {
    if (k.name.find("impl=fused") == std::string::npos) continue;
    CAPTURE(k.name);
    if (k.state_bf16) {  // the step's state is f32: refused, naming why
      CHECK_REFUSED(dev.set_recurrence_variant(k.name), "bf16");
      continue;
    }
    if (k.conv_prep) {  // in the fused prep's place: without it the step refuses, naming the setting (its bits: test_gdn_breakdown.cpp)
      dev.set_recurrence_variant(k.name);
      CHECK_REFUSED(dev.run(0, T, h), "set_fused_prep(true)");
      continue;
    }
    gdn_recurrence::RecurrenceArgs probe;
    probe.nk = g.nk, probe.nv = g.nv, probe.dk = g.dk, probe.dv = g.dv, probe.normalize_qk = false;
    if (!k.can_implement(probe).empty()) {  // a configuration this geometry cannot take is refused, not run
      CHECK_REFUSED(dev.set_recurrence_variant(k.name), k.name);
      continue;
    }
    const auto got = run(k.name);
    const Accuracy a = accuracy(got.back(), yref);
    CHECK(a.finite());
    CHECK(a.max_rel <= kTol);
    CHECK(diff(got, base) > 0);  // another summation order: the bits differ, the values agree
    ++fused;
  }
  CHECK(fused > 0);
}

namespace {
// A recurrence problem at the Qwen heads (16 key heads, 48 value heads, dk 128) for the kernel-twin cases: random
// q, k, v (unit normal), S0 (0.1 normal), g = log U(0.9, 0.999) and beta = sigmoid(normal) on the host, the inputs
// on the device, and `args` (dense strides) pointing at them; S and o are the caller's.
struct RecProblem {
  std::vector<float> q, k, v, S0, g, beta;
  DeviceBuffer<float> dq, dk, dv, dg, db;
  klab::gdn_recurrence::RecurrenceArgs args;
  RecProblem(int batch, int dv_, std::uint64_t seed) {
    const int nk = 16, nv = 48, dk_ = 128;
    Rng r(seed, std::uint64_t(batch * 1000 + dv_));
    auto fill = [&](std::size_t n, double scale) {
      std::vector<float> x(n);
      for (auto& e : x) e = float(scale * r.normal());
      return x;
    };
    q = fill(std::size_t(batch) * nk * dk_, 1), k = fill(q.size(), 1), v = fill(std::size_t(batch) * nv * dv_, 1);
    S0 = fill(std::size_t(batch) * nv * dk_ * dv_, 0.1);
    g.resize(std::size_t(batch) * nv), beta.resize(g.size());
    for (auto& e : g) e = float(std::log(r.uniform(0.9, 0.999)));
    for (auto& e : beta) e = float(rg::sigmoid(r.normal()));
    dq = DeviceBuffer<float>::from(q), dk = DeviceBuffer<float>::from(k), dv = DeviceBuffer<float>::from(v), dg = DeviceBuffer<float>::from(g),
    db = DeviceBuffer<float>::from(beta);
    args = klab::gdn_recurrence::dense_args(nk, nv, dk_, dv_, batch);
    args.q = dq.get(), args.k = dk.get(), args.v = dv.get(), args.g = dg.get(), args.beta = db.get();
  }
};

// twin and k each run `steps` steps from p's S0 on a state of their own (each launch synchronised: pdl=on's and
// pdl=ahead's contracts forbid one S back to back); their o and S after the last.
struct PairRun {
  std::vector<float> o_twin, S_twin, o_k, S_k;
};
PairRun run_pair(const klab::gdn_recurrence::RecurrenceKernel& twin, const klab::gdn_recurrence::RecurrenceKernel& k, const RecProblem& p, int steps) {
  namespace gr = klab::gdn_recurrence;
  auto dS1 = DeviceBuffer<float>::from(p.S0), dS2 = DeviceBuffer<float>::from(p.S0);
  DeviceBuffer<float> o1(p.v.size()), o2(p.v.size());
  gr::RecurrenceArgs a = p.args, b = p.args;
  a.S = dS1.get(), a.o = o1.get();
  b.S = dS2.get(), b.o = o2.get();
  REQUIRE(gr::check_args(twin, a) == "");
  REQUIRE(gr::check_args(k, b) == "");
  for (int step = 0; step < steps; ++step) {
    twin.launch(a, nullptr);
    KLAB_CUDA(cudaDeviceSynchronize());
    k.launch(b, nullptr);
    KLAB_CUDA(cudaDeviceSynchronize());
  }
  return {o1.download(), dS1.download(), o2.download(), dS2.download()};
}
}  // namespace

TEST_CASE("gdn_recurrence stage=smem and pdl=ahead: o and S their twins' bit for bit, at batch 1, 3 and 32 and a ragged dv") {
  // The same values in the same order; only where S waits between its load and its use (stage=smem: its
  // twin without the flag) or when the dependents are let go (pdl=ahead: its pdl=on twin) differs.
  namespace gr = klab::gdn_recurrence;
  int staged = 0, ahead = 0;
  for (const auto& k : gr::recurrence_kernels()) {
    std::string twin_name;
    if (k.name.find(",o=direct") != std::string::npos) continue;  // its o is another order (its own case below)
    if (const auto at = k.name.find(",stage=smem"); at != std::string::npos) {
      ++staged;
      twin_name = k.name.substr(0, at) + k.name.substr(at + 11);
    } else if (const auto at2 = k.name.find("pdl=ahead"); at2 != std::string::npos) {
      ++ahead;
      twin_name = k.name.substr(0, at2) + "pdl=on" + k.name.substr(at2 + 9);
    } else if (const auto at3 = k.name.find("pdl=one-ahead"); at3 != std::string::npos) {  // its pdl=ahead twin's kernel, launched capped
      ++ahead;
      twin_name = k.name.substr(0, at3) + "pdl=ahead" + k.name.substr(at3 + 13);
    } else {
      continue;
    }
    const auto& twin = gr::recurrence_kernel(twin_name);
    if (k.state_ahead) {  // its residency on this device, and the copies that keep its contract
      for (int batch : {1, 8, 32}) {
        CAPTURE(batch);
        const gr::RecurrenceArgs a = gr::dense_args(16, 48, 128, 128, batch);
        const double L = k.resident_launches(a);
        CHECK(L > 0);  // at least one block of it fits
        const int C = gr::min_state_copies(k, a);
        CHECK(C - 1 > L);
        CHECK(C >= 2);
        if (k.name.find("pdl=one-ahead") != std::string::npos) {  // two launches resident, not three; never more than its twin
          const double Lt = twin.resident_launches(a);
          CHECK(L <= Lt);
          CHECK(L < 3.0);
          CHECK(L >= std::min(2.0, Lt));
        }
      }
    }
    for (auto [batch, dv] : {std::pair{1, 128}, std::pair{3, 128}, std::pair{32, 128}, std::pair{2, 48}}) {
      CAPTURE(k.name);
      CAPTURE(batch);
      CAPTURE(dv);
      RecProblem p(batch, dv, 13);
      const PairRun r = run_pair(twin, k, p, 1);
      CHECK(bitwise_diff(r.o_k, r.o_twin) == 0);
      CHECK(bitwise_diff(r.S_k, r.S_twin) == 0);
      CHECK(bitwise_diff(r.S_twin, p.S0) > std::int64_t(p.S0.size() / 2));  // the state was updated
    }
  }
  CHECK(staged == 3);
  CHECK(ahead == 8);  // five pdl=ahead, three pdl=one-ahead
}

TEST_CASE("gdn_recurrence o=direct: S its twin's bit for bit, o within 2e-6 of the twin's largest |o|, over two steps, at batch 1, 3 and 32 and a ragged dv") {
  // o = s^T qn + t (kn . qn) instead of (s + kn t^T)^T qn: the same sum in another order; S's values and order unchanged.
  namespace gr = klab::gdn_recurrence;
  int direct = 0;
  for (const auto& k : gr::recurrence_kernels()) {
    const auto at = k.name.find(",o=direct");
    if (at == std::string::npos) continue;
    ++direct;
    const auto& twin = gr::recurrence_kernel(k.name.substr(0, at) + k.name.substr(at + 9));
    CHECK(k.state_ahead == twin.state_ahead);
    for (auto [batch, dv] : {std::pair{1, 128}, std::pair{3, 128}, std::pair{32, 128}, std::pair{2, 48}}) {
      CAPTURE(k.name);
      CAPTURE(batch);
      CAPTURE(dv);
      RecProblem p(batch, dv, 17);
      const PairRun r = run_pair(twin, k, p, 2);  // the second step on the first's S
      CHECK(bitwise_diff(r.S_k, r.S_twin) == 0);
      const auto &want = r.o_twin, &got = r.o_k;
      double top = 0, worst = 0;
      for (std::size_t i = 0; i < want.size(); ++i) {
        top = std::max(top, double(std::fabs(want[i])));
        worst = std::max(worst, std::fabs(double(got[i]) - double(want[i])));
      }
      CHECK(top > 0);
      CHECK(worst <= 2e-6 * top);
    }
  }
  CHECK(direct == 3);
}

TEST_CASE("gdn_recurrence state=bf16: from a bf16 S0, o is its f32 twin's bit for bit and S the twin's S rounded to nearest-even bf16, at batch 1 and 3") {
  // The same f32 arithmetic on the same (bf16-representable) state: only the store differs.
  namespace gr = klab::gdn_recurrence;
  for (const auto& k : gr::recurrence_kernels()) {
    if (!k.state_bf16) continue;
    const auto at = k.name.find(",state=bf16");
    const auto& twin = gr::recurrence_kernel(k.name.substr(0, at) + k.name.substr(at + 11));
    for (int batch : {1, 3}) {
      CAPTURE(k.name);
      CAPTURE(batch);
      RecProblem p(batch, 128, 11);
      auto& S0 = p.S0;
      const std::size_t nS = S0.size();
      std::vector<std::uint16_t> S0b(nS);
      for (std::size_t i = 0; i < nS; ++i) S0b[i] = ref::float_to_bf16(S0[i]), S0[i] = ref::bf16_to_float(S0b[i]);
      auto dS = DeviceBuffer<float>::from(S0);
      auto dSb = DeviceBuffer<std::uint16_t>::from(S0b);
      DeviceBuffer<float> o32(p.v.size()), o16(p.v.size());
      gr::RecurrenceArgs a = p.args, b = p.args;
      a.S = dS.get(), a.o = o32.get();
      b.S = reinterpret_cast<float*>(dSb.get()), b.o = o16.get();
      REQUIRE(gr::check_args(twin, a) == "");
      REQUIRE(gr::check_args(k, b) == "");
      twin.launch(a, nullptr);
      k.launch(b, nullptr);
      KLAB_CUDA(cudaDeviceSynchronize());
      CHECK(bitwise_diff(o16.download(), o32.download()) == 0);
      const auto S32 = dS.download();
      const auto S16 = dSb.download();
      std::int64_t off = 0, moved = 0;
      for (std::size_t i = 0; i < nS; ++i) {
        off += S16[i] != ref::float_to_bf16(S32[i]);
        moved += S16[i] != S0b[i];
      }
      CHECK(off == 0);
      CHECK(moved > std::int64_t(nS / 2));  // the state was updated
    }
  }
}
