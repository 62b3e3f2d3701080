#pragma once
// Peer baselines (cuBLAS, ...), registered as variants of the ops they compute so they are raced
// in the same run as ours.
#include <vector>

#include "klab/registry.hpp"

namespace klab::baselines {
Variant cublas_sgemv_variant();
// q4_gemv peers on the dequantised weights: cuBLAS bf16 GemmEx (n=1) and f32 SGEMV.
std::vector<Variant> cublas_q4_variants();
// llama.cpp's MMVQ on ggml's CUDA backend (llama_mmvq.cpp), q4_gemv/impl=llama-mmvq. Always
// registered; without ggml (no -DKLAB_GGML_DIR) can_implement gives kLlamaMmvqUnavailable.
Variant llama_mmvq_variant();
bool llama_mmvq_built();  // configured with -DKLAB_GGML_DIR
inline constexpr const char* kLlamaMmvqUnavailable =
    "unavailable: built without ggml (scripts/fetch_ggml, then configure with -DKLAB_GGML_DIR=...)";
// Registers every baseline whose op is already registered.
void register_all(Registry& r);
}  // namespace klab::baselines
