#pragma once
// The projections of a GDN layer (y = W x) behind one small interface. The step body only ever calls
// Projection::enqueue, so the q4 tier puts the three big projections (in_proj_qkv, in_proj_z,
// out_proj) on a q4 mat-vec variant over a resident pool without touching the step (q4_pool.hpp:
// make_q4_projection; GdnDevice::use_q4 installs it). Here: the f32 tier.
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace klab::gdn {

class Projection {
 public:
  virtual ~Projection() = default;
  virtual std::int64_t rows() const = 0;  // outputs
  virtual std::int64_t cols() const = 0;  // inputs
  // What computes it, e.g. "f32/f32_gemv/impl=warp-row,unroll=1" (reports and error messages).
  virtual std::string describe() const = 0;
  // Enqueues y = W x on `stream`: x (cols), y (rows), both device pointers. No allocation, no sync.
  virtual void enqueue(const float* x, float* y, cudaStream_t stream) const = 0;
  // An f32 projection's weights on the device, (rows, cols) row-major; nullptr for any other.
  virtual const float* f32_weights() const { return nullptr; }
};

// The f32_gemv kernel the f32 tier uses by default (also for the small b|a projection, which stays
// f32 in every tier): one warp per output row, each lane sums a fixed strided subset of the row in a
// fixed order (16-byte loads when cols % 4 == 0), then a butterfly shuffle. Deterministic: the same
// inputs give the same bits on every run and for every layer.
inline constexpr const char* kDefaultF32Variant = "f32_gemv/impl=warp-row,unroll=1";

// An f32 projection that owns its weights on the device: W row-major (rows x cols), uploaded once,
// run by the f32_gemv kernel named `kernel` (klab::Error naming the known ones, before allocating).
std::unique_ptr<Projection> make_f32_projection(std::span<const float> w, std::int64_t rows, std::int64_t cols,
                                                const std::string& kernel = kDefaultF32Variant);

// y = W x by the f32_gemv kernel named `kernel` (the default one unless given): w (rows, cols)
// row-major; x (cols); y (rows).
void enqueue_f32_matvec(const float* w, const float* x, float* y, std::int64_t rows, std::int64_t cols, cudaStream_t stream,
                        const std::string& kernel = kDefaultF32Variant);

}  // namespace klab::gdn
