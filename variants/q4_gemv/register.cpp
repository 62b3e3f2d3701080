// The q4_gemv family in the registry: one variant per kernel of kernel.cu, bound to its bit-model.
#include <map>

#include "klab/cuda.hpp"
#include "q4_gemv/lane_block.hpp"
#include "q4_gemv/packed_kernels.hpp"
#include "q4_gemv/variants.hpp"

namespace klab::q4_gemv {

namespace {
// A kernel bound to one workload: codes, scales and x uploaded once; run() only launches.
class KernelInstance : public Instance {
 public:
  KernelInstance(const Q4Kernel& kern, const Workload& wl)
      : kern_(kern), m_(int(wl.w.m)), k_(int(wl.w.k)), codes_(DeviceBuffer<std::uint8_t>::from(wl.w.codes)),
        scales_(DeviceBuffer<std::uint16_t>::from(wl.w.scales)), x_(DeviceBuffer<float>::from(wl.x)), y_(std::size_t(m_)) {}
  void run(cudaStream_t s) override { kern_.launch(codes_.get(), scales_.get(), x_.get(), y_.get(), m_, k_, s); }
  void poison(cudaStream_t s) override { poison_device(y_.get(), y_.size(), s); }
  std::vector<float> output() override { return y_.download(); }

 private:
  const Q4Kernel& kern_;
  int m_, k_;
  DeviceBuffer<std::uint8_t> codes_;
  DeviceBuffer<std::uint16_t> scales_;
  DeviceBuffer<float> x_, y_;
};

// A kernel with a layout of its own (map=packed): the weights repacked once, here, on the host and
// uploaded in that layout; run() only launches (one kernel; x is prepared inside it).
class PackedInstance : public Instance {
 public:
  PackedInstance(const Q4Kernel& kern, const Workload& wl)
      : kern_(kern), m_(int(wl.w.m)), k_(int(wl.w.k)), packed_(DeviceBuffer<std::uint8_t>::from(kern.layout->pack_host(wl.w))),
        x_(DeviceBuffer<float>::from(wl.x)), y_(std::size_t(m_)) {}
  void run(cudaStream_t s) override { kern_.launch_packed(packed_.get(), x_.get(), y_.get(), m_, k_, s); }
  void poison(cudaStream_t s) override { poison_device(y_.get(), y_.size(), s); }
  std::vector<float> output() override { return y_.download(); }

 protected:
  const Q4Kernel& kern_;
  int m_, k_;
  DeviceBuffer<std::uint8_t> packed_;
  DeviceBuffer<float> x_, y_;
};

// The xprep=producer twin of a kernel with launch_prepared (prepared_x.cuh): x arrives prepared, as
// when the kernel before the mat-vec writes its q8 form (the GDN step's gated norm for out_proj).
// The preparation is the kernel's own full launch, run at construction and in reset(), outside the
// timed region; run() is the main kernel alone (launch_prepared). So the timed chain is main after
// main, and against its twin the race measures what the prep launch costs a call. All copies of a
// stream-mode race hold the same x, so their resets write the same words into the one g_xq.
class ProducerInstance : public PackedInstance {
 public:
  ProducerInstance(const Q4Kernel& kern, const Workload& wl) : PackedInstance(kern, wl) {
    PackedInstance::run(nullptr);  // = reset(): prep and main, so g_xq holds this x's words
    KLAB_CUDA(cudaStreamSynchronize(nullptr));
  }
  void run(cudaStream_t s) override { kern_.launch_prepared(packed_.get(), x_.get(), y_.get(), m_, k_, s); }
  void reset(cudaStream_t s) override { PackedInstance::run(s); }
};

std::string describe(const std::vector<std::pair<std::string, std::string>>& axes) {
  std::map<std::string, std::string> a(axes.begin(), axes.end());
  if (a["map"] == "packed") {
    std::string d = "tiles of " + a["rows"] + " rows x 32 blocks repacked once (a group's codes and scales contiguous), ";
    d += a["grid"] == "warp" ? "one warp per group of rows, a lane per block of 32 weights of each chunk of 32 blocks; "
                             : "one thread per block of 32 weights, split-K over warps; ";
    if (a["grid"] == "split-k")
      d += "clusters of k / 1024 thread blocks, block c of a cluster chunk c of k of the cluster's groups of rows: it quantises only its chunk of x "
           "after the wait (4 KB, one launch a call, no prep kernel), " + a["owners"] + " warps a block each with a ring of " + a["stages"] +
           " one-tile stages (one TMA copy a tile, the first requested before the wait), the chunk totals folded across the cluster in chunk "
           "order after one cluster barrier (distributed shared memory); at most " + a["per-sm"] + " block(s) an SM's worth of clusters; " +
           std::string(a["fold"] == "last" ? "no cluster launch: each group folded by the last of its blocks to count in (global memory, a fence "
                                             "and a counter; the same order and bits); "
                                           : "");
    else if (a["grid"] == "warp")
      d += "up to " + a["inflight"] + " chunks' code and scale loads in flight per lane before the wait, chunk totals summed in order in the "
           "warp (no shared memory, no barrier); ";
    else if (a["grid"] == "half")
      d += a["per-sm"] + " persistent block(s) per SM in half an SM's shared memory (about 110 KB per launch), so that the next PDL "
           "launch's blocks co-reside and load their first groups while this one runs; a ring of whole groups per block, one TMA bulk "
           "copy per group (cp.async.bulk + mbarrier); " +
           std::string(a["last"] == "regs" ? "each block's last group loaded into registers before the wait instead of a refilled stage "
                                             "(at most 512 threads: k > 16384 runs without it); "
                                           : a["last"] == "l2" ? "the groups after the ring's first stages requested into L2 ahead of their "
                                                                 "refills by TMA prefetches, the first before the wait; "
                                                               : "") +
           std::string(a["pre"] == "1" ? "only the ring's first stage requested before the wait, the others right after it; " : "");
    else if (a["grid"] == "groups" && a["load"] == "bulk")
      d += "one thread block per group of rows, its weights brought into shared memory by one TMA bulk copy (cp.async.bulk + mbarrier); ";
    else if (a["load"] == "bulk" || a["load"] == "cp-async")
      d += "persistent blocks (as many as the SMs hold) over a ring of shared-memory stages, each one whole group of rows (about 92 KB "
           "per block at k = 5120), refilled as soon as read; " +
           std::string(a["load"] == "bulk" ? "one TMA bulk copy per group (cp.async.bulk + mbarrier), issued by one thread; "
                                           : "each thread cp.async-copies its own 16-byte pieces; ");
    else
      d += a["grid"] == "fill" ? "persistent blocks (as many as the SMs hold), next group's loads in flight during this one's math; "
                               : "one thread block per group of rows; ";
    if (a["xprep"] == "producer")
      d += "x taken as prepared by its producer (prepared_x.cuh; here the kernel's own prep launch, outside the timed region): the main "
           "kernel alone, every weight load issued before the wait; ";
    if (a["xprep"] == "launch") d += "x prepared once per launch by a first PDL-chained kernel (read from L2), every weight load issued before the wait; ";
    if (a["xprep"] == "warps" || a["xprep"] == "warp")
      d += std::string("x prepared once per launch by a first PDL-chained kernel, a warp per block of 32 (") +
           (a["xprep"] == "warps" ? "8 warps a prep block" : "prep blocks of one warp, which fit beside a full main kernel's blocks") +
           "; the words of a thread per block), every weight load issued before the wait; ";
    if (a["wait"] == "flag")
      d += "the main kernel released by a flag its prep kernel's last block sets (release / acquire, its call named by tickets), not by the "
           "prep's completion: no griddepcontrol.wait; ";
    if (a["xprep"] == "block") d += "x quantised by each block's threads once per launch (no prep kernel); ";
    if (a["trigger"] == "late")
      d += "the prep kernel lets the main kernel launch only once its x is in and quantised (its weight requests then queue behind the "
           "prep's x reads, not in front of them); ";
    if (!a["pace"].empty())
      d += "a producer warp requests the ring's stages, at most " + a["pace"] +
           " in flight a block (before the wait too), so that the buffer fills without a burst (the same shared memory, grid and bits); ";
    if (!a["pace"].empty() && !a["per-sm"].empty() && std::stoi(a["per-sm"]) < 3)
      d += "on a grid of at most " + a["per-sm"] + " block(s) an SM, so that a later launch's blocks fit beside its own (the same kernel and bits); ";
    if (!a["pace"].empty() && !a["per-sm"].empty() && std::stoi(a["per-sm"]) >= 3)
      d += "on " + a["per-sm"] + " blocks an SM, each ring shrunk to the stages that let them share it (more consumer warps an SM; the same kernel "
           "and bits); ";
    if (!a["stages"].empty() && a["grid"] != "split-k") d += "a ring of " + a["stages"] + " stages where they fit (the same kernel and bits); ";
    if (a["rest"] == "l2")
      d += "the block's groups past its ring asked of the L2 once the ring's first requests are out (TMA prefetches; the same bits); ";
    if (!a["depth"].empty())
      d += "at most " + a["depth"] + " of the ring's stages filled a block (fewer bytes in flight an SM; the same shared memory, grid and bits); ";
    if (a["tail"] == "split")
      d += "the ring's last round of groups cut into pieces of fewer rows, one a block, so that no block takes a whole group more than the "
           "others (a piece copies its rows' codes and its group's scales; the same bits); ";
    if (!a["defer"].empty())
      d += "each consumer warp releases a stage itself once its codes are in registers, and the warps' sums of " + a["defer"] +
           " groups follow one barrier (the same bits); ";
    if (!a["row-split"].empty())
      d += "each group's rows split over " + a["row-split"] + " threads per block of 32 weights (" + a["row-split"] + " times the warps, the same bits); ";
    if (a["regs"] == "48") d += "the main kernel at 48 registers a thread (8 blocks an SM at k = 5120 instead of 6); ";
    if (!a["parts"].empty())
      d += "the main kernel as " + a["parts"] + " PDL-chained launches over consecutive runs of the row groups, so that one part's blocks load "
           "while the part before waits and computes; ";
    if (a["xprep"] == "cluster")
      d += "clusters of 8 thread blocks: after the wait each member quantises 1/8 of x (8 threads per block of 32) into its shared memory, "
           "the others read it over distributed shared memory (one launch, no prep kernel), every weight load issued before the wait; ";
    if (a["xprep"] == "flag")
      d += "x quantised once inside the launch by the blocks holding its first tickets (8 threads per block of 32) and published by a "
           "flag every block polls (one launch, no prep kernel), every weight load issued before the wait; ";
    d += a["dot"] == "f32" ? "exact f32 offset dot (the bits of block-per-thread,dot=offset)"
         : a["dot"] == "f16x2" ? "code pairs to f16x2 by the 1024 magic (a LOP3 and an HFMA2), HFMA2 with x scaled per block to f16, f32 across blocks"
                               : "x quantised per block to int8 in the kernel, DP4A on masked codes (q8_1-like)";
    d += a["pdl"] == "on" ? "; programmatic dependent launch" : "; plain launch";
    if (a["xpf"] == "l2") d += "; x prefetched into L2 (one TMA bulk prefetch per warp) before any weight load is issued";
    if (a["wpf"] == "l2") d += "; the prep kernel also prefetches the call's weights into L2 (at most half the L2) while the previous call runs";
    return d;
  }
  if (a["map"] == "block-per-thread")
    return "one thread per block of 32 weights (all loads issued at once, no loop), split-K over the warps of a thread "
           "block reduced in shared memory; " + a["rows"] + " rows per thread block" +
           (a["dot"] == "offset" ? "; offset dot 16*(sum v*x - 1.5 sum x), one instruction less per weight" : "");
  if (a["map"] == "block-per-lane")
    return "each lane owns whole blocks: one 16-byte code load per block, next block prefetched, scale applied to the "
           "block's dot; " + a["rows"] + " row(s) per warp";
  std::string d = "warp-per-";
  d += a["rows"] == "1" ? "row" : a["rows"] + "-rows (x loaded once per block for all)";
  d += a["scale"] == "per-lane" ? "; every lane loads the f16 scale (broadcast)" : "; lane 0 loads the f16 scale, __shfl_sync broadcasts";
  d += a["chains"] == "1" ? "; 1 accumulator chain" : "; " + a["chains"] + " accumulator chains";
  d += a["f16"] == "soft" ? "; software f16->f32 (bit manipulation)" : "; hardware f16->f32 (__half2float)";
  return d;
}

// A registry variant of `kern` under `axes` (its own, or a twin's), run by instances of I; its model is
// kern's (a twin runs kern's arithmetic on the same words).
template <class I>
Variant variant_of(const Q4Kernel& kern, std::vector<std::pair<std::string, std::string>> axes) {
  Variant v;
  v.op = kOp;
  v.axes = std::move(axes);
  v.name = variant_name(v.op, v.axes);
  v.description = describe(v.axes);
  const std::string map = v.axes.at(0).second;
  v.can_implement = [map](const Problem& p) {
    if (auto why = launch_error(p.shape.m, p.shape.k); !why.empty()) return why;
    if (map == "block-per-thread") return block_thread_error(p.shape.k);
    if (map == "packed") return packed::packed_error(p.shape.k);
    return std::string();
  };
  v.tolerance = kern.tolerance;
  const Q4Kernel* kp = &kern;
  v.make = [kp](const klab::Workload& wl) { return std::unique_ptr<Instance>(new I(*kp, workload_of(wl))); };
  Q4Model model = q4_model(kern.name);
  v.cpu_model = [model](const klab::Workload& wl) {
    const auto& w = workload_of(wl);
    return model(w.w, w.x);
  };
  return v;
}
}  // namespace

std::vector<Variant> kernel_variants() {
  std::vector<Variant> out;
  for (const Q4Kernel& kern : q4_kernels())
    out.push_back(kern.layout ? variant_of<PackedInstance>(kern, kern.axes) : variant_of<KernelInstance>(kern, kern.axes));
  // The xprep=producer twins (ProducerInstance) of the xprep=launch,pdl=on kernels with launch_prepared.
  for (const Q4Kernel& kern : q4_kernels()) {
    if (!kern.launch_prepared) continue;
    const std::map<std::string, std::string> a(kern.axes.begin(), kern.axes.end());
    if (a.at("xprep") != "launch" || a.at("pdl") != "on") continue;
    auto axes = kern.axes;
    for (auto& [key, value] : axes)
      if (key == "xprep") value = "producer";
    out.push_back(variant_of<ProducerInstance>(kern, std::move(axes)));
  }
  return out;
}

void register_all(Registry& r) {
  r.add(make_op());
  for (auto& v : kernel_variants()) r.add(std::move(v));
}

}  // namespace klab::q4_gemv
