#pragma once
// The CPU truth for the Gated DeltaNet (GDN) decode step (seed-digest.md section 2): one layer,
// one token, seven operators, every intermediate exposed, everything accumulated in f64.
// Every formula below was checked against Hugging Face transformers' Qwen3_5GatedDeltaNet
// (models/qwen3_5/modeling_qwen3_5.py: forward, causal_conv1d_update, l2norm,
// torch_recurrent_gated_delta_rule, Qwen3_5RMSNormGated), which the oracle fixtures come from.
//
// Layouts (row-major throughout):
//   w_qkv  (conv_dim, hidden)   conv_dim = 2*nk*dk + nv*dv, rows q | k | v in that order
//   w_z    (nv*dv, hidden)      w_b (nv, hidden) -> beta      w_a (nv, hidden) -> gate a
//   w_out  (hidden, nv*dv)
//   a_log (nv), dt_bias (nv), conv_w (conv_dim, ck), norm_w (dv)
//   State S (nv, dk, dv) (= HF recurrent_states[b]); conv history hist (ck-1, conv_dim), OLDEST
//   frame first, holding the conv INPUT (the raw projection xc, before SiLU). HF keeps ck frames,
//   (conv_dim, ck) per batch entry: hist = conv_states[b][:, 1:] transposed (its oldest frame no
//   longer reaches any output).
//
// Tensor names in .safetensors files are transformers' (relative to the layer prefix, e.g.
// "model.layers.3.linear_attn."): in_proj_qkv.weight, in_proj_z.weight, in_proj_b.weight,
// in_proj_a.weight, out_proj.weight, conv1d.weight (conv_dim, 1, ck), A_log, dt_bias, norm.weight.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace klab::ref::safetensors {
class File;
class Writer;
}  // namespace klab::ref::safetensors

namespace klab::ref::gdn {

// The epsilon of the q/k L2 normalisation: HF hard-codes it (l2norm(x, eps=1e-6)), not a config value.
inline constexpr double kL2NormEps = 1e-6;

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
// Operators, in order (seed-digest.md section 2, as HF computes them):
//  1. xc = W_qkv h, z = W_z h, b = W_b h, a = W_a h; beta = sigmoid(b);
//     g = -exp(A_log) * softplus(a + dt_bias)   (log domain; softplus as torch: x > 20 -> x, else
//     log1p(exp(x)). The seed's extra branch x < -20 -> exp(x) differs from it by < 1.1e-9 relative.)
//  2. conv: acc = sum_j<ck-1 w[ch][j] hist[j][ch] + w[ch][ck-1] xc[ch]; xcv = silu(acc); history shifts
//     left by one frame and xc becomes the newest frame.
//  3. q, k, v = views of xcv.
//  4. per key head: q = l2norm(q) / sqrt(dk), k = l2norm(k), with l2norm(x) = x * rsqrt(sum x^2 + 1e-6)
//     (the epsilon INSIDE the root: kL2NormEps; |q| is 1/sqrt(dk) only up to that epsilon, and a zero
//     head stays zero).
//  5. per value head h (key head h / (nv/nk)): S *= exp(g); kv = S^T k; t = (v - kv) beta;
//     S += k t^T; o = S^T q (updated S).
//  6. onn = o * rsqrt(mean(o^2) + eps) * norm_w * silu(z)   (per value head; eps = rms_norm_eps).
//  7. out = W_out onn.
std::vector<double> step(const LayerWeights& w, State& st, std::span<const float> h, Intermediates* im = nullptr);

// Operators 4-5 alone (the recurrence), for one sequence and one token, in f64: what `step` runs
// after the conv, and what a recurrence kernel (ours or a peer's, e.g. fla's
// fused_recurrent_gated_delta_rule) computes. Only g.nk, g.nv, g.dk and g.dv are read.
//   q_raw, k_raw (nk*dk)  per key head, NOT normalised (the conv output's q and k views)
//   v (nv*dv), gate (nv) = g in the log domain (the decay is exp(g)), beta (nv) post-sigmoid
//   S (nv*dk*dv)          the state, (nv, dk, dv) row-major, updated in place
//   o (nv*dv)             receives S^T q per value head (the updated S)
//   qn, kn (nk*dk)        receive the normalised q (scaled by 1/sqrt(dk)) and k
// Per key head: qn = q * rsqrt(|q|^2 + 1e-6) / sqrt(dk), kn = k * rsqrt(|k|^2 + 1e-6); per value
// head h (key head h / (nv/nk)): S *= exp(g); kv = S^T kn; t = (v - kv) beta; S += kn t^T; o = S^T qn.
// Throws std::invalid_argument when a span's size does not fit the geometry.
void recurrence(const Geometry& g, std::span<const double> q_raw, std::span<const double> k_raw, std::span<const double> v,
                std::span<const double> gate, std::span<const double> beta, std::span<double> S, std::span<double> o,
                std::span<double> qn, std::span<double> kn);

// The scalar functions of the step, in f64, as torch defines them (exposed for tests and CPU models).
double sigmoid(double x);   // 1 / (1 + exp(-x)); 0 or 1 at the extremes, never NaN
double softplus(double x);  // x > 20 ? x : log1p(exp(x))   (torch.nn.functional.softplus, beta 1, threshold 20)
double silu(double x);      // x * sigmoid(x)

// ---- Files -------------------------------------------------------------------------------------
// Geometry from a file: hidden, nv, dv, ck, key_dim = nk*dk and value_dim = nv*dv follow from the
// tensor shapes (hidden = in_proj_qkv columns, nv = A_log length, dv = norm.weight length,
// ck = conv1d.weight's last dimension, 2*key_dim = conv_dim - nv*dv). dk and nk cannot be told apart
// by shapes alone; the rule: dk = LoadOptions::dk when given, else the metadata value "dk" (or
// "linear_key_head_dim"), else dk = dv (true of every Qwen3.5 model); then nk = key_dim / dk, which
// must divide exactly, and nv % nk == 0. Metadata values hidden, nk, nv, dv, ck, when present, must
// agree with the shapes (a file that contradicts itself is refused). eps = LoadOptions::eps when
// given, else metadata "rms_norm_eps", else 1e-6.
struct LoadOptions {
  std::string layer_prefix;  // e.g. "model.layers.3.linear_attn."; empty: the file's only layer, with any prefix or none
  int dk = 0;                // 0: by the rule above
  double eps = 0;            // 0: by the rule above
};

// Reads one layer's weights (F32, F16 or BF16 tensors; converted to f32). Throws
// safetensors::FormatError naming the file and the tensor for anything missing or mis-shaped.
LayerWeights load_weights(const safetensors::File& f, const LoadOptions& opt = {});
LayerWeights load_weights(const std::filesystem::path& file, const LoadOptions& opt = {});
// The prefix the loader would use (see LoadOptions::layer_prefix), e.g. "model.layers.0.linear_attn.".
std::string find_layer_prefix(const safetensors::File& f, const std::string& requested = "");
// Adds w under transformers' names (prefix + name, conv1d.weight as (conv_dim, 1, ck)) and the
// geometry as metadata (hidden, nk, nv, dk, dv, ck, rms_norm_eps).
void add_weights(safetensors::Writer& out, const LayerWeights& w, const std::string& prefix = "");

// Oracle fixtures (scripts/gen_gdn_fixture.py) hold, beside the weights:
//   inputs.h     (T, hidden)       the layer input of each token
//   expect.y     (T, hidden)       the layer output of each token
//   expect.S     (nv, dk, dv)      the recurrent state after the last token   (optional)
//   expect.hist  (ck-1, conv_dim)  the conv history after the last token      (optional)
inline constexpr const char* kInputsH = "inputs.h";
inline constexpr const char* kExpectY = "expect.y";
inline constexpr const char* kExpectS = "expect.S";
inline constexpr const char* kExpectHist = "expect.hist";

struct Sequence {
  int tokens = 0;
  std::vector<float> h;  // (tokens, hidden)
};
struct Expected {
  int tokens = 0;
  std::vector<float> y;     // (tokens, hidden)
  std::vector<float> S;     // empty when the file has none
  std::vector<float> hist;  // empty when the file has none
};
// Read and shape-check against g (throws safetensors::FormatError naming file and tensor).
Sequence load_inputs(const std::filesystem::path& file, const Geometry& g);
Expected load_expected(const std::filesystem::path& file, const Geometry& g);

}  // namespace klab::ref::gdn
