// fuzz_npy: the input is a .npy file, read two ways: the in-memory header parser
// (klab::ref::npy::parse_header on the bytes) and the public file reader (npy::read on an in-memory
// file). A refusal must be a FormatError naming its source; anything else that escapes, a sanitizer
// report, a leak, a single allocation past -malloc_limit_mb, or one of the invariants below is a crash.
//
// Invariants:
//   - a header that parses has version 1.0, 2.0 or 3.0, a data offset of 10 (or 12) + its length,
//     inside the input, and a dtype the reader takes ('<f4', '<f2', '=' or '|' for '<'), C order;
//   - its shape printed by shape_str(), put back into a header, parses to the same shape;
//   - the two readers agree: read() succeeds exactly when the header parses and the input holds
//     exactly numel() * itemsize bytes after it, with the same shape and dtype;
//   - the values are the input's bytes: f32 bit for bit, f16 equal to an arithmetic conversion;
//   - an f32 array written back by write_f32 reads back to the same shape and bits.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "common.hpp"
#include "klab/ref/npy.hpp"

namespace npy = klab::ref::npy;
using klab::fuzz::MemFile;

namespace {

MemFile& input_file() {
  static MemFile f("klab-fuzz-npy");
  return f;
}

std::size_t itemsize(const std::string& descr) { return descr.size() == 3 && descr[2] == '4' ? 4 : 2; }

// A version-1 (or 2, when long) file's header bytes around a dict text.
std::vector<std::byte> header_bytes(const std::string& dict) {
  const bool v1 = dict.size() + 1 < 65536;
  std::string out = "\x93NUMPY";
  out += char(v1 ? 1 : 2);
  out += char(0);
  const std::size_t len = dict.size() + 1;
  for (int i = 0; i < (v1 ? 2 : 4); ++i) out += char((len >> (8 * i)) & 0xFF);
  out += dict + "\n";
  const auto* p = reinterpret_cast<const std::byte*>(out.data());
  return {p, p + out.size()};
}

void check_header(const npy::Header& h, std::size_t size) {
  KLAB_FUZZ_CHECK(h.major >= 1 && h.major <= 3 && h.minor == 0, "version " + std::to_string(h.major) + "." + std::to_string(h.minor));
  KLAB_FUZZ_CHECK(h.data_offset >= std::uint64_t(h.major == 1 ? 10 : 12) && h.data_offset <= size, "data offset " + std::to_string(h.data_offset));
  const std::string& d = h.descr;
  KLAB_FUZZ_CHECK(d.size() == 3 && (d[0] == '<' || d[0] == '=' || d[0] == '|') && d[1] == 'f' && (d[2] == '4' || d[2] == '2'), "descr '" + d + "' accepted");
  KLAB_FUZZ_CHECK(!h.fortran_order, "Fortran order accepted");
  // numel() * itemsize without overflow (parse_header promises it).
  __int128 n = 1;
  for (auto dim : h.shape) {
    KLAB_FUZZ_CHECK(dim >= 0, "negative dimension");
    n = dim == 0 ? 0 : n * dim;
    KLAB_FUZZ_CHECK(n * __int128(itemsize(d)) <= std::numeric_limits<std::int64_t>::max(), "shape " + h.shape_str() + " overflows");
  }
  KLAB_FUZZ_CHECK(h.numel() == std::int64_t(n), "numel() of " + h.shape_str());
  // shape_str() round trip, through a header numpy would write.
  const std::string dict = "{'descr': '" + d + "', 'fortran_order': False, 'shape': " + h.shape_str() + ", }";
  const npy::Header again = npy::parse_header(header_bytes(dict), "shape_str");
  KLAB_FUZZ_CHECK(again.shape == h.shape && again.descr == d, "shape_str() " + h.shape_str() + " parses to another shape");
}

void check_array(const npy::Array& a, const npy::Header& h, const std::uint8_t* data) {
  const std::size_t n = std::size_t(h.numel());
  KLAB_FUZZ_CHECK(a.data.size() == n, "read() gave " + std::to_string(a.data.size()) + " values for shape " + h.shape_str());
  if (a.shape.size() <= 2) KLAB_FUZZ_CHECK(a.rows() * a.row_length() == std::int64_t(n), "rows() * row_length() of " + h.shape_str());
  const std::uint8_t* raw = data + h.data_offset;
  if (itemsize(h.descr) == 4) {
    KLAB_FUZZ_CHECK(n == 0 || std::memcmp(a.data.data(), raw, 4 * n) == 0, "f32 values are not the file's bytes");
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint16_t bits = std::uint16_t(raw[2 * i] | (raw[2 * i + 1] << 8));
      KLAB_FUZZ_CHECK(klab::fuzz::same_value(a.data[i], klab::fuzz::f16_oracle(bits)), "f16 element " + std::to_string(i) + " converts wrongly");
    }
  }
  if (itemsize(h.descr) != 4) return;
  // write_f32 -> read: the same array (write_f32 renames a temporary file, so a real file here).
  static const std::filesystem::path tmp =
      std::filesystem::temp_directory_path() / ("klab-fuzz-npy-" + std::to_string(::getpid()) + ".npy");
  npy::write_f32(tmp, a.shape, a.data);
  const npy::Array b = npy::read(tmp);
  std::filesystem::remove(tmp);
  KLAB_FUZZ_CHECK(b.shape == a.shape && b.descr == "<f4" && b.data.size() == n && (n == 0 || std::memcmp(b.data.data(), a.data.data(), 4 * n) == 0),
                  "write_f32 then read changed the array " + h.shape_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::optional<npy::Header> h;
  try {
    h = npy::parse_header(std::span(reinterpret_cast<const std::byte*>(data), size), "input");
  } catch (const npy::FormatError& e) {
    KLAB_FUZZ_CHECK(std::string(e.what()).rfind("input: ", 0) == 0, std::string("a refusal that does not name its source: ") + e.what());
  }
  if (h) check_header(*h, size);

  MemFile& in = input_file();
  in.set(data, size);
  std::optional<npy::Array> a;
  try {
    a = npy::read(in.path());
  } catch (const npy::FormatError& e) {
    KLAB_FUZZ_CHECK(std::string(e.what()).rfind(in.path() + ": ", 0) == 0, std::string("a refusal that does not name the file: ") + e.what());
    KLAB_FUZZ_CHECK(!h || size - h->data_offset != std::uint64_t(h->numel()) * itemsize(h->descr),
                    std::string("read() refused a file whose header parses and whose data size is right: ") + e.what());
    return 0;
  }
  KLAB_FUZZ_CHECK(h.has_value(), "read() accepted a file whose header does not parse in memory");
  KLAB_FUZZ_CHECK(a->shape == h->shape && a->descr == h->descr, "read() and parse_header() disagree on the shape or dtype");
  KLAB_FUZZ_CHECK(size - h->data_offset == std::uint64_t(h->numel()) * itemsize(h->descr), "read() accepted a data section of the wrong size");
  check_array(*a, *h, data);
  return 0;
}
