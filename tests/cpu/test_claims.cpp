// The claim logic of an experiment's Context (klab/experiment.hpp), through the handles of its stated
// claims (ctx.claim(c)): a claim settled once per
// problem holds only if it held every time, and a claim stated over a set of evaluations (the four
// seed shapes) that missed one of them stays not_evaluated, naming the missing ones, unless an
// evaluation it got did not hold.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "klab/catalog.hpp"
#include "klab/error.hpp"
#include "klab/experiment.hpp"
#include "klab/registry.hpp"
#include "common.hpp"
#include "klab/report.hpp"

using namespace klab;

namespace {
const std::vector<std::string> kSeedShapes{"17408x5120", "10240x5120", "6144x5120", "5120x6144"};

const Claim kFaster{"faster", "B is faster than A on the four seed shapes"};
const Claim kAgree{"agree", "A and B agree on every shape"};

Experiment two_claims() {
  Experiment e;
  e.name = "claims-test";
  e.description = "two claims";
  e.claims = {kFaster, kAgree};
  e.needs_device = false;
  return e;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A Context with nothing but its claims (no device, no ceiling, no timer).
struct Fresh {
  Experiment e = two_claims();
  Report rep{nlohmann::json::object()};
  Context ctx{registry(), e, RunOptions{}, rep, nullptr, nullptr, nullptr};
};
}  // namespace

TEST_CASE("claims: unsettled is not_evaluated, never held") {
  Fresh f;
  REQUIRE(f.ctx.claims().size() == 2);
  CHECK(f.ctx.claims()[0].state == ClaimState::not_evaluated);
  CHECK(f.ctx.claims()[0].text == "B is faster than A on the four seed shapes");
  CHECK(f.ctx.claims()[0].id == "faster");
  CHECK(f.ctx.claim(kAgree).result().state == ClaimState::not_evaluated);
  CHECK(f.ctx.finish() == 0);
  int claims = 0;
  for (const auto& r : f.rep.records())
    if (r.at("kind") == "claim") {
      // Records keep the claim's position among the stated ones (the scripts read it) and add its id.
      CHECK(r.at("index") == claims);
      CHECK(r.at("id") == (claims == 0 ? "faster" : "agree"));
      CHECK(r.at("state") == "not_evaluated");
      ++claims;
    }
  CHECK(claims == 2);
}

TEST_CASE("claims: settle() on every needed evaluation, all held: held, with every evaluation's evidence") {
  Fresh f;
  f.ctx.claim(kFaster).needs(kSeedShapes);
  for (const auto& s : kSeedShapes) f.ctx.claim(kFaster).settle(s, true, s + ": x1.10");
  const auto& c = f.ctx.claims()[0];
  CHECK(c.state == ClaimState::held);
  for (const auto& s : kSeedShapes) CHECK(has(c.evidence, s + ": x1.10"));
  CHECK_FALSE(has(c.evidence, "not evaluated"));
  CHECK(f.ctx.finish() == 0);
}

TEST_CASE("claims: one evaluation not held makes the claim not_held, missing ones or not") {
  SUBCASE("all four evaluated, one not held") {
    Fresh f;
    f.ctx.claim(kFaster).needs(kSeedShapes);
    f.ctx.claim(kFaster).settle(kSeedShapes[0], true, "17408x5120: x1.10");
    f.ctx.claim(kFaster).settle(kSeedShapes[1], false, "10240x5120: x0.95");
    f.ctx.claim(kFaster).settle(kSeedShapes[2], true, "6144x5120: x1.10");
    f.ctx.claim(kFaster).settle(kSeedShapes[3], true, "5120x6144: x1.10");
    const auto& c = f.ctx.claims()[0];
    CHECK(c.state == ClaimState::not_held);
    CHECK(has(c.evidence, "10240x5120: x0.95"));
    CHECK(f.ctx.finish() == 1);
  }
  SUBCASE("one not held, one missing") {
    Fresh f;
    f.ctx.claim(kFaster).needs(kSeedShapes);
    f.ctx.claim(kFaster).settle(kSeedShapes[0], false, "17408x5120: x0.95");
    f.ctx.claim(kFaster).settle(kSeedShapes[1], true, "10240x5120: x1.10");
    f.ctx.claim(kFaster).settle(kSeedShapes[2], true, "6144x5120: x1.10");
    CHECK(f.ctx.claims()[0].state == ClaimState::not_held);
    CHECK(has(f.ctx.claims()[0].evidence, "17408x5120: x0.95"));
    CHECK(f.ctx.finish() == 1);
  }
}

TEST_CASE("claims: held on three of the four seed shapes, the fourth missing: not_evaluated, naming the missing one") {
  Fresh f;
  f.ctx.claim(kFaster).needs(kSeedShapes);
  f.ctx.claim(kFaster).settle("17408x5120", true, "17408x5120: x1.10");
  f.ctx.claim(kFaster).settle("10240x5120", true, "10240x5120: x1.10");
  f.ctx.claim(kFaster).settle("5120x6144", true, "5120x6144: x1.10");  // 6144x5120 skipped (say, a variant refused it)
  const auto& c = f.ctx.claims()[0];
  CAPTURE(c.evidence);
  CHECK(c.state == ClaimState::not_evaluated);
  CHECK(has(c.evidence, "not evaluated on 6144x5120 (1 of the 4 needed)"));
  CHECK(has(c.evidence, "10240x5120: x1.10"));  // what was measured stays in the evidence
  // The claim without needs, settled the same way, holds: the needs are what keep it open.
  f.ctx.claim(kAgree).settle(true, "17408x5120: 0 bits");
  CHECK(f.ctx.claims()[1].state == ClaimState::held);
  // Recorded as not_evaluated, and not counted as a failure.
  CHECK(f.ctx.finish() == 0);
  for (const auto& r : f.rep.records())
    if (r.at("kind") == "claim" && r.at("index") == 0) {
      CHECK(r.at("state") == "not_evaluated");
      CHECK(has(r.at("evidence").get<std::string>(), "6144x5120"));
    }
  // The missing evaluation arriving later settles it.
  f.ctx.claim(kFaster).settle("6144x5120", true, "6144x5120: x1.10");
  CHECK(f.ctx.claims()[0].state == ClaimState::held);
}

TEST_CASE("claims: needs declared and nothing evaluated (--quick: no seed shape) names all of them, needs may come after the evaluations") {
  Fresh f;
  f.ctx.claim(kFaster).needs(kSeedShapes);
  CHECK(f.ctx.claims()[0].state == ClaimState::not_evaluated);
  CHECK(has(f.ctx.claims()[0].evidence, "not evaluated on 17408x5120, 10240x5120, 6144x5120, 5120x6144 (4 of the 4 needed)"));

  // Evaluations under keys that are not needed (other shapes) do not stand in for needed ones.
  f.ctx.claim(kFaster).settle("1024x512", true, "1024x512: x1.10");
  CHECK(f.ctx.claims()[0].state == ClaimState::not_evaluated);

  Fresh g;
  g.ctx.claim(kFaster).settle("17408x5120", true, "17408x5120: x1.10");
  CHECK(g.ctx.claims()[0].state == ClaimState::held);
  g.ctx.claim(kFaster).needs({"17408x5120", "5120x6144"});
  CHECK(g.ctx.claims()[0].state == ClaimState::not_evaluated);
  CHECK(has(g.ctx.claims()[0].evidence, "not evaluated on 5120x6144 (1 of the 2 needed)"));
}

TEST_CASE("claims: set() replaces, a claim the experiment did not state is refused, naming the stated ones") {
  Fresh f;
  f.ctx.claim(kAgree).set(false, "first");
  f.ctx.claim(kAgree).set(true, "second");
  CHECK(f.ctx.claims()[1].state == ClaimState::held);
  CHECK(f.ctx.claims()[1].evidence == "second");
  // By id too: the same claim.
  CHECK(f.ctx.claim("agree").result().evidence == "second");
  CHECK(f.ctx.claim(kAgree).id() == "agree");
  const Claim unstated{"nope", "never stated"};
  CHECK_THROWS_AS(f.ctx.claim(unstated), Error);
  CHECK_THROWS_AS(f.ctx.claim("nope"), Error);
  try {
    f.ctx.claim(unstated);
  } catch (const Error& e) {
    CHECK(has(e.what(), "'nope'"));
    CHECK(has(e.what(), "faster, agree"));
  }
}

TEST_CASE("claims: ids are required and unique, in the registry and in a Context") {
  Experiment e = two_claims();
  e.run = [](Context&) {};
  e.claims.push_back({"faster", "stated twice"});
  Registry r;
  CHECK_THROWS_AS(r.add(e), Error);
  Report rep{nlohmann::json::object()};
  CHECK_THROWS_AS((Context{registry(), e, RunOptions{}, rep, nullptr, nullptr, nullptr}), Error);
  e.claims.back().id = "";
  CHECK_THROWS_AS(r.add(e), Error);
  e.claims.back().id = "third";
  CHECK_NOTHROW(r.add(e));
}

TEST_CASE("a run's slice: --set parsed into parameters, --variants and --set selecting") {
  using klab::parse_set;
  auto s = parse_set("m=17408,10240,k=5120");
  CHECK(s.size() == 2);
  CHECK(s.at("m") == std::vector<std::string>{"17408", "10240"});
  CHECK(s.at("k") == std::vector<std::string>{"5120"});
  // Values are canonical: "05120" is 5120, "Student-T"-style names must be exact.
  CHECK(parse_set("k=05120").at("k") == std::vector<std::string>{"5120"});
  CHECK(parse_set("dist=student-t,uniform").at("dist") == std::vector<std::string>{"student-t", "uniform"});
  // Any well-formed name parses (whether an op declares it is Registry::check_param_name's check).
  CHECK(parse_set("batch=1,8,32").at("batch") == std::vector<std::string>{"1", "8", "32"});
  CHECK_THROWS_WITH_AS(parse_set("Batch=1"), doctest::Contains("not a parameter name"), klab::Error);
  CHECK_THROWS_WITH_AS(parse_set("8x=1"), doctest::Contains("not a parameter name"), klab::Error);
  CHECK_THROWS_WITH_AS(parse_set("17408"), doctest::Contains("names no parameter"), klab::Error);
  CHECK_THROWS_WITH_AS(parse_set("m="), doctest::Contains("empty value"), klab::Error);
  CHECK_THROWS_AS(parse_set("m=abc"), klab::Error);
  CHECK_THROWS_AS(parse_set("m=0"), klab::Error);
  CHECK_THROWS_AS(parse_set("dist=gaussian"), klab::Error);
  CHECK_THROWS_WITH_AS(parse_set("m=1,m=2"), doctest::Contains("given twice"), klab::Error);

  klab::RunOptions o;
  const klab::Problem big{{17408, 5120}, klab::Dist::uniform, 1}, small{{6144, 5120}, klab::Dist::student_t, 1};
  CHECK(o.selects(big));  // no slice: everything
  CHECK(o.selects("q4_gemv/map=block-per-lane,rows=1"));
  o.set = parse_set("m=17408,k=5120");
  CHECK(o.selects(big));
  CHECK_FALSE(o.selects(small));
  o.set = parse_set("dist=student-t");
  CHECK_FALSE(o.selects(big));
  CHECK(o.selects(small));
  // An op's own parameters select alike; a problem without the parameter is not constrained by it.
  klab::Problem b8;
  b8.params = {{"batch", 8}, {"dk", 128}};
  klab::Problem b1 = b8;
  b1.params["batch"] = 1;
  o.set = parse_set("batch=8,32");
  CHECK(o.selects(b8));
  CHECK_FALSE(o.selects(b1));
  CHECK(o.selects(big));
  CHECK(b8.str() == "batch=8,dk=128/uniform/seed=1");
  CHECK(b8.param("dk") == 128);
  CHECK(big.param("m") == 17408);
  CHECK_THROWS_WITH_AS(b8.param("m"), doctest::Contains("no parameter 'm'"), klab::Error);
  // A fragment, or a glob when it has * or ?.
  o.variants = "block-per-thread";
  CHECK(o.selects("q4_gemv/map=block-per-thread,dot=offset,rows=8"));
  CHECK_FALSE(o.selects("q4_gemv/map=block-per-lane,rows=1"));
  o.variants = "q4_gemv/*rows=8";
  CHECK(o.selects("q4_gemv/map=block-per-thread,dot=offset,rows=8"));
  CHECK_FALSE(o.selects("q4_gemv/map=block-per-thread,rows=4"));
  // Several patterns, '|' between them: any one selects (a glob and a fragment here).
  o.variants = "*xprep=flag*|impl=cublas-bf16";
  CHECK(o.selects("q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=flag,pdl=on,rows=8"));
  CHECK(o.selects("q4_gemv/impl=cublas-bf16-gemmex"));
  CHECK_FALSE(o.selects("q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=warps,pdl=on,rows=8"));
  CHECK(klab::variant_patterns("a|b*") == std::vector<std::string>{"a", "b*"});
  CHECK(klab::variant_patterns("").empty());
  for (const char* bad : {"a||b", "|a", "a|", "|"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(klab::variant_patterns(bad), doctest::Contains("an empty pattern"), klab::Error);
  }
}

TEST_CASE("experiments' fmt: every argument a double, a format asking for another type is refused, naming it") {
  CHECK(klab::experiments::fmt("%.2f us, %g x, %5.1f%%, %e", 1.234, 2.0, 3.25, 1e-3) == "1.23 us, 2 x,   3.2%, 1.000000e-03");
  CHECK(klab::experiments::fmt("%.0f single steps", 32) == "32 single steps");
  CHECK_THROWS_WITH_AS(klab::experiments::fmt("%d single steps", 32), doctest::Contains("%d single steps"), klab::Error);
  CHECK_THROWS_AS(klab::experiments::fmt("%s", 1.0), klab::Error);
  CHECK_THROWS_AS(klab::experiments::fmt("%zu", 1.0), klab::Error);
  CHECK_THROWS_AS(klab::experiments::fmt("100%", 1.0), klab::Error);  // a lone % at the end
}

TEST_CASE("Context::timer without one says why: no device, or an experiment that declared no use of it") {
  Fresh f;
  CHECK_THROWS_WITH_AS(f.ctx.timer(), doctest::Contains("there is no device"), Error);
  // A device but no timer: what klab run does for an experiment with needs_device and uses_device false.
  DeviceInfo dev;
  dev.name = "a device";
  Context with_dev{registry(), f.e, RunOptions{}, f.rep, &dev, nullptr, nullptr};
  CHECK(with_dev.has_device());
  CHECK_THROWS_WITH_AS(with_dev.timer(), doctest::Contains("neither needs_device nor uses_device"), Error);
}
