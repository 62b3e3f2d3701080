#include "klab/experiment.hpp"

#include <algorithm>
#include <iostream>

#include "klab/error.hpp"

namespace klab {

std::vector<std::string> variant_patterns(const std::string& text) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = std::min(text.find('|', start), text.size());
    out.push_back(text.substr(start, end - start));
    require(!out.back().empty(), "--variants '" + text + "': an empty pattern (patterns are separated by a single '|')");
    if (end == text.size()) return out;
    start = end + 1;
  }
}

bool RunOptions::selects(const std::string& variant_name) const {
  if (variants.empty()) return true;
  for (const std::string& pat : variant_patterns(variants)) {
    const bool glob = pat.find_first_of("*?") != std::string::npos;
    if (glob ? Registry::glob_match(pat, variant_name) : variant_name.find(pat) != std::string::npos) return true;
  }
  return false;
}

bool RunOptions::selects(const Problem& p) const {
  auto takes = [&](const char* name, const std::string& value) {
    auto it = set.find(name);
    return it == set.end() || std::find(it->second.begin(), it->second.end(), value) != it->second.end();
  };
  if (!takes("dist", to_string(p.dist))) return false;
  for (const auto& [name, values] : set)
    if (name != "dist" && p.has(name) && !takes(name.c_str(), std::to_string(p.param(name)))) return false;
  return true;
}

std::map<std::string, std::vector<std::string>> parse_set(const std::string& text) {
  std::map<std::string, std::vector<std::string>> out;
  std::string current;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    std::string word = text.substr(start, end - start), value = word;
    if (const auto eq = word.find('='); eq != std::string::npos) {
      current = word.substr(0, eq);
      value = word.substr(eq + 1);
      const bool ident = !current.empty() && current.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string::npos &&
                         !(current[0] >= '0' && current[0] <= '9');
      require(ident, "--set: '" + current + "' is not a parameter name (lower-case letters, digits and _)");
      require(out.count(current) == 0, "--set: parameter '" + current + "' given twice");
      out[current];
    }
    require(!current.empty(), "--set: '" + word + "' names no parameter (NAME=V1,V2,...)");
    require(!value.empty(), "--set: an empty value for '" + current + "' in '" + text + "'");
    if (current == "dist") value = to_string(parse_dist(value));                  // refuses unknown names
    else value = std::to_string(parse_shape(value + "x1").m);  // a positive integer, digits only
    out[current].push_back(value);
    start = end + 1;
  }
  return out;
}

std::pair<int, int> parse_shard(const std::string& text) {
  const std::string what = "--shard must be I/N with 0 <= I < N (e.g. 0/2, 1/2; got '" + text + "')";
  const auto slash = text.find('/');
  require(slash != std::string::npos, what);
  const std::string i = text.substr(0, slash), n = text.substr(slash + 1);
  auto number = [&](const std::string& s) {
    require(!s.empty() && s.size() <= 6 && s.find_first_not_of("0123456789") == std::string::npos, what);
    return std::stoi(s);
  };
  const int index = number(i), count = number(n);
  require(count >= 1, "--shard: N must be at least 1 (got '" + text + "')");
  require(index < count, "--shard: I must be below N (got '" + text + "': shards are numbered 0 to N-1)");
  return {index, count};
}

std::string to_string(ClaimState s) {
  switch (s) {
    case ClaimState::held: return "held";
    case ClaimState::not_held: return "not_held";
    case ClaimState::not_evaluated: return "not_evaluated";
  }
  return "?";
}

Context::Context(const Registry& reg, const Experiment& e, const RunOptions& o, Report& r, const DeviceInfo* dev, const Ceiling* ceiling,
                 Timer* timer, std::size_t* race_counter)
    : reg_(reg), exp_(e), opt_(o), report_(r), dev_(dev), ceiling_(ceiling), timer_(timer),
      races_(race_counter ? race_counter : &own_races_) {
  for (const auto& c : e.claims) {
    require(!c.id.empty(), "experiment '" + e.name + "' states a claim without an id: " + c.text);
    for (const auto& prev : claims_) require(prev.id != c.id, "experiment '" + e.name + "' states claim '" + c.id + "' twice");
    claims_.push_back({c.id, c.text, ClaimState::not_evaluated, ""});
  }
  books_.resize(claims_.size());
}

const DeviceInfo& Context::device() const {
  require(dev_ != nullptr, "experiment '" + exp_.name + "' asked for the device, but there is none");
  return *dev_;
}
const Ceiling& Context::ceiling() const {
  require(ceiling_ != nullptr, "experiment '" + exp_.name + "' asked for the ceiling, but no device was measured");
  return *ceiling_;
}
Timer& Context::timer() {
  require(timer_ != nullptr, "experiment '" + exp_.name + "' asked for the timer, but there is none: " +
                                 (dev_ ? std::string("the run set none up because the experiment declares neither needs_device nor uses_device")
                                       : std::string("there is no device")));
  return *timer_;
}

nlohmann::json Context::record(const std::string& kind) const { return {{"kind", kind}, {"experiment", exp_.name}}; }

void Context::skip(const std::string& what, const std::string& reason) {
  log("SKIP " + what + ": " + reason);
  auto r = record("skip");
  r["what"] = what;
  r["reason"] = reason;
  add(std::move(r));
}

void Context::publish_claim(std::size_t index) {
  const ClaimBook& b = books_[index];
  ClaimResult& c = claims_[index];
  c.state = b.state;
  c.evidence = b.evidence;
  if (b.state == ClaimState::not_held) return;
  // A claim that names no evaluations, held on this shard's races while others ran elsewhere: held
  // on a part of what it is stated over, so not evaluated here (merge_reports.py joins the shards).
  if (b.state == ClaimState::held && b.needs.empty() && other_shard_races_ > 0) {
    c.state = ClaimState::not_evaluated;
    c.evidence = "held on the races of shard " + std::to_string(opt_.shard_index) + "/" + std::to_string(opt_.shard_count) +
                 " only (" + std::to_string(other_shard_races_) + " of the experiment's races ran in other shards): " + b.evidence;
    return;
  }
  std::string missing;
  int n_missing = 0;
  for (const auto& k : b.needs)
    if (std::find(b.got.begin(), b.got.end(), k) == b.got.end()) {
      missing += (missing.empty() ? "" : ", ") + k;
      ++n_missing;
    }
  if (n_missing == 0) return;
  c.state = ClaimState::not_evaluated;
  c.evidence = "not evaluated on " + missing + " (" + std::to_string(n_missing) + " of the " + std::to_string(b.needs.size()) + " needed)" +
               (b.evidence.empty() ? "" : "; held on the others: " + b.evidence);
}

ClaimRef Context::claim(const Claim& c) { return claim(c.id); }

ClaimRef Context::claim(const std::string& id) {
  std::string stated;
  for (std::size_t i = 0; i < claims_.size(); ++i) {
    if (claims_[i].id == id) return ClaimRef(*this, i);
    stated += (stated.empty() ? "" : ", ") + claims_[i].id;
  }
  throw Error("experiment '" + exp_.name + "' settles claim '" + id + "' but states only: " + (stated.empty() ? "none" : stated));
}

const std::string& ClaimRef::id() const { return ctx_->claims_[index_].id; }
const ClaimResult& ClaimRef::result() const { return ctx_->claims_[index_]; }

void ClaimRef::set(bool held, const std::string& evidence) {
  auto& b = ctx_->books_[index_];
  b.state = held ? ClaimState::held : ClaimState::not_held;
  b.evidence = evidence;
  ctx_->publish_claim(index_);
}

void ClaimRef::settle(bool held, const std::string& evidence) {
  auto& b = ctx_->books_[index_];
  if (b.state == ClaimState::not_held) {
    if (!held) b.evidence += "; " + evidence;
  } else if (!held || b.state == ClaimState::not_evaluated) {
    b.state = held ? ClaimState::held : ClaimState::not_held;
    b.evidence = evidence;
  } else {
    b.evidence += "; " + evidence;
  }
  ctx_->publish_claim(index_);
}

void ClaimRef::settle(const std::string& key, bool held, const std::string& evidence) {
  ctx_->books_[index_].got.push_back(key);
  settle(held, evidence);
}

ClaimRef& ClaimRef::needs(std::vector<std::string> keys) {
  ctx_->books_[index_].needs = std::move(keys);
  ctx_->publish_claim(index_);
  return *this;
}

void Context::race_in_other_shard() {
  ++other_shard_races_;
  for (std::size_t i = 0; i < claims_.size(); ++i) publish_claim(i);
}

void Context::log(const std::string& line) const { std::cerr << "[" << exp_.name << "] " << line << std::endl; }

int Context::finish() {
  int failed = 0;
  for (std::size_t i = 0; i < claims_.size(); ++i) {
    auto r = record("claim");
    r["index"] = i;
    r["id"] = claims_[i].id;
    r["text"] = claims_[i].text;
    r["state"] = to_string(claims_[i].state);
    r["evidence"] = claims_[i].evidence;
    add(std::move(r));
    failed += claims_[i].state == ClaimState::not_held;
  }
  return failed;
}

}  // namespace klab
