#pragma once
// The nouns: an op (what is computed), its workload (host data for one problem), a variant (one
// implementation, with a stable name derived from its axes), an instance (a variant bound to a
// workload, holding device memory), and the registry that lists them all.
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "klab/problem.hpp"

namespace klab {

// Host data for one problem of one op (weights, input). Each op derives its own.
struct Workload {
  Problem problem;
  virtual ~Workload() = default;
  // A hash of every input byte (klab::fnv1a64), for the report: the same problem must give the same
  // bytes on every run and machine. 0: the op does not provide one.
  virtual std::uint64_t digest() const { return 0; }
};

// A named tensor, flattened row-major: an op's reference outputs are f64 (`Named<double>`), a
// variant's outputs f32 (`Named<float>`). A mat-vec has one, "y"; the GDN step has "out", "S", "hist".
template <class T>
struct Named {
  std::string name;
  std::vector<T> data;
};

// Bytes a perfect kernel must move and multiply-accumulates it must do.
struct Traffic {
  double bytes = 0;
  double macs = 0;
};

struct Op {
  std::string name;
  std::string description;
  // Builds the host data of a problem (deterministic in problem.seed).
  std::function<std::unique_ptr<Workload>(const Problem&)> generate;
  // The CPU truth (Eigen, f64 accumulation) of an op with one output, "y"; an op with several sets
  // `references` instead. references_of() gives either as named tensors.
  std::function<std::vector<double>(const Workload&)> reference;
  std::function<std::vector<Named<double>>(const Workload&)> references;
  std::function<Traffic(const Problem&)> traffic;
  // Rejects shapes the op itself cannot have (empty string: fine).
  std::function<std::string(const Problem&)> validate = [](const Problem&) { return std::string(); };
  // The op's own parameters (Problem::params) beyond the mat-vec shape; `klab list ops` shows them
  // and `--set NAME=...` sweeps them. Mat-vec ops declare none (their shape is m x k).
  std::vector<ParamDecl> params;
  // A problem of this op at its declared defaults (shape {0, 0}: ops with params only).
  Problem default_problem(Dist dist = Dist::uniform, std::uint64_t seed = 1) const;
  // The problems its declarations name: every combination of each parameter's seed values (with
  // `quick`, its quick values; a parameter that declares none: its default). Empty for ops without
  // params. Tests and klab_bench sweep these; validate() may still refuse one.
  std::vector<Problem> declared_problems(bool quick, Dist dist = Dist::uniform, std::uint64_t seed = 1) const;
  std::vector<Named<double>> references_of(const Workload& w) const;
};

// A variant bound to one workload: device memory allocated, inputs uploaded.
class Instance {
 public:
  virtual ~Instance() = default;
  // The timed region: enqueue the computation on `stream`. No allocation, no sync.
  virtual void run(cudaStream_t stream) = 0;
  // Fill the outputs with the poison pattern.
  virtual void poison(cudaStream_t stream) = 0;
  // Copy the outputs to the host (synchronous): an op with one output overrides output() ("y"), one
  // with several overrides outputs(), naming each as its op's reference does.
  virtual std::vector<float> output();
  virtual std::vector<Named<float>> outputs() { return {{"y", output()}}; }
  // Undo what run() changed in the inputs (stateful kernels); called outside the timed region.
  virtual void reset(cudaStream_t stream) {}
  // Stream mode: the fewest input copies a graph of back-to-back run()s may rotate over without breaking
  // this instance's contract (a kernel that loads its state before griddepcontrol.wait must not load the
  // copy that a launch still in flight writes). The race rotates over at least this many, also under
  // --hot (one copy otherwise). Default 1: run() reads nothing an earlier launch may still write.
  virtual int min_stream_copies() const { return 1; }
};

struct Variant {
  std::string name;         // "<op>/<axes>", e.g. "q4_gemv/scale=lane,chains=4,f16=hard,rows=1"
  std::string op;
  std::string description;  // one line: what this variant does
  std::vector<std::pair<std::string, std::string>> axes;  // in name order
  bool peer = false;        // a baseline from elsewhere (cuBLAS, ...), raced beside ours
  // max_rel this variant must reach against its op's reference (0: the race's default). Set where
  // the variant rounds differently on purpose (e.g. a bf16 peer), with the reason beside it.
  double tolerance = 0;
  // Why this variant cannot run `p` (empty: it can). Shown as a skip with the reason.
  std::function<std::string(const Problem&)> can_implement = [](const Problem&) { return std::string(); };
  std::function<std::unique_ptr<Instance>(const Workload&)> make;
  // Optional CPU bit-model: reproduces the kernel's arithmetic order exactly.
  std::function<std::vector<float>(const Workload&)> cpu_model;
  // Bytes and MACs of this variant's own format where they differ from its op's (e.g. a state kept
  // in bf16): GB/s and the shares of the ceiling read these, the record keeps the op's as op_bytes.
  // Empty: the op's (Op::traffic). Peers that read another copy of the data keep the op's on purpose.
  std::function<Traffic(const Problem&)> traffic;
};

// Builds "op/k1=v1,k2=v2" from the axes.
std::string variant_name(const std::string& op, const std::vector<std::pair<std::string, std::string>>& axes);

class Context;  // experiment.hpp

// A claim an experiment states before it runs: a stable id (unique in the experiment, what the
// run settles it by: Context::claim) and the sentence reported. Declare each once, beside the races
// that judge it, e.g. `const Claim kFaster{"faster", "B is faster than A on ..."};`, list it in
// Experiment::claims and settle it with ctx.claim(kFaster).settle(...).
struct Claim {
  std::string id;
  std::string text;
};

struct Experiment {
  std::string name;
  std::string description;
  std::vector<Claim> claims;  // stated before the run; each is reported held / not held / not evaluated
  bool needs_device = true;
  // With needs_device false: a device, where there is one, still serves part of it (the kernels' half
  // of gdn-state-drift), so the run sets up its timer and ceiling as for the others. Without this an
  // experiment like that, run alone on a GPU machine, found no timer (2026-12-01, H200: exit 2).
  bool uses_device = false;
  std::function<void(Context&)> run;
};

class Registry {
 public:
  void add(Op op);
  void add(Variant v);
  void add(Experiment e);

  const Op& op(const std::string& name) const;            // throws klab::Error naming the known ops
  const Variant& variant(const std::string& name) const;  // likewise
  const Experiment& experiment(const std::string& name) const;
  bool has_variant(const std::string& name) const { return variants_.count(name) != 0; }

  const std::map<std::string, Op>& ops() const { return ops_; }
  const std::map<std::string, Variant>& variants() const { return variants_; }
  const std::map<std::string, Experiment>& experiments() const { return experiments_; }
  // Variants of `op`, in name order.
  std::vector<const Variant*> variants_of(const std::string& op) const;
  // Refuses (klab::Error, with "did you mean") a parameter name (--set) that is not m, k, dist or one
  // some op declares (Op::params).
  void check_param_name(const std::string& name) const;
  // Names matching a shell-style glob (* and ?).
  static bool glob_match(const std::string& pattern, const std::string& text);

 private:
  std::map<std::string, Op> ops_;
  std::map<std::string, Variant> variants_;
  std::map<std::string, Experiment> experiments_;
};

}  // namespace klab
