// Batched slots on the host (GdnDevice::enqueue_batch's requirements, scratch and bits; no GPU):
// batch_error accepts exactly the q4 kernels whose column bits are q4_gemm's, with the fused prep and
// a fused recurrence, and names each refusal; every accepted kernel's bit-model equals q4_gemm's
// model column by column (so the batch's projections are the single step's bits); the scratch sizes
// by hand; the experiment gdn-batch is registered with its claims.
#include <doctest/doctest.h>

#include <set>
#include <span>
#include <string>
#include <vector>

#include "../q4_cases.hpp"
#include "f32_gemv/kernels.hpp"
#include "gdn/gdn_device.hpp"
#include "gdn/step_op.hpp"
#include "klab/catalog.hpp"
#include "klab/error.hpp"
#include "klab/metrics.hpp"
#include "klab/ref/gdn.hpp"
#include "q4_gemm/gemm.hpp"
#include "q4_gemm/op.hpp"
#include "q4_gemv/q4_gemv.hpp"

using namespace klab;
namespace rg = klab::ref::gdn;
using gdn::GdnDevice;

namespace {
constexpr const char* kQ4 = "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=launch,pdl=on,rows=8";
constexpr const char* kRec = "gdn_recurrence/impl=fused,cols=16,rows=8,pdl=on";
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
std::string axis(const q4_gemv::Q4Kernel& k, const char* name) {
  for (const auto& [a, v] : k.axes)
    if (a == name) return v;
  return "";
}
}  // namespace

TEST_CASE("GdnDevice::batch_error takes the brief's kernels and names every requirement it refuses") {
  CHECK(GdnDevice::batch_error(kQ4, kRec, true, 1) == "");
  CHECK(GdnDevice::batch_error(kQ4, kRec, true, 32) == "");
  CHECK(GdnDevice::batch_error(kQ4, kRec, true, int(q4_gemm::kMaxCols)) == "");
  CHECK(GdnDevice::batch_error(kQ4, "gdn_recurrence/impl=fused,cols=16,rows=8,pdl=early,norm=gated", true, 8) == "");
  CHECK(contains(GdnDevice::batch_error(kQ4, kRec, true, 0), "B = 0 outside [1, 256]"));
  CHECK(contains(GdnDevice::batch_error(kQ4, kRec, true, 257), "B = 257"));
  CHECK(contains(GdnDevice::batch_error(gdn::kDefaultQ4Variant, kRec, true, 8), "not a map=packed,dot=q8-dp4a kernel"));
  CHECK(contains(GdnDevice::batch_error("q4_gemv/nope", kRec, true, 8), "no q4 kernel 'q4_gemv/nope'"));
  CHECK(contains(GdnDevice::batch_error(kQ4, kRec, false, 8), "set_fused_prep(true)"));
  CHECK(contains(GdnDevice::batch_error(kQ4, gdn::kDefaultRecurrence, true, 8), "is not impl=fused"));
  CHECK(contains(GdnDevice::batch_error(kQ4, "gdn_recurrence/nope", true, 8), "no gdn_recurrence kernel"));
  // Every reason at once, joined.
  const std::string all = GdnDevice::batch_error(gdn::kDefaultQ4Variant, gdn::kDefaultRecurrence, false, 0);
  CHECK(contains(all, "B = 0"));
  CHECK(contains(all, "map=packed"));
  CHECK(contains(all, "fused prep"));
  CHECK(contains(all, "impl=fused"));
  CHECK(GdnDevice::batch_gemm_variant(kQ4) == "q4_gemm/map=packed,dot=q8-dp4a,grid=groups,cols=8,rows=8");
  CHECK_THROWS_WITH_AS(GdnDevice::batch_gemm_variant(gdn::kDefaultQ4Variant), doctest::Contains("map=packed,dot=q8-dp4a"), Error);
}

TEST_CASE("every q4 kernel batch_error accepts: packed, q8-dp4a, a q4_gemm rows=, and its bit-model is q4_gemm's model column by column") {
  int accepted = 0;
  const std::int64_t m = 37, k = 160, n = 3;  // m not a multiple of 8, two warps' worth of blocks short of one
  const auto w = test::random_q4_matrix(m, k, 5);
  std::vector<float> X(std::size_t(n * k));
  for (std::size_t i = 0; i < X.size(); ++i) X[i] = float(int(i * 37 % 101) - 50) / 7.f;
  const auto want = q4_gemm::model_batched(w, X, n);
  for (const auto& kern : q4_gemv::q4_kernels()) {
    CAPTURE(kern.name);
    const bool ok = GdnDevice::batch_error(kern.name, kRec, true, int(n)).empty();
    const bool packed_q8 = axis(kern, "map") == "packed" && axis(kern, "dot") == "q8-dp4a";
    CHECK(ok == (packed_q8 && (axis(kern, "rows") == "8" || axis(kern, "rows") == "4")));
    if (!ok) continue;
    ++accepted;
    REQUIRE(kern.layout != nullptr);
    CHECK(kern.layout->name == "tiles-r" + axis(kern, "rows"));  // the layout q4_gemm's kernel of those rows reads
    const auto model = q4_gemv::q4_model(kern.name);
    std::vector<float> got;
    for (std::int64_t j = 0; j < n; ++j) {
      const auto yj = model(w, std::span<const float>(X).subspan(std::size_t(j * k), std::size_t(k)));
      got.insert(got.end(), yj.begin(), yj.end());
    }
    CHECK(bitwise_diff(got, want) == 0);
    const std::string gemm = GdnDevice::batch_gemm_variant(kern.name);
    CHECK(contains(gemm, "rows=" + axis(kern, "rows")));
  }
  CHECK(accepted >= 2);  // at least the brief's kernel and gdn-batch's (fold's base, candidate_twins().ba_own)
  CHECK(GdnDevice::batch_error(gdn::candidate_twins().ba_own.q4_kernel, kRec, true, 8) == "");
}

TEST_CASE("every f32_gemv kernel (the b|a kernels the batch may run) has a launch over several columns") {
  for (const auto& kern : f32_gemv::f32_kernels()) {
    CAPTURE(kern.name);
    CHECK(bool(kern.launch_cols));
  }
}

TEST_CASE("GdnDevice::batch_scratch: the batch's tensors for B slots, by hand at the Qwen3.5-27B geometry") {
  const rg::Geometry g = rg::qwen35_27b();  // hidden 5120, nk 16, nv 48, dk = dv = 128
  const auto s = GdnDevice::batch_scratch(g, 32);
  const std::int64_t conv = 2 * 16 * 128 + 48 * 128;  // 10240
  CHECK(s.xc == 32 * conv);
  CHECK(s.xcv == 32 * conv);
  CHECK(s.z == 32 * 6144);
  CHECK(s.o == 32 * 6144);
  CHECK(s.onn == 32 * 6144);
  CHECK(s.q == 32 * 2048);
  CHECK(s.k == 32 * 2048);
  CHECK(s.ba == 32 * 96);
  CHECK(s.beta == 32 * 48);
  CHECK(s.g == 32 * 48);
  CHECK(s.floats() == 32 * (2 * conv + 3 * 6144 + 2 * 2048 + 96 + 2 * 48));
  // q4_gemm's workspace: 40 bytes per column and block of 32, for the wider input (nv*dv = 6144 > 5120).
  CHECK(s.workspace_bytes == std::size_t(40) * 32 * (6144 / 32));
  CHECK(GdnDevice::batch_scratch(g, 1).workspace_bytes == std::size_t(40) * (6144 / 32));
}

TEST_CASE("gdn-batch is registered with its claims, and needs a device") {
  const auto& e = registry().experiment("gdn-batch");
  CHECK(e.needs_device);
  std::set<std::string> ids;
  for (const auto& c : e.claims) ids.insert(c.id);
  CHECK(ids == std::set<std::string>{"slots-bitwise", "batch-pays", "weights-once"});
}
