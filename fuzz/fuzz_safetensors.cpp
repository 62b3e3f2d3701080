// fuzz_safetensors: the input is a .safetensors file, opened through the public file API
// (klab::ref::safetensors::File::open on an in-memory file). A refusal must be a FormatError naming
// the file; anything else that escapes, a sanitizer report, a leak, a single allocation past
// -malloc_limit_mb, or one of the invariants below is a crash.
//
// Invariants of a file that opens (each is what the reader's header comment promises):
//   - tensors are sorted by name, names non-empty and distinct; find() and at() agree with the list;
//   - for each tensor, end - begin == numel() * dtype_size (numel() without overflow), and the
//     ranges tile the data buffer [0, file size - 8 - N) with neither hole nor overlap;
//   - read_raw() returns exactly the input's bytes at 8 + N + begin;
//   - read_f32()/read_f64() equal an independent conversion (f16 by arithmetic, bf16 as the top half
//     of an f32, f64 -> f32 by a cast) for F32/F64/F16/BF16, and refuse every other dtype;
//   - the Writer, given the same metadata and tensors in offset order, writes a file that opens to
//     the same metadata, tensors and ranges;
//   - once the file loses its last byte, reading a tensor that reached it is refused (FormatError),
//     and reading one that did not still succeeds.
#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <vector>

#include "common.hpp"
#include "klab/ref/safetensors.hpp"

namespace st = klab::ref::safetensors;
using klab::fuzz::MemFile;
using klab::fuzz::same_value;

namespace {

MemFile& input_file() {
  static MemFile f("klab-fuzz-safetensors");
  return f;
}
MemFile& rewritten_file() {
  static MemFile f("klab-fuzz-safetensors-rewritten");
  return f;
}

// The FormatError message of f(), "" when it does not throw.
std::string refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const st::FormatError& e) {
    return e.what();
  }
  return "";
}

// A name with a NUL ("\u0000" in the JSON) ends what() early: only the refusal itself is checked then.
bool has_nul(const std::string& s) { return s.find('\0') != std::string::npos; }

// prod(shape) from the dims alone, 0 when any is 0, nullopt past int64 (the file could not hold it).
std::optional<std::int64_t> element_count(const std::vector<std::int64_t>& shape) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  std::int64_t n = 1;
  for (auto d : shape) {
    if (d < 0 || n > std::numeric_limits<std::int64_t>::max() / d) return std::nullopt;
    n *= d;
  }
  return n;
}

bool converts(st::Dtype d) { return d == st::Dtype::F32 || d == st::Dtype::F64 || d == st::Dtype::F16 || d == st::Dtype::BF16; }

// Element i of `raw` as a double, by an independent reading of the dtype's bits.
double oracle_value(st::Dtype d, const std::byte* raw, std::size_t i) {
  switch (d) {
    case st::Dtype::F32: {
      float v;
      std::memcpy(&v, raw + 4 * i, 4);
      return v;
    }
    case st::Dtype::F64: {
      double v;
      std::memcpy(&v, raw + 8 * i, 8);
      return v;
    }
    case st::Dtype::F16:
    case st::Dtype::BF16: {
      std::uint16_t b;
      std::memcpy(&b, raw + 2 * i, 2);
      if (d == st::Dtype::F16) return klab::fuzz::f16_oracle(b);
      const std::uint32_t bits = std::uint32_t(b) << 16;
      float v;
      std::memcpy(&v, &bits, 4);
      return v;
    }
    default: return 0;
  }
}

void check_values(const st::File& f, const st::TensorInfo& t, const std::vector<std::byte>& raw) {
  if (!converts(t.dtype)) {
    const std::string m = refusal([&] { f.read_f32(t.name); });
    KLAB_FUZZ_CHECK(!m.empty() && (has_nul(t.name) || m.find("only F32, F16, BF16 and F64") != std::string::npos), "read_f32 of " + st::to_string(t.dtype) + ": '" + m + "'");
    KLAB_FUZZ_CHECK(!refusal([&] { f.read_f64(t.name); }).empty(), "read_f64 of " + st::to_string(t.dtype) + " did not refuse");
    return;
  }
  const auto f32 = f.read_f32(t.name);
  const auto f64 = f.read_f64(t.name);
  const std::size_t n = std::size_t(t.numel());
  KLAB_FUZZ_CHECK(f32.size() == n && f64.size() == n, "tensor '" + t.name + "': read_f32/read_f64 sizes vs numel " + std::to_string(n));
  for (std::size_t i = 0; i < n; ++i) {
    const double want = oracle_value(t.dtype, raw.data(), i);
    KLAB_FUZZ_CHECK(same_value(f64[i], want), "tensor '" + t.name + "' element " + std::to_string(i) + ": read_f64 differs");
    KLAB_FUZZ_CHECK(same_value(f32[i], float(want)), "tensor '" + t.name + "' element " + std::to_string(i) + ": read_f32 differs");
  }
}

void check_opened(const st::File& f, const std::uint8_t* data, std::size_t size) {
  KLAB_FUZZ_CHECK(size >= 8, "opened a file of " + std::to_string(size) + " bytes");
  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | data[i];
  KLAB_FUZZ_CHECK(header_len <= size - 8, "header length past the file");
  const std::uint64_t data_start = 8 + header_len, data_size = size - data_start;
  const auto& ts = f.tensors();

  std::vector<const st::TensorInfo*> by_offset;
  for (std::size_t i = 0; i < ts.size(); ++i) {
    const st::TensorInfo& t = ts[i];
    KLAB_FUZZ_CHECK(!t.name.empty() && t.name != "__metadata__", "tensor name '" + t.name + "'");
    KLAB_FUZZ_CHECK(i == 0 || ts[i - 1].name < t.name, "tensors not sorted by name, or a name twice: '" + t.name + "'");
    KLAB_FUZZ_CHECK(f.find(t.name) == &t && &f.at(t.name) == &t, "find/at of '" + t.name + "'");
    const auto n = element_count(t.shape);
    KLAB_FUZZ_CHECK(n.has_value(), "tensor '" + t.name + "': shape " + t.shape_str() + " accepted, its element count overflows int64");
    KLAB_FUZZ_CHECK(t.numel() == *n, "tensor '" + t.name + "': numel() " + std::to_string(t.numel()) + " for shape " + t.shape_str());
    KLAB_FUZZ_CHECK(t.begin <= t.end && t.end <= data_size, "tensor '" + t.name + "': range outside the data");
    KLAB_FUZZ_CHECK(t.end - t.begin == std::uint64_t(*n) * st::dtype_size(t.dtype), "tensor '" + t.name + "': byte count vs shape");
    by_offset.push_back(&t);
  }
  KLAB_FUZZ_CHECK(f.find("__metadata__") == nullptr, "find of __metadata__, a name no tensor has");
  KLAB_FUZZ_CHECK(!refusal([&] { f.at("__metadata__"); }).empty(), "at() of an absent name did not refuse");
  std::stable_sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->begin != b->begin ? a->begin < b->begin : a->end < b->end; });
  std::uint64_t covered = 0;
  for (const auto* t : by_offset) {
    KLAB_FUZZ_CHECK(t->begin == covered, "tensor '" + t->name + "' leaves a hole or overlaps");
    covered = t->end;
  }
  KLAB_FUZZ_CHECK(covered == data_size, "the tensors do not cover the data buffer");

  // The bytes and values.
  std::vector<std::vector<std::byte>> raws;
  for (const auto* t : by_offset) {
    auto raw = f.read_raw(t->name);
    KLAB_FUZZ_CHECK(raw.size() == t->end - t->begin && (raw.empty() || std::memcmp(raw.data(), data + data_start + t->begin, raw.size()) == 0),
                    "read_raw of '" + t->name + "' is not the file's bytes");
    check_values(f, *t, raw);
    raws.push_back(std::move(raw));
  }

  // Written again by the Writer, it opens to the same file.
  st::Writer w;
  for (const auto& [k, v] : f.metadata()) w.metadata(k, v);
  for (std::size_t i = 0; i < by_offset.size(); ++i) w.add(by_offset[i]->name, by_offset[i]->dtype, by_offset[i]->shape, raws[i]);
  const auto bytes = w.bytes();
  rewritten_file().set(bytes.data(), bytes.size());
  const st::File g = st::File::open(rewritten_file().path());
  KLAB_FUZZ_CHECK(g.metadata() == f.metadata(), "metadata differs after the Writer's round trip");
  KLAB_FUZZ_CHECK(g.tensors().size() == ts.size(), "tensor count differs after the Writer's round trip");
  for (std::size_t i = 0; i < ts.size(); ++i) {
    const auto &a = ts[i], &b = g.tensors()[i];
    KLAB_FUZZ_CHECK(a.name == b.name && a.dtype == b.dtype && a.shape == b.shape && a.begin == b.begin && a.end == b.end,
                    "tensor '" + a.name + "' differs after the Writer's round trip");
  }

  // The file loses its last byte after it was opened.
  if (data_size == 0) return;
  input_file().resize(size - 1);
  for (const auto* t : by_offset) {
    const std::string m = refusal([&] { f.read_raw(t->name); });
    if (t->end == data_size && t->end > t->begin)
      KLAB_FUZZ_CHECK(!m.empty() && (has_nul(t->name) || m.find("could not read") != std::string::npos), "read_raw of '" + t->name + "' past a truncated end: '" + m + "'");
    else
      KLAB_FUZZ_CHECK(m.empty(), "read_raw of '" + t->name + "', before the truncated end, refused: " + m);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  MemFile& in = input_file();
  in.set(data, size);
  std::optional<st::File> f;
  try {
    f = st::File::open(in.path());
  } catch (const st::FormatError& e) {
    KLAB_FUZZ_CHECK(std::string(e.what()).rfind(in.path() + ": ", 0) == 0, std::string("a refusal that does not name the file: ") + e.what());
    return 0;
  }
  check_opened(*f, data, size);
  return 0;
}
