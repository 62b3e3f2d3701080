#pragma once
// CUDA error checking that names the failing call, file and line, and RAII device memory.
#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "klab/error.hpp"

namespace klab {

struct CudaError : Error {
  cudaError_t code;
  CudaError(cudaError_t c, const std::string& what) : Error(what), code(c) {}
};

[[noreturn]] void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line);

}  // namespace klab

// KLAB_CUDA(cudaMalloc(&p, n)); throws klab::CudaError "cudaMalloc(&p, n) failed at f.cu:12: out of memory"
#define KLAB_CUDA(call)                                                            \
  do {                                                                             \
    cudaError_t klab_err_ = (call);                                                \
    if (klab_err_ != cudaSuccess) ::klab::throw_cuda_error(klab_err_, #call, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: checks the launch configuration error (not the kernel's execution).
#define KLAB_CUDA_LAUNCH(what) KLAB_CUDA(cudaGetLastError())

namespace klab {

// Owns `n` elements of T in device memory. Move-only.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n) : n_(n) {
    if (n_ > 0) KLAB_CUDA(cudaMalloc(reinterpret_cast<void**>(&p_), n_ * sizeof(T)));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { release(); }

  T* get() const { return p_; }
  std::size_t size() const { return n_; }
  std::size_t bytes() const { return n_ * sizeof(T); }

  void upload(const T* src, std::size_t count) {
    require(count <= n_, "DeviceBuffer::upload: " + std::to_string(count) + " elements into a buffer of " + std::to_string(n_));
    KLAB_CUDA(cudaMemcpy(p_, src, count * sizeof(T), cudaMemcpyHostToDevice));
  }
  void upload(const std::vector<T>& src) { upload(src.data(), src.size()); }
  std::vector<T> download() const {
    std::vector<T> out(n_);
    if (n_ > 0) KLAB_CUDA(cudaMemcpy(out.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return out;
  }
  static DeviceBuffer from(const std::vector<T>& src) {
    DeviceBuffer b(src.size());
    b.upload(src);
    return b;
  }

 private:
  void release() noexcept {
    if (p_) cudaFree(p_);
    p_ = nullptr;
    n_ = 0;
  }
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

// Fills `n` floats at `p` with the poison pattern (a quiet NaN with a recognisable payload).
void poison_device(float* p, std::size_t n, cudaStream_t stream = nullptr);

// Launches `kernel` with programmatic stream serialization when `pdl` (cudaLaunchKernelEx), so
// that it may start while its predecessor in the stream finishes; plainly otherwise.
template <class... Params, class... Args>
void launch_maybe_pdl(bool pdl, void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem,
                      cudaStream_t s, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = pdl ? attr : nullptr;
  cfg.numAttrs = pdl ? 1 : 0;
  KLAB_CUDA(cudaLaunchKernelEx(&cfg, kernel, static_cast<Params>(std::forward<Args>(args))...));
}

}  // namespace klab
