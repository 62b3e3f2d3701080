#include "baselines/q4_0.hpp"

#include <cmath>
#include <cstring>

namespace klab::baselines::q4_0 {

std::vector<Block> repack(const ref::Q4Matrix& w) {
  w.check();
  const std::int64_t nb = w.blocks_per_row();
  std::vector<Block> out(std::size_t(w.m * nb));
  for (std::int64_t i = 0; i < w.m; ++i)
    for (std::int64_t b = 0; b < nb; ++b) {
      Block& blk = out[std::size_t(i * nb + b)];
      blk.d = w.scales[std::size_t(i * nb + b)];
      const std::int64_t j0 = b * ref::kQ4Block;
      for (int t = 0; t < 16; ++t) {
        // u = n4 + 8 in [0, 15]: element t low, element t + 16 high.
        const auto lo = std::uint8_t(w.code(i, j0 + t) + 8), hi = std::uint8_t(w.code(i, j0 + t + 16) + 8);
        blk.qs[t] = std::uint8_t(lo | (hi << 4));
      }
    }
  return out;
}

std::vector<float> dequantize(const std::vector<Block>& blocks, std::int64_t m, std::int64_t k) {
  const std::int64_t nb = k / 32;
  std::vector<float> y(std::size_t(m * k));
  // dequantize_row_q4_0, row by row (a row's blocks are contiguous; rows follow each other).
  for (std::int64_t i = 0; i < m * nb; ++i) {
    const float d = ref::half_to_float_soft(blocks[std::size_t(i)].d);
    for (int j = 0; j < 16; ++j) {
      const int x0 = (blocks[std::size_t(i)].qs[j] & 0x0F) - 8;
      const int x1 = (blocks[std::size_t(i)].qs[j] >> 4) - 8;
      y[std::size_t(i * 32 + j)] = float(x0) * d;
      y[std::size_t(i * 32 + j + 16)] = float(x1) * d;
    }
  }
  return y;
}

std::vector<float> mmvq_model(const ref::Q4Matrix& w, const std::vector<float>& x) {
  const auto blocks = repack(w);
  const std::int64_t nb = w.blocks_per_row();
  // quantize_q8_1 per block of 32 activations.
  std::vector<std::int8_t> q(static_cast<std::size_t>(w.k));
  std::vector<double> d8(static_cast<std::size_t>(nb)), s8(static_cast<std::size_t>(nb));
  for (std::int64_t b = 0; b < nb; ++b) {
    float amax = 0, sum = 0;
    for (int t = 0; t < 32; ++t) {
      amax = std::fmax(amax, std::fabs(x[std::size_t(b * 32 + t)]));
      sum += x[std::size_t(b * 32 + t)];  // the kernel's is a warp butterfly: another order, the same magnitude
    }
    const float d = amax / 127.0f;
    for (int t = 0; t < 32; ++t) q[std::size_t(b * 32 + t)] = amax == 0.0f ? 0 : std::int8_t(std::round(x[std::size_t(b * 32 + t)] / d));
    d8[std::size_t(b)] = ref::half_to_float_soft(ref::float_to_half(d));
    s8[std::size_t(b)] = ref::half_to_float_soft(ref::float_to_half(sum));
  }
  std::vector<float> y(std::size_t(w.m));
  for (std::int64_t i = 0; i < w.m; ++i) {
    double acc = 0;
    for (std::int64_t b = 0; b < nb; ++b) {
      const Block& blk = blocks[std::size_t(i * nb + b)];
      int sumi = 0;  // DP4A over the unsigned codes u = n4 + 8
      for (int t = 0; t < 16; ++t)
        sumi += (blk.qs[t] & 0xF) * q[std::size_t(b * 32 + t)] + (blk.qs[t] >> 4) * q[std::size_t(b * 32 + t + 16)];
      // d4 * (sumi * d8 - 8 * s8): the -8 of every code through the block's (f16) sum of x.
      acc += double(ref::half_to_float_soft(blk.d)) * (double(sumi) * d8[std::size_t(b)] - 8.0 * s8[std::size_t(b)]);
    }
    y[std::size_t(i)] = float(acc);
  }
  return y;
}

}  // namespace klab::baselines::q4_0
