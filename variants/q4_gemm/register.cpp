// The q4_gemm family in the registry: impl=loop (n launches of a q4_gemv kernel, through q4_gemv's
// raw launcher API) and the batched kernels of gemm.cu, each bound to its bit-model.
#include <span>

#include "klab/cuda.hpp"
#include "q4_gemm/variants.hpp"
#include "q4_gemv/packed.hpp"
#include "q4_gemv/packed_kernels.hpp"
#include "q4_gemv/q4_gemv.hpp"

namespace klab::q4_gemm {

namespace {
using Axes = std::vector<std::pair<std::string, std::string>>;

// impl=loop: W packed once in the q4_gemv kernel's layout, X and Y uploaded once; run() launches
// the kernel once per column (x_j -> y_j), so W is read n times.
class LoopInstance : public Instance {
 public:
  LoopInstance(const q4_gemv::Q4Kernel& kern, const Workload& wl)
      : kern_(kern), m_(int(wl.w.m)), k_(int(wl.w.k)), n_(int(wl.n)), packed_(DeviceBuffer<std::uint8_t>::from(kern.layout->pack_host(wl.w))),
        x_(DeviceBuffer<float>::from(wl.x)), y_(std::size_t(n_) * std::size_t(m_)) {}
  void run(cudaStream_t s) override {
    for (int j = 0; j < n_; ++j)
      kern_.launch_packed(packed_.get(), x_.get() + std::size_t(j) * k_, y_.get() + std::size_t(j) * m_, m_, k_, s);
  }
  void poison(cudaStream_t s) override { poison_device(y_.get(), y_.size(), s); }
  std::vector<float> output() override { return y_.download(); }

 private:
  const q4_gemv::Q4Kernel& kern_;
  int m_, k_, n_;
  DeviceBuffer<std::uint8_t> packed_;
  DeviceBuffer<float> x_, y_;
};

// A batched kernel: W packed once (q4_gemv's layout of R rows), X uploaded once, the prepared-x
// workspace owned by the instance; run() only launches.
class GemmInstance : public Instance {
 public:
  GemmInstance(const GemmKernel& kern, const Workload& wl)
      : kern_(kern), m_(int(wl.w.m)), k_(int(wl.w.k)), n_(int(wl.n)),
        packed_(DeviceBuffer<std::uint8_t>::from(q4_gemv::packed::pack(wl.w, kern.rows))), x_(DeviceBuffer<float>::from(wl.x)),
        y_(std::size_t(n_) * std::size_t(m_)), ws_(workspace_bytes(k_, n_)) {}
  void run(cudaStream_t s) override { kern_.launch(packed_.get(), x_.get(), y_.get(), m_, k_, n_, ws_.get(), s); }
  void poison(cudaStream_t s) override { poison_device(y_.get(), y_.size(), s); }
  std::vector<float> output() override { return y_.download(); }

 private:
  const GemmKernel& kern_;
  int m_, k_, n_;
  DeviceBuffer<std::uint8_t> packed_;
  DeviceBuffer<float> x_, y_;
  DeviceBuffer<std::uint8_t> ws_;
};

std::string can_implement(const Problem& p) {
  if (auto why = validate(p); !why.empty()) return why;
  return launch_error(p.param("m"), p.param("k"), p.param("n"));
}

Variant loop_variant() {
  const q4_gemv::Q4Kernel& kern = q4_gemv::q4_kernel(kLoopGemv);
  Variant v;
  v.op = kOp;
  v.axes = Axes{{"impl", "loop"}};
  v.axes.insert(v.axes.end(), kern.axes.begin(), kern.axes.end());
  v.name = variant_name(v.op, v.axes);
  v.description = "n launches of " + kern.name + " (one per column, through q4_gemv's raw launcher): W read n times; the baseline";
  v.can_implement = can_implement;
  v.tolerance = kern.tolerance;
  const q4_gemv::Q4Kernel* kp = &kern;
  v.make = [kp](const klab::Workload& wl) { return std::unique_ptr<Instance>(new LoopInstance(*kp, workload_of(wl))); };
  const q4_gemv::Q4Model model = q4_gemv::q4_model(kern.name);
  v.cpu_model = [model](const klab::Workload& wl) {
    const auto& w = workload_of(wl);
    const std::size_t m = std::size_t(w.w.m), k = std::size_t(w.w.k);
    std::vector<float> y;
    y.reserve(std::size_t(w.n) * m);
    for (std::size_t j = 0; j < std::size_t(w.n); ++j) {
      const auto yj = model(w.w, std::span<const float>(w.x).subspan(j * k, k));
      y.insert(y.end(), yj.begin(), yj.end());
    }
    return y;
  };
  return v;
}

Variant batched_variant(const GemmKernel& kern) {
  Variant v;
  v.op = kOp;
  v.axes = kern.axes;
  v.name = variant_name(v.op, v.axes);
  v.description = "x of all n columns quantised to q8 by a first PDL-chained launch into the instance's workspace; then one thread block per " +
                  std::to_string(kern.rows) + " rows (map=packed tiles) loads its codes and scales once and, " + std::to_string(kern.cols) +
                  " columns per barrier, forms q4_gemv's q8-dp4a block values, transposed butterfly and warp sum per column: W read once, "
                  "each column bit for bit q4_gemv's q8-dp4a output";
  v.can_implement = can_implement;
  // x rounded to int8 per block, as q4_gemv's q8-dp4a form (packed.hpp: form_tolerance says why).
  v.tolerance = q4_gemv::packed::form_tolerance(q4_gemv::packed::Form::q8);
  const GemmKernel* kp = &kern;
  v.make = [kp](const klab::Workload& wl) { return std::unique_ptr<Instance>(new GemmInstance(*kp, workload_of(wl))); };
  v.cpu_model = [](const klab::Workload& wl) {
    const auto& w = workload_of(wl);
    return model_batched(w.w, w.x, w.n);
  };
  return v;
}
}  // namespace

std::vector<Variant> gemm_variants() {
  std::vector<Variant> out{loop_variant()};
  for (const GemmKernel& k : gemm_kernels()) out.push_back(batched_variant(k));
  return out;
}

void register_all(Registry& r) {
  r.add(make_op());
  for (auto& v : gemm_variants()) r.add(std::move(v));
}

}  // namespace klab::q4_gemm
