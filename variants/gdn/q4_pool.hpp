#pragma once
// The GDN q4 tier's weights: a resident pool of raw-q4 tensors under integer keys (seed-digest.md
// section 4), the bookkeeping that lets a layer know its keys still name the tensors it was bound to,
// and the Projection that runs a q4_gemv kernel, chosen by variant name, on a pooled tensor.
//
// Contracts, each enforced by code (and pinned by tests/cpu/test_gdn_q4_pool.cpp and
// tests/gpu/test_gdn_q4.cpp):
//   - put() refuses, before allocating anything, a key already present (erase or clear first: a
//     tensor is never silently replaced under a layer), a shape a q4 kernel cannot take and codes or
//     scales whose sizes do not match the shape;
//   - every put() gives the tensor a stamp never used before in this process; a layer holds
//     (key, stamp, shape) per projection (Q4Binding). erase(), clear() and a rebuild (clear, then put
//     the same keys again, even with the same shapes) therefore leave every binding of the affected
//     keys stale, and resolving a stale binding throws klab::Error naming the key and why: a
//     same-shaped tensor can never silently stand in for another;
//   - bind_q4() checks the three keys of a layer all at once (present, pairwise distinct, exactly the
//     shapes the geometry expects) and either returns all three bindings or the reason, never a part.
// The pool's bookkeeping (Q4Index, bind_q4) is host code without CUDA, so the CPU suite tests it;
// Q4Pool adds the device buffers.
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gdn/projection.hpp"
#include "klab/cuda.hpp"
#include "klab/ref/gdn.hpp"
#include "klab/ref/q4.hpp"

namespace klab::q4_gemv {
struct Q4Kernel;
struct Q4Layout;
}

namespace klab::gdn {

// The q4 mat-vec the q4 tier uses unless told otherwise (GdnDevice::set_q4_variant): the fastest
// EXACT kernel inside the GDN step (f32 arithmetic, held to 1e-5, bit-model equals the kernel) among
// those that pass their guards. Re-raced on an NVIDIA H200, 2026-12-01 (gdn-q4-layer, Qwen3.5-27B
// geometry, 16 tokens per repetition, device-resident, read flush, all 39 q4_gemv kernels inside the
// step; reports/h200/, commit ade16ef): this one 0.0721 ms per layer per token, the fastest exact;
// block-per-thread,rows=8 0.0755 ms. The rounding forms of map=packed are faster inside the step
// (q8-dp4a,grid=groups,xprep=launch,rows=8 0.0559 ms; f16x2,grid=groups,xprep=launch 0.0619 ms) but would change the tier's
// accuracy (q8 activations: max_rel ~4e-3 per mat-vec against ~1e-6), so they are no default; choose
// one by name where that accuracy is acceptable. Earlier: 0.0714 ms (2026-11-30, commit c5d6ac0,
// memset flush); the seed's rung B, the first default, 0.156 ms on its RTX 5090.
inline constexpr const char* kDefaultQ4Variant = "q4_gemv/map=block-per-thread,dot=offset,rows=8";

// The q4 kernel named `variant` (a q4_gemv variant with a raw launcher); throws klab::Error naming
// the known ones when there is none (e.g. a cuBLAS peer, which has no raw launcher).
const q4_gemv::Q4Kernel& q4_kernel_by_name(const std::string& variant);

struct Q4Shape {
  std::int64_t rows = 0, cols = 0;  // outputs, inputs
  std::string str() const { return std::to_string(rows) + "x" + std::to_string(cols); }
  bool operator==(const Q4Shape&) const = default;
};

// What a layer holds for one projection: the key, the stamp of the tensor it was bound to, its shape.
struct Q4Binding {
  int key = 0;
  std::uint64_t stamp = 0;
  Q4Shape shape;
};

// Keys, shapes and stamps of a pool (no device memory).
class Q4Index {
 public:
  // Why `key` with `shape` cannot be added ("" when it can): the key is taken, or the shape is not
  // one a q4 kernel takes (rows, cols positive, cols % 32 == 0, both below 2^31).
  std::string can_add(int key, const Q4Shape& shape) const;
  // Adds it and returns its new stamp; throws klab::Error with can_add's reason.
  std::uint64_t add(int key, const Q4Shape& shape);
  bool has(int key) const { return entries_.count(key) != 0; }
  std::optional<Q4Shape> shape(int key) const;
  std::optional<std::uint64_t> stamp(int key) const;
  // Removes `key`; false when it was not there.
  bool erase(int key);
  // Removes every key; generation() counts the clears.
  void clear();
  std::uint64_t generation() const { return generation_; }
  std::vector<int> keys() const;  // ascending
  std::size_t size() const { return entries_.size(); }
  // Why `b` no longer names the tensor it was bound to ("" when it does): the key was erased or
  // cleared, or re-put (a new stamp), or holds another shape.
  std::string stale(const Q4Binding& b) const;

 private:
  struct Entry {
    Q4Shape shape;
    std::uint64_t stamp = 0;
  };
  std::map<int, Entry> entries_;
  std::uint64_t generation_ = 0;
};

// The three big projections of a layer, in the step's order.
enum class BigProj { qkv = 0, z = 1, out = 2 };
const char* to_string(BigProj p);  // "in_proj_qkv", "in_proj_z", "out_proj"
// The shape the geometry expects for each: qkv (conv_dim, hidden), z (nv*dv, hidden), out (hidden, nv*dv).
Q4Shape expected_shape(const ref::gdn::Geometry& g, BigProj p);

struct Q4Keys {
  int qkv = 0, z = 0, out = 0;
  int operator[](BigProj p) const { return p == BigProj::qkv ? qkv : p == BigProj::z ? z : out; }
  std::string str() const;  // "qkv=1 z=2 out=3"
};
using Q4Bindings = std::array<Q4Binding, 3>;  // indexed by BigProj

// All or nothing: the three bindings when every key is present, the three keys are pairwise distinct
// and each holds exactly the shape `g` expects for its projection; otherwise every reason, joined by
// "; ", and *out untouched.
std::string bind_q4(const Q4Index& idx, const ref::gdn::Geometry& g, const Q4Keys& keys, Q4Bindings* out);

// A pool of q4 tensors resident in device memory.
class Q4Pool {
 public:
  // A pooled tensor's device buffers (layouts of klab/ref/q4.hpp).
  struct Tensor {
    const std::uint8_t* codes = nullptr;    // (rows, cols/2)
    const std::uint16_t* scales = nullptr;  // (rows, cols/32) f16 bits
    Q4Shape shape;
    std::uint64_t stamp = 0;
    const std::uint8_t* packed = nullptr;   // the same matrix in layout() (use_layout), or nullptr
  };

  Q4Pool() = default;
  Q4Pool(const Q4Pool&) = delete;
  Q4Pool& operator=(const Q4Pool&) = delete;

  // Uploads q under `key`. Refused with klab::Error, before any allocation: key taken, bad shape,
  // codes/scales sizes that do not match (Q4Matrix::check). Returns the stamp.
  std::uint64_t put(int key, const ref::Q4Matrix& q);
  bool has(int key) const { return index_.has(key); }
  std::optional<Q4Shape> shape(int key) const { return index_.shape(key); }
  // Keeps every tensor also in `layout`, the weight layout of a q4_gemv kernel of its own (map=packed;
  // nullptr: the raw buffers only): packs those that lack it now, on the device, and waits; frees
  // copies in any other layout; put() packs later tensors too. For GdnDevice::set_q4_variant, outside
  // any step (it allocates and synchronises).
  void use_layout(const q4_gemv::Q4Layout* layout);
  const q4_gemv::Q4Layout* layout() const { return layout_; }
  // Frees `key` (false when absent) / every key. Both wait for the device first (cudaDeviceSynchronize),
  // so no enqueued kernel still reads a freed tensor.
  bool erase(int key);
  void clear();
  const Q4Index& index() const { return index_; }
  std::int64_t bytes() const;  // device bytes held (codes + scales, and the packed copies)

  // The tensor `b` is bound to; throws klab::Error "WHO: ..." naming the key and why when b is stale.
  // (No allocation on success: it runs for every projection of every step.)
  Tensor resolve(const Q4Binding& b, std::string_view who) const;
  // The tensor under `key` copied back to the host (tests); throws klab::Error when absent.
  ref::Q4Matrix download(int key) const;

 private:
  struct Buffers {
    DeviceBuffer<std::uint8_t> codes;
    DeviceBuffer<std::uint16_t> scales;
    DeviceBuffer<std::uint8_t> packed;  // in layout_, when set
  };
  void pack(Buffers& b, const Q4Shape& s) const;
  Q4Index index_;
  std::map<int, Buffers> buffers_;
  const q4_gemv::Q4Layout* layout_ = nullptr;
};

// The q4 tier's shared settings, owned by GdnDevice at a stable address: the pool and the kernel.
struct Q4Tier {
  Q4Pool pool;
  const q4_gemv::Q4Kernel* kernel = nullptr;
};

// A projection over a pooled tensor: y = dequant(W) x by tier->kernel. enqueue() resolves the
// binding on every call (a stale one throws klab::Error: no silent fallback) and launches.
std::unique_ptr<Projection> make_q4_projection(const Q4Tier& tier, const Q4Binding& b, BigProj which);

}  // namespace klab::gdn
