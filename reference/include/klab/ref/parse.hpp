#pragma once
// Strict number parsing for user text (metadata values, command-line options): the whole string
// must be the number, else nothing (empty, trailing characters, out of range).
#include <optional>
#include <stdexcept>
#include <string>

namespace klab::ref {

inline std::optional<long long> parse_whole_int(const std::string& s) {
  std::size_t used = 0;
  long long x = 0;
  try {
    x = std::stoll(s, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != s.size()) return std::nullopt;
  return x;
}

inline std::optional<double> parse_whole_number(const std::string& s) {
  std::size_t used = 0;
  double x = 0;
  try {
    x = std::stod(s, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != s.size()) return std::nullopt;
  return x;
}

}  // namespace klab::ref
