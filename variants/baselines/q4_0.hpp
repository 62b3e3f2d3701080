#pragma once
// ggml's Q4_0 format, host side, without ggml: klab's raw-q4 repacked into it (exactly), its
// dequantisation by ggml's own definition, and a model of MMVQ's arithmetic (llama.cpp's mat-vec:
// activations quantised to q8_1, DP4A) that sets the llama-mmvq peer's tolerance. CUDA-free, so the
// cpu suite checks all of it where ggml was never built.
//
// block_q4_0 (ggml/src/ggml-common.h; dequantize_row_q4_0 in ggml-quants.c, llama-cpp-python 0.3.36):
//   struct { ggml_half d; uint8_t qs[16]; }             18 bytes, no padding, blocks back to back
//   value(t) = ((qs[t]      & 0xF) - 8) * d   t in [0, 16)   element t in the LOW nibble of byte t
//   value(t) = ((qs[t - 16] >>  4) - 8) * d   t in [16, 32)  element t in the HIGH nibble of byte t-16
// klab's raw-q4 (klab/ref/q4.hpp): byte j/2 of a block holds elements j (low) and j+1 (high), n4 two's
// complement in [-8, 7]. So a code moves to another nibble (u = n4 + 8, the same 4 bits with the top
// one flipped) and the f16 scale moves beside its codes unchanged: value = n4 * s in both, bit for bit.
#include <cstdint>
#include <vector>

#include "klab/ref/q4.hpp"

namespace klab::baselines::q4_0 {

struct Block {
  std::uint16_t d;         // f16 bits: klab's scale of this block
  std::uint8_t qs[16];     // element t < 16: low nibble of qs[t]; t >= 16: high nibble of qs[t - 16]; u = n4 + 8
};
static_assert(sizeof(Block) == 18, "block_q4_0 is 18 bytes with no padding");

// W (m x k) as m rows of k/32 blocks, row-major: what ggml reads for a Q4_0 tensor of ne = {k, m}.
std::vector<Block> repack(const ref::Q4Matrix& w);
// The (m x k) row-major f32 values of those blocks, by ggml's dequantize_row_q4_0 (f16 by the
// software conversion, exact).
std::vector<float> dequantize(const std::vector<Block>& blocks, std::int64_t m, std::int64_t k);

// MMVQ's arithmetic, modelled (not its summation order): x quantised per block of 32 as ggml's
// quantize_q8_1 kernel does (d = amax/127 in f32, q = roundf(x/d), d and the block's f32 sum stored
// as f16), each weight block's dot as vec_dot_q4_0_q8_1_impl forms it, d4 * (sumi * d8 - 8 * s8)
// (u in [0, 15]: the -8 comes back through the block sum), summed over blocks in f64.
std::vector<float> mmvq_model(const ref::Q4Matrix& w, const std::vector<float>& x);

}  // namespace klab::baselines::q4_0
