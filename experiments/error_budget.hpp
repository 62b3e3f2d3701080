#pragma once
// The error budget of q4 weights (seed-digest.md section 3: "error budgets must be calibrated on real
// activations"): the same W, quantised once to raw q4, applied to input sets drawn from several
// distributions and read from files; the relative error of y = dequant(q4(W)) x against ref = W x,
// both in f64, per input set. Pure host code (Eigen), so the experiment runs without a GPU and the
// CPU suite tests the math.
//
// Two comparisons per input set:
//   weight error      y = dequant(W) x  vs  W x          what the GPU q4 tier computes (its f32 sums
//                                                        add ~1e-6, far below the quantisation error)
//   activation error  y8 = dequant(W) q8_0(x)  vs  y     the same q4 weights with x also quantised in
//                                                        blocks of 32 (ggml's q8_0: an int8 per value,
//                                                        an f16 scale per block), as the seed's CPU
//                                                        path did, against f32 activations (its GPU
//                                                        path)
// When W is drawn independently of x, the weight error is a property of W alone: for an error matrix
// E = dequant(W) - W whose entries are independent of x, E|E x|^2 / E|W x|^2 = E[e^2] / E[w^2] for ANY
// distribution of x. Heavy tails in x can only matter through the activations' own quantisation (the
// activation error: an outlier sets its block's scale, and the block's small values lose their bits)
// or through weights correlated with the inputs (a trained model's).
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace klab::experiments::budget {

// The error of one output vector, accumulated element by element (over row chunks).
struct VecErr {
  double max_diff = 0, max_ref = 0;  // max |y - ref|, max |ref|
  double sum_d2 = 0, sum_r2 = 0;     // sum (y - ref)^2, sum ref^2
  std::int64_t n = 0;
  void add(double y, double ref);
};

// Over the vectors (tokens) of one input set:
//   rms_rel = sqrt(sum_tokens sum_d2 / sum_tokens sum_r2)   (pooled over every element compared)
//   max_rel = max over tokens of max_diff / max_ref         (each vector normalised by its own max|ref|,
//                                                            as klab::accuracy and the seed do)
// A token whose reference is all zero gives max_rel 0 when y is all zero too, +inf otherwise.
struct Result {
  double rms_rel = 0, max_rel = 0;
  std::int64_t n = 0;  // elements compared (rows x tokens)
  int tokens = 0;
};
Result summarize(std::span<const VecErr> tokens);

// x quantised to q8_0 and back, as ggml's quantize_row_q8_0_ref: per block of 32,
//   d = max|x| / 127 (f32), q = roundf(x * (1/d)) (0 when d == 0), value = q * f16(d).
// x.size() must be a multiple of 32 (std::invalid_argument otherwise).
std::vector<float> q8_0_roundtrip(std::span<const float> x);

// Rows [row0, row0 + rows) of W (row-major, k columns) into `out` (rows * k floats).
using RowSource = std::function<void(std::int64_t row0, std::int64_t rows, std::vector<float>& out)>;

struct InputSet {
  std::vector<float> x;  // (tokens, k)
  int tokens = 0;
};
struct SetResult {
  Result f32_act;  // weight error: q4 weights vs f32 weights, f32 activations
  Result act_err;  // activation error: q8_0 vs f32 activations, the same q4 weights
};

// W (m x k) is read `chunk` rows at a time from `w`, quantised by klab::ref::q4_quantize and
// dequantised; every set's outputs (tokens x m) are compared with W x. f64 throughout (Eigen).
// Throws std::invalid_argument for a shape q4 cannot hold or a set whose size is not tokens * k.
std::vector<SetResult> run(const RowSource& w, std::int64_t m, std::int64_t k, const std::vector<InputSet>& sets, std::int64_t chunk = 256);

// Activations from a file: "PATH.npy" (f32/f16, C order) or "PATH.safetensors:TENSOR". The last
// dimension is k, everything before it the tokens (a 1-D array is one token).
struct Activations {
  std::string source;  // the spec as given
  std::int64_t tokens = 0, k = 0;
  std::vector<float> data;  // (tokens, k)
};
// Splits "PATH.safetensors:TENSOR" into its two parts (tensor empty when there is no ':' after a
// .safetensors path); any other spec is a path as it stands.
std::pair<std::string, std::string> split_spec(const std::string& spec);
// Throws klab::Error naming the spec and the problem (missing tensor, a format error of the file,
// an empty array, a safetensors path without its tensor, listing the tensors it holds).
Activations load_activations(const std::string& spec);

}  // namespace klab::experiments::budget

#include "klab/registry.hpp"

namespace klab::experiments {
// The `error-budget` experiment (needs no device).
Experiment make_error_budget();
}  // namespace klab::experiments
