// The GDN step's q4 tier (variants/gdn: GdnDevice::use_q4 / load_q4 over the resident Q4Pool), every
// contract of seed-digest.md section 4 pinned: the q4 tier against the f64 reference step on
// dequant(q4) weights (its wiring), the pool's refusals before allocating, use_q4 all or nothing, no
// silent fallback after erase/clear/re-put, the "both" state refused both ways (before anything is
// allocated), mixed tiers across layers, the mat-vec chosen by name (bitwise families, tolerance
// across families), host-facing vs device-resident and slots.
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "gdn/gdn_device.hpp"
#include "gdn/q4_pool.hpp"
#include "klab/cuda.hpp"
#include "klab/error.hpp"
#include "klab/metrics.hpp"
#include "klab/problem.hpp"
#include "gdn_common.hpp"
#include "gdn_util.hpp"
#include "klab/ref/gdn.hpp"
#include "klab/ref/gdn_q4.hpp"
#include "q4_gemv/q4_gemv.hpp"

using namespace klab;
namespace rg = klab::ref::gdn;
using gdn::GdnDevice;
using rg::Geometry;
using rg::What;

namespace {

// The q4 tier against the f64 step on the same dequantised weights: f32 sums of at most a few
// thousand products per output, ~1e-6 of the largest |value|; a wrong tensor, a swapped key or a
// stale buffer gives the quantisation error (~1e-1) or O(1).
constexpr double kTol = 1e-4;

using test::Named;
// Geometries whose big projections are q4-able (hidden and nv*dv multiples of 32).
const std::vector<Named>& q4_geometries() {
  static const std::vector<Named> v{
      {"nv != nk, dk != dv; shapes pairwise different", Geometry{64, 2, 4, 16, 32, 4, 1e-6}},
      {"nv == nk, ck 1 (no history), nv*dv 160", Geometry{256, 4, 4, 40, 40, 1, 1e-5}},
      {"odd key dim 20, ck 3, hidden == nv*dv 96", Geometry{96, 1, 3, 20, 32, 3, 1e-6}},
      {"the Qwen3.5-27B state (16/48 heads of 128) with hidden 256", Geometry{256, 16, 48, 128, 128, 4, 1e-6}},
  };
  return v;
}
const Geometry& small() { return q4_geometries()[0].g; }
const Geometry& qwen_state() { return q4_geometries()[3].g; }

std::vector<float> inputs(const Geometry& g, int T, std::uint64_t seed) { return test::gdn_inputs(g, T, seed, 700); }
using test::tok;

using experiments::put_all;  // the GDN experiments' (gdn_common.hpp): keys 1, 2, 3 unless given

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
std::int64_t state_diff(const gdn::HostState& a, const gdn::HostState& b) { return bitwise_diff(a.S, b.S) + bitwise_diff(a.hist, b.hist); }

std::size_t free_bytes() {
  std::size_t free = 0, total = 0;
  KLAB_CUDA(cudaDeviceSynchronize());
  KLAB_CUDA(cudaMemGetInfo(&free, &total));
  return free;
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
#define CHECK_REFUSED(expr, needle)                  \
  do {                                               \
    const Refusal r_ = refusal([&] { expr; });       \
    CAPTURE(r_.msg);                                 \
    CHECK(r_.refused);                               \
    CHECK(r_.msg.find(needle) != std::string::npos); \
  } while (0)
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("GDN q4 tier: every intermediate matches the f64 reference step on dequant(q4) weights at every token (4 geometries, 32 tokens)") {
  constexpr int T = 32;
  for (const auto& [why, g] : q4_geometries()) {
    CAPTURE(why);
    CAPTURE(g.str());
    REQUIRE(rg::q4_geometry_error(g) == "");
    const auto w = rg::random_weights(g, 21);
    const auto q = rg::quantize_projections(w);
    const auto wq = rg::with_q4(w, q);
    GdnDevice dev(g, 1);
    put_all(dev.q4_pool(), q);
    REQUIRE(dev.load_q4(0, w, 1, 2, 3) == "");
    CHECK(dev.tier(0) == "q4");
    CHECK(dev.q4_variant() == gdn::kDefaultQ4Variant);
    CHECK(is_poison(dev.get(0, What::OUT)[0]));  // intermediates poisoned until the first step
    auto st = rg::State::zeros(g), st_f32 = rg::State::zeros(g);
    const auto h = inputs(g, T, 3);
    double worst = 0, worst_vs_f32 = 0;
    for (int t = 0; t < T; ++t) {
      CAPTURE(t);
      const auto y = dev.step(0, tok(h, g, t));
      rg::Intermediates im;
      const auto yr = rg::step(wq, st, tok(h, g, t), &im);
      const Accuracy ay = accuracy(y, yr);
      CHECK(ay.finite());
      CHECK(ay.max_rel <= kTol);
      for (What wh : rg::all_whats()) {
        CAPTURE(rg::to_string(wh));
        const auto got = dev.get(0, wh);
        const auto want = im.get(wh, st);
        REQUIRE(got.size() == want.size());
        const Accuracy a = accuracy(got, want);
        CHECK(a.finite());
        CHECK(a.max_rel <= kTol);
        worst = std::max(worst, a.max_rel);
      }
      // Against the f32 weights the same step is off by the quantisation error: not within kTol.
      worst_vs_f32 = std::max(worst_vs_f32, accuracy(y, rg::step(w, st_f32, tok(h, g, t))).max_rel);
    }
    CHECK(worst_vs_f32 > 1e-3);  // the q4 tier is not secretly running the f32 weights
    MESSAGE(g.str() << ": worst max_rel vs reference-q4 " << worst << ", output vs reference-f32 " << worst_vs_f32);
  }
}

TEST_CASE("Q4Pool: put uploads exactly; refusals (taken key, bad shape, bad sizes) come before any allocation") {
  const Geometry& g = qwen_state();
  const auto q = rg::quantize_projections(rg::random_weights(g, 2));
  GdnDevice dev(g, 1);
  auto& pool = dev.q4_pool();
  const auto st = pool.put(1, q.qkv);
  CHECK(pool.has(1));
  CHECK(pool.shape(1) == gdn::Q4Shape{q.qkv.m, q.qkv.k});
  CHECK(pool.index().stamp(1) == st);
  const auto back = pool.download(1);
  CHECK(back.m == q.qkv.m);
  CHECK(back.k == q.qkv.k);
  CHECK(back.codes == q.qkv.codes);
  CHECK(back.scales == q.qkv.scales);
  CHECK(pool.bytes() == std::int64_t(q.qkv.codes.size() + 2 * q.qkv.scales.size()));

  const std::size_t free0 = free_bytes();
  const std::int64_t bytes0 = pool.bytes();
  CHECK_REFUSED(pool.put(1, q.z), "key 1 already holds");
  ref::Q4Matrix bad_k = q.z;
  bad_k.k = 48;
  CHECK_REFUSED(pool.put(2, bad_k), "multiple of 32");
  ref::Q4Matrix short_codes = q.z;
  short_codes.codes.resize(short_codes.codes.size() / 2);
  CHECK_REFUSED(pool.put(2, short_codes), "key 2");
  CHECK(free_bytes() == free0);
  CHECK(pool.bytes() == bytes0);
  CHECK(!pool.has(2));
  CHECK(pool.download(1).codes == q.qkv.codes);  // the refused put over key 1 changed nothing
  CHECK_REFUSED(pool.download(2), "not in the pool");

  CHECK(pool.erase(1));
  CHECK(!pool.erase(1));
  CHECK(!pool.has(1));
  CHECK(pool.bytes() == 0);
  CHECK(pool.index().generation() == 0);
  pool.put(1, q.qkv);
  pool.clear();
  CHECK(pool.index().size() == 0);
  CHECK(pool.index().generation() == 1);
}

TEST_CASE("use_q4 is all or nothing: missing, mis-shaped, swapped or repeated keys change nothing and say why") {
  const Geometry& g = small();  // qkv 192x64, z 128x64, out 64x128: pairwise different
  const auto w = rg::random_weights(g, 4);
  const auto q = rg::quantize_projections(w);
  const auto other = rg::quantize_projections(rg::random_weights(g, 5));
  GdnDevice dev(g, 2);
  put_all(dev.q4_pool(), q);
  dev.q4_pool().put(4, other.qkv);                                        // a second, valid in_proj_qkv
  dev.q4_pool().put(9, ref::q4_quantize(std::vector<float>(32 * 32, 0.25f), 32, 32));  // no projection's shape
  const auto h = inputs(g, 3, 8);

  // Not loaded / out of range: reasons, nothing loaded.
  CHECK(contains(dev.use_q4(0, 1, 2, 3), "has no weights"));
  CHECK(!dev.loaded(0));
  CHECK(contains(dev.use_q4(2, 1, 2, 3), "out of range"));
  CHECK(contains(dev.use_q4(-1, 1, 2, 3), "out of range"));

  dev.load_small(0, w);
  CHECK(dev.loaded(0));
  CHECK(dev.tier(0) == "");
  CHECK_REFUSED(dev.step(0, tok(h, g, 0)), "has no big projections");

  const struct {
    int kq, kz, ko;
    const char* needle;
  } bad[] = {
      {7, 2, 3, "in_proj_qkv: key 7 is not in the pool"},
      {1, 9, 3, "in_proj_z: key 9 holds 32x32"},
      {2, 1, 3, "in_proj_qkv: key 2 holds 128x64"},
      {1, 3, 2, "out_proj: key 2 holds 128x64"},
      {3, 2, 1, "in_proj_qkv: key 3 holds 64x128"},
      {1, 1, 3, "not pairwise distinct"},
  };
  for (const auto& b : bad) {
    CAPTURE(b.needle);
    const std::string why = dev.use_q4(0, b.kq, b.kz, b.ko);
    CAPTURE(why);
    CHECK(contains(why, b.needle));
    CHECK(dev.tier(0) == "");
    CHECK(!dev.q4_keys(0).has_value());
    CHECK_REFUSED(dev.step(0, tok(h, g, 0)), "has no big projections");
  }

  REQUIRE(dev.use_q4(0, 1, 2, 3) == "");
  CHECK(dev.tier(0) == "q4");
  REQUIRE(dev.q4_keys(0).has_value());
  CHECK(dev.q4_keys(0)->str() == "qkv=1 z=2 out=3");
  CHECK(contains(dev.describe(0), gdn::kDefaultQ4Variant));
  const auto y_a = dev.step(0, tok(h, g, 0));
  const auto im_a = all_intermediates(dev, 0);

  // A failed re-bind of a q4 layer leaves its old keys in force, bit for bit.
  for (const auto& b : bad) {
    CHECK(!dev.use_q4(0, b.kq, b.kz, b.ko).empty());
    CHECK(dev.q4_keys(0)->str() == "qkv=1 z=2 out=3");
  }
  dev.reset();
  CHECK(bitwise_diff(dev.step(0, tok(h, g, 0)), y_a) == 0);
  CHECK(diff(all_intermediates(dev, 0), im_a) == 0);

  // A successful re-bind to another in_proj_qkv takes effect.
  REQUIRE(dev.use_q4(0, 4, 2, 3) == "");
  dev.reset();
  CHECK(bitwise_diff(dev.step(0, tok(h, g, 0)), y_a) > 0);
  CHECK(bitwise_diff(dev.get(0, What::Z), im_a[std::size_t(What::Z)]) == 0);  // z's key did not change
}

TEST_CASE("no silent fallback: after erase, clear or re-put of a bound key the step, run and enqueue_run fail before enqueuing anything") {
  const Geometry& g = small();
  const auto w = rg::random_weights(g, 6);
  const auto q = rg::quantize_projections(w);
  constexpr int T = 4;
  const auto h = inputs(g, T, 9);
  GdnDevice dev(g, 1);
  auto& pool = dev.q4_pool();
  put_all(pool, q);
  REQUIRE(dev.load_q4(0, w, 1, 2, 3) == "");
  const auto y_first = dev.run(0, T, h);
  const auto st0 = dev.save_state(0);
  DeviceBuffer<float> d_h = DeviceBuffer<float>::from(h), d_y(h.size());
  KLAB_CUDA(cudaDeviceSynchronize());

  auto all_refused = [&](const std::string& needle) {
    CHECK_REFUSED(dev.step(0, tok(h, g, 0)), needle);
    CHECK_REFUSED(dev.run(0, T, h), needle);
    CHECK_REFUSED(dev.enqueue_run(0, T, d_h.get(), d_y.get(), dev.stream()), needle);
    KLAB_CUDA(cudaDeviceSynchronize());
    CHECK(state_diff(dev.save_state(0), st0) == 0);  // nothing ran
    CHECK(dev.tier(0) == "q4");                        // still declared q4: never silently f32
  };

  // Erase one key.
  REQUIRE(pool.erase(2));
  all_refused("in_proj_z");
  all_refused("no longer in the pool");
  // Put it back (same key, same shape, same bytes): another tensor to the binding until use_q4 again.
  pool.put(2, q.z);
  all_refused("holds another tensor");
  REQUIRE(dev.use_q4(0, 1, 2, 3) == "");
  dev.reset();
  CHECK(bitwise_diff(dev.run(0, T, h), y_first) == 0);

  // Clear the pool.
  const auto st1 = dev.save_state(0);
  pool.clear();
  CHECK_REFUSED(dev.step(0, tok(h, g, 0)), "no longer in the pool");
  CHECK(state_diff(dev.save_state(0), st1) == 0);
  // Rebuild every key with the very same tensors: still refused until bound again.
  put_all(pool, q);
  CHECK_REFUSED(dev.step(0, tok(h, g, 0)), "holds another tensor");
  REQUIRE(dev.use_q4(0, 1, 2, 3) == "");
  dev.reset();
  CHECK(bitwise_diff(dev.run(0, T, h), y_first) == 0);
}

TEST_CASE("clear and rebuild invalidate every layer's keys; re-binding one layer re-enables only that layer") {
  const Geometry& g = small();
  const auto w = rg::random_weights(g, 10);
  const auto q = rg::quantize_projections(w);
  const auto h = inputs(g, 2, 1);
  GdnDevice dev(g, 3);
  put_all(dev.q4_pool(), q);
  for (int l = 0; l < 3; ++l) REQUIRE(dev.load_q4(l, w, 1, 2, 3) == "");
  const auto y = dev.step(2, tok(h, g, 0));
  dev.q4_pool().clear();
  put_all(dev.q4_pool(), q);
  for (int l = 0; l < 3; ++l) CHECK_REFUSED(dev.step(l, tok(h, g, 0)), "layer " + std::to_string(l));
  REQUIRE(dev.use_q4(1, 1, 2, 3) == "");
  dev.reset();
  CHECK(bitwise_diff(dev.step(1, tok(h, g, 0)), y) == 0);  // layers 1 and 2: same weights, same bits
  CHECK_REFUSED(dev.step(0, tok(h, g, 0)), "holds another tensor");
  CHECK_REFUSED(dev.step(2, tok(h, g, 0)), "holds another tensor");
}

TEST_CASE("the both state is refused both ways, before anything is allocated") {
  const Geometry& g = qwen_state();  // f32 big projections of ~17 MB: an allocation cudaMemGetInfo sees
  const auto w = rg::random_weights(g, 12);
  const auto q = rg::quantize_projections(w);
  const auto h = inputs(g, 2, 4);
  GdnDevice dev(g, 2);
  put_all(dev.q4_pool(), q);
  REQUIRE(dev.load_q4(0, w, 1, 2, 3) == "");
  const auto y0 = dev.step(0, tok(h, g, 0));

  // q4 -> f32 big projections: load_f32 throws, nothing allocated, the layer still q4 and unchanged.
  std::size_t free0 = free_bytes();
  CHECK_REFUSED(dev.load_f32(0, w), "both tiers");
  CHECK(free_bytes() == free0);
  CHECK(dev.tier(0) == "q4");
  CHECK(contains(dev.describe(0), "q4/"));
  dev.reset();
  CHECK(bitwise_diff(dev.step(0, tok(h, g, 0)), y0) == 0);

  // f32 -> q4: use_q4 and load_q4 return the reason and change nothing.
  dev.load_f32(1, w);
  const auto y1 = dev.step(1, tok(h, g, 0));
  free0 = free_bytes();
  CHECK(contains(dev.use_q4(1, 1, 2, 3), "both tiers"));
  CHECK(contains(dev.load_q4(1, w, 1, 2, 3), "both tiers"));
  CHECK(free_bytes() == free0);
  CHECK(dev.tier(1) == "f32");
  CHECK(!dev.q4_keys(1).has_value());
  dev.reset();
  CHECK(bitwise_diff(dev.step(1, tok(h, g, 0)), y1) == 0);

  // unload_projections frees the f32 weights; then the switch is allowed, and layer 1 (q4, the same
  // tensors and small weights) gives layer 0's bits.
  dev.unload_projections(1);
  CHECK(dev.tier(1) == "");
  CHECK(free_bytes() > free0);
  CHECK_REFUSED(dev.step(1, tok(h, g, 0)), "has no big projections");
  REQUIRE(dev.use_q4(1, 1, 2, 3) == "");
  dev.reset();
  CHECK(bitwise_diff(dev.step(1, tok(h, g, 0)), y0) == 0);
  // And back: unload, load_f32 allocates (the memory check above could see an allocation).
  dev.unload_projections(0);
  const std::size_t free1 = free_bytes();
  dev.load_f32(0, w);
  CHECK(dev.tier(0) == "f32");
  CHECK(free_bytes() < free1);
}

TEST_CASE("layers may mix tiers: f32, q4, f32 in one device, each against its own reference; beta and g equal across tiers") {
  const Geometry& g = small();
  const auto w0 = rg::random_weights(g, 30), w1 = rg::random_weights(g, 31), w2 = rg::random_weights(g, 32);
  const auto q1 = rg::quantize_projections(w1);
  const auto wq1 = rg::with_q4(w1, q1);
  GdnDevice dev(g, 3);
  dev.load_f32(0, w0);
  put_all(dev.q4_pool(), q1);
  REQUIRE(dev.load_q4(1, w1, 1, 2, 3) == "");
  dev.load_f32(2, w2);
  CHECK(dev.tier(0) == "f32");
  CHECK(dev.tier(1) == "q4");
  CHECK(dev.tier(2) == "f32");
  auto s0 = rg::State::zeros(g), s1 = rg::State::zeros(g), s2 = rg::State::zeros(g);
  const auto h = inputs(g, 16, 2);
  for (int t = 0; t < 16; ++t) {
    CAPTURE(t);
    // A layer stack: each layer's output is the next one's input; each reference is fed the device's
    // own input to that layer, so errors do not compound across the comparison.
    const auto y0 = dev.step(0, tok(h, g, t));
    const auto y1 = dev.step(1, y0);
    const auto y2 = dev.step(2, y1);
    CHECK(accuracy(y0, rg::step(w0, s0, tok(h, g, t))).max_rel <= kTol);
    CHECK(accuracy(y1, rg::step(wq1, s1, y0)).max_rel <= kTol);
    CHECK(accuracy(y2, rg::step(w2, s2, y1)).max_rel <= kTol);
  }

  // The same weights in an f32 and a q4 layer: A, B, BETA and G bitwise equal at every token (their
  // weights stay f32), while XC and OUT differ.
  GdnDevice d2(g, 2);
  d2.load_f32(0, w1);
  put_all(d2.q4_pool(), q1);
  REQUIRE(d2.load_q4(1, w1, 1, 2, 3) == "");
  for (int t = 0; t < 8; ++t) {
    CAPTURE(t);
    const auto ya = d2.step(0, tok(h, g, t));
    const auto yb = d2.step(1, tok(h, g, t));
    for (What wh : {What::A, What::B, What::BETA, What::G}) {
      CAPTURE(rg::to_string(wh));
      CHECK(bitwise_diff(d2.get(0, wh), d2.get(1, wh)) == 0);
    }
    CHECK(bitwise_diff(d2.get(0, What::XC), d2.get(1, What::XC)) > 0);
    CHECK(bitwise_diff(ya, yb) > 0);
  }
}

TEST_CASE("the q4 mat-vec by name: every q4_gemv variant runs in the step; one family gives one set of bits; families agree within tolerance") {
  for (const Geometry& g : {small(), q4_geometries()[1].g}) {
    CAPTURE(g.str());
    constexpr int T = 12;
    const auto w = rg::random_weights(g, 40);
    const auto q = rg::quantize_projections(w);
    const auto h = inputs(g, T, 6);
    GdnDevice dev(g, 1);
    put_all(dev.q4_pool(), q);
    REQUIRE(dev.load_q4(0, w, 1, 2, 3) == "");
    dev.reset();
    const auto y_default = dev.run(0, T, h);
    // Families: the axes q4_gemv documents as changing no bit (scale, f16, rows) left out.
    auto family = [](const q4_gemv::Q4Kernel& k) {
      std::string f;
      for (const auto& [a, v] : k.axes)
        if (a != "scale" && a != "f16" && a != "rows") f += a + "=" + v + ";";
      return f;
    };
    std::map<std::string, std::pair<std::vector<float>, std::vector<std::vector<float>>>> first;
    for (const auto& kern : q4_gemv::q4_kernels()) {
      CAPTURE(kern.name);
      dev.set_q4_variant(kern.name);
      CHECK(dev.q4_variant() == kern.name);
      CHECK(contains(dev.describe(0), kern.name));
      dev.reset();
      const auto y = dev.run(0, T, h);
      const auto im = all_intermediates(dev, 0);
      const Accuracy a = accuracy(y, y_default);
      CHECK(a.finite());
      // Kernels that round x on purpose (map=packed f16x2 and q8) are held to twice their declared
      // mat-vec tolerance through the step (the step's norms keep the error's relative size; the
      // factor 2 is a margin, not a measurement).
      CHECK(a.max_rel <= (kern.tolerance > 0 ? 2 * kern.tolerance : kTol));
      auto [it, fresh] = first.emplace(family(kern), std::make_pair(y, im));
      if (!fresh) {
        CHECK(bitwise_diff(y, it->second.first) == 0);
        CHECK(diff(im, it->second.second) == 0);
      }
    }
    CHECK(first.size() >= 2);  // at least two arithmetic families were compared
    // Unknown names and peers without a raw launcher are refused; the variant stays as it was.
    dev.set_q4_variant(gdn::kDefaultQ4Variant);
    CHECK_REFUSED(dev.set_q4_variant("q4_gemv/no-such-variant"), "no q4_gemv kernel named");
    CHECK_REFUSED(dev.set_q4_variant("q4_gemv/impl=cublas-sgemv-f32"), "no q4_gemv kernel named");
    CHECK(dev.q4_variant() == gdn::kDefaultQ4Variant);
    dev.reset();
    CHECK(bitwise_diff(dev.run(0, T, h), y_default) == 0);
  }
}

TEST_CASE("q4 tier: host-facing steps, one device-resident run and enqueue_run give the same bits; slots are independent") {
  const Geometry& g = qwen_state();
  constexpr int T = 6;
  const auto w = rg::random_weights(g, 50);
  const auto q = rg::quantize_projections(w);
  const auto h = inputs(g, T, 11);
  const std::size_t H = std::size_t(g.hidden);
  GdnDevice dev(g, 2, 2);
  put_all(dev.q4_pool(), q);
  REQUIRE(dev.load_q4(1, w, 1, 2, 3) == "");
  std::vector<float> y_step;
  for (int t = 0; t < T; ++t) {
    const auto y = dev.step(1, tok(h, g, t));
    y_step.insert(y_step.end(), y.begin(), y.end());
  }
  const auto st_step = dev.save_state(1);
  dev.reset();
  const auto y_run = dev.run(1, T, h);
  CHECK(bitwise_diff(y_step, y_run) == 0);
  CHECK(state_diff(dev.save_state(1), st_step) == 0);
  dev.reset();
  DeviceBuffer<float> d_h = DeviceBuffer<float>::from(h), d_y(h.size());
  KLAB_CUDA(cudaDeviceSynchronize());
  dev.enqueue_run(1, T, d_h.get(), d_y.get(), dev.stream());
  KLAB_CUDA(cudaStreamSynchronize(dev.stream()));
  CHECK(bitwise_diff(d_y.download(), y_run) == 0);
  // Slot 1 from zero gives slot 0's bits and leaves slot 0's state alone.
  const auto st0 = dev.save_state(1, 0);
  std::vector<float> y_slot1(std::size_t(T) * H);
  dev.run(1, T, h, y_slot1, 1);
  CHECK(bitwise_diff(y_slot1, y_run) == 0);
  CHECK(state_diff(dev.save_state(1, 0), st0) == 0);
}

TEST_CASE("load_q4 is all or nothing: refused keys leave a fresh layer unloaded and a loaded one with its old small weights") {
  const Geometry& g = small();
  const auto w1 = rg::random_weights(g, 60), w2 = rg::random_weights(g, 61);
  const auto q = rg::quantize_projections(w1);
  const auto h = inputs(g, 3, 12);
  GdnDevice dev(g, 1);
  put_all(dev.q4_pool(), q);
  CHECK(contains(dev.load_q4(0, w1, 1, 2, 8), "out_proj: key 8 is not in the pool"));
  CHECK(!dev.loaded(0));
  CHECK_REFUSED(dev.step(0, tok(h, g, 0)), "never loaded");
  rg::LayerWeights bad_small = w1;
  bad_small.norm_w.pop_back();
  CHECK(contains(dev.load_q4(0, bad_small, 1, 2, 3), "norm_w"));
  CHECK(!dev.loaded(0));
  // The big three of w may be absent: load_q4 reads only the small weights.
  rg::LayerWeights only_small = w1;
  only_small.w_qkv.clear();
  only_small.w_z.clear();
  only_small.w_out.clear();
  REQUIRE(dev.load_q4(0, only_small, 1, 2, 3) == "");
  const auto y1 = dev.step(0, tok(h, g, 0));
  // A refused load_q4 with other small weights keeps w1's.
  CHECK(!dev.load_q4(0, w2, 1, 2, 99).empty());
  dev.reset();
  CHECK(bitwise_diff(dev.step(0, tok(h, g, 0)), y1) == 0);
  // An accepted one replaces them (same q4 tensors, other small weights: other outputs).
  REQUIRE(dev.load_q4(0, w2, 1, 2, 3) == "");
  dev.reset();
  CHECK(bitwise_diff(dev.step(0, tok(h, g, 0)), y1) > 0);
  // load_small keeps the q4 binding.
  dev.load_small(0, w1);
  CHECK(dev.tier(0) == "q4");
  dev.reset();
  CHECK(bitwise_diff(dev.step(0, tok(h, g, 0)), y1) == 0);
}
