#include "klab/ref/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace klab::ref::safetensors {

namespace {

struct DtypeRow {
  Dtype d;
  const char* name;
  std::size_t size;
};
constexpr DtypeRow kDtypes[] = {
    {Dtype::BOOL, "BOOL", 1}, {Dtype::U8, "U8", 1},     {Dtype::I8, "I8", 1},     {Dtype::F8_E4M3, "F8_E4M3", 1},
    {Dtype::F8_E5M2, "F8_E5M2", 1}, {Dtype::I16, "I16", 2}, {Dtype::U16, "U16", 2}, {Dtype::F16, "F16", 2},
    {Dtype::BF16, "BF16", 2}, {Dtype::I32, "I32", 4},   {Dtype::U32, "U32", 4},   {Dtype::F32, "F32", 4},
    {Dtype::I64, "I64", 8},   {Dtype::U64, "U64", 8},   {Dtype::F64, "F64", 8},
};

// The reference implementation refuses headers over 100 MB; so do we (a lying length would
// otherwise make us allocate whatever it says).
constexpr std::uint64_t kMaxHeader = 100'000'000;

[[noreturn]] void fail(const std::filesystem::path& file, const std::string& what) {
  throw FormatError(file.string() + ": " + what);
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

}  // namespace

std::size_t dtype_size(Dtype d) {
  for (const auto& r : kDtypes)
    if (r.d == d) return r.size;
  return 0;
}

std::string to_string(Dtype d) {
  for (const auto& r : kDtypes)
    if (r.d == d) return r.name;
  return "?";
}

Dtype parse_dtype(const std::string& s) {
  std::string known;
  for (const auto& r : kDtypes) {
    if (s == r.name) return r.d;
    known += (known.empty() ? "" : ", ") + std::string(r.name);
  }
  throw FormatError("unknown dtype " + quoted(s) + " (known: " + known + ")");
}

std::int64_t TensorInfo::numel() const {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

std::string TensorInfo::shape_str() const {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu;
  std::uint32_t mant = h & 0x3FFu;
  std::uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);  // inf or NaN (payload kept)
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);  // normal: rebias 15 -> 127
  } else if (mant == 0) {
    bits = sign;  // signed zero
  } else {
    // Subnormal half: value = mant * 2^-24. Normalise into a float.
    int e = -1;
    do {
      mant <<= 1;
      ++e;
    } while ((mant & 0x400u) == 0);
    bits = sign | std::uint32_t(112 - e) << 23 | ((mant & 0x3FFu) << 13);
  }
  return std::bit_cast<float>(bits);
}

float bf16_to_float(std::uint16_t b) { return std::bit_cast<float>(std::uint32_t(b) << 16); }

File File::open(const std::filesystem::path& path) {
  File f;
  f.path_ = path;
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) fail(path, "no such file");
  if (!std::filesystem::is_regular_file(status)) fail(path, "not a regular file");
  const std::uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) fail(path, "cannot read its size: " + ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot be opened for reading");
  if (size < 8) fail(path, "truncated: " + std::to_string(size) + " bytes, too short to hold the 8-byte header length");

  unsigned char len_bytes[8];
  in.read(reinterpret_cast<char*>(len_bytes), 8);
  if (!in) fail(path, "cannot read the header length");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];  // little-endian
  if (n > size - 8)
    fail(path, "truncated or not a safetensors file: the header length says " + std::to_string(n) + " bytes but only " +
                   std::to_string(size - 8) + " follow");
  if (n > kMaxHeader) fail(path, "header length " + std::to_string(n) + " bytes is over the 100 MB limit");
  if (n < 2) fail(path, "header of " + std::to_string(n) + " bytes cannot hold a JSON object");

  std::string header(n, '\0');
  in.read(header.data(), static_cast<std::streamsize>(n));
  if (!in) fail(path, "cannot read the " + std::to_string(n) + "-byte header");
  f.data_start_ = 8 + n;
  const std::uint64_t data_size = size - f.data_start_;

  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header);
  } catch (const nlohmann::json::exception& e) {
    // parse_error, and out_of_range for a number past a double ("1e999"): both refuse the file.
    fail(path, std::string("header is not valid JSON (") + e.what() + ")");
  }
  if (!j.is_object()) fail(path, "header is not a JSON object");

  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const auto& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) fail(path, "__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) fail(path, "__metadata__ value of " + quoted(m.key()) + " is not a string");
        f.metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    auto bad = [&](const std::string& what) { fail(path, "tensor " + quoted(name) + ": " + what); };
    if (name.empty()) fail(path, "a tensor has an empty name");
    if (!v.is_object()) bad("entry is not an object");
    if (!v.contains("dtype") || !v["dtype"].is_string()) bad("no dtype string");
    if (!v.contains("shape") || !v["shape"].is_array()) bad("no shape array");
    if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2) bad("no [begin, end] data_offsets");
    TensorInfo t;
    t.name = name;
    try {
      t.dtype = parse_dtype(v["dtype"].get<std::string>());
    } catch (const FormatError& e) {
      bad(e.what());
    }
    // prod(shape) * size, with overflow refused: a lying shape must not wrap around to a small size.
    // Every partial product stays within int64 (not only uint64), so numel(), which multiplies the
    // dims in the same order, cannot overflow either: U8 [3, 2^62, 0] holds 0 bytes but is refused.
    constexpr std::uint64_t kMax = std::numeric_limits<std::int64_t>::max();
    std::uint64_t bytes = dtype_size(t.dtype);
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned()) bad("shape " + v["shape"].dump() + " has a dimension that is not a non-negative integer");
      const std::uint64_t dim = d.get<std::uint64_t>();
      if (dim > kMax || (dim != 0 && bytes > kMax / dim))
        bad("shape " + v["shape"].dump() + " is too large");
      bytes *= dim;
      t.shape.push_back(static_cast<std::int64_t>(dim));
    }
    for (const auto& o : v["data_offsets"])
      if (!o.is_number_unsigned()) bad("data_offsets " + v["data_offsets"].dump() + " are not non-negative integers");
    t.begin = v["data_offsets"][0].get<std::uint64_t>();
    t.end = v["data_offsets"][1].get<std::uint64_t>();
    if (t.end < t.begin) bad("data_offsets " + v["data_offsets"].dump() + " end before they begin");
    if (t.end > data_size)
      bad("data_offsets " + v["data_offsets"].dump() + " run past the end of the data (" + std::to_string(data_size) +
          " bytes): the file is truncated or the header lies");
    if (t.end - t.begin != bytes)
      bad("holds " + std::to_string(t.end - t.begin) + " bytes but its shape " + t.shape_str() + " and dtype " + to_string(t.dtype) +
          " need " + std::to_string(bytes));
    f.tensors_.push_back(std::move(t));
  }

  // The ranges must tile the data buffer: sorted by offset, each begins where the previous ended.
  std::vector<const TensorInfo*> by_offset;
  for (const auto& t : f.tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->begin != b->begin ? a->begin < b->begin : a->end < b->end; });
  std::uint64_t covered = 0;
  const TensorInfo* prev = nullptr;
  for (const auto* t : by_offset) {
    if (t->begin < covered)
      fail(path, "tensor " + quoted(t->name) + " overlaps tensor " + quoted(prev->name) + " (bytes " + std::to_string(t->begin) + ".." +
                     std::to_string(covered) + ")");
    if (t->begin > covered)
      fail(path, "hole of " + std::to_string(t->begin - covered) + " bytes before tensor " + quoted(t->name) +
                     " (the data buffer must be fully covered)");
    covered = t->end;
    prev = t;
  }
  if (covered != data_size)
    fail(path, std::to_string(data_size - covered) + " bytes after the last tensor that no tensor covers (the data buffer must be fully covered)");
  std::sort(f.tensors_.begin(), f.tensors_.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return f;
}

std::string File::meta(const std::string& key, const std::string& fallback) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? fallback : it->second;
}

const TensorInfo* File::find(const std::string& name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name, [](const TensorInfo& t, const std::string& n) { return t.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

const TensorInfo& File::at(const std::string& name) const {
  if (const auto* t = find(name)) return *t;
  fail(path_, "no tensor " + quoted(name) + " (the file has " + std::to_string(tensors_.size()) + " tensors)");
}

std::vector<std::byte> File::read_raw(const std::string& name) const {
  const TensorInfo& t = at(name);
  std::vector<std::byte> out(t.end - t.begin);
  if (out.empty()) return out;
  std::ifstream in(path_, std::ios::binary);
  if (!in) fail(path_, "cannot be opened to read tensor " + quoted(name));
  in.seekg(static_cast<std::streamoff>(data_start_ + t.begin));
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size()));
  if (!in || in.gcount() != static_cast<std::streamsize>(out.size()))
    fail(path_, "tensor " + quoted(name) + ": could not read its " + std::to_string(out.size()) + " bytes (the file was truncated since it was opened?)");
  return out;
}

namespace {
template <class T>
std::vector<T> convert(const std::filesystem::path& file, const TensorInfo& t, const std::vector<std::byte>& raw) {
  const auto n = static_cast<std::size_t>(t.numel());
  std::vector<T> out(n);
  auto load = [&](auto tag, std::size_t i) {
    decltype(tag) v;
    std::memcpy(&v, raw.data() + i * sizeof v, sizeof v);  // the format is little-endian, as is every host we build for
    return v;
  };
  switch (t.dtype) {
    case Dtype::F32:
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<T>(load(float{}, i));
      break;
    case Dtype::F64:
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<T>(load(double{}, i));
      break;
    case Dtype::F16:
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<T>(half_to_float(load(std::uint16_t{}, i)));
      break;
    case Dtype::BF16:
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<T>(bf16_to_float(load(std::uint16_t{}, i)));
      break;
    default:
      fail(file, "tensor '" + t.name + "' has dtype " + to_string(t.dtype) + "; only F32, F16, BF16 and F64 convert to floating point");
  }
  return out;
}
static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian; a big-endian host needs byte swaps here");
}  // namespace

std::vector<float> File::read_f32(const std::string& name) const { return convert<float>(path_, at(name), read_raw(name)); }
std::vector<double> File::read_f64(const std::string& name) const { return convert<double>(path_, at(name), read_raw(name)); }

void Writer::add(const std::string& name, Dtype dtype, std::vector<std::int64_t> shape, std::span<const std::byte> data) {
  if (name.empty() || name == "__metadata__") throw std::invalid_argument("safetensors writer: invalid tensor name '" + name + "'");
  for (const auto& e : entries_)
    if (e.name == name) throw std::invalid_argument("safetensors writer: tensor '" + name + "' added twice");
  std::uint64_t n = dtype_size(dtype);
  for (auto d : shape) {
    if (d < 0) throw std::invalid_argument("safetensors writer: tensor '" + name + "' has a negative dimension");
    n *= static_cast<std::uint64_t>(d);
  }
  if (n != data.size())
    throw std::invalid_argument("safetensors writer: tensor '" + name + "' has " + std::to_string(data.size()) + " bytes for " +
                                std::to_string(n) + " expected");
  entries_.push_back({name, dtype, std::move(shape), std::vector<std::byte>(data.begin(), data.end())});
}

void Writer::add_f32(const std::string& name, std::vector<std::int64_t> shape, std::span<const float> data) {
  add(name, Dtype::F32, std::move(shape), std::as_bytes(data));
}

void Writer::add_f64(const std::string& name, std::vector<std::int64_t> shape, std::span<const double> data) {
  add(name, Dtype::F64, std::move(shape), std::as_bytes(data));
}

std::vector<std::byte> Writer::bytes() const {
  nlohmann::json h = nlohmann::json::object();
  if (!metadata_.empty()) h["__metadata__"] = metadata_;
  std::uint64_t off = 0;
  for (const auto& e : entries_) {
    h[e.name] = {{"dtype", to_string(e.dtype)}, {"shape", e.shape}, {"data_offsets", {off, off + e.data.size()}}};
    off += e.data.size();
  }
  std::string header = h.dump();
  header.append((8 - header.size() % 8) % 8, ' ');
  std::vector<std::byte> out;
  out.reserve(8 + header.size() + off);
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>((n >> (8 * i)) & 0xFF));
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  for (const auto& e : entries_) out.insert(out.end(), e.data.begin(), e.data.end());
  return out;
}

void write_bytes(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  const auto tmp = path.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(path, "cannot be written (opening " + tmp + " failed)");
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) fail(path, "writing " + std::to_string(bytes.size()) + " bytes failed");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    fail(path, "cannot be written (rename failed)");
  }
}

void Writer::write(const std::filesystem::path& path) const { write_bytes(path, bytes()); }

}  // namespace klab::ref::safetensors
