#pragma once
// Racing variants of one op on one problem: verify every variant against the reference (and bit
// for bit against the first, "A") before any timing, then time each, then compare each with A.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "klab/experiment.hpp"
#include "klab/metrics.hpp"
#include "klab/stats.hpp"

namespace klab {

// One timing mode's result for a measured variant.
struct ModeResult {
  TimingMode mode = TimingMode::launch;
  Timing timing;
  double gbps = 0, gmacs = 0;
  double pct_ceiling = 0;     // vs the run's big read (env.ceiling.read_gbps)
  double pct_attainable = 0;  // vs a read of exactly the op's bytes in the same mode
  double attainable_gbps = 0;
  bool attainable_pdl = false;  // the size-matched read was faster with programmatic dependent launch
  std::optional<Comparison> vs_a;  // B against A in this mode (absent for A, or when A lacks the mode)
};

// The verification of one named output of a variant (Instance::outputs, Op::references_of).
struct TensorResult {
  std::string name;
  Accuracy acc;
  std::int64_t bits_vs_a = -1;     // elements differing bitwise from A's tensor of that name (-1: A itself)
  std::int64_t bits_vs_prev = -1;  // ladders: from the previous rung's
  std::uint64_t hash = 0;          // fnv1a64 of its bits
};

struct Measured {
  const Variant* variant = nullptr;
  Problem problem;
  bool skipped = false;
  std::string skip_reason;
  // Every named output, verified against the op's reference of that name and compared bit for bit
  // with A's (and, in ladders, the previous rung's). acc, bits_vs_a, bits_vs_prev and output_hash
  // below sum them up: the worst max_rel, the bits summed, one hash over all in order.
  std::vector<TensorResult> tensors;
  Accuracy acc;
  bool verified = false;          // every tensor finite, fully written, max_rel within the tolerance
  double tolerance = 0;
  std::int64_t bits_vs_a = -1;    // elements differing bitwise from A (-1: A itself or not compared)
  std::string prev;               // ladders: the previous rung (empty: not a ladder, or the first rung)
  std::int64_t bits_vs_prev = -1; // ladders: elements differing bitwise from the previous rung
  std::vector<Named<float>> outputs;  // the verified run's outputs, for comparisons the race does not make
  std::vector<float> output;      // the first of them (a mat-vec's y)
  std::uint64_t input_hash = 0;   // Workload::digest() of the problem (0: the op gives none)
  std::uint64_t output_hash = 0;  // fnv1a64 of the output's bits
  bool timed = false;
  Traffic traffic;                 // the variant's own (Variant::traffic) where it has one, else the op's
  std::optional<double> op_bytes;  // the op's bytes, set only where the variant's own differ
  // Every mode timed, in the run's order (RunOptions::modes), and why stream mode is missing when
  // the variant could not be captured in a graph.
  std::vector<ModeResult> modes;
  std::string stream_unavailable;
  // The headline: stream mode where it was measured, launch otherwise (a copy of that ModeResult).
  Timing timing;
  double gbps = 0, gmacs = 0, pct_ceiling = 0, pct_attainable = 0;
  std::optional<Comparison> vs_a;
  const ModeResult* mode(TimingMode m) const;
};

struct RaceOptions {
  // max_rel allowed against the reference: the first matching glob of tolerance_for, else the
  // variant's own Variant::tolerance when set, else `tolerance`.
  double tolerance = 1e-5;
  std::vector<std::pair<std::string, double>> tolerance_for;  // glob -> tolerance
  bool time = true;
  // A ladder: each of our (non-peer) variants is also compared bit for bit with the previous one.
  bool ladder = false;
};

// Runs the race: verifies every variant (poisoned outputs, the reference, bits vs A), then times the
// verified ones in every mode of the run with their repetitions interleaved (ABAB...), each against
// the size-matched read in the same mode; adds one "measurement" record (or "skip") per variant to the context's report.
std::vector<Measured> race(Context& ctx, const Op& op, const std::vector<const Variant*>& variants,
                           const Problem& problem, const RaceOptions& ro);

// The accuracy of a variant's named outputs against its op's references (Instance::outputs,
// Op::references_of): names, order and sizes must match (klab::Error naming both lists otherwise);
// the worst tensor's, a non-finite one (NaN, Inf, unwritten) first, else the largest max_rel. What
// race() reports as a measurement's accuracy; klab_bench verifies through it too.
Accuracy verify_outputs(const std::string& who, const std::vector<Named<float>>& outs, const std::vector<Named<double>>& refs);

// One record for a measured variant (the fields the scripts read).
nlohmann::json to_json(const Measured& m);

}  // namespace klab
