// q4_gemm on the CPU: the reference is q4_gemv's per column and n = 1 is q4_gemv's problem byte for
// byte; the byte model by hand; every variant registered with a bit-model; the batched kernels'
// schedule (workspace layout, tiles, C columns per step, the warps summed in order) simulated on the
// host equal to the per-column gemv model bit for bit on awkward shapes, and so to impl=loop's
// model; refusals before any CUDA call, naming the problem.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "../q4_cases.hpp"
#include "klab/catalog.hpp"
#include "klab/cuda.hpp"
#include "klab/error.hpp"
#include "klab/metrics.hpp"
#include "klab/ref/q4.hpp"
#include "klab/registry.hpp"
#include "q4_gemm/variants.hpp"
#include "q4_gemv/nibbles.hpp"
#include "q4_gemv/packed.hpp"
#include "q4_gemv/packed_ring.hpp"
#include "q4_gemv/q4_gemv.hpp"

using namespace klab;
namespace pk = klab::q4_gemv::packed;

namespace {
ref::Q4Matrix random_matrix(std::int64_t m, std::int64_t k, std::uint64_t seed) { return test::random_q4_matrix(m, k, seed); }

// gemm_kernel<R, C> and xprep_cols_kernel (variants/q4_gemm/gemm.cu) on the host, thread by thread:
// the workspace at the kernel's indices, each thread's codes and scales at its tile offsets of the
// packed W, per column the block values and the transposed butterfly lane by lane (warp_rows_host),
// C columns per step, thread e summing (column e / R, row e % R) over the warps from warp 0.
std::vector<float> simulate_gemm(const ref::Q4Matrix& w, const std::vector<float>& X, int n, int R, int C) {
  const int m = int(w.m), k = int(w.k), nb = k / 32, W = (nb + 31) / 32;
  const auto packed = pk::pack(w, R);
  std::vector<std::array<std::uint32_t, 4>> xw(std::size_t(2 * n * nb));
  std::vector<std::array<std::uint32_t, 2>> xcd(std::size_t(n * nb));
  for (int j = 0; j < n; ++j)
    for (int b = 0; b < nb; ++b) {
      const pk::Q8X q = pk::q8_prep(&X[std::size_t(j) * k + std::size_t(b) * 32]);
      xw[std::size_t(2 * j * nb + b)] = {q.xe[0], q.xe[1], q.xe[2], q.xe[3]};
      xw[std::size_t((2 * j + 1) * nb + b)] = {q.xo[0], q.xo[1], q.xo[2], q.xo[3]};
      xcd[std::size_t(j * nb + b)] = {std::uint32_t(q.c), pk::float_bits(q.d)};
    }
  std::vector<float> y(std::size_t(n) * m, std::numeric_limits<float>::quiet_NaN());
  const std::size_t tile = std::size_t(R) * (32 * 16 + 32 * 2);
  const int groups = (m + R - 1) / R;
  for (int g = 0; g < groups; ++g)
    for (int j0 = 0; j0 < n; j0 += C) {
      const int cols = std::min(C, n - j0);
      std::vector<std::vector<std::vector<float>>> part(static_cast<std::size_t>(cols));  // (column, warp, row)
      for (int c = 0; c < cols; ++c) {
        const int j = j0 + c;
        for (int wp = 0; wp < W; ++wp) {
          std::vector<std::vector<float>> p(32, std::vector<float>(std::size_t(R), 0.f));
          for (int lane = 0; lane < 32; ++lane) {
            const int tid = wp * 32 + lane;
            if (tid >= nb) continue;  // inactive: +0
            const std::uint8_t* q = packed.data() + (std::size_t(g) * W + wp) * tile + std::size_t(lane) * 16;
            const std::uint8_t* sc = q + R * 32 * 16 + lane * (2 * R - 16);
            const auto& xe = xw[std::size_t(2 * j * nb + tid)];
            const auto& xo = xw[std::size_t((2 * j + 1) * nb + tid)];
            const auto& cd = xcd[std::size_t(j * nb + tid)];
            const float d = ref::bits_to_float(cd[1]);
            for (int r = 0; r < R; ++r) {
              std::uint32_t words[4];
              q4_gemv::block_words(q + r * 32 * 16, words);
              int se = int(cd[0]), so = 0;
              for (int t = 0; t < 4; ++t) pk::q8_word(words[t], xe[std::size_t(t)], xo[std::size_t(t)], se, so);
              const std::uint16_t s = std::uint16_t(sc[2 * r] | sc[2 * r + 1] << 8);
              p[std::size_t(lane)][std::size_t(r)] = pk::q8_finish(se, so, pk::half_value(s), d);
            }
          }
          part[std::size_t(c)].push_back(pk::warp_rows_host(std::move(p)));
        }
      }
      for (int e = 0; e < R * cols; ++e) {
        const int c = e / R, r = e % R, row = g * R + r;
        if (row >= m) continue;
        float sum = part[std::size_t(c)][0][std::size_t(r)];
        for (int wp = 1; wp < W; ++wp) sum = q4_gemv::add_rn(sum, part[std::size_t(c)][std::size_t(wp)][std::size_t(r)]);
        y[std::size_t(j0 + c) * m + row] = sum;
      }
    }
  return y;
}
}  // namespace

TEST_CASE("q4_gemm reference: column j is q4_gemv's f64 reference of x_j, n = 1 is q4_gemv's problem byte for byte, generation deterministic") {
  const Op& op = registry().op(q4_gemm::kOp);
  const Op& gemv = registry().op(q4_gemv::kOp);
  for (Dist d : {Dist::uniform, Dist::student_t}) {
    CAPTURE(to_string(d));
    const Problem p = q4_gemm::problem(37, 160, 3, d, 5);
    const auto wl = op.generate(p);
    const auto& w = q4_gemm::workload_of(*wl);
    REQUIRE(w.n == 3);
    REQUIRE(w.x.size() == 3u * 160u);
    const auto y = op.reference(*wl);
    REQUIRE(y.size() == 3u * 37u);
    for (int j = 0; j < 3; ++j) {
      const auto yj = ref::q4_gemv_f64(w.w, std::span<const float>(w.x).subspan(std::size_t(j) * 160, 160));
      CHECK(std::memcmp(yj.data(), &y[std::size_t(j) * 37], 37 * sizeof(double)) == 0);
    }
    // The columns are distinct draws.
    CHECK(std::memcmp(&w.x[0], &w.x[160], 160 * sizeof(float)) != 0);
    // n = 1: q4_gemv's W and x of the same shape, dist and seed; its reference too.
    const auto one = op.generate(q4_gemm::problem(37, 160, 1, d, 5));
    const auto g = gemv.generate(Problem{{37, 160}, d, 5});
    const auto& o = q4_gemm::workload_of(*one);
    const auto& gw = q4_gemv::workload_of(*g);
    CHECK(o.w.codes == gw.w.codes);
    CHECK(o.w.scales == gw.w.scales);
    CHECK(o.x == gw.x);
    CHECK(w.w.codes == gw.w.codes);  // W does not depend on n
    CHECK(std::memcmp(o.x.data(), w.x.data(), 160 * sizeof(float)) == 0);
    CHECK(op.reference(*one) == gemv.reference(*g));
    // Deterministic in the seed; another seed gives other inputs.
    CHECK(op.generate(p)->digest() == wl->digest());
    CHECK(op.generate(q4_gemm::problem(37, 160, 3, d, 6))->digest() != wl->digest());
  }
}

TEST_CASE("q4_gemm traffic by hand: 17408x5120 at n = 8") {
  const Op& op = registry().op(q4_gemm::kOp);
  const Traffic t = op.traffic(q4_gemm::problem(17408, 5120, 8));
  // W: 17408 * 5120 = 89128960 weights at 0.5625 bytes = 50135040; X: 4 * 8 * 5120 = 163840;
  // Y: 4 * 8 * 17408 = 557056.
  CHECK(t.bytes == 50135040.0 + 163840.0 + 557056.0);
  CHECK(t.macs == 89128960.0 * 8);
}

TEST_CASE("q4_gemm: the op's params, impl=loop and the batched kernels registered, each with a bit-model and a tolerance, the experiment's claims") {
  const Op& op = registry().op(q4_gemm::kOp);
  std::set<std::string> params;
  for (const auto& d : op.params) params.insert(d.name);
  CHECK(params == std::set<std::string>{"m", "k", "n"});
  // Every declared problem (full and quick) is one the op takes.
  for (bool quick : {true, false})
    for (const Problem& p : op.declared_problems(quick)) {
      CAPTURE(p.key());
      CHECK(op.validate(p).empty());
    }
  std::set<std::string> names;
  for (const Variant* v : registry().variants_of(q4_gemm::kOp)) {
    CAPTURE(v->name);
    names.insert(v->name);
    CHECK(static_cast<bool>(v->cpu_model));
    CHECK(static_cast<bool>(v->make));
    CHECK(!v->description.empty());
    CHECK(v->tolerance == pk::form_tolerance(pk::Form::q8));
    CHECK(!v->peer);
  }
  std::set<std::string> want{"q4_gemm/impl=loop,map=packed,dot=q8-dp4a,grid=groups,xprep=launch,pdl=on,rows=8"};
  for (const auto& k : q4_gemm::gemm_kernels()) want.insert(k.name);
  CHECK(want.count("q4_gemm/map=packed,dot=q8-dp4a,grid=groups,cols=8,rows=8") == 1);
  CHECK(want.count("q4_gemm/map=packed,dot=q8-dp4a,grid=groups,cols=8,rows=4") == 1);
  CHECK(names == want);
  CHECK(q4_gemm::gemm_variants().front().name == variant_name(q4_gemm::kOp, {{"impl", "loop"}}) + "," +
                                                     q4_gemv::q4_kernel(q4_gemm::kLoopGemv).name.substr(std::string(q4_gemv::kOp).size() + 1));
  const Experiment& e = registry().experiment("q4-gemm-batch");
  std::set<std::string> ids;
  for (const Claim& c : e.claims) ids.insert(c.id);
  CHECK(ids == std::set<std::string>{"batched-bits", "batched-pays", "weights-once"});
  CHECK(e.needs_device);
}

TEST_CASE("q4_gemm bit-models: the batched kernels' schedule simulated equals the per-column q8-dp4a gemv model bit for bit, and impl=loop's model") {
  const Variant& loop = registry().variant(q4_gemm::gemm_variants().front().name);
  int compared = 0;
  for (std::int64_t k : {32, 160, 2080})
    for (std::int64_t m : {1, 37, 1061})
      for (int n : {1, 3, 33}) {
        if (m == 1061 && k != 2080) continue;  // the large m once: several warps, many groups
        CAPTURE(m);
        CAPTURE(k);
        CAPTURE(n);
        const auto w = random_matrix(m, k, std::uint64_t(m * 7 + k + n));
        std::vector<float> X(std::size_t(n * k));
        for (int j = 0; j < n; ++j) {
          const auto xj = generate(j % 2 ? Dist::student_t : Dist::uniform, std::size_t(k), 3, std::uint64_t(j));
          std::copy(xj.begin(), xj.end(), X.begin() + std::ptrdiff_t(j * k));
        }
        // The gemv model per column: what impl=loop's kernel computes for each x_j.
        std::vector<float> want;
        const auto gemv_model = q4_gemv::q4_model(q4_gemm::kLoopGemv);
        for (int j = 0; j < n; ++j) {
          const auto yj = gemv_model(w, std::span<const float>(X).subspan(std::size_t(j * k), std::size_t(k)));
          want.insert(want.end(), yj.begin(), yj.end());
        }
        const auto model = q4_gemm::model_batched(w, X, n);
        CHECK(bitwise_diff(model, want) == 0);
        const auto wl = q4_gemm::make_workload(w, X, n, q4_gemm::problem(m, k, n));
        CHECK(bitwise_diff(loop.cpu_model(*wl), want) == 0);
        for (const auto& kern : q4_gemm::gemm_kernels()) {
          CAPTURE(kern.name);
          CHECK(bitwise_diff(registry().variant(kern.name).cpu_model(*wl), want) == 0);
          const auto sim = simulate_gemm(w, X, n, kern.rows, kern.cols);
          CHECK(std::none_of(sim.begin(), sim.end(), [](float v) { return std::isnan(v); }));  // every element written
          CHECK(bitwise_diff(sim, want) == 0);
          ++compared;
        }
      }
  CHECK(compared == 3 * 21);
}

TEST_CASE("q4_gemm refusals: k % 32 != 0, n < 1, n > 256, k > 32768 and missing parameters, before any CUDA call, naming the problem") {
  const Op& op = registry().op(q4_gemm::kOp);
  auto refused = [&](const Problem& p, const std::string& word) {
    CAPTURE(p.key());
    const std::string why = op.validate(p);
    CHECK(why.find(word) != std::string::npos);
    for (const Variant* v : registry().variants_of(q4_gemm::kOp)) CHECK(!v->can_implement(p).empty());
    try {
      op.generate(p);
      FAIL("generate took " << p.key());
    } catch (const CudaError&) {
      FAIL("a CUDA call was made");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find(p.key()) != std::string::npos);
    }
  };
  refused(q4_gemm::problem(64, 100, 1), "32");
  refused(q4_gemm::problem(64, 160, 0), "n = 0");
  refused(q4_gemm::problem(64, 160, 257), "n = 257");
  refused(q4_gemm::problem(0, 160, 1), "m");
  Problem no_n;
  no_n.params = {{"m", 64}, {"k", 160}};
  CHECK(op.validate(no_n).find("no parameter n") != std::string::npos);
  // k > 32768: the op takes it (q4_gemv's limits), the kernels do not (one thread per block of 32).
  const Problem wide = q4_gemm::problem(4, 32800, 2);
  CHECK(op.validate(wide).empty());
  for (const Variant* v : registry().variants_of(q4_gemm::kOp)) CHECK(v->can_implement(wide).find("32768") != std::string::npos);
  CHECK(registry().variant(q4_gemm::gemm_kernels().front().name).can_implement(q4_gemm::problem(4, 32768, 256)).empty());
  // The raw launchers: shape and buffers checked before anything is enqueued.
  const auto& kern = q4_gemm::gemm_kernels().front();
  auto launch_throws = [&](int m, int k, int n, bool null, const std::string& word) {
    CAPTURE(m);
    CAPTURE(k);
    CAPTURE(n);
    alignas(16) static std::uint8_t buf[64];
    auto* f = reinterpret_cast<float*>(buf);
    try {
      kern.launch(null ? nullptr : buf, f, f, m, k, n, buf, nullptr);
      FAIL("launched");
    } catch (const CudaError&) {
      FAIL("a CUDA call was made");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find("q4_gemm launch") != std::string::npos);
      CHECK(std::string(e.what()).find(word) != std::string::npos);
    }
  };
  launch_throws(64, 100, 1, false, "32");
  launch_throws(64, 160, 0, false, "n = 0");
  launch_throws(64, 160, 300, false, "n = 300");
  launch_throws(64, 65536, 1, false, "32768");
  launch_throws(64, 160, 1, true, "null");
  CHECK(q4_gemm::launch_error(64, 160, 1).empty());
  CHECK(q4_gemm::workspace_bytes(5120, 32) == 32u * 160u * 40u);
  // Workloads that do not fit their problem.
  const auto w = random_matrix(8, 64, 1);
  CHECK_THROWS_WITH_AS(q4_gemm::make_workload(w, std::vector<float>(64), 2, q4_gemm::problem(8, 64, 2)), doctest::Contains("n k = 128"), Error);
  CHECK_THROWS_WITH_AS(q4_gemm::make_workload(w, std::vector<float>(128), 2, q4_gemm::problem(9, 64, 2)), doctest::Contains("9"), Error);
  CHECK_THROWS_WITH_AS(q4_gemm::model_batched(w, std::vector<float>(64), 2), doctest::Contains("n k = 128"), Error);
}
