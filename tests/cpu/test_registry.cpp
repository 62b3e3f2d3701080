// The registry: enumeration, stable names, refusals of unknown and duplicate names, globbing.
#include <doctest/doctest.h>

#include <limits>
#include <set>

#include "f32_gemv/kernels.hpp"
#include "gdn/q4_pool.hpp"
#include "gdn/step_op.hpp"
#include "klab/catalog.hpp"
#include "klab/error.hpp"
#include "klab/race.hpp"
#include "klab/registry.hpp"

using namespace klab;

TEST_CASE("every variant's name is derived from its op and axes, and its op is registered") {
  const auto& r = registry();
  REQUIRE(!r.variants().empty());
  for (const auto& [name, v] : r.variants()) {
    CAPTURE(name);
    CHECK(name == variant_name(v.op, v.axes));
    CHECK(r.ops().count(v.op) == 1);
    CHECK(!v.description.empty());
    CHECK(static_cast<bool>(v.make));
  }
  for (const auto& [name, e] : r.experiments()) {
    CAPTURE(name);
    CHECK(!e.claims.empty());
    CHECK(!e.description.empty());
  }
}

TEST_CASE("the f32_gemv family: our kernel and the cuBLAS peer") {
  auto vs = registry().variants_of("f32_gemv");
  std::set<std::string> names;
  for (auto* v : vs) names.insert(v->name);
  CHECK(names.count("f32_gemv/impl=warp-row,unroll=1") == 1);
  CHECK(names.count("f32_gemv/impl=cublas-sgemv") == 1);
  CHECK(registry().variant("f32_gemv/impl=cublas-sgemv").peer);
}

TEST_CASE("unknown names are refused with the known ones listed") {
  try {
    registry().variant("f32_gemv/impl=nope");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("f32_gemv/impl=warp-row,unroll=1") != std::string::npos);
  }
  CHECK_THROWS_AS(registry().experiment("no-such-experiment"), Error);
  CHECK_THROWS_AS(registry().op("no_such_op"), Error);
}

TEST_CASE("unknown names get a 'did you mean' with the nearest known names") {
  auto message = [](auto&& lookup) {
    try {
      lookup();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // A typo (one letter dropped): the one name a single edit away.
  auto typo = message([] { registry().variant("f32_gemv/impl=warp-row,unrol=4"); });
  CHECK(typo.find("did you mean 'f32_gemv/impl=warp-row,unroll=4'") != std::string::npos);
  // A fragment: names that contain it, shortest first, at most five.
  auto frag = message([] { registry().variant("dot=offset,rows=8"); });
  CHECK(frag.find("did you mean 'q4_gemv/map=block-per-thread,dot=offset,rows=8'") != std::string::npos);
  auto exp = message([] { registry().experiment("q4-vs-peer"); });
  CHECK(exp.find("did you mean 'q4-vs-peers'") != std::string::npos);
  // Nothing near: the known names are listed instead, and no guess is made.
  auto far = message([] { registry().op("zzzzzzzzzzzz"); });
  CHECK(far.find("did you mean") == std::string::npos);
  CHECK(far.find("known: ") != std::string::npos);
}

TEST_CASE("a registry refuses duplicates and variants of unknown ops") {
  Registry r;
  Op op;
  op.name = "x";
  r.add(op);
  CHECK_THROWS_AS(r.add(op), Error);
  Variant v;
  v.op = "y";
  v.name = "y/a=b";
  v.make = [](const Workload&) -> std::unique_ptr<Instance> { return nullptr; };
  CHECK_THROWS_AS(r.add(v), Error);
  v.op = "x";
  v.name = "x/a=b";
  r.add(v);
  CHECK_THROWS_AS(r.add(v), Error);
}

TEST_CASE("glob matching") {
  CHECK(Registry::glob_match("*", "anything"));
  CHECK(Registry::glob_match("q4_gemv/*rows=4*", "q4_gemv/scale=lane,rows=4"));
  CHECK_FALSE(Registry::glob_match("q4_gemv/*rows=4", "q4_gemv/rows=1"));
  CHECK(Registry::glob_match("f32_gemv/impl=?arp-row*", "f32_gemv/impl=warp-row,unroll=1"));
  CHECK_FALSE(Registry::glob_match("", "x"));
}

TEST_CASE("an op's declared parameters: defaults, --set names checked against every op's") {
  Registry r;
  Op op;
  op.name = "toy";
  op.params = {{"batch", "sequences at once", 1, {1, 8, 32}, {2}}, {"dk", "key head dim", 128, {128}, {16}}};
  r.add(op);
  const Problem p = r.op("toy").default_problem(Dist::normal, 7);
  CHECK(p.shape.m == 0);
  CHECK(p.param("batch") == 1);
  CHECK(p.param("dk") == 128);
  CHECK(p.str() == "batch=1,dk=128/normal/seed=7");
  r.check_param_name("batch");
  r.check_param_name("m");
  r.check_param_name("dist");
  try {
    r.check_param_name("bacth");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("--set: unknown parameter 'bacth'; did you mean 'batch'") != std::string::npos);
  }
  // Every combination of the declared seed values (quick: quick values); none for a mat-vec op.
  const auto seed = r.op("toy").declared_problems(false, Dist::uniform, 3);
  REQUIRE(seed.size() == 3);
  CHECK(seed[0].key() == "batch=1,dk=128");
  CHECK(seed[2].key() == "batch=32,dk=128");
  CHECK(seed[2].seed == 3);
  const auto quick = r.op("toy").declared_problems(true);
  REQUIRE(quick.size() == 1);
  CHECK(quick[0].key() == "batch=2,dk=16");
  CHECK(Op{}.declared_problems(false).empty());
}

TEST_CASE("an op with one output names it y, an instance without output() says it has named outputs") {
  Op op;
  op.name = "toy";
  op.reference = [](const Workload&) { return std::vector<double>{1, 2}; };
  Workload w;
  const auto refs = op.references_of(w);
  REQUIRE(refs.size() == 1);
  CHECK(refs[0].name == "y");
  CHECK(refs[0].data == std::vector<double>{1, 2});
  op.references = [](const Workload&) { return std::vector<Named<double>>{{"out", {1}}, {"S", {2, 3}}}; };
  CHECK(op.references_of(w).size() == 2);
  CHECK(op.references_of(w)[1].name == "S");
  struct Many : Instance {
    void run(cudaStream_t) override {}
    void poison(cudaStream_t) override {}
  } many;
  CHECK_THROWS_WITH_AS(many.outputs(), doctest::Contains("names its outputs"), Error);
}

TEST_CASE("kernels other families compose are chosen one way: by their registered variant names") {
  for (const auto& k : f32_gemv::f32_kernels()) CHECK(registry().has_variant(k.name));
  CHECK_THROWS_WITH_AS(f32_gemv::f32_kernel("f32_gemv/impl=nope"), doctest::Contains("f32_gemv/impl=warp-row,unroll=1"), Error);
  // The GDN step's variants name the q4 kernel they run; each is registered under that derived name.
  CHECK(registry().has_variant(gdn::q4_step_variant(gdn::kDefaultQ4Variant)));
  CHECK(gdn::q4_step_variant(gdn::kDefaultQ4Variant) == "gdn_step/tier=q4,proj=map=block-per-thread+dot=offset+rows=8");
  const Op& step = registry().op("gdn_step");
  const Problem p = step.default_problem();
  CHECK(step.validate(p).empty());
  CHECK(p.param("hidden") == 5120);
  CHECK(p.param("weights") == 1);
  // 16 tokens of the Qwen3.5-27B layer on the q4 tier: the q4 bytes of the big three per token.
  const Traffic t = step.traffic(p);
  CHECK(t.bytes == doctest::Approx(16 * gdn::step_bytes(gdn::step_geometry(p), true)));
  Problem f = p;
  f.params["weights"] = 0;
  CHECK(step.traffic(f).bytes > 5 * t.bytes);  // 4 bytes a weight against 0.5625
  CHECK(registry().variant(gdn::q4_step_variant(gdn::kDefaultQ4Variant)).can_implement(f).find("weights=1") != std::string::npos);
  f.params["tokens"] = 0;
  CHECK(step.validate(f).find("tokens") != std::string::npos);
}

TEST_CASE("verify_outputs: names, order and sizes must match the reference's, the worst tensor counts, a non-finite one first") {
  const std::vector<Named<double>> refs{{"out", {1, 2}}, {"S", {4, 8}}};
  CHECK_THROWS_WITH_AS(verify_outputs("v", {{"S", {4, 8}}, {"out", {1, 2}}}, refs), doctest::Contains("out[2], S[2]"), Error);
  CHECK_THROWS_AS(verify_outputs("v", {{"out", {1, 2}}}, refs), Error);
  CHECK_THROWS_AS(verify_outputs("v", {{"out", {1, 2}}, {"S", {4}}}, refs), Error);
  // S off by 0.8 of its largest |value| 8: max_rel 0.1, worse than out's exact 0.
  CHECK(verify_outputs("v", {{"out", {1, 2}}, {"S", {4, 8.8f}}}, refs).max_rel == doctest::Approx(0.1).epsilon(1e-6));
  // A NaN in out outranks S's larger max_rel.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK_FALSE(verify_outputs("v", {{"out", {1, nan}}, {"S", {4, 16}}}, refs).finite());
}
