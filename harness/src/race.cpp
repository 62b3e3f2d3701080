#include "klab/race.hpp"

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
}  // namespace

nlohmann::json to_json(const Measured& m) {
  nlohmann::json j;
  j["op"] = m.variant->op;
  j["variant"] = m.variant->name;
  j["peer"] = m.variant->peer;
  nlohmann::json axes = nlohmann::json::object();
  for (const auto& [k, v] : m.variant->axes) axes[k] = v;
  j["axes"] = axes;
  j["shape"] = m.problem.shape.str();
  j["m"] = m.problem.shape.m;
  j["k"] = m.problem.shape.k;
  j["dist"] = to_string(m.problem.dist);
  j["seed"] = m.problem.seed;
  j["accuracy"] = to_json(m.acc);
  j["verified"] = m.verified;
  j["tolerance"] = m.tolerance;
  j["bits_vs_a"] = m.bits_vs_a >= 0 ? nlohmann::json(m.bits_vs_a) : nlohmann::json(nullptr);
  if (!m.prev.empty()) {
    j["prev"] = m.prev;
    j["bits_vs_prev"] = m.bits_vs_prev;
  }
  j["bytes"] = m.traffic.bytes;
  j["macs"] = m.traffic.macs;
  if (m.timed) {
    j["timing"] = to_json(m.timing);
    j["gbps"] = m.gbps;
    j["gmacs"] = m.gmacs;
    j["pct_ceiling"] = m.pct_ceiling;
  }
  if (m.vs_a) j["vs_a"] = to_json(*m.vs_a);
  return j;
}

std::vector<Measured> race(Context& ctx, const Op& op, const std::vector<const Variant*>& variants, const Problem& problem, const RaceOptions& ro) {
  require(!variants.empty(), "race: no variants");
  std::vector<Measured> out;
  out.reserve(variants.size());  // `prev` points into it
  if (auto why = op.validate(problem); !why.empty()) throw Error(op.name + " " + problem.shape.str() + ": " + why);
  auto skip_all = [&](const std::string& reason) {
    for (auto* v : variants) ctx.skip(v->name + " on " + problem.str(), reason);
  };
  if (!ctx.has_device()) {
    skip_all(no_device_reason().empty() ? "no CUDA device" : no_device_reason());
    return out;
  }
  ctx.log(op.name + " " + problem.str() + ": generating inputs and the reference");
  auto work = op.generate(problem);
  const auto ref = op.reference(*work);
  cudaStream_t s = ctx.timer().stream();

  // 1. Verify every variant before any timing.
  std::vector<float> a_out;
  std::string a_name;
  const Measured* prev = nullptr;  // ladders: the last of our variants that ran
  for (auto* v : variants) {
    Measured m;
    m.variant = v;
    m.problem = problem;
    m.traffic = op.traffic(problem);
    m.tolerance = tolerance_of(ro, *v);
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
    auto y = inst->output();
    m.acc = accuracy(y, ref);
    m.verified = m.acc.finite() && m.acc.max_rel <= m.tolerance;
    if (a_out.empty()) {
      a_out = y;
      a_name = v->name;
    } else {
      m.bits_vs_a = bitwise_diff(y, a_out);
    }
    if (ro.ladder && !v->peer) {
      if (prev) {
        m.prev = prev->variant->name;
        m.bits_vs_prev = bitwise_diff(y, prev->output);
      }
    }
    m.output = std::move(y);
    ctx.log("verify " + v->name + fmt(": max_rel %.3g (tolerance %.1g)", m.acc.max_rel, m.tolerance) +
            (m.bits_vs_a >= 0 ? ", " + std::to_string(m.bits_vs_a) + " elements differ bitwise from A" : "") +
            (m.verified ? "" : "  FAILED VERIFICATION"));
    out.push_back(std::move(m));
    if (ro.ladder && !v->peer) prev = &out.back();
  }
  // 2. Time the verified ones.
  const Measured* a = nullptr;
  for (auto& m : out) {
    if (m.skipped || !ro.time) continue;
    if (!m.verified) {
      ctx.log("not timing " + m.variant->name + ": it failed verification");
      continue;
    }
    auto inst = m.variant->make(*work);
    m.timing = ctx.timer().time([&](cudaStream_t st) { inst->run(st); }, ctx.options().timing(),
                                [&](cudaStream_t st) { inst->reset(st); });
    m.timed = true;
    const double sec = m.timing.summary.median * 1e-3;
    m.gbps = m.traffic.bytes / sec / 1e9;
    m.gmacs = m.traffic.macs / sec / 1e9;
    m.pct_ceiling = 100.0 * m.gbps / ctx.ceiling().read_gbps;
    if (!a) a = &m;
    else m.vs_a = compare_times(a->timing.kept_ms, m.timing.kept_ms, problem.seed);
    ctx.log(fmt("time   %.4f ms  (min %.4f, max %.4f)", m.timing.summary.median, m.timing.summary.min, m.timing.summary.max) +
            fmt("  %.0f GB/s  %.1f%% of ceiling", m.gbps, m.pct_ceiling) + "  " + m.variant->name +
            (m.vs_a ? fmt("  x%.3f vs A", m.vs_a->speedup) + " (" + to_string(m.vs_a->verdict) + ")" : ""));
  }
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
