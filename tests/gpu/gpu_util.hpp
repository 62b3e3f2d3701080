#pragma once
// Helpers for the gpu suite: run an instance once (poisoned first) and return its output; the variants
// a case runs (KLAB_GPU_VARIANTS) and its replays (KLAB_GPU_REPLAYS); the first element two outputs differ
// in, bit for bit.
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "klab/catalog.hpp"
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

// The variants of `op` the gpu cases run: all, or with KLAB_GPU_VARIANTS set, those its filter selects (klab's
// --variants syntax: globs or fragments joined by '|'), to chase one variant's failure alone.
inline std::vector<const Variant*> selected_variants(const std::string& op) {
  auto variants = registry().variants_of(op);
  if (const char* only = std::getenv("KLAB_GPU_VARIANTS")) {
    RunOptions o;
    o.variants = only;
    std::erase_if(variants, [&](const Variant* v) { return !o.selects(v->name); });
  }
  return variants;
}

// The replays after reset a replaying case runs: KLAB_GPU_REPLAYS, default 1 (a case fails on anything but a
// positive integer).
inline int replays() {
  const char* env = std::getenv("KLAB_GPU_REPLAYS");
  const int n = env ? std::atoi(env) : 1;
  REQUIRE_MESSAGE(n >= 1, "KLAB_GPU_REPLAYS must be a positive integer, not '" << env << "'");
  return n;
}

// The first element of a and b whose bits differ, as "at I: A then B" ("" where none does).
inline std::string first_difference(std::span<const float> a, std::span<const float> b) {
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) == 0) continue;
    char text[96];
    std::snprintf(text, sizeof text, "at %zu: %.9g then %.9g", i, double(a[i]), double(b[i]));
    return text;
  }
  return "";
}

}  // namespace klab::test
