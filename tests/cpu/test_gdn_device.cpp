// The host side of the GDN device object (variants/gdn/gdn_device.hpp), which needs no GPU: which
// geometries it refuses and why, that a refusal comes before any CUDA call (on a machine without a
// device a CUDA call would surface as a CudaError instead), and the host state conversions.
#include <doctest/doctest.h>

#include <bit>
#include <cstdint>
#include <string>

#include "gdn/gdn_device.hpp"
#include "klab/cuda.hpp"
#include "klab/error.hpp"
#include "klab/problem.hpp"
#include "klab/ref/gdn.hpp"

using namespace klab;
namespace rg = klab::ref::gdn;
using gdn::GdnDevice;
using rg::Geometry;

namespace {
// The message of the klab::Error (not a CudaError) that constructing throws; "" if none.
std::string construction_refusal(const Geometry& g, int nl, int slots) {
  try {
    GdnDevice d(g, nl, slots);
  } catch (const CudaError& e) {
    return std::string("CUDA: ") + e.what();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("GdnDevice::can_implement accepts every coherent geometry, including the seed's unsupported ones") {
  CHECK(GdnDevice::can_implement(rg::qwen35_27b(), 48) == "");
  CHECK(GdnDevice::can_implement(rg::qwen35_27b(), 48, 4) == "");
  // dv not a power of two and dk over 1024: the seed's kernels could not do these, ours can.
  CHECK(GdnDevice::can_implement(Geometry{100, 1, 3, 48, 20, 3, 1e-6}, 1) == "");
  CHECK(GdnDevice::can_implement(Geometry{64, 1, 1, 2048, 130, 1, 1e-6}, 1) == "");
  // The largest dv the recurrence grid covers, and one past it.
  CHECK(GdnDevice::can_implement(Geometry{8, 1, 1, 1, 65535 * 32, 2, 1e-6}, 1) == "");
  CHECK(contains(GdnDevice::can_implement(Geometry{8, 1, 1, 1, 65535 * 32 + 1, 2, 1e-6}, 1), "recurrence grid"));
}

TEST_CASE("GdnDevice refuses incoherent geometries, layer and slot counts with the reason, before any CUDA call") {
  Geometry g{64, 2, 4, 16, 32, 4, 1e-6};
  struct Case {
    Geometry g;
    int nl, slots;
    const char* reason;
  };
  Geometry bad_heads = g;
  bad_heads.nv = 5;
  Geometry zero_dk = g;
  zero_dk.dk = 0;
  Geometry neg_hidden = g;
  neg_hidden.hidden = -1;
  Geometry huge = g;  // conv_dim = 2*nk*dk + nv*dv past 2^31 - 1
  huge.nv = 1 << 20;
  huge.nk = 1 << 20;
  huge.dv = 4096;
  Geometry bad_eps = g;
  bad_eps.eps = 0;
  const Case cases[] = {
      {bad_heads, 1, 1, "multiple of nk"},
      {zero_dk, 1, 1, "positive"},
      {neg_hidden, 1, 1, "positive"},
      {huge, 1, 1, "exceeds 2^31-1"},
      {bad_eps, 1, 1, "eps"},
      {g, 0, 1, "nl = 0"},
      {g, -3, 1, "nl = -3"},
      {g, 1, 0, "slots = 0"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.g.str());
    CAPTURE(c.nl);
    CAPTURE(c.slots);
    const std::string why = GdnDevice::can_implement(c.g, c.nl, c.slots);
    CHECK(contains(why, c.reason));
    const std::string msg = construction_refusal(c.g, c.nl, c.slots);
    CAPTURE(msg);
    CHECK(contains(msg, "GdnDevice: "));
    CHECK(contains(msg, c.reason));
    CHECK_FALSE(contains(msg, "CUDA: "));
  }
}

TEST_CASE("GDN host state: to_ref is exact, from_ref rounds to f32, both check sizes") {
  const Geometry g{64, 2, 4, 16, 32, 4, 1e-6};
  gdn::HostState hs;
  hs.g = g;
  hs.S = generate(Dist::student_t, std::size_t(rg::count(g, rg::What::S)), 7, 0);
  hs.hist = generate(Dist::normal, std::size_t(rg::count(g, rg::What::HIST)), 7, 1);
  const rg::State st = gdn::to_ref(hs);
  REQUIRE(st.S.size() == hs.S.size());
  REQUIRE(st.hist.size() == hs.hist.size());
  for (std::size_t i = 0; i < hs.S.size(); ++i) REQUIRE(st.S[i] == double(hs.S[i]));
  const gdn::HostState back = gdn::from_ref(g, st);
  CHECK(back.g == g);
  for (std::size_t i = 0; i < hs.S.size(); ++i) REQUIRE(std::bit_cast<std::uint32_t>(back.S[i]) == std::bit_cast<std::uint32_t>(hs.S[i]));
  for (std::size_t i = 0; i < hs.hist.size(); ++i) REQUIRE(std::bit_cast<std::uint32_t>(back.hist[i]) == std::bit_cast<std::uint32_t>(hs.hist[i]));
  // f64 values round to the nearest f32.
  rg::State fine = rg::State::zeros(g);
  fine.S[0] = 1.0 + 0x1.0p-30;
  fine.S[1] = 1.0 + 0x1.8p-24;  // halfway plus: rounds up to 1 + 2^-23
  const auto r = gdn::from_ref(g, fine);
  CHECK(r.S[0] == 1.0f);
  CHECK(r.S[1] == 1.0f + 0x1.0p-23f);
  // Sizes.
  gdn::HostState short_s = hs;
  short_s.S.pop_back();
  CHECK_THROWS_AS(gdn::to_ref(short_s), Error);
  rg::State long_hist = st;
  long_hist.hist.push_back(0);
  CHECK_THROWS_AS(gdn::from_ref(g, long_hist), Error);
}
