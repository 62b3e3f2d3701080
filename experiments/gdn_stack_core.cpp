// A token through a stack of GDN layers: the memory need, the loads, the chain and its graph, and the
// graph-vs-sequential check (gdn_stack.hpp).
#include "gdn_stack.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "klab/error.hpp"
#include "klab/metrics.hpp"

namespace klab::experiments {

namespace rg = klab::ref::gdn;

namespace {
template <class T>
std::int64_t bytes_of(const std::vector<T>& v) {
  return std::int64_t(v.size() * sizeof(T));
}
std::int64_t bytes_of(const ref::Q4Matrix& m) { return bytes_of(m.codes) + bytes_of(m.scales); }

std::string gb(double b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GB", b / 1e9);
  return buf;
}

// Allocator rounding, the graph and its executable, cuBLAS-free but not context-free: a margin the
// stack's own buffers cannot account for. 512 MiB is ~2% of the f32 stack at Qwen3.5-27B (~22 GB).
constexpr std::int64_t kHeadroom = std::int64_t(512) << 20;

// Page-locks a host vector for the duration of a copy (cudaHostRegister), when the host allows it.
class Pinned {
 public:
  explicit Pinned(const std::vector<float>& v) : p_(const_cast<float*>(v.data())) {
    if (v.empty() || cudaHostRegister(p_, v.size() * sizeof(float), cudaHostRegisterDefault) != cudaSuccess) {
      cudaGetLastError();  // not pinned: the copies are plain pageable ones, only slower
      p_ = nullptr;
    }
  }
  ~Pinned() {
    if (p_) cudaHostUnregister(p_);
  }
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;

 private:
  float* p_;
};
}  // namespace

LineFit fit_line(std::span<const double> x, std::span<const double> y) {
  require(x.size() == y.size(), "fit_line: " + std::to_string(x.size()) + " x against " + std::to_string(y.size()) + " y");
  require(x.size() >= 2, "fit_line: a line needs two points at least, got " + std::to_string(x.size()));
  const double n = double(x.size());
  double sx = 0, sy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    require(std::isfinite(x[i]) && std::isfinite(y[i]), "fit_line: point " + std::to_string(i) + " is not finite");
    sx += x[i], sy += y[i];
  }
  const double mx = sx / n, my = sy / n;
  double sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) sxx += (x[i] - mx) * (x[i] - mx), sxy += (x[i] - mx) * (y[i] - my);
  require(sxx > 0, "fit_line: every x is " + std::to_string(x[0]) + ": no slope to fit");
  LineFit f;
  f.b = sxy / sxx;
  f.a = my - f.b * mx;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (y[i] != 0) f.max_rel_residual = std::max(f.max_rel_residual, std::abs(y[i] - (f.a + f.b * x[i])) / std::abs(y[i]));
  return f;
}

StackNeed stack_need(const rg::LayerWeights& w, const rg::Q4Projections* q, int layers) {
  require(layers >= 1, "stack_need: at least one layer");
  const rg::Geometry& g = w.g;
  StackNeed n;
  n.layers = layers;
  const std::int64_t small = bytes_of(w.w_b) + bytes_of(w.w_a) + bytes_of(w.a_log) + bytes_of(w.dt_bias) + bytes_of(w.conv_w) + bytes_of(w.norm_w);
  const std::int64_t big = q ? bytes_of(q->qkv) + bytes_of(q->z) + bytes_of(q->out) : bytes_of(w.w_qkv) + bytes_of(w.w_z) + bytes_of(w.w_out);
  n.weights = big + small;
  n.state = 4 * (rg::count(g, rg::What::S) + rg::count(g, rg::What::HIST));
  for (rg::What wh : rg::all_whats())
    if (wh != rg::What::S && wh != rg::What::HIST) n.scratch += 4 * rg::count(g, wh);
  n.fixed = 3 * 4 * std::int64_t(g.hidden) + kHeadroom;
  return n;
}

std::string stack_fit_error(const StackNeed& n, std::int64_t free_bytes, const std::string& tier, const std::string& geometry) {
  if (n.total() <= free_bytes) return "";
  return "the " + tier + " tier's stack of " + std::to_string(n.layers) + " layers at " + geometry + " needs " + gb(double(n.total())) +
         " of device memory (per layer: weights " + gb(double(n.weights)) + ", state " + gb(double(n.state)) + ", intermediates " +
         gb(double(n.scratch)) + "; plus " + gb(double(n.fixed)) + " buffers and headroom) but the device has " + gb(double(free_bytes)) +
         " free: run fewer layers, the q4 tier alone, or --quick";
}

gdn::Q4Keys stack_keys(int layer) { return gdn::Q4Keys{3 * layer + 1, 3 * layer + 2, 3 * layer + 3}; }

void load_stack_f32(gdn::GdnDevice& dev, const rg::LayerWeights& w) {
  const Pinned a(w.w_qkv), b(w.w_z), c(w.w_out);
  for (int l = 0; l < dev.layers(); ++l) dev.load_f32(l, w);
  KLAB_CUDA(cudaDeviceSynchronize());
}

void load_stack_q4(gdn::GdnDevice& dev, const rg::LayerWeights& w, const rg::Q4Projections& q) {
  for (int l = 0; l < dev.layers(); ++l) {
    const gdn::Q4Keys k = stack_keys(l);
    dev.q4_pool().put(k.qkv, q.qkv);
    dev.q4_pool().put(k.z, q.z);
    dev.q4_pool().put(k.out, q.out);
    if (auto why = dev.load_q4(l, w, k.qkv, k.z, k.out); !why.empty()) throw Error("gdn-stack: layer " + std::to_string(l) + ": " + why);
  }
  KLAB_CUDA(cudaDeviceSynchronize());
}

GdnStack::GdnStack(gdn::GdnDevice& dev, cudaStream_t stream)
    : dev_(dev), stream_(stream), in_(std::size_t(dev.geometry().hidden)),
      ping_{DeviceBuffer<float>(std::size_t(dev.geometry().hidden)), DeviceBuffer<float>(std::size_t(dev.geometry().hidden))} {
  dev_.set_stream(stream_);
}

GdnStack::~GdnStack() {
  if (exec_) cudaGraphExecDestroy(exec_);
}

void GdnStack::set_input(std::span<const float> h) {
  require(h.size() == in_.size(), "GdnStack: the token has " + std::to_string(h.size()) + " values, the geometry's hidden is " + std::to_string(in_.size()));
  KLAB_CUDA(cudaStreamSynchronize(stream_));
  in_.upload(h.data(), h.size());
  // A pageable upload may return before its DMA lands, on the legacy stream, which a non-blocking
  // stream (the timer's) does not wait for.
  KLAB_CUDA(cudaDeviceSynchronize());
}

// Every layer reads the token h, in stream order. Chained without the model's residual stream and
// norms (layer l's output as layer l+1's input), the output shrank ~30x per layer and underflowed to
// exactly 0 by layer 5 (H200 run of 2026-12-01, both tiers: max |out| 1.9, 0.057, 6.8e-5, 1.2e-14, 0),
// which left the bitwise check comparing zeros. The kernels' work does not depend on the values, so the
// time per token is the same; the layers still run one after another in one graph.
// A layer is its step's operators, enqueued as the step runs them (enqueue_operators), and nothing
// else: enqueue_run(l, 1, ...) would add a device copy of the layer's output for get(OUT), a copy
// node per layer that breaks the PDL chain between one layer's out_proj and the next layer's first
// kernel (the graph of 48 layers held 48 of them until 2026-12-02).
void GdnStack::enqueue_layer(int l) { dev_.enqueue_operators(dev_.step_operators(l, in_.get(), ping_[l % 2].get()), stream_); }

// The layers as one chain of steps (chain_operators: each layer's step_operators, or with the span each out_proj launch
// carrying the next layer's input side).
void GdnStack::enqueue() {
  std::vector<gdn::GdnDevice::StepRef> steps;
  for (int l = 0; l < dev_.layers(); ++l) steps.push_back({l, 0, in_.get(), ping_[l % 2].get()});
  dev_.enqueue_operators(dev_.chain_operators(steps), stream_);
}

std::vector<float> GdnStack::layer_output(int l) const {
  require(l >= 0 && l < dev_.layers(), "GdnStack::layer_output: layer " + std::to_string(l) + " of " + std::to_string(dev_.layers()));
  KLAB_CUDA(cudaStreamSynchronize(stream_));
  return ping_[l % 2].download();
}

void GdnStack::capture() {
  if (exec_) {
    cudaGraphExecDestroy(exec_);
    exec_ = nullptr;
  }
  KLAB_CUDA(cudaStreamSynchronize(stream_));
  cudaGraph_t graph = nullptr;
  KLAB_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  std::string thrown;
  try {
    enqueue();
  } catch (const std::exception& e) {
    thrown = e.what();
  }
  const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
  cudaGetLastError();  // a failed capture leaves its error behind
  if (!thrown.empty() || end != cudaSuccess || graph == nullptr) {
    if (graph) cudaGraphDestroy(graph);
    throw Error("gdn-stack: the " + std::to_string(dev_.layers()) + " layers cannot be captured in a CUDA graph: " +
                (!thrown.empty() ? thrown : std::string(cudaGetErrorName(end)) + " (" + cudaGetErrorString(end) + ")"));
  }
  std::size_t n = 0;
  KLAB_CUDA(cudaGraphGetNodes(graph, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  KLAB_CUDA(cudaGraphGetNodes(graph, nodes.data(), &n));
  nodes_ = int(n);
  kernel_nodes_ = copy_nodes_ = 0;
  for (auto node : nodes) {
    cudaGraphNodeType t{};
    KLAB_CUDA(cudaGraphNodeGetType(node, &t));
    kernel_nodes_ += t == cudaGraphNodeTypeKernel;
    copy_nodes_ += t == cudaGraphNodeTypeMemcpy || t == cudaGraphNodeTypeMemset;
  }
  const cudaError_t inst = cudaGraphInstantiate(&exec_, graph, 0);
  cudaGraphDestroy(graph);
  if (inst != cudaSuccess) {
    cudaGetLastError();
    exec_ = nullptr;
    throw Error(std::string("gdn-stack: the layers' CUDA graph cannot be instantiated: ") + cudaGetErrorName(inst) + " (" + cudaGetErrorString(inst) + ")");
  }
}

void GdnStack::launch() {
  require(exec_ != nullptr, "GdnStack::launch: no graph (capture() first)");
  KLAB_CUDA(cudaGraphLaunch(exec_, stream_));
}

void GdnStack::poison() {
  for (auto& p : ping_) poison_device(p.get(), p.size(), stream_);
}

std::vector<float> GdnStack::output() const {
  KLAB_CUDA(cudaStreamSynchronize(stream_));
  return ping_[(dev_.layers() - 1) % 2].download();
}

StackCheck check_stack(gdn::GdnDevice& dev, GdnStack& stack) {
  const int nl = dev.layers();
  StackCheck c;
  auto state = [&](rg::What w) {
    std::vector<std::vector<float>> v;
    for (int l = 0; l < nl; ++l) v.push_back(dev.get(l, w));
    return v;
  };
  auto max_abs = [](const std::vector<float>& v) {
    double m = 0;
    for (float x : v) m = std::max(m, double(std::fabs(x)));  // NaN compares false: finite is checked apart
    return m;
  };
  // Sequential: the layers enqueued one after another, from a zeroed state, each layer's output read
  // before the layer two on overwrites its buffer.
  dev.reset();
  stack.poison();
  for (int l = 0; l < nl; ++l) {
    stack.enqueue_layer(l);
    c.max_abs_by_layer.push_back(max_abs(stack.layer_output(l)));
  }
  const auto y_seq = stack.output();
  const auto S_seq = state(rg::What::S), h_seq = state(rg::What::HIST);
  // The graph, from a zeroed state again, its outputs poisoned first.
  if (!stack.captured()) stack.capture();
  dev.reset();
  stack.poison();
  stack.launch();
  const auto y = stack.output();
  c.out_differ = bitwise_diff(y, y_seq);
  c.compared = std::int64_t(y.size());
  for (int l = 0; l < nl; ++l) {
    const auto S = dev.get(l, rg::What::S), h = dev.get(l, rg::What::HIST);
    c.S_differ += bitwise_diff(S, S_seq[std::size_t(l)]);
    c.hist_differ += bitwise_diff(h, h_seq[std::size_t(l)]);
    c.compared += std::int64_t(S.size() + h.size());
  }
  c.finite = std::all_of(y.begin(), y.end(), [](float x) { return std::isfinite(x); });
  c.out_max_abs = max_abs(y);
  return c;
}

}  // namespace klab::experiments
