#pragma once
// NumPy .npy files (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html): a
// minimal reader for f32 and f16 arrays in C order, trusting nothing in the file, and a writer for
// tests. Used to feed activations saved from a real model to the error-budget experiment.
//
// Format: the magic "\x93NUMPY", a major and a minor version byte, the header length (2 bytes
// little-endian in version 1, 4 bytes in versions 2 and 3), then the header: a Python dict literal
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// padded with spaces and ended by '\n' (numpy pads so the data starts at a multiple of 64; the reader
// does not require it), then exactly prod(shape) * itemsize bytes of data.
// Accepted: descr '<f4' or '<f2' (also '=' or '|' for the byte order, meaning the machine's, which klab
// only builds for little-endian), fortran_order False, any shape (() is one element). Refused with a
// FormatError naming the file: a bad magic or version, a header that is not that dict (unknown or
// missing keys, malformed values), big-endian or other dtypes, Fortran order, a data section shorter
// (truncated) or longer than the header promises, a shape whose size overflows.
#include <cstdint>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace klab::ref::npy {

// A file that is not a .npy file this reader accepts; the message names the file and the problem.
struct FormatError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

struct Header {
  int major = 1, minor = 0;
  std::string descr;                 // e.g. "<f4"
  bool fortran_order = false;
  std::vector<std::int64_t> shape;   // () for a scalar
  std::uint64_t data_offset = 0;     // bytes before the data
  std::int64_t numel() const;        // prod(shape), 1 for ()
  std::string shape_str() const;     // "(2, 3)"
};

struct Array {
  std::vector<std::int64_t> shape;
  std::string descr;        // the file's dtype ("<f4" or "<f2")
  std::vector<float> data;  // C order, f16 converted exactly
  std::int64_t rows() const { return shape.size() <= 1 ? 1 : shape[0]; }        // (n) is one row
  std::int64_t row_length() const { return shape.empty() ? 1 : shape.back(); }  // the last dimension
};

// Parses the magic, version and header of `bytes` (the start of a file, at least the header); throws
// FormatError prefixed with `name`.
Header parse_header(std::span<const std::byte> bytes, const std::string& name);
// Reads the whole file. Throws FormatError as described above.
Array read(const std::filesystem::path& path);

// Writes a version-1 .npy file as numpy.save does ('<f4', C order, header padded to 64 bytes).
void write_f32(const std::filesystem::path& path, const std::vector<std::int64_t>& shape, std::span<const float> data);

}  // namespace klab::ref::npy
