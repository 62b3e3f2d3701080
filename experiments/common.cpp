#include "common.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <cstdlib>

#include "klab/error.hpp"
#include "klab/metrics.hpp"

namespace klab::experiments {

std::vector<Shape> shapes_for(const Context& ctx, std::vector<Shape> full, std::vector<Shape> quick) {
  return ctx.options().quick ? quick : full;
}

std::vector<Problem> op_problems(const Context& ctx, const Op& op, Dist dist) {
  std::vector<Problem> out{op.default_problem(dist, ctx.options().seed)};
  for (const auto& d : op.params) {
    std::vector<std::int64_t> values{ctx.options().quick && !d.quick.empty() ? d.quick.front() : d.def};
    if (auto it = ctx.options().set.find(d.name); it != ctx.options().set.end()) {
      values.clear();
      for (const auto& v : it->second) values.push_back(std::stoll(v));  // parse_set made them digits
    }
    std::vector<Problem> next;
    for (const auto& p : out)
      for (auto v : values) {
        next.push_back(p);
        next.back().params[d.name] = v;
      }
    out = std::move(next);
  }
  return out;
}

std::vector<std::string> shape_keys(const std::vector<Shape>& shapes) {
  std::vector<std::string> out;
  for (const auto& s : shapes) out.push_back(s.str());
  return out;
}
std::string problem_key(const Shape& s, Dist d) { return s.str() + "/" + to_string(d); }
std::vector<std::string> problem_keys(const std::vector<Shape>& shapes, const std::vector<Dist>& dists) {
  std::vector<std::string> out;
  for (const auto& s : shapes)
    for (Dist d : dists) out.push_back(problem_key(s, d));
  return out;
}

std::vector<const Variant*> lookup(const Context& ctx, const std::vector<std::string>& names) {
  std::vector<const Variant*> out;
  for (const auto& n : names) out.push_back(&ctx.registry().variant(n));
  return out;
}

std::vector<std::filesystem::path> gdn_fixture_files(std::string& looked) {
  namespace fs = std::filesystem;
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("KLAB_GDN_FIXTURES")) dirs.emplace_back(env);
  dirs.emplace_back(fs::path("tests") / "fixtures" / "gdn");
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) dirs.push_back(exe.parent_path().parent_path().parent_path().parent_path() / "tests" / "fixtures" / "gdn");
  for (const auto& d : dirs) {
    looked += (looked.empty() ? "" : ", ") + d.string();
    std::vector<fs::path> out;
    if (!fs::is_directory(d, ec)) continue;
    for (const auto& e : fs::directory_iterator(d, ec))
      if (e.is_regular_file() && e.path().extension() == ".safetensors") out.push_back(e.path());
    std::sort(out.begin(), out.end());
    if (!out.empty()) return out;
  }
  return {};
}

std::int64_t outputs_bitwise_diff(const Measured& a, const Measured& b) {
  std::int64_t d = 0;
  for (std::size_t t = 0; t < a.outputs.size() && t < b.outputs.size(); ++t) d += bitwise_diff(a.outputs[t].data, b.outputs[t].data);
  return d;
}

std::int64_t named_bitwise_diff(const Measured& a, const Measured& b, const std::string& name) {
  auto find = [&](const Measured& m) -> const std::vector<float>& {
    std::string names;
    for (const auto& o : m.outputs) {
      if (o.name == name) return o.data;
      names += (names.empty() ? "" : ", ") + o.name;
    }
    throw Error("no output named '" + name + "' in " + m.variant->name + "'s (" + (names.empty() ? "none" : names) + ")");
  };
  return bitwise_diff(find(a), find(b));
}

std::string fmt(const char* f, double a, double b, double c, double d) {
  // Every argument is a double: a conversion for another type (%d, %s, ...) would print garbage
  // (gdn-batch's log printed "0 single steps" that way), so it is refused, naming the format.
  for (const char* p = f; *p; ++p) {
    if (*p != '%') continue;
    ++p;
    if (*p == '%') continue;
    while (*p && std::strchr("-+ #0123456789.", *p)) ++p;
    if (!*p || !std::strchr("fFeEgGaA", *p)) throw Error(std::string("fmt: format \"") + f + "\" takes doubles only (%f, %e, %g, %a)");
  }
  char buf[512];
  std::snprintf(buf, sizeof buf, f, a, b, c, d);
  return buf;
}

void add_rates(Context& ctx, nlohmann::json& rec, double bytes, double ms_per_step) {
  const double gbps = bytes / (ms_per_step * 1e-3) / 1e9;
  rec["gbps"] = gbps;
  if (!ctx.has_device()) return;
  rec["pct_ceiling"] = 100.0 * gbps / ctx.ceiling().read_gbps;
  const auto& att = ctx.timer().attainable(bytes, TimingMode::stream, ctx.options().timing());
  rec["attainable_gbps"] = att.gbps;
  rec["attainable_mode"] = "stream";
  rec["pct_attainable"] = 100.0 * gbps / att.gbps;
}

Experiment make_ab(const Registry& reg, const std::string& a_name, const std::string& b_name, Shape shape, Dist dist) {
  const Variant& a = reg.variant(a_name);
  const Variant& b = reg.variant(b_name);
  require(a.op == b.op, "cannot race " + a.name + " (op " + a.op + ") against " + b.name + " (op " + b.op + "): different ops");
  const Op& op = reg.op(a.op);
  Problem probe{shape, dist, 1};
  if (auto why = op.validate(probe); !why.empty()) throw Error(op.name + " " + shape.str() + ": " + why);
  Experiment e;
  e.name = "ab";
  e.description = "ad hoc: " + a.name + " (A) against " + b.name + " (B) on " + shape.str() + ", " + to_string(dist) + " inputs";
  const Claim accurate{"accurate", "A and B are within tolerance of the reference"};
  const Claim bitwise{"bitwise", "B is bitwise equal to A"};
  const Claim faster{"faster", "B is faster than A"};
  e.claims = {accurate, bitwise, faster};
  e.run = [&a, &b, &op, shape, dist, accurate, bitwise, faster](Context& ctx) {
    Problem p{shape, dist, ctx.options().seed};
    auto ms = race(ctx, op, {&a, &b}, p, RaceOptions{});
    if (ms.size() < 2 || ms[0].skipped || ms[1].skipped) return;
    ctx.claim(accurate).set(ms[0].verified && ms[1].verified, fmt("max_rel A %.3g, B %.3g", ms[0].acc.max_rel, ms[1].acc.max_rel));
    ctx.claim(bitwise).set(ms[1].bits_vs_a == 0, std::to_string(ms[1].bits_vs_a) + " of " + std::to_string(ms[1].acc.n) + " elements differ");
    if (ms[1].vs_a)
      ctx.claim(faster).set(ms[1].vs_a->verdict == Verdict::faster,
                speedup_text(*ms[1].vs_a));
  };
  return e;
}

}  // namespace klab::experiments
