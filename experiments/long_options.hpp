#pragma once
// The option words of `klab gdn` and `klab export`: --name VALUE or --name=VALUE, and --help / -h.
// Every option takes a value; a later one replaces an earlier. Refusals name the word and the
// command's --help: an unknown option, a positional word, a missing or empty value.
#include <string>
#include <utility>
#include <vector>

namespace klab::experiments {

struct LongOptions {
  bool help = false;
  std::vector<std::pair<std::string, std::string>> values;  // (name with its --, value) in command-line order
};

LongOptions parse_long_options(const std::vector<std::string>& args, const std::vector<std::string>& known,
                               const std::string& command);

}  // namespace klab::experiments
