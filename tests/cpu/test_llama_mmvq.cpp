// The llama-mmvq peer without a GPU or ggml: raw-q4 repacked into ggml's block_q4_0 gives back
// exactly klab's values through a dequantiser written from ggml's definition; the model of MMVQ's
// arithmetic stays within the peer's declared tolerance; and the registry lists the peer, saying
// why it cannot run when klab was built without ggml.
#include <doctest/doctest.h>

#include <cstring>

#include "../q4_cases.hpp"
#include "baselines/baselines.hpp"
#include "baselines/q4_0.hpp"
#include "klab/catalog.hpp"
#include "klab/error.hpp"
#include "klab/metrics.hpp"
#include "klab/ref/q4.hpp"
#include "klab/registry.hpp"

using namespace klab;
namespace q40 = klab::baselines::q4_0;

namespace {
std::vector<test::Q4Case> repack_cases() {
  std::vector<test::Q4Case> cases;
  for (const Shape& s : test::q4_guard_shapes())
    for (Dist d : {Dist::uniform, Dist::student_t, Dist::outlier}) cases.push_back(test::q4_generated(s, d, 5));
  for (auto& c : test::q4_awkward_cases()) cases.push_back(std::move(c));
  return cases;
}
}  // namespace

TEST_CASE("llama-mmvq repack: one hand-worked block, every code at every position") {
  // klab: byte j/2 holds elements j (low nibble) and j+1 (high), two's complement. Element t gets
  // code n4(t) = (t % 16) - 8 for t < 16 and 7 - (t % 16) for t >= 16: all 16 codes in each half.
  ref::Q4Matrix w;
  w.m = 1;
  w.k = 32;
  w.codes.assign(16, 0);
  w.scales = {0x3C00};  // 1.0
  auto n4 = [](int t) { return t < 16 ? t - 8 : 7 - (t - 16); };
  for (int t = 0; t < 32; ++t) w.codes[std::size_t(t / 2)] |= std::uint8_t((n4(t) & 0xF) << (t % 2 ? 4 : 0));
  for (int t = 0; t < 32; ++t) REQUIRE(w.code(0, t) == n4(t));
  const auto b = q40::repack(w);
  REQUIRE(b.size() == 1);
  CHECK(b[0].d == 0x3C00);
  for (int t = 0; t < 16; ++t) {
    CAPTURE(t);
    // ggml: low nibble of qs[t] is element t, high nibble element t + 16; u = n4 + 8.
    CHECK((b[0].qs[t] & 0xF) == n4(t) + 8);
    CHECK((b[0].qs[t] >> 4) == n4(t + 16) + 8);
  }
  CHECK(b[0].qs[0] == 0xF0);  // element 0: n4 -8 -> u 0; element 16: n4 7 -> u 15
  const auto v = q40::dequantize(b, 1, 32);
  for (int t = 0; t < 32; ++t) CHECK(v[std::size_t(t)] == float(n4(t)));
  // The block as ggml stores it: 18 bytes, d first (little-endian f16), then qs.
  std::uint8_t raw[18];
  std::memcpy(raw, &b[0], sizeof raw);
  CHECK(raw[0] == 0x00);
  CHECK(raw[1] == 0x3C);
  CHECK(raw[2] == b[0].qs[0]);
}

TEST_CASE("llama-mmvq repack: block_q4_0 dequantised by ggml's rule is klab's dequant(W) bit for bit") {
  for (const auto& c : repack_cases()) {
    CAPTURE(c.what);
    const auto blocks = q40::repack(c.w);
    REQUIRE(blocks.size() == std::size_t(c.w.m * c.w.blocks_per_row()));
    const auto ours = ref::q4_dequantize(c.w);
    const auto theirs = q40::dequantize(blocks, c.w.m, c.w.k);
    REQUIRE(theirs.size() == ours.size());
    // Bit for bit: signs of zero and subnormal scales included.
    CHECK(std::memcmp(theirs.data(), ours.data(), ours.size() * sizeof(float)) == 0);
    // The scales move unchanged, block by block.
    for (std::size_t i = 0; i < blocks.size(); ++i) REQUIRE(blocks[i].d == c.w.scales[i]);
  }
}

TEST_CASE("llama-mmvq: the tolerance still catches a wrong layout (klab's nibble order taken as ggml's)") {
  const double tol = registry().variant("q4_gemv/impl=llama-mmvq").tolerance;
  for (Dist d : {Dist::uniform, Dist::student_t}) {
    auto c = test::q4_generated({256, 1024}, d, 1);
    auto blocks = q40::repack(c.w);
    // The mistake: klab's 16 bytes of a block copied as they are (only the sign offset fixed).
    for (std::size_t i = 0; i < blocks.size(); ++i)
      for (int t = 0; t < 16; ++t) blocks[i].qs[t] = std::uint8_t(c.w.codes[i * 16 + std::size_t(t)] ^ 0x88);
    const auto wrong = q40::dequantize(blocks, c.w.m, c.w.k);
    std::vector<float> y(std::size_t(c.w.m));
    for (std::int64_t i = 0; i < c.w.m; ++i) {
      double acc = 0;
      for (std::int64_t j = 0; j < c.w.k; ++j) acc += double(wrong[std::size_t(i * c.w.k + j)]) * c.x[std::size_t(j)];
      y[std::size_t(i)] = float(acc);
    }
    const auto a = accuracy(y, ref::q4_gemv_f64(c.w, c.x));
    CAPTURE(to_string(d));
    CHECK(a.max_rel > 2 * tol);
  }
}

TEST_CASE("llama-mmvq: the model of MMVQ's arithmetic (q8_1 activations) stays within the peer's tolerance") {
  const double tol = registry().variant("q4_gemv/impl=llama-mmvq").tolerance;
  REQUIRE(tol > 0);
  std::vector<Problem> problems = test::q4_accuracy_problems();
  // The map=packed models' problems, and the race's --quick shapes.
  for (Shape s : std::vector<Shape>{{1, 32}, {1, 160}, {33, 160}, {5, 96}, {129, 1024}, {1024, 5120}, {3, 6144}, {1024, 512}, {37, 160}})
    for (std::uint64_t seed : {1u, 2u, 3u})
      for (Dist d : {Dist::uniform, Dist::student_t}) problems.push_back(Problem{s, d, seed});
  double worst = 0, worst_big = 0;
  std::string where, where_big;
  for (const Problem& p : problems) {
    CAPTURE(p.str());
    auto c = test::q4_generated(p.shape, p.dist, p.seed);
    const auto a = accuracy(q40::mmvq_model(c.w, c.x), ref::q4_gemv_f64(c.w, c.x));
    CHECK(a.finite());
    CHECK(a.max_rel < tol);
    if (a.max_rel > worst) {
      worst = a.max_rel;
      where = p.str();
    }
    if (p.shape.m >= 512 && a.max_rel > worst_big) {
      worst_big = a.max_rel;
      where_big = p.str();
    }
  }
  MESSAGE("MMVQ model: worst max_rel " << worst << " (" << where << "); with 512+ rows " << worst_big << " (" << where_big << "); tolerance " << tol);
}

TEST_CASE("llama-mmvq in the registry: a peer, always listed, without ggml it says why it cannot run") {
  const Variant& v = registry().variant("q4_gemv/impl=llama-mmvq");
  CHECK(v.peer);
  CHECK(v.op == "q4_gemv");
  CHECK(v.name == variant_name("q4_gemv", {{"impl", "llama-mmvq"}}));
  CHECK(!v.cpu_model);  // its summation order is ggml's: no bit-model, only the tolerance
  const Problem ok{{17408, 5120}, Dist::uniform, 1};
  // A shape the op cannot have: the op's reason, with or without ggml.
  CHECK(v.can_implement(Problem{{5, 33}, Dist::uniform, 1}).find("not a multiple of 32") != std::string::npos);
  if (baselines::llama_mmvq_built()) {
    CHECK(v.can_implement(ok).empty());
  } else {
    const std::string why = v.can_implement(ok);
    CHECK(why == baselines::kLlamaMmvqUnavailable);
    CHECK(why.find("unavailable: built without ggml") == 0);
    CHECK(why.find("scripts/fetch_ggml") != std::string::npos);
    CHECK(why.find("-DKLAB_GGML_DIR=") != std::string::npos);
    // make() refuses with the same reason (nothing touches a device).
    auto wl = registry().op("q4_gemv").generate(Problem{{2, 64}, Dist::uniform, 1});
    CHECK_THROWS_WITH_AS(v.make(*wl), doctest::Contains("unavailable: built without ggml"), Error);
  }
}
