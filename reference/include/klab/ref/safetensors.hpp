#pragma once
// .safetensors files: a reader that trusts nothing in the file, and a small writer (fixtures, tests).
//
// Format (https://github.com/huggingface/safetensors): 8 bytes little-endian N, then N bytes of JSON
// header, then the data buffer. The header maps tensor names to {"dtype", "shape", "data_offsets":
// [begin, end]} (offsets relative to the data buffer) plus an optional "__metadata__" object of
// string values. The reader checks what the format promises before any data is read: N inside the
// file, valid JSON, known dtypes, end - begin == prod(shape) * dtype size (every partial product of
// the shape within int64, so numel() cannot overflow even for a shape with a 0), every range inside the
// buffer, no two ranges overlapping and no hole (the buffer is exactly covered, as the format
// requires). A file that breaks any of these is refused with a FormatError naming the file and,
// where there is one, the tensor. Data is read on demand, so a file of many GB costs only its header.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace klab::ref::safetensors {

// A file that is not what it claims to be (or could not be read). The message names the file and,
// where the problem is one tensor, that tensor.
struct FormatError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

enum class Dtype { BOOL, U8, I8, F8_E4M3, F8_E5M2, I16, U16, F16, BF16, I32, U32, F32, I64, U64, F64 };
std::size_t dtype_size(Dtype d);
std::string to_string(Dtype d);
// "F32" -> Dtype::F32; throws FormatError naming the known dtypes.
Dtype parse_dtype(const std::string& s);

struct TensorInfo {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;  // byte range in the data buffer
  std::int64_t numel() const;
  std::string shape_str() const;  // "[64, 1, 4]"
};

// IEEE half and bfloat16 bit patterns to float (exact: every half and bf16 value is a float).
float half_to_float(std::uint16_t bits);
float bf16_to_float(std::uint16_t bits);

class File {
 public:
  // Reads and validates the header; throws FormatError on anything the format does not allow.
  static File open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Metadata value, or `fallback` when the key is absent.
  std::string meta(const std::string& key, const std::string& fallback = "") const;
  // Every tensor, in name order.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(const std::string& name) const;  // nullptr when absent
  const TensorInfo& at(const std::string& name) const;    // throws FormatError naming file and tensor

  // The tensor's values converted to float / double. F32, F16, BF16 and F64 convert (F64 -> float
  // rounds); any other dtype is refused naming the tensor. Throws FormatError when the file can no
  // longer be read as its header promised (e.g. truncated since it was opened).
  std::vector<float> read_f32(const std::string& name) const;
  std::vector<double> read_f64(const std::string& name) const;
  std::vector<std::byte> read_raw(const std::string& name) const;

 private:
  std::filesystem::path path_;
  std::uint64_t data_start_ = 0;  // 8 + N
  std::map<std::string, std::string> metadata_;
  std::vector<TensorInfo> tensors_;
};

// Builds a file in memory: tensors in the order added, header keys sorted, the header padded with
// spaces to a multiple of 8 bytes (as the reference implementation writes it).
class Writer {
 public:
  void metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }
  // Raw bytes of one tensor; their count must equal prod(shape) * dtype_size (std::invalid_argument
  // otherwise), and a name may be added once.
  void add(const std::string& name, Dtype dtype, std::vector<std::int64_t> shape, std::span<const std::byte> data);
  void add_f32(const std::string& name, std::vector<std::int64_t> shape, std::span<const float> data);
  void add_f64(const std::string& name, std::vector<std::int64_t> shape, std::span<const double> data);
  // The whole file.
  std::vector<std::byte> bytes() const;
  // Writes bytes() to `path` (temporary file, then rename). Throws FormatError when it cannot.
  void write(const std::filesystem::path& path) const;

 private:
  struct Entry {
    std::string name;
    Dtype dtype;
    std::vector<std::int64_t> shape;
    std::vector<std::byte> data;
  };
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Writes `bytes` to `path` as they are (used by tests to write deliberately broken files).
void write_bytes(const std::filesystem::path& path, std::span<const std::byte> bytes);

}  // namespace klab::ref::safetensors
