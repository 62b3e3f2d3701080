#include "long_options.hpp"

#include <algorithm>

#include "klab/error.hpp"

namespace klab::experiments {

LongOptions parse_long_options(const std::vector<std::string>& args, const std::vector<std::string>& known,
                               const std::string& command) {
  LongOptions o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i], value;
    bool has_value = false;
    if (auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_value = true;
    }
    if (a == "--help" || a == "-h") {
      o.help = true;
      continue;
    }
    if (std::find(known.begin(), known.end(), a) == known.end())
      throw Error(a.rfind("-", 0) == 0 ? "unknown option '" + a + "' (see `klab " + command + " --help`)"
                                       : "unexpected argument '" + a + "' (options only; see `klab " + command + " --help`)");
    if (!has_value) {
      require(i + 1 < args.size(), a + " needs a value");
      value = args[++i];
    }
    require(!value.empty(), a + " needs a non-empty value");
    o.values.emplace_back(a, value);
  }
  return o;
}

}  // namespace klab::experiments
