#pragma once
// Whether a PDL-launched grid with a cluster dimension enters before the grid before it ends (`klab probe-cluster`;
// issue 13). Why (2026-12-06): q4_gemv's grid=split-k, every call a cluster launch, took a near constant 2.1-2.6 us a
// call more than the paced ring on an H100 at every size and on every grid (reports/h100/run-call64), as if a call's
// blocks entered only once the call before had ended. Here a grid of blocks that each spin `pre` us before
// griddepcontrol.wait (the weight loads' share) and `post` us after it (x and the dots) is launched back to back on one
// stream, each block's thread 0 recording %globaltimer at its entry and at its exit. Per form the probe gives the median
// over launches of the next grid's first entry less this grid's last exit (negative: its blocks entered early, as PDL
// lets them where they fit beside this grid's) and of the period between exits. First run (H100, reports/h100/run-call66,
// 2026-12-06): with PDL every form enters early (3.8-4.9 us before the last exit at 80 KB, one block an SM), clusters or
// not; clusters of 5-8 lengthen the period 3.84 -> 5.1-5.4 us there, and at two blocks an SM (more clusters than the card
// holds at once) run in two waves.
#include <cuda_runtime.h>

#include <string>
#include <vector>

namespace klab {

struct ClusterForm {
  int cluster = 0;   // blocks a cluster: 0 (no cluster attribute), 1 to 8
  bool pdl = true;   // programmatic stream serialization (PDL)
  int smem_kb = 0;   // dynamic shared memory a block, KB: 0 to 200
  int per_sm = 1;    // blocks an SM's worth in the grid: 1 to 4 (per_sm x SMs rounded down to whole clusters)
  std::string str() const;  // "C,on|off,KB,N" as --form takes it
};

// A form's refusal, "" when it can run.
std::string cluster_form_error(const ClusterForm& f);
// "C,on|off,KB,N" (e.g. "5,on,80,1"); throws Error naming the text and the values allowed.
ClusterForm parse_cluster_form(const std::string& s);
// The forms `klab probe-cluster` runs when none is given: clusters 0 (none), 1, 2, 5, 6 and 8, PDL on and off, at 80 KB a
// block one block an SM's worth (room for the next grid's block beside each) and two (no room), and at 0 KB one.
std::vector<ClusterForm> default_cluster_forms();

struct ClusterEntry {
  ClusterForm form;
  int grid = 0;            // blocks launched
  int resident_blocks = 0; // blocks of the form the device holds at once (cudaOccupancyMaxActiveClusters x C, or blocks an
                           // SM x SMs): a grid past it runs in more than one wave
  double entry_gap_us = 0; // median over launches of (next grid's first entry) - (this grid's last exit)
  double period_us = 0;    // median of the time between consecutive grids' last exits
  int launches = 0;        // launches the medians are over (after the first quarter, dropped as warm-up)
};

// One form on the current device: `launches` (>= 8) back to back on `stream`, each block spinning pre_us before its
// wait and post_us after it. Throws Error where the form is refused or the device cannot hold one of its clusters.
ClusterEntry measure_cluster_entry(const ClusterForm& f, int launches, double pre_us, double post_us, cudaStream_t stream);

}  // namespace klab
