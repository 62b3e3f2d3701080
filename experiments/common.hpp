#pragma once
// Shared pieces of the experiment catalogue.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "klab/experiment.hpp"
#include "klab/problem.hpp"
#include "klab/race.hpp"

namespace klab::experiments {

// Seed shapes, or (with --quick) small shapes that still exercise every code path.
std::vector<Shape> shapes_for(const Context& ctx, std::vector<Shape> full, std::vector<Shape> quick);

// The problems of an op that declares its parameters (Op::params): each parameter at its default
// (--quick: its first quick value), or at every value --set gives it (a sweep, nvbench's -a); the
// cartesian product, in the declared order, each with `dist` and the run's seed.
std::vector<Problem> op_problems(const Context& ctx, const Op& op, Dist dist);

// Names of evaluations for ClaimRef::needs / settle: a shape ("17408x5120"), or a shape and
// an input distribution ("17408x5120/uniform", one per distribution and shape).
std::vector<std::string> shape_keys(const std::vector<Shape>& shapes);
std::string problem_key(const Shape& s, Dist d);
std::vector<std::string> problem_keys(const std::vector<Shape>& shapes, const std::vector<Dist>& dists);

// Looks up variants by name in the run's registry (throws naming the missing one).
std::vector<const Variant*> lookup(const Context& ctx, const std::vector<std::string>& names);

// The GDN oracle fixtures (*.safetensors): $KLAB_GDN_FIXTURES, else tests/fixtures/gdn under the
// working directory, else under the source tree the binary was built in (build/NAME/bin/klab ->
// ../../..). `looked` collects the directories tried (for a skip's reason).
std::vector<std::filesystem::path> gdn_fixture_files(std::string& looked);

// Shorthand printf-style formatting for evidence strings.
std::string fmt(const char* f, double a, double b = 0, double c = 0, double d = 0);
// Elements differing bit for bit between two measurements' named outputs, output by output in order.
std::int64_t outputs_bitwise_diff(const Measured& a, const Measured& b);
// The elements of the output named `name` that differ bitwise between a and b; throws klab::Error, naming
// the outputs there are, when either lacks it.
std::int64_t named_bitwise_diff(const Measured& a, const Measured& b, const std::string& name);

// The rates of a step that moves `bytes` in `ms_per_step` (a multi-token timing divided by its
// tokens): gbps, pct_ceiling (vs the run's big read) and pct_attainable (vs a read of exactly those
// bytes back to back in a graph, as the steps of a multi-token repetition run), set on `rec`.
void add_rates(Context& ctx, nlohmann::json& rec, double bytes, double ms_per_step);

// An ad-hoc A/B experiment (the `klab ab` command): A and B of `reg` on one shape and input
// distribution (`reg` must outlive the experiment).
Experiment make_ab(const Registry& reg, const std::string& a, const std::string& b, Shape shape, Dist dist);

void register_f32_gemv(Registry& r);
// The q4 mat-vec A/B history: scale-read, accum-chains, f16-convert, rows-per-warp, seed-ladder.
void register_q4_gemv(Registry& r);
// Issue 13: q4-to-ceiling, the ladder from block-per-thread,dot=offset,rows=8 through map=packed.
void register_q4_ceiling(Registry& r);
// Issue 13: q4-prep-split, the x-prep launch against the main kernel alone (xprep=producer twins).
void register_q4_prep_split(Registry& r);
// Issue 14 part 4: q4-gemm-batch, the q4 mat-vec at n = 1, 8, 32 columns (impl=loop vs the batched kernels).
void register_q4_gemm_batch(Registry& r);
// The GDN step's f32 tier: gdn-f32-oracle; gdn-reset-replay and gdn-cross-layer; gdn-drift.
void register_gdn_oracle(Registry& r);
void register_gdn_guards(Registry& r);
void register_gdn_drift(Registry& r);
void register_gdn_state_drift(Registry& r);
// The GDN step's q4 tier: gdn-q4-per-op, gdn-q4-gates.
void register_gdn_q4_per_op(Registry& r);
void register_gdn_q4_gates(Registry& r);
// error-budget: q4 weights under several input distributions (no device needed).
void register_error_budget(Registry& r);
// gdn-q4-layer: op gdn_step raced through race() (f32 vs q4 tier, host-facing, every q4 kernel).
void register_gdn_layer(Registry& r);
// Issue 14: gdn-recurrence, the recurrence's variants at batch 1, 8, 32 (fla's records join it: peers/run.py).
void register_gdn_recurrence(Registry& r);
// Issue 14 part 5: gdn-stack, a token through 48 layers as one CUDA graph (f32 and q4 tiers).
void register_gdn_stack(Registry& r);
// Issue 14: gdn-step-breakdown, each operator's time inside the GDN step (stream mode), f32 and q4 tiers.
void register_gdn_breakdown(Registry& r);
// Issue 14: gdn-step-fused, the step with beta/g, conv and the q/k norm as one launch, and its candidates.
void register_gdn_fused(Registry& r);
// Issue 14 part 4: gdn-batch, one token of B = 1, 8, 32 slots in one batched step against B single steps.
void register_gdn_batch(Registry& r);

}  // namespace klab::experiments
