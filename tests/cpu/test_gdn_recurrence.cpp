// The gdn_recurrence op without a GPU: its parameters, workload (deterministic, the export's), reference,
// traffic, and the kernel table's names and refusals. The kernels themselves are checked on the GPU
// (tests/gpu/test_variants.cpp) and in every race.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gdn_recurrence/hist_ring.hpp"
#include "gdn_recurrence/variants.hpp"
#include "gdn_state_drift.hpp"
#include "klab/catalog.hpp"
#include "klab/error.hpp"
#include "klab/metrics.hpp"
#include "klab/ref/gdn.hpp"
#include "klab/ref/q4.hpp"

using namespace klab;
namespace gr = klab::gdn_recurrence;

namespace {
// k and its twin take the same problems at batch 1, 8 and 32 and the given (dk, dv).
void check_same_problems(const gr::RecurrenceKernel& k, const gr::RecurrenceKernel& twin, std::initializer_list<std::pair<int, int>> dims) {
  for (int batch : {1, 8, 32})
    for (auto [dk, dv] : dims) {
      const gr::RecurrenceArgs a = gr::dense_args(16, 48, dk, dv, batch);
      CHECK(k.can_implement(a) == twin.can_implement(a));
    }
}
// k's twin, its name without `flag` (",cache=stream", ",state=bf16", ",prep=conv"): the same state handling before
// the wait, a launch of its own, the same problems taken at batch 1, 8 and 32 and the given (dk, dv).
const gr::RecurrenceKernel& check_flag_twin(const gr::RecurrenceKernel& k, const std::string& flag, std::initializer_list<std::pair<int, int>> dims) {
  const auto at = k.name.find(flag);
  REQUIRE(at != std::string::npos);
  const auto& twin = gr::recurrence_kernel(k.name.substr(0, at) + k.name.substr(at + flag.size()));
  CHECK(k.state_before_wait == twin.state_before_wait);
  const bool own_launch = k.launch != twin.launch;
  CHECK(own_launch);
  check_same_problems(k, twin, dims);
  return twin;
}
// Batch 1 at the Qwen heads with every pointer the conv prep (RecurrenceArgs::xc) reads and writes set (to one
// dummy array), ck 4: what check_args accepts for a prep=conv kernel without a ring.
gr::RecurrenceArgs conv_prep_args() {
  static float f[64];
  gr::RecurrenceArgs a = gr::dense_args(16, 48, 128, 128, 1);
  a.q = a.k = a.v = a.g = a.beta = a.S = a.o = f;
  a.xc = a.conv_w = a.ba = a.a_log = a.dt_bias = f;
  a.hist = f;
  a.xcv_out = a.q_out = a.k_out = a.beta_out = a.g_out = f;
  a.ck = 4;
  return a;
}
}  // namespace

TEST_CASE("gdn_recurrence: declared parameters, problems and refusals") {
  const Op& op = registry().op("gdn_recurrence");
  const Problem d = op.default_problem();
  CHECK(d.key() == "batch=1,dk=128,dv=128,nk=16,nv=48");
  CHECK(op.validate(d).empty());
  const auto seed = op.declared_problems(false);
  REQUIRE(seed.size() == 3);
  CHECK(seed[1].key() == "batch=8,dk=128,dv=128,nk=16,nv=48");
  const auto quick = op.declared_problems(true);
  REQUIRE(quick.size() == 1);
  CHECK(quick[0].key() == "batch=2,dk=32,dv=32,nk=2,nv=4");
  Problem bad = d;
  bad.params["nv"] = 40;
  CHECK(op.validate(bad).find("multiple of nk") != std::string::npos);
  Problem none{Shape{64, 64}, Dist::uniform, 1};
  CHECK(op.validate(none).find("no parameter nv") != std::string::npos);
  // Traffic: the export's byte model (6.36 MB at batch 1) and 3 dk dv MACs per value head.
  const Traffic t = op.traffic(d);
  CHECK(t.bytes == 4.0 * (4096 + 6144) + 8.0 * 48 + 8.0 * 786432 + 4.0 * 6144);
  CHECK(t.macs == 3.0 * 786432);
}

TEST_CASE("gdn_recurrence: the workload is deterministic, in its stated ranges, and its reference is ref::gdn's") {
  const Op& op = registry().op("gdn_recurrence");
  const Problem p = op.declared_problems(true, Dist::normal, 4)[0];
  const auto w1 = op.generate(p), w2 = op.generate(p);
  const auto& a = gr::workload_of(*w1);
  CHECK(a.digest() == gr::workload_of(*w2).digest());
  CHECK(a.q.size() == 2u * 2 * 32);
  CHECK(a.S0.size() == 2u * 4 * 32 * 32);
  for (float g : a.g) CHECK((g < 0 && g > -1.6f));
  for (float b : a.beta) CHECK((b > 0.01f && b < 0.99f));
  Problem other = p;
  other.seed = 5;
  CHECK(gr::workload_of(*op.generate(other)).digest() != a.digest());
  const auto refs = op.references_of(a);
  REQUIRE(refs.size() == 2);
  CHECK(refs[0].name == "o");
  CHECK(refs[1].name == "S");
  // Sequence 1 by hand through ref::gdn::recurrence.
  ref::gdn::Geometry g;
  g.nk = 2, g.nv = 4, g.dk = 32, g.dv = 32;
  auto d = [](const std::vector<float>& x, std::size_t at, std::size_t n) {
    return std::vector<double>(x.begin() + std::ptrdiff_t(at), x.begin() + std::ptrdiff_t(at + n));
  };
  std::vector<double> S = d(a.S0, 4096, 4096), o(128), qn(64), kn(64);
  ref::gdn::recurrence(g, d(a.q, 64, 64), d(a.k, 64, 64), d(a.v, 128, 128), d(a.g, 4, 4), d(a.beta, 4, 4), S, o, qn, kn);
  CHECK(std::equal(o.begin(), o.end(), refs[0].data.begin() + 128));
  CHECK(std::equal(S.begin(), S.end(), refs[1].data.begin() + 4096));
  CHECK_THROWS_AS(gr::workload_of(Workload{}), Error);
}

TEST_CASE("gdn_recurrence: every kernel of the table is a registered variant and runs the op's default and seed problems") {
  const Op& op = registry().op("gdn_recurrence");
  REQUIRE(gr::recurrence_kernels().size() >= 3);
  CHECK(gr::recurrence_kernels()[0].name == "gdn_recurrence/impl=seed");
  for (const auto& k : gr::recurrence_kernels()) {
    CAPTURE(k.name);
    CHECK(registry().has_variant(k.name));
    CHECK(&gr::recurrence_kernel(k.name) == &k);
    const Variant& v = registry().variant(k.name);
    CHECK(v.tolerance == (k.state_bf16 ? gr::kBf16Tolerance : gr::kTolerance));
    CHECK(k.state_bf16 == (k.name.find(",state=bf16,") != std::string::npos));
    for (const Problem& p : op.declared_problems(false)) {
      CHECK(v.can_implement(p) == "");
      // state=bf16 counts its own bytes: S read and written at 2 bytes an element instead of 4.
      CHECK(bool(v.traffic) == k.state_bf16);
      if (!v.traffic) continue;
      const double state = double(p.param("batch")) * 48 * 128 * 128;
      CHECK(v.traffic(p).bytes == doctest::Approx(op.traffic(p).bytes - 4.0 * state));
      CHECK(v.traffic(p).macs == op.traffic(p).macs);
    }
  }
  CHECK(registry().variants_of("gdn_recurrence").size() == gr::recurrence_kernels().size());
  CHECK_THROWS_WITH_AS(gr::recurrence_kernel("gdn_recurrence/impl=nope"), doctest::Contains("impl=seed"), Error);
}

TEST_CASE("gdn_recurrence: check_args refuses what a kernel cannot take, naming why") {
  const auto& fused = gr::recurrence_kernel("gdn_recurrence/impl=fused,cols=32,rows=4,pdl=off");
  const auto& seed = gr::recurrence_kernel("gdn_recurrence/impl=seed");
  gr::RecurrenceArgs a = gr::dense_args(16, 48, 128, 128, 1);
  CHECK(a.S_stride == 48 * 128 * 128);
  CHECK(gr::check_args(fused, a).find("null") != std::string::npos);
  alignas(16) static float buf[64];
  a.q = a.k = a.v = a.g = a.beta = buf;
  a.S = a.o = buf;
  CHECK(gr::check_args(fused, a) == "");
  CHECK(gr::check_args(seed, a).find("workspace") != std::string::npos);  // its qk_norm writes there
  CHECK(seed.workspace_floats(a) == 2u * 16 * 128);
  a.normalize_qk = false;
  CHECK(seed.workspace_floats(a) == 0u);
  CHECK(gr::check_args(seed, a) == "");
  a.S = buf + 1;
  CHECK(gr::check_args(fused, a).find("16-byte aligned") != std::string::npos);
  CHECK(gr::check_args(seed, a) == "");  // 4-byte loads: any float pointer
  a.S = buf;
  a.dv = 126;
  a.S_stride = a.o_stride = a.v_stride = 48 * 126;
  CHECK(gr::check_args(fused, a).find("dv (126) is not a multiple of 4") != std::string::npos);
  a = gr::dense_args(16, 48, 102, 128, 1);
  CHECK(fused.can_implement(a).find("dk (102) is not a multiple of rows=4") != std::string::npos);
  a.nv = 40;
  CHECK(gr::check_args(fused, a).find("multiple of nk") != std::string::npos);
  const auto& once = gr::recurrence_kernel("gdn_recurrence/impl=once");
  CHECK(once.can_implement(gr::dense_args(16, 48, 256, 128, 1)).find("dk > 128") != std::string::npos);
}

TEST_CASE("gdn_recurrence: the fused configurations added after the H200 trial are registered and refuse what their geometry cannot take") {
  const Op& op = registry().op("gdn_recurrence");
  const Problem quick = op.declared_problems(true).front();  // dk = dv = 32
  REQUIRE(quick.param("dk") == 32);
  // Each added configuration: registered, its can_implement at the quick problem ("" = runs there).
  const std::vector<std::pair<std::string, bool>> added{
      {"cols=8,rows=4,pdl=on", false},  // 32 / 4 = 8 row groups, a warp holds 16 row slots
      {"cols=8,rows=2,pdl=on", true},    {"cols=16,rows=2,pdl=on", true},
      {"cols=16,rows=8,pdl=on", false},  // 4 row groups, 8 row slots
      {"cols=32,rows=8,pdl=on", true},   {"cols=32,rows=16,pdl=on", false},  // 2 row groups, 4 row slots
      {"cols=64,rows=16,pdl=off", true}};                                     // dv = 32 < 64: half the quads idle
  for (const auto& [axes, runs_quick] : added) {
    const std::string name = "gdn_recurrence/impl=fused," + axes;
    CAPTURE(name);
    REQUIRE(registry().has_variant(name));
    const Variant& v = registry().variant(name);
    for (const Problem& p : op.declared_problems(false)) CHECK(v.can_implement(p) == "");
    if (runs_quick) CHECK(v.can_implement(quick) == "");
    else CHECK(v.can_implement(quick).find("row slots of a warp") != std::string::npos);
  }
  // rows=16 is compiled with a launch bound of 256 threads (255 registers): dk = 512 at cols=64 would need 512.
  const auto& r16 = gr::recurrence_kernel("gdn_recurrence/impl=fused,cols=64,rows=16,pdl=off");
  CHECK(r16.can_implement(gr::dense_args(16, 48, 256, 128, 1)) == "");
  CHECK(r16.can_implement(gr::dense_args(16, 48, 512, 128, 1)).find("over the launch bound 256 of rows=16") != std::string::npos);
  // rows <= 8 keep the bound 512: cols=64,rows=8 takes dk = 256 (512 threads), not dk = 512.
  const auto& r8 = gr::recurrence_kernel("gdn_recurrence/impl=fused,cols=64,rows=8,pdl=off");
  CHECK(r8.can_implement(gr::dense_args(16, 48, 256, 128, 1)) == "");
  CHECK(r8.can_implement(gr::dense_args(16, 48, 512, 128, 1)).find("over the launch bound 512 of rows=8") != std::string::npos);
  CHECK(gr::recurrence_kernel("gdn_recurrence/impl=fused,cols=8,rows=2,pdl=on").can_implement(gr::dense_args(16, 48, 128, 132, 1)) == "");  // a partial last tile
}

TEST_CASE("gdn_recurrence pdl=early: each is the twin of a registered pdl=on kernel, taking exactly the problems it takes") {
  int early = 0;
  for (const auto& k : gr::recurrence_kernels()) {
    const auto at = k.name.find("pdl=early");
    if (at == std::string::npos || k.gated_norm || k.conv_prep) continue;  // norm=gated, prep=conv: below
    ++early;
    CAPTURE(k.name);
    CHECK(at + 9 == k.name.size());  // the last axis, as pdl=on|off
    const auto& twin = gr::recurrence_kernel(k.name.substr(0, at) + "pdl=on");
    CHECK(twin.vec4 == k.vec4);
    const bool own_launch = k.launch != twin.launch;
    CHECK(own_launch);
    for (int batch : {1, 8, 32})
      for (auto [dk, dv] : {std::pair{128, 128}, std::pair{64, 96}, std::pair{96, 128}}) {
        const gr::RecurrenceArgs a = gr::dense_args(16, 48, dk, dv, batch);
        CHECK(k.can_implement(a) == twin.can_implement(a));
        CHECK(k.workspace_floats(a) == twin.workspace_floats(a));
      }
  }
  CHECK(early == 9);  // five f32 twins, cols=128,rows=8, cols=32,rows=8 with state=bf16, cache=stream and stage=smem
}

TEST_CASE("gdn_recurrence prep=conv: the twin of its pdl=early kernel, its own launch, the same problems, check_args refuses a conv prep it cannot run") {
  int conv = 0;
  for (const auto& k : gr::recurrence_kernels()) {
    if (!k.conv_prep || k.hist_ring) continue;  // hist=ring: below
    ++conv;
    CAPTURE(k.name);
    CHECK(k.name.find(",prep=conv") + 10 == k.name.size());  // the last axis
    const auto& twin = check_flag_twin(k, ",prep=conv", {{128, 128}, {64, 96}, {96, 128}});
    CHECK(!twin.conv_prep);
    CHECK(twin.vec4 == k.vec4);
    // The conv prep asked: everything it reads and writes, batch 1; not of a kernel without it.
    gr::RecurrenceArgs a = conv_prep_args();
    CHECK(gr::check_args(k, a) == "");
    CHECK(gr::check_args(twin, a).find("without prep=conv") != std::string::npos);
    gr::RecurrenceArgs b8 = a;
    b8.batch = 8;
    CHECK(gr::check_args(k, b8).find("batch 1") != std::string::npos);
    gr::RecurrenceArgs no_hist = a;
    no_hist.hist = nullptr;
    CHECK(gr::check_args(k, no_hist).find("hist") != std::string::npos);
    no_hist.ck = 1;  // no history frames: none needed
    CHECK(gr::check_args(k, no_hist) == "");
    gr::RecurrenceArgs no_out = a;
    no_out.g_out = nullptr;
    CHECK(gr::check_args(k, no_out).find("g_out") != std::string::npos);
    gr::RecurrenceArgs no_taps = a;
    no_taps.ck = 0;
    CHECK(gr::check_args(k, no_taps).find("ck >= 1") != std::string::npos);
  }
  CHECK(conv == 1);  // cols=32,rows=8,pdl=early,prep=conv (the step candidates' recurrence)
}

TEST_CASE("gdn_recurrence hist=ring: prep=conv kernels on pdl=early, the ring-only one the twin of prep=conv, check_args wants the ring exactly where it is kept") {
  int ring = 0, last = 0;
  const auto& plain = gr::recurrence_kernel("gdn_recurrence/impl=fused,cols=32,rows=8,pdl=early,prep=conv");
  for (const auto& k : gr::recurrence_kernels()) {
    if (!k.hist_ring) continue;
    ++ring;
    CAPTURE(k.name);
    CHECK(k.conv_prep);
    CHECK(k.name.find(",hist=ring") + 10 == k.name.size());  // the last axis
    CHECK(k.name.find(",pdl=early") != std::string::npos);
    CHECK_FALSE(k.state_before_wait);
    if (k.counts) {  // norm=last: the gated norm and onn's q8 form by each head's last column block
      ++last;
      CHECK(k.gated_norm);
      CHECK(k.norm_q8);
    } else {  // the ring alone: prep=conv's twin, the same problems
      const auto& twin = check_flag_twin(k, ",hist=ring", {{128, 128}, {64, 96}, {96, 128}});
      CHECK(twin.name == plain.name);
      CHECK_FALSE(k.gated_norm);
    }
    static int pos[2];
    gr::RecurrenceArgs a = conv_prep_args();
    CHECK(gr::check_args(k, a).find("RecurrenceArgs::hist_ring") != std::string::npos);  // the prep without its ring
    a.hist_ring = pos;
    CHECK(gr::check_args(k, a) == "");
    CHECK(gr::check_args(plain, a).find("shifts nothing") != std::string::npos);  // a ring to the kernel that reads ck-1 frames
    gr::RecurrenceArgs alone = gr::dense_args(16, 48, 128, 128, 8);  // raced alone (no prep): no ring needed, any batch
    alone.q = alone.k = alone.v = alone.g = alone.beta = alone.o = a.o;
    alone.S = a.S;
    CHECK(gr::check_args(k, alone) == "");
  }
  CHECK(ring == 2);  // cols=32,rows=8,pdl=early with prep=conv, and with norm=last too
  CHECK(last == 1);
}

TEST_CASE("gdn_recurrence hist=ring: frames read at the ring's position and the newest written into the spare one are the shifted history, token after token") {
  // The protocol of hist_ring.hpp on the host: a ring of ck frames at position n against the (ck-1)-frame
  // history shifted every token (shift_history's order), for several ck, many tokens (each its own xc).
  for (int ck : {1, 2, 3, 4, 5}) {
    CAPTURE(ck);
    constexpr int kChannels = 3;
    std::vector<float> shifted(std::size_t(std::max(0, ck - 1)) * kChannels, 0.f), ring(std::size_t(ck) * kChannels, 0.f);
    int n = 0;  // a zeroed ring at position 0 is the zeroed shifted history
    for (int t = 0; t < 23; ++t) {
      CAPTURE(t);
      // what a launch reads: logical frame j (0 the oldest) at physical ring_frame(n, j, ck)
      for (int j = 0; j + 1 < ck; ++j) {
        const int p = gr::ring_frame(n, j, ck);
        REQUIRE(p >= 0);
        REQUIRE(p < ck);
        CHECK(p != gr::ring_write_frame(n, ck));  // the frame written is never one read
        for (int c = 0; c < kChannels; ++c) CHECK(ring[std::size_t(p) * kChannels + c] == shifted[std::size_t(j) * kChannels + c]);
      }
      // the token's xc: into the ring's write frame; the shifted history moves left one frame
      for (int c = 0; c < kChannels; ++c) {
        const float x = float(100 * t + c + 1);
        if (ck > 1) {
          ring[std::size_t(gr::ring_write_frame(n, ck)) * kChannels + c] = x;
          for (int j = 0; j + 2 < ck; ++j) shifted[std::size_t(j) * kChannels + c] = shifted[std::size_t(j + 1) * kChannels + c];
          shifted[std::size_t(ck - 2) * kChannels + c] = x;
        }
      }
      const int next = gr::ring_next(n, ck);
      CHECK(next == (n + 1) % ck);
      n = next;
    }
  }
}

TEST_CASE("gdn_recurrence cache=stream: each is the twin of a registered kernel without it, its own launch, taking exactly the problems it takes") {
  int streamed = 0;
  for (const auto& k : gr::recurrence_kernels()) {
    if (k.name.find(",cache=stream") == std::string::npos) continue;
    ++streamed;
    CAPTURE(k.name);
    CHECK_FALSE(k.state_bf16);
    check_flag_twin(k, ",cache=stream", {{128, 128}, {64, 96}, {96, 128}});
  }
  CHECK(streamed == 2);  // cols=32,rows=8 with pdl=on and pdl=early
}

TEST_CASE("gdn_recurrence stage=smem: each is the twin of a registered kernel without it, its own launch, taking exactly the problems it takes") {
  int staged = 0;
  for (const auto& k : gr::recurrence_kernels()) {
    if (k.name.find(",stage=smem") == std::string::npos) continue;
    ++staged;
    CAPTURE(k.name);
    const auto& twin = check_flag_twin(k, ",stage=smem", {{128, 128}, {64, 96}, {96, 128}, {32, 64}});
    CHECK(k.vec4 == twin.vec4);
    CHECK_FALSE(k.state_bf16);
    CHECK_FALSE(k.gated_norm);
    CHECK_FALSE(k.conv_prep);
  }
  CHECK(staged == 3);  // cols=32,rows=8 with pdl=on, pdl=early and pdl=ahead
}

TEST_CASE("gdn_recurrence pdl=ahead: twins of a registered pdl=on and pdl=early kernel, its own launch, loading S before its wait") {
  int ahead = 0;
  for (const auto& k : gr::recurrence_kernels()) {
    const auto at = k.name.find("pdl=ahead");
    if (at == std::string::npos || k.name.find(",o=direct") != std::string::npos) continue;  // o=direct: its own case
    ++ahead;
    CAPTURE(k.name);
    CHECK(at + 9 == k.name.size());  // the last axis, as pdl=on|off|early
    const auto& on = gr::recurrence_kernel(k.name.substr(0, at) + "pdl=on");
    const auto& early = gr::recurrence_kernel(k.name.substr(0, at) + "pdl=early");
    CHECK(k.state_before_wait);  // pdl=on's contract: the GDN step's PDL chain refuses it
    CHECK_FALSE(early.state_before_wait);
    const bool own_launch = k.launch != on.launch && k.launch != early.launch;
    CHECK(own_launch);
    check_same_problems(k, on, {{128, 128}, {64, 96}, {96, 128}});
    check_same_problems(k, early, {{128, 128}, {64, 96}, {96, 128}});
  }
  CHECK(ahead == 6);  // cols=32 rows=8 and 16, cols=16 rows=8 and 4, cols=8 rows=4, and cols=32,rows=8,stage=smem
  // state_ahead (and the residency query min_state_copies needs) exactly on the pdl=ahead and pdl=one-ahead kernels
  for (const auto& k : gr::recurrence_kernels()) {
    CAPTURE(k.name);
    const bool named = k.name.find("pdl=ahead") != std::string::npos || k.name.find("pdl=one-ahead") != std::string::npos;
    CHECK(k.state_ahead == named);
    CHECK((k.resident_launches != nullptr) == named);
  }
}

TEST_CASE("gdn_recurrence pdl=one-ahead: twins of a registered pdl=ahead kernel, with its own launch and residency query, the same contract") {
  int one = 0;
  for (const auto& k : gr::recurrence_kernels()) {
    const auto at = k.name.find("pdl=one-ahead");
    if (at == std::string::npos) continue;
    ++one;
    CAPTURE(k.name);
    CHECK(at + 13 == k.name.size());  // the last axis, as the other pdl= values
    const auto& ahead = gr::recurrence_kernel(k.name.substr(0, at) + "pdl=ahead");
    CHECK(k.state_before_wait);
    CHECK(k.state_ahead);
    const bool own_launch = k.launch != ahead.launch, own_query = k.resident_launches != ahead.resident_launches;
    CHECK(own_launch);
    CHECK(own_query);
    CHECK(k.description.find("capped") != std::string::npos);
    check_same_problems(k, ahead, {{128, 128}, {64, 96}, {96, 128}});
  }
  CHECK(one == 3);  // cols=32 rows=16 and 8, cols=16 rows=8
}

TEST_CASE("gdn_recurrence o=direct: twins of a registered pdl=ahead kernel (the name less o=direct), their own launch, the same contract") {
  int direct = 0;
  for (const auto& k : gr::recurrence_kernels()) {
    const auto at = k.name.find(",o=direct");
    if (at == std::string::npos) continue;
    ++direct;
    CAPTURE(k.name);
    CHECK(at + 9 == k.name.size());  // after pdl=, as norm=
    const auto& twin = check_flag_twin(k, ",o=direct", {{128, 128}, {64, 96}, {96, 128}});
    CHECK(twin.name.find("pdl=ahead") + 9 == twin.name.size());
    CHECK(k.state_ahead == twin.state_ahead);
    CHECK(k.description.find("second reduction") != std::string::npos);
  }
  CHECK(direct == 3);  // cols=32 rows=16 and 8, cols=16 rows=8
}

TEST_CASE("gdn_recurrence min_state_copies: 1 with S read after the wait, 2 for pdl=on, and for pdl=ahead one more than the launches that could all be resident") {
  CHECK(gr::min_state_copies(false, false, 0) == 1);
  CHECK(gr::min_state_copies(false, true, 5.5) == 1);  // S after the wait: nothing in flight writes it
  CHECK(gr::min_state_copies(true, false, 7.0) == 2);  // pdl=on: launch n - 2 is complete when n starts
  // the H200 at batch 1 (2.75 launches fit), 8 and 32 (under one)
  CHECK(gr::min_state_copies(true, true, 528.0 / 192) == 4);
  CHECK(gr::min_state_copies(true, true, 528.0 / 1536) == 2);
  CHECK(gr::min_state_copies(true, true, 528.0 / 6144) == 2);
  // the rule: C - 1 launches between the writer and the reader cannot all be resident, C - 2 could be
  for (double L : {0.0, 0.5, 1.0, 2.0, 2.75, 3.0, 7.9}) {
    CAPTURE(L);
    const int C = gr::min_state_copies(true, true, L);
    CHECK(C - 1 > L);
    CHECK(C - 2 <= L);
  }
  CHECK_THROWS_AS(gr::min_state_copies(true, true, -1.0), Error);
  CHECK_THROWS_AS(gr::min_state_copies(true, true, std::nan("")), Error);
  // the kernel form: without the residency query a pdl=ahead kernel is refused, naming why
  gr::RecurrenceKernel k = gr::recurrence_kernel("gdn_recurrence/impl=fused,cols=32,rows=8,pdl=ahead");
  k.resident_launches = nullptr;
  CHECK_THROWS_WITH_AS(gr::min_state_copies(k, gr::dense_args(16, 48, 128, 128, 1)), doctest::Contains("resident_launches"), Error);
  CHECK(gr::min_state_copies(gr::recurrence_kernel("gdn_recurrence/impl=fused,cols=32,rows=8,pdl=on"), gr::dense_args(16, 48, 128, 128, 1)) == 2);
  CHECK(gr::min_state_copies(gr::recurrence_kernel("gdn_recurrence/impl=fused,cols=32,rows=8,pdl=early"), gr::dense_args(16, 48, 128, 128, 1)) == 1);
}

TEST_CASE("gdn_recurrence norm=last: the twin of its pdl=early kernel without the epilogue, one thread a column when asked, check_args wants its counts") {
  int last = 0;
  for (const auto& k : gr::recurrence_kernels()) {
    const auto at = k.name.find(",norm=last");
    CHECK(k.counts == (at != std::string::npos));
    if (at == std::string::npos) continue;
    ++last;
    CAPTURE(k.name);
    CHECK(k.gated_norm);
    CHECK(k.norm_q8);
    const auto& twin = gr::recurrence_kernel(k.name.substr(0, at));
    CHECK_FALSE(twin.gated_norm);
    CHECK(twin.state_before_wait == k.state_before_wait);
    for (auto [dk, dv] : {std::pair{128, 128}, std::pair{32, 48}, std::pair{64, 96}})
      CHECK(k.can_implement(gr::dense_args(2, 6, dk, dv, 1)) == twin.can_implement(gr::dense_args(2, 6, dk, dv, 1)));
  }
  CHECK(last == 2);  // cols=32,rows=8,pdl=early,norm=last, and the four-launch layer's norm=last,prep=conv,hist=ring
  const auto& k = gr::recurrence_kernel("gdn_recurrence/impl=fused,cols=32,rows=8,pdl=early,norm=last");
  alignas(16) static float buf[64];
  alignas(16) static uint4 xq[8];
  static int count[64];
  gr::RecurrenceArgs a = gr::dense_args(16, 48, 128, 128, 1);
  a.q = a.k = a.v = a.g = a.beta = buf;
  a.z = a.norm_w = buf;
  a.S = a.o = a.onn = buf;
  a.normalize_qk = false;
  a.eps = 1e-6f;
  CHECK(gr::check_args(k, a).find("per-head counts") != std::string::npos);
  a.count = count;
  CHECK(gr::check_args(k, a) == "");
  a.xq = xq;  // a head's dv = 128 columns over four blocks of 32: the last one writes the head's q8 blocks
  CHECK(gr::check_args(k, a) == "");
  // With the epilogue asked, one thread a column: dk / rows * cols / 4 = 128 threads against dv = 96 is refused.
  gr::RecurrenceArgs b = gr::dense_args(2, 6, 128, 96, 1);
  CHECK(k.can_implement(b) == "");
  b.onn = buf;
  CHECK(k.can_implement(b).find("one thread a column") != std::string::npos);
}

TEST_CASE("gdn_recurrence norm=gated: the twin of a kernel without the epilogue, a head's column tiles must fit a cluster, check_args guards the epilogue") {
  int norm = 0;
  for (const auto& k : gr::recurrence_kernels()) {
    const auto at = k.name.find(",norm=gated");
    CHECK(k.gated_norm == (at != std::string::npos || k.name.find(",norm=last") != std::string::npos));
    if (at == std::string::npos) continue;
    ++norm;
    CAPTURE(k.name);
    const auto& twin = gr::recurrence_kernel(k.name.substr(0, at));
    CHECK_FALSE(twin.gated_norm);
    CHECK(twin.state_before_wait == k.state_before_wait);
    for (auto [dk, dv] : {std::pair{128, 128}, std::pair{32, 48}, std::pair{64, 96}}) {
      const gr::RecurrenceArgs a = gr::dense_args(2, 6, dk, dv, 1);
      CHECK(k.can_implement(a) == twin.can_implement(a));  // every tile count up to 8 fits
    }
  }
  CHECK(norm == 3);
  // cols=16 at dv = 256: 16 column tiles, over a portable cluster's 8 blocks.
  const auto& k16 = gr::recurrence_kernel("gdn_recurrence/impl=fused,cols=16,rows=8,pdl=early,norm=gated");
  const gr::RecurrenceArgs wide = gr::dense_args(2, 6, 128, 256, 1);
  CHECK(gr::recurrence_kernel("gdn_recurrence/impl=fused,cols=16,rows=8,pdl=early").can_implement(wide) == "");
  CHECK(k16.can_implement(wide).find("cluster") != std::string::npos);
  // The epilogue's arguments: asked of a kernel without one, without z or norm_w, with eps <= 0, misaligned.
  alignas(16) static float buf[64];
  gr::RecurrenceArgs a = gr::dense_args(16, 48, 128, 128, 1);
  a.q = a.k = a.v = a.g = a.beta = buf;
  a.S = a.o = buf;
  a.normalize_qk = false;
  a.onn = buf;
  CHECK(gr::check_args(gr::recurrence_kernel("gdn_recurrence/impl=fused,cols=16,rows=8,pdl=early"), a).find("without one") != std::string::npos);
  CHECK(gr::check_args(k16, a).find("z and norm_w") != std::string::npos);
  a.z = a.norm_w = buf;
  CHECK(gr::check_args(k16, a).find("eps") != std::string::npos);
  a.eps = 1e-6f;
  CHECK(gr::check_args(k16, a) == "");
  a.z = buf + 1;
  CHECK(gr::check_args(k16, a).find("16-byte aligned") != std::string::npos);
  a.z = buf;
  // onn's q8 form (xq): only the kernels with a head in one block (norm_q8), dv % 32 == 0, batch 1, dv <= cols.
  const auto& k128 = gr::recurrence_kernel("gdn_recurrence/impl=fused,cols=128,rows=8,pdl=early,norm=gated");
  CHECK(k128.norm_q8);
  CHECK_FALSE(k16.norm_q8);
  alignas(16) static uint4 xq[8];
  a.xq = xq;
  CHECK(gr::check_args(k16, a).find("cannot write it") != std::string::npos);
  CHECK(gr::check_args(k128, a) == "");
  a.onn = nullptr;
  CHECK(gr::check_args(k128, a).find("without the gated-norm epilogue") != std::string::npos);
  a.onn = buf;
  gr::RecurrenceArgs b2 = a;
  b2.batch = 2;
  CHECK(gr::check_args(k128, b2).find("batch 1") != std::string::npos);
  // a's buffers and epilogue at another dv: 48 (not a multiple of 32), 256 (two blocks a head)
  for (auto [dv, why] : {std::pair{48, "multiple of 32"}, std::pair{256, "one block"}}) {
    gr::RecurrenceArgs other = gr::dense_args(2, 6, 128, dv, 1);
    other.q = other.k = other.v = other.g = other.beta = other.z = other.norm_w = buf;
    other.S = other.o = other.onn = buf;
    other.normalize_qk = false;
    other.eps = 1e-6f;
    other.xq = xq;
    CAPTURE(dv);
    CHECK(gr::check_args(k128, other).find(why) != std::string::npos);
  }
}

TEST_CASE("gdn_recurrence state=bf16: the twins of cols=32,rows=8 in its three PDL forms, taking what they take, out of gdn-recurrence's race, 8-byte alignment") {
  int bf16 = 0;
  for (const auto& k : gr::recurrence_kernels()) {
    if (!k.state_bf16) continue;
    ++bf16;
    CAPTURE(k.name);
    const auto& twin = check_flag_twin(k, ",state=bf16", {{128, 128}, {32, 32}, {64, 96}});
    CHECK_FALSE(twin.state_bf16);
    alignas(16) static float buf[64];
    gr::RecurrenceArgs a = gr::dense_args(16, 48, 128, 128, 1);
    a.q = a.k = a.v = a.g = a.beta = a.o = buf;
    a.S = reinterpret_cast<float*>(reinterpret_cast<char*>(buf) + 8);  // 8-byte aligned: bf16 takes it, f32 does not
    CHECK(gr::check_args(k, a) == "");
    CHECK(gr::check_args(twin, a).find("16-byte aligned") != std::string::npos);
    a.S = reinterpret_cast<float*>(reinterpret_cast<char*>(buf) + 4);
    CHECK(gr::check_args(k, a).find("8-byte aligned") != std::string::npos);
  }
  CHECK(bf16 == 3);
  CHECK(registry().experiment("gdn-state-drift").claims.size() == 6);
  // It runs without a device, and sets one up where there is one, even alone (its kernels and timer).
  CHECK_FALSE(registry().experiment("gdn-state-drift").needs_device);
  CHECK(registry().experiment("gdn-state-drift").uses_device);
}

TEST_CASE("gdn_recurrence state=bf16: one step from S0 rounded to bf16, S rounded again, stays inside kBf16Tolerance on the op's declared problems (the storage's cost alone)") {
  // The f64 recurrence on bf16-rounded S0 with S rounded on the way out: what a state=bf16 kernel
  // computes but for its f32 arithmetic (~1e-7). Its distance to the f64 truth must leave the
  // tolerance a margin, or a correct kernel would fail its race.
  const Op& op = registry().op("gdn_recurrence");
  auto bf = [](double x) { return double(ref::round_bf16(float(x))); };
  for (const Problem& p : {op.declared_problems(false)[0], op.declared_problems(false)[2], op.declared_problems(true)[0]}) {
    CAPTURE(p.key());
    const auto wl = op.generate(p);
    const auto& w = gr::workload_of(*wl);
    const gr::Reference truth = gr::reference_f64(w);
    ref::gdn::Geometry g;
    g.nk = w.nk, g.nv = w.nv, g.dk = w.dk, g.dv = w.dv;
    const std::size_t nq = std::size_t(w.nk) * w.dk, nv = std::size_t(w.nv) * w.dv, nS = nv * w.dk, ng = std::size_t(w.nv);
    std::vector<double> o_all, S_all;
    for (int b = 0; b < w.batch; ++b) {
      auto d = [](const std::vector<float>& x, std::size_t at, std::size_t n) { return std::vector<double>(x.begin() + std::ptrdiff_t(at * n), x.begin() + std::ptrdiff_t((at + 1) * n)); };
      std::vector<double> S = d(w.S0, std::size_t(b), nS), o(nv), qn(nq), kn(nq);
      for (auto& e : S) e = bf(e);
      ref::gdn::recurrence(g, d(w.q, std::size_t(b), nq), d(w.k, std::size_t(b), nq), d(w.v, std::size_t(b), nv), d(w.g, std::size_t(b), ng),
                           d(w.beta, std::size_t(b), ng), S, o, qn, kn);
      for (auto& e : S) e = bf(e);
      o_all.insert(o_all.end(), o.begin(), o.end());
      S_all.insert(S_all.end(), S.begin(), S.end());
    }
    const Accuracy ao = accuracy(o_all, truth.o), aS = accuracy(S_all, truth.S);
    MESSAGE(p.key() << ": bf16 storage, one step: o max_rel " << ao.max_rel << ", S max_rel " << aS.max_rel);
    CHECK(ao.max_rel > 0);  // the rounding is there
    CHECK(ao.max_rel < gr::kBf16Tolerance / 2);
    CHECK(aS.max_rel < gr::kBf16Tolerance / 2);
  }
}

TEST_CASE("gdn-state-drift's models: the f64 model is ref::gdn::recurrence, the f32 and bf16 ones store exactly representable values, tokens are deterministic") {
  namespace sd = klab::experiments::state_drift;
  const ref::gdn::Geometry g{256, 2, 6, 32, 48, 4, 1e-6};
  const auto rs = sd::regimes();
  REQUIRE(rs.size() == 2);
  const auto x = sd::token(g, rs[1], 1, 7, 3);
  CHECK(x.q == sd::token(g, rs[1], 1, 7, 3).q);
  CHECK(x.q != sd::token(g, rs[1], 1, 7, 4).q);
  for (float e : x.g) CHECK((std::exp(double(e)) >= 0.98 - 1e-6 && std::exp(double(e)) < 0.99999 + 1e-6));
  const std::size_t nS = std::size_t(g.nv) * g.dk * g.dv;
  std::vector<double> S64(nS, 0.25), S32(nS, 0.25), S16(nS, 0.25), o64, o32, o16, Sref(nS, 0.25), oref(std::size_t(g.nv) * g.dv), qn(64), kn(64);
  sd::model_step(g, x, sd::Storage::f64, S64, o64);
  auto d = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
  ref::gdn::recurrence(g, d(x.q), d(x.k), d(x.v), d(x.g), d(x.beta), Sref, oref, qn, kn);
  CHECK(S64 == Sref);
  CHECK(o64 == oref);
  sd::model_step(g, x, sd::Storage::f32, S32, o32);
  sd::model_step(g, x, sd::Storage::bf16, S16, o16);
  CHECK(o32 == oref);  // the first step reads the same (exact) S0; only the stored S differs
  CHECK(o16 == oref);
  int differ32 = 0, differ16 = 0;
  for (std::size_t i = 0; i < nS; ++i) {
    CHECK(S32[i] == double(float(S32[i])));
    CHECK(S16[i] == double(ref::round_bf16(float(S16[i]))));
    differ32 += S32[i] != Sref[i];
    differ16 += S16[i] != Sref[i];
  }
  CHECK(differ32 > 0);
  CHECK(differ16 > differ32 / 2);
  CHECK(std::string(sd::to_string(sd::Storage::bf16)) == "model-bf16");
}
