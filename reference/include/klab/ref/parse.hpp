#pragma once
// Strict number parsing for user text (metadata values, command-line options): the whole string
// must be the number, else nothing (empty, leading or trailing characters, out of range).
// std::stoll/stod skip leading whitespace themselves: " 5" is refused here before they see it.
#include <cctype>
#include <optional>
#include <stdexcept>
#include <string>

namespace klab::ref {

namespace detail {
inline bool starts_with_space(const std::string& s) { return !s.empty() && std::isspace(static_cast<unsigned char>(s[0])); }
}  // namespace detail

inline std::optional<long long> parse_whole_int(const std::string& s) {
  if (detail::starts_with_space(s)) return std::nullopt;
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
  if (detail::starts_with_space(s)) return std::nullopt;
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
