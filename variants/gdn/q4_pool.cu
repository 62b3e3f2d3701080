// The GDN q4 pool's device side: the resident tensors, and the Projection that runs a q4_gemv kernel
// on one of them.
#include <stdexcept>

#include "gdn/q4_pool.hpp"
#include "klab/error.hpp"
#include "q4_gemv/q4_gemv.hpp"

namespace klab::gdn {

std::uint64_t Q4Pool::put(int key, const ref::Q4Matrix& q) {
  const Q4Shape s{q.m, q.k};
  // Every refusal before the first allocation.
  if (auto why = index_.can_add(key, s); !why.empty()) throw Error("q4 pool: " + why);
  try {
    q.check();
  } catch (const std::invalid_argument& e) {
    throw Error("q4 pool: key " + std::to_string(key) + ": " + e.what());
  }
  Buffers b;
  try {
    b.codes = DeviceBuffer<std::uint8_t>::from(q.codes);
    b.scales = DeviceBuffer<std::uint16_t>::from(q.scales);
  } catch (const CudaError& e) {
    if (e.code != cudaErrorMemoryAllocation) throw;
    cudaGetLastError();  // not sticky; clear it for the caller
    throw Error("q4 pool: key " + std::to_string(key) + ": " + s.str() + " (" + std::to_string(double(q.codes.size() + 2 * q.scales.size()) / 1e6) +
                " MB) does not fit on the device: " + e.what());
  }
  // cudaMemcpy from pageable memory may return before the DMA lands, and a kernel on a non-blocking
  // stream would not wait for it: finish here, once per put.
  KLAB_CUDA(cudaDeviceSynchronize());
  if (layout_) pack(b, s);
  const std::uint64_t st = index_.add(key, s);  // cannot fail now: can_add said yes
  buffers_[key] = std::move(b);
  return st;
}

void Q4Pool::pack(Buffers& b, const Q4Shape& s) const {
  b.packed = DeviceBuffer<std::uint8_t>(layout_->bytes(s.rows, s.cols));
  layout_->pack_device(b.codes.get(), b.scales.get(), int(s.rows), int(s.cols), b.packed.get(), nullptr);
  KLAB_CUDA(cudaDeviceSynchronize());
}

void Q4Pool::use_layout(const q4_gemv::Q4Layout* layout) {
  if (layout == layout_) return;
  KLAB_CUDA(cudaDeviceSynchronize());  // nothing enqueued still reads a copy freed here
  layout_ = layout;
  for (auto& [key, b] : buffers_) {
    b.packed = DeviceBuffer<std::uint8_t>();
    if (layout_) pack(b, *index_.shape(key));
  }
}

bool Q4Pool::erase(int key) {
  if (!index_.has(key)) return false;
  KLAB_CUDA(cudaDeviceSynchronize());
  buffers_.erase(key);
  index_.erase(key);
  return true;
}

void Q4Pool::clear() {
  KLAB_CUDA(cudaDeviceSynchronize());
  buffers_.clear();
  index_.clear();
}

std::int64_t Q4Pool::bytes() const {
  std::int64_t n = 0;
  for (const auto& [k, b] : buffers_) n += std::int64_t(b.codes.bytes() + b.scales.bytes() + b.packed.bytes());
  return n;
}

Q4Pool::Tensor Q4Pool::resolve(const Q4Binding& b, std::string_view who) const {
  if (auto why = index_.stale(b); !why.empty()) throw Error(std::string(who) + ": " + why + "; the q4 tier never falls back to f32");
  const Buffers& buf = buffers_.at(b.key);
  return Tensor{buf.codes.get(), buf.scales.get(), b.shape, b.stamp, buf.packed.get()};
}

ref::Q4Matrix Q4Pool::download(int key) const {
  const auto s = index_.shape(key);
  require(s.has_value(), "q4 pool: download: key " + std::to_string(key) + " is not in the pool");
  const Buffers& b = buffers_.at(key);
  ref::Q4Matrix q;
  q.m = s->rows;
  q.k = s->cols;
  q.codes = b.codes.download();
  q.scales = b.scales.download();
  return q;
}

namespace {

class Q4Projection final : public Projection {
 public:
  Q4Projection(const Q4Tier& tier, const Q4Binding& b, BigProj which) : tier_(tier), b_(b), which_(which) {}
  std::int64_t rows() const override { return b_.shape.rows; }
  std::int64_t cols() const override { return b_.shape.cols; }
  std::string describe() const override {
    return "q4/" + (tier_.kernel ? tier_.kernel->name : std::string("(no kernel)")) + " key " + std::to_string(b_.key);
  }
  void enqueue(const float* x, float* y, cudaStream_t stream) const override {
    static constexpr std::string_view kWho[] = {"q4 in_proj_qkv", "q4 in_proj_z", "q4 out_proj"};
    const Q4Pool::Tensor t = tier_.pool.resolve(b_, kWho[int(which_)]);
    if (tier_.kernel == nullptr) throw Error(std::string(kWho[int(which_)]) + ": no q4 kernel chosen");
    if (tier_.kernel->layout) {
      // A kernel with a layout of its own reads the pool's copy in that layout (set_q4_variant made it).
      if (tier_.pool.layout() != tier_.kernel->layout || t.packed == nullptr)
        throw Error(std::string(kWho[int(which_)]) + ": " + tier_.kernel->name + " needs the pool's tensors in its layout " + tier_.kernel->layout->name +
                    " (GdnDevice::set_q4_variant packs them)");
      tier_.kernel->launch_packed(t.packed, x, y, int(t.shape.rows), int(t.shape.cols), stream);
    } else {
      tier_.kernel->launch(t.codes, t.scales, x, y, int(t.shape.rows), int(t.shape.cols), stream);
    }
  }

 private:
  const Q4Tier& tier_;
  Q4Binding b_;
  BigProj which_;
};

}  // namespace

std::unique_ptr<Projection> make_q4_projection(const Q4Tier& tier, const Q4Binding& b, BigProj which) {
  return std::make_unique<Q4Projection>(tier, b, which);
}

}  // namespace klab::gdn
