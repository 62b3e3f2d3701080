#include "klab/experiment.hpp"

#include <iostream>

#include "klab/error.hpp"

namespace klab {

std::string to_string(ClaimState s) {
  switch (s) {
    case ClaimState::held: return "held";
    case ClaimState::not_held: return "not_held";
    case ClaimState::not_evaluated: return "not_evaluated";
  }
  return "?";
}

Context::Context(const Experiment& e, const RunOptions& o, Report& r, const DeviceInfo* dev, const Ceiling* ceiling, Timer* timer)
    : exp_(e), opt_(o), report_(r), dev_(dev), ceiling_(ceiling), timer_(timer) {
  for (const auto& c : e.claims) claims_.push_back({c, ClaimState::not_evaluated, ""});
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
  require(timer_ != nullptr, "experiment '" + exp_.name + "' asked for the timer, but there is no device");
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

void Context::claim(std::size_t index, bool held, const std::string& evidence) {
  require(index < claims_.size(), "experiment '" + exp_.name + "' settles claim " + std::to_string(index) + " but states only " + std::to_string(claims_.size()));
  claims_[index].state = held ? ClaimState::held : ClaimState::not_held;
  claims_[index].evidence = evidence;
}

void Context::claim_all(std::size_t index, bool held, const std::string& evidence) {
  require(index < claims_.size(), "experiment '" + exp_.name + "' settles claim " + std::to_string(index) + " but states only " + std::to_string(claims_.size()));
  auto& c = claims_[index];
  if (c.state == ClaimState::not_held) {
    if (!held) c.evidence += "; " + evidence;
    return;
  }
  if (!held || c.state == ClaimState::not_evaluated) {
    c.state = held ? ClaimState::held : ClaimState::not_held;
    c.evidence = evidence;
  } else {
    c.evidence += "; " + evidence;
  }
}

void Context::log(const std::string& line) const { std::cerr << "[" << exp_.name << "] " << line << std::endl; }

int Context::finish() {
  int failed = 0;
  for (std::size_t i = 0; i < claims_.size(); ++i) {
    auto r = record("claim");
    r["index"] = i;
    r["text"] = claims_[i].text;
    r["state"] = to_string(claims_[i].state);
    r["evidence"] = claims_[i].evidence;
    add(std::move(r));
    failed += claims_[i].state == ClaimState::not_held;
  }
  return failed;
}

}  // namespace klab
