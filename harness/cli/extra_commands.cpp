#include "cli.hpp"
#include "gdn_cli.hpp"

namespace klab {
const std::vector<Command>& extra_commands() {
  static const std::vector<Command> c{
      {"gdn", experiments::kGdnUsage, experiments::gdn_command},
  };
  return c;
}
}  // namespace klab
