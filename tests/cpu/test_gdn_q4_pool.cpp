// The host side of the GDN q4 tier, which needs no GPU: the pool's bookkeeping (keys, shapes, stamps,
// clear/erase/re-put invalidation: variants/gdn/q4_pool.hpp), the all-or-nothing binding of a layer's
// three keys (the shape gate), the q4 mat-vec chosen by name, and the CPU reference of the q4 tier
// (klab/ref/gdn_q4.hpp).
#include <doctest/doctest.h>

#include <climits>
#include <set>
#include <string>
#include <vector>

#include "gdn/q4_pool.hpp"
#include "klab/catalog.hpp"
#include "klab/error.hpp"
#include "klab/ref/gdn.hpp"
#include "klab/ref/gdn_q4.hpp"
#include "klab/ref/q4.hpp"
#include "klab/registry.hpp"
#include "q4_gemv/q4_gemv.hpp"

using namespace klab;
using namespace klab::gdn;
namespace rg = klab::ref::gdn;
using rg::Geometry;

namespace {
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// An index holding the three projections of `g` under keys 1, 2, 3.
Q4Index index_for(const Geometry& g) {
  Q4Index idx;
  idx.add(1, expected_shape(g, BigProj::qkv));
  idx.add(2, expected_shape(g, BigProj::z));
  idx.add(3, expected_shape(g, BigProj::out));
  return idx;
}
}  // namespace

TEST_CASE("Q4Index: keys, shapes and stamps, a stamp is never reused, across indexes and re-adds") {
  Q4Index a, b;
  CHECK(a.size() == 0);
  CHECK(!a.has(5));
  CHECK(!a.shape(5).has_value());
  const auto s1 = a.add(5, {64, 32});
  const auto s2 = a.add(-7, {1, 4096});  // any int is a key
  const auto s3 = b.add(5, {64, 32});    // the same key and shape in another index
  CHECK(a.has(5));
  CHECK(a.has(-7));
  CHECK(a.shape(5) == Q4Shape{64, 32});
  CHECK(a.stamp(5) == s1);
  CHECK(a.keys() == std::vector<int>{-7, 5});
  CHECK(std::set<std::uint64_t>{s1, s2, s3}.size() == 3);
  CHECK(a.erase(5));
  CHECK(!a.erase(5));
  CHECK(!a.has(5));
  const auto s4 = a.add(5, {64, 32});  // re-added: same key, same shape, a new stamp
  CHECK(s4 != s1);
  CHECK(a.generation() == 0);
  a.clear();
  CHECK(a.size() == 0);
  CHECK(a.generation() == 1);
  const auto s5 = a.add(5, {64, 32});
  CHECK(std::set<std::uint64_t>{s1, s2, s3, s4, s5}.size() == 5);
}

TEST_CASE("Q4Index::can_add refuses a taken key and shapes a q4 kernel cannot take, before anything changes") {
  Q4Index idx;
  idx.add(1, {64, 32});
  const auto st = idx.stamp(1);
  CHECK(contains(idx.can_add(1, {64, 32}), "already holds a 64x32 tensor"));
  CHECK_THROWS_WITH_AS(idx.add(1, {128, 64}), doctest::Contains("never replaced in place"), Error);
  CHECK(idx.shape(1) == Q4Shape{64, 32});  // untouched
  CHECK(idx.stamp(1) == st);
  CHECK(contains(idx.can_add(2, {64, 48}), "multiple of 32"));
  CHECK(!idx.can_add(2, {0, 32}).empty());
  CHECK(!idx.can_add(2, {5, -32}).empty());
  CHECK(contains(idx.can_add(2, {std::int64_t(INT_MAX) + 1, 32}), "int indexing"));
  CHECK(idx.can_add(2, {1, 32}) == "");
  CHECK(idx.size() == 1);
}

TEST_CASE("Q4Index::stale: erase, clear and re-put each invalidate a binding, a live one stays valid") {
  Q4Index idx;
  const Q4Binding b{4, idx.add(4, {96, 64}), {96, 64}};
  CHECK(idx.stale(b) == "");
  idx.erase(4);
  CHECK(contains(idx.stale(b), "no longer in the pool"));
  // A rebuild: the same key and shape put again is another tensor to every earlier binding.
  idx.add(4, {96, 64});
  CHECK(contains(idx.stale(b), "holds another tensor"));
  const Q4Binding b2{4, *idx.stamp(4), {96, 64}};
  CHECK(idx.stale(b2) == "");
  idx.clear();
  CHECK(contains(idx.stale(b2), "no longer in the pool"));
  idx.add(4, {96, 64});
  CHECK(!idx.stale(b2).empty());
  // A binding whose recorded shape is not the tensor's (constructed by hand: bind_q4 never makes one).
  const Q4Binding wrong_shape{4, *idx.stamp(4), {64, 96}};
  CHECK(contains(idx.stale(wrong_shape), "bound as 64x96"));
}

TEST_CASE("expected_shape: the three big projections of Qwen3.5-27B have pairwise different shapes") {
  const Geometry g = rg::qwen35_27b();
  CHECK(expected_shape(g, BigProj::qkv) == Q4Shape{10240, 5120});
  CHECK(expected_shape(g, BigProj::z) == Q4Shape{6144, 5120});
  CHECK(expected_shape(g, BigProj::out) == Q4Shape{5120, 6144});
  CHECK(std::string(to_string(BigProj::qkv)) == "in_proj_qkv");
  CHECK(std::string(to_string(BigProj::z)) == "in_proj_z");
  CHECK(std::string(to_string(BigProj::out)) == "out_proj");
  CHECK(Q4Keys{1, 2, 3}.str() == "qkv=1 z=2 out=3");
}

TEST_CASE("bind_q4: all three bindings, or every reason and nothing written") {
  const Geometry g = rg::qwen35_27b();
  Q4Index idx = index_for(g);
  idx.add(9, {32, 32});  // a tensor of no projection's shape
  Q4Bindings out{};
  REQUIRE(bind_q4(idx, g, {1, 2, 3}, &out) == "");
  CHECK(out[0].key == 1);
  CHECK(out[0].stamp == *idx.stamp(1));
  CHECK(out[0].shape == Q4Shape{10240, 5120});
  CHECK(out[1].key == 2);
  CHECK(out[1].stamp == *idx.stamp(2));
  CHECK(out[2].key == 3);
  CHECK(out[2].shape == Q4Shape{5120, 6144});
  for (const auto& b : out) CHECK(idx.stale(b) == "");
  CHECK(bind_q4(idx, g, {1, 2, 3}, nullptr) == "");  // a check without output

  const Q4Binding sentinel{-99, 12345, {7, 7}};
  struct Case {
    Q4Keys keys;
    std::vector<std::string> needles;
  };
  const Case cases[] = {
      {{7, 2, 3}, {"in_proj_qkv: key 7 is not in the pool"}},
      {{1, 9, 3}, {"in_proj_z: key 9 holds 32x32", "needs 6144x5120"}},
      // Swapped keys: the shape gate at a geometry whose three shapes differ pairwise.
      {{2, 1, 3}, {"in_proj_qkv: key 2 holds 6144x5120", "needs 10240x5120", "in_proj_z: key 1 holds 10240x5120"}},
      {{1, 3, 2}, {"in_proj_z: key 3 holds 5120x6144", "out_proj: key 2 holds 6144x5120"}},
      {{3, 1, 2}, {"in_proj_qkv: key 3", "in_proj_z: key 1", "out_proj: key 2"}},
      {{1, 1, 3}, {"not pairwise distinct"}},
      {{7, 8, 9}, {"key 7 is not in the pool", "key 8 is not in the pool", "out_proj: key 9 holds 32x32"}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.keys.str());
    Q4Bindings o{sentinel, sentinel, sentinel};
    const std::string why = bind_q4(idx, g, c.keys, &o);
    CAPTURE(why);
    CHECK(!why.empty());
    for (const auto& n : c.needles) CHECK(contains(why, n));
    for (const auto& b : o) {  // untouched
      CHECK(b.key == sentinel.key);
      CHECK(b.stamp == sentinel.stamp);
    }
  }
}

TEST_CASE("bind_q4: where hidden == nv*dv, in_proj_z and out_proj share a shape and the shape gate cannot tell them apart") {
  // The qwen-head fixture's geometry: z (256x256) and out (256x256). Documented limit of the shape
  // gate: the magnitude gate (gdn-q4-gates) has to catch this swap.
  const Geometry g{256, 1, 2, 128, 128, 4, 1e-6};
  REQUIRE(expected_shape(g, BigProj::z) == expected_shape(g, BigProj::out));
  const Q4Index idx = index_for(g);
  CHECK(bind_q4(idx, g, {1, 3, 2}, nullptr) == "");
  CHECK(!bind_q4(idx, g, {2, 1, 3}, nullptr).empty());  // qkv still differs
}

TEST_CASE("the q4 tier's mat-vec by name: the default exists, is registered, and unknown names are refused") {
  const auto& k = q4_kernel_by_name(kDefaultQ4Variant);
  CHECK(k.name == kDefaultQ4Variant);
  CHECK(registry().has_variant(kDefaultQ4Variant));
  CHECK(registry().variant(kDefaultQ4Variant).op == "q4_gemv");
  // Every q4_gemv kernel is reachable by its variant name.
  for (const auto& kern : q4_gemv::q4_kernels()) CHECK(&q4_kernel_by_name(kern.name) == &kern);
  CHECK_THROWS_WITH_AS(q4_kernel_by_name("q4_gemv/no-such"), doctest::Contains("no q4_gemv kernel named"), Error);
  // A registered q4_gemv peer has no raw launcher: refused, not silently replaced.
  CHECK_THROWS_AS(q4_kernel_by_name("q4_gemv/impl=cublas-sgemv-f32"), Error);
}

TEST_CASE("ref q4 tier: quantize_projections and with_q4 replace exactly the big three") {
  const Geometry g{64, 2, 4, 16, 32, 4, 1e-6};  // hidden 64, nv*dv 128, conv_dim 192
  REQUIRE(rg::q4_geometry_error(g) == "");
  const auto w = rg::random_weights(g, 3);
  const auto q = rg::quantize_projections(w);
  CHECK(q.qkv.m == g.conv_dim());
  CHECK(q.qkv.k == g.hidden);
  CHECK(q.z.m == g.value_dim());
  CHECK(q.out.m == g.hidden);
  CHECK(q.out.k == g.value_dim());
  const auto d = rg::with_q4(w, q);
  CHECK(d.w_qkv == ref::q4_dequantize(q.qkv));
  CHECK(d.w_z == ref::q4_dequantize(q.z));
  CHECK(d.w_out == ref::q4_dequantize(q.out));
  CHECK(d.w_qkv != w.w_qkv);  // q4 changed them
  // Everything else is the f32 tier's, bit for bit.
  CHECK(d.w_b == w.w_b);
  CHECK(d.w_a == w.w_a);
  CHECK(d.a_log == w.a_log);
  CHECK(d.dt_bias == w.dt_bias);
  CHECK(d.conv_w == w.conv_w);
  CHECK(d.norm_w == w.norm_w);
  CHECK(d.g == w.g);
  // The reference step on them: beta and g depend only on the f32 weights, so they are the same numbers.
  auto s1 = rg::State::zeros(g), s2 = rg::State::zeros(g);
  const std::vector<float> h(std::size_t(g.hidden), 0.5f);
  rg::Intermediates i1, i2;
  rg::step(w, s1, h, &i1);
  rg::step(d, s2, h, &i2);
  CHECK(i1.beta == i2.beta);
  CHECK(i1.g == i2.g);
  CHECK(i1.xc != i2.xc);
  // Shapes that do not match are refused.
  auto bad = q;
  std::swap(bad.z, bad.out);  // 128x64 and 64x128
  CHECK_THROWS_AS(rg::with_q4(w, bad), std::invalid_argument);
}

TEST_CASE("ref q4 tier: geometries whose big projections cannot be q4 are refused with the reason") {
  CHECK(rg::q4_geometry_error(rg::qwen35_27b()) == "");
  CHECK(contains(rg::q4_geometry_error(Geometry{100, 1, 3, 48, 20, 3, 1e-6}), "in_proj_qkv"));  // hidden 100
  CHECK(contains(rg::q4_geometry_error(Geometry{96, 2, 6, 33, 70, 5, 1e-6}), "out_proj"));      // nv*dv 420
  CHECK_THROWS_AS(rg::quantize_projections(rg::random_weights(Geometry{100, 1, 3, 48, 20, 3, 1e-6}, 1)), std::invalid_argument);
}
