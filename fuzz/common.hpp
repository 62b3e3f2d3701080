#pragma once
// What the fuzz targets share: the input as a file (the readers' public API takes a path), a check
// that aborts with a message (libFuzzer then saves the input as a crash), and an f16 oracle.
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace klab::fuzz {

// An invariant: false aborts (a libFuzzer crash, the input saved) after printing what broke.
#define KLAB_FUZZ_CHECK(cond, what)                                                                          \
  do {                                                                                                       \
    if (!(cond)) {                                                                                           \
      std::fprintf(stderr, "klab fuzz: invariant broken at %s:%d: %s\n  %s\n", __FILE__, __LINE__, #cond,   \
                   std::string(what).c_str());                                                               \
      std::abort();                                                                                          \
    }                                                                                                        \
  } while (0)

// An in-memory file (memfd) reachable by a path (/proc/self/fd/N), so each input goes through the
// readers' real file API (open, size, seek, read) without touching a disk. One per process; each
// set() replaces its contents.
class MemFile {
 public:
  explicit MemFile(const char* name) : fd_(::memfd_create(name, MFD_CLOEXEC)) {
    if (fd_ < 0) {
      std::perror("klab fuzz: memfd_create");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  ~MemFile() { ::close(fd_); }

  void set(const void* data, std::size_t size) {
    resize(0);
    std::size_t done = 0;
    while (done < size) {
      const ssize_t n = ::pwrite(fd_, static_cast<const char*>(data) + done, size - done, off_t(done));
      if (n <= 0) {
        std::perror("klab fuzz: pwrite");
        std::abort();
      }
      done += std::size_t(n);
    }
  }
  void resize(std::size_t size) {
    if (::ftruncate(fd_, off_t(size)) != 0) {
      std::perror("klab fuzz: ftruncate");
      std::abort();
    }
  }
  const std::string& path() const { return path_; }

 private:
  int fd_;
  std::string path_;
};

// IEEE binary16 to float from the definition (sign, 5-bit exponent biased by 15, 10-bit fraction),
// by arithmetic rather than bit surgery: the oracle for the readers' f16 conversions.
inline float f16_oracle(std::uint16_t h) {
  const bool neg = h & 0x8000u;
  const int exp = (h >> 10) & 0x1F;
  const int frac = h & 0x3FF;
  double v;
  if (exp == 0x1F) v = frac ? std::nan("") : INFINITY;
  else if (exp == 0) v = std::ldexp(double(frac), -24);                // subnormal: frac * 2^-24
  else v = std::ldexp(double(1024 + frac), exp - 25);                  // (1 + frac/1024) * 2^(exp-15)
  return float(neg ? -v : v);
}

// a == b as values, NaN equal to NaN, +0 distinct from -0.
inline bool same_value(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

}  // namespace klab::fuzz
