#include "cli.hpp"

namespace klab {
const std::vector<Command>& extra_commands() {
  static const std::vector<Command> c{};
  return c;
}
}  // namespace klab
