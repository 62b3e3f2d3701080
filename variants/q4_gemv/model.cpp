// The CPU bit-models of the q4_gemv kernels (kernel.cu): a warp simulated lane by lane, with the
// kernel's mapping (block b, lane l -> column 32 b + l), its scale read (lane 0 then a broadcast, or
// every lane), its conversion (soft, or the host's hardware-equivalent), its rows per warp (x read
// once per block for the group), its chain assignment (block b -> chain b % C), its chain sum and
// its xor-butterfly, through the same KLAB_HD core (policy.hpp). A kernel that differs from its
// model by one bit has changed its arithmetic order.
#include <algorithm>
#include <array>

#include "klab/error.hpp"
#include "klab/registry.hpp"
#include "q4_gemv/lane_block.hpp"
#include "q4_gemv/packed_kernels.hpp"
#include "q4_gemv/policy.hpp"
#include "q4_gemv/q4_gemv.hpp"

namespace klab::q4_gemv {

namespace {
constexpr int kLanes = 32;

template <class P>
std::vector<float> model(const ref::Q4Matrix& w, std::span<const float> x) {
  constexpr int R = P::rows, C = P::chains;
  check_model_args(w, x);
  const std::int64_t m = w.m, k = w.k, nb = w.blocks_per_row();
  std::vector<float> y(static_cast<std::size_t>(m));
  std::array<float, kLanes> xv{};
  std::array<std::uint16_t, kLanes> sbits{};
  for (std::int64_t row0 = 0; row0 < m; row0 += R) {  // one simulated warp
    float acc[kLanes][R][C] = {};
    for (std::int64_t b = 0; b < nb; ++b) {
      const int c = int(b % C);
      for (int l = 0; l < kLanes; ++l) xv[l] = x[std::size_t(b * ref::kQ4Block + l)];
      for (int r = 0; r < R; ++r) {
        const std::int64_t row = std::min(row0 + r, m - 1);  // as in the kernel: past-the-end rows recompute m-1
        const std::uint16_t* sp = &w.scales[std::size_t(row * nb + b)];
        if constexpr (P::Scale::per_lane) {
          for (int l = 0; l < kLanes; ++l) sbits[l] = *sp;
        } else {
          const std::uint16_t lane0 = *sp;
          sbits.fill(lane0);
        }
        const std::uint8_t* bytes = &w.codes[std::size_t(row * (k / 2) + b * (ref::kQ4Block / 2))];
        for (int l = 0; l < kLanes; ++l) {
          const float s = P::F16::convert(sbits[l]);
          acc[l][r][c] = mac(bytes[l / 2], l, s, xv[l], acc[l][r][c]);
        }
      }
    }
    for (int r = 0; r < R && row0 + r < m; ++r) {
      std::array<float, kLanes> t{};
      for (int l = 0; l < kLanes; ++l) t[l] = combine<C>(acc[l][r]);
      y[std::size_t(row0 + r)] = butterfly_host(t);
    }
  }
  return y;
}

struct Collect {
  std::vector<Q4ModelEntry>* out;
  template <class P>
  void operator()() const {
    out->push_back(Q4ModelEntry{variant_name(kOp, P::axes()), &model<P>});
  }
};
}  // namespace

void check_model_args(const ref::Q4Matrix& w, std::span<const float> x) {
  try {
    w.check();
  } catch (const std::invalid_argument& e) {
    throw Error(std::string("q4_gemv bit-model: ") + e.what());
  }
  require(std::int64_t(x.size()) == w.k, "q4_gemv bit-model: x has " + std::to_string(x.size()) + " elements, W has k = " + std::to_string(w.k));
}

const std::vector<Q4ModelEntry>& q4_models() {
  static const std::vector<Q4ModelEntry> all = [] {
    std::vector<Q4ModelEntry> v;
    for_each_policy(Collect{&v});
    for (auto& e : lane_block_models()) v.push_back(std::move(e));
    for (auto& e : block_thread_models()) v.push_back(std::move(e));
    for (auto& e : packed::packed_models()) v.push_back(std::move(e));
    return v;
  }();
  return all;
}

Q4Model q4_model(const std::string& name) {
  for (const auto& e : q4_models())
    if (e.name == name) return e.model;
  throw Error("no q4_gemv bit-model named '" + name + "'");
}

}  // namespace klab::q4_gemv
