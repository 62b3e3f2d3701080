#include "cli.hpp"
#include "export_cli.hpp"
#include "gdn_cli.hpp"
#include "profile_cli.hpp"

namespace klab {
const std::vector<Command>& extra_commands() {
  static const std::vector<Command> c{
      {"gdn", experiments::kGdnUsage, experiments::gdn_command},
      {"profile-one", experiments::kProfileOneUsage, experiments::profile_one_command},
      {"export", experiments::kExportUsage, experiments::export_command},
  };
  return c;
}
}  // namespace klab
