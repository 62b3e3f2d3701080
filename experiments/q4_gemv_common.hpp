#pragma once
// What the q4 mat-vec A/B experiments share (q4_gemv.cpp: the four axis studies; q4_seed_ladder.cpp;
// q4_vs_peers.cpp): the seed ladder's rungs and the peers by name, the tolerance, the shapes and the
// evidence strings.
#include <cstdint>
#include <string>
#include <vector>

#include "klab/experiment.hpp"
#include "klab/problem.hpp"
#include "klab/race.hpp"

namespace klab::experiments::q4_study {

// The name of the seed-family q4_gemv variant with these axes.
std::string q4(const char* scale, const char* chains, const char* f16, const char* rows);
// The seed ladder's rungs.
extern const std::string kOriginal, kRungA, kRungB, kRungC;
extern const std::string kPeerBf16, kPeerF32, kPeerMmvq;

// Our kernels sum f32 fma-rounded products: ~sqrt(k) * 2^-24 of the row's magnitude, < 5e-6 for
// k <= 6144 (the bit-models measure 7.4e-7 at worst on the gpu suite's problems); a wrong element
// or a lost block is off by 1e-2 or more. The bf16 peer states its own, looser tolerance.
constexpr double kTolerance = 1e-5;

// The seed's four shapes, or (--quick) small shapes that still take every path.
std::vector<Shape> q4_shapes(const Context& ctx);
bool is_seed_shape(const Shape& s);
// Issue 13's goal for a seed shape, as a share of the read ceiling: 90% at 17408x5120, 85% at
// 10240x5120, 80% at the two small ones (q4-to-ceiling, q4-prep-split).
double goal_pct(const Shape& s);

std::string speed(const Measured& m);
// Warps the grid launches for `m` rows against the warps the device can hold at once for this
// kernel: the occupancy side of the rows-per-warp trade.
std::string warps_note(const std::string& variant, std::int64_t m, const Context& ctx);

Experiment seed_ladder();  // q4_seed_ladder.cpp
Experiment vs_peers();     // q4_vs_peers.cpp

}  // namespace klab::experiments::q4_study
