#pragma once
// cuBLAS helpers shared by the peer baselines: status checking that names the call, and a handle.
#include <cublas_v2.h>

#include <string>
#include <vector>

#include "klab/cuda.hpp"
#include "klab/error.hpp"
#include "klab/registry.hpp"

#define KLAB_CUBLAS(call)                                                                             \
  do {                                                                                                \
    cublasStatus_t klab_st_ = (call);                                                                 \
    if (klab_st_ != CUBLAS_STATUS_SUCCESS)                                                            \
      throw ::klab::Error(std::string(#call) + " failed at " + __FILE__ + ":" + std::to_string(__LINE__) + \
                          ": " + cublasGetStatusName(klab_st_));                                      \
  } while (0)

namespace klab::baselines {

class CublasHandle {
 public:
  CublasHandle() { KLAB_CUBLAS(cublasCreate(&h_)); }
  ~CublasHandle() { cublasDestroy(h_); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return h_; }
  cublasHandle_t on(cudaStream_t s) {
    KLAB_CUBLAS(cublasSetStream(h_, s));
    return h_;
  }
 private:
  cublasHandle_t h_ = nullptr;
};

// y = W x by cuBLAS SGEMV, W row-major (m x k) f32 given on the host. To cuBLAS, W is a
// column-major (k x m) matrix with lda = k, so y = W x is SGEMV with CUBLAS_OP_T.
class SgemvInstance : public Instance {
 public:
  SgemvInstance(int m, int k, const std::vector<float>& w, const std::vector<float>& x)
      : m_(m), k_(k), w_(DeviceBuffer<float>::from(w)), x_(DeviceBuffer<float>::from(x)), y_(std::size_t(m)) {
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

}  // namespace klab::baselines
