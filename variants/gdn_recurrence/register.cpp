#include "gdn_recurrence/variants.hpp"

#include "klab/cuda.hpp"
#include "klab/ref/q4.hpp"

namespace klab::gdn_recurrence {

namespace {

RecurrenceArgs args_of(const Problem& p) {
  return dense_args(int(p.param("nk")), int(p.param("nv")), int(p.param("dk")), int(p.param("dv")), int(p.param("batch")));
}

// One kernel bound to one workload: the inputs and S0 uploaded once; S is the state run() updates in
// place, restored from S0 by a device-to-device copy in reset() (outside the timed region). A
// state=bf16 kernel gets S0 rounded to bf16 (to nearest even) and its S read back widened to f32.
class RecurrenceInstance : public Instance {
 public:
  RecurrenceInstance(const RecurrenceKernel& kern, const Workload& w)
      : kern_(kern), q_(DeviceBuffer<float>::from(w.q)), k_(DeviceBuffer<float>::from(w.k)), v_(DeviceBuffer<float>::from(w.v)),
        g_(DeviceBuffer<float>::from(w.g)), beta_(DeviceBuffer<float>::from(w.beta)), o_(w.v.size()) {
    if (kern_.state_bf16) {
      S0b_ = DeviceBuffer<std::uint16_t>::from(ref::to_bf16(w.S0));
      Sb_ = DeviceBuffer<std::uint16_t>(w.S0.size());
    } else {
      S0_ = DeviceBuffer<float>::from(w.S0);
      S_ = DeviceBuffer<float>(w.S0.size());
    }
    a_ = dense_args(w.nk, w.nv, w.dk, w.dv, w.batch);
    a_.q = q_.get(), a_.k = k_.get(), a_.v = v_.get(), a_.g = g_.get(), a_.beta = beta_.get(), a_.o = o_.get();
    a_.S = kern_.state_bf16 ? reinterpret_cast<float*>(Sb_.get()) : S_.get();
    a_.normalize_qk = true;
    ws_ = DeviceBuffer<float>(kern_.workspace_floats(a_));
    a_.workspace = ws_.get();
    if (auto why = check_args(kern_, a_); !why.empty()) throw Error(kern_.name + ": " + why);
    reset(nullptr);
    KLAB_CUDA(cudaDeviceSynchronize());
  }
  void run(cudaStream_t s) override { kern_.launch(a_, s); }
  // pdl=on and pdl=ahead load S before their wait: back to back they need copies of it (min_state_copies).
  int min_stream_copies() const override { return min_state_copies(kern_, a_); }
  // o is poisoned; S cannot be (it is read before it is written): it is restored to S0, so that a
  // tile the kernel never writes keeps S0, which differs from the reference's S by the decay
  // (exp(g) <= 0.999) and the rank-1 update, and fails the check.
  void poison(cudaStream_t s) override {
    poison_device(o_.get(), o_.size(), s);
    reset(s);
  }
  void reset(cudaStream_t s) override {
    if (kern_.state_bf16)
      KLAB_CUDA(cudaMemcpyAsync(Sb_.get(), S0b_.get(), S0b_.bytes(), cudaMemcpyDeviceToDevice, s));
    else
      KLAB_CUDA(cudaMemcpyAsync(S_.get(), S0_.get(), S0_.bytes(), cudaMemcpyDeviceToDevice, s));
  }
  std::vector<Named<float>> outputs() override {
    return {{"o", o_.download()}, {"S", kern_.state_bf16 ? ref::from_bf16(Sb_.download()) : S_.download()}};
  }

 private:
  const RecurrenceKernel& kern_;
  RecurrenceArgs a_;
  DeviceBuffer<float> q_, k_, v_, g_, beta_, S0_, S_, o_, ws_;
  DeviceBuffer<std::uint16_t> S0b_, Sb_;  // state=bf16
};

}  // namespace

Variant make_variant(const RecurrenceKernel& kern) {
  Variant v;
  v.op = "gdn_recurrence";
  v.axes = kern.axes;
  v.name = variant_name(v.op, v.axes);
  v.description = kern.description;
  v.tolerance = kern.state_bf16 ? kBf16Tolerance : kTolerance;
  const RecurrenceKernel* k = &kern;  // recurrence_kernels() lives as long as the program
  v.can_implement = [k](const Problem& p) { return k->can_implement(args_of(p)); };
  v.make = [k](const klab::Workload& wl) { return std::unique_ptr<Instance>(new RecurrenceInstance(*k, workload_of(wl))); };
  // state=bf16 reads and writes S at 2 bytes an element, not the op's 4: its GB/s and share of the
  // ceiling count its own bytes (before 2026-12-01's run-08a86f8 they counted the f32 state's and read
  // 110.7% of the ceiling at batch 32).
  if (kern.state_bf16)
    v.traffic = [](const Problem& p) {
      static const Op op = make_op();
      Traffic t = op.traffic(p);
      t.bytes -= double(p.param("batch")) * 4.0 * double(p.param("nv")) * double(p.param("dk")) * double(p.param("dv"));
      return t;
    };
  return v;
}

void register_all(Registry& r) {
  r.add(make_op());
  for (const auto& k : recurrence_kernels()) r.add(make_variant(k));
}

}  // namespace klab::gdn_recurrence
