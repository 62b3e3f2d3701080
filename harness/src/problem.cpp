#include "klab/problem.hpp"

#include <cmath>
#include <limits>

#include "klab/error.hpp"

namespace klab {

std::string to_string(Dist d) {
  switch (d) {
    case Dist::uniform: return "uniform";
    case Dist::normal: return "normal";
    case Dist::student_t: return "student-t";
    case Dist::outlier: return "outlier";
  }
  return "?";
}

const std::vector<Dist>& all_dists() {
  static const std::vector<Dist> v{Dist::uniform, Dist::normal, Dist::student_t, Dist::outlier};
  return v;
}

Dist parse_dist(const std::string& s) {
  for (Dist d : all_dists())
    if (to_string(d) == s) return d;
  if (s == "heavy-tailed") return Dist::student_t;
  throw Error("unknown input distribution '" + s + "' (known: uniform, normal, student-t (alias heavy-tailed), outlier)");
}

std::int64_t Problem::param(const std::string& name) const {
  if (shape.m > 0 && name == "m") return shape.m;
  if (shape.m > 0 && name == "k") return shape.k;
  if (auto it = params.find(name); it != params.end()) return it->second;
  throw Error("problem " + str() + " has no parameter '" + name + "'");
}

bool Problem::has(const std::string& name) const {
  return (shape.m > 0 && (name == "m" || name == "k")) || params.count(name) != 0;
}

std::string Problem::key() const {
  std::string s = shape.m > 0 ? shape.str() : "";
  for (const auto& [name, v] : params) s += (s.empty() ? "" : ",") + name + "=" + std::to_string(v);
  return s;
}

std::string Problem::str() const { return key() + "/" + to_string(dist) + "/seed=" + std::to_string(seed); }

Shape parse_shape(const std::string& s) {
  auto bad = [&](const std::string& why) { return Error("malformed shape '" + s + "': " + why + " (expected MxK, e.g. 17408x5120)"); };
  auto x = s.find('x');
  if (x == std::string::npos || s.find('x', x + 1) != std::string::npos) throw bad("need exactly one 'x'");
  auto num = [&](const std::string& part) -> std::int64_t {
    if (part.empty()) throw bad("empty dimension");
    std::int64_t v = 0;
    for (char c : part) {
      if (c < '0' || c > '9') throw bad(std::string("'") + c + "' is not a digit");
      v = v * 10 + (c - '0');
      if (v > std::numeric_limits<int>::max()) throw bad("dimension over 2^31-1");
    }
    if (v == 0) throw bad("zero dimension");
    return v;
  };
  return Shape{num(s.substr(0, x)), num(s.substr(x + 1))};
}

namespace {
std::uint64_t splitmix(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Rng::Rng(std::uint64_t seed, std::uint64_t stream) {
  std::uint64_t x = seed ^ (stream * 0xD1B54A32D192ED03ull);
  for (auto& s : s_) s = splitmix(x);
}
std::uint64_t Rng::next() {  // xoshiro256**
  std::uint64_t r = rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
  s_[2] ^= s_[0]; s_[3] ^= s_[1]; s_[1] ^= s_[2]; s_[0] ^= s_[3]; s_[2] ^= t; s_[3] = rotl(s_[3], 45);
  return r;
}
double Rng::uniform() { return double(next() >> 11) * 0x1.0p-53; }
double Rng::uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
double Rng::normal() {
  double u1 = 1.0 - uniform();  // (0, 1]
  double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
}
double Rng::student_t(int dof) {
  double z = normal(), chi2 = 0;
  for (int i = 0; i < dof; ++i) {
    double g = normal();
    chi2 += g * g;
  }
  return z / std::sqrt(chi2 / dof);
}

std::vector<float> generate(Dist d, std::size_t n, std::uint64_t seed, std::uint64_t stream, double scale) {
  Rng rng(seed, stream);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    double x = 0;
    switch (d) {
      case Dist::uniform: x = rng.uniform(-1.0, 1.0); break;
      case Dist::normal: x = rng.normal(); break;
      case Dist::student_t: x = rng.student_t(3); break;
      case Dist::outlier: x = rng.normal() * (i % 64 == 0 ? 30.0 : 1.0); break;
    }
    v[i] = static_cast<float>(x * scale);
  }
  return v;
}

}  // namespace klab
