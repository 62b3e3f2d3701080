// Peer: cuBLAS SGEMV on the f32_gemv workload. W row-major (m x k) is, to cuBLAS, a column-major
// (k x m) matrix with lda = k, so y = W x is SGEMV with CUBLAS_OP_T.
#include "baselines/baselines.hpp"
#include "baselines/cublas_util.hpp"
#include "f32_gemv/op.hpp"
#include "klab/cuda.hpp"

namespace klab::baselines {

namespace {
class CublasSgemv : public Instance {
 public:
  explicit CublasSgemv(const f32_gemv::Workload& wl)
      : m_(int(wl.problem.shape.m)), k_(int(wl.problem.shape.k)), w_(DeviceBuffer<float>::from(wl.w)),
        x_(DeviceBuffer<float>::from(wl.x)), y_(std::size_t(m_)) {
    KLAB_CUBLAS(cublasSetPointerMode(h_.get(), CUBLAS_POINTER_MODE_HOST));
  }
  void run(cudaStream_t s) override {
    const float one = 1.f, zero = 0.f;
    KLAB_CUBLAS(cublasSgemv(h_.on(s), CUBLAS_OP_T, k_, m_, &one, w_.get(), k_, x_.get(), 1, &zero, y_.get(), 1));
  }
  void poison(cudaStream_t s) override { poison_device(y_.get(), y_.size(), s); }
  std::vector<float> output() override { return y_.download(); }

 private:
  int m_, k_;
  CublasHandle h_;
  DeviceBuffer<float> w_, x_, y_;
};
}  // namespace

Variant cublas_sgemv_variant() {
  Variant v;
  v.op = "f32_gemv";
  v.axes = {{"impl", "cublas-sgemv"}};
  v.name = variant_name(v.op, v.axes);
  v.description = "peer: cuBLAS SGEMV (CUBLAS_OP_T on the row-major weights)";
  v.peer = true;
  v.make = [](const klab::Workload& wl) { return std::unique_ptr<Instance>(new CublasSgemv(f32_gemv::workload_of(wl))); };
  return v;
}

}  // namespace klab::baselines
