#include "gdn/step_op.hpp"

#include <algorithm>
#include <memory>
#include <optional>
#include <tuple>

#include "f32_gemv/kernels.hpp"
#include "gdn/gdn_device.hpp"
#include "gdn/gdn_kernels.hpp"
#include "gdn/inputs.hpp"
#include "klab/cuda.hpp"
#include "klab/error.hpp"
#include "klab/metrics.hpp"
#include "klab/ref/gdn_q4.hpp"
#include "q4_gemv/q4_gemv.hpp"

namespace klab::gdn {

namespace rg = ref::gdn;

namespace {
constexpr int kQkv = 1, kZ = 2, kOut = 3;  // the pool keys of the q4 tier's three projections
// The last token's intermediates the op names, beside out, S and hist.
const std::vector<std::pair<const char*, What>> kIntermediates{
    {"q", What::Q}, {"k", What::K}, {"beta", What::BETA}, {"g", What::G}, {"onn", What::ONN}};

// The GDN step's inputs are heavy-tailed like LLM activations when the problem asks for outlier;
// any distribution of the problem is taken as given. Token t from stream 1000 + t (gdn/inputs.hpp).
std::vector<float> step_inputs(const rg::Geometry& g, int T, const Problem& p) { return inputs(g.hidden, T, p.dist, p.seed, 1000); }

// What a variant of gdn_step runs: the tier, the q4 kernel (q4 tier), and the host-facing API.
struct StepConfig {
  bool q4 = false;
  std::string q4_kernel = "";  // a q4_gemv variant name (q4 tier)
  // How the T tokens are driven: "" one enqueue_run on device buffers (capturable); "run": GdnDevice::run
  // (one copy in, T steps, one copy out, one sync); "host": T host-facing step() calls (a copy in,
  // a copy out and a sync per token). The two host APIs cannot be captured in a graph.
  std::string api = "";
  // prep=fused variants (fused_step_configs): applied after the weights are loaded (apply()).
  std::optional<FusedStepConfig> fused = std::nullopt;
};

class StepInstance final : public Instance {
 public:
  StepInstance(const StepWorkload& wl, const StepConfig& c)
      : c_(c), g_(wl.w.g), T_(wl.T), dev_(wl.w.g, 1), h_(DeviceBuffer<float>::from(wl.h)), y_(wl.h.size()), host_h_(wl.h) {
    if (c.q4) {
      const auto& q = wl.q;
      dev_.q4_pool().put(kQkv, q.qkv);
      dev_.q4_pool().put(kZ, q.z);
      dev_.q4_pool().put(kOut, q.out);
      dev_.set_q4_variant(c.q4_kernel);
      if (auto why = dev_.load_q4(0, wl.w, kQkv, kZ, kOut); !why.empty()) throw Error("gdn_step: " + why);
    } else {
      if (c.fused) dev_.set_f32_variant(f32_kernel_of(*c.fused));  // before the load: its projections keep it
      dev_.load_f32(0, wl.w);
    }
    if (c.fused) apply(*c.fused, dev_);
    KLAB_CUDA(cudaDeviceSynchronize());
  }
  void run(cudaStream_t s) override {
    dev_.set_stream(s);
    if (c_.api.empty()) {
      dev_.enqueue_run(0, T_, h_.get(), y_.get(), s);
      return;
    }
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    KLAB_CUDA(cudaStreamIsCapturing(s, &st));
    require(st == cudaStreamCaptureStatusNone, "api=" + c_.api + " copies to and from the host and synchronises (no graph can hold it)");
    const std::size_t H = std::size_t(g_.hidden);
    host_y_.resize(host_h_.size());
    if (c_.api == "run") {
      dev_.run(0, T_, host_h_, host_y_);
    } else {
      for (int t = 0; t < T_; ++t)
        dev_.step(0, std::span<const float>(host_h_.data() + std::size_t(t) * H, H), std::span<float>(host_y_.data() + std::size_t(t) * H, H));
    }
    y_.upload(host_y_.data(), host_y_.size());
  }
  void poison(cudaStream_t s) override { poison_device(y_.get(), y_.size(), s); }
  void reset(cudaStream_t s) override {
    dev_.set_stream(s);
    dev_.reset();
  }
  std::vector<Named<float>> outputs() override {
    KLAB_CUDA(cudaDeviceSynchronize());
    std::vector<Named<float>> out{{"out", y_.download()}, {"S", dev_.get(0, What::S)}, {"hist", dev_.get(0, What::HIST)}};
    for (const auto& [name, w] : kIntermediates) out.push_back({name, dev_.get(0, w)});
    return out;
  }

 private:
  StepConfig c_;
  rg::Geometry g_;
  int T_;
  GdnDevice dev_;
  DeviceBuffer<float> h_, y_;
  std::vector<float> host_h_, host_y_;
};

std::string axes_value(const q4_gemv::Q4Kernel& k) {
  std::string s;
  for (const auto& [a, v] : k.axes) s += (s.empty() ? "" : "+") + a + "=" + v;
  return s;
}

// Why a variant cannot step p's geometry: the device's refusal, the q4 tier on f32 weights, or a
// kernel it names (the recurrence, the b|a kernel) refusing the geometry.
std::string can_step(const Problem& p, const StepConfig& c) {
  const rg::Geometry g = step_geometry(p);
  if (auto why = GdnDevice::can_implement(g, 1); !why.empty()) return why;
  if (c.q4 && p.param("weights") != 1) return "the q4 tier runs on q4 weights (weights=1)";
  return c.fused ? config_error(*c.fused, g) : "";
}
}  // namespace

std::uint64_t StepWorkload::digest() const {
  const std::int64_t dims[] = {w.g.hidden, w.g.nk, w.g.nv, w.g.dk, w.g.dv, w.g.ck, T, q4 ? 1 : 0};
  std::uint64_t d = fnv1a64(dims, sizeof dims);
  for (const auto* t : {&w.w_qkv, &w.w_z, &w.w_b, &w.w_a, &w.w_out, &w.a_log, &w.dt_bias, &w.conv_w, &w.norm_w, &h})
    d = fnv1a64(std::span<const float>(*t), d);
  return d;
}

rg::Geometry step_geometry(const Problem& p) {
  rg::Geometry g;
  g.hidden = int(p.param("hidden"));
  g.nk = int(p.param("nk"));
  g.nv = int(p.param("nv"));
  g.dk = int(p.param("dk"));
  g.dv = int(p.param("dv"));
  g.ck = int(p.param("ck"));
  return g;
}

double step_bytes(const rg::Geometry& g, bool q4) {
  const double C = g.conv_dim(), V = g.value_dim(), Hd = g.hidden, nv = g.nv;
  const double big = C * Hd + V * Hd + Hd * V;
  const double small = 4.0 * (2 * nv * Hd + C * g.ck + 2 * nv + g.dv);
  const double state = 4.0 * 2 * (nv * g.dk * g.dv + double(g.ck - 1) * C);
  return (q4 ? 0.5625 : 4.0) * big + small + state;
}

const StepWorkload& step_workload_of(const klab::Workload& w) {
  const auto* s = dynamic_cast<const StepWorkload*>(&w);
  require(s != nullptr, "gdn_step: handed another op's workload");
  return *s;
}

Op make_step_op() {
  Op op;
  op.name = "gdn_step";
  op.description = "one GDN layer (Qwen3.5's Gated DeltaNet) over T tokens from a zero state: out, S, hist and the last token's intermediates";
  const rg::Geometry q = rg::qwen35_27b();
  op.params = {
      {"hidden", "model width", q.hidden, {q.hidden}, {256}},
      {"nk", "key heads", q.nk, {q.nk}, {2}},
      {"nv", "value heads (a multiple of nk)", q.nv, {q.nv}, {6}},
      {"dk", "key head dim", q.dk, {q.dk}, {32}},
      {"dv", "value head dim", q.dv, {q.dv}, {48}},
      {"ck", "conv kernel width", q.ck, {q.ck}, {4}},
      {"tokens", "tokens per run (T)", 16, {16}, {8}},
      {"weights", "0: seeded f32 weights; 1: their big three quantised to q4 (the q4 tier's weights)", 1, {0, 1}, {1}},
  };
  op.validate = [](const Problem& p) -> std::string {
    for (const char* n : {"hidden", "nk", "nv", "dk", "dv", "ck", "tokens", "weights"})
      if (!p.has(n)) return std::string("missing parameter '") + n + "'";
    if (auto why = step_geometry(p).validate(); !why.empty()) return why;
    if (p.param("tokens") < 1 || p.param("tokens") > 4096) return "tokens must be in 1..4096";
    if (p.param("weights") != 0 && p.param("weights") != 1) return "weights must be 0 (f32) or 1 (q4)";
    if (p.param("weights") == 1)
      if (auto why = rg::q4_geometry_error(step_geometry(p)); !why.empty()) return why;
    return "";
  };
  op.generate = [](const Problem& p) -> std::unique_ptr<klab::Workload> {
    auto wl = std::make_unique<StepWorkload>();
    wl->problem = p;
    const rg::Geometry g = step_geometry(p);
    wl->T = int(p.param("tokens"));
    wl->q4 = p.param("weights") == 1;
    wl->w = rg::random_weights(g, p.seed);
    if (wl->q4) {
      wl->q = rg::quantize_projections(wl->w);
      wl->w = rg::with_q4(wl->w, wl->q);
    }
    wl->h = step_inputs(g, wl->T, p);
    return wl;
  };
  op.references = [](const klab::Workload& w) {
    const auto& wl = step_workload_of(w);
    const rg::Geometry& g = wl.w.g;
    rg::State st = rg::State::zeros(g);
    rg::Intermediates im;
    std::vector<double> out;
    out.reserve(wl.h.size());
    for (int t = 0; t < wl.T; ++t) {
      const auto y = rg::step(wl.w, st, token(wl.h, g.hidden, t), &im);
      out.insert(out.end(), y.begin(), y.end());
    }
    std::vector<Named<double>> r{{"out", std::move(out)}, {"S", st.S}, {"hist", st.hist}};
    for (const auto& [name, what] : kIntermediates) r.push_back({name, im.get(what, st)});
    return r;
  };
  op.traffic = [](const Problem& p) {
    const rg::Geometry g = step_geometry(p);
    const double T = double(p.param("tokens"));
    const double big = double(g.conv_dim()) * g.hidden + 2.0 * double(g.value_dim()) * g.hidden;
    const double macs = big + 2.0 * g.nv * g.hidden + 3.0 * g.nv * g.dk * g.dv + double(g.conv_dim()) * g.ck;
    return Traffic{T * step_bytes(g, p.param("weights") == 1), T * macs};
  };
  return op;
}

std::vector<FusedStepConfig> fused_step_configs() {
  const std::string q8 = "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=launch,pdl=on,rows=8";
  const CandidateTwins t = candidate_twins();
  const F32Twins f = f32_candidate_twins();
  return {
      {true, "", ""},
      {false, kDefaultQ4Variant, ""},
      {false, q8, ""},
      // q8 projections with the fused recurrence (q/k norm already done by conv_norm_bg: normalize_qk
      // off) of the batch-1 ladder: the twin of rec-pays
      {false, q8, "gdn_recurrence/impl=fused,cols=16,rows=8,pdl=on"},
      // the candidate's twins (candidate_twins: gdn-step-fused's claims)
      t.norm_gated,
      t.unchained,
      t.apart,
      t.ring,
      t.cluster,
      t.out_own,
      t.thread_prep,
      t.fold_main,
      t.rec_norm,
      t.ba_own,
      t.pf_out,
      t.pf_out_early,
      t.fork_z,
      t.norm_last,
      t.rows16,
      t.out_smem,
      t.warp1,
      t.fold_main_warp1,
      t.conv_rec,
      t.conv_ring,
      t.four,
      t.fold_ring,
      t.fold_depth,
      t.depth_all,
      t.fold_pace,
      t.pace_all,
      t.pace_ilp,
      t.pace_late,
      t.pace_defer,
      t.pace_ba_conv,
      t.pace_out1,
      t.pace_out1_s4,
      t.pace_out1_ba,
      t.pace_out1_late,
      t.pace_out1_defer,
      t.pace_out1_l2,
      t.pace_out1_ilp,
      t.pace_out1_split,
      t.pace_split_x2,
      t.own_out4,
      t.own_out8,
      t.kc_out,
      t.pace_span2,
      t.pace_span3,
      t.pace_span1x2,
      t.pace_span2x2,
      f.fork_z,
      f.norm_last,
      f.conv_rec,
      f.four,
      f.plain,
      f.apart,
      f.ba_own,
      f.u8,
      step_f32_candidate(),
      t.fold,  // the candidate until 2026-12-06 (step_candidate() is pace_out1_split, listed above)
  };
}

// Chosen from the H200's reports (2026-12-01, stream mode, Qwen3.5-27B geometry):
// - run-30bee11: grid=groups,xprep=launch,rows=8 is the fastest q4 kernel at the three shapes of the
//   step (6144x5120 6.83 us, 10240x5120 10.43 us); the recurrence impl=fused,cols=32,rows=8,pdl=early
//   the fastest at batch 1 (3.37 us); the candidate of before (xpf=l2,wpf=l2, recurrence cols=16) took
//   71.1 us per layer (wpf=l2 x0.19..x0.57 in q4-to-ceiling, xpf=l2 no gain: not kept).
// - run-105e07b: the candidate of then (this one with norm=gated and without the ring) 28.6 us per
//   layer, 1.490 ms per token over 48 layers; its twin without norm=gated 27.97 us.
// - run-08a86f8: again without norm=gated 27.97 against 28.4 us (x0.983 for the epilogue: claim
//   norm-pays not held), and the stacked launch on the TMA ring 28.1 against 28.4 us (x1.013).
// - run-4198a57: with both (no norm=gated, the ring) 27.42 us per layer in gdn-step-fused, the fastest
//   there (the ring x1.019 per layer), but 1.545 ms per token as the 48-layer graph, and in run-68b986b
//   (the same commit's twins in one run of gdn-stack) the ring lost there: 1.546 ms with it against
//   1.4775 ms with the stacked launch on grid=groups (x0.956). A token through the layers is what the
//   candidate is for, so it keeps grid=groups for the stacked launch; the ring stays its twin.
// - run-394ef9f: that candidate (the gated norm a launch of its own, in the PDL chain, the stacked
//   launch on the step's q4 kernel) 28.1 us per layer, 1.4801 ms per token as the 48-layer graph.
// - run-a9d7934 (2026-12-02): the same with out=prepared (the gated norm writes out_proj's q8 x, out_proj
//   launches no prep kernel) the same bits, 27.8 -> 27.13 us per layer (x1.026) and 1.4762 -> 1.4131 ms
//   per token as the graph (x1.045, the lowest so far).
// - run-7a808bf (2026-12-02): that one (out=prepared) 27.2 us per layer and 1.4246 ms per token; its
//   twin on the q4 kernel xprep=warps (the stacked launch's prep a warp per block of 32) the same bits,
//   x1.007 per layer (same) and 1.4059 ms per token in the graph (x1.013, warps-in-graph held).
// - run-e0dc546 and run-123ab72 (2026-12-02): this candidate 1.3973 and 1.3895 ms per token; its twins
//   fold=ba (x1.057 per layer, x0.994 / x0.993 in the graph) and rec-norm (x0.956, x0.954) did not pay
//   where a token runs through the layers.
// - run-2c678d0 (2026-12-02): that candidate's twin fold=ba-main (b|a's rows in the stacked kernel's
//   grid, one launch fewer) x1.031 per layer and x1.016 in the graph, 1.3770 ms per token: the fastest
//   measured; b|a within 1e-5 of split-row's, the step as accurate against f64 as the candidate.
// - run-0e18347 and run-f64919d (2026-12-02): with gdn-stack's 48 copy nodes gone from its graph, the base's
//   twin fold=ba (b|a in the stacked launch's prep kernel) is the fastest twice: 1.2832 and 1.2828 ms per
//   token, x1.015 over that candidate (1.3021, 1.3025) and x1.045 over the base; it gives the base's bits.
//   As the candidate (run-93e3419): 1.2842 ms per token, x1.047 over the base; its twin norm=last (the
//   gated norm in the recurrence's last column blocks) the same bits, x0.960.
// That candidate (out=prepared on xprep=warps, fold=ba; 2026-12-02..06) is the twin fold; the one before it (fold=ba-main) fold_main.
// - run-call48 (H200, 2026-12-06, the first H200 to race the pace twins): fold 26.3 us a layer and 1.3169 ms per token;
//   pace_all 24.2 us and 1.2215 ms (x1.078), pace_out1 24.0 us and 1.2133 ms, pace_out1_split (out_proj at row-split=2
//   on one block an SM) 23.1 us and 1.1905 ms per token, x1.019 over pace_out1 (claims out1-split-pays and
//   out1-split-in-graph held), x1.106 over fold: the fastest q4 layer raced, pace_out1's bits. This candidate since.
namespace {
// The candidates' small kernels (q4 and f32 tiers alike): the recurrence and b|a's own kernel.
constexpr const char* kCandidateRec = "gdn_recurrence/impl=fused,cols=32,rows=8,pdl=early";
constexpr const char* kCandidateBa = "f32_gemv/impl=split-row,pdl=on";
// A candidate from its base (ba_own): b|a inside the stacked launch, on the q4 tier in its prep kernel
// (fold=ba), on the f32 tier as rows in its grid (fold=ba-main: the f32 stacked launch has no prep kernel).
FusedStepConfig candidate_of(FusedStepConfig base) {
  (base.f32 ? base.fold_ba_main : base.fold_ba) = true;
  return base;
}
}  // namespace

FusedStepConfig step_candidate() { return candidate_twins().pace_out1_split; }

FusedStepConfig step_f32_candidate() { return candidate_of(f32_candidate_twins().ba_own); }

std::string f32_kernel_of(const FusedStepConfig& c) { return c.f32_kernel.empty() ? kDefaultF32Variant : c.f32_kernel; }

F32Twins f32_candidate_twins() {
  F32Twins t;
  t.ba_own = FusedStepConfig{true, "", kCandidateRec, kCandidateBa, true, true};
  t.ba_own.f32_kernel = kF32PdlKernel;
  t.u8 = t.fork_z = t.norm_last = t.conv_rec = t.four = candidate_of(t.ba_own);
  t.u8.f32_kernel = kF32Pdl8Kernel;
  t.fork_z.fork_z = true;
  t.norm_last.recurrence = kRecNormLast;
  t.conv_rec.recurrence = kRecConv;
  t.four.recurrence = kRecFour;
  t.apart = t.ba_own;
  t.apart.merged_in = false;
  t.plain = t.apart;
  t.plain.f32_kernel = "f32_gemv/impl=warp-row,unroll=4";
  return t;
}

CandidateTwins candidate_twins() {
  CandidateTwins t;
  t.ba_own = FusedStepConfig{false, kWarpsQ4, kCandidateRec, kCandidateBa, true, true, ""};
  t.ba_own.norm_q8 = true;
  t.norm_gated = t.unchained = t.apart = t.ring = t.cluster = t.out_own = t.thread_prep = t.fold_main = t.ba_own;
  t.fold_main.fold_ba_main = true;
  t.rec_norm = t.ba_own;
  t.rec_norm.recurrence = kRecNormQ8;
  t.thread_prep.q4_kernel = kThreadPrepQ4;
  // the gated norm in the recurrence, and the cluster kernel (no launch_prepared), leave out_proj its own prep
  t.norm_gated.norm_q8 = t.cluster.norm_q8 = t.out_own.norm_q8 = false;
  t.norm_gated.recurrence += ",norm=gated";
  t.unchained.chain = false;
  t.apart.merged_in = false;
  t.ring.stacked_kernel = kStackedRing;
  t.cluster.q4_kernel = kClusterQ4;
  t.fold = candidate_of(t.ba_own);
  t.pf_out = t.pf_out_early = t.fork_z = t.norm_last = t.rows16 = t.conv_rec = t.conv_ring = t.four = t.fold;  // fold's
  t.conv_rec.recurrence = kRecConv;
  t.conv_ring.recurrence = kRecConvRing;
  t.four.recurrence = kRecFour;
  t.rows16.q4_kernel = kWarpsQ4Rows16;
  // out_smem. Why (traces of the candidate, reports/h200/run-4cb578e): in_prep_ba ends 5.3 us after out_proj,
  // whose blocks (64 registers x 192 threads, five an SM) leave 4096 registers, too few for one of
  // in_prep_ba's 256-thread blocks: it becomes resident only as out_proj leaves, and its b|a rows' loads
  // start then. kSmemGroupsQ4's five blocks an SM take 41280 registers and 145 KB: one fits beside them.
  // Standalone at 5120x6144 it equals the candidate's kernel (6.82 against 6.89 us, reports/h200/run-3772b2a).
  // Measured (reports/h200/run-1b4fbed, H200, 2026-12-03): the candidate's bits; 27.4 against 26.2 us per layer
  // (x0.957) and 1.3644 against 1.3158 ms per token in the 48-layer graph (x0.964). The trace: in_prep_ba now ends
  // 1.98 us after out_proj (4.80), but out_proj ends 5.31 us after the gated norm (2.40). Kept as a negative result.
  t.out_smem = t.fold;
  t.out_smem.q4_kernel = kSmemGroupsQ4;
  t.out_smem.stacked_kernel = kWarpsQ4;
  t.warp1 = t.ba_own;
  t.warp1.q4_kernel = kWarpQ4;
  t.fold_main_warp1 = t.fold_main;
  t.fold_main_warp1.q4_kernel = kWarpQ4;
  t.fork_z.fork_z = true;
  t.norm_last.recurrence = kRecNormLast;  // with out=prepared: its epilogue writes out_proj's q8 x
  t.pf_out.l2_prefetch = kernels::L2Prefetch::after;
  t.pf_out_early.l2_prefetch = kernels::L2Prefetch::before;
  // fold_ring. Why (q4-prep-split on an H100, reports/h100/run-prep-ring, 2026-12-05): the ring's main kernel alone on
  // x already prepared takes 16.21 us at 17408x5120 against 17.46 for rung 10's (the candidate's stacked kernel's),
  // and the candidate's stacked launch already runs its main kernel on in_prep_ba's x (fold=ba). The ring twin of
  // 2026-12-01 (t.ring) ran the ring with its own prep launch. Predicted: ~1 us a layer less in gdn-step-fused; in
  // the graph the ring's blocks fill the SMs' shared memory until they leave (the ring twin lost there).
  // Measured on an H100 (reports/h100/run-fold-ring, twice): the candidate's bits; 31.2 -> 30.3 us a layer (x1.030)
  // and 1.5957 -> 1.6146 ms per token in the 48-layer graph (x0.988). On the H200 (reports/h200/run-fe10a61): 26.3 ->
  // 25.3 us a layer (x1.039, the fastest step raced), 1.3171 -> 1.3243 ms per token in the graph (x0.995, same). A twin.
  t.fold_ring = t.fold;
  t.fold_ring.stacked_kernel = kStackedRing;
  // fold_depth, depth_all (2026-12-05, fifth session). Why (q4-prep-split on an H100, reports/h100/run-depth): the ring
  // at depth=2 alone on x already prepared takes 6.35 us at 5120x6144 (out_proj's shape) against 7.04 for the ring and
  // 6.83 for rung 10's (the candidate's kernel's); at 17408x5120 15.9 us either way. Predicted: fold_depth as fold_ring
  // (the stacked launch is 16480 rows), depth_all ~0.5 us a layer faster than fold_ring.
  t.fold_depth = t.fold_ring;
  t.fold_depth.stacked_kernel = kRingDepth2;
  t.depth_all = t.fold;
  t.depth_all.q4_kernel = kRingDepth2;
  // fold_pace, pace_all (2026-12-05, seventh session). Why (q4-prep-split on an H100, reports/h100/run-pace): pace=1's
  // main kernel alone on x already prepared reaches 96.5 / 98.6 / 92.8 / 90.2% of that card's read ceiling at the four
  // seed shapes (the ring's producer twin 99.0 / 90.2 / 77.0 / 78.8%, depth=2's ~89% at 5120x6144), and both of the
  // candidate's q4 launches already run on x prepared by the launch before them. Predicted: fold_pace as fold_ring
  // (the stacked launch is 16480 rows, where the ring alone is as fast), pace_all ~0.1-0.5 us a layer faster than
  // depth_all (out_proj, 5120x6144). Measured on an H100 (reports/h100/run-pace-warps, gdn-step-fused, which threw
  // before its pace claims were listed; the steps were timed): the candidate 0.5018 ms, fold_ring 0.4928, fold_depth
  // 0.4897, depth_all 0.4982, fold_pace 0.4615, pace_all 0.4565 (x1.099 over the candidate): the fastest q4 steps there.
  // The whole GDN run twice more on an H100 (reports/h100/run-pace-warp, run-ilp): pace_all x1.099 / x1.098 per layer and
  // x1.032 / x1.031 in the 48-layer graph (1.5436, 1.5456 against 1.5936, 1.5937 ms per token), fold_pace x1.030 over
  // fold_ring there. The H200 (reports/h200/run-call48): pace_all x1.085 per layer and x1.078 in the graph over fold.
  t.fold_pace = t.fold_ring;
  t.fold_pace.stacked_kernel = kPace1;
  t.pace_all = t.fold;
  t.pace_all.q4_kernel = kPace1;
  // pace_ilp (2026-12-06, eighth session, written before any run). Why: out_proj (5120x6144, 640 groups over 264 blocks)
  // gives a block 2 or 3 groups, all in its 3 stages when its wait ends; with ilp=3 their dots are one step, not 2-3
  // (q4_gemv's rungs 88, 89 say why). The stacked launch (~7.8 groups a block, bandwidth-bound) stays on kPace1, where
  // a step of 3 stages would leave the producer one free stage. Predicted: 0.2-0.6 us a layer faster than pace_all.
  // Measured (H100, reports/h100/run-ilp): pace_all's bits, x0.975 per layer and x0.982 in the 48-layer graph (q4
  // ilp=3 loses on its own too: a block's groups are not in its stages at the release). A negative result, kept.
  t.pace_ilp = t.pace_all;
  t.pace_ilp.q4_kernel = kPace1Ilp3;
  t.pace_ilp.stacked_kernel = kPace1;
  // pace_late (the same session, written after the device time was spent). Why: q4_gemv's pace=1-2 (rungs 93, 94) asks
  // whether one request in flight a block before the release and two after beats pace=1 throughout; in the step both q4
  // launches wait for a predecessor (in_prep_ba, the gated norm) whose chain the bytes in flight before the release slow.
  // Predicted: within 2% of pace_all on an H100 per layer (pace=1 is at 96-98% of that card's ceiling at 16480 rows);
  // on the H200 the rung's own result decides. Measured (H100, reports/h100/run-gdn-pace-late): pace_all's bits, x0.989
  // per layer and x0.987 in the 48-layer graph against pace_all. A negative result, kept.
  t.pace_late = t.pace_all;
  t.pace_late.q4_kernel = kPace1Late;
  // pace_defer (2026-12-06, ninth session, written after the device time was spent). Why: q4_gemv's defer=4 at rows=4
  // (rung 96) is the fastest 5120x6144 rung on an H100 (x1.135 over rung 85, reports/h100/run-defer), and the traced
  // 48-layer graph puts out_proj's end 4.2 us after the gated norm's on pace_all, its bytes mostly in its stages by then
  // (its blocks enter ~14 us early): what is left is its blocks' chain, which defer=4 shortens. The stacked launch stays
  // on kPace1 (rows=8: defer=4 at rows=4 is x0.95 at 16-17K rows), its copy in its own layout (set_stacked_q4_variant).
  // Predicted: 0.3-0.8 us a layer faster than pace_all. Measured (H100, reports/h100/run-ba-conv): pace_all's bits, x1.00 per
  // layer and x0.999 in the 48-layer graph: out_proj's bytes are in its stages long before its release. A twin, no gain.
  t.pace_defer = t.pace_all;
  t.pace_defer.q4_kernel = kPace1Defer4R4;
  t.pace_defer.stacked_kernel = kPace1;
  // pace_ba_conv (2026-12-06, tenth session). Why (the traced 48-layer graph on an H100, reports/h100/run-call35 and
  // run-defer): on pace_all in_prep_ba ends 6.7 us after out_proj, though its work is 20 blocks quantising h and 96
  // rows of a 2 MB mat-vec; its b|a rows read h only after out_proj completes, beside the stacked kernel's first
  // stage requests. b|a needs nothing from the stacked launch: here its rows are conv_norm_bg's extra blocks
  // (resident from early in the stacked launch, their weights loaded before their wait), and the stacked launch's
  // prep is the 20 quantising blocks alone. The same bits (split-row's arithmetic). Predicted: 1-4 us a layer less in
  // the graph on an H100 (the hop between out_proj and the stacked kernel's first dots shortens). Measured (H100,
  // reports/h100/run-ba-conv): pace_all's bits, x0.974 per layer, x0.993 in the graph; traced, in_prep ends 3.9 us after
  // out_proj (6.6) but the stacked kernel 15.2 us after it (12.7). A negative result, kept.
  t.pace_ba_conv = t.pace_all;
  t.pace_ba_conv.fold_ba = false;
  t.pace_ba_conv.fold_ba_conv = true;
  // pace_out1 (2026-12-06, tenth session). Why (the traces of reports/h100/run-ba-conv): out_proj's blocks enter ~13 us
  // before its release and fill two 96 KB rings an SM, so the next layer's stacked launch (47 MB) places no block and
  // requests no byte until they leave: from out_proj's end to the stacked kernel's end 19.1 us (2.5 TB/s on an H100),
  // whatever its prep does (fold=ba-conv moved that hop 2.7 us earlier and the stacked end 0.3 us). On one block an SM
  // (kPace1PerSm1, 132 blocks) out_proj leaves room for one stacked block an SM, whose ring (12 MB in all) fills while
  // the small kernels run. Predicted: 1-4 us a layer less in the graph on an H100 (12 MB at ~3 TB/s less after out_proj,
  // out_proj itself slower by its bytes past its rings: 5.7 MB).
  t.pace_out1 = t.pace_all;
  t.pace_out1.q4_kernel = kPace1PerSm1;
  t.pace_out1.stacked_kernel = kPace1;
  // Measured (H100, reports/h100/run-out1): pace_all's bits; 28.5 -> 27.2 us a layer in the step (x1.044), 1.5426 ->
  // 1.4274 ms per token through 48 layers (x1.081, 77.0% of the byte floor), the fastest q4 layer on that card. Traced:
  // in_prep_ba 2.0 us after out_proj (6.6), the stacked kernel 13.6 us after it, out_proj 5.5 us after the gated norm (4.3).
  // pace_out1_s4, pace_out1_ba (the same session, after run-out1). Why: out_proj now ends 5.5 us after the gated norm,
  // its rings holding 10.9 of its 17.7 MB (3 stages at k = 6144); 4 stages hold 14.6 MB with the stacked block still
  // beside them (kPace1PerSm1S4). And fold=ba-conv moved in_prep_ba's end but not the layer's on pace_all, where the
  // stacked blocks' burst at out_proj's end held the bytes back; beside pace_out1 the hop may count. Predicted: each
  // 0.3-1 us a layer faster than pace_out1.
  t.pace_out1_s4 = t.pace_out1;
  t.pace_out1_s4.q4_kernel = kPace1PerSm1S4;
  t.pace_out1_ba = t.pace_out1;
  t.pace_out1_ba.fold_ba = false;
  t.pace_out1_ba.fold_ba_conv = true;
  // Measured (H100, reports/h100/run-out1b): both give pace_out1's bits and lose, x0.982 / x0.960 per layer and x0.979 /
  // x0.964 in the 48-layer graph (stages=4: the stacked block's neighbour grows; fold=ba-conv: conv_norm_ba ends 1 us later).
  // pace_out1_late, pace_out1_defer (the same session, after run-out1b). Why: out_proj on rung 98 ends 5.5 us after the
  // gated norm, ~2 groups a block past its rings requested one at a time after the release (q4_gemv's rungs 100, 101 say
  // more). Predicted: 0.3-1 us a layer faster than pace_out1. Measured (H100, reports/h100/run-out1c): pace_out1's bits,
  // x0.995 / x0.954 per layer and x0.994 / x0.952 in the graph (out_proj's tail 5.5 us after the gated norm either way at
  // pace=1-2; 6.9 us at defer=4, rows=4, its 4-row stages one request in flight). Negative results, kept.
  t.pace_out1_late = t.pace_out1;
  t.pace_out1_late.q4_kernel = kPace1LatePerSm1;
  t.pace_out1_defer = t.pace_out1;
  t.pace_out1_defer.q4_kernel = kPace1Defer4R4PerSm1;
  // pace_out1_l2 (the same session, after run-out1c). Why: out_proj's 6.8 MB past its rings are requested only after the
  // release, one stage a block at a time from the DRAM (its tail 5.5 us after the gated norm), while the DRAM has room in
  // the small kernels' ~8 us before it; rest=l2 (rung 102) asks the L2 for them once the ring's first requests are out.
  // Predicted: 1-2 us a layer faster than pace_out1. Measured (H100, reports/h100/run-out1-l2): pace_out1's bits, x0.976 per
  // layer, x0.957 in the graph: out_proj still ends 5.5 us after the gated norm (its tail is its blocks' chain, 5 groups a
  // block, not bytes) and conv_norm_bg, beside the prefetches, 2 us later. A negative result, kept.
  t.pace_out1_l2 = t.pace_out1;
  t.pace_out1_l2.q4_kernel = kPace1PerSm1L2;
  // pace_out1_ilp, pace_out1_split (the same session, written after the device time was spent). Why: that trace puts
  // out_proj's tail (5.5 us after the gated norm) on its blocks' chain, 5 groups a block, 3 in its stages at the release.
  // ilp=3 takes those 3 in one step (rung 103), row-split=2 halves each group's rows a thread (rung 104). Predicted:
  // 0.5-1.5 us a layer faster than pace_out1. Measured (H100, reports/h100/run-call44, 2026-12-06): pace_out1's bits;
  // ilp=3 x0.916 per layer and x0.930 in the 48-layer graph, row-split=2 x1.017 per layer and x0.996 (same) in the graph,
  // where pace_out1 took 1.4283 ms per token (its fifth H100 run). Negative results, kept.
  t.pace_out1_ilp = t.pace_out1;
  t.pace_out1_ilp.q4_kernel = kPace1Ilp3PerSm1;
  t.pace_out1_split = t.pace_out1;
  t.pace_out1_split.q4_kernel = kPace1SplitPerSm1;
  // pace_split_x2 (2026-12-06, twelfth session, written before any run). Why (reports/h200/run-call48, the H200): out_proj
  // on rung 98 ends 5.5 us after the gated norm though its 17.7 MB take 3.9 us at the read ceiling and 10.9 MB of them are
  // in its rings at the release; twice its consumer warps (row-split=2, now the candidate) paid x1.039 a layer and x1.019
  // in the graph: its consumers set its pace. Two blocks an SM of 2 stages each (kPace1SplitPerSm2S2) double them again
  // and hold 14.6 MB before the release, with a stacked kPace1 block still beside them (shared memory and registers:
  // q4_gemv's rung 108). Predicted: 0.3-1 us a layer under the candidate on the H200. Measured on an H100
  // (reports/h100/run-call56): the candidate's bits; 26.8 -> 28.5 us a layer (x0.94), 1.4353 -> 1.5090 ms per token in
  // the 48-layer graph (x0.951). A negative result, kept; the H200 has not raced it.
  t.pace_split_x2 = t.pace_out1_split;
  t.pace_split_x2.q4_kernel = kPace1SplitPerSm2S2;
  // own_out4, own_out8 (2026-12-06, thirteenth session, written before any run). Why: out_proj's tail after the gated norm
  // is its blocks' chain (5 groups a block at 5120x6144, each over all the block's warps behind a named barrier), not its
  // bytes (reports/h100/run-out1-l2: the groups past the ring in L2 changed nothing). On q4_gemv's grid=own each warp
  // takes its own groups (640 over 132 x 4 or 132 x 7 warps: at most 2 or 1 a warp) from its own stage, so after the
  // release a block's groups run side by side. owners=4 keeps room for a stacked kPace1 block beside out_proj (as the
  // candidate does), owners=8 holds every group of out_proj in its stages before the release. Predicted: out_proj's tail
  // 1-3 us shorter, 0.5-2 us a layer under the candidate on the H200 (claims own-out4-*, own-out8-*). Measured on an H100
  // (reports/h100/run-call61): the candidate's bits; 26.7 -> 30.2 / 29.8 us a layer (x0.885 / x0.897), 1.4324 -> 1.5575 /
  // 1.5609 ms per token in the 48-layer graph (x0.920 / x0.918). Alone grid=own is slower than the paced ring at every
  // shape (q4_gemv's rungs 111-114): one warp's chain through a group's chunks is longer than a block's. Negative, kept.
  t.own_out4 = t.pace_out1_split;
  t.own_out4.q4_kernel = kOwn4;
  t.own_out8 = t.pace_out1_split;
  t.own_out8.q4_kernel = kOwn8;
  // kc_out (2026-12-06, fourteenth session, written before any run). out_proj on q4_gemv's grid=split-k (rung 116): at
  // 5120x6144 clusters of 6 blocks, one block an SM's worth (22 clusters), each block one chunk of 1024 columns of its
  // cluster's ~30 groups, 8 warps of 2 one-tile stages; its chunk totals folded across the cluster after one cluster barrier.
  // Why: out_proj's tail after the gated norm is a block's groups one after another (5 a block, each behind a named
  // barrier); here a block's warps take its tiles side by side, a tile a sixth of a group. Predicted: 0.5-2 us a layer under
  // the candidate on the H200, if grid=split-k alone beats the paced ring at 5120x6144 (claims kc-out-*). Measured on an H100
  // (reports/h100/run-call64, gdn-stack): the 48-layer graph equal to the layers one by one; 1.4212 -> 1.5615 ms per token
  // (x0.910). grid=split-k alone loses at every shape there (q4_gemv's rungs 115-118). Negative, kept.
  t.kc_out = t.pace_out1_split;
  t.kc_out.q4_kernel = kSplitK1;
  // pace_span2, pace_span3 (2026-12-06, eleventh session). Why (pace_out1's traced cycle, reports/h100/run-call44): 29.4 us
  // a layer, of which out_proj ends 5.5 us after the gated norm, in_prep_ba 2.0 after it and the next stacked launch
  // 13.7 after that, while the ~8 us of small kernels before out_proj leave the DRAM mostly idle: each q4 launch is a
  // ring that starts empty and ends with its grid. The span (q4_gemv/span.hpp) is one ring for out_proj and the next
  // step's input side: its blocks (one an SM, a 166 KB ring at k = 6144) fill with out_proj's bytes while the small
  // kernels run, and request the next stacked bytes through out_proj's dots, its grid barrier and the next prep.
  // Predicted: 4-7 us a layer less in the 48-layer graph on an H100 (the stacked launch's ~36 MB past the ring at the
  // read rate after the barrier, out_proj's dots from a full ring); in gdn-step-fused the same where the T tokens chain.
  t.pace_span2 = t.pace_span3 = t.pace_out1;
  t.pace_span2.span = 2;
  t.pace_span3.span = 3;
  // Measured (H100, reports/h100/run-span, 2026-12-06): pace_out1's bits; 27.2 -> 35.8 / 36.6 us a layer in the step and
  // 1.4286 -> 1.7979 / 1.8284 ms per token in the 48-layer graph (x0.795 / x0.781). Traced: the span's blocks enter 14 us
  // before the gated norm ends, but end 27.8 us after it (65 MB at 2.3 TB/s): one block an SM, 5-6 consumer warps, is
  // too few to consume the stream (rung 98, the paced ring on one block an SM, reaches 84.8% alone at 17408x5120
  // against 98% on two). pace_span1x2, pace_span2x2 (the same day): two blocks an SM, each half the ring (3 stages at
  // k = 6144), kPace1's consumers an SM. Predicted: the stacked part at kPace1's rate after the barrier. Measured (H100,
  // reports/h100/run-span): pace_out1's bits; 36.0 / 36.8 us a layer, 1.8468 / 1.8813 ms per token (x0.774 / x0.759); traced,
  // span1x2 ends 31.0 us after the gated norm. Negative results, kept.
  t.pace_span1x2 = t.pace_span2x2 = t.pace_out1;
  t.pace_span1x2.span = 1;
  t.pace_span2x2.span = 2;
  t.pace_span1x2.span_per_sm = t.pace_span2x2.span_per_sm = 2;
  return t;
}

std::string config_error(const FusedStepConfig& c, const rg::Geometry& g) {
  if (!c.stacked_kernel.empty()) {
    if (!c.merged_in) return "a kernel of its own for the stacked launch (" + c.stacked_kernel + ") without the stacked input projections";
    const auto& own = q4_gemv::q4_kernel(c.stacked_kernel);
    if (c.f32) return "a q4 kernel for the stacked launch (" + c.stacked_kernel + ") on the f32 tier";
    if (!own.layout) return c.stacked_kernel + " reads the raw layout: the stacked launch's own kernel is a map=packed one (its copy is packed in its layout)";
  }
  if (!c.recurrence.empty())
    if (auto why = GdnDevice::recurrence_error(gdn_recurrence::recurrence_kernel(c.recurrence), g); !why.empty())
      return c.recurrence + ": " + why;
  if (c.merged_in)
    if (auto why = GdnDevice::merged_in_error(g); !why.empty()) return why;
  if (c.f32)
    if (auto why = GdnDevice::f32_stacked_error(c.fold_ba, c.fold_ba_main, c.merged_in, !c.stacked_kernel.empty(), f32_kernel_of(c)); !why.empty())
      return "the f32 tier: " + why;
  if (c.norm_q8)
    if (auto why = GdnDevice::norm_q8_error(c.f32 ? nullptr : &q4_gemv::q4_kernel(c.q4_kernel),
                                            c.recurrence.empty() ? nullptr : &gdn_recurrence::recurrence_kernel(c.recurrence), g);
        !why.empty())
      return why;
  if (c.f32 && c.fold_ba_conv) return "fold=ba-conv (b|a in the conv_norm_bg launch) on the f32 tier: it is the q4 tier's";
  if (!c.f32 && (c.fold_ba || c.fold_ba_main || c.fold_ba_conv)) {  // the f32 tier's: f32_stacked_error above
    const q4_gemv::Q4Kernel& stacked = q4_gemv::q4_kernel(c.stacked_kernel.empty() ? c.q4_kernel : c.stacked_kernel);
    if (auto why = GdnDevice::fold_ba_error(c.fold_ba, c.fold_ba_main, c.merged_in, &stacked, c.ba.empty() ? kDefaultF32Variant : c.ba, c.chain, g);
        !why.empty())
      return why;
    if (auto why = GdnDevice::fold_ba_conv_error(c.fold_ba_conv, c.fold_ba || c.fold_ba_main, c.merged_in, &stacked, true,
                                                 c.recurrence.empty() ? nullptr : &gdn_recurrence::recurrence_kernel(c.recurrence), c.l2_prefetch,
                                                 c.chain, g);
        !why.empty())
      return why;
  }
  if (!c.f32_kernel.empty()) {
    if (!c.f32) return "an f32 kernel for the big three (" + c.f32_kernel + ") on the q4 tier";
    if (const auto& k = f32_gemv::f32_kernel(c.f32_kernel); k.can_implement)
      for (auto [m, n, what] : {std::tuple{g.conv_dim(), g.hidden, "in_proj_qkv"}, {g.value_dim(), g.hidden, "in_proj_z"}, {g.hidden, g.value_dim(), "out_proj"}})
        if (auto why = k.can_implement(m, n); !why.empty())
          return c.f32_kernel + " (" + what + ", " + std::to_string(m) + " x " + std::to_string(n) + "): " + why;
  }
  if (auto why = GdnDevice::l2_prefetch_error(c.l2_prefetch, true, c.f32 ? nullptr : &q4_gemv::q4_kernel(c.q4_kernel)); !why.empty()) return why;
  if (auto why = GdnDevice::conv_prep_error(c.recurrence.empty() ? nullptr : &gdn_recurrence::recurrence_kernel(c.recurrence), true, c.l2_prefetch);
      !why.empty())
    return why;
  if (auto why = GdnDevice::fork_z_error(c.fork_z, c.merged_in, c.f32 ? nullptr : &q4_gemv::q4_kernel(c.q4_kernel),
                                         c.stacked_kernel.empty() ? nullptr : &q4_gemv::q4_kernel(c.stacked_kernel));
      !why.empty())
    return why;
  if (!c.ba.empty())
    if (const auto& k = f32_gemv::f32_kernel(c.ba); k.can_implement)
      if (auto why = k.can_implement(2 * std::int64_t(g.nv), g.hidden); !why.empty())
        return c.ba + " (b|a, " + std::to_string(2 * g.nv) + " x " + std::to_string(g.hidden) + "): " + why;
  if (c.span != 0) {
    if (c.f32) return "span=" + std::to_string(c.span) + " on the f32 tier: it is the q4 tier's";
    const q4_gemv::Q4Kernel& out = q4_gemv::q4_kernel(c.q4_kernel);
    if (auto why = GdnDevice::span_error(c.span, c.span_per_sm, c.norm_q8, c.chain, c.merged_in, c.fold_ba, c.fork_z, &out,
                                         &q4_gemv::q4_kernel(c.stacked_kernel.empty() ? c.q4_kernel : c.stacked_kernel), g);
        !why.empty())
      return why;
  }
  return "";
}

void apply(const FusedStepConfig& c, GdnDevice& dev) {
  if (c.f32) dev.set_f32_variant(f32_kernel_of(c));
  else dev.set_q4_variant(c.q4_kernel);
  dev.set_fused_prep(true);
  if (!c.recurrence.empty()) dev.set_recurrence_variant(c.recurrence);
  if (!c.ba.empty()) dev.set_ba_variant(c.ba);
  dev.set_pdl_chain(c.chain);
  dev.set_merged_in(c.merged_in);
  dev.set_stacked_q4_variant(c.stacked_kernel);
  dev.set_norm_q8(c.norm_q8);
  dev.set_fold_ba(c.fold_ba);
  dev.set_fold_ba_main(c.fold_ba_main);
  dev.set_l2_prefetch(c.l2_prefetch);
  dev.set_fork_z(c.fork_z);
  dev.set_fold_ba_conv(c.fold_ba_conv);
  dev.set_span(c.span, c.span_per_sm);
}

namespace {
// A variant name's axes as one axis value: "gdn_recurrence/impl=fused,cols=16" -> "impl=fused+cols=16".
std::string rec_value(const std::string& rec) {
  std::string v = rec.substr(rec.find('/') + 1);
  std::replace(v.begin(), v.end(), ',', '+');
  return v;
}

std::vector<std::pair<std::string, std::string>> fused_step_axes(const FusedStepConfig& c) {
  std::vector<std::pair<std::string, std::string>> axes{{"tier", c.f32 ? "f32" : "q4"}};
  if (!c.f32) axes.push_back({"proj", axes_value(q4_gemv::q4_kernel(c.q4_kernel))});
  if (c.f32 && !c.f32_kernel.empty()) axes.push_back({"proj", rec_value(c.f32_kernel)});
  if (c.merged_in) axes.push_back({"in", "qkvz"});
  if (!c.stacked_kernel.empty()) axes.push_back({"in_proj", axes_value(q4_gemv::q4_kernel(c.stacked_kernel))});
  axes.push_back({"prep", "fused"});
  if (!c.recurrence.empty()) axes.push_back({"rec", rec_value(c.recurrence)});
  if (!c.ba.empty()) axes.push_back({"ba", rec_value(c.ba)});
  if (c.chain) axes.push_back({"chain", "pdl"});
  if (c.norm_q8) axes.push_back({"out", "prepared"});
  if (c.fold_ba) axes.push_back({"fold", "ba"});
  if (c.fold_ba_main) axes.push_back({"fold", "ba-main"});
  if (c.fold_ba_conv) axes.push_back({"fold", "ba-conv"});
  if (c.l2_prefetch != kernels::L2Prefetch::none) axes.push_back({"pf", c.l2_prefetch == kernels::L2Prefetch::after ? "out" : "out-early"});
  if (c.fork_z) axes.push_back({"fork", "z"});
  if (c.span > 0) axes.push_back({"span", std::to_string(c.span) + (c.span_per_sm != 1 ? "x" + std::to_string(c.span_per_sm) : "")});
  return axes;
}

}  // namespace

std::string fused_step_variant(const FusedStepConfig& c) { return variant_name("gdn_step", fused_step_axes(c)); }

std::string q4_step_variant(const std::string& q4_variant) {
  return variant_name("gdn_step", {{"tier", "q4"}, {"proj", axes_value(q4_gemv::q4_kernel(q4_variant))}});
}

void register_all(Registry& r) {
  r.add(make_step_op());
  // The GDN tiers keep the f32 GDN tier's 1e-4 (three mat-vecs and a recurrence in f32 against f64).
  // A q4 kernel that rounds x on purpose (f16x2, q8 activations) brings its per-mat-vec tolerance
  // three times over: three rounded mat-vecs lie on the path to out (qkv and z into onn, then out_proj).
  // Measured on the H200, 2026-12-01 (gpu suite, small geometry, student-t inputs, seed 2): the q8
  // forms reach max_rel 0.064 on onn against 0.05 per mat-vec (reports/h200/gdn-recurrence-trial/gpu.log).
  auto variant = [](std::vector<std::pair<std::string, std::string>> axes, StepConfig c, std::string desc, double tol) {
    Variant v;
    v.op = "gdn_step";
    v.axes = std::move(axes);
    v.name = variant_name(v.op, v.axes);
    v.description = std::move(desc);
    v.tolerance = tol;
    v.can_implement = [c](const Problem& p) { return can_step(p, c); };
    v.make = [c](const klab::Workload& w) -> std::unique_ptr<Instance> { return std::make_unique<StepInstance>(step_workload_of(w), c); };
    return v;
  };
  r.add(variant({{"tier", "f32"}}, StepConfig{}, "the f32 tier: the big three as f32 warp-row mat-vecs, one device-resident run of T tokens", 1e-4));
  for (const auto& k : q4_gemv::q4_kernels())
    r.add(variant({{"tier", "q4"}, {"proj", axes_value(k)}}, StepConfig{.q4 = true, .q4_kernel = k.name},
                  "the q4 tier, its big three on " + k.name + ", one device-resident run of T tokens", std::max(1e-4, 3 * k.tolerance)));
  r.add(variant({{"tier", "q4"}, {"api", "host"}}, StepConfig{.q4 = true, .q4_kernel = kDefaultQ4Variant, .api = "host"},
                std::string("the q4 tier on ") + kDefaultQ4Variant + " through the host-facing step(): a copy in, a copy out and a sync per token", 1e-4));
  r.add(variant({{"tier", "f32"}, {"api", "host"}}, StepConfig{.api = "host"},
                "the f32 tier through the host-facing step(): a copy in, a copy out and a sync per token", 1e-4));
  r.add(variant({{"tier", "f32"}, {"api", "run"}}, StepConfig{.api = "run"},
                "the f32 tier through GdnDevice::run: one copy in, T steps, one copy out, one sync", 1e-4));
  // prep=fused (GdnDevice::set_fused_prep, issue 14): beta/g, conv + SiLU and the q/k norm as one
  // launch, the same bits as the three (experiment gdn-step-fused), on the f32 tier, the default q4
  // kernel and the fastest q4 kernel measured inside the step (reports/h200, gdn-q4-layer, stream mode:
  // grid=groups,xprep=launch,q8-dp4a,rows=8, 0.0514 ms per layer and token); rec=: the recurrence by
  // its gdn_recurrence name ('+' for ',' as in proj=), the step's default (seed) otherwise.
  for (const auto& c : fused_step_configs()) {
    const double tol = c.f32 ? 1e-4 : std::max(1e-4, 3 * q4_gemv::q4_kernel(c.q4_kernel).tolerance);
    const gdn_recurrence::RecurrenceKernel* rk = c.recurrence.empty() ? nullptr : &gdn_recurrence::recurrence_kernel(c.recurrence);
    const bool conv_rec = rk && rk->conv_prep;
    const std::string conv_what =
        rk && rk->hist_ring ? std::string(" with beta/g, conv + SiLU and the q/k norm inside the recurrence (no conv_norm_bg launch), the conv history a ring it "
                                          "writes itself (nothing shifts it)") +
                                  (rk->gated_norm ? ", the gated norm by its last blocks: four launches a layer" : "")
                            : " with beta/g, conv + SiLU and the q/k norm inside the recurrence (no conv_norm_bg launch; the gated norm shifts the conv history)";
    r.add(variant(fused_step_axes(c), StepConfig{.q4 = !c.f32, .q4_kernel = c.q4_kernel, .fused = c},
                  std::string(c.f32 ? "the f32 tier" + (c.f32_kernel.empty() ? std::string() : " on " + c.f32_kernel) : "the q4 tier on " + c.q4_kernel) +
                      (conv_rec ? conv_what : " with beta/g, conv + SiLU and the q/k norm as one launch") +
                      (c.recurrence.empty() ? std::string() : ", the recurrence " + c.recurrence) + (c.ba.empty() ? std::string() : ", b|a on " + c.ba) +
                      (c.chain ? ", the small kernels in the PDL chain" : "") + (c.merged_in ? ", in_proj_qkv and in_proj_z as one launch" : "") +
                      (c.stacked_kernel.empty() ? std::string() : " on " + c.stacked_kernel) +
                      (c.fork_z ? ", in_proj_z forked beside conv_norm_bg and the recurrence" : "") +
                      (c.fold_ba_conv ? ", b|a's rows in the conv_norm_bg launch" : "") + ", one device-resident run of T tokens",
                  tol));
  }
}

}  // namespace klab::gdn
