#include "klab/cuda.hpp"
#include "klab/metrics.hpp"

#include <string>

namespace klab {

void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line) {
  std::string f = file;
  if (auto pos = f.find_last_of('/'); pos != std::string::npos) f = f.substr(pos + 1);
  throw CudaError(code, std::string(call) + " failed at " + f + ":" + std::to_string(line) + ": " +
                            cudaGetErrorName(code) + " (" + cudaGetErrorString(code) + ")");
}

namespace {
__global__ void poison_kernel(float* p, std::size_t n, std::uint32_t bits) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    p[i] = __uint_as_float(bits);
}
}  // namespace

void poison_device(float* p, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  std::size_t blocks = (n + 255) / 256;
  if (blocks > 4096) blocks = 4096;
  poison_kernel<<<unsigned(blocks), 256, 0, stream>>>(p, n, kPoisonBits);
  KLAB_CUDA_LAUNCH("poison_kernel");
}

}  // namespace klab
