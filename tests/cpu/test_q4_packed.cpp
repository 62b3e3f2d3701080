// q4_gemv/map=packed on the CPU: the repack is a bijection (awkward shapes, every tile size), the
// code conversions each form uses are exact for all 16 codes at every position of a word, the exact
// f16 fma of the f16x2 model, the q8 rounding, and the bit-models: the f32 form equal to
// block-per-thread,dot=offset bit for bit, the f16x2 and q8 forms within their declared tolerances.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "../q4_cases.hpp"
#include "klab/catalog.hpp"
#include "klab/error.hpp"
#include "klab/metrics.hpp"
#include "klab/ref/q4.hpp"
#include "klab/registry.hpp"
#include "q4_gemv/packed.hpp"
#include "q4_gemv/packed_kernels.hpp"
#include "q4_gemv/packed_ring.hpp"
#include "q4_gemv/q4_gemv.hpp"
#include "q4_gemv/span.hpp"

using namespace klab;
namespace pk = klab::q4_gemv::packed;

namespace {
ref::Q4Matrix random_matrix(std::int64_t m, std::int64_t k, std::uint64_t seed) { return test::random_q4_matrix(m, k, seed); }
std::uint32_t bits(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return u;
}
const std::vector<std::string>& packed_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& k : pk::packed_kernels()) v.push_back(k.name);
    return v;
  }();
  return names;
}
}  // namespace

TEST_CASE("map=packed repack: a bijection on awkward shapes for every tile size, padding zero, offsets in bounds and distinct") {
  for (int R : {1, 2, 4, 8, 16})
    for (std::int64_t m : {1, 3, 5, 8, 33})
      for (std::int64_t k : {32, 96, 1024, 1056, 2080}) {
        CAPTURE(R);
        CAPTURE(m);
        CAPTURE(k);
        const auto w = random_matrix(m, k, std::uint64_t(R * 1000 + m * 10 + k));
        const auto p = pk::pack(w, R);
        const pk::Geometry geo{m, k, R};
        REQUIRE(std::int64_t(p.size()) == geo.bytes());
        // Every (row, block) maps to its own 16 code bytes and 2 scale bytes; nothing else is written.
        std::vector<int> owner(p.size(), 0);
        for (std::int64_t i = 0; i < m; ++i)
          for (std::int64_t b = 0; b < k / 32; ++b) {
            const auto c = geo.code_offset(i, b), s = geo.scale_offset(i, b);
            REQUIRE(c >= 0);
            REQUIRE(c + 16 <= geo.bytes());
            REQUIRE(s + 2 <= geo.bytes());
            for (int t = 0; t < 16; ++t) ++owner[std::size_t(c + t)];
            ++owner[std::size_t(s)];
            ++owner[std::size_t(s + 1)];
          }
        int twice = 0, padding_nonzero = 0;
        for (std::size_t i = 0; i < p.size(); ++i) {
          twice += owner[i] > 1;
          padding_nonzero += owner[i] == 0 && p[i] != 0;
        }
        CHECK(twice == 0);
        CHECK(padding_nonzero == 0);
        const auto back = pk::unpack(p, m, k, R);
        CHECK(back.codes == w.codes);
        CHECK(back.scales == w.scales);
        CHECK(pk::pack(back, R) == p);
      }
  // A tile is R rows x 32 blocks; a group of R rows is contiguous; a lane's R scales are adjacent.
  const pk::Geometry g{17408, 5120, 4};
  CHECK(g.bytes() == 17408LL * 5120 / 2 + 17408LL * 160 * 2);  // no padding at the seed shapes
  CHECK(g.code_offset(1, 0) - g.code_offset(0, 0) == 512);
  CHECK(g.code_offset(0, 1) - g.code_offset(0, 0) == 16);
  CHECK(g.scale_offset(1, 0) - g.scale_offset(0, 0) == 2);
  CHECK(g.code_offset(4, 0) == 4 * (5120 / 2 + 160 * 2));
  CHECK_THROWS_AS(pk::unpack(std::vector<std::uint8_t>(5), 4, 64, 4), Error);
  CHECK_THROWS_AS(pk::pack(random_matrix(4, 64, 1), 3), Error);
}

TEST_CASE("map=packed code conversions, exhaustive: all 16 codes at all 8 positions of a word") {
  Rng rng(5, 5);
  int checked = 0;
  for (int pos = 0; pos < 8; ++pos)
    for (int u4 = 0; u4 < 16; ++u4)
      for (int trial = 0; trial < 8; ++trial) {
        // The other nibbles random; nibble `pos` holds the raw two's complement code u4.
        std::uint32_t w = std::uint32_t(rng.uniform() * 4294967296.0);
        w = (w & ~(0xFu << (4 * pos))) | std::uint32_t(u4) << (4 * pos);
        const int n = u4 >= 8 ? u4 - 16 : u4;  // the code's value
        const int u = n + 8;                    // the biased code every form works with
        CAPTURE(pos);
        CAPTURE(u4);
        CAPTURE(w);
        // f32: v = 1 + u/16 in one shift + LOP3; 16 v - 24 = n exactly; the same bits as nibbles.hpp.
        const float v = pk::offset_value(w, pos);
        CHECK(bits(v) == bits(q4_gemv::nibble_offset_value(w, pos)));
        CHECK(16.0 * double(v) - 24.0 == double(n));
        CHECK(q4_gemv::word_nibble(w, pos) == n);
        // q8: the even positions land in the low nibble of byte pos/2 as u, the odd ones in its high
        // nibble as 16 u.
        const std::uint32_t lo = pk::xor_and<0x88888888u, 0x0F0F0F0Fu>(w), hi = pk::xor_and<0x88888888u, 0xF0F0F0F0u>(w);
        const std::uint32_t byte = ((pos % 2 == 0 ? lo : hi) >> (8 * (pos / 2))) & 0xFFu;
        CHECK(byte == std::uint32_t(pos % 2 == 0 ? u : 16 * u));
        // f16x2: positions 0/4 (pairs t0), 1/5 (t1), 2/6 (t2), 3/7 (t3): each pair's halves are the codes'
        // values n as f16, exactly (one LOP3 with the 1024 magic, one HFMA2).
        std::uint32_t nv[4];
        pk::h2_codes(w, nv);
        const std::uint32_t pair = nv[pos % 4];
        CHECK(double(ref::half_to_float_soft(std::uint16_t(pos < 4 ? pair : pair >> 16))) == double(n));
        ++checked;
      }
  CHECK(checked == 8 * 16 * 8);
  // The 2^23 magic the q8 rounding uses: every q in [-127, 127] comes back from its low byte.
  for (int q = -127; q <= 127; ++q) CHECK(pk::q8_round(float(q), 1.0f) == q);
}

TEST_CASE("map=packed f16 fma on the host is exact: a*b + c rounded once to nearest even, subnormals kept") {
  auto as_half = [](double v) { return ref::float_to_half(float(v)); };
  // The reference: a*b + c in double when that sum is exact there (a*b always is: 22 bits; TwoSum
  // says whether adding c rounded), rounded once by the compiler's double -> _Float16 conversion.
  auto exact = [](std::uint16_t a, std::uint16_t b, std::uint16_t c) {
    const double p = double(ref::half_to_float_soft(a)) * double(ref::half_to_float_soft(b)), q = double(ref::half_to_float_soft(c));
    const double s = p + q, bp = s - q, e = (p - bp) + (q - (s - bp));
    return e == 0.0;
  };
  auto want = [](std::uint16_t a, std::uint16_t b, std::uint16_t c) {
    const double e = double(ref::half_to_float_soft(a)) * double(ref::half_to_float_soft(b)) + double(ref::half_to_float_soft(c));
    const _Float16 h = static_cast<_Float16>(e);
    std::uint16_t out;
    std::memcpy(&out, &h, sizeof out);
    return out;
  };
  Rng rng(3, 3);
  int mismatches = 0, n = 0;
  // The products the f16x2 form makes: a code subnormal (u 2^-24 or 16 u 2^-24) times any x~ below
  // 2^15, added to an accumulator below 1 (both signs, subnormals included).
  for (int u = 0; u < 16; ++u)
    for (int hi = 0; hi < 2; ++hi)
      for (int t = 0; t < 400; ++t) {
        const std::uint16_t a = std::uint16_t(hi ? 16 * u : u);
        const std::uint16_t b = as_half((rng.uniform() * 2 - 1) * std::ldexp(1.0, int(rng.uniform() * 30) - 14));
        const std::uint16_t c = as_half((rng.uniform() * 2 - 1) * std::ldexp(1.0, -int(rng.uniform() * 26)));
        if (!exact(a, b, c)) continue;
        mismatches += pk::half_fma_host(a, b, c) != want(a, b, c);
        ++n;
      }
  // Ties and zeros: +-0 sums, exact cancellation (+0), overflow to inf.
  CHECK(pk::half_fma_host(0x0000, 0x3C00, 0x8000) == 0x0000);  // (+0)(1) + (-0) = +0
  CHECK(pk::half_fma_host(0x8000, 0x3C00, 0x8000) == 0x8000);  // (-0)(1) + (-0) = -0
  CHECK(pk::half_fma_host(0x3C00, 0x3C00, 0xBC00) == 0x0000);  // 1 - 1 = +0
  CHECK(pk::half_fma_host(0x7BFF, 0x4000, 0x0000) == 0x7C00);  // 65504 * 2 = inf
  CHECK(pk::half_fma_host(0x0001, 0x3800, 0x0000) == 0x0000);  // 2^-25: a tie, to even (0)
  CHECK(pk::half_fma_host(0x0003, 0x3800, 0x0000) == 0x0002);  // 1.5 * 2^-24: a tie, to even (2)
  CHECK(pk::half_fma_host(0x3C01, 0x3C01, 0x0000) == 0x3C02);  // (1 + 2^-10)^2 = 1 + 2^-9 + 2^-20: up
  CHECK(mismatches == 0);
  CHECK(n > 10000);
  MESSAGE(n << " random f16 fmas of the f16x2 form's kind compared with the double reference");
  // All pairs of a small set of awkward operands against the reference.
  const std::uint16_t ops[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0xBC00, 0x3555, 0x7BFF, 0xFBFF, 0x0010, 0x00F0, 0x5800, 0x1400};
  int pairs = 0;
  for (auto a : ops)
    for (auto b : ops)
      for (auto c : ops) {
        if (!exact(a, b, c)) continue;
        CAPTURE(a);
        CAPTURE(b);
        CAPTURE(c);
        CHECK(pk::half_fma_host(a, b, c) == want(a, b, c));
        ++pairs;
      }
  CHECK(pairs > 1000);
}

TEST_CASE("map=packed q8 rounding: q = rn(x * inv) with ties to even, from one fma") {
  Rng rng(11, 2);
  for (int t = 0; t < 200000; ++t) {
    const float inv = float(rng.uniform(0.01, 1e4));
    const float x = float(rng.uniform(-127.0, 127.0) / double(inv));
    const double exact = double(x) * double(inv);  // 24 x 24 bits: exact in double
    if (std::abs(exact) > 127.0) continue;
    CAPTURE(x);
    CAPTURE(inv);
    REQUIRE(pk::q8_round(x, inv) == int(std::nearbyint(exact)));
  }
  CHECK(pk::q8_round(2.5f, 1.0f) == 2);
  CHECK(pk::q8_round(3.5f, 1.0f) == 4);
  CHECK(pk::q8_round(-2.5f, 1.0f) == -2);
  // A block quantises to [-127, 127], its step d = amax / 127, q * d within d/2 of x.
  std::vector<float> x(32);
  for (auto& v : x) v = float(rng.uniform(-3, 3));
  x[7] = -5.f;
  const pk::Q8X X = pk::q8_prep(x.data());
  CHECK(X.d == 5.f / 127.f);
  int sum = 0;
  for (int i = 0; i < 32; ++i) {
    const std::uint32_t word = (i % 2 == 0 ? X.xe : X.xo)[i / 8];
    const int q = int(std::int8_t((word >> (8 * ((i % 8) / 2))) & 0xFFu));
    CHECK(std::abs(q) <= 127);
    CHECK(std::abs(double(q) * X.d - x[std::size_t(i)]) <= 0.5001 * X.d);
    sum += q;
  }
  CHECK(X.c == -8 * sum);
  CHECK(int(std::int8_t((X.xo[0] >> 24) & 0xFFu)) == -127);  // column 7 = the block's max
  // A block of zeros (and one below 2^-96) quantises to zero, no NaN.
  std::vector<float> z(32, 0.f);
  z[3] = 1e-30f;
  const pk::Q8X Z = pk::q8_prep(z.data());
  CHECK(Z.d == 0.f);
  CHECK(Z.c == 0);
}

TEST_CASE("map=packed f16x2 x preparation: x~ = f16(x 2^e) with max |x~| in [2^7, 2^8], pairs (8w+t, 8w+t+4)") {
  Rng rng(12, 2);
  for (double scale : {1e-30, 1e-6, 1.0, 3.0, 1e5, 1e30}) {
    std::vector<float> x(32);
    for (auto& v : x) v = float(rng.uniform(-1, 1) * scale);
    const pk::H2X X = pk::h2_prep(x.data());
    double amax = 0, hmax = 0, worst = 0;
    for (float v : x) amax = std::max(amax, double(std::abs(v)));
    for (int i = 0; i < 32; ++i) {
      const int w = i / 8, c = i % 8;
      const std::uint32_t pair = X.h[w][c % 4];
      const double h = ref::half_to_float_soft(std::uint16_t(c < 4 ? pair : pair >> 16));
      hmax = std::max(hmax, std::abs(h));
      worst = std::max(worst, std::abs(h * X.f - x[std::size_t(i)]) / amax);
    }
    CAPTURE(scale);
    CHECK(hmax >= 128.0);
    CHECK(hmax <= 256.0);
    CHECK(worst <= std::ldexp(1.0, -11));  // f16 rounding relative to the block's max
  }
}

TEST_CASE("map=packed bit-models: f32 is block-per-thread,dot=offset bit for bit, every model independent of rows, grid and pdl") {
  std::vector<test::Q4Case> cases;
  for (const Shape& s : test::q4_guard_shapes())
    for (Dist d : {Dist::uniform, Dist::student_t}) cases.push_back(test::q4_generated(s, d, 2));
  for (auto& c : test::q4_awkward_cases()) cases.push_back(std::move(c));
  cases.push_back(test::q4_generated({37, 1056}, Dist::outlier, 4));  // a chunk of one block past 1024 columns
  const auto offset = q4_gemv::q4_model("q4_gemv/map=block-per-thread,dot=offset,rows=8");
  for (const auto& c : cases) {
    CAPTURE(c.what);
    CHECK(bitwise_diff(pk::model_as(pk::Form::f32, c.w, c.x), offset(c.w, c.x)) == 0);
    for (const auto& name : packed_names()) {
      CAPTURE(name);
      const std::string dot = q4_gemv::q4_kernel(name).axes.at(1).second;
      const pk::Form f = dot == "f32" ? pk::Form::f32 : dot == "f16x2" ? pk::Form::f16x2 : pk::Form::q8;
      CHECK(bitwise_diff(q4_gemv::q4_model(name)(c.w, c.x), pk::model_as(f, c.w, c.x)) == 0);
    }
  }
}

TEST_CASE("map=packed models within their declared tolerances of the f64 reference (the gpu suite's problems)") {
  std::vector<Problem> problems = test::q4_accuracy_problems();
  for (Shape s : std::vector<Shape>{{1, 32}, {1, 160}, {33, 160}, {5, 96}, {129, 1024}, {1024, 5120}, {3, 6144}})
    for (std::uint64_t seed : {1u, 2u, 3u})
      for (Dist d : {Dist::uniform, Dist::student_t}) problems.push_back(Problem{s, d, seed});
  double worst[3] = {0, 0, 0};
  std::string where[3];
  for (const Problem& p : problems) {
    auto c = test::q4_generated(p.shape, p.dist, p.seed);
    const auto ref = ref::q4_gemv_f64(c.w, c.x);
    for (pk::Form f : {pk::Form::f32, pk::Form::f16x2, pk::Form::q8}) {
      const auto a = accuracy(pk::model_as(f, c.w, c.x), ref);
      const double tol = pk::form_tolerance(f) > 0 ? pk::form_tolerance(f) : 1e-5;
      CAPTURE(p.str());
      const std::string form = pk::form_name(f);
      CAPTURE(form);
      CHECK(a.finite());
      CHECK(a.max_rel < tol);
      const int i = int(f);
      if (a.max_rel > worst[i]) {
        worst[i] = a.max_rel;
        where[i] = p.str();
      }
    }
  }
  for (pk::Form f : {pk::Form::f32, pk::Form::f16x2, pk::Form::q8})
    MESSAGE("worst max_rel of the " << std::string(pk::form_name(f)) << " model: " << worst[int(f)] << " (" << where[int(f)] << "), tolerance "
                                    << pk::form_tolerance(f));
}

TEST_CASE("map=packed in the registry: names, layouts, tolerances, models, launchers refuse before touching the device") {
  std::set<std::string> names;
  int producers = 0;
  for (const Variant* v : registry().variants_of("q4_gemv"))
    if (v->axes.at(0).second == "packed") {
      CAPTURE(v->name);
      // An xprep=producer twin (register.cpp) runs its xprep=launch kernel's launch_prepared: that kernel's checks.
      std::string kernel = v->name;
      if (const auto at = kernel.find(",xprep=producer,"); at != std::string::npos) {
        kernel.replace(at, 16, ",xprep=launch,");
        ++producers;
      } else {
        names.insert(v->name);
      }
      const auto& kern = q4_gemv::q4_kernel(kernel);
      REQUIRE(kern.layout != nullptr);
      CHECK(bool(kern.launch_packed));
      CHECK(kern.layout->bytes(17408, 5120) == std::size_t(17408) * 5120 / 2 + std::size_t(17408) * 160 * 2);
      CHECK(static_cast<bool>(v->cpu_model));
      CHECK(v->tolerance == kern.tolerance);
      const std::string dot = v->axes.at(1).second;
      CHECK(v->tolerance == pk::form_tolerance(dot == "f32" ? pk::Form::f32 : dot == "f16x2" ? pk::Form::f16x2 : pk::Form::q8));
      CHECK(v->can_implement(Problem{{5, 32768}, Dist::uniform, 1}).empty());
      CHECK(v->can_implement(Problem{{5, 32800}, Dist::uniform, 1}).find("32768") != std::string::npos);
      // Fake non-null pointers: every refusal must come before any use of them.
      auto* p = reinterpret_cast<const std::uint8_t*>(16);
      auto* x = reinterpret_cast<const float*>(16);
      auto* y = reinterpret_cast<float*>(16);
      CHECK_THROWS_WITH_AS(kern.launch(p, nullptr, x, y, 4, 64, nullptr), doctest::Contains("launch_packed"), Error);
      CHECK_THROWS_WITH_AS(kern.launch_packed(p, x, y, 4, 33, nullptr), doctest::Contains("multiple of 32"), Error);
      CHECK_THROWS_WITH_AS(kern.launch_packed(nullptr, x, y, 4, 64, nullptr), doctest::Contains("null buffer"), Error);
      CHECK_THROWS_WITH_AS(kern.launch_packed(p, x, y, 4, 32800, nullptr), doctest::Contains("32768"), Error);
      CHECK_THROWS_WITH_AS(kern.launch_packed(p + 4, x, y, 4, 64, nullptr), doctest::Contains("aligned"), Error);
    }
  CHECK(names == std::set<std::string>(packed_names().begin(), packed_names().end()));
  CHECK(producers == 17);  // tests/cpu/test_q4_models.cpp names them
  CHECK(names.count("q4_gemv/map=packed,dot=f32,grid=fill,pdl=on,rows=4") == 1);
  CHECK(names.count("q4_gemv/map=packed,dot=f16x2,grid=fill,pdl=on,rows=4") == 1);
  CHECK(names.count("q4_gemv/map=packed,dot=q8-dp4a,grid=fill,pdl=off,rows=4") == 1);
  CHECK(names.count("q4_gemv/map=packed,dot=q8-dp4a,grid=groups,pdl=on,rows=4") == 1);
  CHECK(names.count("q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=launch,pdl=on,rows=8") == 1);
  CHECK(names.count("q4_gemv/map=packed,dot=f32,grid=groups,xprep=launch,pdl=on,rows=8") == 1);
}

TEST_CASE("map=packed models at decode-like shapes: the rounding forms' error on every input distribution (reported)") {
  for (Shape s : std::vector<Shape>{{2048, 5120}, {1024, 6144}})
    for (Dist d : {Dist::uniform, Dist::normal, Dist::student_t, Dist::outlier}) {
      auto c = test::q4_generated(s, d, 1);
      const auto ref = ref::q4_gemv_f64(c.w, c.x);
      for (pk::Form f : {pk::Form::f32, pk::Form::f16x2, pk::Form::q8}) {
        const auto a = accuracy(pk::model_as(f, c.w, c.x), ref);
        const double tol = pk::form_tolerance(f) > 0 ? pk::form_tolerance(f) : 1e-5;
        const std::string where = Problem{s, d, 1}.str();
        CAPTURE(where);
        CHECK(a.max_rel < tol);
        MESSAGE(where << " " << std::string(pk::form_name(f)) << ": max_rel " << a.max_rel << ", rms_rel " << a.rms_rel);
      }
    }
}

// ---- load=bulk | cp-async: the ring (packed_ring.hpp, packed.cu packed_ring_kernel) ----

TEST_CASE("map=packed ring plan: a stage is the group's run as packed lies it, every group taken once, stages fit") {
  for (int R : {4, 8})
    for (std::int64_t m : {1, 5, 13, 37})
      for (std::int64_t k : {32, 96, 1056, 2080, 5120}) {
        CAPTURE(R);
        CAPTURE(m);
        CAPTURE(k);
        const pk::Geometry geo{m, k, R};
        pk::RingPlan plan;
        plan.W = int(geo.chunks());
        plan.R = R;
        plan.S = pk::ring_stages(plan.W, R);
        plan.groups = int(geo.groups());
        CHECK(plan.stage_bytes() == geo.chunks() * geo.tile_bytes());
        CHECK(plan.stage_bytes() % 16 == 0);  // cp.async.bulk: sizes and addresses multiples of 16
        CHECK(plan.groups * std::int64_t(plan.stage_bytes()) == geo.bytes());
        int mismatches = 0;
        for (std::int64_t i = 0; i < m; ++i)
          for (std::int64_t b = 0; b < geo.nb(); ++b) {
            const int warp = int(b / 32), lane = int(b % 32), r = int(i % R);
            const std::int64_t g0 = plan.group_offset(i / R);
            mismatches += g0 + plan.code_at(warp, lane, r) != geo.code_offset(i, b);
            mismatches += g0 + plan.scales_at(warp, lane) + 2 * r != geo.scale_offset(i, b);
          }
        CHECK(mismatches == 0);
        for (int grid : {1, 2, 3, 7, 264}) {
          plan.grid = grid;
          std::vector<int> taken(std::size_t(plan.groups), 0);
          for (int j = 0; j < grid; ++j)
            for (int n = 0; n < plan.mine(j); ++n) {
              const auto g = plan.group_of(j, n);
              REQUIRE(g < plan.groups);
              ++taken[std::size_t(g)];
            }
          CHECK(std::count(taken.begin(), taken.end(), 1) == plan.groups);
        }
      }
  // Stages: two 92 KB blocks per SM at k = 5120; never past the opt-in limit; at least two wherever
  // two fit.
  CHECK(pk::ring_stages(5, 8) == 4);
  CHECK(pk::ring_stages(5, 4) == 8);
  CHECK(pk::ring_stages(6, 8) == 3);
  for (int R : {4, 8})
    for (int W = 1; W <= 32; ++W) {
      const int S = pk::ring_stages(W, R), stage = W * R * 576;
      CAPTURE(R);
      CAPTURE(W);
      CHECK(S >= 1);
      CHECK(S <= pk::kRingMaxStages);
      CHECK(S * stage <= pk::kRingMaxSmem);
      CHECK((S >= 2 || 2 * stage > pk::kRingMaxSmem));
    }
  CHECK(pk::ring_stages(24, 8) == 2);
  CHECK(pk::ring_stages(25, 8) == 1);
  CHECK(pk::ring_stages(32, 4) == 2);
}

TEST_CASE("map=packed transposed butterfly on the host: each row's bits are the plain butterfly's") {
  Rng rng(21, 4);
  for (int R : {1, 2, 4, 8, 16})
    for (int t = 0; t < 50; ++t) {
      std::vector<std::vector<float>> v(32, std::vector<float>(std::size_t(R)));
      for (auto& lane : v)
        for (auto& f : lane) f = float(rng.uniform(-1, 1) * std::ldexp(1.0, int(rng.uniform() * 40) - 20));
      const auto rows = pk::warp_rows_host(v);
      REQUIRE(rows.size() == std::size_t(R));
      for (int r = 0; r < R; ++r) {
        std::array<float, 32> col{};
        for (int l = 0; l < 32; ++l) col[std::size_t(l)] = v[std::size_t(l)][std::size_t(r)];
        CAPTURE(R);
        CAPTURE(r);
        CHECK(bits(rows[std::size_t(r)]) == bits(q4_gemv::butterfly_host(col)));
      }
    }
}

TEST_CASE("map=packed ring models (load=bulk, cp-async): bit for bit grid=groups,xprep=launch,q8-dp4a of the same rows, any grid and stages") {
  std::vector<test::Q4Case> cases;
  // Ragged m (not a multiple of 4 or 8), k not a multiple of 1024 (a last warp part idle), one row.
  for (Shape s : std::vector<Shape>{{1, 32}, {5, 96}, {13, 1056}, {37, 2080}, {7, 5120}, {61, 6144}, {129, 1024}, {38, 160}})
    for (Dist d : {Dist::uniform, Dist::student_t}) cases.push_back(test::q4_generated(s, d, 3));
  for (auto& c : test::q4_awkward_cases()) cases.push_back(std::move(c));
  int compared = 0;
  for (const auto& c : cases)
    for (int R : {4, 8}) {
      const auto want = q4_gemv::q4_model("q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=launch,pdl=on,rows=" + std::to_string(R))(c.w, c.x);
      for (pk::Load load : {pk::Load::bulk, pk::Load::cp_async})
        for (int grid : {1, 3, 264})
          for (int S : {0, 1, 2, 3}) {
            CAPTURE(c.what);
            CAPTURE(R);
            CAPTURE(std::string(pk::load_name(load)));
            CAPTURE(grid);
            CAPTURE(S);
            const auto y = pk::model_ring(load, R, grid, S, c.w, c.x);
            CHECK(bitwise_diff(y, want) == 0);
            ++compared;
          }
    }
  CHECK(compared == int(cases.size()) * 2 * 2 * 3 * 4);
}

TEST_CASE("map=packed ring in the registry: four variants, named with load= only where it is not the default, each bound to its ring model") {
  const std::vector<std::string> ring{
      "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,load=bulk,pdl=on,rows=8",
      "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,load=bulk,pdl=on,rows=4",
      "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,load=cp-async,pdl=on,rows=8",
      "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,load=bulk,pdl=off,rows=8",
  };
  int with_load = 0;
  for (const auto& name : packed_names()) {
    const auto& axes = q4_gemv::q4_kernel(name).axes;
    with_load += std::any_of(axes.begin(), axes.end(), [](const auto& a) { return a.first == "load"; });
  }
  // + the five grid=half variants (all load=bulk), below, three xpf=l2 twins, one wpf=l2, grid=groups,load=bulk and
  // the grid=half rungs 51-55 (last=regs, its xpf=l2 twin and rung 49's, last=l2, pre=1), the three row-split twins, the two grid=fill,xprep=block,
  // the two tail=split, the three grid=fill,xprep=cluster, the one wait=flag, the two depth=2|1, the two trigger=late, depth=3,
  // the two xprep=block at depth=2|1, the four xprep=warp|warps at depth=2|3, the two row-split=2 at depth=2|3, pace=1|2,
  // pace=1,xprep=block|warps|warp, grid=groups,xprep=warps,load=bulk, pace=1,xprep=warps,ilp=2|3 and row-split=2,
  // pace=2|1,xprep=warps,rows=4, pace=1-2,xprep=warps,rows=4|8, pace=1,xprep=warps,defer=4,rows=8|4 and defer=8,rows=4,
  // pace=1,xprep=warps,per-sm=1 and per-sm=1,stages=4, pace=1-2,per-sm=1, defer=4,per-sm=1,rows=4, per-sm=1,rest=l2,
  // ilp=3,per-sm=1 and row-split=2,per-sm=1, pace=1,per-sm=3 and defer=4,per-sm=3,rows=4, per-sm=2,stages=2 with and without row-split=2,
  // defer=8,stages=4|3,rows=4, grid=own (owners=8|4 at rows=8, owners=16 at rows=4, xprep=warps|block)
  CHECK(with_load == int(ring.size()) + 5 + 3 + 1 + 1 + 5 + 3 + 2 + 2 + 3 + 1 + 2 + 2 + 1 + 2 + 4 + 2 + 2 + 3 + 1 + 2 + 1 + 2 + 2 + 3 + 7 + 6 + 4 + 4 + 2 + 2);
  const auto c = test::q4_generated({37, 2080}, Dist::student_t, 9);
  for (const auto& name : ring) {
    CAPTURE(name);
    const Variant& v = registry().variant(name);
    const auto& kern = q4_gemv::q4_kernel(name);
    REQUIRE(kern.layout != nullptr);
    const int R = name.back() - '0';
    CHECK(kern.layout->name == "tiles-r" + std::to_string(R));
    CHECK(kern.rows_per_warp == R);
    CHECK(v.tolerance == pk::form_tolerance(pk::Form::q8));
    CHECK(v.can_implement(Problem{{37, 2080}, Dist::uniform, 1}).empty());
    CHECK(v.can_implement(Problem{{5, 32800}, Dist::uniform, 1}).find("32768") != std::string::npos);
    const pk::Load load = name.find("load=bulk") != std::string::npos ? pk::Load::bulk : pk::Load::cp_async;
    CHECK(bitwise_diff(q4_gemv::q4_model(name)(c.w, c.x), pk::model_ring(load, R, 5, 2, c.w, c.x)) == 0);
  }
  // depth=2|1: the first ring's kernel filling fewer stages, named after load=, with a model of its own (the ring at
  // D stages on the H200's grid) that gives the ring's bits.
  // trigger=late (the prep kernel's trigger after its x is in) on each, xprep=warp|warps (another prep kernel writing
  // the same words) at depth=2|3: the same model; row-split=2 at depth=2|3: a model of its own with the ring's bits.
  for (const std::string name : {"q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,load=bulk,depth=2,pdl=on,rows=8",
                                 "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,load=bulk,depth=1,pdl=on,rows=8",
                                 "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,load=bulk,depth=3,pdl=on,rows=8",
                                 "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=block,load=bulk,depth=2,pdl=on,rows=8",
                                 "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=block,load=bulk,depth=1,pdl=on,rows=8",
                                 "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,trigger=late,load=bulk,depth=2,pdl=on,rows=8",
                                 "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,trigger=late,load=bulk,depth=1,pdl=on,rows=8",
                                 "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=warp,load=bulk,depth=2,pdl=on,rows=8",
                                 "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=warp,load=bulk,depth=3,pdl=on,rows=8",
                                 "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=warps,load=bulk,depth=2,pdl=on,rows=8",
                                 "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=warps,load=bulk,depth=3,pdl=on,rows=8",
                                 "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,load=bulk,depth=2,row-split=2,pdl=on,rows=8",
                                 "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,load=bulk,depth=3,row-split=2,pdl=on,rows=8"}) {
    const std::string depth = name.substr(name.find("depth=") + 6, 1);
    CAPTURE(name);
    CHECK(registry().variant(name).tolerance == pk::form_tolerance(pk::Form::q8));
    CHECK(bitwise_diff(q4_gemv::q4_model(name)(c.w, c.x), q4_gemv::q4_model(ring[0])(c.w, c.x)) == 0);
    CHECK(bitwise_diff(q4_gemv::q4_model(name)(c.w, c.x), pk::model_ring(pk::Load::bulk, 8, 264, std::stoi(depth), c.w, c.x)) == 0);
  }
  // pace=1|2: the ring's kernel fed by a producer warp, the ring's model; one more warp a block.
  for (const std::string pace : {"1", "2"}) {
    const std::string name = "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,load=bulk,pace=" + pace + ",pdl=on,rows=8";
    CAPTURE(name);
    CHECK(q4_gemv::q4_kernel(name).warps_per_block == q4_gemv::q4_kernel(ring[0]).warps_per_block + 1);
    CHECK(bitwise_diff(q4_gemv::q4_model(name)(c.w, c.x), q4_gemv::q4_model(ring[0])(c.w, c.x)) == 0);
    CHECK(static_cast<bool>(q4_gemv::q4_kernel(name).launch_prepared));
  }
  // pace=1,xprep=warps,ilp=2|3: the same kernel taking 2 or 3 stages a step, and row-split=2 (twice the consumer warps),
  // the ring's model; its main kernel alone for the GDN step (launch_prepared).
  // The same on one block an SM (per-sm=1: the grid alone changes), and row-split=2 on two blocks of 2 stages an SM.
  for (const std::string axis : {"ilp=2", "ilp=3", "row-split=2", "ilp=3,per-sm=1", "row-split=2,per-sm=1", "row-split=2,per-sm=2,stages=2"}) {
    const std::string name = "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=warps,load=bulk,pace=1," + axis + ",pdl=on,rows=8";
    CAPTURE(name);
    const int consumers = axis.rfind("row-split=2", 0) == 0 ? 2 : 1;
    CHECK(q4_gemv::q4_kernel(name).warps_per_block == consumers * q4_gemv::q4_kernel(ring[0]).warps_per_block + 1);
    CHECK(bitwise_diff(q4_gemv::q4_model(name)(c.w, c.x), q4_gemv::q4_model(ring[0])(c.w, c.x)) == 0);
    CHECK(static_cast<bool>(q4_gemv::q4_kernel(name).launch_prepared));
  }
  // pace=2|1|1-2,xprep=warps,rows=4: groups of 4 rows, the rows=4 ring's layout and every q8 rung's bits; pace=1-2 at
  // rows=8 the rows=8 ring's layout; defer=4 (the warps' sums of 4 groups after one barrier) at rows=8 and 4 likewise.
  for (const std::string pace_rows : {"pace=2,pdl=on,rows=4", "pace=1,pdl=on,rows=4", "pace=1-2,pdl=on,rows=4", "pace=1-2,pdl=on,rows=8",
                                      "pace=1,defer=4,pdl=on,rows=8", "pace=1,defer=4,pdl=on,rows=4", "pace=1,defer=8,pdl=on,rows=4",
                                      "pace=1,per-sm=1,pdl=on,rows=8", "pace=1,per-sm=1,stages=4,pdl=on,rows=8", "pace=1-2,per-sm=1,pdl=on,rows=8",
                                      "pace=1,defer=4,per-sm=1,pdl=on,rows=4", "pace=1,per-sm=1,rest=l2,pdl=on,rows=8", "pace=1,per-sm=3,pdl=on,rows=8",
                                      "pace=1,defer=4,per-sm=3,pdl=on,rows=4", "pace=1,per-sm=2,stages=2,pdl=on,rows=8",
                                      "pace=1,defer=8,stages=4,pdl=on,rows=4", "pace=1,defer=8,stages=3,pdl=on,rows=4"}) {
    const std::string name = "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=warps,load=bulk," + pace_rows;
    CAPTURE(name);
    const std::string& twin = pace_rows.back() == '4' ? ring[1] : ring[0];
    CHECK(q4_gemv::q4_kernel(name).layout == q4_gemv::q4_kernel(twin).layout);
    CHECK(q4_gemv::q4_kernel(name).warps_per_block == q4_gemv::q4_kernel(twin).warps_per_block + 1);
    CHECK(bitwise_diff(q4_gemv::q4_model(name)(c.w, c.x), q4_gemv::q4_model(ring[0])(c.w, c.x)) == 0);
    CHECK(static_cast<bool>(q4_gemv::q4_kernel(name).launch_prepared));
  }
  // grid=own: each warp owns its groups and a stage, Owners warps a block (no producer warp), the ring's layout and model of
  // its rows; its main kernel alone for the GDN step where it has a prep launch (xprep=warps), none with xprep=block.
  for (const std::string axes : {"xprep=warps,load=bulk,owners=8,pdl=on,rows=8", "xprep=warps,load=bulk,owners=4,pdl=on,rows=8",
                                 "xprep=warps,load=bulk,owners=16,pdl=on,rows=4", "xprep=block,load=bulk,owners=16,pdl=on,rows=4"}) {
    const std::string name = "q4_gemv/map=packed,dot=q8-dp4a,grid=own," + axes;
    CAPTURE(name);
    const auto& kern = q4_gemv::q4_kernel(name);
    const std::string& twin = axes.back() == '4' ? ring[1] : ring[0];
    CHECK(kern.layout == q4_gemv::q4_kernel(twin).layout);
    CHECK(kern.warps_per_block == std::stoi(axes.substr(axes.find("owners=") + 7)));
    CHECK(bitwise_diff(q4_gemv::q4_model(name)(c.w, c.x), q4_gemv::q4_model(ring[0])(c.w, c.x)) == 0);
    CHECK(static_cast<bool>(kern.launch_prepared) == (axes.find("xprep=warps") != std::string::npos));
  }
  // grid=split-k: clusters over k, Owners warps a block, the ring's layout and model; its prepared form the same kernel.
  for (const std::string axes : {"owners=8,stages=2,per-sm=2,pdl=on,rows=8", "owners=8,stages=2,per-sm=1,pdl=on,rows=8",
                                 "owners=8,stages=2,per-sm=2,pdl=on,rows=4", "owners=16,stages=2,per-sm=2,pdl=on,rows=4",
                                 "fold=last,owners=8,stages=2,per-sm=2,pdl=on,rows=8", "fold=last,owners=8,stages=2,per-sm=2,pdl=on,rows=4",
                                 "owners=8,stages=4,per-sm=1,pdl=on,rows=4", "owners=16,stages=2,per-sm=1,pdl=on,rows=4"}) {
    const std::string name = "q4_gemv/map=packed,dot=q8-dp4a,grid=split-k,xprep=chunk,load=bulk," + axes;
    CAPTURE(name);
    const auto& kern = q4_gemv::q4_kernel(name);
    CHECK(kern.layout == q4_gemv::q4_kernel(axes.back() == '4' ? ring[1] : ring[0]).layout);
    CHECK(kern.warps_per_block == std::stoi(axes.substr(axes.find("owners=") + 7)));
    CHECK(bitwise_diff(q4_gemv::q4_model(name)(c.w, c.x), q4_gemv::q4_model(ring[0])(c.w, c.x)) == 0);
    CHECK(static_cast<bool>(kern.launch_prepared));
  }
}

TEST_CASE("grid=own's warps a block: owners where their stages and x's words fit 220 KB, else as many as fit, at least 1") {
  // k = 5120: 160 blocks of 32, 5 chunks; a stage of rows=8 is 5 x 4608 = 23040 bytes, x's words 7680.
  CHECK(pk::own_warps(5120, 8, 8) == 8);    // 8 x 23040 + 7680 = 192000 <= 225280
  CHECK(pk::own_warps(5120, 8, 16) == 9);   // (225280 - 7680) / 23040 = 9.4
  CHECK(pk::own_warps(5120, 4, 16) == 16);  // 16 x 11520 + 7680 = 192000
  CHECK(pk::own_warps(6144, 8, 8) == 7);    // 6 chunks: (225280 - 9216) / 27648 = 7.8
  CHECK(pk::own_warps(6144, 4, 16) == 15);  // (225280 - 9216) / 13824 = 15.6
  CHECK(pk::own_warps(6144, 8, 4) == 4);
  CHECK(pk::own_warps(32768, 8, 8) == 1);   // 32 chunks: one stage of 147456 bytes beside 49152
  CHECK(pk::own_warps(32, 8, 16) == 16);
  for (int k = 32; k <= 32768; k += 32)
    for (int R : {4, 8})
      for (int owners : {1, 4, 8, 16}) {
        const int n = pk::own_warps(k, R, owners), nb = k / 32, stage = (nb + 31) / 32 * R * 576;
        CHECK(n >= 1);
        CHECK(n <= owners);
        if (n > 1) CHECK(n * stage + 3 * nb * 16 <= pk::kRingMaxSmem);
        if (n < owners) CHECK((n + 1) * stage + 3 * nb * 16 > pk::kRingMaxSmem);
      }
}

TEST_CASE("grid=split-k's shared memory: every tile's slot inside tot, 16-byte aligned stages, the registered blocks within 220 KB and rows=4's four an SM") {
  for (int C = 1; C <= pk::kKcMaxChunks; ++C)
    for (int R : {4, 8})
      for (int owners : {1, 8, 16})
        for (int Sw = 1; Sw <= pk::kKcMaxStages; ++Sw) {
          pk::KcPlan kp;
          kp.C = C, kp.R = R, kp.owners = owners, kp.Sw = Sw;
          CAPTURE(C);
          CAPTURE(R);
          // a cluster holds at most kKcMaxRows rows: tile i = held - 1 goes to member i % C, slot i / C
          const int held = pk::kKcMaxRows / R;
          CHECK((held - 1) / C < kp.slots());
          CHECK(kp.tot_bytes() >= kp.slots() * C * R * 4);
          CHECK(kp.tot_bytes() % 128 == 0);
          CHECK(kp.x_bytes() == 3 * 32 * 16);  // a chunk's 32 blocks: xe, xo, cd
          for (int w = 0; w < owners; ++w)
            for (int s = 0; s < Sw; ++s) {
              CHECK(kp.stage_at(w, s) % 16 == 0);  // a TMA destination
              CHECK(kp.stage_at(w, s) >= kp.x_bytes() + kp.tot_bytes());
            }
          CHECK(kp.smem() == kp.x_bytes() + kp.tot_bytes() + owners * Sw * kp.tile());
        }
  // The registered blocks at k = 5120 (5 chunks) and 6144 (6): rows=8 on 8 warps of 2 stages 79.5 KB (two an SM, with
  // 1 KB reserved each, in the 228 KB of an H100 / H200 SM), rows=4 on 8 warps 42.6 KB (four an SM: a call's two and the
  // next call's two), on 16 warps 79.5 KB.
  for (int C : {5, 6}) {
    pk::KcPlan r8{C, 8, 8, 2}, r4{C, 4, 8, 2}, r4w{C, 4, 16, 2};
    CHECK(r8.smem() == 1536 + 4224 + 16 * 4608);  // tot: 26 slots of 5 x 8 floats (C = 5), 22 of 6 x 8 (C = 6)
    CHECK(2 * (r8.smem() + 1024 + 512) <= 228 * 1024);
    CHECK(4 * (r4.smem() + 1024 + 512) <= 228 * 1024);
    CHECK(r4w.smem() <= pk::kRingMaxSmem);
  }
}

// ---- grid=half: the ring in half an SM (packed_ring.hpp half_stages, packed.cu launch_half) ----

TEST_CASE("map=packed grid=half stages: within half an SM per launch, so two launches' blocks co-reside on the H200 at the seed shapes") {
  CHECK(pk::half_stages(5, 8, 1) == 4);  // k = 5120: 4 x 23040 = 90 KB
  CHECK(pk::half_stages(5, 8, 2) == 2);  // 2 x 23040 per block, two blocks
  CHECK(pk::half_stages(6, 8, 1) == 4);  // k = 6144: 4 x 27648 = 108 KB
  CHECK(pk::half_stages(6, 8, 2) == 2);
  CHECK(pk::half_smem(5, 8, 1) == 4 * 23040 + 2 * 5 * 8 * 4);
  // Two launches x P blocks per SM, each with its ring and part[2][W][R], 96 bytes of static shared
  // memory (8 mbarriers, part_s[1][1][8]; 128 allowed) and the 1 KB the H200 reserves per block,
  // within its 228 KB per SM.
  for (int W : {5, 6})
    for (int P : {1, 2}) {
      const int smem = pk::half_smem(W, 8, P);
      CAPTURE(W);
      CAPTURE(P);
      CHECK(P * smem <= pk::kHalfSmBudget);
      CHECK(2 * P * (smem + 128 + 1024) <= 228 * 1024);
    }
  for (int R : {4, 8})
    for (int P : {1, 2})
      for (int W = 1; W <= 32; ++W) {
        const int S = pk::half_stages(W, R, P), stage = W * R * 576;
        CAPTURE(R);
        CAPTURE(P);
        CAPTURE(W);
        CHECK(S >= 1);
        CHECK(S <= pk::kRingMaxStages);
        CHECK(S * stage <= pk::kRingMaxSmem);                           // the kernel's opt-in
        const int part = pk::half_part_bytes(W, R);
        CHECK(pk::half_smem(W, R, P) == S * stage + part);
        CHECK(pk::half_smem(W, R, P) + 128 <= pk::kRingMaxSmem);                          // the kernel's opt-in
        CHECK((S == 1 || S * stage + part <= pk::kHalfSmBudget / P));                     // beyond one stage, within the share
        CHECK((S == pk::kRingMaxStages || (S + 1) * stage + part > pk::kHalfSmBudget / P));  // as many as the share holds
      }
}

namespace {
// A q8-dp4a rows=8 ring variant (grid=half, grid=groups,load=bulk) as the registry holds it: listed among
// map=packed's, in tiles-r8, with the q8 tolerance, refusing k past 32768.
void check_ring_r8(const std::string& name) {
  CAPTURE(name);
  const auto names = packed_names();
  CHECK(std::find(names.begin(), names.end(), name) != names.end());
  const Variant& v = registry().variant(name);
  const auto& kern = q4_gemv::q4_kernel(name);
  REQUIRE(kern.layout != nullptr);
  CHECK(kern.layout->name == "tiles-r8");
  CHECK(kern.rows_per_warp == 8);
  CHECK(v.tolerance == pk::form_tolerance(pk::Form::q8));
  CHECK(v.can_implement(Problem{{5, 32800}, Dist::uniform, 1}).find("32768") != std::string::npos);
}
}  // namespace

TEST_CASE("map=packed grid=half models: bit for bit grid=groups,xprep=launch,q8-dp4a,rows=8 on ragged shapes, at 132 and 264 blocks") {
  const std::vector<std::string> half{
      "q4_gemv/map=packed,dot=q8-dp4a,grid=half,xprep=block,load=bulk,per-sm=1,pdl=on,rows=8",
      "q4_gemv/map=packed,dot=q8-dp4a,grid=half,xprep=block,load=bulk,per-sm=2,pdl=on,rows=8",
      "q4_gemv/map=packed,dot=q8-dp4a,grid=half,xprep=launch,load=bulk,per-sm=1,pdl=on,rows=8",
      "q4_gemv/map=packed,dot=q8-dp4a,grid=half,xprep=block,load=bulk,per-sm=1,pdl=off,rows=8",
      "q4_gemv/map=packed,dot=q8-dp4a,grid=half,xprep=launch,load=bulk,per-sm=2,pdl=on,rows=8",
      "q4_gemv/map=packed,dot=q8-dp4a,grid=half,xprep=launch,load=bulk,per-sm=2,last=regs,pdl=on,rows=8",
      "q4_gemv/map=packed,dot=q8-dp4a,grid=half,xprep=launch,xpf=l2,load=bulk,per-sm=2,pdl=on,rows=8",
      "q4_gemv/map=packed,dot=q8-dp4a,grid=half,xprep=launch,xpf=l2,load=bulk,per-sm=2,last=regs,pdl=on,rows=8",
      "q4_gemv/map=packed,dot=q8-dp4a,grid=half,xprep=launch,xpf=l2,load=bulk,per-sm=2,last=l2,pdl=on,rows=8",
      "q4_gemv/map=packed,dot=q8-dp4a,grid=half,xprep=launch,load=bulk,per-sm=2,pre=1,pdl=on,rows=8",
  };
  std::vector<test::Q4Case> cases;
  // Ragged m; more groups than 132 blocks (a block takes 2 to 5 groups over a 4-stage ring: refills);
  // k at the seed widths and not a multiple of 1024.
  for (Shape s : std::vector<Shape>{{5, 96}, {37, 2080}, {1061, 160}, {2053, 192}, {300, 5120}, {61, 6144}})
    for (Dist d : {Dist::uniform, Dist::student_t}) cases.push_back(test::q4_generated(s, d, 5));
  for (auto& c : test::q4_awkward_cases()) cases.push_back(std::move(c));
  for (const auto& name : half) {
    CAPTURE(name);
    check_ring_r8(name);
    const Variant& v = registry().variant(name);
    const auto& kern = q4_gemv::q4_kernel(name);
    CHECK(v.can_implement(Problem{{37, 2080}, Dist::uniform, 1}).empty());
    CHECK(v.can_implement(Problem{{17408, 5120}, Dist::uniform, 1}).empty());
    CHECK(v.can_implement(Problem{{5, 32768}, Dist::uniform, 1}).empty());
    CHECK(v.can_implement(Problem{{5, 48}, Dist::uniform, 1}).find("32") != std::string::npos);
    CHECK(kern.resident_warps_per_sm() == (name.find("per-sm=2") != std::string::npos ? 10 : 5));
  }
  const auto want_of = q4_gemv::q4_model("q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=launch,pdl=on,rows=8");
  for (const auto& c : cases) {
    CAPTURE(c.what);
    const auto want = want_of(c.w, c.x);
    for (const auto& name : half) {
      CAPTURE(name);
      CHECK(bitwise_diff(q4_gemv::q4_model(name)(c.w, c.x), want) == 0);
    }
    // The kernel's schedules at both grids, with every stage count up to the ring's largest.
    for (int grid : {132, 264})
      for (int S : {1, 2, 4, 8}) {
        CAPTURE(grid);
        CAPTURE(S);
        CHECK(bitwise_diff(pk::model_ring(pk::Load::bulk, 8, grid, S, c.w, c.x), want) == 0);
      }
  }
}

// ---- xpf=l2 and wpf=l2: x, and the prep kernel's weights, prefetched into L2 (packed.cu) ----

namespace {
// The packed kernels whose name holds `mark` (and none of `unless`), each checked against its twin, the
// name with `mark` replaced by `by` (by default: less `mark`): the same layout, tolerance, rows and
// bit-model (the same bits on a ragged Student-t problem), but a launcher of its own. Returns their names.
std::set<std::string> check_twins(const std::string& mark, const std::vector<std::string>& unless, const std::string& by = "") {
  std::set<std::string> with;
  const auto c = test::q4_generated({37, 2080}, Dist::student_t, 11);
  for (const auto& name : packed_names()) {
    const std::size_t at = name.find(mark);
    if (at == std::string::npos || std::any_of(unless.begin(), unless.end(), [&](const std::string& u) { return name.find(u) != std::string::npos; }))
      continue;
    with.insert(name);
    CAPTURE(name);
    const std::string twin = std::string(name).replace(at, mark.size(), by);
    const auto& a = q4_gemv::q4_kernel(twin);
    const auto& b = q4_gemv::q4_kernel(name);
    REQUIRE(a.layout != nullptr);
    CHECK(b.layout->name == a.layout->name);
    CHECK(b.tolerance == a.tolerance);
    CHECK(b.rows_per_warp == a.rows_per_warp);
    const bool own_launcher = b.launch_packed != a.launch_packed, same_model = q4_gemv::q4_model(name) == q4_gemv::q4_model(twin);
    CHECK(own_launcher);
    CHECK(same_model);
    CHECK(bitwise_diff(q4_gemv::q4_model(name)(c.w, c.x), q4_gemv::q4_model(twin)(c.w, c.x)) == 0);
  }
  return with;
}
}  // namespace

TEST_CASE("map=packed row-split=2|4: the ring's rows split over 2 or 4 threads a block of 32 weights, bit for bit the ring's, any grid and stages") {
  // The twins: each name less row-split=N is a registered ring kernel; own launcher, the same layout, rows and tolerance.
  std::set<std::string> split;
  for (const auto& name : packed_names()) {
    for (const std::string mark : {",row-split=2", ",row-split=4"}) {
      const std::size_t at = name.find(mark);
      if (at == std::string::npos) continue;
      split.insert(name);
      CAPTURE(name);
      check_ring_r8(name);
      const std::string twin = std::string(name).erase(at, mark.size());
      const auto &a = q4_gemv::q4_kernel(twin), &b = q4_gemv::q4_kernel(name);
      CHECK(b.layout == a.layout);
      CHECK(b.tolerance == a.tolerance);
      const bool own_launcher = b.launch_packed != a.launch_packed;
      CHECK(own_launcher);
      // grid=half: P blocks an SM by design (no device query), each N times the twin's warps at k = 5120.
      if (name.find("grid=half") != std::string::npos)
        CHECK(b.resident_warps_per_sm() == std::stoi(mark.substr(mark.size() - 1)) * a.resident_warps_per_sm());
    }
  }
  CHECK(split == std::set<std::string>{"q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,xpf=l2,load=bulk,row-split=2,pdl=on,rows=8",
                                       "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,xpf=l2,load=bulk,row-split=4,pdl=on,rows=8",
                                       "q4_gemv/map=packed,dot=q8-dp4a,grid=half,xprep=launch,xpf=l2,load=bulk,per-sm=2,row-split=2,pdl=on,rows=8",
                                       "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=block,xpf=l2,load=bulk,row-split=2,pdl=on,rows=8",
                                       "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,xpf=l2,load=bulk,tail=split,row-split=2,pdl=on,rows=8",
                                       "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,load=bulk,depth=2,row-split=2,pdl=on,rows=8",
                                       "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,load=bulk,depth=3,row-split=2,pdl=on,rows=8",
                                       "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=warps,load=bulk,pace=1,row-split=2,pdl=on,rows=8",
                                       "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=warps,load=bulk,pace=1,row-split=2,per-sm=1,pdl=on,rows=8",
                                       "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=warps,load=bulk,pace=1,row-split=2,per-sm=2,stages=2,pdl=on,rows=8"});
  // grid=fill,xprep=block: the twins of rung 32 and of its row-split=2, of the depth=2|1 rings and of pace=1, without
  // the prep kernel; the same model.
  CHECK(check_twins("grid=fill,xprep=block,", {}, "grid=fill,xprep=launch,") ==
        std::set<std::string>{"q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=block,xpf=l2,load=bulk,pdl=on,rows=8",
                              "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=block,xpf=l2,load=bulk,row-split=2,pdl=on,rows=8",
                              "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=block,load=bulk,depth=2,pdl=on,rows=8",
                              "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=block,load=bulk,depth=1,pdl=on,rows=8",
                              "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=block,load=bulk,pace=1,pdl=on,rows=8"});
  // The models against the ring's: ragged m, k not a multiple of 1024, k past 8192 (row-split=4 runs as 1 there)
  // and past 16384 (row-split=2 too); each share's butterfly of 4 or 2 rows against the 8-row one.
  std::vector<test::Q4Case> cases;
  for (Shape s : std::vector<Shape>{{5, 96}, {37, 2080}, {1061, 160}, {61, 6144}, {9, 8224}, {3, 16416}})
    for (Dist d : {Dist::uniform, Dist::student_t}) cases.push_back(test::q4_generated(s, d, 13));
  for (auto& c : test::q4_awkward_cases()) cases.push_back(std::move(c));
  for (const auto& c : cases) {
    CAPTURE(c.what);
    const auto want = pk::model_ring(pk::Load::bulk, 8, 264, 0, c.w, c.x);
    for (const auto& name : split) {
      CAPTURE(name);
      CHECK(bitwise_diff(q4_gemv::q4_model(name)(c.w, c.x), want) == 0);
    }
    for (int sp : {2, 4})
      for (int grid : {1, 3, 264})
        for (int S : {1, 2, 0}) {
          CAPTURE(sp);
          CAPTURE(grid);
          CAPTURE(S);
          CHECK(bitwise_diff(pk::model_ring(pk::Load::bulk, 8, grid, S, c.w, c.x, sp), want) == 0);
        }
  }
  // Misuse is refused by name: a split the rows do not allow, or with cp-async.
  const auto c = test::q4_generated({5, 96}, Dist::uniform, 1);
  CHECK_THROWS_WITH_AS(pk::model_ring(pk::Load::cp_async, 8, 3, 1, c.w, c.x, 2), doctest::Contains("row-split"), Error);
  CHECK_THROWS_WITH_AS(pk::model_ring(pk::Load::bulk, 4, 3, 1, c.w, c.x, 8), doctest::Contains("row-split"), Error);
}

TEST_CASE("map=packed tail=split: the ring's last round in pieces of R / q rows, every row stored once with the ring's bits, any grid and stages") {
  // q at the H200's ring grid (132 SMs x 2 blocks, rows=8) on the seed shapes' groups, and its bounds.
  CHECK(pk::tail_pieces(2176, 264, 8) == 4);  // 17408x5120: 8 rounds and 64 groups -> 256 quarter groups
  CHECK(pk::tail_pieces(640, 264, 8) == 2);   // 5120x6144: 2 rounds and 112 groups -> 224 halves
  CHECK(pk::tail_pieces(1280, 264, 8) == 1);  // 10240x5120: 224 groups left, 448 halves would not fit
  CHECK(pk::tail_pieces(768, 264, 8) == 1);   // 6144x5120: 240 left
  CHECK(pk::tail_pieces(2112, 264, 8) == 1);  // whole rounds only
  CHECK(pk::tail_pieces(5, 264, 8) == 8);     // one row a piece at most
  CHECK(pk::tail_pieces(5, 264, 4) == 4);
  CHECK(pk::tail_pieces(7, 8, 8) == 1);       // 7 left of 8: no two pieces each fit
  // The plan: the items of the grid's blocks cover every row of every group exactly once; no block takes
  // more rows than the ring's busiest but for at most one piece.
  for (const auto& [groups, grid, R] : std::vector<std::array<int, 3>>{{2176, 264, 8}, {640, 264, 8}, {1280, 264, 8}, {5, 264, 8}, {37, 16, 4}, {9, 8, 8}, {1, 1, 8}}) {
    CAPTURE(groups);
    CAPTURE(grid);
    CAPTURE(R);
    pk::RingPlan p;
    p.W = 5, p.R = R, p.grid = grid, p.groups = groups;
    p.q = pk::tail_pieces(groups, grid, R);
    std::vector<int> covered(std::size_t(groups) * std::size_t(R), 0);
    int most = 0;
    for (int j = 0; j < grid; ++j) {
      int rows = 0;
      for (int n = 0; n < p.items(j); ++n) {
        CHECK(p.group_at(j, n) < groups);
        CHECK(p.row0(j, n) + p.rows_of(n) <= R);
        for (int r = p.row0(j, n); r < p.row0(j, n) + p.rows_of(n); ++r) ++covered[std::size_t(p.group_at(j, n) * R + r)];
        rows += p.rows_of(n);
      }
      most = std::max(most, rows);
    }
    CHECK(std::count(covered.begin(), covered.end(), 1) == groups * R);
    CHECK(most == p.rounds() * R + (groups % grid ? R / p.q : 0));
    if (p.q > 1) CHECK(p.piece_bytes() == p.W * (R / p.q * 512 + R * 64));
  }
  // The registry: rung 32 and its row-split=2 twin with tail=split, each with its own launcher, the twin's layout,
  // tolerance and rows, and a model of its own.
  std::set<std::string> tail;
  for (const auto& name : packed_names()) {
    const std::size_t at = name.find(",tail=split");
    if (at == std::string::npos) continue;
    tail.insert(name);
    CAPTURE(name);
    check_ring_r8(name);
    const std::string twin = std::string(name).erase(at, 11);
    const auto &a = q4_gemv::q4_kernel(twin), &b = q4_gemv::q4_kernel(name);
    CHECK(b.layout == a.layout);
    CHECK(b.tolerance == a.tolerance);
    const bool own_launcher = b.launch_packed != a.launch_packed;
    CHECK(own_launcher);
  }
  CHECK(tail == std::set<std::string>{"q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,xpf=l2,load=bulk,tail=split,pdl=on,rows=8",
                                      "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,xpf=l2,load=bulk,tail=split,row-split=2,pdl=on,rows=8"});
  // The models against the ring's: ragged m (pieces past m), m under the grid (every group in pieces), k not a
  // multiple of 1024; the ring's schedule with a last round at several grids and stage counts, row-split 1 and 2.
  std::vector<test::Q4Case> cases;
  for (Shape s : std::vector<Shape>{{5, 96}, {37, 2080}, {1061, 160}, {2053, 192}, {61, 6144}})
    for (Dist d : {Dist::uniform, Dist::student_t}) cases.push_back(test::q4_generated(s, d, 17));
  for (auto& c : test::q4_awkward_cases()) cases.push_back(std::move(c));
  for (const auto& c : cases) {
    CAPTURE(c.what);
    const auto want = pk::model_ring(pk::Load::bulk, 8, 264, 0, c.w, c.x);
    for (const auto& name : tail) {
      CAPTURE(name);
      CHECK(bitwise_diff(q4_gemv::q4_model(name)(c.w, c.x), want) == 0);
    }
    for (int sp : {1, 2})
      for (int grid : {1, 3, 7, 16, 264})
        for (int S : {1, 2, 0}) {
          CAPTURE(sp);
          CAPTURE(grid);
          CAPTURE(S);
          CHECK(bitwise_diff(pk::model_ring(pk::Load::bulk, 8, grid, S, c.w, c.x, sp, true), want) == 0);
        }
  }
  // cp-async copies a thread's own pieces: no tail=split there.
  const auto c = test::q4_generated({5, 96}, Dist::uniform, 1);
  CHECK_THROWS_WITH_AS(pk::model_ring(pk::Load::cp_async, 8, 3, 1, c.w, c.x, 1, true), doctest::Contains("tail=split"), Error);
}

TEST_CASE("map=packed grid=groups,load=bulk: one ring block per group with one stage, bit for bit grid=groups,xprep=launch,q8-dp4a,rows=8") {
  const std::string name = "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=launch,load=bulk,pdl=on,rows=8";
  check_ring_r8(name);
  const auto want_of = q4_gemv::q4_model("q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=launch,pdl=on,rows=8");
  int compared = 0;
  // Ragged m (the last group's padding rows are copied and never stored), k not a multiple of 1024.
  for (Shape s : std::vector<Shape>{{5, 96}, {37, 2080}, {1061, 160}, {61, 6144}})
    for (Dist d : {Dist::uniform, Dist::student_t}) {
      const auto c = test::q4_generated(s, d, 7);
      CAPTURE(s.m);
      const auto got = q4_gemv::q4_model(name)(c.w, c.x), want = want_of(c.w, c.x);
      CHECK(got.size() == std::size_t(s.m));
      CHECK(bitwise_diff(got, want) == 0);
      // The kernel's schedule exactly: a block per group, one stage.
      CHECK(bitwise_diff(pk::model_ring(pk::Load::bulk, 8, int((s.m + 7) / 8), 1, c.w, c.x), want) == 0);
      ++compared;
    }
  CHECK(compared == 8);
}

TEST_CASE("map=packed xpf=l2: each such kernel is the twin of one without it (the name less xpf=l2), with its model, layout and tolerance") {
  // last=l2 is registered with xpf=l2 only (rung 54; its twin in the ladder is rung 52, the name less last=l2), and
  // so are row-split (its own case above), grid=fill,xprep=block (the xprep=block case below), tail=split (its own case)
  // and the ring's xprep=cluster with cluster=4 (the xprep=cluster case).
  CHECK(check_twins(",xpf=l2", {",wpf=l2", ",last=l2", ",row-split=", "grid=fill,xprep=block", ",tail=", ",cluster=4"}) == std::set<std::string>{
                                                 "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=launch,xpf=l2,pdl=on,rows=8",
                                                 "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=launch,xpf=l2,pdl=on,rows=4",
                                                 "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=launch,xpf=l2,pdl=on,rows=16",
                                                 "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,xpf=l2,load=bulk,pdl=on,rows=8",
                                                 "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xpf=l2,pdl=on,rows=4",
                                                 "q4_gemv/map=packed,dot=q8-dp4a,grid=half,xprep=block,xpf=l2,load=bulk,per-sm=2,pdl=on,rows=8",
                                                 "q4_gemv/map=packed,dot=q8-dp4a,grid=half,xprep=launch,xpf=l2,load=bulk,per-sm=1,pdl=on,rows=8",
                                                 "q4_gemv/map=packed,dot=q8-dp4a,grid=half,xprep=launch,xpf=l2,load=bulk,per-sm=2,pdl=on,rows=8",
                                                 "q4_gemv/map=packed,dot=q8-dp4a,grid=half,xprep=launch,xpf=l2,load=bulk,per-sm=2,last=regs,pdl=on,rows=8",
                                                 "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=cluster,xpf=l2,load=bulk,pdl=on,rows=8",
                                             });
  CHECK(check_twins(",last=l2", {}) == std::set<std::string>{
                                           "q4_gemv/map=packed,dot=q8-dp4a,grid=half,xprep=launch,xpf=l2,load=bulk,per-sm=2,last=l2,pdl=on,rows=8"});
}

TEST_CASE("map=packed grid=half last=regs and pre=1: each the twin of the kernel without it (the name less the axis)") {
  CHECK(check_twins(",last=regs", {}) ==
        std::set<std::string>{"q4_gemv/map=packed,dot=q8-dp4a,grid=half,xprep=launch,load=bulk,per-sm=2,last=regs,pdl=on,rows=8",
                              "q4_gemv/map=packed,dot=q8-dp4a,grid=half,xprep=launch,xpf=l2,load=bulk,per-sm=2,last=regs,pdl=on,rows=8"});
  CHECK(check_twins(",pre=1", {}) == std::set<std::string>{"q4_gemv/map=packed,dot=q8-dp4a,grid=half,xprep=launch,load=bulk,per-sm=2,pre=1,pdl=on,rows=8"});
}

TEST_CASE("map=packed wpf=l2: each such kernel is the twin of its xpf=l2 kernel (the name less wpf=l2), with its model, layout and tolerance") {
  CHECK(check_twins(",wpf=l2", {}) == std::set<std::string>{
                                          "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=launch,xpf=l2,wpf=l2,pdl=on,rows=8",
                                          "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=launch,xpf=l2,wpf=l2,pdl=on,rows=4",
                                          "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=launch,xpf=l2,wpf=l2,pdl=on,rows=16",
                                          "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,xpf=l2,wpf=l2,load=bulk,pdl=on,rows=8",
                                      });
}

TEST_CASE("map=packed xprep=cluster: 8 threads' shares (amax4, q8_part) rebuild q8_prep exactly, each kernel the twin of its xprep=launch kernel") {
  namespace pk = q4_gemv::packed;
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<std::array<float, 32>> blocks;
  for (int t = 0; t < 2000; ++t) {
    std::array<float, 32> b{};
    const float scale = std::ldexp(1.f, int(rng() % 40) - 20);
    for (auto& v : b) v = n(rng) * scale;
    if (t % 7 == 0) b[rng() % 32] *= 1000.f;  // one outlier
    blocks.push_back(b);
  }
  blocks.push_back({});  // all zero
  std::array<float, 32> tiny{};
  tiny[3] = 0x1p-100f, tiny[9] = -0x1p-98f;  // amax below kQ8MinAmax: quantises to zero
  blocks.push_back(tiny);
  std::array<float, 32> ties{};
  for (int i = 0; i < 32; ++i) ties[i] = (i % 2 ? -1.f : 1.f) * (127.f - float(i)) + 0.5f;  // x * 127/amax near halves
  ties[0] = 127.f;
  blocks.push_back(ties);
  for (const auto& b : blocks) {
    const pk::Q8X want = pk::q8_prep(b.data());
    float amax = 0.f;
    for (int sub = 0; sub < 8; ++sub) {
      const float v[4] = {b[4 * sub], b[4 * sub + 1], b[4 * sub + 2], b[4 * sub + 3]};
      amax = std::fmax(amax, pk::amax4(v));
    }
    std::uint32_t xe[4] = {}, xo[4] = {};
    int sum = 0;
    for (int sub = 0; sub < 8; ++sub) {
      const float v[4] = {b[4 * sub], b[4 * sub + 1], b[4 * sub + 2], b[4 * sub + 3]};
      const pk::Q8Part q = pk::q8_part(v, sub, pk::q8_inv(amax));
      CHECK((xe[sub / 2] & q.e) == 0u);  // the two halves of a word do not overlap
      xe[sub / 2] |= q.e, xo[sub / 2] |= q.o, sum += q.sum;
    }
    for (int w = 0; w < 4; ++w) {
      CHECK(xe[w] == want.xe[w]);
      CHECK(xo[w] == want.xo[w]);
    }
    CHECK(-8 * sum == want.c);
    CHECK(pk::float_bits(pk::q8_step(amax)) == pk::float_bits(want.d));
  }
  // The kernels: twins of xprep=launch of the same rows, with its layout, tolerance and bit-model.
  // The ring's (grid=fill): twins of rung 32's ring, its cluster=4 form a twin of the cluster=8 one.
  CHECK(check_twins(",xprep=cluster,", {",cluster=4"}, ",xprep=launch,") ==
        std::set<std::string>{"q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=cluster,pdl=on,rows=8",
                              "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=cluster,pdl=on,rows=4",
                              "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=cluster,xpf=l2,load=bulk,pdl=on,rows=8",
                              "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=cluster,load=bulk,pdl=on,rows=8"});
  CHECK(check_twins(",cluster=4", {}) == std::set<std::string>{"q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=cluster,xpf=l2,load=bulk,cluster=4,pdl=on,rows=8"});
}

TEST_CASE("map=packed wait=flag: the ring whose main kernel polls its prep kernel's flag, the twin of the ring (the name less wait=flag), without a producer twin") {
  CHECK(check_twins(",wait=flag", {}) == std::set<std::string>{"q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,wait=flag,load=bulk,pdl=on,rows=8"});
  // Its main kernel waits for its own prep kernel's flag: it has no launch alone on a producer's x.
  CHECK_FALSE(bool(q4_gemv::q4_kernel("q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,wait=flag,load=bulk,pdl=on,rows=8").launch_prepared));
  CHECK(bool(q4_gemv::q4_kernel("q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,load=bulk,pdl=on,rows=8").launch_prepared));
  CHECK(registry().variant("q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,wait=flag,load=bulk,pdl=on,rows=8").description.find("flag") !=
        std::string::npos);
}

// ---- pace=P's protocol (packed_ring.hpp pace_waits; packed.cu packed_paced_kernel) ----

namespace {
// One block's producer and consumers over `mine` groups, S stages, at most P requests in flight, with mbarriers as the
// hardware keeps them: a count of completed phases, a wait on parity p passing while that count's parity is not p. Each
// step runs one enabled actor drawn by `rng`: the producer (its waits from pace_waits pass: it requests the next
// group), a request's arrival (any one in flight), or the consumers (their wait on the next group's stage passes: they
// read it, check it holds that group, and release the stage). Returns "" when every group was consumed, else why not.
std::string run_pace(int S, int P, int mine, std::mt19937& rng, int& most_in_flight) {
  struct Barrier {
    int completed = 0;
    bool passes(unsigned parity) const { return unsigned(completed & 1) != parity; }
  };
  std::vector<Barrier> full(static_cast<std::size_t>(S)), empty(static_cast<std::size_t>(S));
  std::vector<int> holds(static_cast<std::size_t>(S), -1);  // the group a stage's bytes are (-1: none yet)
  std::vector<int> in_flight;                   // requested groups not yet arrived
  int produced = 0, consumed = 0;
  most_in_flight = 0;
  while (consumed < mine) {
    std::vector<int> actors;  // 0 producer, 1 an arrival, 2 the consumers
    if (produced < mine) {
      const pk::PaceWaits w = pk::pace_waits(produced, S, P);
      if ((!w.empty || empty[std::size_t(w.empty_stage)].passes(w.empty_parity)) && (!w.full || full[std::size_t(w.full_stage)].passes(w.full_parity)))
        actors.push_back(0);
    }
    if (!in_flight.empty()) actors.push_back(1);
    if (full[std::size_t(consumed % S)].passes(unsigned((consumed / S) & 1))) actors.push_back(2);
    if (actors.empty())
      return "S=" + std::to_string(S) + " P=" + std::to_string(P) + ": every wait hangs with " + std::to_string(produced) + " requested, " +
             std::to_string(consumed) + " consumed";
    const int a = actors[std::uniform_int_distribution<std::size_t>(0, actors.size() - 1)(rng)];
    if (a == 0) {
      in_flight.push_back(produced++);
      most_in_flight = std::max(most_in_flight, int(in_flight.size()));
    } else if (a == 1) {  // TMA completions come in any order
      const std::size_t i = std::uniform_int_distribution<std::size_t>(0, in_flight.size() - 1)(rng);
      const int g = in_flight[i];
      in_flight.erase(in_flight.begin() + std::ptrdiff_t(i));
      holds[std::size_t(g % S)] = g;
      ++full[std::size_t(g % S)].completed;
    } else {
      if (holds[std::size_t(consumed % S)] != consumed)
        return "S=" + std::to_string(S) + " P=" + std::to_string(P) + ": group " + std::to_string(consumed) + " read from a stage holding " +
               std::to_string(holds[std::size_t(consumed % S)]);
      ++empty[std::size_t(consumed % S)].completed;
      ++consumed;
    }
  }
  return "";
}
}  // namespace

TEST_CASE("pace=P's protocol: under any order of requests, arrivals and consumption no wait hangs, each group is read from its stage, and at most P requests (S where P >= S) are in flight") {
  std::mt19937 rng(20261205);
  for (int S = 1; S <= pk::kRingMaxStages; ++S)
    for (int P = 1; P <= 4; ++P)
      for (int mine : {1, 2, 3, S, S + 1, 2 * S + 3, 25})
        for (int trial = 0; trial < 40; ++trial) {
          CAPTURE(S);
          CAPTURE(P);
          CAPTURE(mine);
          int most = 0;
          const std::string why = run_pace(S, P, mine, rng, most);
          REQUIRE(why.empty());
          CHECK(most <= std::min(P, S));
        }
  // The hazard pace_waits avoids: where P >= S the wait for request n - P would name a phase its barrier may have
  // passed twice (the stage refilled since), and could hang; pace_waits asks for it only where P < S.
  CHECK_FALSE(pk::pace_waits(4, 2, 2).full);
  CHECK(pk::pace_waits(4, 2, 2).empty);
  CHECK(pk::pace_waits(1, 4, 1).full);
  CHECK(pk::pace_waits(1, 4, 1).full_stage == 0);
  CHECK_FALSE(pk::pace_waits(1, 4, 1).empty);
}

TEST_CASE("span: the stages of its ring, and the shapes, paces and buffers it refuses, each by name, before any CUDA call") {
  using q4_gemv::SpanCall;
  // The GDN layer's out_proj (5120 x 6144) and stacked input projections (16480 x 5120): the larger group is out_proj's
  // (6 warps x 8 rows x (512 + 64) bytes = 27648), 6 of them in kSpanSmem (168 KB), room left beside for the small kernels.
  CHECK(q4_gemv::span_stages(6144, 5120) == 6);
  CHECK(q4_gemv::span_stages(5120, 5120) == 7);  // 23040-byte groups
  CHECK(q4_gemv::span_stages(1024, 1024) == 8);  // the ring's most
  CHECK(q4_gemv::span_stages(6144, 5120, 2) == 3);  // two blocks an SM, each half the ring
  SpanCall c;
  c.out_m = 5120, c.out_k = 6144, c.in_m = 16480, c.in_k = 5120, c.ba_rows = 96;
  CHECK(q4_gemv::span_error(c, 2) == "");
  CHECK(q4_gemv::span_error(c, 0).find("1 to 4") != std::string::npos);
  CHECK(q4_gemv::span_error(c, 5).find("1 to 4") != std::string::npos);
  auto two = c;
  two.per_sm = 2;
  CHECK(q4_gemv::span_error(two, 1) == "");
  two.per_sm = 3;
  CHECK(q4_gemv::span_error(two, 1).find("1 or 2") != std::string::npos);
  auto odd = c;
  odd.out_k = 6100;
  CHECK(q4_gemv::span_error(odd, 2).find("out_proj") != std::string::npos);
  auto wide = c;
  wide.in_k = 32768 + 32;
  CHECK(q4_gemv::span_error(wide, 2).find("stacked") != std::string::npos);
  auto big = c;
  big.in_k = 31 * 1024;  // 31 consumer warps and the producer: 1024 threads; its groups exceed half the ring
  CHECK(q4_gemv::span_error(big, 2).find("half of a span block's ring") != std::string::npos);
  auto ba = c;
  ba.in_k = 12288;  // b|a in split-row's order: k up to 8192
  CHECK(q4_gemv::span_error(ba, 2).find("split-row") != std::string::npos);
  auto no_ba = ba;
  no_ba.ba_rows = 0;
  CHECK(q4_gemv::span_error(no_ba, 2) == "");  // without b|a rows: 12 warps x 4608 = 55 KB groups, 3 of them in the ring
  CHECK(q4_gemv::span_stages(6144, 12288) == 3);
  // Buffers: refused by name before anything is launched (no device needed to get there).
  CHECK_THROWS_WITH_AS(q4_gemv::launch_span(c, 2, nullptr), doctest::Contains("null out_proj buffer"), Error);
  static std::uint8_t w[64] alignas(16);
  static float y[64];
  c.out_packed = w, c.out_y = y;
  CHECK_THROWS_WITH_AS(q4_gemv::launch_span(c, 2, nullptr), doctest::Contains("null buffer"), Error);
  CHECK_THROWS_WITH_AS(q4_gemv::launch_span(c, 9, nullptr), doctest::Contains("1 to 4"), Error);
}

TEST_CASE("per-sm=3's rings: the stages that let three blocks share an SM (sm_90: 228 KB, 1 KB reserved a block), at most the ring's, at least 1") {
  constexpr int kSm90 = 228 * 1024, kReserved = 1024, kStatic = 2176;  // the paced kernel's static shared memory (Nsight Compute, run-span/ncu)
  auto stage = [](int W, int R) { return pk::RingPlan{W, R, 1}.stage_bytes(); };
  // k = 5120 (5 warps): 23040-byte groups at rows=8, 11520 at rows=4; k = 6144 (6 warps): 27648 and 13824.
  CHECK(pk::shared_stages(kSm90, 3, kReserved, kStatic, stage(5, 8), pk::ring_stages(5, 8)) == 3);
  CHECK(pk::shared_stages(kSm90, 3, kReserved, kStatic, stage(5, 4), pk::ring_stages(5, 4)) == 6);
  CHECK(pk::shared_stages(kSm90, 3, kReserved, kStatic, stage(6, 8), pk::ring_stages(6, 8)) == 2);
  CHECK(pk::shared_stages(kSm90, 3, kReserved, kStatic, stage(6, 4), pk::ring_stages(6, 4)) == 5);
  // Three such blocks with their reserved and static bytes fit the SM; one stage more would not.
  for (auto [W, R] : {std::pair{5, 8}, {5, 4}, {6, 8}, {6, 4}}) {
    const int S = pk::shared_stages(kSm90, 3, kReserved, kStatic, stage(W, R), pk::ring_stages(W, R));
    CHECK(3 * (S * stage(W, R) + kReserved + kStatic) <= kSm90);
    CHECK(3 * ((S + 1) * stage(W, R) + kReserved + kStatic) > kSm90);
  }
  // Bounds: never more than the ring's own stages, never fewer than one (k = 24576: a 110 KB group).
  CHECK(pk::shared_stages(kSm90, 1, kReserved, kStatic, stage(5, 8), pk::ring_stages(5, 8)) == pk::ring_stages(5, 8));
  CHECK(pk::shared_stages(kSm90, 3, kReserved, kStatic, stage(24, 8), pk::ring_stages(24, 8)) == 1);
}
