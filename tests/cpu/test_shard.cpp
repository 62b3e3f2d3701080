// --shard I/N (issue 12, part 7): every race() call of a run is numbered in order, experiment after
// experiment, and shard I races the ones with number % N == I. Checked without a device: race()
// then writes one skip record per variant of each race it keeps ("VARIANT on PROBLEM"), and none for
// a race it leaves to another shard, so the skip records name the races a shard took.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "klab/catalog.hpp"
#include "klab/error.hpp"
#include "klab/experiment.hpp"
#include "klab/race.hpp"
#include "klab/registry.hpp"
#include "klab/report.hpp"

using namespace klab;

namespace {
const char* const kA = "f32_gemv/impl=warp-row,unroll=1";
const char* const kB = "f32_gemv/impl=cublas-sgemv";
const Claim kAll{"all", "held on every shape (stated over them: needs)"};
const Claim kBare{"bare", "held on every race (no needs: the shard guard)"};
const Claim kFails{"fails", "does not hold on 8x4"};

// An experiment racing A and B on `ms` x 4 (uniform): settles `all` per shape and `bare` per race
// when the race wrote records (it was this shard's), and `fails` not held on 8x4.
Experiment racing(const std::string& name, std::vector<int> ms) {
  Experiment e;
  e.name = name;
  e.description = "races for the shard test";
  e.claims = {kAll, kBare, kFails};
  e.needs_device = false;
  e.run = [ms](Context& ctx) {
    const Op& op = ctx.registry().op("f32_gemv");
    const std::vector<const Variant*> vs{&ctx.registry().variant(kA), &ctx.registry().variant(kB)};
    std::vector<std::string> keys;
    for (int m : ms) keys.push_back(Shape{m, 4}.str());
    ctx.claim(kAll).needs(keys);
    for (int m : ms) {
      const std::size_t before = ctx.report().records().size();
      race(ctx, op, vs, Problem{Shape{m, 4}, Dist::uniform, 1}, RaceOptions{});
      if (ctx.report().records().size() == before) continue;  // another shard's race
      ctx.claim(kAll).settle(Shape{m, 4}.str(), true, "ran " + Shape{m, 4}.str());
      ctx.claim(kBare).settle(true, "ran " + Shape{m, 4}.str());
      if (m == 8) ctx.claim(kFails).settle(false, "8x4 did not");
    }
  };
  return e;
}

struct ShardRun {
  std::vector<std::string> skips;              // the races this shard took, by their skip records
  std::map<std::string, std::string> claims;   // "experiment/claim" -> state
};

// Runs two experiments (5 races, then 2) as klab run does: one Context per experiment, one race
// counter for the run. No device: the races write skip records.
ShardRun run_shard(int index, int count) {
  RunOptions opt;
  opt.shard_index = index;
  opt.shard_count = count;
  Report rep{nlohmann::json::object()};
  std::size_t races = 0;
  ShardRun out;
  for (const Experiment& e : {racing("first", {4, 8, 12, 16, 20}), racing("second", {24, 28})}) {
    Context ctx(registry(), e, opt, rep, nullptr, nullptr, nullptr, &races);
    e.run(ctx);
    ctx.finish();
    for (const auto& c : ctx.claims()) out.claims[e.name + "/" + c.id] = to_string(c.state);
  }
  CHECK(races == 7);
  for (const auto& r : rep.records())
    if (r.at("kind") == "skip") out.skips.push_back(r.at("experiment").get<std::string>() + ": " + r.at("what").get<std::string>());
  return out;
}
}  // namespace

TEST_CASE("shard: parse_shard takes I/N with 0 <= I < N and refuses the rest") {
  CHECK(parse_shard("0/1") == std::pair{0, 1});
  CHECK(parse_shard("1/2") == std::pair{1, 2});
  CHECK(parse_shard("7/8") == std::pair{7, 8});
  for (const char* bad : {"2/2", "3/2", "0/0", "1/0", "-1/2", "1/-2", "a/b", "1", "1/", "/2", "1/2/3", "0/2x", " 0/2", "1.0/2", ""}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_shard(bad), Error);
  }
  CHECK_THROWS_WITH(parse_shard("2/2"), doctest::Contains("I must be below N"));
  CHECK_THROWS_WITH(parse_shard("1/0"), doctest::Contains("N must be at least 1"));
  CHECK_THROWS_WITH(parse_shard("x"), doctest::Contains("--shard must be I/N"));
}

TEST_CASE("shard: the shards 0..N-1 race every race of the run exactly once") {
  const ShardRun whole = run_shard(0, 1);
  REQUIRE(whole.skips.size() == 14);  // 7 races x 2 variants
  const std::multiset<std::string> all(whole.skips.begin(), whole.skips.end());
  for (int n : {2, 3, 4, 7, 9}) {
    CAPTURE(n);
    std::multiset<std::string> joined;
    for (int i = 0; i < n; ++i) {
      const auto s = run_shard(i, n);
      // Race r of the run (0-based, in order) is shard r % n's: 7 races give shard i ceil((7 - i) / n).
      const int races = i < 7 ? (7 - i + n - 1) / n : 0;
      CHECK(s.skips.size() == std::size_t(2 * races));
      joined.insert(s.skips.begin(), s.skips.end());
    }
    CHECK(joined == all);
  }
  // The numbering runs across experiments: with N = 2, shard 1 takes 8x4 and 16x4 of "first" (races
  // 1 and 3) and 24x4 of "second" (race 5), not its races 0 / 1.
  const auto s1 = run_shard(1, 2);
  std::set<std::string> shapes;
  for (const auto& w : s1.skips) {  // "first: VARIANT on 8x4/uniform/seed=1" -> "first 8x4"
    const auto on = w.find(" on ") + 4;
    shapes.insert(w.substr(0, w.find(':')) + " " + w.substr(on, w.find('/', on) - on));
  }
  CHECK(shapes == std::set<std::string>{"first 8x4", "first 16x4", "second 24x4"});
}

TEST_CASE("shard: claims over races in other shards stay not_evaluated, one not held is not held") {
  const auto whole = run_shard(0, 1);
  CHECK(whole.claims.at("first/all") == "held");
  CHECK(whole.claims.at("first/bare") == "held");
  CHECK(whole.claims.at("first/fails") == "not_held");
  const auto s0 = run_shard(0, 2), s1 = run_shard(1, 2);
  // needs(): the shapes of the other shard are missing.
  CHECK(s0.claims.at("first/all") == "not_evaluated");
  CHECK(s1.claims.at("first/all") == "not_evaluated");
  // No needs(): held on a shard's races only is not held on what the claim is stated over.
  CHECK(s0.claims.at("first/bare") == "not_evaluated");
  CHECK(s1.claims.at("second/bare") == "not_evaluated");
  // 8x4 is race 1: shard 1 has it not held; shard 0 never evaluated it.
  CHECK(s1.claims.at("first/fails") == "not_held");
  CHECK(s0.claims.at("first/fails") == "not_evaluated");
  const auto only = run_shard(6, 7);  // race 6: 28x4 of "second", the other "second" race (5) elsewhere
  CHECK(only.claims.at("second/bare") == "not_evaluated");
  CHECK(only.claims.at("first/bare") == "not_evaluated");
}

TEST_CASE("shard: all of an experiment's races in one shard settle its claims as unsharded") {
  // N = 2 puts races 0..6 in shards 0,1,0,1,...: no experiment whole in one. An experiment of one
  // race (race 0) under N = 2 is whole in shard 0.
  RunOptions opt;
  opt.shard_index = 0;
  opt.shard_count = 2;
  Report rep{nlohmann::json::object()};
  std::size_t races = 0;
  const Experiment e = racing("one", {4});
  Context ctx(registry(), e, opt, rep, nullptr, nullptr, nullptr, &races);
  e.run(ctx);
  CHECK(ctx.claim(kAll).result().state == ClaimState::held);
  CHECK(ctx.claim(kBare).result().state == ClaimState::held);
  CHECK(races == 1);
}
