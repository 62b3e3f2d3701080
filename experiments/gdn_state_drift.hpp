#pragma once
// gdn-state-drift's CPU side (experiments/gdn_state_drift.cpp), exposed for the cpu suite: the
// recurrence's tokens of one regime and the storage models.
#include <cstdint>
#include <string>
#include <vector>

#include "klab/ref/gdn.hpp"

namespace klab::experiments::state_drift {

// One regime of decay: g = log(U(lo, hi)) per value head and token (S *= exp(g)).
struct Regime {
  std::string name;
  double lo = 0, hi = 0;
};
// "seeded": exp(g) in [0.9, 0.999) (forgets within tens to hundreds of tokens); "long-memory":
// [0.98, 0.99999) (gdn-drift's long-memory weights give exp(g) ~0.98..0.99999: the state remembers
// more tokens than the run has, so rounding has the chance to pile up).
std::vector<Regime> regimes();

// One token's inputs, f32 as a kernel reads them: q, k (nk*dk) raw, N(0, 1); v (nv*dv) N(0, 1);
// g (nv) as above; beta (nv) = sigmoid(N(0, 1)). Deterministic in (seed, regime index, t).
struct Token {
  std::vector<float> q, k, v, g, beta;
};
Token token(const ref::gdn::Geometry& g, const Regime& r, int regime_index, std::uint64_t seed, int t);

// How S is stored between tokens in a model: the f64 recurrence (ref::gdn::recurrence) on the state
// as stored, then the new state rounded to f32 or to bf16 (to nearest even), or kept (f64: the
// reference itself).
enum class Storage { f64, f32, bf16 };
const char* to_string(Storage s);
// One token of the recurrence on S (nv*dk*dv, f64 holding the stored values) in place; o (nv*dv) out.
void model_step(const ref::gdn::Geometry& g, const Token& x, Storage s, std::vector<double>& S, std::vector<double>& o);

}  // namespace klab::experiments::state_drift
