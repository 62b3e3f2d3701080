// Peer for q4_gemv: llama.cpp's 4-bit mat-vec (MMVQ), ggml's own code, linked against ggml's CUDA
// backend (scripts/fetch_ggml builds it; configure with -DKLAB_GGML_DIR=...). Without ggml the
// variant is still registered and says why it cannot run.
//
// What runs: W repacked once into block_q4_0 (baselines/q4_0.hpp: exact), uploaded into a ggml CUDA
// buffer with x and y, and one ggml graph y = ggml_mul_mat(W [k x m] q4_0, x [k x 1] f32). With one
// column and a quantised W, ggml_cuda_mul_mat (ggml-cuda.cu) takes ggml_cuda_should_use_mmvq and
// calls ggml_cuda_mul_mat_vec_q (mmvq.cu): quantize_row_q8_1_cuda (x to q8_1 in ggml's pool), then
// mul_mat_vec_q for GGML_TYPE_Q4_0 (vec_dot_q4_0_q8_1: DP4A). Two kernels, as llama.cpp runs it.
//
// Streams. ggml's CUDA backend enqueues on a stream of its own, and its public API has no way to
// hand it another. run(s) therefore forks ggml's stream from s and joins it back, by events:
//   cudaEventRecord(fork, s); ggml_backend_event_wait(ggml, fork)      ggml's stream waits for s
//   ggml_backend_graph_compute_async(ggml, graph)                      the two kernels
//   ggml_backend_event_record(join, ggml); cudaStreamWaitEvent(s, join) s waits for them
// so whatever klab records on s before and after run() brackets the computation. The events are
// ggml's own (ggml_backend_event_new); their cudaEvent_t is ggml_backend_event::context, read
// through ggml-backend-impl.h (the one internal header used; scripts/fetch_ggml installs it).
// Under stream capture (the race's stream mode) the same fork and join pull ggml's stream into the
// capture: the graph holds ggml's two kernels, dependent on what came before. ggml is built without
// CUDA graphs of its own (GGML_CUDA_GRAPHS=OFF), so it never begins a capture of its own. Launch
// mode includes ggml's host-side dispatch (walking a one-node graph, picking the kernel) between
// the events; stream mode does not.
//
// Errors: ggml aborts the process on a failed CUDA call (CUDA_CHECK -> GGML_ABORT); nothing of it
// can be caught. klab checks what it calls itself.
#include <cstdlib>
#include <memory>

#include "baselines/baselines.hpp"
#include "baselines/q4_0.hpp"
#include "klab/error.hpp"
#include "q4_gemv/op.hpp"

#ifdef KLAB_HAVE_GGML
#include <cstdio>
#include <mutex>

#include "ggml-alloc.h"
#include "ggml-backend-impl.h"
#include "ggml-backend.h"
#include "ggml-cuda.h"
#include "ggml.h"
#include "klab/cuda.hpp"
#endif

namespace klab::baselines {

namespace {
// The llama-mmvq peer's max_rel budget against the f64 reference. MMVQ rounds x to int8 per block of
// 32 (q8_1: d = amax/127, q = roundf(x/d)), as the q8-dp4a form of map=packed does, but forms each
// block's dot from the unsigned codes u = n4 + 8 and takes the 8 back through the block's sum of the
// UNROUNDED x (stored as f16 beside d): d4 (d8 sum u q - 8 s8) = d4 (sum n4 x + sum n4 e + 8 sum e),
// e = d8 q - x the rounding error of each activation. The 8 sum e term does not shrink with the
// codes: where a block's codes are small (heavy-tailed W: one outlier sets the scale, most n4 are 0
// or +-1) it dominates. The model of that arithmetic (q4_0::mmvq_model; tests/cpu/test_llama_mmvq.cpp,
// CPU, 2026-12-01): uniform inputs 4.1e-3..5.2e-3 max_rel at the seed shapes (the q8-dp4a form
// 4.6e-3); Student-t 4.8e-2..7.0e-2 at the seed shapes (q8-dp4a 6.2e-3 at 6144x5120), up to 6.4e-2
// on the gpu suite's problems and 1.7e-1 at 129x1024 (seed 1; q8-dp4a 1.7e-2). 2.5e-1 holds all of
// them with a 1.5x margin over the worst and 3.5x over the seed shapes; a wrong nibble order or
// scale is off by O(1) (klab's nibble order taken for ggml's: 0.9..1.1 at 256x1024), which it still catches.
constexpr double kMmvqTolerance = 2.5e-1;

#ifdef KLAB_HAVE_GGML
// ggml's informational lines (device list at init) are dropped; warnings and errors go to stderr.
void ggml_log(enum ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_WARN || level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

// One CUDA backend per device for every instance (the copies of a stream-mode race share it, as
// llama.cpp's weights share one backend): one stream, one q8_1 pool. Freed with its last instance.
std::shared_ptr<ggml_backend> shared_backend() {
  static std::mutex mu;
  static std::weak_ptr<ggml_backend> cache;
  static int cached_device = -1;
  std::lock_guard<std::mutex> lock(mu);
  int dev = 0;
  KLAB_CUDA(cudaGetDevice(&dev));
  if (auto b = cache.lock(); b && cached_device == dev) return b;
  ggml_log_set(ggml_log, nullptr);
  ggml_backend_t raw = ggml_backend_cuda_init(dev);
  require(raw != nullptr, "llama-mmvq: ggml_backend_cuda_init(" + std::to_string(dev) + ") failed");
  std::shared_ptr<ggml_backend> b(raw, ggml_backend_free);
  cache = b;
  cached_device = dev;
  return b;
}

class MmvqInstance : public Instance {
 public:
  explicit MmvqInstance(const q4_gemv::Workload& wl) : backend_(shared_backend()), m_(wl.w.m), k_(wl.w.k) {
    const auto blocks = q4_0::repack(wl.w);
    // Metadata only (no_alloc): three tensors and one graph; the data lives in a CUDA buffer.
    ggml_init_params params{ggml_tensor_overhead() * 4 + ggml_graph_overhead(), nullptr, true};
    ctx_ = ggml_init(params);
    require(ctx_ != nullptr, "llama-mmvq: ggml_init failed");
    w_ = ggml_new_tensor_2d(ctx_, GGML_TYPE_Q4_0, k_, m_);  // ne = {k, m}: m rows of k/32 blocks
    x_ = ggml_new_tensor_2d(ctx_, GGML_TYPE_F32, k_, 1);
    y_ = ggml_mul_mat(ctx_, w_, x_);  // ne = {m, 1} f32
    graph_ = ggml_new_graph(ctx_);
    ggml_build_forward_expand(graph_, y_);
    buf_ = ggml_backend_alloc_ctx_tensors(ctx_, backend_.get());
    require(buf_ != nullptr, "llama-mmvq: ggml_backend_alloc_ctx_tensors failed (out of device memory?)");
    ggml_backend_buffer_set_usage(buf_, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    require(ggml_nbytes(w_) == blocks.size() * sizeof(q4_0::Block), "llama-mmvq: ggml's Q4_0 tensor is not m x k/32 blocks of 18 bytes");
    ggml_backend_tensor_set(w_, blocks.data(), 0, ggml_nbytes(w_));
    ggml_backend_tensor_set(x_, wl.x.data(), 0, ggml_nbytes(x_));
    fork_ = ggml_backend_event_new(ggml_backend_get_device(backend_.get()));
    join_ = ggml_backend_event_new(ggml_backend_get_device(backend_.get()));
    require(fork_ != nullptr && join_ != nullptr, "llama-mmvq: ggml_backend_event_new gave no event (ggml built with GGML_CUDA_NO_PEER_COPY?)");
  }
  ~MmvqInstance() override {
    if (fork_) ggml_backend_event_free(fork_);
    if (join_) ggml_backend_event_free(join_);
    if (buf_) ggml_backend_buffer_free(buf_);
    if (ctx_) ggml_free(ctx_);
  }
  MmvqInstance(const MmvqInstance&) = delete;
  MmvqInstance& operator=(const MmvqInstance&) = delete;

  void run(cudaStream_t s) override {
    KLAB_CUDA(cudaEventRecord(static_cast<cudaEvent_t>(fork_->context), s));
    ggml_backend_event_wait(backend_.get(), fork_);
    const ggml_status st = ggml_backend_graph_compute_async(backend_.get(), graph_);
    if (st != GGML_STATUS_SUCCESS) throw Error(std::string("llama-mmvq: ggml_backend_graph_compute_async: ") + ggml_status_to_string(st));
    ggml_backend_event_record(join_, backend_.get());
    KLAB_CUDA(cudaStreamWaitEvent(s, static_cast<cudaEvent_t>(join_->context), 0));
  }
  void poison(cudaStream_t s) override { poison_device(static_cast<float*>(y_->data), std::size_t(m_), s); }
  std::vector<float> output() override {
    std::vector<float> out(static_cast<std::size_t>(m_));
    KLAB_CUDA(cudaDeviceSynchronize());
    KLAB_CUDA(cudaMemcpy(out.data(), y_->data, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
    return out;
  }

 private:
  std::shared_ptr<ggml_backend> backend_;
  std::int64_t m_, k_;
  ggml_context* ctx_ = nullptr;
  ggml_tensor *w_ = nullptr, *x_ = nullptr, *y_ = nullptr;
  ggml_cgraph* graph_ = nullptr;
  ggml_backend_buffer_t buf_ = nullptr;
  ggml_backend_event_t fork_ = nullptr, join_ = nullptr;
};
#endif
}  // namespace

bool llama_mmvq_built() {
#ifdef KLAB_HAVE_GGML
  return true;
#else
  return false;
#endif
}

Variant llama_mmvq_variant() {
  Variant v;
  v.op = "q4_gemv";
  v.axes = {{"impl", "llama-mmvq"}};
  v.name = variant_name(v.op, v.axes);
  v.description =
      "peer: llama.cpp's MMVQ on ggml's CUDA backend (llama-cpp-python 0.3.36): W as block_q4_0 (exact repack), x to q8_1, "
      "mul_mat_vec_q (DP4A); on ggml's stream, forked and joined by events (launch mode includes ggml's host-side dispatch)";
  v.peer = true;
  v.tolerance = kMmvqTolerance;
  // A shape the op cannot have is refused as every q4 variant refuses it; any other, without ggml, as unavailable.
  v.can_implement = [](const Problem& p) {
    if (auto why = q4_gemv::validate(p); !why.empty()) return why;
    if (!llama_mmvq_built()) return std::string(kLlamaMmvqUnavailable);
    // ggml aborts the whole process on a failed CUDA call: KLAB_GGML=off keeps a build with ggml from
    // running it (e.g. on a machine where it has not been checked yet), shown as a skip.
    if (const char* off = std::getenv("KLAB_GGML"); off && std::string(off) == "off") return std::string("disabled by KLAB_GGML=off");
    return std::string();
  };
  v.make = [](const klab::Workload& wl) -> std::unique_ptr<Instance> {
#ifdef KLAB_HAVE_GGML
    return std::make_unique<MmvqInstance>(q4_gemv::workload_of(wl));
#else
    (void)wl;
    throw Error(std::string("q4_gemv/impl=llama-mmvq: ") + kLlamaMmvqUnavailable);
#endif
  };
  return v;
}

}  // namespace klab::baselines
