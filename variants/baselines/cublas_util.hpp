#pragma once
// cuBLAS helpers shared by the peer baselines: status checking that names the call, and a handle.
#include <cublas_v2.h>

#include <string>

#include "klab/error.hpp"

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

}  // namespace klab::baselines
