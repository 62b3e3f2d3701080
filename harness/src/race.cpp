#include "klab/race.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "klab/error.hpp"

namespace klab {

namespace {
double tolerance_of(const RaceOptions& ro, const Variant& v) {
  for (const auto& [glob, tol] : ro.tolerance_for)
    if (Registry::glob_match(glob, v.name)) return tol;
  return v.tolerance > 0 ? v.tolerance : ro.tolerance;
}
std::string fmt(const char* f, double a, double b = 0, double c = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, a, b, c);
  return buf;
}
// A variant's outputs must be the reference's tensors, by name, in order, and of the same sizes.
void check_tensors(const std::string& who, const std::vector<Named<float>>& outs, const std::vector<Named<double>>& ref) {
  auto names = [](const auto& ts) {
    std::string s;
    for (const auto& t : ts) s += (s.empty() ? "" : ", ") + t.name + "[" + std::to_string(t.data.size()) + "]";
    return s;
  };
  bool same = outs.size() == ref.size();
  for (std::size_t t = 0; same && t < outs.size(); ++t) same = outs[t].name == ref[t].name && outs[t].data.size() == ref[t].data.size();
  require(same, who + ": outputs " + names(outs) + " do not match the reference's " + names(ref));
}
// Whether `a` is worse than `than`: non-finite (NaN, Inf, unwritten) first, else by max_rel.
bool worse(const Accuracy& a, const Accuracy& than) { return !a.finite() || (than.finite() && a.max_rel > than.max_rel); }
// The worst tensor's accuracy.
Accuracy worst(const std::vector<TensorResult>& ts) {
  Accuracy w = ts.front().acc;
  for (const auto& t : ts)
    if (worse(t.acc, w)) w = t.acc;
  return w;
}
std::int64_t sum_bits(const std::vector<TensorResult>& ts, std::int64_t TensorResult::*field) {
  std::int64_t n = 0;
  for (const auto& t : ts) n += t.*field;
  return n;
}
// The variant's instances (one per input copy) and its timing subjects.
struct Slot {
  Measured* m;
  std::vector<std::unique_ptr<Instance>> insts;
  std::vector<std::pair<TimingMode, std::unique_ptr<Timer::Subject>>> subjects;
};

void time_race(Context& ctx, const Workload& work, std::vector<Measured>& out, const TimingOptions& opt) {
  Timer& timer = ctx.timer();
  const auto& modes = ctx.options().modes;
  const bool want_stream = std::find(modes.begin(), modes.end(), TimingMode::stream) != modes.end();
  const bool want_launch = std::find(modes.begin(), modes.end(), TimingMode::launch) != modes.end();
  std::vector<Slot> slots;
  for (auto& m : out) {
    if (m.skipped) continue;
    if (!m.verified) {
      ctx.log("not timing " + m.variant->name + ": it failed verification");
      continue;
    }
    Slot sl{&m, {}, {}};
    int copies = want_stream ? timer.stream_copies(m.traffic.bytes, opt.l2_cold) : 1;
    sl.insts.push_back(m.variant->make(work));
    if (const int need = want_stream ? sl.insts.front()->min_stream_copies() : 1; need > copies) {
      ctx.log(m.variant->name + ": stream mode over " + std::to_string(need) + " copies, not " + std::to_string(copies) +
              ": its contract (Instance::min_stream_copies)");
      copies = need;
    }
    for (int c = 1; c < copies; ++c) sl.insts.push_back(m.variant->make(work));
    Instance* first = sl.insts.front().get();
    auto launch_subject = [&timer, first] {
      return timer.launch_subject([first](cudaStream_t st) { first->run(st); }, [first](cudaStream_t st) { first->reset(st); });
    };
    for (TimingMode mode : modes) {
      if (mode == TimingMode::launch) {
        sl.subjects.emplace_back(mode, launch_subject());
      } else {
        std::vector<Body> bodies;
        for (auto& inst : sl.insts) bodies.push_back([p = inst.get()](cudaStream_t st) { p->run(st); });
        auto reset_all = [&insts = sl.insts](cudaStream_t st) {
          for (auto& inst : insts) inst->reset(st);
        };
        std::string why;
        // Enough launches that the graph's own launch cost is amortised: 32 (TimingOptions), or
        // fewer for a big op once the graph moves 2 GB (a GDN step of 16 tokens moves ~1 GB: 2
        // launches, not 32), never fewer than the copies.
        TimingOptions sopt = opt;
        const double per = std::max(m.traffic.bytes, 1.0);
        sopt.min_launches = std::clamp(int(std::ceil(2e9 / per)), int(bodies.size()), std::max(opt.min_launches, int(bodies.size())));
        auto sub = timer.stream_subject(bodies, sopt, reset_all, why);
        if (sub) sl.subjects.emplace_back(mode, std::move(sub));
        else {
          m.stream_unavailable = why;
          ctx.log(m.variant->name + ": stream mode unavailable, " + why + (want_launch ? "" : "; timing it in launch mode"));
          if (!want_launch) sl.subjects.emplace_back(TimingMode::launch, launch_subject());
        }
      }
    }
    slots.push_back(std::move(sl));
  }
  std::vector<Timer::Subject*> subs;
  for (auto& sl : slots)
    for (auto& [mode, sub] : sl.subjects) subs.push_back(sub.get());
  if (subs.empty()) return;
  const auto timings = timer.time_interleaved(subs, opt);
  std::size_t k = 0;
  for (auto& sl : slots) {
    Measured& m = *sl.m;
    m.timed = true;
    for (auto& [mode, sub] : sl.subjects) {
      ModeResult r;
      r.mode = mode;
      r.timing = timings[k++];
      const double sec = r.timing.summary.median * 1e-3;
      r.gbps = m.traffic.bytes / sec / 1e9;
      r.gmacs = m.traffic.macs / sec / 1e9;
      r.pct_ceiling = 100.0 * r.gbps / ctx.ceiling().read_gbps;
      const auto& att = timer.attainable(m.traffic.bytes, mode, opt);
      r.attainable_gbps = att.gbps;
      r.attainable_pdl = att.pdl;
      r.pct_attainable = 100.0 * r.gbps / att.gbps;
      m.modes.push_back(std::move(r));
    }
    // The headline: stream where measured.
    const ModeResult* h = m.mode(TimingMode::stream);
    if (!h) h = &m.modes.front();
    m.timing = h->timing;
    m.gbps = h->gbps;
    m.gmacs = h->gmacs;
    m.pct_ceiling = h->pct_ceiling;
    m.pct_attainable = h->pct_attainable;
  }
  // Against A (the first variant timed), mode by mode.
  const Measured* a = slots.empty() ? nullptr : slots.front().m;
  for (std::size_t i = 1; i < slots.size(); ++i) {
    Measured& m = *slots[i].m;
    for (auto& r : m.modes)
      if (const ModeResult* ra = a->mode(r.mode)) r.vs_a = compare_times(ra->timing.kept_ms, r.timing.kept_ms, m.problem.seed);
    if (const ModeResult* h = m.mode(m.timing.mode)) m.vs_a = h->vs_a;
  }
  for (auto& sl : slots) {
    const Measured& m = *sl.m;
    std::string line = "time  ";
    for (const auto& r : m.modes)
      line += " " + to_string(r.mode) + fmt(" %.4f ms (%.1f%% of ceiling, %.1f%% of attainable)", r.timing.summary.median, r.pct_ceiling, r.pct_attainable);
    line += "  " + m.variant->name;
    if (m.vs_a) line += fmt("  x%.3f vs A", m.vs_a->speedup) + " (" + to_string(m.vs_a->verdict) + ")";
    ctx.log(line);
    for (const auto& r : m.modes)
      if (r.timing.traced) ctx.log("trace " + to_string(r.mode) + ": " + trace_line(r.timing.trace) + "  " + m.variant->name);
  }
}
}  // namespace

Accuracy verify_outputs(const std::string& who, const std::vector<Named<float>>& outs, const std::vector<Named<double>>& refs) {
  check_tensors(who, outs, refs);
  Accuracy w = accuracy(outs.front().data, refs.front().data);
  for (std::size_t t = 1; t < outs.size(); ++t)
    if (const Accuracy a = accuracy(outs[t].data, refs[t].data); worse(a, w)) w = a;
  return w;
}

const ModeResult* Measured::mode(TimingMode m) const {
  for (const auto& r : modes)
    if (r.mode == m) return &r;
  return nullptr;
}

nlohmann::json to_json(const Measured& m) {
  nlohmann::json j;
  j["op"] = m.variant->op;
  j["variant"] = m.variant->name;
  j["peer"] = m.variant->peer;
  nlohmann::json axes = nlohmann::json::object();
  for (const auto& [k, v] : m.variant->axes) axes[k] = v;
  j["axes"] = axes;
  if (m.problem.shape.m > 0) {
    j["shape"] = m.problem.shape.str();
    j["m"] = m.problem.shape.m;
    j["k"] = m.problem.shape.k;
  } else {
    // An op whose dimensions are all params: its parameters stand for the shape the scripts group
    // and label by ("batch=1,dk=128,dv=128,nk=16,nv=48"), as `problem` below.
    j["shape"] = m.problem.key();
  }
  nlohmann::json params = nlohmann::json::object();
  for (const auto& [k, v] : m.problem.params) params[k] = v;
  if (m.problem.shape.m > 0) {
    params["m"] = m.problem.shape.m;
    params["k"] = m.problem.shape.k;
  }
  j["params"] = params;
  j["problem"] = m.problem.key();
  j["dist"] = to_string(m.problem.dist);
  j["seed"] = m.problem.seed;
  j["accuracy"] = to_json(m.acc);
  if (m.tensors.size() > 1 || (m.tensors.size() == 1 && m.tensors.front().name != "y")) {
    nlohmann::json ts = nlohmann::json::array();
    for (const auto& t : m.tensors) {
      nlohmann::json o{{"name", t.name}, {"accuracy", to_json(t.acc)}, {"hash", hash_hex(t.hash)}};
      if (t.bits_vs_a >= 0) o["bits_vs_a"] = t.bits_vs_a;
      if (t.bits_vs_prev >= 0) o["bits_vs_prev"] = t.bits_vs_prev;
      ts.push_back(o);
    }
    j["tensors"] = ts;
  }
  j["verified"] = m.verified;
  j["tolerance"] = m.tolerance;
  j["bits_vs_a"] = m.bits_vs_a >= 0 ? nlohmann::json(m.bits_vs_a) : nlohmann::json(nullptr);
  if (!m.prev.empty()) {
    j["prev"] = m.prev;
    j["bits_vs_prev"] = m.bits_vs_prev;
  }
  // Determinism: the same seed must give these same hashes on every run (scripts/compare.py checks).
  if (m.input_hash) j["input_hash"] = hash_hex(m.input_hash);
  if (!m.output.empty()) j["output_hash"] = hash_hex(m.output_hash);
  j["bytes"] = m.traffic.bytes;
  if (m.op_bytes) j["op_bytes"] = *m.op_bytes;
  j["macs"] = m.traffic.macs;
  if (m.timed) {
    auto mode_json = [&](const ModeResult& r) {
      nlohmann::json o;
      o["timing"] = to_json(r.timing);
      o["gbps"] = r.gbps;
      o["gmacs"] = r.gmacs;
      o["pct_ceiling"] = r.pct_ceiling;
      o["pct_attainable"] = r.pct_attainable;
      o["attainable_gbps"] = r.attainable_gbps;
      o["attainable_pdl"] = r.attainable_pdl;
      if (r.vs_a) o["vs_a"] = to_json(*r.vs_a);
      return o;
    };
    nlohmann::json modes = nlohmann::json::object();
    for (const auto& r : m.modes) modes[to_string(r.mode)] = mode_json(r);
    j["modes"] = modes;
    j["timing"] = to_json(m.timing);
    j["gbps"] = m.gbps;
    j["gmacs"] = m.gmacs;
    j["pct_ceiling"] = m.pct_ceiling;
    j["pct_attainable"] = m.pct_attainable;
    j["attainable_gbps"] = m.modes.empty() ? 0.0 : m.mode(m.timing.mode)->attainable_gbps;
  }
  if (!m.stream_unavailable.empty()) j["stream_unavailable"] = m.stream_unavailable;
  if (m.vs_a) j["vs_a"] = to_json(*m.vs_a);
  return j;
}

std::vector<Measured> race(Context& ctx, const Op& op, const std::vector<const Variant*>& variants, const Problem& problem, const RaceOptions& ro) {
  require(!variants.empty(), "race: no variants");
  std::vector<Measured> out;
  out.reserve(variants.size());  // `prev` points into it
  if (auto why = op.validate(problem); !why.empty()) throw Error(op.name + " " + problem.key() + ": " + why);
  // --shard I/N: this race's run-wide number decides the shard that races it; the others skip it
  // without records (the report's env.options.shard says which shard it is).
  const std::size_t race_index = ctx.next_race();
  if (!ctx.options().selects_race(race_index)) {
    ctx.log(op.name + " " + problem.str() + ": race " + std::to_string(race_index) + " belongs to shard " +
            std::to_string(race_index % static_cast<std::size_t>(ctx.options().shard_count)) + "/" +
            std::to_string(ctx.options().shard_count) + ", not raced here");
    ctx.race_in_other_shard();
    return out;
  }
  auto skip_all = [&](const std::string& reason) {
    for (auto* v : variants) ctx.skip(v->name + " on " + problem.str(), reason);
  };
  if (!ctx.has_device()) {
    skip_all(no_device_reason().empty() ? "no CUDA device" : no_device_reason());
    return out;
  }
  if (!ctx.options().selects(problem)) {
    ctx.log(op.name + " " + problem.str() + ": outside the --set slice, not raced");
    return out;
  }
  ctx.log(op.name + " " + problem.str() + ": generating inputs and the reference");
  auto work = op.generate(problem);
  const auto ref = op.references_of(*work);
  cudaStream_t s = ctx.timer().stream();

  // 1. Verify every variant before any timing.
  std::vector<Named<float>> a_outs;
  std::string a_name;
  const Measured* prev = nullptr;  // ladders: the last of our variants that ran
  for (auto* v : variants) {
    Measured m;
    m.variant = v;
    m.problem = problem;
    m.traffic = v->traffic ? v->traffic(problem) : op.traffic(problem);
    if (v->traffic) m.op_bytes = op.traffic(problem).bytes;
    m.tolerance = tolerance_of(ro, *v);
    if (!ctx.options().selects(v->name)) {
      // Left out on purpose (--variants): no skip record (the report's options say the filter).
      m.skipped = true;
      m.skip_reason = "not selected by --variants '" + ctx.options().variants + "'";
      out.push_back(std::move(m));
      continue;
    }
    if (auto why = v->can_implement(problem); !why.empty()) {
      m.skipped = true;
      m.skip_reason = why;
      ctx.skip(v->name + " on " + problem.str(), why);
      out.push_back(std::move(m));
      continue;
    }
    auto inst = v->make(*work);
    inst->poison(s);
    inst->run(s);
    KLAB_CUDA(cudaStreamSynchronize(s));
    auto outs = inst->outputs();
    check_tensors(v->name, outs, ref);
    m.verified = true;
    m.output_hash = kFnvOffset;
    for (std::size_t t = 0; t < outs.size(); ++t) {
      TensorResult tr;
      tr.name = outs[t].name;
      tr.acc = accuracy(outs[t].data, ref[t].data);
      m.verified = m.verified && tr.acc.finite() && tr.acc.max_rel <= m.tolerance;
      if (!a_outs.empty()) tr.bits_vs_a = bitwise_diff(outs[t].data, a_outs[t].data);
      if (ro.ladder && !v->peer && prev) tr.bits_vs_prev = bitwise_diff(outs[t].data, prev->outputs[t].data);
      tr.hash = fnv1a64(std::span<const float>(outs[t].data));
      m.output_hash = fnv1a64(std::span<const float>(outs[t].data), m.output_hash);
      m.tensors.push_back(tr);
    }
    m.acc = worst(m.tensors);
    if (!a_outs.empty()) m.bits_vs_a = sum_bits(m.tensors, &TensorResult::bits_vs_a);
    if (ro.ladder && !v->peer && prev) {
      m.prev = prev->variant->name;
      m.bits_vs_prev = sum_bits(m.tensors, &TensorResult::bits_vs_prev);
    }
    if (a_outs.empty()) {
      a_outs = outs;
      a_name = v->name;
    }
    m.input_hash = work->digest();
    m.output = outs.front().data;
    m.outputs = std::move(outs);
    ctx.log("verify " + v->name + fmt(": max_rel %.3g (tolerance %.1g)", m.acc.max_rel, m.tolerance) +
            (m.bits_vs_a >= 0 ? ", " + std::to_string(m.bits_vs_a) + " elements differ bitwise from A" : "") +
            (m.verified ? "" : "  FAILED VERIFICATION"));
    out.push_back(std::move(m));
    if (ro.ladder && !v->peer) prev = &out.back();
  }
  // 2. Time the verified ones: every mode of the run, repetitions interleaved over variants and
  // modes, so that drift during the race hits every variant alike.
  if (ro.time) time_race(ctx, *work, out, ctx.options().timing());
  for (auto& m : out) {
    if (m.skipped) continue;
    auto r = ctx.record("measurement");
    r.update(to_json(m));
    r["a"] = a_name;
    r["ceiling_gbps"] = ctx.ceiling().read_gbps;
    ctx.add(std::move(r));
  }
  return out;
}

}  // namespace klab
