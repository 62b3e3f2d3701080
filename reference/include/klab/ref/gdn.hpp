#pragma once
// The CPU truth for the Gated DeltaNet (GDN) decode step (seed-digest.md section 2): one layer,
// one token, seven operators, every intermediate exposed, everything accumulated in f64.
//
// Layouts (row-major throughout):
//   w_qkv  (conv_dim, hidden)   conv_dim = 2*nk*dk + nv*dv, rows q | k | v in that order
//   w_z    (nv*dv, hidden)      w_b (nv, hidden) -> beta      w_a (nv, hidden) -> gate a
//   w_out  (hidden, nv*dv)
//   a_log (nv), dt_bias (nv), conv_w (conv_dim, ck), norm_w (dv)
//   State S (nv, dk, dv); conv history hist (ck-1, conv_dim), OLDEST frame first, holding the conv
//   INPUT (the raw projection xc, before SiLU).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace klab::ref::gdn {

struct Geometry {
  int hidden = 0;
  int nk = 0;   // key heads (q and k)
  int nv = 0;   // value heads; a multiple of nk (value head h uses key head h / (nv/nk))
  int dk = 0;   // key head dim
  int dv = 0;   // value head dim
  int ck = 4;   // conv kernel width
  double eps = 1e-6;  // gated RMSNorm epsilon
  int conv_dim() const { return 2 * nk * dk + nv * dv; }
  int key_dim() const { return nk * dk; }
  int value_dim() const { return nv * dv; }
  // Empty when the geometry is coherent; else the reason (non-positive sizes, nv % nk != 0, ...).
  std::string validate() const;
  std::string str() const;
  bool operator==(const Geometry&) const = default;
};

// Qwen3.5-27B: hidden 5120, 16 key heads x 128, 48 value heads x 128, conv 4.
Geometry qwen35_27b();

struct LayerWeights {
  Geometry g;
  std::vector<float> w_qkv, w_z, w_b, w_a, w_out, a_log, dt_bias, conv_w, norm_w;
  // Throws std::invalid_argument naming the first tensor whose size does not match g.
  void check() const;
};

// Seeded random weights with realistic ranges: projections ~ U(-1,1)/sqrt(fan_in), A_log = log(U(1,16)),
// dt_bias ~ log(expm1(U(1e-3, 1e-1))) (so softplus(dt_bias) spans 1e-3..1e-1), conv ~ U(-1,1)/sqrt(ck),
// norm_w ~ 1 + 0.1 U(-1,1).
LayerWeights random_weights(const Geometry& g, std::uint64_t seed);

struct State {
  std::vector<double> S;     // (nv, dk, dv)
  std::vector<double> hist;  // (ck-1, conv_dim), oldest first
  static State zeros(const Geometry& g);
};

// The readable intermediates, as the device object's get() names them.
enum class What { XC, XCV, Z, Q, K, A, B, BETA, G, ON, ONN, OUT, S, HIST };
const std::vector<What>& all_whats();
std::string to_string(What w);
What parse_what(const std::string& s);  // throws std::invalid_argument naming the valid names
// Element count of `w` for one layer:
//   XC, XCV: conv_dim; Z, ON, ONN: nv*dv; Q, K: nk*dk (normalised, per key head, q already scaled
//   by 1/sqrt(dk)); A, B, BETA, G: nv; OUT: hidden; S: nv*dk*dv; HIST: (ck-1)*conv_dim.
std::int64_t count(const Geometry& g, What w);

struct Intermediates {
  std::vector<double> xc, xcv, z, q, k, a, b, beta, g, on, onn, out;
  // The intermediate `w` (S and HIST are read from the state, after the step).
  std::vector<double> get(What w, const State& st) const;
};

// One decode step of one layer on input h (hidden): updates `st`, returns the output (hidden).
// Operators, in order (seed-digest.md section 2):
//  1. xc = W_qkv h, z = W_z h, b = W_b h, a = W_a h; beta = sigmoid(b);
//     g = -exp(A_log) * softplus(a + dt_bias)   (log domain; softplus: x>20 -> x, x<-20 -> exp(x))
//  2. conv: acc = sum_j<ck-1 w[ch][j] hist[j][ch] + w[ch][ck-1] xc[ch]; xcv = silu(acc); history shifts
//     left by one frame and xc becomes the newest frame.
//  3. q, k, v = views of xcv.  4. per key head: q = l2norm(q) / sqrt(dk), k = l2norm(k).
//  5. per value head h (key head h / (nv/nk)): S *= exp(g); kv = S^T k; t = (v - kv) beta;
//     S += k t^T; o = S^T q (updated S).
//  6. onn = o * rsqrt(mean(o^2) + eps) * norm_w * silu(z)   (per value head).   7. out = W_out onn.
std::vector<double> step(const LayerWeights& w, State& st, std::span<const float> h, Intermediates* im = nullptr);

}  // namespace klab::ref::gdn
