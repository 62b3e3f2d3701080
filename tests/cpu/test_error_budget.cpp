// The error budget's math (experiments/error_budget.hpp) on hand-worked cases, its activation files,
// and the `error-budget` experiment itself (it needs no device): run in-process with --quick, its
// records checked against reports/SCHEMA.md's error_budget kind.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

#include "error_budget.hpp"
#include "klab/catalog.hpp"
#include "klab/error.hpp"
#include "klab/experiment.hpp"
#include "klab/ref/npy.hpp"
#include "klab/ref/q4.hpp"
#include "klab/ref/safetensors.hpp"
#include "klab/registry.hpp"
#include "klab/report.hpp"

using namespace klab;
namespace budget = klab::experiments::budget;
namespace fs = std::filesystem;

namespace {
fs::path temp_file(const std::string& name) { return fs::temp_directory_path() / ("klab-eb-" + std::to_string(::getpid()) + "-" + name); }
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// One row of 32 weights: w[0] = 7, w[1] = 0.5, the rest 0. amax 7 gives the f16 scale 1 exactly, so
// q4 keeps 7 and 0 and rounds 0.5 to 1 (ties away from zero): the only error is +0.5 at column 1.
std::vector<float> hand_row() {
  std::vector<float> w(32, 0.f);
  w[0] = 7.f;
  w[1] = 0.5f;
  return w;
}
budget::RowSource rows_from(const std::vector<float>& w, std::int64_t k) {
  return [&w, k](std::int64_t r0, std::int64_t rows, std::vector<float>& out) {
    out.assign(w.begin() + std::ptrdiff_t(r0 * k), w.begin() + std::ptrdiff_t((r0 + rows) * k));
  };
}
}  // namespace

TEST_CASE("budget::VecErr and summarize: pooled rms_rel, worst per-vector max_rel") {
  budget::VecErr a, b;
  a.add(1.0, 1.0);   // d 0
  a.add(2.5, 2.0);   // d 0.5
  b.add(-3.0, -4.0); // d 1
  b.add(0.0, 0.0);
  CHECK(a.max_diff == 0.5);
  CHECK(a.max_ref == 2.0);
  CHECK(a.n == 2);
  const std::vector<budget::VecErr> v{a, b};
  const auto r = budget::summarize(v);
  // sum d^2 = 0.25 + 1 = 1.25; sum ref^2 = 1 + 4 + 16 = 21.
  CHECK(r.rms_rel == doctest::Approx(std::sqrt(1.25 / 21.0)).epsilon(1e-15));
  // max_rel per vector: a 0.5/2 = 0.25, b 1/4 = 0.25 -> 0.25.
  CHECK(r.max_rel == doctest::Approx(0.25));
  CHECK(r.n == 4);
  CHECK(r.tokens == 2);
  // An all-zero reference: 0 when y is zero too, +inf otherwise.
  budget::VecErr z;
  z.add(0, 0);
  CHECK(budget::summarize(std::vector<budget::VecErr>{z}).max_rel == 0);
  z.add(1e-3, 0);
  CHECK(std::isinf(budget::summarize(std::vector<budget::VecErr>{z}).max_rel));
}

TEST_CASE("budget::q8_0_roundtrip: hand-worked blocks, as ggml's q8_0") {
  // Block 1: amax 127 gives d = 1 exactly (f16 exact): integers survive, 2.5 rounds away from 0 to 3.
  // Block 2: all zero: d = 0, everything stays 0.
  std::vector<float> x(64, 0.f);
  x[0] = 127.f;
  x[1] = -3.f;
  x[2] = 2.5f;
  x[3] = -2.5f;
  x[4] = 0.49f;
  const auto y = budget::q8_0_roundtrip(x);
  CHECK(y[0] == 127.f);
  CHECK(y[1] == -3.f);
  CHECK(y[2] == 3.f);
  CHECK(y[3] == -3.f);
  CHECK(y[4] == 0.f);
  for (std::size_t i = 32; i < 64; ++i) CHECK(y[i] == 0.f);
  // A scale that is not exact in f16: d = 1/127 is rounded to f16, the codes are from the f32 d.
  std::vector<float> u(32, 0.f);
  u[0] = 1.f;
  u[1] = 0.5f;
  const auto v = budget::q8_0_roundtrip(u);
  const float dh = ref::half_to_float_soft(ref::float_to_half(1.f / 127.f));
  CHECK(v[0] == 127.f * dh);
  CHECK(v[1] == std::round(0.5f * 127.f) * dh);  // 63.5 -> 64
  CHECK_THROWS_AS(budget::q8_0_roundtrip(std::vector<float>(33, 1.f)), std::invalid_argument);
}

TEST_CASE("budget::run: exact q4 weights give exactly 0, a hand-worked error gives its value") {
  // Exact: every weight n4 * 1 with |n4| <= 7 and a 7 in each block (scale 1): dequant(q4(W)) == W.
  std::vector<float> exact(2 * 64);
  for (std::size_t i = 0; i < exact.size(); ++i) exact[i] = float(int(i % 15) - 7);
  for (std::size_t r = 0; r < 2; ++r)
    for (std::size_t b = 0; b < 2; ++b) exact[r * 64 + b * 32] = 7.f;
  budget::InputSet s;
  s.tokens = 3;
  for (int i = 0; i < 3 * 64; ++i) s.x.push_back(float(std::sin(0.37 * i)) * 3.f);
  const auto re = budget::run(rows_from(exact, 64), 2, 64, {s}, 1);
  REQUIRE(re.size() == 1);
  CHECK(re[0].f32_act.rms_rel == 0);
  CHECK(re[0].f32_act.max_rel == 0);
  CHECK(re[0].f32_act.n == 6);
  CHECK(re[0].f32_act.tokens == 3);
  CHECK(re[0].act_err.rms_rel > 0);  // q8_0 of sin values is not exact

  // Hand-worked: ref = W x, y = dequant(W) x with the only weight error +0.5 at column 1.
  const auto w = hand_row();
  budget::InputSet one_hot, pair;
  one_hot.tokens = pair.tokens = 1;
  one_hot.x.assign(32, 0.f);
  one_hot.x[1] = 1.f;  // ref 0.5, y 1
  pair.x.assign(32, 0.f);
  pair.x[0] = pair.x[1] = 1.f;  // ref 7.5, y 8
  const auto rh = budget::run(rows_from(w, 32), 1, 32, {one_hot, pair});
  CHECK(rh[0].f32_act.rms_rel == doctest::Approx(1.0));
  CHECK(rh[0].f32_act.max_rel == doctest::Approx(1.0));
  CHECK(rh[1].f32_act.rms_rel == doctest::Approx(0.5 / 7.5));
  CHECK(rh[1].f32_act.max_rel == doctest::Approx(0.5 / 7.5));
  // q8_0 of (1, 1, 0, ...): codes 127, scale f16(1/127), so x8 = 127 f16(1/127) = 1 within the f16
  // rounding of the scale (< 2^-11 relative): the activation error is that rounding alone.
  CHECK(rh[1].act_err.rms_rel < 1e-3);
}

TEST_CASE("budget::run: chunking does not change the result, bad shapes and sizes are refused") {
  std::vector<float> w(5 * 64);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = float(std::cos(0.11 * double(i)));
  budget::InputSet s;
  s.tokens = 2;
  for (int i = 0; i < 2 * 64; ++i) s.x.push_back(float(std::sin(0.7 * i)));
  const auto a = budget::run(rows_from(w, 64), 5, 64, {s}, 1);
  const auto b = budget::run(rows_from(w, 64), 5, 64, {s}, 256);
  CHECK(a[0].f32_act.rms_rel == doctest::Approx(b[0].f32_act.rms_rel).epsilon(1e-12));
  CHECK(a[0].f32_act.max_rel == doctest::Approx(b[0].f32_act.max_rel).epsilon(1e-12));
  CHECK(a[0].f32_act.rms_rel > 0.01);  // cos weights are not q4-exact
  CHECK_THROWS_AS(budget::run(rows_from(w, 64), 5, 60, {s}), std::invalid_argument);
  budget::InputSet bad = s;
  bad.x.pop_back();
  CHECK_THROWS_AS(budget::run(rows_from(w, 64), 5, 64, {bad}), std::invalid_argument);
}

TEST_CASE("budget::load_activations: .npy and .safetensors:TENSOR, with refusals naming the problem") {
  CHECK(budget::split_spec("a/b.safetensors:inputs.h") == std::pair<std::string, std::string>{"a/b.safetensors", "inputs.h"});
  CHECK(budget::split_spec("a/b.safetensors") == std::pair<std::string, std::string>{"a/b.safetensors", ""});
  CHECK(budget::split_spec("c:/x.npy") == std::pair<std::string, std::string>{"c:/x.npy", ""});

  const auto npy = temp_file("act.npy");
  std::vector<float> v(3 * 64);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = float(i) * 0.25f;
  ref::npy::write_f32(npy, {3, 64}, v);
  const auto a = budget::load_activations(npy.string());
  CHECK(a.tokens == 3);
  CHECK(a.k == 64);
  CHECK(a.data == v);

  const auto st = temp_file("act.safetensors");
  ref::safetensors::Writer wr;
  wr.add_f32("act", {2, 96}, std::vector<float>(192, 1.5f));
  wr.write(st);
  const auto b = budget::load_activations(st.string() + ":act");
  CHECK(b.tokens == 2);
  CHECK(b.k == 96);
  CHECK_THROWS_WITH_AS(budget::load_activations(st.string()), doctest::Contains("act [2, 96]"), Error);  // lists what is there
  CHECK_THROWS_AS(budget::load_activations(st.string() + ":nope"), Error);
  CHECK_THROWS_WITH_AS(budget::load_activations(temp_file("x.txt").string()), doctest::Contains("expected PATH.npy"), Error);
  CHECK_THROWS_AS(budget::load_activations(temp_file("missing.npy").string()), Error);
  // Empty and non-finite arrays.
  ref::npy::write_f32(npy, {0, 64}, {});
  CHECK_THROWS_WITH_AS(budget::load_activations(npy.string()), doctest::Contains("empty"), Error);
  v[5] = std::numeric_limits<float>::quiet_NaN();
  ref::npy::write_f32(npy, {3, 64}, v);
  CHECK_THROWS_WITH_AS(budget::load_activations(npy.string()), doctest::Contains("not finite"), Error);
  fs::remove(npy);
  fs::remove(st);
}

TEST_CASE("error-budget --quick runs without a device and writes error_budget records as reports/SCHEMA.md states") {
  const Experiment& e = registry().experiment("error-budget");
  CHECK(!e.needs_device);
  ::unsetenv("KLAB_ACTIVATIONS");
  ::setenv("KLAB_GDN_FIXTURES", (fs::path(KLAB_SOURCE_DIR) / "tests" / "fixtures" / "gdn").c_str(), 1);
  RunOptions opt;
  opt.quick = true;
  Report rep(nlohmann::json::object());
  Context ctx(registry(), e, opt, rep, nullptr, nullptr, nullptr);
  e.run(ctx);
  ctx.finish();
  ::unsetenv("KLAB_GDN_FIXTURES");
  std::set<std::string> dists, shapes;
  int budgets = 0, claims = 0;
  for (const auto& r : rep.records()) {
    CHECK(r.contains("kind"));
    CHECK(r.at("experiment") == "error-budget");
    if (r.at("kind") == "error_budget") {
      ++budgets;
      CHECK(r.at("shape").is_string());
      CHECK(r.at("dist").is_string());
      CHECK(r.at("rms_rel").is_number());
      CHECK(r.at("max_rel").is_number());
      CHECK(r.at("what").is_string());
      const double rr = r.at("rms_rel").get<double>();
      CHECK(rr > 0);  // q4 of random weights is never exact
      CHECK(rr < 1);
      dists.insert(r.at("dist").get<std::string>());
      shapes.insert(r.at("shape").get<std::string>());
      if (r.at("dist") == "file") {
        CHECK(r.at("source").is_string());
        CHECK(contains(r.at("source_note").get<std::string>(), "synthetic"));
      }
    }
    if (r.at("kind") == "claim") {
      ++claims;
      CHECK(r.at("state").is_string());
    }
  }
  CHECK(dists == std::set<std::string>{"uniform", "normal", "student-t", "outlier", "file"});
  CHECK(shapes.count("640x512") == 1);
  CHECK(budgets >= 2 * 4 * 3);  // two comparisons x four distributions x three seeded shapes, at least
  CHECK(claims == int(e.claims.size()));
  // The claims that --quick can settle are settled (the seed's figure needs the full shapes).
  for (std::size_t i = 0; i < 4; ++i) CHECK(ctx.claims()[i].state != ClaimState::not_evaluated);
  CHECK(ctx.claims()[4].state == ClaimState::not_evaluated);
}
