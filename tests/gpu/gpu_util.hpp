#pragma once
// Helpers for the gpu suite: run an instance once (poisoned first) and return its output; select
// variants as --variants does; count the elements two outputs differ in, bit for bit.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "klab/cuda.hpp"
#include "klab/experiment.hpp"
#include "klab/registry.hpp"

namespace klab::test {

inline std::vector<float> run_once(const Variant& v, const Workload& w) {
  auto inst = v.make(w);
  inst->poison(nullptr);
  inst->run(nullptr);
  KLAB_CUDA(cudaDeviceSynchronize());
  return inst->output();
}

// Whether `filter` (klab's --variants syntax: globs or fragments joined by '|') selects `name`.
inline bool name_matches(const std::string& filter, const std::string& name) {
  RunOptions o;
  o.variants = filter;
  return o.selects(name);
}

// How many elements of a and b (the same size) differ bit for bit, and the first that does (-1: none).
struct BitDiff {
  std::int64_t count = 0, first = -1;
  float a = 0.f, b = 0.f;
};
inline BitDiff bit_diff(const std::vector<float>& a, const std::vector<float>& b) {
  BitDiff d;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) == 0) continue;
    if (d.count++ == 0) d.first = std::int64_t(i), d.a = a[i], d.b = b[i];
  }
  return d;
}

}  // namespace klab::test
