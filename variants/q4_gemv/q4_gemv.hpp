#pragma once
// The q4_gemv kernels by name, for callers that own their device buffers (the GDN q4 tier picks a
// mat-vec by variant name), and the CPU bit-models that reproduce each kernel's arithmetic.
//
// Buffers (device memory, layouts of klab/ref/q4.hpp):
//   codes  (m, k/2) uint8   two int4 weights per byte, even column in the low nibble
//   scales (m, k/32) uint16 f16 bit patterns, one per block of 32 weights along a row
//   x      (k) f32,   y (m) f32 (every element written; nothing read from y)
#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "klab/ref/q4.hpp"

namespace klab::q4_gemv {

constexpr const char* kOp = "q4_gemv";

// A kernel-native weight layout (the kernels of map=packed, packed.hpp): the raw matrix repacked
// once, when the weights are loaded, into one device buffer the kernel reads instead of codes and
// scales. Kernels of the raw layout above have none (Q4Kernel::layout == nullptr).
struct Q4Layout {
  std::string name;  // e.g. "tiles-r4"
  // Bytes of the packed form of an (m, k) matrix.
  std::size_t (*bytes)(std::int64_t m, std::int64_t k);
  // Enqueues the repack of raw device codes and scales into `packed` (bytes(m, k), 16-byte aligned)
  // on `stream`; throws klab::Error before enqueuing anything on a bad shape or a null buffer.
  void (*pack_device)(const std::uint8_t* codes, const std::uint16_t* scales, int m, int k, std::uint8_t* packed, cudaStream_t stream);
  // The same on the host (tests, and instances that upload the packed form).
  std::vector<std::uint8_t> (*pack_host)(const ref::Q4Matrix& w);
};

struct Q4Kernel {
  std::string name;  // the variant name, e.g. "q4_gemv/scale=per-lane,chains=4,f16=hard,rows=1"
  std::vector<std::pair<std::string, std::string>> axes;
  // Enqueues y = dequant(W) x on `stream`. Throws klab::Error, before launching anything, when
  // m or k is not positive, k % 32 != 0, or a pointer is null; a launch failure throws CudaError.
  void (*launch)(const std::uint8_t* codes, const std::uint16_t* scales, const float* x, float* y, int m, int k,
                 cudaStream_t stream);
  int rows_per_warp;  // rows one warp computes (the grid has ceil(m / rows_per_warp) warps)
  // Warps of this kernel one SM can hold at once on the current device (registers and the block
  // size permitting; cudaOccupancyMaxActiveBlocksPerMultiprocessor). Needs a device.
  int (*resident_warps_per_sm)();
  int warps_per_block;
  // Kernels with a layout of their own: `launch` refuses (klab::Error, before any CUDA call) and
  // launch_packed takes the buffer that layout->pack_device / pack_host made from the same matrix.
  const Q4Layout* layout = nullptr;
  void (*launch_packed)(const std::uint8_t* packed, const float* x, float* y, int m, int k, cudaStream_t stream) = nullptr;
  // launch_packed without the kernel's own x preparation: x is taken as already prepared, by its
  // producer, in prepared_x() (prepared_x.cuh states the contract; x itself is not read). Only the
  // grid=groups,xprep=launch|warps|warp,dot=q8-dp4a kernels without xpf/wpf (load=bulk included) and grid=split-k
  // have it (nullptr elsewhere). grid=split-k's own launch_packed (xprep=chunk) leaves prepared_x() untouched.
  void (*launch_prepared)(const std::uint8_t* packed, const float* x, float* y, int m, int k, cudaStream_t stream) = nullptr;
  // launch_packed with m32 f32 rows riding along in the main kernel's grid: also y32 = W32 x (W32 f32,
  // row-major m32 x k, 16-byte aligned; y32 apart from y), by a fixed-order f32 dot (f32_gemv's
  // split-row body over the grid's block size), the q4 rows' bits unchanged. The same kernels as launch_prepared (nullptr elsewhere).
  void (*launch_packed_rows)(const std::uint8_t* packed, const float* x, float* y, int m, int k, const float* w32, float* y32, int m32,
                             cudaStream_t stream) = nullptr;
  // max_rel against the f64 reference this kernel is held to (0: the default 1e-5 of exact f32
  // sums). Set only where the kernel rounds on purpose (x in f16 or int8); the reason is beside the
  // value (packed.hpp: form_tolerance).
  double tolerance = 0;
};

// All kernels, in registration order: the seed's 16-variant family, then block-per-lane,
// block-per-thread and map=packed.
const std::vector<Q4Kernel>& q4_kernels();
// The kernel named `variant_name`; throws klab::Error naming the known ones when there is none.
const Q4Kernel& q4_kernel(const std::string& variant_name);

// The CPU bit-model of a variant: the same lane-to-element mapping, chain assignment, fma and
// shuffle-reduction order as its kernel, so it must equal the kernel bit for bit (non-NaN scales).
using Q4Model = std::vector<float> (*)(const ref::Q4Matrix& w, std::span<const float> x);
struct Q4ModelEntry {
  std::string name;
  Q4Model model;
};
const std::vector<Q4ModelEntry>& q4_models();
// Throws klab::Error for an unknown name; the model throws klab::Error on mismatched sizes.
Q4Model q4_model(const std::string& variant_name);
// What every model checks first: W coherent and x of k elements (klab::Error naming the mismatch).
void check_model_args(const ref::Q4Matrix& w, std::span<const float> x);

// Why the launcher refuses (m, k) (empty: it accepts).
std::string launch_error(std::int64_t m, std::int64_t k);

}  // namespace klab::q4_gemv
