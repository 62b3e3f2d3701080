#pragma once
// Helpers for the gpu suite: run an instance once (poisoned first) and return its output.
#include <cuda_runtime.h>

#include <vector>

#include "klab/cuda.hpp"
#include "klab/registry.hpp"

namespace klab::test {

inline std::vector<float> run_once(const Variant& v, const Workload& w) {
  auto inst = v.make(w);
  inst->poison(nullptr);
  inst->run(nullptr);
  KLAB_CUDA(cudaDeviceSynchronize());
  return inst->output();
}

}  // namespace klab::test
