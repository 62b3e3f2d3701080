// The GDN q4 pool's bookkeeping (no CUDA): keys, shapes, stamps, and the all-or-nothing binding of a
// layer's three keys.
#include <atomic>
#include <climits>

#include "gdn/q4_pool.hpp"
#include "klab/error.hpp"
#include "q4_gemv/q4_gemv.hpp"

namespace klab::gdn {

namespace {
// Stamps are unique in the process, across every pool: a binding taken from one pool can never match
// a tensor of another, nor a tensor put again under the same key.
std::atomic<std::uint64_t> g_next_stamp{1};
}  // namespace

const q4_gemv::Q4Kernel& q4_kernel_by_name(const std::string& variant) { return q4_gemv::q4_kernel(variant); }

std::string Q4Index::can_add(int key, const Q4Shape& s) const {
  if (auto it = entries_.find(key); it != entries_.end())
    return "key " + std::to_string(key) + " already holds a " + it->second.shape.str() + " tensor (erase or clear first: a pooled tensor is never replaced in place)";
  if (auto why = ref::q4_shape_error(s.rows, s.cols); !why.empty()) return "key " + std::to_string(key) + ": shape " + s.str() + ": " + why;
  if (s.rows > INT_MAX || s.cols > INT_MAX) return "key " + std::to_string(key) + ": shape " + s.str() + " exceeds the q4 kernels' int indexing";
  return "";
}

std::uint64_t Q4Index::add(int key, const Q4Shape& s) {
  if (auto why = can_add(key, s); !why.empty()) throw Error("q4 pool: " + why);
  const std::uint64_t st = g_next_stamp.fetch_add(1);
  entries_[key] = Entry{s, st};
  return st;
}

std::optional<Q4Shape> Q4Index::shape(int key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second.shape;
}

std::optional<std::uint64_t> Q4Index::stamp(int key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second.stamp;
}

bool Q4Index::erase(int key) { return entries_.erase(key) != 0; }

void Q4Index::clear() {
  entries_.clear();
  ++generation_;
}

std::vector<int> Q4Index::keys() const {
  std::vector<int> k;
  for (const auto& [key, e] : entries_) k.push_back(key);
  return k;
}

std::string Q4Index::stale(const Q4Binding& b) const {
  auto it = entries_.find(b.key);
  if (it == entries_.end()) return "key " + std::to_string(b.key) + " is no longer in the pool (erased or cleared since it was bound)";
  if (it->second.stamp != b.stamp)
    return "key " + std::to_string(b.key) + " holds another tensor than the one bound (put again after an erase or a clear: a rebuild invalidates every binding)";
  if (!(it->second.shape == b.shape)) return "key " + std::to_string(b.key) + " holds " + it->second.shape.str() + ", bound as " + b.shape.str();
  return "";
}

const char* to_string(BigProj p) {
  switch (p) {
    case BigProj::qkv: return "in_proj_qkv";
    case BigProj::z: return "in_proj_z";
    case BigProj::out: return "out_proj";
  }
  return "?";
}

Q4Shape expected_shape(const ref::gdn::Geometry& g, BigProj p) {
  switch (p) {
    case BigProj::qkv: return {g.conv_dim(), g.hidden};
    case BigProj::z: return {g.value_dim(), g.hidden};
    case BigProj::out: return {g.hidden, g.value_dim()};
  }
  return {};
}

std::string Q4Keys::str() const { return "qkv=" + std::to_string(qkv) + " z=" + std::to_string(z) + " out=" + std::to_string(out); }

std::string bind_q4(const Q4Index& idx, const ref::gdn::Geometry& g, const Q4Keys& keys, Q4Bindings* out) {
  static constexpr BigProj kAll[] = {BigProj::qkv, BigProj::z, BigProj::out};
  static constexpr const char* kWhat[] = {"(conv_dim, hidden)", "(nv*dv, hidden)", "(hidden, nv*dv)"};
  std::string why;
  auto add = [&](const std::string& s) { why += (why.empty() ? "" : "; ") + s; };
  if (keys.qkv == keys.z || keys.qkv == keys.out || keys.z == keys.out)
    add("keys " + keys.str() + " are not pairwise distinct (each projection needs its own tensor)");
  Q4Bindings b{};
  for (BigProj p : kAll) {
    const int i = int(p), key = keys[p];
    const Q4Shape want = expected_shape(g, p);
    const auto have = idx.shape(key);
    if (!have) {
      add(std::string(to_string(p)) + ": key " + std::to_string(key) + " is not in the pool");
      continue;
    }
    if (!(*have == want)) {
      add(std::string(to_string(p)) + ": key " + std::to_string(key) + " holds " + have->str() + ", geometry " + g.str() + " needs " + want.str() + " " + kWhat[i]);
      continue;
    }
    b[std::size_t(i)] = Q4Binding{key, *idx.stamp(key), want};
  }
  if (why.empty() && out) *out = b;
  return why;
}

}  // namespace klab::gdn
