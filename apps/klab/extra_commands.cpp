#include "cli.hpp"
#include "export_cli.hpp"
#include "gdn_cli.hpp"
#include "klab/catalog.hpp"
#include "profile_cli.hpp"

namespace klab {
const std::vector<Command>& extra_commands() {
  static const std::vector<Command> c{
      {"gdn", experiments::kGdnUsage, experiments::gdn_command},
      {"profile-one", experiments::kProfileOneUsage,
       [](const std::vector<std::string>& a, int argc, char** argv) { return experiments::profile_one_command(registry(), a, argc, argv); }},
      {"probe-ring", experiments::kProbeRingUsage, experiments::probe_ring_command},
      {"probe-rec", experiments::kProbeRecUsage, experiments::probe_rec_command},
      {"probe-hop", experiments::kProbeHopUsage, experiments::probe_hop_command},
      {"probe-cluster", experiments::kProbeClusterUsage, experiments::probe_cluster_command},
      {"probe-q4", experiments::kProbeQ4Usage, experiments::probe_q4_command},
      {"export", experiments::kExportUsage,
       [](const std::vector<std::string>& a, int argc, char** argv) { return experiments::export_command(registry(), a, argc, argv); }},
  };
  return c;
}
}  // namespace klab
