// gdn-recurrence (issue 14): the recurrence's variants (variants/gdn_recurrence/) raced at batch 1, 8
// and 32 of Qwen3.5-27B's heads (48 value heads, 16 key heads, dk = dv = 128), L2-cold, launch and
// stream mode. A is impl=seed, the step's kernels today. fla's fused_recurrent_gated_delta_rule joins
// the same report as peer records of this experiment (peers/run.py, on the same exported bytes:
// `klab export --op gdn_recurrence --batch B`); it is timed in another process, so no claim here
// names it: the report's tables set it beside ours.
#include <algorithm>
#include <limits>

#include "common.hpp"
#include "gdn_recurrence/variants.hpp"

namespace klab::experiments {

namespace {

std::string batch_key(std::int64_t b) { return "batch=" + std::to_string(b); }

// The timed, verified variant of ours with the lowest headline median (nullptr: none).
const Measured* fastest(const std::vector<Measured>& ms, bool fused_only) {
  const Measured* best = nullptr;
  for (const auto& m : ms) {
    if (m.skipped || !m.timed || !m.verified || m.variant->peer) continue;
    if (fused_only && m.variant->axes.front().second != "fused") continue;
    if (!best || m.timing.summary.median < best->timing.summary.median) best = &m;
  }
  return best;
}

std::string mode_name(const Measured& m) { return m.mode(TimingMode::stream) ? "stream" : "launch"; }

// A flag's twins: (flagged, twin) indices in names, for each name holding `flag` at `at` (and not `unless`,
// when given), its twin named twin_of(name, at); a twin not among the names is an internal error.
template <class TwinOf>
std::vector<std::pair<std::size_t, std::size_t>> flag_twins(const std::vector<std::string>& names, const std::string& flag, TwinOf twin_of,
                                                            const std::string& unless = "") {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  for (std::size_t i = 0; i < names.size(); ++i)
    if (const auto at = names[i].find(flag); at != std::string::npos && (unless.empty() || names[i].find(unless) == std::string::npos)) {
      const std::string twin = twin_of(names[i], at);
      const std::size_t t = std::find(names.begin(), names.end(), twin) - names.begin();
      if (t == names.size()) throw Error("gdn-recurrence: internal: " + names[i] + " has no registered twin " + twin);
      out.emplace_back(i, t);
    }
  return out;
}
// flag_twins where the twin's name is the name with `flag` replaced by `to` ("": the name less the flag).
std::vector<std::pair<std::size_t, std::size_t>> swap_twins(const std::vector<std::string>& names, const std::string& flag, const std::string& to,
                                                            const std::string& unless = "") {
  return flag_twins(names, flag, [&](const std::string& n, std::size_t at) { return n.substr(0, at) + to + n.substr(at + flag.size()); }, unless);
}

// At batch B (key), every flagged kernel against its twin: their o and S bit for bit (`only`: that output
// alone) settle `bits`; their times, where every pair is timed, settle `pays` at batch pays_at and are logged
// at the others. `twin` and `change` name the twin and the flag in the evidence. Nothing when a pair was
// skipped. A null claim is not settled (its evidence is still logged for the times).
void settle_flag_twins(Context& ctx, const std::vector<Measured>& ms, const std::vector<std::pair<std::size_t, std::size_t>>& pairs, std::int64_t B,
                       const std::string& key, const Claim* bits, const Claim* pays, std::int64_t pays_at, const std::string& twin, const std::string& change,
                       const std::string& only = "") {
  if (pairs.empty() || std::any_of(pairs.begin(), pairs.end(), [&](const auto& e) { return ms[e.first].skipped || ms[e.second].skipped; })) return;
  std::int64_t diff = 0;
  bool faster = true, timed = true;
  std::string ev_bits = key + ": elements (" + (only.empty() ? "o and S" : only) + ") differing from " + twin + ":", ev_time = key + ": " + change + ":";
  for (const auto& [i, t] : pairs) {
    const std::int64_t b = only.empty() ? outputs_bitwise_diff(ms[t], ms[i]) : named_bitwise_diff(ms[t], ms[i], only);
    diff += b;
    ev_bits += " " + ms[i].variant->name + " " + std::to_string(b) + ";";
    if (!ms[i].timed || !ms[t].timed) {
      timed = false;
      continue;
    }
    const auto c = compare_times(ms[t].timing.kept_ms, ms[i].timing.kept_ms, std::uint64_t(B));
    faster = faster && c.verdict == Verdict::faster;
    ev_time += " " + ms[i].variant->name + fmt(" %.2f -> %.2f us ", ms[t].timing.summary.median * 1e3, ms[i].timing.summary.median * 1e3) +
               speedup_text(c) + " (" + mode_name(ms[i]) + ");";
  }
  if (bits) ctx.claim(*bits).settle(key, diff == 0, ev_bits);
  if (!timed) return;
  if (pays && B == pays_at) ctx.claim(*pays).settle(key, faster, ev_time);
  else ctx.log(ev_time);
}

}  // namespace

void register_gdn_recurrence(Registry& r) {
  Experiment e;
  e.name = "gdn-recurrence";
  e.description = "GDN recurrence (q/k norm + delta rule, f32 state in place): seed vs S-read-once vs fused one-launch kernels at batch 1, 8, 32";
  const Claim accurate{"accurate", "every variant is within 1e-4 (max_rel) of the f64 reference, on o and on the updated S, at batch 1, 8 and 32"};
  const Claim once_bits{"once-bitwise", "impl=once (S kept in registers) gives impl=seed's o and S bit for bit at batch 1, 8 and 32"};
  const Claim once_faster{"once-faster", "reading S once (impl=once) is faster than impl=seed (S read twice) at batch 1, 8 and 32"};
  const Claim fused_faster{"fused-faster", "the fastest fused one-launch variant is faster than impl=seed at batch 1, 8 and 32"};
  // Issue 14's goals (H200, stream mode); fla took ~8 us at batch 1, ~76 us at batch 32 there.
  const Claim b1_goal{"batch1-2.5us", "the fastest of ours takes at most 2.5 us at batch 1 (headline: stream mode)"};
  const Claim b32_goal{"batch32-50us", "the fastest of ours takes at most 50 us at batch 32 (headline: stream mode)"};
  // pdl=early (kernels_fused.cu): dependents let go at the start, S prefetched into L2 before the wait.
  const Claim early_bits{"early-bitwise", "every pdl=early variant gives its pdl=on twin's o and S bit for bit at batch 1, 8 and 32"};
  const Claim early_pays{"early-pays", "every pdl=early variant is faster than its pdl=on twin at batch 1 (stream mode)"};
  // cache=stream (kernels_fused.cu): S loaded and stored evict-first; twin: the same name without it.
  const Claim stream_bits{"stream-bitwise", "every cache=stream variant gives its twin's (the same without cache=stream) o and S bit for bit at batch 1, 8 and 32"};
  const Claim stream_pays{"stream-pays", "every cache=stream variant is faster than its twin at batch 32 (stream mode)"};
  // stage=smem (kernels_fused.cu): S staged in shared memory by cp.async; twin: the same name without it.
  const Claim stage_bits{"stage-bitwise", "every stage=smem variant gives its twin's (the same without stage=smem) o and S bit for bit at batch 1, 8 and 32"};
  const Claim stage_pays{"stage-pays", "every stage=smem variant is faster than its twin at batch 32 (stream mode)"};
  // pdl=ahead (kernels_fused.cu): S loaded before the wait (pdl=on) and dependents let go first (pdl=early).
  const Claim ahead_bits{"ahead-bitwise", "every pdl=ahead variant gives its pdl=on twin's o and S bit for bit at batch 1, 8 and 32"};
  const Claim ahead_pays{"ahead-pays", "every pdl=ahead variant is faster than its pdl=early twin at batch 1 (stream mode)"};
  // pdl=next (kernels_fused.cu): pdl=ahead with its dependents let go after the wait (one launch ahead at most).
  const Claim next_bits{"next-bitwise", "every pdl=next variant gives its pdl=on twin's o and S bit for bit at batch 1, 8 and 32"};
  const Claim next_pays{"next-pays", "every pdl=next variant is faster than its pdl=ahead twin at batch 1 (stream mode)"};
  // pdl=one-ahead (kernels_fused.cu): pdl=ahead's kernel with its blocks an SM capped (one launch ahead at most).
  const Claim one_bits{"one-ahead-bitwise", "every pdl=one-ahead variant gives its pdl=ahead twin's o and S bit for bit at batch 1, 8 and 32"};
  const Claim one_pays{"one-ahead-pays", "every pdl=one-ahead variant is faster than its pdl=ahead twin at batch 1 (stream mode)"};
  // o=direct (kernels_fused.cu): o without a second reduction; S unchanged, o another order (the accuracy claim holds it).
  const Claim od_bits{"o-direct-state-bitwise", "every o=direct variant gives its twin's (the name less o=direct) S bit for bit at batch 1, 8 and 32"};
  const Claim od_pays{"o-direct-pays", "every o=direct variant is faster than its twin at batch 1 (stream mode)"};
  e.claims = {accurate,    once_bits,  once_faster, fused_faster, b1_goal,    b32_goal,  early_bits, early_pays, stream_bits, stream_pays,
              stage_bits,  stage_pays,  ahead_bits,  ahead_pays,   next_bits,  next_pays, one_bits,   one_pays,   od_bits,     od_pays};
  e.run = [=](Context& ctx) {
    const Op& op = ctx.registry().op("gdn_recurrence");
    // Ladder order, seed (A) first: the kernel table's order.
    std::vector<std::string> names;
    // state=bf16 kernels are another state precision, not an implementation of this one: they race in
    // gdn-state-drift, where their drift over time is measured too.
    for (const auto& k : gdn_recurrence::recurrence_kernels())
      if (!k.state_bf16) names.push_back(k.name);
    const auto vs = lookup(ctx, names);
    const std::size_t i_once = std::find(names.begin(), names.end(), "gdn_recurrence/impl=once") - names.begin();
    // Full: the op's defaults (Qwen3.5-27B's heads) at the seed's batches; --quick: the op's quick values.
    std::vector<Problem> problems;
    if (ctx.options().quick) {
      Problem p = op.default_problem(Dist::uniform, ctx.options().seed);
      for (const auto& d : op.params)
        if (!d.quick.empty()) p.params[d.name] = d.quick.front();
      problems.push_back(p);
    } else {
      for (std::int64_t b : {1, 8, 32}) {
        Problem p = op.default_problem(Dist::uniform, ctx.options().seed);
        p.params["batch"] = b;
        problems.push_back(p);
      }
    }
    const std::vector<std::string> all{batch_key(1), batch_key(8), batch_key(32)};
    for (const Claim& c : {accurate, once_bits, once_faster, fused_faster, early_bits}) ctx.claim(c).needs(all);
    ctx.claim(early_pays).needs({batch_key(1)});
    // (pdl=early, its pdl=on twin: the name up to pdl= with pdl=on, so norm=gated's twin has no epilogue)
    const auto early = flag_twins(names, "pdl=early", [](const std::string& n, std::size_t at) { return n.substr(0, at) + "pdl=on"; });
    // (cache=stream, its twin: the same name without it)
    const std::string cs = ",cache=stream";
    const auto streamed = swap_twins(names, cs, "");
    ctx.claim(stream_bits).needs(all);
    ctx.claim(stream_pays).needs({batch_key(32)});
    const std::string sm = ",stage=smem";
    const auto staged = swap_twins(names, sm, "");
    ctx.claim(stage_bits).needs(all);
    ctx.claim(stage_pays).needs({batch_key(32)});
    // (o=direct: its own twin, the name less the axis)
    const std::string od = ",o=direct";
    const auto ahead_on = swap_twins(names, "pdl=ahead", "pdl=on", od);
    const auto ahead_early = swap_twins(names, "pdl=ahead", "pdl=early", od);
    const auto direct = swap_twins(names, od, "");
    ctx.claim(od_bits).needs(all);
    ctx.claim(od_pays).needs({batch_key(1)});
    ctx.claim(ahead_bits).needs(all);
    ctx.claim(ahead_pays).needs({batch_key(1)});
    const auto next_on = swap_twins(names, "pdl=next", "pdl=on");
    const auto next_ahead = swap_twins(names, "pdl=next", "pdl=ahead");
    ctx.claim(next_bits).needs(all);
    ctx.claim(next_pays).needs({batch_key(1)});
    const auto one_ahead = swap_twins(names, "pdl=one-ahead", "pdl=ahead");
    ctx.claim(one_bits).needs(all);
    ctx.claim(one_pays).needs({batch_key(1)});
    ctx.claim(b1_goal).needs({batch_key(1)});
    ctx.claim(b32_goal).needs({batch_key(32)});

    for (const Problem& p : problems) {
      const std::int64_t B = p.param("batch");
      const std::string key = batch_key(B);
      auto ms = race(ctx, op, vs, p, RaceOptions{.tolerance = gdn_recurrence::kTolerance, .tolerance_for = {}});
      if (ms.size() != vs.size()) continue;  // no device, or outside the --set slice
      // Accuracy: only when every variant ran (a skipped one leaves the claim not evaluated here).
      if (std::none_of(ms.begin(), ms.end(), [](const Measured& m) { return m.skipped; })) {
        bool all_ok = true;
        double worst = 0;
        for (const auto& m : ms) {
          all_ok = all_ok && m.verified;
          worst = std::max(worst, m.acc.max_rel);
        }
        ctx.claim(accurate).settle(key, all_ok, key + fmt(": worst max_rel %.3g over o and S", worst));
      }
      const Measured& seed = ms[0];
      if (i_once < ms.size() && !ms[i_once].skipped && !seed.skipped) {
        const Measured& once = ms[i_once];
        ctx.claim(once_bits).settle(key, once.bits_vs_a == 0,
                                    key + ": " + std::to_string(once.bits_vs_a) + " of " + std::to_string(once.acc.n) + " o and S elements differ");
        if (once.timed && seed.timed && once.vs_a)
          ctx.claim(once_faster).settle(key, once.vs_a->verdict == Verdict::faster,
                                        key + fmt(": seed %.2f us, once %.2f us, ", seed.timing.summary.median * 1e3, once.timing.summary.median * 1e3) +
                                            speedup_text(*once.vs_a) + " (" + mode_name(once) + ")");
      }
      if (const Measured* f = fastest(ms, true); f && seed.timed && f->vs_a)
        ctx.claim(fused_faster).settle(key, f->vs_a->verdict == Verdict::faster,
                                       key + ": " + f->variant->name + fmt(" %.2f us vs seed %.2f us, ", f->timing.summary.median * 1e3,
                                                                           seed.timing.summary.median * 1e3) + speedup_text(*f->vs_a));
      settle_flag_twins(ctx, ms, early, B, key, &early_bits, &early_pays, 1, "the pdl=on twin", "pdl=on -> pdl=early");
      settle_flag_twins(ctx, ms, streamed, B, key, &stream_bits, &stream_pays, 32, "the twin without cache=stream", "without -> with cache=stream");
      settle_flag_twins(ctx, ms, staged, B, key, &stage_bits, &stage_pays, 32, "the twin without stage=smem", "without -> with stage=smem");
      settle_flag_twins(ctx, ms, ahead_on, B, key, &ahead_bits, nullptr, 1, "the pdl=on twin", "pdl=on -> pdl=ahead");
      settle_flag_twins(ctx, ms, ahead_early, B, key, nullptr, &ahead_pays, 1, "the pdl=early twin", "pdl=early -> pdl=ahead");
      settle_flag_twins(ctx, ms, next_on, B, key, &next_bits, nullptr, 1, "the pdl=on twin", "pdl=on -> pdl=next");
      settle_flag_twins(ctx, ms, next_ahead, B, key, nullptr, &next_pays, 1, "the pdl=ahead twin", "pdl=ahead -> pdl=next");
      settle_flag_twins(ctx, ms, one_ahead, B, key, &one_bits, &one_pays, 1, "the pdl=ahead twin", "pdl=ahead -> pdl=one-ahead");
      settle_flag_twins(ctx, ms, direct, B, key, &od_bits, &od_pays, 1, "the twin without o=direct", "without -> with o=direct", "S");
      const Measured* best = fastest(ms, false);
      if (!best) continue;
      const double us = best->timing.summary.median * 1e3;
      // S is read once and written once: its floor is a copy's, not a read's. The run's copy kernel in
      // the headline's mode (Ceiling::copy_gbps_of: the best of its forms, bytes read + written; stream:
      // back to back in a graph, plain or PDL) says what moving these bytes both ways takes.
      const bool stream = best->mode(TimingMode::stream);
      const double copy = ctx.ceiling().copy_gbps_of(stream ? TimingMode::stream : TimingMode::launch);
      const std::string copy_form = stream ? "back to back in a graph over halves of the ceiling's buffer" : "one launch over the ceiling's buffer";
      const std::string evidence = key + ": " + best->variant->name + fmt(" %.2f us, %.0f GB/s, %.1f%% of the size-matched read", us,
                                                                         best->gbps, best->pct_attainable) + " (" + mode_name(*best) + ")" +
                                   (copy > 0 ? "; at the run's copy rate (the best copy form, " + copy_form +
                                                   fmt(", read + written: %.0f GB/s) these %.1f MB take %.2f us", copy, best->traffic.bytes / 1e6,
                                                       best->traffic.bytes / (copy * 1e3))
                                             : std::string());
      if (B == 1) ctx.claim(b1_goal).settle(key, us <= 2.5, evidence);
      if (B == 32) ctx.claim(b32_goal).settle(key, us <= 50.0, evidence);
    }
  };
  r.add(std::move(e));
}

}  // namespace klab::experiments
