// The GDN decode step as a device object: state, weights, intermediates and the one step body.
#include "gdn/gdn_device.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <stdexcept>

#include "f32_gemv/kernels.hpp"
#include "gdn/gdn_kernels.hpp"
#include "gdn_recurrence/hist_ring.hpp"
#include "klab/error.hpp"
#include "q4_gemm/gemm.hpp"
#include "q4_gemm/op.hpp"
#include "q4_gemv/prepared_x.cuh"
#include "q4_gemv/q4_gemv.hpp"
#include "q4_gemv/span.hpp"

namespace klab::gdn {

namespace {
// The value of axis `name` of a kernel's axes ("" when it has none).
std::string axis_of(const std::vector<std::pair<std::string, std::string>>& axes, const char* name) {
  for (const auto& [a, v] : axes)
    if (a == name) return v;
  return "";
}
constexpr std::size_t kF = sizeof(float);

std::string layer_str(int layer) { return "layer " + std::to_string(layer); }

std::int64_t S_count(const Geometry& g) { return std::int64_t(g.nv) * g.dk * g.dv; }
std::int64_t hist_count(const Geometry& g) { return std::int64_t(g.ck - 1) * g.conv_dim(); }

void check_state_sizes(const Geometry& g, std::size_t s, std::size_t hist, const char* who) {
  require(std::int64_t(s) == S_count(g), std::string(who) + ": S has " + std::to_string(s) + " elements, geometry " + g.str() + " needs nv*dk*dv = " +
                                              std::to_string(S_count(g)));
  require(std::int64_t(hist) == hist_count(g), std::string(who) + ": hist has " + std::to_string(hist) + " elements, geometry " + g.str() +
                                                   " needs (ck-1)*conv_dim = " + std::to_string(hist_count(g)));
}
}  // namespace

ref::gdn::State to_ref(const HostState& s) {
  check_state_sizes(s.g, s.S.size(), s.hist.size(), "to_ref");
  ref::gdn::State st;
  st.S.assign(s.S.begin(), s.S.end());
  st.hist.assign(s.hist.begin(), s.hist.end());
  return st;
}

HostState from_ref(const Geometry& g, const ref::gdn::State& s) {
  check_state_sizes(g, s.S.size(), s.hist.size(), "from_ref");
  HostState h;
  h.g = g;
  h.S.reserve(s.S.size());
  for (double v : s.S) h.S.push_back(static_cast<float>(v));
  h.hist.reserve(s.hist.size());
  for (double v : s.hist) h.hist.push_back(static_cast<float>(v));
  return h;
}

// Weights and the intermediates of the last step of one loaded layer.
struct GdnDevice::Layer {
  enum class Tier { none, f32, q4 };
  Tier tier = Tier::none;                              // which the big three are (none: not loaded)
  Q4Bindings q4{};                                     // tier q4: what each of the big three is bound to
  Q4Keys keys{};
  std::unique_ptr<Projection> qkv, z, out;             // the big three: (conv_dim, hidden), (nv*dv, hidden), (hidden, nv*dv)
  DeviceBuffer<float> w_ba;                            // (2 nv, hidden): w_b rows, then w_a rows (always f32)
  DeviceBuffer<float> a_log, dt_bias, conv_w, norm_w;  // (nv), (nv), (conv_dim, ck), (dv)
  // xc (conv_dim) and zv (nv*dv) are views into one buffer xcz, zv right after xc (at conv_dim
  // rounded up to 4 floats: 16-byte aligned), so one launch can write both (set_merged_in).
  struct View {
    float* p = nullptr;
    float* get() const { return p; }
  };
  DeviceBuffer<float> xcz;
  View xc, zv;
  DeviceBuffer<float> xcv, q, k, ba, beta, g, on, onn, out_y;
  // set_merged_in: W_qkv's rows, then W_z's, as one q4 matrix (conv_dim + nv*dv, hidden), in the stacked
  // launch's layout (stacked_layout(): its own kernel's, else the q4 kernel's; packed, `layout` naming it) or raw
  // (codes, scales) for a kernel without one; empty otherwise.
  struct Stacked {
    DeviceBuffer<std::uint8_t> codes, packed;
    DeviceBuffer<std::uint16_t> scales;
    const q4_gemv::Q4Layout* layout = nullptr;
  } in;
};

namespace {
// Where zv starts inside xcz (floats).
std::int64_t zv_offset(const Geometry& g) { return (g.conv_dim() + 3) / 4 * 4; }

// A q4 layer's projection p as the q4 kernel's packed layout holds it (what launch_prepared and the L2
// prefetch read); an internal error when the pool holds it in another layout or not packed.
Q4Pool::Tensor packed_of(const Q4Pool& pool, const q4_gemv::Q4Kernel& k, const Q4Bindings& b, BigProj p, const std::string& who) {
  const Q4Pool::Tensor t = pool.resolve(b[std::size_t(p)], std::string("q4 ") + to_string(p) + " (" + who + ")");
  if (pool.layout() != k.layout || t.packed == nullptr)
    throw Error("GdnDevice: internal: " + std::string(to_string(p)) + "'s tensor is not in " + (k.layout ? k.layout->name : std::string("a packed layout")) +
                " (" + who + ")");
  return t;
}
}  // namespace

std::string GdnDevice::can_implement(const Geometry& g, int nl, int slots) {
  // Checked here, before Geometry::validate, so that no int product below can overflow.
  if (g.hidden <= 0 || g.nk <= 0 || g.nv <= 0 || g.dk <= 0 || g.dv <= 0 || g.ck <= 0)
    return "geometry " + g.str() + ": every size must be positive";
  const std::int64_t conv_dim = 2 * std::int64_t(g.nk) * g.dk + std::int64_t(g.nv) * g.dv;
  if (conv_dim > INT_MAX) return "geometry " + g.str() + ": conv_dim = 2*nk*dk + nv*dv = " + std::to_string(conv_dim) + " exceeds 2^31-1";
  if (std::string why = g.validate(); !why.empty()) return "geometry " + g.str() + ": " + why;
  if (nl < 1) return "nl = " + std::to_string(nl) + ": at least one layer";
  if (slots < 1) return "slots = " + std::to_string(slots) + ": at least one state slot";
  // The recurrence tiles the value columns 32 per block along grid y (at most 65535 blocks).
  if (g.dv > 65535 * 32) return "geometry " + g.str() + ": dv = " + std::to_string(g.dv) + " exceeds the recurrence grid (65535*32 columns)";
  // Nothing else: the q/k norm and the gated norm reduce with a block-strided loop and a
  // warp-shuffle tree, so neither dk nor dv is limited by a block size or shared memory, and dv need
  // not be a power of two (the seed's limits, kd <= 1024 and a power-of-two vd, do not apply).
  return "";
}

GdnDevice::GdnDevice(const Geometry& g, int nl, int slots) : g_(g), nl_(nl), slots_(slots) {
  if (std::string why = can_implement(g, nl, slots); !why.empty()) throw Error("GdnDevice: " + why);
  layers_.resize(std::size_t(nl));
  // The history of a layer and slot keeps ck frames: the ck-1 of the state, and the one a hist=ring
  // recurrence writes (hist_ring.hpp); its position and ticket beside it.
  const std::int64_t s_elems = std::int64_t(slots) * nl * S_count(g), h_elems = std::int64_t(slots) * nl * g.ck * g.conv_dim();
  try {
    S_ = DeviceBuffer<float>(std::size_t(s_elems));
    hist_ = DeviceBuffer<float>(std::size_t(h_elems));
    hist_ring_ = DeviceBuffer<int>(std::size_t(slots) * std::size_t(nl) * 2);
  } catch (const CudaError& e) {
    if (e.code != cudaErrorMemoryAllocation) throw;
    cudaGetLastError();  // an allocation failure is not sticky; clear it for the caller
    throw Error("GdnDevice: the state of " + std::to_string(nl) + " layers x " + std::to_string(slots) + " slots (" +
                std::to_string(double(s_elems + h_elems) * kF / 1e6) + " MB) does not fit on the device: " + e.what());
  }
  q4_ = std::make_unique<Q4Tier>();
  q4_->kernel = &q4_kernel_by_name(kDefaultQ4Variant);
  set_recurrence_variant(kDefaultRecurrence);
  h_in_ = DeviceBuffer<float>(std::size_t(g.hidden));
  if (S_.size()) KLAB_CUDA(cudaMemset(S_.get(), 0, S_.bytes()));
  if (hist_.size()) KLAB_CUDA(cudaMemset(hist_.get(), 0, hist_.bytes()));
  KLAB_CUDA(cudaMemset(hist_ring_.get(), 0, hist_ring_.bytes()));  // position 0: the shifted form
  // cudaMemset runs on the legacy default stream and may return before it finishes; a non-blocking
  // stream (set_stream) would not wait for it. Finish here, once.
  KLAB_CUDA(cudaDeviceSynchronize());
}

// enqueue_batch's scratch for `cap` slots (batch_scratch(g, cap) sizes each tensor).
struct GdnDevice::Batch {
  int cap = 0;
  DeviceBuffer<float> xc, xcv, z, q, k, ba, beta, g, o, onn;
  DeviceBuffer<std::uint8_t> workspace;
};

// set_fork_z's second stream and its two events (no timing: they only order work).
struct GdnDevice::Branch {
  cudaStream_t side = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
  Branch() {
    KLAB_CUDA(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    KLAB_CUDA(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    KLAB_CUDA(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  }
  ~Branch() {
    if (join) cudaEventDestroy(join);
    if (fork) cudaEventDestroy(fork);
    if (side) cudaStreamDestroy(side);
  }
  Branch(const Branch&) = delete;
  Branch& operator=(const Branch&) = delete;
};

GdnDevice::~GdnDevice() = default;

void GdnDevice::set_fork_z(bool on) {
  if (on && !branch_) branch_ = std::make_unique<Branch>();
  fork_z_ = on;
}

std::string GdnDevice::fork_z_error(bool fork, bool merged_in, const q4_gemv::Q4Kernel* k, const q4_gemv::Q4Kernel* stacked) {
  if (!fork) return "";
  const std::string what = "fork=z (set_fork_z: in_proj_z on a branch of its own) ";
  if (!merged_in) return what + "splits z off the stacked input projections: it needs them (set_merged_in, in=qkvz)";
  if (!k) return "";  // the f32 tier: f32_stacked_error
  if (!k->launch_prepared)
    return what + "runs z on the q8 x the stacked launch's prep wrote: it needs a q4 variant that takes its x prepared "
                  "(grid=groups,xprep=launch|warps,dot=q8-dp4a), not " + k->name;
  if (stacked && stacked != k) return what + "needs the stacked launch on the q4 variant itself (its prep writes the x z reads), not " + stacked->name;
  return "";
}

std::int64_t GdnDevice::S_per_layer() const { return S_count(g_); }
std::int64_t GdnDevice::hist_per_layer() const { return hist_count(g_); }
float* GdnDevice::S_of(int layer, int slot) const { return S_.get() + (std::int64_t(slot) * nl_ + layer) * S_per_layer(); }
std::int64_t GdnDevice::hist_stride() const { return std::int64_t(g_.ck) * g_.conv_dim(); }
float* GdnDevice::hist_of(int layer, int slot) const { return hist_.get() + (std::int64_t(slot) * nl_ + layer) * hist_stride(); }
int* GdnDevice::hist_ring_of(int layer, int slot) const { return hist_ring_.get() + (std::int64_t(slot) * nl_ + layer) * 2; }

int GdnDevice::hist_position(int layer, int slot) const {
  int pos = 0;
  KLAB_CUDA(cudaMemcpyAsync(&pos, hist_ring_of(layer, slot), sizeof pos, cudaMemcpyDeviceToHost, stream_));
  KLAB_CUDA(cudaStreamSynchronize(stream_));
  require(pos >= 0 && pos < std::max(1, g_.ck), "GdnDevice: internal: " + layer_str(layer) + " slot " + std::to_string(slot) + ": the conv history's ring position " +
                                                     std::to_string(pos) + " is outside [0, ck)");
  return pos;
}

void GdnDevice::copy_hist_out(int layer, int slot, int pos, float* dst) const {
  const std::size_t frame = std::size_t(g_.conv_dim());
  for (int j = 0; j + 1 < g_.ck; ++j)  // logical frame j (0 the oldest) from physical ring_frame(pos, j, ck)
    KLAB_CUDA(cudaMemcpyAsync(dst + std::size_t(j) * frame, hist_of(layer, slot) + std::size_t(gdn_recurrence::ring_frame(pos, j, g_.ck)) * frame,
                              frame * kF, cudaMemcpyDeviceToHost, stream_));
  KLAB_CUDA(cudaStreamSynchronize(stream_));
}

void GdnDevice::unring_histories() {
  std::vector<float> h(static_cast<std::size_t>(hist_per_layer()));
  for (int slot = 0; slot < slots_; ++slot)
    for (int layer = 0; layer < nl_; ++layer) {
      const int pos = hist_position(layer, slot);
      if (pos == 0) continue;
      copy_hist_out(layer, slot, pos, h.data());
      KLAB_CUDA(cudaMemcpyAsync(hist_of(layer, slot), h.data(), h.size() * kF, cudaMemcpyHostToDevice, stream_));
      KLAB_CUDA(cudaMemsetAsync(hist_ring_of(layer, slot), 0, 2 * sizeof(int), stream_));
      KLAB_CUDA(cudaStreamSynchronize(stream_));
    }
}

void GdnDevice::check_layer(int layer, const char* what) const {
  require(layer >= 0 && layer < nl_, std::string("GdnDevice::") + what + ": " + layer_str(layer) + " out of range (layers 0.." + std::to_string(nl_ - 1) + ")");
}
void GdnDevice::check_slot(int slot, const char* what) const {
  require(slot >= 0 && slot < slots_, std::string("GdnDevice::") + what + ": slot " + std::to_string(slot) + " out of range (slots 0.." + std::to_string(slots_ - 1) + ")");
}
const GdnDevice::Layer& GdnDevice::hit(int layer, const char* what) const {
  check_layer(layer, what);
  require(layers_[std::size_t(layer)] != nullptr, std::string("GdnDevice::") + what + ": " + layer_str(layer) + " was never loaded (load_f32 or load_q4 it first)");
  return *layers_[std::size_t(layer)];
}

const GdnDevice::Layer& GdnDevice::ready(int layer, const char* what) const {
  const Layer& L = hit(layer, what);
  const std::string who = std::string("GdnDevice::") + what + ": " + layer_str(layer);
  require(L.tier != Layer::Tier::none, who + " has no big projections (load_f32 or use_q4 first)");
  if (L.tier == Layer::Tier::q4) {
    // No silent fallback: every binding must still name the tensor use_q4 bound, checked before
    // anything is enqueued (Q4Projection::enqueue checks again).
    for (BigProj p : {BigProj::qkv, BigProj::z, BigProj::out}) q4_->pool.resolve(L.q4[std::size_t(p)], who + " is on the q4 tier, but its " + to_string(p));
    require(q4_->kernel != nullptr, who + ": no q4 kernel chosen");
  }
  return L;
}

bool GdnDevice::loaded(int layer) const { return layer >= 0 && layer < nl_ && layers_[std::size_t(layer)] != nullptr; }

std::string GdnDevice::tier(int layer) const {
  if (!loaded(layer)) return "";
  switch (layers_[std::size_t(layer)]->tier) {
    case Layer::Tier::f32: return "f32";
    case Layer::Tier::q4: return "q4";
    case Layer::Tier::none: break;
  }
  return "";
}

std::optional<Q4Keys> GdnDevice::q4_keys(int layer) const {
  if (tier(layer) != "q4") return std::nullopt;
  return layers_[std::size_t(layer)]->keys;
}

std::string GdnDevice::describe(int layer) const {
  const std::string t = tier(layer);
  if (t.empty()) return "";
  const Layer& L = *layers_[std::size_t(layer)];
  if (t == "f32") return L.qkv->describe();
  return "q4/" + q4_variant() + " keys " + L.keys.str();
}

void GdnDevice::set_q4_variant(const std::string& variant) {
  const q4_gemv::Q4Kernel& k = q4_kernel_by_name(variant);  // an unknown name throws here, nothing changed
  const q4_gemv::Q4Layout* before = stacked_layout();
  q4_->pool.use_layout(k.layout);  // a kernel with a layout of its own (map=packed) reads packed copies
  q4_->kernel = &k;
  if (merged_in_ && stacked_layout() != before) stack_all_in_proj();  // the stacked copies follow the stacked launch's layout
}
const q4_gemv::Q4Kernel* GdnDevice::stacked_launch_kernel() const { return stacked_kernel_ ? stacked_kernel_ : (q4_ ? q4_->kernel : nullptr); }
const q4_gemv::Q4Layout* GdnDevice::stacked_layout() const { return stacked_launch_kernel()->layout; }

std::string GdnDevice::merged_in_error(const Geometry& g) {
  if (g.conv_dim() % 4 != 0)
    return "the stacked input projections (set_merged_in) write xc and z as one output, which needs conv_dim % 4 == 0 (z 16-byte aligned); "
           "geometry " + g.str() + " has conv_dim " + std::to_string(g.conv_dim());
  return "";
}

void GdnDevice::set_merged_in(bool on) {
  if (on) require(merged_in_error(g_).empty(), "GdnDevice::set_merged_in: " + merged_in_error(g_));
  if (on == merged_in_) return;  // the layers' stacked copies are as they should be (use_q4 stacks each new one)
  merged_in_ = on;
  if (on) {
    stack_all_in_proj();
  } else {
    KLAB_CUDA(cudaDeviceSynchronize());  // no enqueued step still reads a copy freed here
    for (auto& L : layers_)
      if (L) L->in = {};
  }
}

void GdnDevice::set_stacked_q4_variant(const std::string& variant) {
  const q4_gemv::Q4Kernel* k = nullptr;
  if (!variant.empty()) {
    k = &q4_kernel_by_name(variant);  // an unknown name throws here, nothing changed
    require(k->layout != nullptr, "GdnDevice::set_stacked_q4_variant: " + variant +
                                      " reads the raw layout: the stacked launch's own kernel is a map=packed one (its copy is packed in its layout)");
  }
  const q4_gemv::Q4Layout* before = stacked_layout();
  stacked_kernel_ = k;
  if (merged_in_ && stacked_layout() != before) stack_all_in_proj();  // the stacked copies follow the stacked launch's layout
}
std::string GdnDevice::stacked_q4_variant() const { return stacked_kernel_ ? stacked_kernel_->name : ""; }

void GdnDevice::stack_all_in_proj() {
  KLAB_CUDA(cudaDeviceSynchronize());  // no enqueued step still reads a copy replaced here
  for (auto& L : layers_)
    if (L && L->tier == Layer::Tier::q4) stack_in_proj(*L);
}

void GdnDevice::stack_in_proj(Layer& L) {
  const std::int64_t H = g_.hidden, C = g_.conv_dim(), V = g_.value_dim(), rows = C + V;
  const Q4Pool::Tensor qkv = q4_->pool.resolve(L.q4[std::size_t(BigProj::qkv)], "GdnDevice::set_merged_in: in_proj_qkv");
  const Q4Pool::Tensor z = q4_->pool.resolve(L.q4[std::size_t(BigProj::z)], "GdnDevice::set_merged_in: in_proj_z");
  // Raw (rows, H/2) codes and (rows, H/32) scales are row-major: stacking the matrices is stacking the buffers.
  Layer::Stacked st;
  st.codes = DeviceBuffer<std::uint8_t>(std::size_t(rows * H / 2));
  st.scales = DeviceBuffer<std::uint16_t>(std::size_t(rows * H / 32));
  KLAB_CUDA(cudaMemcpy(st.codes.get(), qkv.codes, std::size_t(C * H / 2), cudaMemcpyDeviceToDevice));
  KLAB_CUDA(cudaMemcpy(st.codes.get() + C * H / 2, z.codes, std::size_t(V * H / 2), cudaMemcpyDeviceToDevice));
  KLAB_CUDA(cudaMemcpy(st.scales.get(), qkv.scales, std::size_t(C * H / 32) * 2, cudaMemcpyDeviceToDevice));
  KLAB_CUDA(cudaMemcpy(st.scales.get() + C * H / 32, z.scales, std::size_t(V * H / 32) * 2, cudaMemcpyDeviceToDevice));
  if (const q4_gemv::Q4Layout* layout = stacked_layout()) {
    st.layout = layout;
    st.packed = DeviceBuffer<std::uint8_t>(layout->bytes(rows, H));
    layout->pack_device(st.codes.get(), st.scales.get(), int(rows), int(H), st.packed.get(), nullptr);
    KLAB_CUDA(cudaDeviceSynchronize());
    st.codes = DeviceBuffer<std::uint8_t>();  // the kernel reads the packed copy alone
    st.scales = DeviceBuffer<std::uint16_t>();
  } else {
    KLAB_CUDA(cudaDeviceSynchronize());
  }
  L.in = std::move(st);
}
std::string GdnDevice::q4_variant() const { return q4_->kernel ? q4_->kernel->name : ""; }

namespace {
// The recurrence arguments of one layer and slot: the step's normalised q and k, v the value part of
// xcv, dense (batch 1).
gdn_recurrence::RecurrenceArgs rec_args(const Geometry& g, const float* q, const float* k, const float* xcv, const float* g_, const float* beta,
                                        float* S, float* o) {
  gdn_recurrence::RecurrenceArgs a;
  a.q = q;
  a.k = k;
  a.v = xcv + 2 * std::size_t(g.nk) * std::size_t(g.dk);
  a.g = g_;
  a.beta = beta;
  a.S = S;
  a.o = o;
  a.nk = g.nk, a.nv = g.nv, a.dk = g.dk, a.dv = g.dv, a.batch = 1;
  a.normalize_qk = false;
  return a;
}
}  // namespace

std::string GdnDevice::recurrence_error(const gdn_recurrence::RecurrenceKernel& k, const Geometry& g) {
  gdn_recurrence::RecurrenceArgs probe = rec_args(g, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  static float epilogue[4];
  if (k.gated_norm) probe.onn = epilogue;  // the step asks a kernel with the epilogue for it; can_implement reads only its presence
  return k.can_implement(probe);
}

void GdnDevice::set_recurrence_variant(const std::string& variant) {
  const auto& k = gdn_recurrence::recurrence_kernel(variant);  // an unknown name throws here, nothing changed
  if (auto why = recurrence_error(k, g_); !why.empty()) throw Error("GdnDevice::set_recurrence_variant: " + variant + ": " + why);
  const gdn_recurrence::RecurrenceArgs probe = rec_args(g_, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  require(k.workspace_floats(probe) == 0, "GdnDevice::set_recurrence_variant: " + variant + " needs a workspace with the step's normalised q and k");
  require(!k.state_bf16, "GdnDevice::set_recurrence_variant: " + variant + " keeps S in bf16; the step's state is f32 (a bf16 state is a research axis of the op gdn_recurrence: gdn-state-drift)");
  // Leaving a hist=ring recurrence: every history back in the shifted form (position 0) that the others read.
  if (rec_ && rec_->hist_ring && !k.hist_ring) unring_histories();
  if (k.counts && !rec_count_.size()) {  // norm=last's per-head counts: zero, and left zero by every launch
    rec_count_ = DeviceBuffer<int>(std::size_t(g_.nv) * std::size_t(std::max<std::int64_t>(slots_, q4_gemm::kMaxCols)));
    KLAB_CUDA(cudaMemset(rec_count_.get(), 0, rec_count_.bytes()));
    KLAB_CUDA(cudaDeviceSynchronize());
  }
  rec_ = &k;
}
std::string GdnDevice::recurrence_variant() const { return rec_ ? rec_->name : ""; }

std::string GdnDevice::conv_prep_error(const gdn_recurrence::RecurrenceKernel* rec, bool fused_prep, kernels::L2Prefetch pf) {
  if (!rec || !rec->conv_prep) return "";
  const std::string what = "the recurrence " + rec->name + " forms the conv, the q/k norm and beta/g itself (prep=conv) ";
  if (!fused_prep) return what + "in the fused prep's place: it needs set_fused_prep(true), whose conv_norm_bg launch it replaces";
  if (rec->gated_norm && !rec->hist_ring)
    return what + "and leaves the conv history's shift to the gated-norm launch: not with the gated norm as its epilogue (hist=ring shifts nothing)";
  if (pf != kernels::L2Prefetch::none) return what + "without conv_norm_bg's launch, which issues pf=out (set_l2_prefetch): one of the two";
  return "";
}
std::string GdnDevice::conv_prep_error() const { return conv_prep_error(rec_, fused_prep_, l2_prefetch_); }

std::string GdnDevice::chain_error() const {
  if (!pdl_chain_) return "";
  if (!fused_prep_) return "the PDL chain (set_pdl_chain) needs the fused prep (set_fused_prep): beta_g, conv_silu and qk_norm launch plainly";
  if (rec_->state_before_wait)
    return "the PDL chain (set_pdl_chain) cannot take " + rec_->name +
           ": it loads S before its wait, which a chain whose kernels let their dependents go early cannot make safe (its pdl=early twin loads "
           "nothing before the wait)";
  return "";
}

void GdnDevice::set_norm_q8(bool on) {
  if (on) {
    if (auto why = kernels::gated_norm_q8_error(g_.nv, g_.dv); !why.empty()) throw Error("GdnDevice::set_norm_q8: " + why);
    xq_ = q4_gemv::prepared_x();
  }
  norm_q8_ = on;
}

std::string GdnDevice::norm_q8_error(const q4_gemv::Q4Kernel* k, const gdn_recurrence::RecurrenceKernel* rec, const Geometry& g) {
  const std::string what = "out=prepared (set_norm_q8: out_proj without its prep launch) ";
  if (!k || !k->launch_prepared)
    return what + "needs a q4 variant that takes its x prepared (grid=groups,xprep=launch|warps|warp,dot=q8-dp4a without xpf/wpf), not " +
           (k ? k->name : std::string("none"));
  if (rec && rec->gated_norm) {
    if (!rec->norm_q8)
      return what + "needs the gated norm as a launch of its own, not " + rec->name + "'s epilogue (it writes no q8 x; a recurrence with a head "
                    "in one block does: cols=128,...,norm=gated)";
    if (const std::string cols = axis_of(rec->axes, "cols"); !rec->counts && !cols.empty() && g.dv > std::stoi(cols))
      return what + "with the gated norm in " + rec->name + " needs a head in one block: dv " + std::to_string(g.dv) + " > cols=" + cols;
  }
  if (auto why = kernels::gated_norm_q8_error(g.nv, g.dv); !why.empty()) return what + why;
  return "";
}
std::string GdnDevice::norm_q8_error() const { return norm_q8_ ? norm_q8_error(q4_ ? q4_->kernel : nullptr, rec_, g_) : ""; }

std::string GdnDevice::fold_ba_error(bool prep, bool main, bool merged_in, const q4_gemv::Q4Kernel* stacked, const std::string& ba, bool chain,
                                     const Geometry& g) {
  if (!prep && !main) return "";
  if (prep && main) return "b|a inside the stacked launch two ways, fold=ba (set_fold_ba) and fold=ba-main (set_fold_ba_main): one of the two";
  const std::string what = main ? "fold=ba-main (set_fold_ba_main: b|a in the stacked kernel's grid) " : "fold=ba (set_fold_ba: b|a in the stacked launch's prep kernel) ";
  if (!merged_in) return what + "needs the stacked input projections (set_merged_in, in=qkvz) of the q4 tier";
  const std::string name = stacked ? stacked->name : std::string("none");
  if (main && !(stacked && stacked->launch_packed_rows))
    return what + "needs a stacked kernel with f32 rows riding along (grid=groups,xprep=launch|warps,dot=q8-dp4a), not " + name;
  if (!main) {
    if (!(stacked && stacked->launch_prepared))
      return what + "needs a stacked kernel that takes its x prepared (grid=groups,xprep=launch|warps,dot=q8-dp4a), not " + name;
    if (ba != "f32_gemv/impl=split-row,pdl=on") return what + "runs f32_gemv/impl=split-row,pdl=on's code, not " + ba + "'s";
  }
  if (!chain) return what + "is a PDL launch: it needs the PDL chain (set_pdl_chain)";
  if (!main)
    if (auto why = kernels::in_prep_ba_error(2 * g.nv, int(g.hidden)); !why.empty()) return what + "cannot take the geometry: " + why;
  return "";
}
std::string GdnDevice::l2_prefetch_error(kernels::L2Prefetch pf, bool fused_prep, const q4_gemv::Q4Kernel* k) {
  if (pf == kernels::L2Prefetch::none) return "";
  const std::string what = "pf=out (set_l2_prefetch: out_proj's weights into L2 from conv_norm_bg) ";
  if (!fused_prep) return what + "needs the fused prep (set_fused_prep), whose conv_norm_bg launch issues it";
  if (!k || !k->layout) return what + "needs a q4 variant with a packed layout (map=packed), not " + (k ? k->name : std::string("the f32 tier"));
  return "";
}

std::string GdnDevice::f32_stacked_error(bool fold_prep, bool fold_main, bool merged_in, bool stacked_kernel, const std::string& f32_kernel) {
  if (fold_prep) return "fold=ba (set_fold_ba: b|a in the stacked launch's q8 prep kernel) is the q4 tier's";
  if (stacked_kernel) return "a stacked kernel of its own (set_stacked_q4_variant) is the q4 tier's";
  if (fold_main && !merged_in) return "fold=ba-main (set_fold_ba_main: b|a's rows in the stacked launch) needs the stacked input projections (set_merged_in)";
  if (merged_in && !f32_gemv::f32_kernel(f32_kernel).launch_stacked)
    return "the stacked input projections (set_merged_in, in=qkvz) need an f32 kernel with a stacked launch (F32Kernel::launch_stacked: "
           "f32_gemv/impl=warp-row,...), not " + f32_kernel;
  return "";
}

std::string GdnDevice::fold_ba_error() const {
  return fold_ba_error(fold_ba_, fold_ba_main_, merged_in_, stacked_launch_kernel(), ba_kernel_, pdl_chain_, g_);
}

std::string GdnDevice::fold_ba_conv_error() const {
  return fold_ba_conv_error(fold_ba_conv_, fold_ba_ || fold_ba_main_, merged_in_, stacked_launch_kernel(), fused_prep_, rec_, l2_prefetch_, pdl_chain_, g_);
}

std::string GdnDevice::fold_ba_conv_error(bool conv, bool fold_other, bool merged_in, const q4_gemv::Q4Kernel* stacked, bool fused_prep,
                                          const gdn_recurrence::RecurrenceKernel* rec, kernels::L2Prefetch pf, bool chain, const Geometry& g) {
  if (!conv) return "";
  const std::string what = "fold=ba-conv (set_fold_ba_conv: b|a in the conv_norm_bg launch) ";
  if (fold_other) return what + "and fold=ba or fold=ba-main put b|a in two launches: one of them";
  if (!merged_in) return what + "needs the stacked input projections (set_merged_in, in=qkvz) of the q4 tier";
  if (!(stacked && stacked->launch_prepared))
    return what + "needs a stacked kernel that takes its x prepared (its prep kernel is in_prep), not " + (stacked ? stacked->name : std::string("none"));
  if (!fused_prep || (rec && rec->conv_prep))
    return what + "needs the conv_norm_bg launch: the fused prep (set_fused_prep) without a recurrence that forms the conv itself (prep=conv)";
  if (pf != kernels::L2Prefetch::none) return what + "and pf=out (set_l2_prefetch) are two variants of the conv_norm_bg launch: one of them";
  if (!chain) return what + "is a PDL launch: it needs the PDL chain (set_pdl_chain)";
  if (auto why = kernels::in_prep_ba_error(2 * g.nv, int(g.hidden)); !why.empty()) return what + "cannot take the geometry: " + why;
  if (auto why = kernels::conv_norm_ba_error(g.dk, g.nv, int(g.hidden)); !why.empty()) return what + "cannot take the geometry: " + why;
  return "";
}

void GdnDevice::set_fold_ba_conv(bool on) {
  if (on) xq_ = q4_gemv::prepared_x();
  fold_ba_conv_ = on;
}

void GdnDevice::set_fold_ba(bool on) {
  if (on) xq_ = q4_gemv::prepared_x();
  fold_ba_ = on;
}

void GdnDevice::set_ba_variant(const std::string& variant) {
  f32_gemv::f32_kernel(variant);  // an unknown name throws here, nothing changed
  ba_kernel_ = variant;
}

void GdnDevice::set_f32_variant(const std::string& variant) {
  f32_gemv::f32_kernel(variant);  // an unknown name throws here, nothing changed
  if (variant == f32_kernel_) return;
  for (int l = 0; l < nl_; ++l)
    if (const auto& L = layers_[std::size_t(l)]; L && L->tier == Layer::Tier::f32)
      throw Error("GdnDevice::set_f32_variant(" + variant + "): " + layer_str(l) + " is loaded on " + f32_kernel_ +
                  " (an f32 layer's projections keep the kernel they were loaded with): set it before load_f32, or unload_projections(" +
                  std::to_string(l) + ") first");
  f32_kernel_ = variant;
}

std::string GdnDevice::small_weights_error(int layer, const LayerWeights& w, const char* who) const {
  const std::string at = std::string("GdnDevice::") + who + ": " + layer_str(layer) + ": ";
  if (!(w.g == g_)) return at + "weights are for geometry " + w.g.str() + ", the device holds " + g_.str();
  const std::int64_t H = g_.hidden, C = g_.conv_dim(), nv = g_.nv;
  struct T {
    const char* name;
    std::size_t have;
    std::int64_t want;
    const char* shape;
  };
  const T ts[] = {{"w_b (in_proj_b)", w.w_b.size(), nv * H, "(nv, hidden)"}, {"w_a (in_proj_a)", w.w_a.size(), nv * H, "(nv, hidden)"},
                  {"a_log (A_log)", w.a_log.size(), nv, "(nv)"},            {"dt_bias", w.dt_bias.size(), nv, "(nv)"},
                  {"conv_w (conv1d)", w.conv_w.size(), C * g_.ck, "(conv_dim, ck)"}, {"norm_w (norm)", w.norm_w.size(), g_.dv, "(dv)"}};
  for (const T& t : ts)
    if (std::int64_t(t.have) != t.want)
      return at + t.name + " has " + std::to_string(t.have) + " elements, " + t.shape + " = " + std::to_string(t.want) + " for geometry " + g_.str();
  return "";
}

std::unique_ptr<GdnDevice::Layer> GdnDevice::make_small(int layer, const LayerWeights& w, const char* who) {
  if (auto why = small_weights_error(layer, w, who); !why.empty()) throw Error(why);
  const std::int64_t H = g_.hidden, C = g_.conv_dim(), V = g_.value_dim(), nv = g_.nv;
  auto L = std::make_unique<Layer>();
  std::vector<float> ba;
  ba.reserve(w.w_b.size() + w.w_a.size());
  ba.insert(ba.end(), w.w_b.begin(), w.w_b.end());
  ba.insert(ba.end(), w.w_a.begin(), w.w_a.end());
  L->w_ba = DeviceBuffer<float>::from(ba);
  L->a_log = DeviceBuffer<float>::from(w.a_log);
  L->dt_bias = DeviceBuffer<float>::from(w.dt_bias);
  L->conv_w = DeviceBuffer<float>::from(w.conv_w);
  L->norm_w = DeviceBuffer<float>::from(w.norm_w);
  auto scratch = [&](DeviceBuffer<float>& b, std::int64_t n) {
    b = DeviceBuffer<float>(std::size_t(n));
    poison_device(b.get(), b.size(), stream_);
  };
  scratch(L->xcz, zv_offset(g_) + V);
  L->xc.p = L->xcz.get();
  L->zv.p = L->xcz.get() + zv_offset(g_);
  scratch(L->xcv, C);
  scratch(L->q, g_.key_dim());
  scratch(L->k, g_.key_dim());
  scratch(L->ba, 2 * nv);
  scratch(L->beta, nv);
  scratch(L->g, nv);
  scratch(L->on, V);
  scratch(L->onn, V);
  scratch(L->out_y, H);
  return L;
}

void GdnDevice::load_f32(int layer, const LayerWeights& w) {
  check_layer(layer, "load_f32");
  // The "both" state is refused before anything is allocated.
  if (const auto& old = layers_[std::size_t(layer)]; old && old->tier == Layer::Tier::q4)
    throw Error("GdnDevice::load_f32: " + layer_str(layer) + " is on the q4 tier (keys " + old->keys.str() +
                "): loading f32 big projections would hold both tiers; unload_projections(" + std::to_string(layer) + ") first");
  require(w.g == g_, "GdnDevice::load_f32: " + layer_str(layer) + ": weights are for geometry " + w.g.str() + ", the device holds " + g_.str());
  try {
    w.check();
  } catch (const std::invalid_argument& e) {
    throw Error("GdnDevice::load_f32: " + layer_str(layer) + ": " + e.what());
  }
  const std::int64_t H = g_.hidden, C = g_.conv_dim(), V = g_.value_dim();
  auto L = make_small(layer, w, "load_f32");
  L->qkv = make_f32_projection(w.w_qkv, C, H, f32_kernel_);
  L->z = make_f32_projection(w.w_z, V, H, f32_kernel_);
  L->out = make_f32_projection(w.w_out, H, V, f32_kernel_);
  L->tier = Layer::Tier::f32;
  // The uploads went through cudaMemcpy on the legacy default stream, which may return before the
  // last DMA from pageable memory lands, and a non-blocking stream() would not wait for it: finish
  // every stream here, once per load.
  KLAB_CUDA(cudaDeviceSynchronize());
  layers_[std::size_t(layer)] = std::move(L);  // only now: a failure above leaves the old layer as it was
}

void GdnDevice::load_small(int layer, const LayerWeights& w) {
  check_layer(layer, "load_small");
  auto L = make_small(layer, w, "load_small");
  KLAB_CUDA(cudaDeviceSynchronize());  // as in load_f32
  if (auto& old = layers_[std::size_t(layer)]) {
    // The big projections stay as they were (f32, q4 or none).
    L->tier = old->tier;
    L->q4 = old->q4;
    L->keys = old->keys;
    L->qkv = std::move(old->qkv);
    L->z = std::move(old->z);
    L->out = std::move(old->out);
    L->in = std::move(old->in);
  }
  layers_[std::size_t(layer)] = std::move(L);
}

std::string GdnDevice::use_q4(int layer, int key_qkv, int key_z, int key_out) {
  const Q4Keys keys{key_qkv, key_z, key_out};
  const std::string at = "GdnDevice::use_q4: " + layer_str(layer) + ": ";
  if (layer < 0 || layer >= nl_) return at + "out of range (layers 0.." + std::to_string(nl_ - 1) + ")";
  Layer* L = layers_[std::size_t(layer)].get();
  if (!L) return at + "has no weights (load_small or load_q4 it first)";
  if (L->tier == Layer::Tier::f32)
    return at + "holds f32 big projections: switching it to q4 would hold both tiers; unload_projections(" + std::to_string(layer) + ") first";
  Q4Bindings b{};
  if (auto why = bind_q4(q4_->pool.index(), g_, keys, &b); !why.empty()) return at + why;
  // Everything checked: build the three, then install them together.
  auto pq = make_q4_projection(*q4_, b[0], BigProj::qkv);
  auto pz = make_q4_projection(*q4_, b[1], BigProj::z);
  auto po = make_q4_projection(*q4_, b[2], BigProj::out);
  L->qkv = std::move(pq);
  L->z = std::move(pz);
  L->out = std::move(po);
  L->q4 = b;
  L->keys = keys;
  L->tier = Layer::Tier::q4;
  if (merged_in_) stack_in_proj(*L);
  return "";
}

std::string GdnDevice::load_q4(int layer, const LayerWeights& w, int key_qkv, int key_z, int key_out) {
  const Q4Keys keys{key_qkv, key_z, key_out};
  const std::string at = "GdnDevice::load_q4: " + layer_str(layer) + ": ";
  if (layer < 0 || layer >= nl_) return at + "out of range (layers 0.." + std::to_string(nl_ - 1) + ")";
  if (const auto& old = layers_[std::size_t(layer)]; old && old->tier == Layer::Tier::f32)
    return at + "holds f32 big projections: switching it to q4 would hold both tiers; unload_projections(" + std::to_string(layer) + ") first";
  if (auto why = small_weights_error(layer, w, "load_q4"); !why.empty()) return why;
  if (auto why = bind_q4(q4_->pool.index(), g_, keys, nullptr); !why.empty()) return at + why;
  auto L = make_small(layer, w, "load_q4");
  KLAB_CUDA(cudaDeviceSynchronize());  // as in load_f32
  auto old = std::move(layers_[std::size_t(layer)]);
  layers_[std::size_t(layer)] = std::move(L);
  if (auto why = use_q4(layer, key_qkv, key_z, key_out); !why.empty()) {
    layers_[std::size_t(layer)] = std::move(old);  // cannot happen (checked above); leave the layer as it was
    throw Error(at + "internal: use_q4 refused after its checks passed: " + why);
  }
  return "";
}

void GdnDevice::unload_projections(int layer) {
  (void)hit(layer, "unload_projections");
  Layer& L = *layers_[std::size_t(layer)];
  // f32 weights are freed: no enqueued step may still read them.
  KLAB_CUDA(cudaDeviceSynchronize());
  L.qkv.reset();
  L.z.reset();
  L.out.reset();
  L.in = {};
  L.q4 = Q4Bindings{};
  L.keys = Q4Keys{};
  L.tier = Layer::Tier::none;
}

std::string GdnDevice::span_error(int pace, int per_sm, bool norm_q8, bool chain, bool merged_in, bool fold_ba, bool fork, const q4_gemv::Q4Kernel* out,
                                  const q4_gemv::Q4Kernel* stacked, const Geometry& g) {
  if (pace == 0) return "";
  if (!norm_q8) return "span=" + std::to_string(pace) + " runs out_proj on the prepared x: it needs set_norm_q8";
  if (!chain) return "span=" + std::to_string(pace) + " is a PDL launch: it needs the PDL chain (set_pdl_chain)";
  if (!merged_in || !fold_ba || fork)
    return "span=" + std::to_string(pace) + " runs the next step's stacked input projections with b|a: it needs set_merged_in and set_fold_ba, without fork=z";
  for (const q4_gemv::Q4Kernel* k : {out, stacked})
    if (k == nullptr || k->layout == nullptr || k->layout->name != "tiles-r8")
      return "span=" + std::to_string(pace) + " reads the paced ring's layout (tiles-r8): " + (k ? k->name : std::string("no q4 kernel")) + " packs " +
             (k && k->layout ? k->layout->name : std::string("no layout"));
  q4_gemv::SpanCall c;
  c.out_m = int(g.hidden), c.out_k = int(g.value_dim());
  c.in_m = int(g.conv_dim() + g.value_dim()), c.in_k = int(g.hidden), c.ba_rows = 2 * g.nv, c.per_sm = per_sm;
  if (auto why = q4_gemv::span_error(c, pace); !why.empty()) return "span=" + std::to_string(pace) + ": " + why;
  return "";
}

std::string GdnDevice::span_error() const {
  return span_error(span_, span_per_sm_, norm_q8_, pdl_chain_, merged_in_, fold_ba_, fork_z_, q4_ ? q4_->kernel : nullptr, q4_ ? stacked_launch_kernel() : nullptr, g_);
}

std::vector<GdnDevice::StepOperator> GdnDevice::operators_of(int layer, int slot, const float* d_h, float* d_y, bool own_input, const StepRef* next) const {
  require(span_ > 0 || (own_input && next == nullptr), "GdnDevice: internal: a step without its input side or with a next one needs the span (set_span)");
  std::vector<StepOperator> ops = step_list(layer, slot, d_h, d_y);
  if (span_ == 0) return ops;
  if (auto why = span_error(); !why.empty()) throw Error("GdnDevice: " + why);
  const Layer* L = layers_[std::size_t(layer)].get();
  if (L->tier != Layer::Tier::q4) throw Error("GdnDevice: " + layer_str(layer) + " is on the f32 tier: the span (set_span) is the q4 tier's");
  // The list is [the stacked launch (in_prep_ba, then the q4 kernel), conv_norm_bg, the recurrence, the gated norm, out_proj] (span_error).
  const OperatorBytes input = ops.front().bytes;
  if (!own_input) ops.erase(ops.begin());
  const Layer* N = next ? layers_[std::size_t(next->layer)].get() : nullptr;
  if (N && N->tier != Layer::Tier::q4) throw Error("GdnDevice: " + layer_str(next->layer) + " is on the f32 tier: the span (set_span) is the q4 tier's");
  StepOperator& out = ops.back();
  if (N) {
    out.name = "out_proj+next_in_proj";
    out.bytes.weights += input.weights, out.bytes.state += input.state, out.bytes.act += input.act;  // the next step's: the same geometry
  }
  out.enqueue = [L, N, d_y, d_h_next = next ? next->d_h : nullptr, q4 = q4_.get(), stacked = stacked_launch_kernel(), pace = span_, per_sm = span_per_sm_, g = g_](cudaStream_t s) {
    const Q4Pool::Tensor t = packed_of(q4->pool, *q4->kernel, L->q4, BigProj::out, "span");
    q4_gemv::SpanCall c;
    c.out_packed = t.packed, c.out_y = d_y, c.out_m = int(t.shape.rows), c.out_k = int(t.shape.cols), c.per_sm = per_sm;
    if (N) {
      const int all = int(g.conv_dim() + g.value_dim());
      c.in_packed = stacked_in(q4->pool, *N, *stacked, all, g.hidden, "span");
      c.in_y = N->xc.get(), c.in_m = all, c.in_k = int(g.hidden), c.h = d_h_next;
      c.w_ba = N->w_ba.get(), c.ba = N->ba.get(), c.ba_rows = 2 * g.nv;
    }
    q4_gemv::launch_span(c, pace, s);
  };
  return ops;
}

const std::uint8_t* GdnDevice::stacked_in(const Q4Pool& pool, const Layer& L, const q4_gemv::Q4Kernel& k, int rows, std::int64_t hidden, const char* who) {
  for (BigProj p : {BigProj::qkv, BigProj::z}) pool.resolve(L.q4[std::size_t(p)], std::string("q4 ") + to_string(p) + " (" + who + ")");
  if (!k.layout) return nullptr;
  if (L.in.layout != k.layout || L.in.packed.size() != k.layout->bytes(rows, hidden))
    throw Error("GdnDevice: internal: the stacked input projections are not in " + k.layout->name);
  return L.in.packed.get();
}

std::vector<GdnDevice::StepOperator> GdnDevice::step_list(int layer, int slot, const float* d_h, float* d_y) const {
  const Layer* L = layers_[std::size_t(layer)].get();
  const Geometry& g = g_;
  const bool norm_in_rec = rec_->gated_norm;  // the recurrence runs the gated norm as its epilogue
  if (L->tier == Layer::Tier::f32) {
    if (auto why = f32_stacked_error(fold_ba_, fold_ba_main_, merged_in_, stacked_kernel_ != nullptr, f32_kernel_); !why.empty())
      throw Error("GdnDevice: " + layer_str(layer) + " is on the f32 tier: " + why);
  } else if (auto why = fold_ba_error(); !why.empty()) {
    throw Error("GdnDevice: " + why);
  }
  if (fold_ba_conv_ && L->tier != Layer::Tier::q4)
    throw Error("GdnDevice: " + layer_str(layer) + " is on the f32 tier: fold=ba-conv (set_fold_ba_conv) is the q4 tier's");
  if (auto why = fold_ba_conv_error(); !why.empty()) throw Error("GdnDevice: " + why);
  const bool ba_conv = fold_ba_conv_;  // b|a in the conv_norm_bg launch, the stacked launch's prep kernel h's q8 form alone
  const bool fold = fold_ba_ || fold_ba_main_;  // b|a inside the stacked launch, one way or the other
  const bool fold_main = fold_ba_main_;
  const bool q4_layer = L->tier == Layer::Tier::q4;
  if (auto why = fork_z_error(fork_z_, merged_in_, q4_layer ? q4_->kernel : nullptr, stacked_kernel_); !why.empty()) throw Error("GdnDevice: " + why);
  const bool fork = fork_z_;  // z off the stacked launch, on the branch
  if (auto why = conv_prep_error(); !why.empty()) throw Error("GdnDevice: " + why);
  const bool conv_in_rec = rec_->conv_prep;  // the recurrence in conv_norm_bg's place (prep=conv)
  const bool ring = conv_in_rec && rec_->hist_ring;  // hist=ring: the recurrence writes the history's newest frame itself
  const auto bytes = step_operator_bytes(g, q4_layer, fused_prep_, norm_in_rec, merged_in_, fold, fork, conv_in_rec, ring, ba_conv);
  std::vector<StepOperator> ops;
  ops.reserve(bytes.size());
  auto add = [&](std::function<void(cudaStream_t)> f) {
    const OperatorModel& m = bytes[ops.size()];
    ops.push_back(StepOperator{m.name, m.bytes, std::move(f)});
  };
  // 1. projections: xc = W_qkv h, z = W_z h, b|a = W_b|a h; then beta = sigmoid(b), g = -exp(A_log) softplus(a + dt_bias)
  if (merged_in_ && L->tier == Layer::Tier::f32) {
    // The f32 tier: xc and z (and with fold_main b|a) as one stacked launch of the layer's f32 kernel over
    // the weights as they lie (F32Kernel::launch_stacked: every row bit for bit its own launch's); its
    // projections were loaded on f32_kernel_ (f32_stacked_error checked it has the launch).
    const f32_gemv::F32Kernel& k = f32_gemv::f32_kernel(f32_kernel_);
    require(L->qkv->f32_weights() && L->z->f32_weights(), "GdnDevice: internal: " + layer_str(layer) + "'s f32 projections hold no f32 weights");
    add([L, d_h, &k, fold_main, fork, C = int(g.conv_dim()), V = int(g.value_dim()), H = int(g.hidden), ba_rows = 2 * g.nv](cudaStream_t s) {
      f32_gemv::StackedRows rows[f32_gemv::kMaxStacked] = {{L->qkv->f32_weights(), L->xc.get(), C}};
      int n = 1;
      if (!fork) rows[n++] = {L->z->f32_weights(), L->zv.get(), V};  // fork=z: z is the forked launch below
      if (fold_main) rows[n++] = {L->w_ba.get(), L->ba.get(), ba_rows};
      k.launch_stacked(rows, n, d_h, H, s);
    });
    if (fork) add([L, d_h](cudaStream_t s) { L->z->enqueue(d_h, L->zv.get(), s); });
  } else if (merged_in_) {
    // xc and z as one launch over the stacked copy (set_merged_in); the bindings are checked on every
    // call as the projections check theirs (a stale tensor throws: no silent fallback).
    // fork=z: the launch runs the stacked copy's first conv_dim rows only (W_qkv's; xc only), and z is
    // the forked launch after it. A prefix of rows is the packed matrix of those rows: a row group's
    // offset depends on k alone (packed.hpp), and a group past the prefix's end is read, never written.
    add([L, d_h, q4 = q4_.get(), own = stacked_kernel_, all = int(g.conv_dim() + g.value_dim()), rows = int(g.conv_dim() + (fork ? 0 : g.value_dim())),
         H = g.hidden, fold, fold_main, ba_conv, xq = xq_, ba_rows = 2 * g.nv](cudaStream_t s) {
      const q4_gemv::Q4Kernel& k = own ? *own : *q4->kernel;
      const std::uint8_t* packed = stacked_in(q4->pool, *L, k, all, H, "stacked");
      if (k.layout) {
        if (fold_main) {  // set_fold_ba_main: b|a's rows in the stacked kernel's grid
          k.launch_packed_rows(packed, d_h, L->xc.get(), rows, H, L->w_ba.get(), L->ba.get(), ba_rows, s);
          return;
        }
        if (fold || ba_conv) {  // set_fold_ba: h's q8 form and b|a in one launch (fold=ba-conv: h's q8 form alone), then the stacked kernel on it
          if (ba_conv) kernels::in_prep(d_h, xq, int(H), s);
          else kernels::in_prep_ba(d_h, xq, L->w_ba.get(), L->ba.get(), ba_rows, int(H), s);
          k.launch_prepared(packed, d_h, L->xc.get(), rows, H, s);
          return;
        }
        k.launch_packed(packed, d_h, L->xc.get(), rows, H, s);
      } else {
        if (L->in.codes.size() == 0) throw Error("GdnDevice: internal: the stacked input projections are not built");
        k.launch(L->in.codes.get(), L->in.scales.get(), d_h, L->xc.get(), rows, H, s);
      }
    });
    if (fork)  // z on the q8 x the stacked launch's prep (or in_prep_ba) wrote (fork_z_error: the same q4 kernel)
      add([L, d_h, q4 = q4_.get()](cudaStream_t s) {
        const Q4Pool::Tensor t = packed_of(q4->pool, *q4->kernel, L->q4, BigProj::z, "fork=z");
        q4->kernel->launch_prepared(t.packed, d_h, L->zv.get(), int(t.shape.rows), int(t.shape.cols), s);
      });
  } else {
    add([L, d_h](cudaStream_t s) { L->qkv->enqueue(d_h, L->xc.get(), s); });
    add([L, d_h](cudaStream_t s) { L->z->enqueue(d_h, L->zv.get(), s); });
  }
  if (fork) ops.back().forked = true;  // z, right after the stacked launch
  if (!fold && !ba_conv)
    add([L, d_h, rows = 2 * std::int64_t(g.nv), cols = std::int64_t(g.hidden), ba = ba_kernel_](cudaStream_t s) {
      enqueue_f32_matvec(L->w_ba.get(), d_h, L->ba.get(), rows, cols, s, ba);
    });
  const bool chain = pdl_chain_;
  if (auto why = chain_error(); !why.empty()) throw Error("GdnDevice: " + why);
  if (auto why = norm_q8_error(); !why.empty()) throw Error("GdnDevice: " + why);
  if (norm_q8_) require(L->tier == Layer::Tier::q4, "GdnDevice: " + layer_str(layer) + " is on the f32 tier: out_proj without its prep launch (set_norm_q8) is the q4 tier's");
  if (auto why = l2_prefetch_error(l2_prefetch_, fused_prep_, q4_ ? q4_->kernel : nullptr); !why.empty()) throw Error("GdnDevice: " + why);
  if (l2_prefetch_ != kernels::L2Prefetch::none)
    require(L->tier == Layer::Tier::q4, "GdnDevice: " + layer_str(layer) + " is on the f32 tier: pf=out (set_l2_prefetch) prefetches a q4 out_proj");
  if (ba_conv) {
    // 1a's b|a + 1b + 2 + 3-4 in one launch, fold=ba's bits (set_fold_ba_conv)
    add([L, d_h, hist = hist_of(layer, slot), g](cudaStream_t s) {
      kernels::conv_norm_ba(L->xc.get(), L->conv_w.get(), hist, L->xcv.get(), L->q.get(), L->k.get(), L->w_ba.get(), d_h, L->ba.get(), L->a_log.get(),
                            L->dt_bias.get(), L->beta.get(), L->g.get(), g.nk, g.dk, g.nv, g.dv, g.ck, int(g.hidden), s);
    });
  } else if (fused_prep_ && !conv_in_rec) {
    // 1b + 2 + 3-4 in one launch, the same bits (set_fused_prep); set_l2_prefetch: out_proj's weights into L2 besides
    add([L, hist = hist_of(layer, slot), g, chain, pf = l2_prefetch_, q4 = q4_.get()](cudaStream_t s) {
      const void* pf_base = nullptr;
      std::size_t pf_bytes = 0;
      if (pf != kernels::L2Prefetch::none) {
        const Q4Pool::Tensor t = packed_of(q4->pool, *q4->kernel, L->q4, BigProj::out, "L2 prefetch");
        pf_base = t.packed;
        pf_bytes = q4->kernel->layout->bytes(t.shape.rows, t.shape.cols);
      }
      kernels::conv_norm_bg(L->xc.get(), L->conv_w.get(), hist, L->xcv.get(), L->q.get(), L->k.get(), L->ba.get(), L->a_log.get(), L->dt_bias.get(),
                            L->beta.get(), L->g.get(), g.nk, g.dk, g.nv, g.dv, g.ck, s, chain, pf, pf_base, pf_bytes);
    });
  } else if (!fused_prep_) {
    add([L, nv = g.nv](cudaStream_t s) { kernels::beta_g(L->ba.get(), L->a_log.get(), L->dt_bias.get(), L->beta.get(), L->g.get(), nv, s); });
    // 2. causal conv + SiLU, history shift (this layer's and slot's history)
    add([L, hist = hist_of(layer, slot), C = g.conv_dim(), ck = g.ck](cudaStream_t s) {
      kernels::conv_silu(L->xc.get(), L->conv_w.get(), hist, L->xcv.get(), C, ck, s);
    });
    // 3-4. q, k, v are views of xcv; q/k L2 norm per key head (q also / sqrt(dk))
    add([L, nk = g.nk, dk = g.dk](cudaStream_t s) { kernels::qk_norm(L->xcv.get(), L->q.get(), L->k.get(), nk, dk, s); });
  }
  // 5. delta-rule recurrence per value head on this layer's and slot's S, through the chosen
  // gdn_recurrence variant (checked on the host before each launch: dims, pointers, alignment of its loads).
  auto rargs = rec_args(g, L->q.get(), L->k.get(), L->xcv.get(), L->g.get(), L->beta.get(), S_of(layer, slot), L->on.get());
  // prep=conv: the recurrence only reads the history; the gated norm shifts it, every channel (hist=ring: the
  // recurrence writes the newest frame into its ring, nothing shifts)
  const kernels::HistShift shift =
      conv_in_rec && !ring ? kernels::HistShift{L->xc.get(), hist_of(layer, slot), int(g.conv_dim()), g.ck} : kernels::HistShift{};
  if (conv_in_rec) {  // 1b + 2 + 3-4 inside the recurrence, into the same intermediates; the gated norm shifts hist
    rargs.xc = L->xc.get();
    rargs.conv_w = L->conv_w.get();
    rargs.hist = hist_of(layer, slot);
    if (ring) rargs.hist_ring = hist_ring_of(layer, slot);
    rargs.ba = L->ba.get();
    rargs.a_log = L->a_log.get();
    rargs.dt_bias = L->dt_bias.get();
    rargs.ck = g.ck;
    rargs.xcv_out = L->xcv.get();
    rargs.q_out = L->q.get();
    rargs.k_out = L->k.get();
    rargs.beta_out = L->beta.get();
    rargs.g_out = L->g.get();
  }
  if (norm_in_rec) {  // 5 + 6: the recurrence's epilogue writes onn
    rargs.z = L->zv.get();
    rargs.norm_w = L->norm_w.get();
    rargs.onn = L->onn.get();
    rargs.eps = static_cast<float>(g.eps);
    if (rec_->counts) rargs.count = rec_count_.get();  // layers and slots share them: the chain runs one recurrence at a time
    if (norm_q8_) rargs.xq = xq_;  // set_norm_q8: the epilogue writes out_proj's q8 x too
  }
  add([rec = rec_, rargs](cudaStream_t s) {
    if (auto why = gdn_recurrence::check_args(*rec, rargs); !why.empty()) throw Error("GdnDevice: " + rec->name + ": " + why);
    rec->launch(rargs, s);
  });
  if (fork && norm_in_rec) ops.back().joins = true;  // its epilogue reads z
  // 6. gated RMSNorm per value head
  if (!norm_in_rec)
    add([L, nv = g.nv, dv = g.dv, eps = static_cast<float>(g.eps), chain, xq = norm_q8_ ? xq_ : nullptr, shift](cudaStream_t s) {
      if (xq) kernels::gated_norm_q8(L->on.get(), L->zv.get(), L->norm_w.get(), L->onn.get(), xq, nv, dv, eps, s, chain, shift);
      else kernels::gated_norm(L->on.get(), L->zv.get(), L->norm_w.get(), L->onn.get(), nv, dv, eps, s, chain, shift);
    });
  if (fork && !norm_in_rec) ops.back().joins = true;  // the gated norm reads z
  // 7. y = W_out onn (set_norm_q8: onn's q8 form already in the prepared array)
  if (norm_q8_)
    add([L, d_y, q4 = q4_.get()](cudaStream_t s) {
      const Q4Pool::Tensor t = packed_of(q4->pool, *q4->kernel, L->q4, BigProj::out, "prepared x");
      q4->kernel->launch_prepared(t.packed, L->onn.get(), d_y, int(t.shape.rows), int(t.shape.cols), s);
    });
  else
    add([L, d_y](cudaStream_t s) { L->out->enqueue(L->onn.get(), d_y, s); });
  if (ops.size() != bytes.size())
    throw Error("GdnDevice: internal: the step lists " + std::to_string(ops.size()) + " operators, the byte model " + std::to_string(bytes.size()));
  return ops;
}

void GdnDevice::enqueue_step(int layer, int slot, const float* d_h, float* d_y, cudaStream_t s) { enqueue_operators(operators_of(layer, slot, d_h, d_y), s); }

void GdnDevice::enqueue_operators(const std::vector<StepOperator>& ops, cudaStream_t s) const {
  // operators_of joins every forked operator before a later one (checked before anything is enqueued)
  const auto forked = std::find_if(ops.begin(), ops.end(), [](const StepOperator& op) { return op.forked; });
  require(forked == ops.end() || (branch_ && std::find_if(forked + 1, ops.end(), [](const StepOperator& op) { return op.joins; }) != ops.end()),
          "GdnDevice::enqueue_operators: a forked operator without its join, or on a device without fork=z (set_fork_z)");
  bool open = false;  // a forked operator not yet joined
  for (const StepOperator& op : ops) {
    if (op.joins && open) {
      KLAB_CUDA(cudaStreamWaitEvent(s, branch_->join, 0));
      open = false;
    }
    if (!op.forked) {
      op.enqueue(s);
      continue;
    }
    KLAB_CUDA(cudaEventRecord(branch_->fork, s));
    KLAB_CUDA(cudaStreamWaitEvent(branch_->side, branch_->fork, 0));
    op.enqueue(branch_->side);
    KLAB_CUDA(cudaEventRecord(branch_->join, branch_->side));
    open = true;
  }
}

void GdnDevice::check_step(int layer, int slot, const float* d_h, const float* d_y, const char* what) const {
  ready(layer, what);
  check_slot(slot, what);
  const std::string who = std::string("GdnDevice::") + what + ": " + layer_str(layer);
  require(d_h != nullptr && d_y != nullptr, who + ": null buffer");
  require(reinterpret_cast<std::uintptr_t>(d_h) % 16 == 0, who + ": input not 16-byte aligned");
  const std::int64_t H = g_.hidden;
  require(!(d_y < d_h + H && d_h < d_y + H), who + ": output overlaps input");
}

std::vector<GdnDevice::StepOperator> GdnDevice::step_operators(int layer, const float* d_h, float* d_y, int slot) const {
  check_step(layer, slot, d_h, d_y, "step_operators");
  return operators_of(layer, slot, d_h, d_y);
}

std::vector<GdnDevice::StepOperator> GdnDevice::chain_operators(const std::vector<StepRef>& steps) const {
  require(!steps.empty(), "GdnDevice::chain_operators: no step");
  for (const StepRef& r : steps) check_step(r.layer, r.slot, r.d_h, r.d_y, "chain_operators");
  std::vector<StepOperator> all;
  const bool span = span_ > 0;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const StepRef& r = steps[i];
    auto ops = operators_of(r.layer, r.slot, r.d_h, r.d_y, !span || i == 0, span && i + 1 < steps.size() ? &steps[i + 1] : nullptr);
    for (auto& op : ops) all.push_back(std::move(op));
  }
  return all;
}

void GdnDevice::step(int layer, std::span<const float> h, std::span<float> y, int slot) {
  const Layer& L = ready(layer, "step");
  check_slot(slot, "step");
  const std::size_t H = std::size_t(g_.hidden);
  require(h.size() == H, "GdnDevice::step: " + layer_str(layer) + ": input has " + std::to_string(h.size()) + " elements, hidden is " + std::to_string(H));
  require(y.size() == H, "GdnDevice::step: " + layer_str(layer) + ": output has room for " + std::to_string(y.size()) + " elements, hidden is " + std::to_string(H));
  KLAB_CUDA(cudaMemcpyAsync(h_in_.get(), h.data(), H * kF, cudaMemcpyHostToDevice, stream_));
  enqueue_step(layer, slot, h_in_.get(), L.out_y.get(), stream_);
  KLAB_CUDA(cudaMemcpyAsync(y.data(), L.out_y.get(), H * kF, cudaMemcpyDeviceToHost, stream_));
  KLAB_CUDA(cudaStreamSynchronize(stream_));
}

std::vector<float> GdnDevice::step(int layer, std::span<const float> h, int slot) {
  std::vector<float> y(std::size_t(g_.hidden));
  step(layer, h, y, slot);
  return y;
}

void GdnDevice::run(int layer, int T, std::span<const float> h_seq, std::span<float> y_seq, int slot) {
  ready(layer, "run");
  check_slot(slot, "run");
  require(T >= 1, "GdnDevice::run: " + layer_str(layer) + ": T = " + std::to_string(T) + ", at least one token");
  const std::size_t n = std::size_t(T) * std::size_t(g_.hidden);
  require(h_seq.size() == n, "GdnDevice::run: " + layer_str(layer) + ": input has " + std::to_string(h_seq.size()) + " elements, T*hidden is " + std::to_string(n));
  require(y_seq.size() == n, "GdnDevice::run: " + layer_str(layer) + ": output has room for " + std::to_string(y_seq.size()) + " elements, T*hidden is " + std::to_string(n));
  if (h_seq_.size() < n) h_seq_ = DeviceBuffer<float>(n);
  if (y_seq_.size() < n) y_seq_ = DeviceBuffer<float>(n);
  KLAB_CUDA(cudaMemcpyAsync(h_seq_.get(), h_seq.data(), n * kF, cudaMemcpyHostToDevice, stream_));
  enqueue_run(layer, T, h_seq_.get(), y_seq_.get(), stream_, slot);
  KLAB_CUDA(cudaMemcpyAsync(y_seq.data(), y_seq_.get(), n * kF, cudaMemcpyDeviceToHost, stream_));
  KLAB_CUDA(cudaStreamSynchronize(stream_));
}

std::vector<float> GdnDevice::run(int layer, int T, std::span<const float> h_seq, int slot) {
  require(T >= 1, "GdnDevice::run: " + layer_str(layer) + ": T = " + std::to_string(T) + ", at least one token");
  std::vector<float> y(std::size_t(T) * std::size_t(g_.hidden));
  run(layer, T, h_seq, y, slot);
  return y;
}

void GdnDevice::enqueue_run(int layer, int T, const float* d_h_seq, float* d_y_seq, cudaStream_t stream, int slot) {
  const Layer& L = ready(layer, "enqueue_run");
  check_slot(slot, "enqueue_run");
  require(T >= 1, "GdnDevice::enqueue_run: " + layer_str(layer) + ": T = " + std::to_string(T) + ", at least one token");
  require(d_h_seq != nullptr && d_y_seq != nullptr, "GdnDevice::enqueue_run: " + layer_str(layer) + ": null buffer");
  // The projections read h with 16-byte loads when hidden % 4 == 0.
  require(reinterpret_cast<std::uintptr_t>(d_h_seq) % 16 == 0, "GdnDevice::enqueue_run: " + layer_str(layer) + ": input not 16-byte aligned");
  const std::int64_t H = g_.hidden, n = std::int64_t(T) * H;
  const bool overlap = d_y_seq < d_h_seq + n && d_h_seq < d_y_seq + n;
  require(!overlap, "GdnDevice::enqueue_run: " + layer_str(layer) + ": output overlaps input");
  if (span_ > 0) {  // the span carries each token's input side in the out_proj launch before it
    std::vector<StepRef> steps;
    for (int t = 0; t < T; ++t) steps.push_back(StepRef{layer, slot, d_h_seq + t * H, d_y_seq + t * H});
    enqueue_operators(chain_operators(steps), stream);
  } else {
    for (int t = 0; t < T; ++t) enqueue_step(layer, slot, d_h_seq + t * H, d_y_seq + t * H, stream);
  }
  // get(OUT) reads the last step's output, as after step().
  KLAB_CUDA(cudaMemcpyAsync(L.out_y.get(), d_y_seq + (T - 1) * H, std::size_t(H) * kF, cudaMemcpyDeviceToDevice, stream));
}

namespace {
// The q4_gemm kernel for a q4 kernel of rows=R: the first registered with R rows (nullptr: none).
const q4_gemm::GemmKernel* gemm_for_rows(const std::string& rows) {
  for (const auto& k : q4_gemm::gemm_kernels())
    if (std::to_string(k.rows) == rows) return &k;
  return nullptr;
}
}  // namespace

std::string GdnDevice::batch_error(const std::string& q4_variant, const std::string& recurrence, bool fused_prep, int B) {
  std::vector<std::string> why;
  if (B < 1 || B > q4_gemm::kMaxCols) why.push_back("B = " + std::to_string(B) + " outside [1, " + std::to_string(q4_gemm::kMaxCols) + "] (q4_gemm's columns)");
  const q4_gemv::Q4Kernel* k = nullptr;
  for (const auto& c : q4_gemv::q4_kernels())
    if (c.name == q4_variant) k = &c;
  if (!k) {
    why.push_back("no q4 kernel '" + q4_variant + "'");
  } else {
    const std::string rows = axis_of(k->axes, "rows");
    const q4_gemm::GemmKernel* gk = gemm_for_rows(rows);
    if (axis_of(k->axes, "map") != "packed" || axis_of(k->axes, "dot") != "q8-dp4a" || !gk || !k->layout)
      why.push_back("the q4 kernel " + q4_variant + " is not a map=packed,dot=q8-dp4a kernel of a rows= that q4_gemm has (its column bits are q4_gemm's "
                    "only then; e.g. set_q4_variant(\"q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=launch,pdl=on,rows=8\"))");
  }
  if (!fused_prep) why.push_back("the fused prep is off (set_fused_prep(true): beta/g, conv and the q/k norm batch as one conv_norm_bg_slots launch)");
  const gdn_recurrence::RecurrenceKernel* rk = nullptr;
  for (const auto& c : gdn_recurrence::recurrence_kernels())
    if (c.name == recurrence) rk = &c;
  if (!rk) why.push_back("no gdn_recurrence kernel '" + recurrence + "'");
  else if (rk->hist_ring)
    why.push_back("the recurrence " + recurrence + " keeps the conv history as a ring (hist=ring), which the batch's conv_norm_bg_slots shifts in place: "
                  "step the slots one by one, or batch on its twin without hist=ring");
  else if (axis_of(rk->axes, "impl") != "fused")
    why.push_back("the recurrence " + recurrence + " is not impl=fused (the batch runs it once at batch B with the slots' S strides; "
                  "e.g. set_recurrence_variant(\"gdn_recurrence/impl=fused,cols=16,rows=8,pdl=on\"))");
  std::string out;
  for (const auto& w : why) out += (out.empty() ? "" : "; ") + w;
  return out;
}

std::string GdnDevice::batch_gemm_variant(const std::string& q4_variant) {
  if (auto why = batch_error(q4_variant, "gdn_recurrence/impl=fused,cols=16,rows=8,pdl=on", true, 1); !why.empty())
    throw Error("GdnDevice::batch_gemm_variant: " + why);
  return gemm_for_rows(axis_of(q4_kernel_by_name(q4_variant).axes, "rows"))->name;
}

GdnDevice::BatchScratch GdnDevice::batch_scratch(const Geometry& g, int B) {
  BatchScratch b;
  const std::int64_t n = B, C = g.conv_dim(), V = g.value_dim(), K = g.key_dim();
  b.xc = b.xcv = n * C;
  b.z = b.o = b.onn = n * V;
  b.q = b.k = n * K;
  b.ba = n * 2 * g.nv;
  b.beta = b.g = n * g.nv;
  b.workspace_bytes = std::max(q4_gemm::workspace_bytes(g.hidden, n), q4_gemm::workspace_bytes(V, n));
  return b;
}

int GdnDevice::batch_capacity() const { return batch_ ? batch_->cap : 0; }

void GdnDevice::reserve_batch(int B) {
  require(B >= 1 && B <= q4_gemm::kMaxCols, "GdnDevice::reserve_batch: B = " + std::to_string(B) + " outside [1, " + std::to_string(q4_gemm::kMaxCols) + "]");
  if (batch_capacity() >= B) return;
  const BatchScratch n = batch_scratch(g_, B);
  auto b = std::make_unique<Batch>();
  b->cap = B;
  auto f = [&](DeviceBuffer<float>& d, std::int64_t count) { d = DeviceBuffer<float>(std::size_t(count)); };
  f(b->xc, n.xc), f(b->xcv, n.xcv), f(b->z, n.z), f(b->q, n.q), f(b->k, n.k), f(b->ba, n.ba), f(b->beta, n.beta), f(b->g, n.g), f(b->o, n.o),
      f(b->onn, n.onn);
  b->workspace = DeviceBuffer<std::uint8_t>(n.workspace_bytes);
  KLAB_CUDA(cudaDeviceSynchronize());  // nothing enqueued still uses the old scratch freed here
  batch_ = std::move(b);
}

void GdnDevice::enqueue_batch(int layer, int first_slot, int B, const float* d_h, float* d_y, cudaStream_t stream) {
  const Layer& L = ready(layer, "enqueue_batch");
  const std::string at = "GdnDevice::enqueue_batch: " + layer_str(layer) + ": ";
  require(B >= 1, at + "B = " + std::to_string(B) + ", at least one slot");
  require(first_slot >= 0 && std::int64_t(first_slot) + B <= slots_, at + "slots " + std::to_string(first_slot) + ".." +
                                                                          std::to_string(std::int64_t(first_slot) + B - 1) + " out of range (slots 0.." +
                                                                          std::to_string(slots_ - 1) + ")");
  require(L.tier == Layer::Tier::q4, at + "is on the f32 tier: the batched step runs the q4 tier (its projections through q4_gemm)");
  if (auto why = batch_error(q4_variant(), recurrence_variant(), fused_prep_, B); !why.empty()) throw Error(at + why);
  require(d_h != nullptr && d_y != nullptr, at + "null buffer");
  require(reinterpret_cast<std::uintptr_t>(d_h) % 16 == 0, at + "input not 16-byte aligned (q4_gemm reads x with 16-byte loads)");
  const std::int64_t H = g_.hidden, n = std::int64_t(B) * H;
  require(!(d_y < d_h + n && d_h < d_y + n), at + "output overlaps input");
  if (auto why = chain_error(); !why.empty()) throw Error(at + why);
  const q4_gemm::GemmKernel& gk = *gemm_for_rows(axis_of(q4_->kernel->axes, "rows"));
  const f32_gemv::F32Kernel& bk = f32_gemv::f32_kernel(ba_kernel_);
  require(bk.launch_cols != nullptr, at + "the b|a kernel " + ba_kernel_ + " has no launch over several columns (F32Kernel::launch_cols)");
  if (bk.can_implement)
    if (auto why = bk.can_implement(2 * std::int64_t(g_.nv), g_.hidden); !why.empty()) throw Error(at + "b|a: " + ba_kernel_ + ": " + why);
  Q4Pool::Tensor t[3];
  for (BigProj p : {BigProj::qkv, BigProj::z, BigProj::out}) {
    const Q4Pool::Tensor& tp = t[int(p)] = q4_->pool.resolve(L.q4[std::size_t(p)], at + "q4 " + to_string(p));
    require(q4_->pool.layout() == q4_->kernel->layout && tp.packed != nullptr,
            at + to_string(p) + ": the pool holds no copy in " + q4_->kernel->layout->name + " (set_q4_variant packs them)");
    if (auto why = q4_gemm::launch_error(tp.shape.rows, tp.shape.cols, B); !why.empty()) throw Error(at + to_string(p) + ": " + gk.name + ": " + why);
  }
  if (batch_capacity() < B) {
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    KLAB_CUDA(cudaStreamIsCapturing(stream, &cap));
    require(cap == cudaStreamCaptureStatusNone, at + "the batch scratch holds " + std::to_string(batch_capacity()) + " slots, " + std::to_string(B) +
                                                    " asked inside a stream capture, which cannot allocate: reserve_batch(" + std::to_string(B) + ") before capturing");
    reserve_batch(B);
  }
  Batch& b = *batch_;
  const Geometry& g = g_;
  const std::int64_t C = g.conv_dim(), V = g.value_dim(), K = g.key_dim();
  auto ra = rec_args(g, b.q.get(), b.k.get(), b.xcv.get(), b.g.get(), b.beta.get(), S_of(layer, first_slot), b.o.get());
  ra.batch = B;
  ra.q_stride = ra.k_stride = K;
  ra.v_stride = C;
  ra.gb_stride = g.nv;
  ra.S_stride = std::int64_t(nl_) * S_per_layer();
  ra.o_stride = V;
  const bool norm_in_rec = rec_->gated_norm;
  if (norm_in_rec) {
    ra.z = b.z.get();
    ra.norm_w = L.norm_w.get();
    ra.onn = b.onn.get();
    ra.eps = static_cast<float>(g.eps);
    if (rec_->counts) ra.count = rec_count_.get();  // B * nv <= nv * kMaxCols of them
  }
  if (auto why = gdn_recurrence::check_args(*rec_, ra); !why.empty()) throw Error(at + rec_->name + ": " + why);
  // Every check made: the launches, in the step's order.
  std::uint8_t* ws = b.workspace.get();
  gk.launch(t[0].packed, d_h, b.xc.get(), int(C), int(H), B, ws, stream);
  gk.launch(t[1].packed, d_h, b.z.get(), int(V), int(H), B, ws, stream);
  bk.launch_cols(L.w_ba.get(), d_h, b.ba.get(), 2 * g.nv, int(H), B, stream);
  kernels::conv_norm_bg_slots(b.xc.get(), L.conv_w.get(), hist_of(layer, first_slot), std::int64_t(nl_) * hist_stride(), b.xcv.get(), b.q.get(), b.k.get(),
                              b.ba.get(), L.a_log.get(), L.dt_bias.get(), b.beta.get(), b.g.get(), g.nk, g.dk, g.nv, g.dv, g.ck, B, stream, pdl_chain_);
  rec_->launch(ra, stream);
  if (!norm_in_rec) kernels::gated_norm(b.o.get(), b.z.get(), L.norm_w.get(), b.onn.get(), B * g.nv, g.dv, static_cast<float>(g.eps), stream, pdl_chain_);
  gk.launch(t[2].packed, b.onn.get(), d_y, int(H), int(V), B, ws, stream);
}

void GdnDevice::reset() {
  if (S_.size()) KLAB_CUDA(cudaMemsetAsync(S_.get(), 0, S_.bytes(), stream_));
  if (hist_.size()) KLAB_CUDA(cudaMemsetAsync(hist_.get(), 0, hist_.bytes(), stream_));
  KLAB_CUDA(cudaMemsetAsync(hist_ring_.get(), 0, hist_ring_.bytes(), stream_));
}

void GdnDevice::reset(int layer, int slot) {
  check_layer(layer, "reset");
  check_slot(slot, "reset");
  KLAB_CUDA(cudaMemsetAsync(S_of(layer, slot), 0, std::size_t(S_per_layer()) * kF, stream_));
  if (hist_stride() > 0) KLAB_CUDA(cudaMemsetAsync(hist_of(layer, slot), 0, std::size_t(hist_stride()) * kF, stream_));
  KLAB_CUDA(cudaMemsetAsync(hist_ring_of(layer, slot), 0, 2 * sizeof(int), stream_));
}

std::int64_t GdnDevice::get(int layer, What w, float* dst, std::int64_t cap, int slot) const {
  check_layer(layer, "get");
  check_slot(slot, "get");
  const std::int64_t n = ref::gdn::count(g_, w);
  if (dst == nullptr) return n;
  const Layer& L = hit(layer, "get");
  require(cap >= n, "GdnDevice::get: " + layer_str(layer) + " " + ref::gdn::to_string(w) + ": buffer of " + std::to_string(cap) + " elements, " +
                        std::to_string(n) + " needed (never truncated)");
  if (w == What::HIST) {  // its ck-1 frames oldest first, wherever the ring's position puts them
    copy_hist_out(layer, slot, hist_position(layer, slot), dst);
    return n;
  }
  const float* src = source(L, layer, w, slot);
  if (n > 0) {
    KLAB_CUDA(cudaMemcpyAsync(dst, src, std::size_t(n) * kF, cudaMemcpyDeviceToHost, stream_));
    KLAB_CUDA(cudaStreamSynchronize(stream_));
  }
  return n;
}

const float* GdnDevice::source(const Layer& L, int layer, What w, int slot) const {
  const float* src = nullptr;
  switch (w) {
    case What::XC: src = L.xc.get(); break;
    case What::XCV: src = L.xcv.get(); break;
    case What::Z: src = L.zv.get(); break;
    case What::Q: src = L.q.get(); break;
    case What::K: src = L.k.get(); break;
    case What::B: src = L.ba.get(); break;
    case What::A: src = L.ba.get() + g_.nv; break;
    case What::BETA: src = L.beta.get(); break;
    case What::G: src = L.g.get(); break;
    case What::ON: src = L.on.get(); break;
    case What::ONN: src = L.onn.get(); break;
    case What::OUT: src = L.out_y.get(); break;
    case What::S: src = S_of(layer, slot); break;
    case What::HIST: break;
  }
  require(src != nullptr || ref::gdn::count(g_, w) == 0, "GdnDevice: no device source for intermediate " + ref::gdn::to_string(w));
  return src;
}

void GdnDevice::enqueue_copy(int layer, What w, float* d_dst, cudaStream_t stream, int slot) const {
  check_slot(slot, "enqueue_copy");
  require(w != What::HIST, "GdnDevice::enqueue_copy: HIST is read by get() (its frames lie wherever the ring's position puts them)");
  require(d_dst != nullptr, "GdnDevice::enqueue_copy: " + layer_str(layer) + " " + ref::gdn::to_string(w) + ": null destination");
  const Layer& L = hit(layer, "enqueue_copy");  // the layer in range and loaded
  const std::int64_t n = ref::gdn::count(g_, w);
  if (n > 0) KLAB_CUDA(cudaMemcpyAsync(d_dst, source(L, layer, w, slot), std::size_t(n) * kF, cudaMemcpyDeviceToDevice, stream));
}

std::vector<float> GdnDevice::get(int layer, What w, int slot) const {
  std::vector<float> v(std::size_t(get(layer, w, nullptr, 0, slot)));
  get(layer, w, v.data(), std::int64_t(v.size()), slot);
  return v;
}

HostState GdnDevice::save_state(int layer, int slot) const {
  hit(layer, "save_state");
  check_slot(slot, "save_state");
  HostState s;
  s.g = g_;
  s.S.resize(std::size_t(S_per_layer()));
  s.hist.resize(std::size_t(hist_per_layer()));
  KLAB_CUDA(cudaMemcpyAsync(s.S.data(), S_of(layer, slot), s.S.size() * kF, cudaMemcpyDeviceToHost, stream_));
  KLAB_CUDA(cudaStreamSynchronize(stream_));
  copy_hist_out(layer, slot, hist_position(layer, slot), s.hist.data());
  return s;
}

void GdnDevice::load_state(int layer, const HostState& s, int slot) {
  hit(layer, "load_state");
  check_slot(slot, "load_state");
  require(s.g == g_, "GdnDevice::load_state: " + layer_str(layer) + ": state of geometry " + s.g.str() + ", the device holds " + g_.str());
  check_state_sizes(g_, s.S.size(), s.hist.size(), "GdnDevice::load_state");
  KLAB_CUDA(cudaMemcpyAsync(S_of(layer, slot), s.S.data(), s.S.size() * kF, cudaMemcpyHostToDevice, stream_));
  if (!s.hist.empty()) KLAB_CUDA(cudaMemcpyAsync(hist_of(layer, slot), s.hist.data(), s.hist.size() * kF, cudaMemcpyHostToDevice, stream_));
  KLAB_CUDA(cudaMemsetAsync(hist_ring_of(layer, slot), 0, 2 * sizeof(int), stream_));  // frames 0 .. ck-2: the ring at position 0
  KLAB_CUDA(cudaStreamSynchronize(stream_));
}

}  // namespace klab::gdn
