// map=packed on the host: the repack and its inverse, the exact f16 fma the f16x2 model needs, and
// the bit-models (packed.hpp's KLAB_HD arithmetic run on the CPU, summed in the kernel's order).
#include <array>
#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "klab/error.hpp"
#include "q4_gemv/lane_block.hpp"
#include "q4_gemv/packed.hpp"
#include "q4_gemv/packed_kernels.hpp"
#include "q4_gemv/packed_ring.hpp"

namespace klab::q4_gemv::packed {

std::vector<std::uint8_t> pack(const ref::Q4Matrix& w, int R) {
  try {
    w.check();
  } catch (const std::invalid_argument& e) {
    throw Error(std::string("q4_gemv pack: ") + e.what());
  }
  require(R == 1 || R == 2 || R == 4 || R == 8 || R == 16, "q4_gemv pack: rows per tile must be 1, 2, 4, 8 or 16, not " + std::to_string(R));
  const Geometry geo{w.m, w.k, R};
  std::vector<std::uint8_t> out(std::size_t(geo.bytes()), 0);
  const std::int64_t nb = geo.nb();
  for (std::int64_t i = 0; i < w.m; ++i)
    for (std::int64_t b = 0; b < nb; ++b) {
      std::memcpy(&out[std::size_t(geo.code_offset(i, b))], &w.codes[std::size_t(i * (w.k / 2) + b * 16)], 16);
      const std::uint16_t s = w.scales[std::size_t(i * nb + b)];
      out[std::size_t(geo.scale_offset(i, b))] = std::uint8_t(s & 0xFFu);
      out[std::size_t(geo.scale_offset(i, b)) + 1] = std::uint8_t(s >> 8);
    }
  return out;
}

ref::Q4Matrix unpack(std::span<const std::uint8_t> packed, std::int64_t m, std::int64_t k, int R) {
  if (auto why = ref::q4_shape_error(m, k); !why.empty()) throw Error("q4_gemv unpack: " + why);
  const Geometry geo{m, k, R};
  require(std::int64_t(packed.size()) == geo.bytes(), "q4_gemv unpack: " + std::to_string(packed.size()) + " bytes, the layout of " +
                                                          std::to_string(m) + "x" + std::to_string(k) + " with R = " + std::to_string(R) +
                                                          " has " + std::to_string(geo.bytes()));
  ref::Q4Matrix w;
  w.m = m;
  w.k = k;
  const std::int64_t nb = geo.nb();
  w.codes.resize(std::size_t(m * k / 2));
  w.scales.resize(std::size_t(m * nb));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t b = 0; b < nb; ++b) {
      std::memcpy(&w.codes[std::size_t(i * (k / 2) + b * 16)], &packed[std::size_t(geo.code_offset(i, b))], 16);
      const std::size_t o = std::size_t(geo.scale_offset(i, b));
      w.scales[std::size_t(i * nb + b)] = std::uint16_t(packed[o] | packed[o + 1] << 8);
    }
  return w;
}

// ---- the exact f16 fma ----
namespace {
using i128 = __int128;
using u128 = unsigned __int128;

bool half_finite(std::uint16_t h) { return (h & 0x7C00u) != 0x7C00u; }
// |h| as an integer multiple of 2^-24.
std::int64_t half_units(std::uint16_t h) {
  const int e = (h >> 10) & 0x1F, mant = h & 0x3FF;
  return e == 0 ? mant : std::int64_t(1024 + mant) << (e - 1);
}
int bit_length(u128 v) {
  int n = 0;
  while (v != 0) {
    v >>= 1;
    ++n;
  }
  return n;
}
}  // namespace

std::uint16_t half_fma_host(std::uint16_t a, std::uint16_t b, std::uint16_t c) {
  if (!half_finite(a) || !half_finite(b) || !half_finite(c))  // never produced by the forms; kept IEEE-ish
    return ref::float_to_half(float(double(ref::half_to_float_soft(a)) * double(ref::half_to_float_soft(b)) + double(ref::half_to_float_soft(c))));
  const bool sp = ((a ^ b) & 0x8000u) != 0, sc = (c & 0x8000u) != 0;
  // a*b + c in units of 2^-48, exactly (|.| < 2^81).
  const i128 prod = i128(half_units(a)) * i128(half_units(b));
  const i128 n = (sp ? -prod : prod) + (sc ? -(i128(half_units(c)) << 24) : (i128(half_units(c)) << 24));
  if (n == 0) return (prod == 0 && half_units(c) == 0 && sp && sc) ? 0x8000u : 0x0000u;  // -0 only from (-0) + (-0)
  const bool neg = n < 0;
  const u128 mag = u128(neg ? -n : n);
  // f16 quantum: 2^-24 below 2^-13 (subnormals and the first binade), else 2^(e-10): in units of
  // 2^-48 a shift of max(bit_length - 11, 24).
  const int len = bit_length(mag);
  int shift = len - 11 > 24 ? len - 11 : 24;
  u128 q = mag >> shift;
  const u128 rem = mag & ((u128(1) << shift) - 1), half = u128(1) << (shift - 1);
  if (rem > half || (rem == half && (q & 1))) ++q;
  if (q == 2048) {  // rounded up into the next binade
    q = 1024;
    ++shift;
  }
  std::uint16_t bits;
  if (shift == 24) {
    bits = std::uint16_t(q);  // q < 2048: subnormal (q < 1024) or the first normal binade, same encoding
  } else {
    const int biased = shift - 23;  // value = (q / 1024) 2^(shift - 38)
    bits = biased >= 31 ? std::uint16_t(0x7C00u) : std::uint16_t((biased << 10) | int(q - 1024));
  }
  return std::uint16_t(bits | (neg ? 0x8000u : 0u));
}

// ---- bit-models ----
float block_value_host(Form f, const std::uint8_t* bytes, std::uint16_t s, const float* x) {
  std::uint32_t w[4];
  block_words(bytes, w);
  switch (f) {
    case Form::f32: return mul_rn(block_dot_host_as<DotOffset>(bytes, x), ref::half_to_float_soft(s));
    case Form::q8: return q8_block(w, half_value(s), q8_prep(x));
    case Form::f16x2: return h2_block(w, half_value(s), h2_prep(x));
  }
  return 0.f;
}

std::vector<float> model_as(Form f, const ref::Q4Matrix& w, std::span<const float> x) {
  check_model_args(w, x);
  if (auto why = packed_error(w.k); !why.empty()) throw Error("q4_gemv bit-model: " + why);
  const std::int64_t nb = w.blocks_per_row(), chunks = (nb + kChunk - 1) / kChunk;
  // The x side is per block and shared by every row (as each thread prepares it once).
  std::vector<Q8X> q8(f == Form::q8 ? std::size_t(nb) : 0);
  std::vector<H2X> h2(f == Form::f16x2 ? std::size_t(nb) : 0);
  for (std::int64_t b = 0; b < nb; ++b) {
    if (f == Form::q8) q8[std::size_t(b)] = q8_prep(&x[std::size_t(b * 32)]);
    if (f == Form::f16x2) h2[std::size_t(b)] = h2_prep(&x[std::size_t(b * 32)]);
  }
  std::vector<float> y(static_cast<std::size_t>(w.m));
  for (std::int64_t row = 0; row < w.m; ++row) {
    float t = 0.f;
    for (std::int64_t c = 0; c < chunks; ++c) {
      std::array<float, 32> p{};
      for (int l = 0; l < 32; ++l) {
        const std::int64_t b = c * 32 + l;
        if (b >= nb) continue;  // +0
        const std::uint8_t* bytes = &w.codes[std::size_t(row * (w.k / 2) + b * 16)];
        const std::uint16_t s = w.scales[std::size_t(row * nb + b)];
        std::uint32_t words[4];
        block_words(bytes, words);
        switch (f) {
          case Form::f32: p[std::size_t(l)] = block_value_host(f, bytes, s, &x[std::size_t(b * 32)]); break;
          case Form::q8: p[std::size_t(l)] = q8_block(words, half_value(s), q8[std::size_t(b)]); break;
          case Form::f16x2: p[std::size_t(l)] = h2_block(words, half_value(s), h2[std::size_t(b)]); break;
        }
      }
      const float total = butterfly_host(p);
      t = c == 0 ? total : add_rn(t, total);
    }
    y[std::size_t(row)] = t;
  }
  return y;
}

// ---- the ring (load=bulk | cp-async) ----
std::vector<float> warp_rows_host(std::vector<std::vector<float>> v) {
  const int R = int(v.at(0).size());
  require(v.size() == 32 && (R == 1 || R == 2 || R == 4 || R == 8 || R == 16), "warp_rows_host: 32 lanes of 1, 2, 4, 8 or 16 rows");
  int o = 16;
  // At offset o a lane keeps half its rows (the upper half where its offset bit is set) and adds
  // its partner's value of them, which the partner sends (its lower half where the bit is set).
  for (int n = R; n > 1; n /= 2, o /= 2) {
    auto next = v;
    for (int l = 0; l < 32; ++l) {
      const int pl = l ^ o;
      const bool hi = (l & o) != 0, phi = (pl & o) != 0;
      for (int i = 0; i < n / 2; ++i) {
        const float keep = hi ? v[std::size_t(l)][std::size_t(i + n / 2)] : v[std::size_t(l)][std::size_t(i)];
        const float recv = phi ? v[std::size_t(pl)][std::size_t(i)] : v[std::size_t(pl)][std::size_t(i + n / 2)];
        next[std::size_t(l)][std::size_t(i)] = add_rn(keep, recv);
      }
    }
    v = std::move(next);
  }
  std::array<float, 32> t{};
  for (int l = 0; l < 32; ++l) t[std::size_t(l)] = v[std::size_t(l)][0];
  for (; o > 0; o /= 2) {
    std::array<float, 32> next{};
    for (int l = 0; l < 32; ++l) next[std::size_t(l)] = add_rn(t[std::size_t(l)], t[std::size_t(l ^ o)]);
    t = next;
  }
  std::vector<float> out(static_cast<std::size_t>(R));
  for (int r = 0; r < R; ++r) out[std::size_t(r)] = t[std::size_t(r * 32 / R)];
  return out;
}

std::vector<float> model_ring(Load load, int R, int grid, int S, const ref::Q4Matrix& w, std::span<const float> x, int split, bool tail) {
  check_model_args(w, x);
  if (auto why = packed_error(w.k); !why.empty()) throw Error("q4_gemv bit-model: " + why);
  require(load == Load::bulk || load == Load::cp_async, "q4_gemv ring model: load=bulk or cp-async");
  require(R == 4 || R == 8, "q4_gemv ring model: rows 4 or 8");
  require(split == 1 || ((split == 2 || split == 4) && R % split == 0 && load == Load::bulk),
          "q4_gemv ring model: row-split 1, or 2 or 4 dividing rows with load=bulk");
  require(!tail || load == Load::bulk, "q4_gemv ring model: tail=split takes load=bulk");
  require(grid >= 1 && S >= 0 && S <= kRingMaxStages, "q4_gemv ring model: grid >= 1, 0 <= S <= 8");
  const int nb = int(w.blocks_per_row());
  RingPlan plan;
  plan.W = (nb + kChunk - 1) / kChunk;
  plan.R = R;
  plan.S = S == 0 ? ring_stages(plan.W, R) : S;
  plan.grid = grid;
  plan.groups = int((w.m + R - 1) / R);
  if (tail) plan.q = tail_pieces(plan.groups, plan.grid, R);
  const auto packed = pack(w, R);
  // The x words as xprep_kernel<q8> writes them (g_xq) and every thread reads them.
  std::vector<Q8X> xq(static_cast<std::size_t>(nb));
  for (int b = 0; b < nb; ++b) xq[std::size_t(b)] = q8_prep(&x[std::size_t(b) * 32]);
  const std::size_t stage = std::size_t(plan.stage_bytes());
  std::vector<float> y(std::size_t(w.m), std::numeric_limits<float>::quiet_NaN());
  std::vector<std::uint8_t> ring(std::size_t(plan.S) * stage);
  for (int j = 0; j < plan.grid; ++j) {
    const int mine = plan.items(j);
    std::fill(ring.begin(), ring.end(), std::uint8_t(0xA5));  // stale bytes: whatever a read misses shows
    auto fill = [&](int n, int s) {
      const std::uint8_t* src = packed.data() + plan.group_offset(plan.group_at(j, n));
      std::uint8_t* dst = ring.data() + std::size_t(s) * stage;
      if (plan.is_piece(n)) {  // tile by tile: the piece's rows' codes and the tile's scales
        for (int wp = 0; wp < plan.W; ++wp) {
          const std::size_t t = std::size_t(wp) * std::size_t(plan.tile()), c0 = std::size_t(plan.row0(j, n)) * (kChunk * 16);
          std::memcpy(dst + t + c0, src + t + c0, std::size_t(plan.rows_of(n)) * (kChunk * 16));
          std::memcpy(dst + t + std::size_t(R) * (kChunk * 16), src + t + std::size_t(R) * (kChunk * 16), std::size_t(R) * (kChunk * 2));
        }
      } else if (load == Load::bulk) {
        std::memcpy(dst, src, stage);  // one bulk copy of the group's run
      } else {
        for (int tid = 0; tid < nb; ++tid) {  // active threads: their R code blocks and their scales
          const int wp = tid / 32, l = tid % 32;
          for (int r = 0; r < R; ++r) std::memcpy(dst + plan.code_at(wp, l, r), src + plan.code_at(wp, l, r), 16);
          std::memcpy(dst + plan.scales_at(wp, l), src + plan.scales_at(wp, l), std::size_t(2 * R));
        }
      }
    };
    for (int n = 0; n < plan.S && n < mine; ++n) fill(n, n);
    int s = 0;
    for (int n = 0; n < mine; ++n) {
      const std::uint8_t* st = ring.data() + std::size_t(s) * stage;
      std::vector<std::vector<float>> part(std::size_t(plan.W));  // (warp, row)
      for (int wp = 0; wp < plan.W; ++wp) {
        std::vector<std::vector<float>> p(32, std::vector<float>(std::size_t(R), 0.f));
        for (int l = 0; l < 32; ++l) {
          const int tid = wp * 32 + l;
          if (tid >= nb) continue;  // inactive: +0
          const Q8X& X = xq[std::size_t(tid)];
          for (int r = 0; r < R; ++r) {
            std::uint32_t words[4];
            block_words(st + plan.code_at(wp, l, r), words);
            const std::uint8_t* sp = st + plan.scales_at(wp, l) + 2 * r;
            const std::uint16_t sc = std::uint16_t(sp[0] | sp[1] << 8);
            int se = X.c, so = 0;
            for (int q = 0; q < 4; ++q) q8_word(words[q], X.xe[q], X.xo[q], se, so);
            p[std::size_t(l)][std::size_t(r)] = q8_finish(se, so, half_value(sc), X.d);
          }
        }
        // row-split: the threads of share h butterfly rows h RS .. (h+1) RS - 1 among themselves.
        const int rs = R / split;
        for (int h = 0; h < split; ++h) {
          std::vector<std::vector<float>> ph(32);
          for (int l = 0; l < 32; ++l) ph[std::size_t(l)].assign(p[std::size_t(l)].begin() + h * rs, p[std::size_t(l)].begin() + (h + 1) * rs);
          const auto t = warp_rows_host(std::move(ph));
          part[std::size_t(wp)].insert(part[std::size_t(wp)].end(), t.begin(), t.end());
        }
      }
      // The barrier: stage s is read; refill it with group n + S.
      if (n + plan.S < mine) fill(n + plan.S, s);
      for (int r = plan.row0(j, n); r < plan.row0(j, n) + plan.rows_of(n); ++r) {
        const std::int64_t row = plan.group_at(j, n) * R + r;
        if (row >= w.m) continue;
        float sum = part[0][std::size_t(r)];
        for (int wp = 1; wp < plan.W; ++wp) sum = add_rn(sum, part[std::size_t(wp)][std::size_t(r)]);
        y[std::size_t(row)] = sum;
      }
      if (++s == plan.S) s = 0;
    }
  }
  return y;
}

namespace {
template <Form F>
std::vector<float> model(const ref::Q4Matrix& w, std::span<const float> x) {
  return model_as(F, w, x);
}

// Warps a ring block takes for w (chunks of 32 blocks of a row): packed.cu's warps_for(k).
int ring_warps(const ref::Q4Matrix& w) { return int((w.blocks_per_row() + kChunk - 1) / kChunk); }

// The ring kernels' models: the grid the H200 takes at the seed shapes (132 SMs x 2 blocks); the
// bits depend on neither grid nor stages (the cpu suite runs others).
// Tail: tail=split.
template <Load L, int R, bool Tail = false>
std::vector<float> model_ring_of(const ref::Q4Matrix& w, std::span<const float> x) {
  return model_ring(L, R, 264, 0, w, x, 1, Tail);
}
// grid=half,per-sm=P (load=bulk): the H200's grid (132 SMs x P blocks) and the kernel's stages
// (half_stages); xprep=block prepares x with the same q8_prep as xprep_kernel, so one model serves
// both xprep values.
template <int R, int P, int Split = 1>
std::vector<float> model_half_of(const ref::Q4Matrix& w, std::span<const float> x) {
  const int W = ring_warps(w);
  return model_ring(Load::bulk, R, 132 * P, half_stages(W, R, P), w, x, split_in_use(Split, W));
}
// grid=groups,load=bulk: one block per group (grid = ceil(m / R)), one stage.
template <int R>
std::vector<float> model_ring_groups_of(const ref::Q4Matrix& w, std::span<const float> x) {
  return model_ring(Load::bulk, R, int((w.m + R - 1) / R), 1, w, x);
}
// row-split=2|4 (bulk, rows=8): the kernel runs row-split=1 where Split x W warps exceed 32 (k > 16384 / 8192).
template <int Split, bool Tail = false>
std::vector<float> model_split_of(const ref::Q4Matrix& w, std::span<const float> x) {
  const int W = ring_warps(w);
  return model_ring(Load::bulk, 8, 264, 0, w, x, split_in_use(Split, W), Tail);
}
// depth=D (bulk, rows=8): the kernel fills at most D of ring_stages' stages; with row-split=Split (2: the kernel runs
// row-split=1 where 2 W warps exceed 32) each group's rows over Split threads a block of 32 weights.
template <int D, int Split = 1>
std::vector<float> model_depth_of(const ref::Q4Matrix& w, std::span<const float> x) {
  const int W = ring_warps(w);
  return model_ring(Load::bulk, 8, 264, std::min(D, ring_stages(W, 8)), w, x, split_in_use(Split, W));
}
// tail: "split" (tail=split: bulk, rows=8, row-split 1 or 2) or ""; depth: "1", "2", "3" (bulk, rows=8, no tail; row-split
// none, or 2 at depth 2 and 3) or "".
Q4Model ring_model_for(const std::string& load, const std::string& rows, const std::string& split, const std::string& tail, const std::string& depth) {
  const bool bulk = load == load_name(Load::bulk);
  if (!depth.empty()) {
    require(bulk && rows == "8" && (split.empty() || (split == "2" && depth != "1")) && tail.empty() && (depth == "1" || depth == "2" || depth == "3"),
            "q4_gemv models: no ring model for depth=" + depth + " with load=" + load + ", rows=" + rows + (split.empty() ? "" : ", row-split=" + split));
    if (!split.empty()) return depth == "2" ? &model_depth_of<2, 2> : &model_depth_of<3, 2>;
    return depth == "1" ? &model_depth_of<1> : depth == "2" ? &model_depth_of<2> : &model_depth_of<3>;
  }
  if (!tail.empty()) {
    require(tail == "split" && bulk && rows == "8" && (split.empty() || split == "2"), "q4_gemv models: no ring model for tail=" + tail + " with load=" + load +
                                                                                          ", rows=" + rows + (split.empty() ? "" : ", row-split=" + split));
    return split.empty() ? &model_ring_of<Load::bulk, 8, true> : &model_split_of<2, true>;
  }
  if (!split.empty()) {
    require(bulk && rows == "8" && (split == "2" || split == "4"), "q4_gemv models: no ring model for row-split=" + split);
    return split == "2" ? &model_split_of<2> : &model_split_of<4>;
  }
  if (rows == "8") return bulk ? &model_ring_of<Load::bulk, 8> : &model_ring_of<Load::cp_async, 8>;
  return bulk ? &model_ring_of<Load::bulk, 4> : &model_ring_of<Load::cp_async, 4>;
}
}  // namespace

std::vector<Q4ModelEntry> packed_models() {
  std::vector<Q4ModelEntry> out;
  for (const auto& kern : packed_kernels()) {
    const std::string& dot = kern.axes.at(1).second;
    std::string load, rows, per_sm, grid, last, pre, split, tail, depth;
    for (const auto& [a, v] : kern.axes) {
      if (a == "grid") grid = v;
      if (a == "load") load = v;
      if (a == "rows") rows = v;
      if (a == "per-sm") per_sm = v;
      if (a == "last") last = v;
      if (a == "pre") pre = v;
      if (a == "row-split") split = v;
      if (a == "tail") tail = v;
      if (a == "depth") depth = v;  // trigger=late moves a prep kernel's trigger: the same model
    }
    // last=regs: the block's last group read from registers, not a stage; last=l2: the later groups
    // prefetched into L2 first; pre=1: the ring's first stage alone filled before the wait. The same
    // bytes and arithmetic in the same order, so the ring's model (the GPU suite holds the kernel to it).
    if (!per_sm.empty() && grid == "half") {  // grid=fill,pace=P,per-sm=N: the paced ring's model below (its bits on any grid)
      require(load == load_name(Load::bulk) && rows == "8" && (per_sm == "1" || per_sm == "2") && (last.empty() || last == "regs" || last == "l2") &&
                  (pre.empty() || pre == "1") && (split.empty() || (split == "2" && per_sm == "2" && last.empty())),
              "q4_gemv models: no grid=half model for " + kern.name);
      out.push_back(Q4ModelEntry{kern.name, !split.empty() ? &model_half_of<8, 2, 2> : per_sm == "1" ? &model_half_of<8, 1> : &model_half_of<8, 2>});
      continue;
    }
    if (!load.empty() && grid == "groups") {
      require(load == load_name(Load::bulk) && rows == "8", "q4_gemv models: no grid=groups ring model for " + kern.name);
      out.push_back(Q4ModelEntry{kern.name, &model_ring_groups_of<8>});
      continue;
    }
    if (!load.empty()) {
      out.push_back(Q4ModelEntry{kern.name, ring_model_for(load, rows, split, tail, depth)});
      continue;
    }
    out.push_back(Q4ModelEntry{kern.name, dot == form_name(Form::f32) ? &model<Form::f32> : dot == form_name(Form::f16x2) ? &model<Form::f16x2> : &model<Form::q8>});
  }
  return out;
}

}  // namespace klab::q4_gemv::packed
