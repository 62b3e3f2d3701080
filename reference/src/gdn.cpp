#include "klab/ref/gdn.hpp"
#include "klab/ref/parse.hpp"

#include <Eigen/Dense>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <stdexcept>

#include "klab/ref/safetensors.hpp"

namespace klab::ref::gdn {

namespace {

using RowMajorF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowMajorD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// y = W x with W f32 row-major (m x k), x and y f64: every product and sum in double. Block by
// block, so the f64 copy of W never exists whole (in_proj_qkv of Qwen3.5-27B is 210 MB in f32).
std::vector<double> matvec(const std::vector<float>& w, const Eigen::VectorXd& x, std::int64_t m) {
  const std::int64_t k = x.size();
  Eigen::Map<const RowMajorF> W(w.data(), m, k);
  std::vector<double> y(static_cast<std::size_t>(m));
  Eigen::Map<Eigen::VectorXd> Y(y.data(), m);
  constexpr std::int64_t kRows = 256;
  for (std::int64_t r0 = 0; r0 < m; r0 += kRows) {
    const std::int64_t rows = std::min(kRows, m - r0);
    Y.segment(r0, rows).noalias() = W.middleRows(r0, rows).cast<double>() * x;
  }
  return y;
}

std::string expect_size(const char* name, std::size_t got, std::int64_t want, const std::string& shape) {
  return std::string("GDN weights: ") + name + " has " + std::to_string(got) + " elements, expected " + std::to_string(want) + " " + shape;
}

// Deterministic uniforms for random_weights: one mt19937_64 stream per tensor, seeded through
// splitmix64 so nearby seeds give unrelated streams; [0,1) from the top 53 bits (no
// std::uniform_real_distribution, whose output is implementation-defined).
class Uniform {
 public:
  Uniform(std::uint64_t seed, std::uint64_t stream) : gen_(mix(seed * 0x9E3779B97F4A7C15ull + stream)) {}
  double operator()(double lo, double hi) { return lo + (hi - lo) * (double(gen_() >> 11) * 0x1.0p-53); }

 private:
  static std::uint64_t mix(std::uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::mt19937_64 gen_;
};

}  // namespace

// ---- Geometry ------------------------------------------------------------------------------------

std::string Geometry::validate() const {
  if (hidden <= 0 || nk <= 0 || nv <= 0 || dk <= 0 || dv <= 0 || ck <= 0)
    return "every size must be positive (" + str() + ")";
  if (nv % nk != 0) return "nv (" + std::to_string(nv) + ") must be a multiple of nk (" + std::to_string(nk) + "): value head h uses key head h / (nv/nk)";
  if (ck > 64) return "conv kernel width " + std::to_string(ck) + " is over 64";
  if (!(eps > 0) || !std::isfinite(eps)) return "eps must be positive and finite (got " + std::to_string(eps) + ")";
  // conv_dim() and friends are int: refuse geometries whose sizes would not fit.
  const std::int64_t conv = 2 * std::int64_t(nk) * dk + std::int64_t(nv) * dv;
  if (conv > std::numeric_limits<int>::max() || std::int64_t(nv) * dk * dv > (std::int64_t(1) << 40) ||
      conv * hidden > (std::int64_t(1) << 40))
    return "sizes too large (" + str() + ")";
  return {};
}

std::string Geometry::str() const {
  char e[32];
  std::snprintf(e, sizeof e, "%g", eps);
  return "hidden=" + std::to_string(hidden) + " nk=" + std::to_string(nk) + " nv=" + std::to_string(nv) + " dk=" + std::to_string(dk) +
         " dv=" + std::to_string(dv) + " ck=" + std::to_string(ck) + " eps=" + e;
}

Geometry qwen35_27b() { return Geometry{5120, 16, 48, 128, 128, 4, 1e-6}; }

void LayerWeights::check() const {
  if (auto why = g.validate(); !why.empty()) throw std::invalid_argument("GDN weights: geometry: " + why);
  const std::int64_t H = g.hidden, C = g.conv_dim(), V = g.value_dim(), nv = g.nv;
  auto one = [](const char* name, const std::vector<float>& v, std::int64_t want, const std::string& shape) {
    if (static_cast<std::int64_t>(v.size()) != want) throw std::invalid_argument(expect_size(name, v.size(), want, shape));
  };
  one("w_qkv (in_proj_qkv)", w_qkv, C * H, "(conv_dim, hidden)");
  one("w_z (in_proj_z)", w_z, V * H, "(nv*dv, hidden)");
  one("w_b (in_proj_b)", w_b, nv * H, "(nv, hidden)");
  one("w_a (in_proj_a)", w_a, nv * H, "(nv, hidden)");
  one("w_out (out_proj)", w_out, H * V, "(hidden, nv*dv)");
  one("a_log (A_log)", a_log, nv, "(nv)");
  one("dt_bias", dt_bias, nv, "(nv)");
  one("conv_w (conv1d)", conv_w, C * g.ck, "(conv_dim, ck)");
  one("norm_w (norm)", norm_w, g.dv, "(dv)");
}

LayerWeights random_weights(const Geometry& g, std::uint64_t seed) {
  if (auto why = g.validate(); !why.empty()) throw std::invalid_argument("random_weights: " + why);
  LayerWeights w;
  w.g = g;
  std::uint64_t stream = 0;
  auto fill = [&](std::vector<float>& v, std::int64_t n, auto gen) {
    Uniform u(seed, stream++);
    v.resize(static_cast<std::size_t>(n));
    for (auto& x : v) x = static_cast<float>(gen(u));
  };
  const double sh = 1.0 / std::sqrt(double(g.hidden)), sv = 1.0 / std::sqrt(double(g.value_dim())), sc = 1.0 / std::sqrt(double(g.ck));
  const std::int64_t H = g.hidden, C = g.conv_dim(), V = g.value_dim();
  fill(w.w_qkv, C * H, [&](Uniform& u) { return u(-sh, sh); });
  fill(w.w_z, V * H, [&](Uniform& u) { return u(-sh, sh); });
  fill(w.w_b, g.nv * H, [&](Uniform& u) { return u(-sh, sh); });
  fill(w.w_a, g.nv * H, [&](Uniform& u) { return u(-sh, sh); });
  fill(w.w_out, H * V, [&](Uniform& u) { return u(-sv, sv); });
  fill(w.a_log, g.nv, [](Uniform& u) { return std::log(u(1.0, 16.0)); });
  fill(w.dt_bias, g.nv, [](Uniform& u) { return std::log(std::expm1(u(1e-3, 1e-1))); });
  fill(w.conv_w, C * g.ck, [&](Uniform& u) { return u(-sc, sc); });
  fill(w.norm_w, g.dv, [](Uniform& u) { return 1.0 + 0.1 * u(-1.0, 1.0); });
  return w;
}

State State::zeros(const Geometry& g) {
  State s;
  s.S.assign(static_cast<std::size_t>(std::int64_t(g.nv) * g.dk * g.dv), 0.0);
  s.hist.assign(static_cast<std::size_t>(std::int64_t(g.ck - 1) * g.conv_dim()), 0.0);
  return s;
}

// ---- Readback names ------------------------------------------------------------------------------

const std::vector<What>& all_whats() {
  static const std::vector<What> w{What::XC, What::XCV, What::Z, What::Q,  What::K,   What::A,   What::B,
                                   What::BETA, What::G, What::ON, What::ONN, What::OUT, What::S, What::HIST};
  return w;
}

std::string to_string(What w) {
  switch (w) {
    case What::XC: return "XC";
    case What::XCV: return "XCV";
    case What::Z: return "Z";
    case What::Q: return "Q";
    case What::K: return "K";
    case What::A: return "A";
    case What::B: return "B";
    case What::BETA: return "BETA";
    case What::G: return "G";
    case What::ON: return "ON";
    case What::ONN: return "ONN";
    case What::OUT: return "OUT";
    case What::S: return "S";
    case What::HIST: return "HIST";
  }
  return "?";
}

What parse_what(const std::string& s) {
  std::string names;
  for (What w : all_whats()) {
    if (to_string(w) == s) return w;
    names += (names.empty() ? "" : ", ") + to_string(w);
  }
  throw std::invalid_argument("unknown GDN intermediate '" + s + "' (valid: " + names + ")");
}

std::int64_t count(const Geometry& g, What w) {
  switch (w) {
    case What::XC:
    case What::XCV: return g.conv_dim();
    case What::Z:
    case What::ON:
    case What::ONN: return g.value_dim();
    case What::Q:
    case What::K: return g.key_dim();
    case What::A:
    case What::B:
    case What::BETA:
    case What::G: return g.nv;
    case What::OUT: return g.hidden;
    case What::S: return std::int64_t(g.nv) * g.dk * g.dv;
    case What::HIST: return std::int64_t(g.ck - 1) * g.conv_dim();
  }
  return 0;
}

std::vector<double> Intermediates::get(What w, const State& st) const {
  switch (w) {
    case What::XC: return xc;
    case What::XCV: return xcv;
    case What::Z: return z;
    case What::Q: return q;
    case What::K: return k;
    case What::A: return a;
    case What::B: return b;
    case What::BETA: return beta;
    case What::G: return g;
    case What::ON: return on;
    case What::ONN: return onn;
    case What::OUT: return out;
    case What::S: return st.S;
    case What::HIST: return st.hist;
  }
  return {};
}

// ---- Scalar functions (torch's definitions) ------------------------------------------------------

// exp(-x) overflows to inf for x < -709: 1/(1+inf) = 0, the right limit, never NaN.
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// torch.nn.functional.softplus(x, beta=1, threshold=20): past the threshold it returns x itself
// (log1p(exp(x)) - x < 2.1e-9 there); below, log1p(exp(x)) is exact to double rounding for every x
// (exp underflows to 0 only below -745, where softplus is below the smallest double anyway).
double softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }

double silu(double x) { return x * sigmoid(x); }

// ---- The recurrence (operators 4-5) ---------------------------------------------------------------

void recurrence(const Geometry& G, std::span<const double> q_raw, std::span<const double> k_raw, std::span<const double> v,
                std::span<const double> gate, std::span<const double> beta, std::span<double> S_all, std::span<double> o,
                std::span<double> qn, std::span<double> kn) {
  const int nk = G.nk, nv = G.nv, dk = G.dk, dv = G.dv;
  if (nk <= 0 || nv <= 0 || dk <= 0 || dv <= 0 || nv % nk != 0)
    throw std::invalid_argument("GDN recurrence: nk, nv, dk, dv must be positive and nv a multiple of nk (" + G.str() + ")");
  const std::size_t KD = std::size_t(nk) * dk, V = std::size_t(nv) * dv, SN = std::size_t(nv) * dk * dv;
  auto size = [](const char* name, std::size_t got, std::size_t want) {
    if (got != want)
      throw std::invalid_argument(std::string("GDN recurrence: ") + name + " has " + std::to_string(got) + " elements, expected " + std::to_string(want));
  };
  size("q", q_raw.size(), KD);
  size("k", k_raw.size(), KD);
  size("v", v.size(), V);
  size("g", gate.size(), std::size_t(nv));
  size("beta", beta.size(), std::size_t(nv));
  size("S", S_all.size(), SN);
  size("o", o.size(), V);
  size("qn", qn.size(), KD);
  size("kn", kn.size(), KD);

  // 4. Per key head: q = q * rsqrt(|q|^2 + 1e-6) / sqrt(dk),  k = k * rsqrt(|k|^2 + 1e-6)
  std::copy(q_raw.begin(), q_raw.end(), qn.begin());
  std::copy(k_raw.begin(), k_raw.end(), kn.begin());
  const double qscale = 1.0 / std::sqrt(double(dk));
  for (int kh = 0; kh < nk; ++kh) {
    Eigen::Map<Eigen::VectorXd> q(qn.data() + std::size_t(kh) * dk, dk), k(kn.data() + std::size_t(kh) * dk, dk);
    q *= qscale / std::sqrt(q.squaredNorm() + kL2NormEps);
    k *= 1.0 / std::sqrt(k.squaredNorm() + kL2NormEps);
  }

  // 5. Delta rule per value head h on S_h (dk x dv, row-major), key head h / (nv/nk):
  //    S *= exp(g);  kv = S^T k;  t = (v - kv) * beta;  S += k t^T;  o = S^T q  (the updated S)
  const int group = nv / nk;
  for (int vh = 0; vh < nv; ++vh) {
    const int kh = vh / group;
    Eigen::Map<RowMajorD> S(S_all.data() + std::size_t(vh) * dk * dv, dk, dv);
    Eigen::Map<const Eigen::VectorXd> k(kn.data() + std::size_t(kh) * dk, dk), q(qn.data() + std::size_t(kh) * dk, dk);
    Eigen::Map<const Eigen::VectorXd> vv(v.data() + std::size_t(vh) * dv, dv);
    S *= std::exp(gate[vh]);
    const Eigen::VectorXd kv = S.transpose() * k;
    const Eigen::VectorXd t = (vv - kv) * beta[vh];
    S.noalias() += k * t.transpose();
    Eigen::Map<Eigen::VectorXd>(o.data() + std::size_t(vh) * dv, dv).noalias() = S.transpose() * q;
  }
}

// ---- The step ------------------------------------------------------------------------------------

std::vector<double> step(const LayerWeights& w, State& st, std::span<const float> h, Intermediates* im) {
  w.check();
  const Geometry& G = w.g;
  const int H = G.hidden, C = G.conv_dim(), V = G.value_dim(), KD = G.key_dim(), nv = G.nv, dv = G.dv, ck = G.ck;
  if (static_cast<std::int64_t>(h.size()) != H)
    throw std::invalid_argument("GDN step: input has " + std::to_string(h.size()) + " elements, hidden is " + std::to_string(H));
  if (static_cast<std::int64_t>(st.S.size()) != count(G, What::S) || static_cast<std::int64_t>(st.hist.size()) != count(G, What::HIST))
    throw std::invalid_argument("GDN step: state holds S " + std::to_string(st.S.size()) + " and hist " + std::to_string(st.hist.size()) +
                                " elements, not the (nv, dk, dv) and (ck-1, conv_dim) of " + G.str() + " (use State::zeros)");

  Intermediates local;
  Intermediates& I = im ? *im : local;
  const Eigen::VectorXd hd = Eigen::Map<const Eigen::VectorXf>(h.data(), H).cast<double>();

  // 1. Projections and gates. beta = sigmoid(b); g = -exp(A_log) * softplus(a + dt_bias) (log domain).
  I.xc = matvec(w.w_qkv, hd, C);
  I.z = matvec(w.w_z, hd, V);
  I.b = matvec(w.w_b, hd, nv);
  I.a = matvec(w.w_a, hd, nv);
  I.beta.resize(nv);
  I.g.resize(nv);
  for (int i = 0; i < nv; ++i) {
    I.beta[i] = sigmoid(I.b[i]);
    I.g[i] = -std::exp(double(w.a_log[i])) * softplus(I.a[i] + double(w.dt_bias[i]));
  }

  // 2. Depthwise causal conv over [hist[0], ..., hist[ck-2], xc] (oldest first), then SiLU:
  //    acc[ch] = sum_{j<ck-1} w[ch][j] * hist[j][ch] + w[ch][ck-1] * xc[ch]
  //    Then the history shifts left one frame and xc (pre-SiLU) becomes the newest.
  I.xcv.resize(C);
  for (int ch = 0; ch < C; ++ch) {
    const float* wc = &w.conv_w[std::size_t(ch) * ck];
    double acc = 0;
    for (int j = 0; j < ck - 1; ++j) acc += double(wc[j]) * st.hist[std::size_t(j) * C + ch];
    acc += double(wc[ck - 1]) * I.xc[ch];
    I.xcv[ch] = silu(acc);
  }
  if (ck > 1) {
    std::copy(st.hist.begin() + C, st.hist.end(), st.hist.begin());
    std::copy(I.xc.begin(), I.xc.end(), st.hist.end() - C);
  }

  // 3-5. q, k, v are views of xcv (rows q | k | v); the recurrence normalises q and k per key head
  // and runs the delta rule per value head (see recurrence()).
  I.q.resize(KD);
  I.k.resize(KD);
  I.on.resize(V);
  recurrence(G, std::span<const double>(I.xcv.data(), KD), std::span<const double>(I.xcv.data() + KD, KD),
             std::span<const double>(I.xcv.data() + 2 * KD, V), I.g, I.beta, st.S, I.on, I.q, I.k);

  // 6. Gated RMSNorm per value head: onn = o * rsqrt(mean(o^2) + eps) * norm_w * silu(z)
  I.onn.resize(V);
  for (int vh = 0; vh < nv; ++vh) {
    const double* o = I.on.data() + std::size_t(vh) * dv;
    double ss = 0;
    for (int j = 0; j < dv; ++j) ss += o[j] * o[j];
    const double r = 1.0 / std::sqrt(ss / dv + G.eps);
    for (int j = 0; j < dv; ++j) {
      const std::size_t i = std::size_t(vh) * dv + j;
      I.onn[i] = o[j] * r * double(w.norm_w[j]) * silu(I.z[i]);
    }
  }

  // 7. out = W_out onn
  I.out = matvec(w.w_out, Eigen::Map<const Eigen::VectorXd>(I.onn.data(), V), H);
  return I.out;
}

// ---- Files ---------------------------------------------------------------------------------------

namespace {

namespace st = klab::ref::safetensors;

constexpr const char* kQkv = "in_proj_qkv.weight";

[[noreturn]] void refuse(const st::File& f, const std::string& what) { throw st::FormatError(f.path().string() + ": " + what); }

// An integer metadata value, or 0 when absent; a value that is not a positive integer is refused.
int meta_int(const st::File& f, const std::string& key) {
  const std::string v = f.meta(key);
  if (v.empty()) return 0;
  const auto x = parse_whole_int(v);
  if (!x || *x <= 0 || *x > std::numeric_limits<int>::max()) refuse(f, "metadata " + key + "='" + v + "' is not a positive integer");
  return static_cast<int>(*x);
}

double meta_double(const st::File& f, const std::string& key) {
  const std::string v = f.meta(key);
  if (v.empty()) return 0;
  const auto x = parse_whole_number(v);
  if (!x || !(*x > 0) || !std::isfinite(*x)) refuse(f, "metadata " + key + "='" + v + "' is not a positive number");
  return *x;
}

}  // namespace

std::string find_layer_prefix(const st::File& f, const std::string& requested) {
  if (!requested.empty()) {
    std::string p = requested;
    if (p.back() != '.') p += '.';
    if (!f.find(p + kQkv)) refuse(f, "no tensor '" + p + kQkv + "' (layer prefix '" + p + "')");
    return p;
  }
  std::vector<std::string> found;
  const std::string suffix = kQkv;
  for (const auto& t : f.tensors()) {
    const std::string& n = t.name;
    if (n.size() < suffix.size() || n.compare(n.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    const std::string p = n.substr(0, n.size() - suffix.size());
    if (p.empty() || p.back() == '.') found.push_back(p);
  }
  if (found.empty()) refuse(f, std::string("no GDN layer: no tensor named ") + kQkv + " (with or without a prefix)");
  if (found.size() > 1) {
    std::string list;
    for (std::size_t i = 0; i < found.size() && i < 4; ++i) list += (i ? ", '" : "'") + found[i] + "'";
    if (found.size() > 4) list += ", ...";
    refuse(f, std::to_string(found.size()) + " GDN layers (" + list + "): name one with the layer prefix (--layer-prefix)");
  }
  return found[0];
}

LayerWeights load_weights(const st::File& f, const LoadOptions& opt) {
  const std::string p = find_layer_prefix(f, opt.layer_prefix);
  auto info = [&](const char* name) -> const st::TensorInfo& {
    const auto* t = f.find(p + name);
    if (!t) refuse(f, "no tensor '" + p + name + "' (a GDN layer needs in_proj_qkv/z/b/a, out_proj, conv1d, A_log, dt_bias, norm)");
    return *t;
  };
  auto need = [&](const st::TensorInfo& t, std::vector<std::int64_t> want, const std::string& what) {
    if (t.shape != want) {
      std::string ws = "[";
      for (std::size_t i = 0; i < want.size(); ++i) ws += (i ? ", " : "") + std::to_string(want[i]);
      refuse(f, "tensor '" + t.name + "' has shape " + t.shape_str() + ", expected " + ws + "] " + what);
    }
  };
  const auto& qkv = info("in_proj_qkv.weight");
  const auto& A = info("A_log");
  const auto& nrm = info("norm.weight");
  const auto& conv = info("conv1d.weight");
  if (qkv.shape.size() != 2) refuse(f, "tensor '" + qkv.name + "' has shape " + qkv.shape_str() + ", expected (conv_dim, hidden)");
  if (A.shape.size() != 1) refuse(f, "tensor '" + A.name + "' has shape " + A.shape_str() + ", expected (nv)");
  if (nrm.shape.size() != 1) refuse(f, "tensor '" + nrm.name + "' has shape " + nrm.shape_str() + ", expected (dv)");
  if (!(conv.shape.size() == 3 && conv.shape[1] == 1) && conv.shape.size() != 2)
    refuse(f, "tensor '" + conv.name + "' has shape " + conv.shape_str() + ", expected (conv_dim, 1, ck) or (conv_dim, ck)");

  const std::int64_t conv_dim = qkv.shape[0], hidden = qkv.shape[1], nv = A.shape[0], dv = nrm.shape[0], ck = conv.shape.back();
  const std::int64_t value_dim = nv * dv, two_key = conv_dim - value_dim;
  if (hidden <= 0 || nv <= 0 || dv <= 0 || ck <= 0) refuse(f, "a GDN tensor has a zero dimension");
  if (two_key <= 0 || two_key % 2 != 0)
    refuse(f, "in_proj_qkv has " + std::to_string(conv_dim) + " rows; with nv*dv = " + std::to_string(nv) + "*" + std::to_string(dv) +
                  " the q and k rows (" + std::to_string(two_key) + ") are not a positive even count");
  const std::int64_t key_dim = two_key / 2;
  std::string dk_from = "--dk";
  std::int64_t dk = opt.dk;
  if (dk <= 0) {
    dk = meta_int(f, "dk");
    dk_from = "metadata dk";
  }
  if (dk <= 0) {
    dk = meta_int(f, "linear_key_head_dim");
    dk_from = "metadata linear_key_head_dim";
  }
  if (dk <= 0) {
    dk = dv;
    dk_from = "dk = dv (no dk given)";
  }
  if (key_dim % dk != 0)
    refuse(f, "key_dim " + std::to_string(key_dim) + " (from in_proj_qkv rows) is not a multiple of dk " + std::to_string(dk) + " (" + dk_from + ")");
  const std::int64_t nk = key_dim / dk;
  // Metadata that contradicts the shapes is refused: the file lies about itself somewhere.
  for (auto [key, value] : {std::pair<const char*, std::int64_t>{"hidden", hidden}, {"nk", nk}, {"nv", nv}, {"dv", dv}, {"ck", ck}}) {
    const int m = meta_int(f, key);
    if (m != 0 && m != value)
      refuse(f, std::string("metadata ") + key + "=" + std::to_string(m) + " contradicts the tensor shapes, which give " + key + "=" +
                    std::to_string(value) + " (dk " + std::to_string(dk) + " from " + dk_from + ")");
  }
  Geometry g;
  g.hidden = int(hidden);
  g.nk = int(nk);
  g.nv = int(nv);
  g.dk = int(dk);
  g.dv = int(dv);
  g.ck = int(ck);
  g.eps = opt.eps > 0 ? opt.eps : meta_double(f, "rms_norm_eps");
  if (!(g.eps > 0)) g.eps = 1e-6;
  if (auto why = g.validate(); !why.empty()) refuse(f, "geometry from the tensor shapes: " + why);

  need(info("in_proj_z.weight"), {value_dim, hidden}, "(nv*dv, hidden)");
  need(info("in_proj_b.weight"), {nv, hidden}, "(nv, hidden)");
  need(info("in_proj_a.weight"), {nv, hidden}, "(nv, hidden)");
  need(info("out_proj.weight"), {hidden, value_dim}, "(hidden, nv*dv)");
  need(info("dt_bias"), {nv}, "(nv)");

  LayerWeights w;
  w.g = g;
  w.w_qkv = f.read_f32(p + "in_proj_qkv.weight");
  w.w_z = f.read_f32(p + "in_proj_z.weight");
  w.w_b = f.read_f32(p + "in_proj_b.weight");
  w.w_a = f.read_f32(p + "in_proj_a.weight");
  w.w_out = f.read_f32(p + "out_proj.weight");
  w.a_log = f.read_f32(p + "A_log");
  w.dt_bias = f.read_f32(p + "dt_bias");
  w.conv_w = f.read_f32(p + "conv1d.weight");
  w.norm_w = f.read_f32(p + "norm.weight");
  w.check();
  return w;
}

LayerWeights load_weights(const std::filesystem::path& file, const LoadOptions& opt) { return load_weights(st::File::open(file), opt); }

void add_weights(st::Writer& out, const LayerWeights& w, const std::string& prefix) {
  w.check();
  const Geometry& g = w.g;
  const std::int64_t H = g.hidden, C = g.conv_dim(), V = g.value_dim(), nv = g.nv;
  out.add_f32(prefix + "in_proj_qkv.weight", {C, H}, w.w_qkv);
  out.add_f32(prefix + "in_proj_z.weight", {V, H}, w.w_z);
  out.add_f32(prefix + "in_proj_b.weight", {nv, H}, w.w_b);
  out.add_f32(prefix + "in_proj_a.weight", {nv, H}, w.w_a);
  out.add_f32(prefix + "out_proj.weight", {H, V}, w.w_out);
  out.add_f32(prefix + "conv1d.weight", {C, 1, g.ck}, w.conv_w);
  out.add_f32(prefix + "A_log", {nv}, w.a_log);
  out.add_f32(prefix + "dt_bias", {nv}, w.dt_bias);
  out.add_f32(prefix + "norm.weight", {g.dv}, w.norm_w);
  // The shortest text that reads back as exactly g.eps ("1e-06", not "9.9999999999999995e-07").
  char eps[32];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(eps, sizeof eps, "%.*g", digits, g.eps);
    if (std::strtod(eps, nullptr) == g.eps) break;
  }
  for (auto [k, v] : {std::pair<const char*, int>{"hidden", g.hidden}, {"nk", g.nk}, {"nv", g.nv}, {"dk", g.dk}, {"dv", g.dv}, {"ck", g.ck}})
    out.metadata(k, std::to_string(v));
  out.metadata("rms_norm_eps", eps);
}

namespace {
// Reads `name` as f32 and checks its shape is exactly `want`.
std::vector<float> read_shaped(const st::File& f, const std::string& name, std::vector<std::int64_t> want, const std::string& what) {
  const auto& t = f.at(name);
  if (t.shape != want) {
    std::string ws = "[";
    for (std::size_t i = 0; i < want.size(); ++i) ws += (i ? ", " : "") + std::to_string(want[i]);
    refuse(f, "tensor '" + name + "' has shape " + t.shape_str() + ", expected " + ws + "] " + what);
  }
  return f.read_f32(name);
}

int token_count(const st::File& f, const std::string& name, std::int64_t hidden) {
  const auto& t = f.at(name);
  if (t.shape.size() != 2 || t.shape[1] != hidden || t.shape[0] <= 0 || t.shape[0] > (1 << 24))
    refuse(f, "tensor '" + name + "' has shape " + t.shape_str() + ", expected (tokens, hidden=" + std::to_string(hidden) + ") with tokens >= 1");
  return static_cast<int>(t.shape[0]);
}
}  // namespace

Sequence load_inputs(const std::filesystem::path& file, const Geometry& g) {
  const auto f = st::File::open(file);
  Sequence s;
  s.tokens = token_count(f, kInputsH, g.hidden);
  s.h = read_shaped(f, kInputsH, {s.tokens, g.hidden}, "(tokens, hidden)");
  return s;
}

Expected load_expected(const std::filesystem::path& file, const Geometry& g) {
  const auto f = st::File::open(file);
  Expected e;
  e.tokens = token_count(f, kExpectY, g.hidden);
  e.y = read_shaped(f, kExpectY, {e.tokens, g.hidden}, "(tokens, hidden)");
  if (f.find(kExpectS)) e.S = read_shaped(f, kExpectS, {g.nv, g.dk, g.dv}, "(nv, dk, dv)");
  if (f.find(kExpectHist)) e.hist = read_shaped(f, kExpectHist, {g.ck - 1, g.conv_dim()}, "(ck-1, conv_dim)");
  return e;
}

}  // namespace klab::ref::gdn
