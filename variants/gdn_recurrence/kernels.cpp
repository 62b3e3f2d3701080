#include "gdn_recurrence/kernels.hpp"

#include <cmath>
#include <cstdint>

#include "klab/error.hpp"
#include "klab/registry.hpp"

namespace klab::gdn_recurrence {

RecurrenceArgs dense_args(int nk, int nv, int dk, int dv, int batch) {
  RecurrenceArgs a;
  a.nk = nk, a.nv = nv, a.dk = dk, a.dv = dv, a.batch = batch;
  a.q_stride = a.k_stride = std::int64_t(nk) * dk;
  a.v_stride = a.o_stride = std::int64_t(nv) * dv;
  a.gb_stride = nv;
  a.S_stride = std::int64_t(nv) * dk * dv;
  return a;
}

const std::vector<RecurrenceKernel>& recurrence_kernels() {
  static const std::vector<RecurrenceKernel> all = [] {
    std::vector<RecurrenceKernel> v = seed_kernels();
    for (auto& k : fused_kernels()) v.push_back(std::move(k));
    for (auto& k : v) k.name = variant_name("gdn_recurrence", k.axes);
    return v;
  }();
  return all;
}

const RecurrenceKernel& recurrence_kernel(const std::string& name) {
  std::string known;
  for (const auto& k : recurrence_kernels()) {
    if (k.name == name) return k;
    known += (known.empty() ? "" : ", ") + k.name;
  }
  throw Error("no gdn_recurrence kernel '" + name + "' (known: " + known + ")");
}

int min_state_copies(bool before_wait, bool ahead, double resident_launches) {
  if (!before_wait) return 1;
  if (!ahead) return 2;
  require(resident_launches >= 0 && std::isfinite(resident_launches), "min_state_copies: resident launches must be a finite count >= 0");
  return 2 + static_cast<int>(std::floor(resident_launches));
}

int min_state_copies(const RecurrenceKernel& kern, const RecurrenceArgs& a) {
  require(!kern.state_ahead || kern.resident_launches, "min_state_copies: " + kern.name + " lets its dependents go first and says no resident_launches");
  return min_state_copies(kern.state_before_wait, kern.state_ahead, kern.state_ahead ? kern.resident_launches(a) : 0.0);
}

std::string check_args(const RecurrenceKernel& kern, const RecurrenceArgs& a) {
  if (a.nk <= 0 || a.nv <= 0 || a.dk <= 0 || a.dv <= 0 || a.batch <= 0) return "nk, nv, dk, dv and batch must be positive";
  if (a.nv % a.nk != 0) return "nv must be a multiple of nk";
  if (auto why = kern.can_implement(a); !why.empty()) return why;
  if (!a.q || !a.k || !a.v || !a.g || !a.beta || !a.S || !a.o) return "a null tensor pointer";
  if (kern.workspace_floats(a) > 0 && !a.workspace) return "no workspace (" + std::to_string(kern.workspace_floats(a)) + " floats needed)";
  if (a.onn) {
    if (!kern.gated_norm) return "the gated-norm epilogue (onn) asked of a kernel without one (" + kern.name + ")";
    if (!a.z || !a.norm_w) return "the gated-norm epilogue needs z and norm_w";
    if (!(a.eps > 0)) return "the gated-norm epilogue needs eps > 0";
    auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
    if (!aligned(a.z) || !aligned(a.norm_w) || !aligned(a.onn)) return "z, norm_w and onn must be 16-byte aligned (float4 loads and stores)";
    if (kern.counts && !a.count)
      return "the gated-norm epilogue of " + kern.name + " needs its per-head counts (RecurrenceArgs::count: batch * nv ints, zero)";
  }
  if (a.xq) {
    if (!a.onn) return "onn's q8 form (xq) asked without the gated-norm epilogue (onn)";
    if (!kern.norm_q8) return "onn's q8 form (xq) asked of a kernel that cannot write it (" + kern.name + "; a head's columns must be one block: cols >= dv)";
    if (a.dv % 32 != 0) return "onn's q8 form (xq) needs dv a multiple of 32 (blocks of 32 activations within a head), not " + std::to_string(a.dv);
    if (a.batch != 1) return "onn's q8 form (xq) is one sequence's (batch 1), not batch " + std::to_string(a.batch);
    for (const auto& [axis, value] : kern.axes)
      if (axis == "cols" && !kern.counts && a.dv > std::stoi(value)) return "onn's q8 form (xq) needs a head's dv columns in one block: dv " + std::to_string(a.dv) + " > cols=" + value;
  }
  if (a.xc) {
    if (!kern.conv_prep) return "the conv prep (xc) asked of a kernel without prep=conv (" + kern.name + ")";
    if (a.batch != 1) return "the conv prep (xc) is one sequence's (batch 1), not batch " + std::to_string(a.batch);
    if (a.ck < 1) return "the conv prep (xc) needs ck >= 1 conv taps, not " + std::to_string(a.ck);
    if (!a.conv_w || (a.ck > 1 && !a.hist) || !a.ba || !a.a_log || !a.dt_bias)
      return "the conv prep (xc) needs conv_w, hist (ck > 1), ba, a_log and dt_bias";
    if (!a.xcv_out || !a.q_out || !a.k_out || !a.beta_out || !a.g_out) return "the conv prep (xc) needs xcv_out, q_out, k_out, beta_out and g_out";
    if (kern.hist_ring && !a.hist_ring)
      return "the conv prep of " + kern.name + " keeps the history as a ring of ck frames: it needs its position and ticket (RecurrenceArgs::hist_ring)";
    if (!kern.hist_ring && a.hist_ring) return "a ring history (hist_ring) handed to " + kern.name + ", which reads ck-1 frames and shifts nothing";
  }
  if (kern.vec4) {
    auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
    const bool s_ok = kern.state_bf16 ? reinterpret_cast<std::uintptr_t>(a.S) % 8 == 0 : aligned(a.S);
    if (!s_ok) return kern.state_bf16 ? "S (bf16) must be 8-byte aligned (4 elements a load and a store)" : "S, o and v must be 16-byte aligned (float4 loads and stores)";
    if (!aligned(a.o) || !aligned(a.v)) return "S, o and v must be 16-byte aligned (float4 loads and stores)";
    if (a.dv % 4 != 0 || a.S_stride % 4 != 0 || a.o_stride % 4 != 0 || a.v_stride % 4 != 0)
      return "dv and the S, o and v strides must be multiples of 4 floats (float4 loads and stores)";
  }
  return "";
}

}  // namespace klab::gdn_recurrence
