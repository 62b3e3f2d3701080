#pragma once
// What an experiment's run function sees: the options, the device and the ceiling measured in this
// run, the timer, and the report. It states claims up front (Experiment::claims) and settles each
// through its handle, ctx.claim(c); anything left unsettled is reported as not evaluated, never as held.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "klab/device.hpp"
#include "klab/registry.hpp"
#include "klab/report.hpp"
#include "klab/timing.hpp"

namespace klab {

struct RunOptions {
  int reps = 50;
  int warmup = 5;
  std::uint64_t seed = 1;
  bool hot = false;       // --hot: leave L2 warm between repetitions
  int device = 0;
  bool quick = false;     // smaller problems (tests, smoke runs)
  bool trace = false;     // --trace: every timed subject's kernels recorded once (TimingOptions::trace)
  // The timing modes every race measures (--timing); stream, where measured, is the headline.
  std::vector<TimingMode> modes{TimingMode::launch, TimingMode::stream};
  TimingOptions timing() const { return TimingOptions{.reps = reps, .warmup = warmup, .l2_cold = !hot, .trace = trace}; }
  // A slice of a run (--variants, --set): races keep only the variants whose names match `variants`
  // (patterns separated by '|', any one matching: each a glob, or without * or ? a fragment of the
  // name; empty: all; variant_patterns), and only the problems whose
  // parameters (dist, m, k, or an op's own: Problem::param) take one of the values in `set` (a name
  // missing from `set`, or one the problem does not have: any value). Claims whose
  // evaluations fall outside the slice stay not_evaluated, saying which are missing.
  std::string variants;
  std::map<std::string, std::vector<std::string>> set;
  bool selects(const std::string& variant_name) const;
  bool selects(const Problem& p) const;
  // A shard of a run (--shard I/N): every race() call of the run is numbered in order (experiment
  // order, then call order inside an experiment; Context::next_race), and a shard races the ones
  // whose number % shard_count == shard_index; the others it skips without records. Claims whose
  // evaluations fall in other shards stay not_evaluated (ClaimRef::needs; a claim stated without
  // needs() that held on this shard's races only is not_evaluated too: Context::publish_claim).
  // The shards of one run, merged (scripts/merge_reports.py), cover every race exactly once, as long
  // as an experiment's sequence of race() calls does not depend on what its races measured.
  int shard_index = 0;
  int shard_count = 1;
  bool selects_race(std::size_t race_index) const {
    return race_index % static_cast<std::size_t>(shard_count) == static_cast<std::size_t>(shard_index);
  }
};
// "I/N" -> {I, N}: digits only, 0 <= I < N, N >= 1; anything else is refused (klab::Error naming it).
std::pair<int, int> parse_shard(const std::string& text);
// "m=17408,10240,k=5120" -> {m: [17408, 10240], k: [5120]}: a word with '=' starts a parameter, one
// without adds a value to the last. dist takes distribution names, every other parameter positive
// integers. Malformed names, empty values and malformed values are refused (klab::Error naming them);
// whether a name is declared is the caller's check (Registry::check_param_name).
std::map<std::string, std::vector<std::string>> parse_set(const std::string& text);
// "*xprep=flag*|impl=cublas-bf16" -> {"*xprep=flag*", "impl=cublas-bf16"}: --variants' patterns, any of
// which selects a variant ('|', since ',' and '=' stand in variant names). "" -> {}. An empty pattern
// ("a||b", a leading or trailing '|') is refused (klab::Error naming the text).
std::vector<std::string> variant_patterns(const std::string& text);

enum class ClaimState { held, not_held, not_evaluated };
std::string to_string(ClaimState s);

struct ClaimResult {
  std::string id;
  std::string text;
  ClaimState state = ClaimState::not_evaluated;
  std::string evidence;
};

class Context;

// A stated claim of the running experiment (Context::claim), settled through it. Evaluations are
// named by key (a shape "17408x5120", or a problem "17408x5120/uniform"): needs() declares the ones
// the claim is stated over, settle() reports one.
class ClaimRef {
 public:
  const std::string& id() const;
  // Declares the evaluations the claim needs, by name (e.g. the four seed shapes of a claim stated
  // "on the four seed shapes"). A claim that held on every evaluation it got but lacks one of these
  // (a variant skipped, a shape not timed, --quick) stays not_evaluated, its evidence naming the
  // missing ones; one evaluation not held makes it not_held whatever is missing.
  ClaimRef& needs(std::vector<std::string> keys);
  // Settles the claim outright: replaces whatever was settled before.
  void set(bool held, const std::string& evidence);
  // Settles one evaluation (once per problem): the claim holds only if it held every time; the
  // evidence of each evaluation is kept (after a failure, only that of the failing ones).
  void settle(bool held, const std::string& evidence);
  // The same, naming the evaluation (for needs()).
  void settle(const std::string& key, bool held, const std::string& evidence);
  // Where the claim stands now.
  const ClaimResult& result() const;

 private:
  friend class Context;
  ClaimRef(Context& ctx, std::size_t index) : ctx_(&ctx), index_(index) {}
  Context* ctx_;
  std::size_t index_;
};

class Context {
 public:
  // `reg` is the run's registry (the CLI passes the catalogue's, klab/catalog.hpp); experiments
  // find their ops and variants in it, never in a registry of their own.
  // `race_counter`: the run's count of race() calls so far, shared by the contexts of one run (the
  // race numbers of --shard); null: this context counts its own, from 0.
  Context(const Registry& reg, const Experiment& e, const RunOptions& o, Report& r, const DeviceInfo* dev,
          const Ceiling* ceiling, Timer* timer, std::size_t* race_counter = nullptr);

  const Registry& registry() const { return reg_; }
  const Experiment& experiment() const { return exp_; }
  const RunOptions& options() const { return opt_; }
  Report& report() { return report_; }
  bool has_device() const { return dev_ != nullptr; }
  const DeviceInfo& device() const;    // throws when there is none
  const Ceiling& ceiling() const;
  Timer& timer();

  // A record with the experiment's name and the given kind, ready to fill and add().
  nlohmann::json record(const std::string& kind) const;
  void add(nlohmann::json rec) { report_.add(std::move(rec)); }
  // A skip, with its reason, printed and recorded.
  void skip(const std::string& what, const std::string& reason);
  // The handle of a claim the experiment stated (found by id); throws klab::Error naming the stated
  // ids when it stated no such claim.
  ClaimRef claim(const Claim& c);
  ClaimRef claim(const std::string& id);
  // Progress line on stderr.
  void log(const std::string& line) const;

  // The run-wide number of the race() call being made (counts it); race() asks, first thing.
  std::size_t next_race() { return (*races_)++; }
  // A race of this experiment was left to another shard: a claim settled held without needs() is
  // then held on this shard's races only, and published as not_evaluated.
  void race_in_other_shard();

  const std::vector<ClaimResult>& claims() const { return claims_; }
  // Adds one "claim" record per stated claim (its index among the stated claims, id, text, state,
  // evidence); returns the number not held.
  int finish();

 private:
  const Registry& reg_;
  const Experiment& exp_;
  RunOptions opt_;
  Report& report_;
  const DeviceInfo* dev_;
  const Ceiling* ceiling_;
  Timer* timer_;
  std::vector<ClaimResult> claims_;
  std::size_t own_races_ = 0;
  std::size_t* races_;
  int other_shard_races_ = 0;
  // Per claim: the verdict over the evaluations it got, and the evaluations it needs / got by name;
  // claims_ is published from these (publish_claim).
  struct ClaimBook {
    ClaimState state = ClaimState::not_evaluated;
    std::string evidence;
    std::vector<std::string> needs, got;
  };
  std::vector<ClaimBook> books_;
  friend class ClaimRef;
  void publish_claim(std::size_t index);
};

}  // namespace klab
