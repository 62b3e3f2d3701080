// Peer: cuBLAS SGEMV on the f32_gemv workload (SgemvInstance, cublas_util.hpp).
#include "baselines/baselines.hpp"
#include "baselines/cublas_util.hpp"
#include "f32_gemv/op.hpp"
#include "klab/cuda.hpp"

namespace klab::baselines {

Variant cublas_sgemv_variant() {
  Variant v;
  v.op = "f32_gemv";
  v.axes = {{"impl", "cublas-sgemv"}};
  v.name = variant_name(v.op, v.axes);
  v.description = "peer: cuBLAS SGEMV (CUBLAS_OP_T on the row-major weights)";
  v.peer = true;
  v.make = [](const klab::Workload& wl) {
    const auto& w = f32_gemv::workload_of(wl);
    return std::unique_ptr<Instance>(new SgemvInstance(int(w.problem.shape.m), int(w.problem.shape.k), w.w, w.x));
  };
  return v;
}

}  // namespace klab::baselines
