#pragma once
// Errors that reach the user. Every refusal names the problem; the CLI turns them into a message
// and a non-zero exit, before any report is written.
#include <stdexcept>
#include <string>

namespace klab {

// A user-facing error: bad input, an impossible size, a misuse of an API.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws klab::Error(message) when `ok` is false.
inline void require(bool ok, const std::string& message) {
  if (!ok) throw Error(message);
}

}  // namespace klab
