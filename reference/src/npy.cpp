#include "klab/ref/npy.hpp"

#include <cctype>
#include <cstring>
#include <fstream>
#include <limits>
#include <unistd.h>

#include "klab/ref/q4.hpp"

namespace klab::ref::npy {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLen = 6;
// numpy itself refuses headers over 10000 bytes unless told otherwise; a lying length would otherwise
// make us read whatever it says.
constexpr std::uint64_t kMaxHeader = 1 << 20;

[[noreturn]] void fail(const std::string& name, const std::string& what) { throw FormatError(name + ": " + what); }

// A recursive-descent reader of the one dict literal numpy writes.
class HeaderParser {
 public:
  HeaderParser(std::string text, std::string name) : s_(std::move(text)), name_(std::move(name)) {}

  Header parse() {
    Header h;
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    ws();
    expect('{');
    while (true) {
      ws();
      if (peek() == '}') break;
      const std::string key = string_literal();
      ws();
      expect(':');
      ws();
      if (key == "descr") {
        once(seen_descr, key);
        h.descr = string_literal();
      } else if (key == "fortran_order") {
        once(seen_fortran, key);
        h.fortran_order = boolean();
      } else if (key == "shape") {
        once(seen_shape, key);
        h.shape = tuple();
      } else {
        bad("unknown header key '" + key + "' (a .npy header holds descr, fortran_order and shape)");
      }
      ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      ws();
      if (peek() != '}') bad("expected ',' or '}' after the value of '" + key + "'");
    }
    expect('}');
    // After the dict: only the padding (spaces) and the final newline.
    for (; i_ < s_.size(); ++i_)
      if (s_[i_] != ' ' && s_[i_] != '\n' && s_[i_] != '\t' && s_[i_] != '\r' && s_[i_] != '\0') bad("text after the header dict");
    if (!seen_descr) bad("the header has no 'descr'");
    if (!seen_fortran) bad("the header has no 'fortran_order'");
    if (!seen_shape) bad("the header has no 'shape'");
    return h;
  }

 private:
  [[noreturn]] void bad(const std::string& what) const {
    fail(name_, "malformed header at character " + std::to_string(i_) + ": " + what + " (header: " + s_.substr(0, 200) + ")");
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    if (peek() != c) bad(std::string("expected '") + c + "'");
    ++i_;
  }
  void once(bool& seen, const std::string& key) {
    if (seen) bad("'" + key + "' given twice");
    seen = true;
  }
  std::string string_literal() {
    const char q = peek();
    if (q != '\'' && q != '"') bad("expected a quoted string");
    ++i_;
    std::string out;
    while (i_ < s_.size() && s_[i_] != q) {
      if (s_[i_] == '\\') bad("escapes are not used in .npy headers");
      out += s_[i_++];
    }
    expect(q);
    return out;
  }
  bool boolean() {
    if (s_.compare(i_, 4, "True") == 0) {
      i_ += 4;
      return true;
    }
    if (s_.compare(i_, 5, "False") == 0) {
      i_ += 5;
      return false;
    }
    bad("expected True or False");
  }
  std::int64_t integer() {
    if (!std::isdigit(static_cast<unsigned char>(peek()))) bad("expected a non-negative integer dimension");
    std::int64_t v = 0;
    while (std::isdigit(static_cast<unsigned char>(peek()))) {
      const int d = s_[i_++] - '0';
      if (v > (std::numeric_limits<std::int64_t>::max() - d) / 10) bad("a dimension overflows 64 bits");
      v = v * 10 + d;
    }
    if (peek() == 'L') ++i_;  // Python 2's long suffix, as old numpy wrote it
    return v;
  }
  // "()", "(n,)", "(n, m)", "(n, m,)".
  std::vector<std::int64_t> tuple() {
    expect('(');
    std::vector<std::int64_t> dims;
    ws();
    if (peek() == ')') {
      ++i_;
      return dims;
    }
    while (true) {
      ws();
      dims.push_back(integer());
      ws();
      if (peek() == ',') {
        ++i_;
        ws();
        if (peek() == ')') break;
        continue;
      }
      if (peek() == ')') break;
      bad("expected ',' or ')' in the shape");
    }
    expect(')');
    return dims;
  }

  std::string s_, name_;
  std::size_t i_ = 0;
};

std::size_t itemsize_of(const Header& h, const std::string& name) {
  const std::string& d = h.descr;
  if (d.size() == 3 && (d[0] == '<' || d[0] == '=' || d[0] == '|') && d[1] == 'f' && (d[2] == '4' || d[2] == '2')) return d[2] == '4' ? 4 : 2;
  if (!d.empty() && d[0] == '>') fail(name, "dtype '" + d + "' is big-endian; only little-endian f32 ('<f4') and f16 ('<f2') are read");
  fail(name, "dtype '" + d + "' is not read; only f32 ('<f4') and f16 ('<f2') are (convert with arr.astype(numpy.float32))");
}

}  // namespace

std::int64_t Header::numel() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string Header::shape_str() const {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) s += ",";
  return s + ")";
}

Header parse_header(std::span<const std::byte> bytes, const std::string& name) {
  if (bytes.size() < kMagicLen + 2 || std::memcmp(bytes.data(), kMagic, kMagicLen) != 0) fail(name, "not a .npy file (no \\x93NUMPY magic)");
  const int major = int(bytes[6]), minor = int(bytes[7]);
  if (major < 1 || major > 3 || minor != 0) fail(name, "unknown .npy version " + std::to_string(major) + "." + std::to_string(minor) + " (known: 1.0, 2.0, 3.0)");
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + len_bytes) fail(name, "truncated before the header length");
  std::uint64_t hlen = 0;
  for (std::size_t i = 0; i < len_bytes; ++i) hlen |= std::uint64_t(bytes[8 + i]) << (8 * i);
  if (hlen > kMaxHeader) fail(name, "header length " + std::to_string(hlen) + " exceeds " + std::to_string(kMaxHeader) + " bytes");
  const std::uint64_t start = 8 + len_bytes;
  if (bytes.size() < start + hlen) fail(name, "truncated inside the header (" + std::to_string(hlen) + " header bytes promised)");
  std::string text(reinterpret_cast<const char*>(bytes.data() + start), std::size_t(hlen));
  Header h = HeaderParser(std::move(text), name).parse();
  h.major = major;
  h.minor = minor;
  h.data_offset = start + hlen;
  const std::size_t item = itemsize_of(h, name);
  if (h.fortran_order) fail(name, "Fortran order (column-major) is not read; save a C-order array (numpy.ascontiguousarray)");
  // The element count, without overflow: each factor checked against what the remaining bytes allow.
  std::int64_t n = 1;
  for (auto d : h.shape) {
    if (d != 0 && n > std::numeric_limits<std::int64_t>::max() / std::int64_t(item) / d) fail(name, "shape " + h.shape_str() + " overflows");
    n *= d;
  }
  return h;
}

Array read(const std::filesystem::path& path) {
  const std::string name = path.string();
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) fail(name, "cannot be read: " + ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(name, "cannot be opened");
  // The header: the prefix first (to learn its length), then all of it.
  std::vector<std::byte> head(std::size_t(std::min<std::uintmax_t>(size, 12)));
  in.read(reinterpret_cast<char*>(head.data()), std::streamsize(head.size()));
  if (head.size() >= 8) {
    const std::size_t len_bytes = int(head[6]) == 1 ? 2 : 4;
    std::uint64_t hlen = 0;
    if (head.size() >= 8 + len_bytes)
      for (std::size_t i = 0; i < len_bytes; ++i) hlen |= std::uint64_t(head[8 + i]) << (8 * i);
    const std::uint64_t want = std::min<std::uint64_t>(std::uint64_t(size), 8 + len_bytes + std::min<std::uint64_t>(hlen, kMaxHeader + 1));
    if (want > head.size()) {
      const std::size_t had = head.size();
      head.resize(std::size_t(want));
      in.read(reinterpret_cast<char*>(head.data() + had), std::streamsize(want - had));
      if (!in) fail(name, "read error inside the header");
    }
  }
  const Header h = parse_header(head, name);
  const std::size_t item = itemsize_of(h, name);
  const std::uint64_t data_bytes = std::uint64_t(h.numel()) * item;
  const std::uint64_t have = std::uint64_t(size) - h.data_offset;
  if (have < data_bytes)
    fail(name, "truncated: shape " + h.shape_str() + " of '" + h.descr + "' needs " + std::to_string(data_bytes) + " data bytes, the file holds " + std::to_string(have));
  if (have > data_bytes)
    fail(name, std::to_string(have - data_bytes) + " bytes after the data of shape " + h.shape_str() + " (not a single .npy array)");
  std::vector<std::byte> raw(static_cast<std::size_t>(data_bytes));
  in.seekg(std::streamoff(h.data_offset));
  in.read(reinterpret_cast<char*>(raw.data()), std::streamsize(raw.size()));
  if (!in) fail(name, "read error in the data");
  Array a;
  a.shape = h.shape;
  a.descr = h.descr;
  a.data.resize(std::size_t(h.numel()));
  if (item == 4) {
    // An empty array has null data pointers: memcpy(nullptr, nullptr, 0) is undefined, so skip it.
    if (!raw.empty()) std::memcpy(a.data.data(), raw.data(), raw.size());
  } else {
    for (std::size_t i = 0; i < a.data.size(); ++i) {
      const std::uint16_t bits = std::uint16_t(std::uint16_t(raw[2 * i]) | (std::uint16_t(raw[2 * i + 1]) << 8));
      a.data[i] = half_to_float_soft(bits);
    }
  }
  return a;
}

void write_f32(const std::filesystem::path& path, const std::vector<std::int64_t>& shape, std::span<const float> data) {
  Header h;
  h.shape = shape;
  if (h.numel() != std::int64_t(data.size()))
    throw std::invalid_argument("npy::write_f32: shape " + h.shape_str() + " holds " + std::to_string(h.numel()) + " elements, given " + std::to_string(data.size()));
  std::string text = "{'descr': '<f4', 'fortran_order': False, 'shape': " + h.shape_str() + ", }";
  // numpy pads with spaces so that magic + version + length + header (ending '\n') is a multiple of 64.
  const std::size_t total = kMagicLen + 2 + 2 + text.size() + 1;
  text.append((64 - total % 64) % 64, ' ');
  text += '\n';
  std::string out(kMagic, kMagicLen);
  out += char(1);
  out += char(0);
  out += char(text.size() & 0xFF);
  out += char((text.size() >> 8) & 0xFF);
  out += text;
  out.append(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(float));
  const std::filesystem::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw FormatError(path.string() + ": cannot be written");
    f.write(out.data(), std::streamsize(out.size()));
    if (!f) throw FormatError(path.string() + ": write failed");
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace klab::ref::npy
