// The q4_gemv family on the CPU: registry and naming, the op's byte model and refusals, the raw
// launcher's refusals (checked before anything touches a device), and the bit-models against an
// independently written spec of the documented arithmetic: every one of the 16 equals the spec of
// its chain count bit for bit, so f16 conversion and rows per warp change no bit in the models;
// the chain count changes bits but not accuracy.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>

#include "../q4_cases.hpp"
#include "cli_util.hpp"
#include "baselines/baselines.hpp"
#include "klab/catalog.hpp"
#include "klab/error.hpp"
#include "klab/metrics.hpp"
#include "klab/ref/gemv.hpp"
#include "klab/registry.hpp"
#include "q4_gemv/q4_gemv.hpp"

using namespace klab;

namespace {
// An f16 bit pattern's value from the format's definition (sign, 5-bit exponent biased by 15,
// 10-bit fraction; exponent 0: subnormal fraction * 2^-24), in f64 then f32 (exact for every
// finite half; the guard's scales are all finite). Written here, apart from both conversions the
// models use (ref::half_to_float_soft and the compiler's, klab/ref/q4.hpp).
float half_value(std::uint16_t h) {
  const int e = (h >> 10) & 0x1F, f = h & 0x3FF;
  const double mag = e == 0 ? std::ldexp(double(f), -24) : std::ldexp(double(1024 + f), e - 25);
  return float(h & 0x8000 ? -mag : mag);
}
// Weight (i, j)'s code from the format (klab/ref/q4.hpp): byte i*(k/2) + j/2, even j in the low
// nibble, 4-bit two's complement.
int code_of(const ref::Q4Matrix& w, std::int64_t i, std::int64_t j) {
  const unsigned byte = w.codes[std::size_t(i * (w.k / 2) + j / 2)];
  const unsigned u = j % 2 ? byte >> 4 : byte & 0xFu;
  return u >= 8 ? int(u) - 16 : int(u);
}

// The documented arithmetic order (policy.hpp) written out plainly, one row at a time, without the
// warp, the rows grouping or the family's KLAB_HD core: lane l's chain c is the fma chain over
// blocks b = c, c + C, ... of (n4 * s) * x at column 32 b + l; chains summed as (c0 + c1) + (c2 + c3);
// lanes summed by the xor-butterfly 16, 8, 4, 2, 1.
std::vector<float> spec(const ref::Q4Matrix& w, const std::vector<float>& x, int chains) {
  std::vector<float> y(std::size_t(w.m));
  const std::int64_t nb = w.k / 32;
  for (std::int64_t i = 0; i < w.m; ++i) {
    float lanes[32];
    for (int l = 0; l < 32; ++l) {
      float acc[4] = {0, 0, 0, 0};
      for (std::int64_t b = 0; b < nb; ++b) {
        const std::int64_t j = 32 * b + l;
        const float s = half_value(w.scales[std::size_t(i * nb + b)]);
        acc[b % chains] = std::fma(float(code_of(w, i, j)) * s, x[std::size_t(j)], acc[b % chains]);
      }
      lanes[l] = chains == 1 ? acc[0] : (acc[0] + acc[1]) + (acc[2] + acc[3]);
    }
    for (int o = 16; o > 0; o /= 2) {
      float next[32];
      for (int l = 0; l < 32; ++l) next[l] = lanes[l] + lanes[l ^ o];
      std::copy(next, next + 32, lanes);
    }
    y[std::size_t(i)] = lanes[0];
  }
  return y;
}

// Every one of the 16 bit-models against the spec of its chain count, on one case; returns the
// number of models compared. What this can catch: a model whose conversion (soft or the
// compiler's) departs from the f16 definition on a scale the case holds, a rows grouping that
// mixes rows or mishandles the rows past m, a lane mapping, chain assignment or butterfly off the
// documented order. What it cannot: the scale-read axis (lane 0 + shuffle vs every lane) is the
// same read in both models; only the kernels differ there, and the gpu guard (tests/gpu/test_q4.cu,
// kernel vs model and the guarded pairs on the device) is the real check of that axis.
int check_against_spec(const test::Q4Case& c) {
  REQUIRE(std::none_of(c.w.scales.begin(), c.w.scales.end(), [](std::uint16_t h) { return (h & 0x7C00) == 0x7C00; }));
  const std::vector<float> want[2] = {spec(c.w, c.x, 1), spec(c.w, c.x, 4)};
  int compared = 0;
  for (const auto& axes : test::q4_all_axes()) {
    const auto name = variant_name("q4_gemv", axes);
    const auto y = q4_gemv::q4_model(name)(c.w, c.x);
    CAPTURE(c.what);
    CAPTURE(name);
    REQUIRE(y.size() == std::size_t(c.w.m));
    CHECK(bitwise_diff(y, want[axes.at(1).second == "4"]) == 0);
    ++compared;
  }
  return compared;
}
// The problems the gpu suite holds to a tolerance: its generic check of every variant
// (tests/gpu/test_variants.cpp: these shapes, seeds 1-3, uniform and Student-t) and the q4 one.
std::vector<Problem> gpu_accuracy_problems() {
  std::vector<Problem> out;
  for (Shape s : std::vector<Shape>{{1, 32}, {1, 160}, {33, 160}, {5, 96}, {129, 1024}, {1024, 5120}, {3, 6144}})
    for (std::uint64_t seed : {1u, 2u, 3u})
      for (Dist d : {Dist::uniform, Dist::student_t}) out.push_back(Problem{s, d, seed});
  for (const auto& p : test::q4_accuracy_problems()) out.push_back(p);
  return out;
}
}  // namespace

TEST_CASE("q4_gemv: the seed's 16 kernel variants named from their axes, 9 kernels beyond the seed (and map=packed's 28), each with a bit-model and a launcher, plus 2 peers") {
  std::set<std::string> expected;
  for (const auto& axes : test::q4_all_axes()) expected.insert(variant_name("q4_gemv", axes));
  REQUIRE(expected.size() == 16);
  CHECK(expected.count("q4_gemv/scale=lane0-shfl,chains=1,f16=soft,rows=1") == 1);  // the seed's original
  std::set<std::string> ours, peers, beyond, producers;
  for (const Variant* v : registry().variants_of("q4_gemv")) {
    CAPTURE(v->name);
    if (v->peer) {
      peers.insert(v->name);
      continue;
    }
    if (v->axes.at(0).first == "map") {  // beyond the seed: not one of the four-axis family
      if (v->axes.at(0).second != "packed") beyond.insert(v->name);  // map=packed: tests/cpu/test_q4_packed.cpp
      CHECK(static_cast<bool>(v->cpu_model));
      std::string kernel = v->name;  // an xprep=producer twin runs its xprep=launch kernel's launch_prepared
      const std::string producer = "xprep=producer";
      if (const auto at = kernel.find(producer); at != std::string::npos) {
        producers.insert(v->name);
        kernel.replace(at, producer.size(), "xprep=launch");
        CHECK(static_cast<bool>(q4_gemv::q4_kernel(kernel).launch_prepared));
      }
      CHECK(q4_gemv::q4_kernel(kernel).rows_per_warp == std::stoi(v->axes.back().second));
      continue;
    }
    ours.insert(v->name);
    CHECK(static_cast<bool>(v->cpu_model));
    CHECK(v->axes.size() == 4);
    CHECK(q4_gemv::q4_kernel(v->name).name == v->name);
    CHECK(q4_gemv::q4_kernel(v->name).rows_per_warp == std::stoi(v->axes[3].second));
    const bool has_model = q4_gemv::q4_model(v->name) != nullptr;
    CHECK(has_model);
  }
  CHECK(ours == expected);
  // The xprep=producer twins (q4-prep-split): one per xprep=launch,pdl=on kernel with launch_prepared.
  CHECK(producers == std::set<std::string>{"q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=producer,pdl=on,rows=4",
                                           "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=producer,pdl=on,rows=8",
                                           "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=producer,pdl=on,rows=16",
                                           "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=producer,load=bulk,pdl=on,rows=8",
                                           "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=producer,regs=48,pdl=on,rows=8",
                                           "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=producer,parts=2,pdl=on,rows=8",
                                           "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=producer,parts=3,pdl=on,rows=8",
                                           "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=producer,load=bulk,pdl=on,rows=8",
                                           "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=producer,load=bulk,pdl=on,rows=4",
                                           "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=producer,load=cp-async,pdl=on,rows=8",
                                           "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=producer,load=bulk,depth=2,pdl=on,rows=8",
                                           "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=producer,load=bulk,depth=1,pdl=on,rows=8",
                                           "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=producer,load=bulk,depth=3,pdl=on,rows=8",
                                           "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=producer,load=bulk,depth=2,row-split=2,pdl=on,rows=8",
                                           "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=producer,load=bulk,depth=3,row-split=2,pdl=on,rows=8",
                                           "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=producer,load=bulk,pace=1,pdl=on,rows=8",
                                           "q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=producer,load=bulk,pace=2,pdl=on,rows=8"});
  CHECK(peers == std::set<std::string>{"q4_gemv/impl=cublas-bf16-gemmex", "q4_gemv/impl=cublas-sgemv-f32", "q4_gemv/impl=llama-mmvq"});
  CHECK(beyond == std::set<std::string>{"q4_gemv/map=block-per-lane,rows=1", "q4_gemv/map=block-per-lane,rows=4",
                                        "q4_gemv/map=block-per-lane,rows=8", "q4_gemv/map=block-per-lane,rows=16",
                                        "q4_gemv/map=block-per-thread,rows=2", "q4_gemv/map=block-per-thread,rows=4",
                                        "q4_gemv/map=block-per-thread,rows=8", "q4_gemv/map=block-per-thread,dot=offset,rows=4",
                                        "q4_gemv/map=block-per-thread,dot=offset,rows=8"});
  // + map=packed: 3 dot forms x (fill/pdl on, fill/pdl off, groups/pdl on), 6 of grid=groups,xprep=launch
  // , 4 of grid=fill,xprep=launch,load=bulk|cp-async, 4 of grid=half,load=bulk, 5 of grid=warp, 7 xpf=l2 twins, 4 wpf=l2 twins
  // , 2 of grid=groups,xprep=cluster, 3 of grid=groups,xprep=warps, 1 of xprep=warp, 3 of xprep=flag, grid=half,xprep=launch,per-sm=2,
  // grid=groups,load=bulk, grid=half,last=regs and grid=half,xprep=launch,xpf=l2,per-sm=2 without last, last=regs, last=l2,
  // , grid=half,pre=1, xprep=warp,wpf=lines, xprep=launch,regs=48, 2 of xprep=launch,parts=2|3, 3 of row-split=2|4
  // , 2 of grid=fill,xprep=block, 2 of tail=split, 3 of grid=fill,xprep=cluster, 1 of wait=flag, 2 of depth=2|1, 2 of
  // trigger=late, 1 of depth=3, 2 of xprep=block at depth=2|1, 4 of xprep=warp|warps at depth=2|3, 2 of row-split=2 at
  // depth=2|3, 2 of pace=1|2 and 3 of pace=1,xprep=block|warps|warp, 1 of grid=groups,xprep=warps,load=bulk and 2 of
  // pace=1,xprep=warps,ilp=2|3, 1 of pace=1,xprep=warps,row-split=2, 2 of pace=2|1,xprep=warps,rows=4 and 2 of
  // pace=1-2,xprep=warps,rows=4|8 and 3 of pace=1,xprep=warps,defer=4|8,rows=8|4 (then 7 + 6 paced rungs 98-110), and 4 of
  // grid=own (owners=8|4 at rows=8, owners=16 at rows=4 with xprep=warps|block)
  CHECK(q4_gemv::q4_kernels().size() == 25 + 9 + 6 + 4 + 4 + 5 + 7 + 4 + 2 + 3 + 1 + 3 + 1 + 1 + 1 + 3 + 1 + 1 + 1 + 2 + 3 + 2 + 2 + 3 + 1 + 2 + 2 + 1 + 2 + 4 + 2 + 2 + 3 + 1 + 2 + 1 + 2 + 2 + 3 + 7 + 6 + 4 + 4 + 2 + 2);
  CHECK(q4_gemv::q4_models().size() == 25 + 9 + 6 + 4 + 4 + 5 + 7 + 4 + 2 + 3 + 1 + 3 + 1 + 1 + 1 + 3 + 1 + 1 + 1 + 2 + 3 + 2 + 2 + 3 + 1 + 2 + 2 + 1 + 2 + 4 + 2 + 2 + 3 + 1 + 2 + 1 + 2 + 2 + 3 + 7 + 6 + 4 + 4 + 2 + 2);
  // The bf16 peer rounds on purpose and states its own, looser tolerance; the f32 peer does not.
  CHECK(registry().variant("q4_gemv/impl=cublas-bf16-gemmex").tolerance > 1e-5);
  CHECK(registry().variant("q4_gemv/impl=cublas-sgemv-f32").tolerance == 0);
}

TEST_CASE("q4_gemv: unknown kernel and model names are refused with the known ones listed") {
  try {
    q4_gemv::q4_kernel("q4_gemv/scale=nope");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("q4_gemv/scale=per-lane,chains=4,f16=hard,rows=1") != std::string::npos);
  }
  CHECK_THROWS_AS(q4_gemv::q4_model("q4_gemv/impl=cublas-bf16-gemmex"), Error);
}

TEST_CASE("q4_gemv: the launcher refuses bad shapes and null buffers before touching the device") {
  const auto& kern = q4_gemv::q4_kernel("q4_gemv/scale=per-lane,chains=4,f16=hard,rows=1");
  auto says = [&](int m, int k, bool null_buffers, const char* what) {
    // Fake, non-null pointers: the refusal must come before any use of them.
    auto* codes = null_buffers ? nullptr : reinterpret_cast<const std::uint8_t*>(16);
    auto* scales = reinterpret_cast<const std::uint16_t*>(16);
    auto* x = reinterpret_cast<const float*>(16);
    auto* y = reinterpret_cast<float*>(16);
    try {
      kern.launch(codes, scales, x, y, m, k, nullptr);
      FAIL("no error");
    } catch (const Error& e) {
      CAPTURE(e.what());
      CHECK(std::string(e.what()).find(what) != std::string::npos);
    }
  };
  says(4, 33, false, "not a multiple of 32");
  says(4, 0, false, "empty shape");
  says(0, 32, false, "empty shape");
  says(-1, 32, false, "empty shape");
  says(4, 32, true, "null buffer");
}

TEST_CASE("q4_gemv op: refusals, byte model, deterministic generation") {
  const Op& op = registry().op("q4_gemv");
  CHECK(op.validate(Problem{{4, 33}, Dist::uniform, 1}).find("not a multiple of 32") != std::string::npos);
  CHECK(op.validate(Problem{{0, 32}, Dist::uniform, 1}).find("empty shape") != std::string::npos);
  CHECK(op.validate(Problem{{17408, 5120}, Dist::uniform, 1}).empty());
  CHECK(op.validate(Problem{{1000000, 1000000}, Dist::uniform, 1}).find("over 32 GB") != std::string::npos);
  for (const Variant* v : registry().variants_of("q4_gemv")) {
    CAPTURE(v->name);
    // llama-mmvq without ggml refuses every shape, saying so (tests/cpu/test_llama_mmvq.cpp).
    if (v->name != "q4_gemv/impl=llama-mmvq" || baselines::llama_mmvq_built()) CHECK(v->can_implement(Problem{{5, 96}, Dist::uniform, 1}).empty());
    CHECK(v->can_implement(Problem{{5, 100}, Dist::uniform, 1}).find("not a multiple of 32") != std::string::npos);
  }
  CHECK_THROWS_AS(op.generate(Problem{{4, 33}, Dist::uniform, 1}), Error);
  // codes 0.5 B + scales 2 B per 32 weights + x and y in f32.
  auto t = op.traffic(Problem{{17408, 5120}, Dist::uniform, 1});
  CHECK(t.bytes == doctest::Approx(17408.0 * 5120 * 0.5625 + 4.0 * 5120 + 4.0 * 17408).epsilon(1e-12));
  CHECK(t.macs == 17408.0 * 5120);

  // generate() = the problem's f32 W (stream 0, scaled by 1/sqrt(k)) quantised, and x (stream 1);
  // asked twice (the second time from its cache) it gives the same bytes; another seed, others.
  auto a = test::q4_generated({33, 160}, Dist::student_t, 4), b = test::q4_generated({33, 160}, Dist::student_t, 4),
       c = test::q4_generated({33, 160}, Dist::student_t, 5);
  auto fresh = ref::q4_quantize(generate(Dist::student_t, 33 * 160, 4, 0, 1.0 / std::sqrt(160.0)), 33, 160);
  CHECK(a.w.codes == fresh.codes);
  CHECK(a.w.scales == fresh.scales);
  CHECK(a.x == generate(Dist::student_t, 160, 4, 1));
  CHECK(a.w.codes == b.w.codes);
  CHECK(a.w.scales == b.w.scales);
  CHECK(a.x == b.x);
  CHECK(a.w.codes != c.w.codes);
  CHECK(a.x != c.x);
  // A workload must hold what its problem says.
  CHECK_THROWS_AS(q4_gemv::make_workload(a.w, std::vector<float>(159), Problem{{33, 160}, Dist::uniform, 1}), Error);
  CHECK_THROWS_AS(q4_gemv::make_workload(a.w, a.x, Problem{{32, 160}, Dist::uniform, 1}), Error);
  auto bad = a.w;
  bad.codes.pop_back();
  CHECK_THROWS_AS(q4_gemv::make_workload(bad, a.x, Problem{{33, 160}, Dist::uniform, 1}), Error);
  CHECK_THROWS_AS(q4_gemv::q4_model("q4_gemv/scale=per-lane,chains=1,f16=soft,rows=1")(a.w, std::vector<float>(5)), Error);
}

TEST_CASE("bitwise guard (bit-models): every model equals the independent spec of its chain count, so f16 conversion and rows per warp change no bit") {
  int compared = 0, cases = 0;
  for (const Shape& s : test::q4_guard_shapes())
    for (std::uint64_t seed : {1u, 2u, 3u})
      for (Dist d : {Dist::uniform, Dist::student_t}) {
        compared += check_against_spec(test::q4_generated(s, d, seed));
        ++cases;
      }
  for (const auto& c : test::q4_awkward_cases()) {
    compared += check_against_spec(c);
    ++cases;
  }
  CHECK(compared == 16 * cases);
}

TEST_CASE("the spec's f16 values are the format's, and its arithmetic order is not the only one: 4 chains change bits, not accuracy") {
  // The spec's own conversion on hand-checked halves (it stands in for both of the models').
  CHECK(half_value(0x3C00) == 1.0f);
  CHECK(half_value(0xC000) == -2.0f);
  CHECK(half_value(0x7BFF) == 65504.0f);
  CHECK(half_value(0x0001) == std::ldexp(1.0f, -24));
  CHECK(half_value(0x03FF) == 1023 * std::ldexp(1.0f, -24));
  CHECK(std::signbit(half_value(0x8000)));
  // The guard can tell orders apart: on this case the two chain counts' specs differ.
  auto c = test::q4_generated({256, 5120}, Dist::uniform, 1);
  auto y1 = q4_gemv::q4_model("q4_gemv/scale=per-lane,chains=1,f16=hard,rows=1")(c.w, c.x);
  auto y4 = q4_gemv::q4_model("q4_gemv/scale=per-lane,chains=4,f16=hard,rows=1")(c.w, c.x);
  const auto diff = bitwise_diff(y1, y4);
  CHECK(diff > 0);
  CHECK(bitwise_diff(spec(c.w, c.x, 1), spec(c.w, c.x, 4)) == diff);
  MESSAGE("256x5120 uniform: 1 chain vs 4 chains differ in " << diff << " of 256 elements");
  auto ref = ref::q4_gemv_f64(c.w, c.x);
  CHECK(accuracy(y1, ref).max_rel < 1e-5);
  CHECK(accuracy(y4, ref).max_rel < 1e-5);
}

TEST_CASE("accum-chains' bits claim: its A and B bit-models differ on every --quick problem it evaluates") {
  // The experiment claims (claim 1) that B (4 chains) differs from A (1 chain) in bits on every
  // shape and input. Kernels equal their models bit for bit (gpu suite), so the models say what the
  // claim will find on the problems --quick runs (experiments/q4_gemv.cpp: 1024x512 and 37x160,
  // uniform and Student-t, seed 1).
  const Experiment& e = registry().experiment("accum-chains");
  REQUIRE(e.claims.size() == 3);
  CHECK(e.claims[1].text.find("differs from A in bits") != std::string::npos);
  for (Shape s : std::vector<Shape>{{1024, 512}, {37, 160}})
    for (Dist d : {Dist::uniform, Dist::student_t}) {
      auto c = test::q4_generated(s, d, 1);
      CAPTURE(c.what);
      const auto a = q4_gemv::q4_model(test::q4_name("lane0-shfl", "1", "soft", "1"))(c.w, c.x);
      const auto b = q4_gemv::q4_model(test::q4_name("lane0-shfl", "4", "soft", "1"))(c.w, c.x);
      CHECK(bitwise_diff(a, b) > 0);
    }
}

TEST_CASE("q4 kernel accuracy through the bit-models: within 1e-5 of the f64 reference") {
  // Every kernel equals its model bit for bit (gpu suite) and the models of one chain count equal
  // one spec bit for bit (above), so the two models below stand for all 16 kernels. These are the shapes,
  // seeds and inputs of the gpu suite's generic check (tests/gpu/test_variants.cpp), which holds
  // every variant without its own tolerance to max_rel < 1e-5: an f32 sum of k fma-rounded products
  // is off by ~sqrt(k) * 2^-24 of the row's magnitude (< 5e-6 for k <= 6144); a wrong element or a
  // lost block is off by O(1e-2) or more.
  double worst = 0;
  std::string where;
  for (const Problem& p : gpu_accuracy_problems()) {
        auto c = test::q4_generated(p.shape, p.dist, p.seed);
        auto ref = ref::q4_gemv_f64(c.w, c.x);
        for (const char* chains : {"1", "4"}) {
          auto y = q4_gemv::q4_model(test::q4_name("per-lane", chains, "hard", "1"))(c.w, c.x);
          auto a = accuracy(y, ref);
          CAPTURE(c.what);
          CAPTURE(chains);
          CHECK(a.finite());
          CHECK(a.max_rel < 1e-5);
          if (a.max_rel > worst) {
            worst = a.max_rel;
            where = c.what + ", chains=" + chains;
          }
        }
      }
  MESSAGE("worst max_rel of the q4 bit-models: " << worst << " (" << where << ")");
}

TEST_CASE("bf16 rounding of the peer stays within its tolerance") {
  // The cuBLAS bf16 peer computes with bf16(dequant(W)) and bf16(x); simulate that rounding with
  // f64 sums to see how much of its tolerance the rounding alone takes (f32 accumulation on the GPU
  // adds ~1e-6 more).
  const double tol = registry().variant("q4_gemv/impl=cublas-bf16-gemmex").tolerance;
  double worst = 0;
  std::string where;
  for (const Problem& p : gpu_accuracy_problems()) {
        const Shape s = p.shape;
        auto c = test::q4_generated(p.shape, p.dist, p.seed);
        auto w = ref::q4_dequantize(c.w);
        for (auto& v : w) v = ref::bf16_to_float(ref::float_to_bf16(v));
        auto x = c.x;
        for (auto& v : x) v = ref::bf16_to_float(ref::float_to_bf16(v));
        const auto y = ref::gemv_f64(w, x, s.m, s.k), r = ref::q4_gemv_f64(c.w, c.x);
        double err = 0, scale = 0;
        for (std::size_t i = 0; i < r.size(); ++i) {
          err = std::max(err, std::abs(y[i] - r[i]));
          scale = std::max(scale, std::abs(r[i]));
        }
        const double max_rel = err / scale;
        CAPTURE(c.what);
        CHECK(max_rel < tol / 2);
        if (max_rel > worst) {
          worst = max_rel;
          where = c.what;
        }
      }
  MESSAGE("worst max_rel of bf16 rounding: " << worst << " (" << where << "), tolerance " << tol);
}

TEST_CASE("klab ab on q4 variants refuses K not a multiple of 32 and empty shapes, writing no report") {
  namespace fs = std::filesystem;
  const std::string a = "q4_gemv/scale=lane0-shfl,chains=1,f16=soft,rows=1", b = "q4_gemv/scale=per-lane,chains=1,f16=soft,rows=1";
  for (const auto& [shape, says] : std::vector<std::pair<std::string, std::string>>{{"4x33", "not a multiple of 32"}, {"0x32", "zero dimension"}}) {
    const auto dir = fs::temp_directory_path() / ("klab-q4-cli-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    const std::string cmd = test::klab_cli_path() + " ab " + a + " " + b + " --shape " + shape + " --out " + dir.string() + " 2>&1";
    std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
    REQUIRE(pipe);
    std::string out;
    std::array<char, 4096> buf{};
    while (auto n = fread(buf.data(), 1, buf.size(), pipe.get())) out.append(buf.data(), n);
    const int status = pclose(pipe.release());
    CAPTURE(shape);
    CAPTURE(out);
    CHECK(WEXITSTATUS(status) != 0);
    CHECK(out.find(says) != std::string::npos);
    CHECK_FALSE(fs::exists(dir / "report.jsonl"));
    fs::remove_all(dir);
  }
}

TEST_CASE("q4_gemv block-per-thread: refuses k beyond one thread per block of 32 (k > 32768), with the reason") {
  const Variant& v = registry().variant("q4_gemv/map=block-per-thread,rows=4");
  CHECK(v.can_implement(Problem{{4, 32768}, Dist::uniform, 1}).empty());
  const auto why = v.can_implement(Problem{{4, 32800}, Dist::uniform, 1});
  CHECK(why.find("32768") != std::string::npos);
  auto c = test::q4_generated({2, 32800}, Dist::uniform, 1);
  CHECK_THROWS_AS(q4_gemv::q4_model(v.name)(c.w, c.x), Error);
}
