// Peers for q4_gemv: cuBLAS on the DEQUANTISED weights, raced in the same run as the q4 kernels.
//  - bf16 GemmEx (n = 1): W and x rounded to bf16, f32 accumulation and output. It reads 2 bytes per
//    weight (3.6x the q4 bytes).
//  - f32 SGEMV: dequant(W) exactly in f32 (4 bytes per weight, 7.1x the q4 bytes).
// Their GB/s in reports is computed from the q4 byte model (the op's), i.e. "q4-equivalent"
// bandwidth, so all variants of the op share one denominator.
// W row-major (m x k) is, to cuBLAS, a column-major (k x m) matrix with lda = k: y = W x is
// op(A) = A^T.
#include "baselines/baselines.hpp"
#include "baselines/cublas_util.hpp"
#include "klab/cuda.hpp"
#include "q4_gemv/op.hpp"

namespace klab::baselines {

namespace {
// The bf16 peer's max_rel budget against the f64 reference of the q4 problem. bf16 keeps 8
// significant bits: every weight and every x is rounded by up to 2^-9 relative, so each product is
// off by up to ~2^-8; the errors are independent across a row's k terms, so an output is off by
// ~2^-8/sqrt(3) * sqrt(sum (w x)^2): about 1e-3 of max|y| on many rows, three orders above f32
// rounding. With one row, max|y| is that row's |y|, which cancellation can make several times
// smaller than sqrt(sum (w x)^2): the rounding simulated on the CPU (f64 sums of the bf16-rounded
// problem, tests/cpu/test_q4_models.cpp "bf16 rounding of the peer stays within its tolerance")
// reaches 9.6e-3 on 1x160 (uniform, seed 1). 3e-2 keeps a 3x margin over that; a wrong element or
// layout is off by O(1).
constexpr double kBf16PeerTolerance = 3e-2;

class CublasBf16 : public Instance {
 public:
  explicit CublasBf16(const q4_gemv::Workload& wl) : m_(int(wl.w.m)), k_(int(wl.w.k)), y_(std::size_t(m_)) {
    w_ = DeviceBuffer<std::uint16_t>::from(ref::to_bf16(ref::q4_dequantize(wl.w)));
    x_ = DeviceBuffer<std::uint16_t>::from(ref::to_bf16(wl.x));
    KLAB_CUBLAS(cublasSetPointerMode(h_.get(), CUBLAS_POINTER_MODE_HOST));
  }
  void run(cudaStream_t s) override {
    const float one = 1.f, zero = 0.f;
    // y (m x 1) = A^T (m x k) x (k x 1); A is W seen column-major (k x m), lda = k.
    KLAB_CUBLAS(cublasGemmEx(h_.on(s), CUBLAS_OP_T, CUBLAS_OP_N, m_, 1, k_, &one, w_.get(), CUDA_R_16BF, k_, x_.get(), CUDA_R_16BF, k_,
                             &zero, y_.get(), CUDA_R_32F, m_, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
  void poison(cudaStream_t s) override { poison_device(y_.get(), y_.size(), s); }
  std::vector<float> output() override { return y_.download(); }

 private:
  int m_, k_;
  CublasHandle h_;
  DeviceBuffer<std::uint16_t> w_, x_;
  DeviceBuffer<float> y_;
};

std::string q4_can_implement(const Problem& p) {
  if (auto why = q4_gemv::validate(p); !why.empty()) return why;
  return "";
}
}  // namespace

std::vector<Variant> cublas_q4_variants() {
  Variant bf16;
  bf16.op = "q4_gemv";
  bf16.axes = {{"impl", "cublas-bf16-gemmex"}};
  bf16.name = variant_name(bf16.op, bf16.axes);
  bf16.description = "peer: cuBLAS GemmEx n=1 on dequant(W) and x rounded to bf16, f32 accumulate and output";
  bf16.peer = true;
  bf16.tolerance = kBf16PeerTolerance;
  bf16.can_implement = q4_can_implement;
  bf16.make = [](const klab::Workload& wl) { return std::unique_ptr<Instance>(new CublasBf16(q4_gemv::workload_of(wl))); };

  Variant f32;
  f32.op = "q4_gemv";
  f32.axes = {{"impl", "cublas-sgemv-f32"}};
  f32.name = variant_name(f32.op, f32.axes);
  f32.description = "peer: cuBLAS SGEMV on dequant(W) in f32 (exact), f32 x";
  f32.peer = true;
  f32.can_implement = q4_can_implement;
  f32.make = [](const klab::Workload& wl) {
    const auto& w = q4_gemv::workload_of(wl);
    return std::unique_ptr<Instance>(new SgemvInstance(int(w.w.m), int(w.w.k), ref::q4_dequantize(w.w), w.x));
  };
  return {std::move(bf16), std::move(f32)};
}

}  // namespace klab::baselines
