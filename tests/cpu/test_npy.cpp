// The .npy reader (reference/include/klab/ref/npy.hpp) against files numpy wrote (tests/fixtures/npy,
// see its README), and its refusals of files that are not what they claim (written here, byte by byte).
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "klab/ref/npy.hpp"

namespace npy = klab::ref::npy;
namespace fs = std::filesystem;

namespace {

fs::path fixture(const std::string& name) { return fs::path(KLAB_SOURCE_DIR) / "tests" / "fixtures" / "npy" / name; }
fs::path temp_file(const std::string& name) { return fs::temp_directory_path() / ("klab-npy-" + std::to_string(::getpid()) + "-" + name + ".npy"); }

std::vector<char> slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(f), {});
}
void spit(const fs::path& p, const std::vector<char>& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(b.data(), std::streamsize(b.size()));
}

// A version-1 file from a header dict text (padded as numpy pads) and `data_bytes` zero bytes.
std::vector<char> v1_file(const std::string& dict, std::size_t data_bytes) {
  std::string h = dict;
  const std::size_t total = 10 + h.size() + 1;
  h.append((64 - total % 64) % 64, ' ');
  h += '\n';
  std::string out = "\x93NUMPY";
  out += char(1);
  out += char(0);
  out += char(h.size() & 0xFF);
  out += char(h.size() >> 8);
  out += h;
  std::vector<char> b(out.begin(), out.end());
  b.resize(b.size() + data_bytes, 0);
  return b;
}

// The FormatError message of reading `bytes` as a file ("" when it reads).
std::string read_error(const std::vector<char>& bytes, const std::string& name) {
  const auto p = temp_file(name);
  spit(p, bytes);
  std::string msg;
  try {
    npy::read(p);
  } catch (const npy::FormatError& e) {
    msg = e.what();
  }
  fs::remove(p);
  return msg;
}
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("npy: reads numpy's f32, f16, 0-d, version 2.0 and empty files exactly") {
  {
    const auto a = npy::read(fixture("f32_2x3.npy"));
    CHECK(a.shape == std::vector<std::int64_t>{2, 3});
    CHECK(a.descr == "<f4");
    CHECK(a.rows() == 2);
    CHECK(a.row_length() == 3);
    const std::vector<float> want{1.f, -2.5f, 3.25f, 1e-30f, -0.f, 65504.f};
    REQUIRE(a.data.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(std::bit_cast<std::uint32_t>(a.data[i]) == std::bit_cast<std::uint32_t>(want[i]));
  }
  {
    // f16 1, -2, 65504 (the largest half), 2^-24 (the smallest subnormal): each converted exactly.
    const auto a = npy::read(fixture("f16_4.npy"));
    CHECK(a.shape == std::vector<std::int64_t>{4});
    CHECK(a.descr == "<f2");
    CHECK(a.rows() == 1);
    CHECK(a.data == std::vector<float>{1.f, -2.f, 65504.f, std::ldexp(1.f, -24)});
  }
  {
    const auto a = npy::read(fixture("f32_scalar.npy"));
    CHECK(a.shape.empty());
    CHECK(a.data == std::vector<float>{7.5f});
  }
  {
    const auto a = npy::read(fixture("f32_v2.npy"));
    CHECK(a.shape == std::vector<std::int64_t>{3, 2});
    CHECK(a.data == std::vector<float>{0, 1, 2, 3, 4, 5});
  }
  {
    const auto a = npy::read(fixture("f32_empty.npy"));
    CHECK(a.shape == std::vector<std::int64_t>{0, 4});
    CHECK(a.data.empty());
  }
}

TEST_CASE("npy: empty f32 and f16 arrays read as no values (found by fuzz/fuzz_npy)") {
  // read() copied an empty f32 array with memcpy(nullptr, nullptr, 0): undefined, though harmless
  // here; only -fsanitize=undefined (the fuzz build, fuzz/smoke.sh in CI) sees it, this test the rest.
  for (const std::string descr : {"<f4", "<f2"}) {
    for (const std::string shape : {"(0,)", "(3, 0)", "(0, 0, 2)"}) {
      CAPTURE(descr + " " + shape);
      const auto p = temp_file("empty");
      spit(p, v1_file("{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }", 0));
      const auto a = npy::read(p);
      fs::remove(p);
      CHECK(a.descr == descr);
      CHECK(a.data.empty());
      CHECK(a.shape.front() == (shape == "(3, 0)" ? 3 : 0));
    }
  }
}

TEST_CASE("npy: refuses Fortran order, big-endian and other dtypes, naming the file") {
  const std::string f = fixture("f32_fortran.npy").string(), b = fixture("f32_big_endian.npy").string(), d = fixture("f64_2.npy").string();
  CHECK_THROWS_WITH_AS(npy::read(f), doctest::Contains("Fortran order"), npy::FormatError);
  CHECK_THROWS_WITH_AS(npy::read(f), doctest::Contains("f32_fortran.npy"), npy::FormatError);
  CHECK_THROWS_WITH_AS(npy::read(b), doctest::Contains("big-endian"), npy::FormatError);
  CHECK_THROWS_WITH_AS(npy::read(d), doctest::Contains("'<f8' is not read"), npy::FormatError);
  CHECK_THROWS_AS(npy::read(fixture("no-such-file.npy")), npy::FormatError);
}

TEST_CASE("npy: refuses a truncated file and trailing bytes") {
  auto bytes = slurp(fixture("f32_2x3.npy"));
  REQUIRE(bytes.size() == 128 + 24);  // numpy's 128-byte header (magic..'\n'), then 6 floats
  for (std::size_t cut : {std::size_t(1), std::size_t(4), std::size_t(24)}) {
    CAPTURE(cut);
    const std::vector<char> shorter(bytes.begin(), bytes.end() - std::ptrdiff_t(cut));
    const std::string msg = read_error(shorter, "trunc");
    CHECK(contains(msg, "truncated"));
    CHECK(contains(msg, "needs 24 data bytes"));
  }
  auto longer = bytes;
  longer.push_back(0);
  CHECK(contains(read_error(longer, "long"), "1 bytes after the data"));
  // Cut inside the header and before the header length.
  CHECK(contains(read_error(std::vector<char>(bytes.begin(), bytes.begin() + 60), "hdr"), "truncated inside the header"));
  CHECK(contains(read_error(std::vector<char>(bytes.begin(), bytes.begin() + 9), "len"), "truncated before the header length"));
  CHECK(read_error(bytes, "whole").empty());
}

TEST_CASE("npy: refuses bad magic, versions and malformed headers") {
  auto bytes = slurp(fixture("f32_2x3.npy"));
  auto bad_magic = bytes;
  bad_magic[1] = 'X';
  CHECK(contains(read_error(bad_magic, "magic"), "not a .npy file"));
  auto bad_version = bytes;
  bad_version[6] = 4;
  CHECK(contains(read_error(bad_version, "ver"), "unknown .npy version 4.0"));
  auto huge_len = bytes;
  huge_len[6] = 2;  // version 2: a 4-byte length; these bytes now say > 1 MiB
  huge_len[11] = 0x7F;
  CHECK(contains(read_error(huge_len, "huge"), "header length"));

  const struct {
    std::string dict, needle;
  } cases[] = {
      {"{'descr': '<f4', 'fortran_order': False}", "no 'shape'"},
      {"{'fortran_order': False, 'shape': (2,), }", "no 'descr'"},
      {"{'descr': '<f4', 'shape': (2,), }", "no 'fortran_order'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1, }", "unknown header key 'extra'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", "'descr' given twice"},
      {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", "expected True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", "non-negative integer"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }", "expected ',' or ')'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x", "text after the header dict"},
      {"['descr', '<f4']", "expected '{'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999), }", "overflows"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", "overflows 64 bits"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.dict);
    const std::string msg = read_error(v1_file(c.dict, 8), "hdr");
    CHECK(contains(msg, c.needle));
  }
  // Double quotes, no trailing comma, a 1-tuple without its comma, Python 2's L suffix: all numpy-readable.
  CHECK(read_error(v1_file("{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2)}", 8), "dq").empty());
  CHECK(read_error(v1_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2L,), }", 8), "long").empty());
}

TEST_CASE("npy: write_f32 writes the bytes numpy.save writes, and reads back") {
  const std::vector<float> v{1.f, -2.5f, 3.25f, 1e-30f, -0.f, 65504.f};
  const auto p = temp_file("write");
  npy::write_f32(p, {2, 3}, v);
  CHECK(slurp(p) == slurp(fixture("f32_2x3.npy")));
  npy::write_f32(p, {6}, v);
  const auto a = npy::read(p);
  CHECK(a.shape == std::vector<std::int64_t>{6});
  CHECK(a.data.size() == 6);
  CHECK_THROWS_AS(npy::write_f32(p, {4}, v), std::invalid_argument);
  fs::remove(p);
}
