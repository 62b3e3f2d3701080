#pragma once
// What the GDN step experiments share (gdn_oracle.cpp, gdn_guards.cpp, gdn_drift.cpp,
// gdn_q4_per_op.cpp, gdn_q4_gates.cpp): the geometry they run at, its record, their inputs, the pool
// keys of the q4 tier's correct wiring, and the comparisons of intermediates. Tokens of a sequence
// are gdn::token (variants/gdn/inputs.hpp).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gdn/gdn_device.hpp"
#include "gdn/q4_pool.hpp"
#include "klab/experiment.hpp"
#include "klab/ref/gdn.hpp"
#include "klab/ref/gdn_q4.hpp"

namespace klab::experiments {

namespace rg = klab::ref::gdn;

// The criterion of the seed's oracle check (max_rel, normalised by the vector's largest |expected|).
// f32 rounding of sums over up to 6144 terms gives ~1e-6; a wrong index, a lost block or a stale
// buffer gives O(1). The seed measured 3.8e-7 against transformers (260x margin).
constexpr double kTol = 1e-4;

// The seed's magnitude gate: correct q4 wiring stays O(1e-2) against the f32 tier, miswiring ~1e0.
constexpr double kGate = 1e-1;

constexpr int kQkv = 1, kZ = 2, kOut = 3;  // pool keys of the correct wiring

// --quick's geometry: keeps nv != nk, dk != dv and dv not a multiple of 32; conv 416, nv*dv 288:
// q4-able, the big projections' shapes pairwise different.
rg::Geometry small_geometry();
// The Qwen3.5-27B geometry, or (--quick) small_geometry().
rg::Geometry geometry_for(const Context& ctx);

nlohmann::json to_json(const rg::Geometry& g);

// T tokens of layer input (T, hidden): heavy-tailed (N(0,1) with outlier channels, as LLM activations).
std::vector<float> make_inputs(const rg::Geometry& g, int T, std::uint64_t seed);

// Every intermediate of `layer` (and its state in slot 0), by name.
std::map<rg::What, std::vector<float>> snapshot(const gdn::GdnDevice& dev, int layer);

// The three big projections into the pool under keys kq, kz, ko.
void put_all(gdn::Q4Pool& pool, const rg::Q4Projections& q, int kq = kQkv, int kz = kZ, int ko = kOut);


// The worst max_rel over intermediates, and where it was.
struct Worst {
  double max_rel = 0;
  std::string where;
  bool finite = true;
  void see(double r, bool fin, const std::string& at);
  bool within(double tol) const { return finite && max_rel <= tol; }
};

}  // namespace klab::experiments
