#pragma once
// A problem: a record of named parameters (the mat-vec shape m x k, and an op's own: GDN geometry,
// tokens, batch...), an input distribution and a seed. Deterministic for a given seed: the same
// (parameters, dist, seed) produce the same bytes on every machine (std::mt19937_64 + our own
// transforms; no std::*_distribution, whose output is implementation-defined).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace klab {

enum class Dist {
  uniform,    // U[-1, 1)
  normal,     // N(0, 1)
  student_t,  // Student-t with 3 degrees of freedom: heavy tails
  outlier,    // N(0, 1), with 1 channel in 64 scaled by 30 (outlier channels, as in LLM activations)
};
std::string to_string(Dist d);
Dist parse_dist(const std::string& s);  // throws klab::Error naming the valid names
const std::vector<Dist>& all_dists();

struct Shape {
  std::int64_t m = 0;  // rows (outputs)
  std::int64_t k = 0;  // columns (inputs)
  std::string str() const { return std::to_string(m) + "x" + std::to_string(k); }
  bool operator==(const Shape&) const = default;
};
// "17408x5120" -> {17408, 5120}. Throws klab::Error on anything else (empty, zero, negative,
// non-digits, overflow past 2^31 elements per dimension).
Shape parse_shape(const std::string& s);

// The seed's mat-vec shapes (Qwen3.5-27B): gate_proj, in_proj_qkv, in_proj_z, out_proj.
inline const std::vector<Shape>& seed_shapes() {
  static const std::vector<Shape> s{{17408, 5120}, {10240, 5120}, {6144, 5120}, {5120, 6144}};
  return s;
}

// An op's own named parameters, beyond the mat-vec shape (e.g. {batch: 8, dk: 128, nv: 48, ...}).
using Params = std::map<std::string, std::int64_t>;

// One parameter an op declares (Op::params; nvbench's declared axes, CUTLASS's problem struct): its
// default, the values the seed measured, and small values that still exercise every path (--quick).
struct ParamDecl {
  std::string name;
  std::string help;
  std::int64_t def = 0;
  std::vector<std::int64_t> seed;   // the values the seed's experiments use (empty: just def)
  std::vector<std::int64_t> quick;  // --quick (empty: def)
};

struct Problem {
  Shape shape;  // mat-vec ops: m x k; {0, 0} for ops whose dimensions are all in `params`
  Dist dist = Dist::uniform;
  std::uint64_t seed = 1;
  Params params = {};  // the op's own parameters (Op::params declares them)
  // The value of a named parameter: m or k of the shape, or one of params. Throws klab::Error naming
  // the parameters the problem has when it has no such one.
  std::int64_t param(const std::string& name) const;
  bool has(const std::string& name) const;
  // "17408x5120/uniform/seed=1"; with params "batch=8,dk=128/uniform/seed=1" (the shape first when
  // there is one: "64x64,batch=8/...").
  std::string str() const;
  // The parameters alone: "17408x5120", "batch=8,dk=128", or both joined by ','.
  std::string key() const;
};

// Deterministic random numbers for problem generation.
class Rng {
 public:
  explicit Rng(std::uint64_t seed, std::uint64_t stream = 0);
  double uniform();        // [0, 1)
  double uniform(double lo, double hi);
  double normal();         // Box-Muller
  double student_t(int dof);
 private:
  std::uint64_t next();
  std::uint64_t s_[4];
};

// n values of distribution `d` from (seed, stream): each tensor of a problem uses its own stream.
std::vector<float> generate(Dist d, std::size_t n, std::uint64_t seed, std::uint64_t stream, double scale = 1.0);

}  // namespace klab
