#include "klab/registry.hpp"

#include "klab/error.hpp"

#include <algorithm>
#include <utility>
#include <vector>

namespace klab {

std::string variant_name(const std::string& op, const std::vector<std::pair<std::string, std::string>>& axes) {
  std::string s = op + "/";
  for (std::size_t i = 0; i < axes.size(); ++i) s += (i ? "," : "") + axes[i].first + "=" + axes[i].second;
  return s;
}

std::vector<float> Instance::output() {
  throw Error("this instance names its outputs (Instance::outputs); it has no single output y");
}

Problem Op::default_problem(Dist dist, std::uint64_t seed) const {
  Problem p;
  p.dist = dist;
  p.seed = seed;
  for (const auto& d : params) p.params[d.name] = d.def;
  return p;
}

std::vector<Problem> Op::declared_problems(bool quick, Dist dist, std::uint64_t seed) const {
  if (params.empty()) return {};
  std::vector<Problem> out{default_problem(dist, seed)};
  for (const auto& d : params) {
    const auto& vals = quick ? d.quick : d.seed;
    if (vals.empty()) continue;
    std::vector<Problem> next;
    for (const auto& p : out)
      for (std::int64_t v : vals) {
        Problem q = p;
        q.params[d.name] = v;
        next.push_back(std::move(q));
      }
    out = std::move(next);
  }
  return out;
}

std::vector<Named<double>> Op::references_of(const Workload& w) const {
  if (references) return references(w);
  require(bool(reference), "op " + name + " has neither reference nor references");
  return {{"y", reference(w)}};
}

namespace {
// Levenshtein distance (insertions, deletions, substitutions; one row of the table at a time).
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The known names nearest to `name`, at most 5: those that contain it (a fragment such as
// "block-per-thread"), else those within a third of its length in edits (a typo), nearest first.
template <class Map>
std::vector<std::string> nearest(const Map& m, const std::string& name) {
  std::vector<std::pair<std::size_t, std::string>> scored;
  for (const auto& [k, v] : m)
    if (name.size() >= 3 && k.find(name) != std::string::npos) scored.emplace_back(k.size() - name.size(), k);
  if (scored.empty()) {
    const std::size_t limit = std::max<std::size_t>(2, name.size() / 3);
    for (const auto& [k, v] : m)
      if (auto d = edit_distance(name, k); d <= limit) scored.emplace_back(d, k);
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (std::size_t i = 0; i < scored.size() && i < 5; ++i) out.push_back(scored[i].second);
  return out;
}

template <class Map>
const typename Map::mapped_type& find_or_explain(const Map& m, const std::string& name, const char* what) {
  auto it = m.find(name);
  if (it != m.end()) return it->second;
  std::string msg = std::string("unknown ") + what + " '" + name + "'";
  if (const auto near = nearest(m, name); !near.empty()) {
    msg += "; did you mean ";
    for (std::size_t i = 0; i < near.size(); ++i) msg += (i ? (i + 1 == near.size() ? " or '" : ", '") : "'") + near[i] + "'";
    msg += "? (" + std::to_string(m.size()) + " known; `klab list` shows them all)";
    throw Error(msg);
  }
  std::string known;
  int shown = 0;
  for (const auto& [k, v] : m) {
    if (shown++ == 12) { known += ", ..."; break; }
    known += (known.empty() ? "" : ", ") + k;
  }
  throw Error(msg + " (known: " + (known.empty() ? "none" : known) + "; `klab list` shows them all)");
}
template <class Map, class T>
void insert_unique(Map& m, T t, const char* what) {
  require(!t.name.empty(), std::string("a ") + what + " needs a name");
  auto name = t.name;
  require(m.emplace(name, std::move(t)).second, std::string(what) + " '" + name + "' registered twice");
}
}  // namespace

void Registry::add(Op op) { insert_unique(ops_, std::move(op), "op"); }
void Registry::add(Variant v) {
  require(ops_.count(v.op) != 0, "variant '" + v.name + "' names op '" + v.op + "', which is not registered");
  require(static_cast<bool>(v.make), "variant '" + v.name + "' has no make()");
  insert_unique(variants_, std::move(v), "variant");
}
void Registry::add(Experiment e) {
  require(static_cast<bool>(e.run), "experiment '" + e.name + "' has no run()");
  for (std::size_t i = 0; i < e.claims.size(); ++i) {
    require(!e.claims[i].id.empty(), "experiment '" + e.name + "' states a claim without an id: " + e.claims[i].text);
    for (std::size_t j = 0; j < i; ++j)
      require(e.claims[j].id != e.claims[i].id, "experiment '" + e.name + "' states claim '" + e.claims[i].id + "' twice");
  }
  insert_unique(experiments_, std::move(e), "experiment");
}

const Op& Registry::op(const std::string& name) const { return find_or_explain(ops_, name, "op"); }
const Variant& Registry::variant(const std::string& name) const { return find_or_explain(variants_, name, "variant"); }
const Experiment& Registry::experiment(const std::string& name) const { return find_or_explain(experiments_, name, "experiment"); }

std::vector<const Variant*> Registry::variants_of(const std::string& op) const {
  std::vector<const Variant*> out;
  for (const auto& [name, v] : variants_)
    if (v.op == op) out.push_back(&v);
  return out;
}

bool Registry::glob_match(const std::string& p, const std::string& t) {
  // Iterative glob with backtracking on the last '*'.
  std::size_t pi = 0, ti = 0, star = std::string::npos, mark = 0;
  while (ti < t.size()) {
    if (pi < p.size() && (p[pi] == '?' || p[pi] == t[ti])) { ++pi; ++ti; }
    else if (pi < p.size() && p[pi] == '*') { star = pi++; mark = ti; }
    else if (star != std::string::npos) { pi = star + 1; ti = ++mark; }
    else return false;
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

void Registry::check_param_name(const std::string& name) const {
  std::map<std::string, int> known{{"m", 0}, {"k", 0}, {"dist", 0}};
  for (const auto& [n, op] : ops_)
    for (const auto& d : op.params) known[d.name];
  try {
    find_or_explain(known, name, "parameter");
  } catch (const Error& e) {
    throw Error(std::string("--set: ") + e.what());
  }
}

}  // namespace klab
