#pragma once
// A token through a stack of GDN layers (issue 14 part 5, experiment gdn-stack): nl layers of one
// GdnDevice (variants/gdn/gdn_device.hpp), every layer on weights of its own in device memory,
// every layer fed the token (no residual stream: see GdnStack::enqueue), enqueued one layer after
// another or captured once into one CUDA graph. Only GdnDevice's public API is used (step_operators and enqueue_operators per layer); the graph is built
// here, by stream capture, not by the device object.
//
// Contracts:
//   - stack_need() is computed from the host weights that will be loaded (their actual sizes, the
//     q4 codes and scales as put into the pool), not from a second byte model; stack_fit_error()
//     refuses, naming the need, the free memory and the tier, a stack that does not fit;
//   - load_stack_f32 / load_stack_q4 give every layer DISTINCT device buffers: f32 one load_f32 per
//     layer, q4 three pool tensors per layer under keys 3l+1, 3l+2, 3l+3 (each layer reads its own
//     bytes; 48 layers are not one layer's weights read 48 times from L2);
//   - GdnStack::enqueue is the only place the layer chain is written; capture() records exactly
//     that call, so the graph and the sequential enqueue run the same kernels on the same buffers;
//   - check_stack() compares the graph with the sequential enqueue from the same zeroed state, bit
//     for bit: the output, and every layer's S and conv history after the token.
#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gdn/gdn_device.hpp"
#include "gdn/step_op.hpp"
#include "klab/cuda.hpp"
#include "klab/ref/gdn.hpp"
#include "klab/ref/gdn_q4.hpp"

namespace klab::experiments {

// Device bytes a stack of `layers` layers holds, per part.
struct StackNeed {
  int layers = 0;
  std::int64_t weights = 0;  // per layer: the big three (f32, or q4 codes + f16 scales) and the small f32 ones
  std::int64_t state = 0;    // per layer: S and the conv history (f32)
  std::int64_t scratch = 0;  // per layer: the intermediates a layer keeps for readback (f32)
  std::int64_t fixed = 0;    // the stack's input and ping-pong buffers, and headroom (allocator, graph)
  std::int64_t total() const { return std::int64_t(layers) * (weights + state + scratch) + fixed; }
};
// What a stack of `layers` layers of w's geometry needs: q == nullptr for the f32 tier, else the q4
// tier's projections (their codes and scales replace w's big three).
StackNeed stack_need(const ref::gdn::LayerWeights& w, const ref::gdn::Q4Projections* q, int layers);
// "" when `need` fits `free_bytes`; otherwise the refusal: the tier, layers and geometry, the need
// in GB (and its parts), the free memory, and what to do (fewer layers, the q4 tier, --quick).
std::string stack_fit_error(const StackNeed& need, std::int64_t free_bytes, const std::string& tier, const std::string& geometry);

// The q4 pool keys of layer l's three projections (qkv, z, out): 3l+1, 3l+2, 3l+3.
gdn::Q4Keys stack_keys(int layer);
// Loads w into every layer of dev (f32 tier): distinct device buffers per layer. The big three are
// page-locked for the copies when the host allows it (faster; plain copies otherwise).
void load_stack_f32(gdn::GdnDevice& dev, const ref::gdn::LayerWeights& w);
// Puts q into dev's pool once per layer (stack_keys) and binds each layer to its own three tensors
// with w's small weights. Throws klab::Error naming the layer and why when a binding is refused.
void load_stack_q4(gdn::GdnDevice& dev, const ref::gdn::LayerWeights& w, const ref::gdn::Q4Projections& q);

// A least-squares line y = a + b x through the points (x[i], y[i]) (gdn-stack-layers: a graph's time
// per token against its layer count, b its cost per layer and a its fixed part), and the largest
// |y[i] - (a + b x[i])| / |y[i]| over the points. Throws klab::Error when the sizes differ, there are
// fewer than two points, the x are all equal, or a value is not finite.
struct LineFit {
  double a = 0, b = 0;
  double max_rel_residual = 0;
};
LineFit fit_line(std::span<const double> x, std::span<const double> y);

// gdn-stack's plan (experiments/gdn_stack.cpp), host-side: its tiers in the order it measures them, each once (f32,
// f32-fast, q4, q4-fast, then every twin's), and its twin races: B claimed faster than A per token as one graph under the
// claim `claim` (an id of gdn-stack's), both tiers of the list. A tier's configuration: stack_config (fast tiers only).
std::vector<std::string> stack_tiers();
struct StackRace {
  std::string a, b, claim;
};
std::vector<StackRace> stack_races();
gdn::FusedStepConfig stack_config(const std::string& fast_tier);

// One token through every layer of a loaded GdnDevice, on `stream` (the device's stream is set to it).
class GdnStack {
 public:
  GdnStack(gdn::GdnDevice& dev, cudaStream_t stream);
  ~GdnStack();
  GdnStack(const GdnStack&) = delete;
  GdnStack& operator=(const GdnStack&) = delete;

  // The token (hidden floats) every run reads.
  void set_input(std::span<const float> h);
  // Every layer l reads the input and writes ping[l % 2]: its step's operators (step_operators,
  // enqueue_operators: the step's kernels and no copy of its output for get(OUT), which a stack does
  // not read) for l = 0..nl-1 on the stream, no sync.
  void enqueue();
  void enqueue_layer(int l);
  // Layer l's output as its buffer holds it now (syncs the stream): right after enqueue_layer(l),
  // before layer l + 2 overwrites it.
  std::vector<float> layer_output(int l) const;
  // Captures enqueue() into one CUDA graph and instantiates it (replacing any earlier one). Throws
  // klab::Error with CUDA's reason when the layers cannot be captured.
  void capture();
  bool captured() const { return exec_ != nullptr; }
  // One launch of the graph on the stream (capture() first), no sync.
  void launch();
  // Nodes of the captured graph: all of them, the kernel nodes among them, and the memcpy and
  // memset nodes (none since 2026-12-02: see enqueue).
  int nodes() const { return nodes_; }
  int kernel_nodes() const { return kernel_nodes_; }
  int copy_nodes() const { return copy_nodes_; }
  // Fills both ping-pong buffers with the poison pattern (enqueued).
  void poison();
  // The last layer's output (syncs the stream).
  std::vector<float> output() const;
  cudaStream_t stream() const { return stream_; }

 private:
  gdn::GdnDevice& dev_;
  cudaStream_t stream_;
  DeviceBuffer<float> in_, ping_[2];
  cudaGraphExec_t exec_ = nullptr;
  int nodes_ = 0, kernel_nodes_ = 0, copy_nodes_ = 0;
};

// The graph against the sequential enqueue, each from a zeroed state, and what the token became.
struct StackCheck {
  std::int64_t out_differ = 0, S_differ = 0, hist_differ = 0;  // elements differing bit for bit
  std::int64_t compared = 0;                                   // elements compared in all
  bool finite = true;                                          // the graph's output has no NaN or Inf
  double out_max_abs = 0;                                      // max |value| of the graph's output
  std::vector<double> max_abs_by_layer;                        // max |output| of each layer (sequential run)
  bool bitwise() const { return out_differ == 0 && S_differ == 0 && hist_differ == 0; }
};
// Resets the state, runs the layers sequentially (enqueue), keeps the output and every layer's S and
// hist; resets again, poisons, launches the graph (capturing it first if needed) and compares.
// Leaves the state as the graph left it (one token in).
StackCheck check_stack(gdn::GdnDevice& dev, GdnStack& stack);

}  // namespace klab::experiments
