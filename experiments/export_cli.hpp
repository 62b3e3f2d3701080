#pragma once
// `klab export`: writes the exact problem klab races, with its f64 reference, as one .safetensors
// file, so that peers outside klab (peers/run.py: torch's int4 mat-vec, gemlite, fla) run on the
// same bytes and are checked against the same truth.
//
//   q4_gemv (klab export --op q4_gemv --shape MxK [--input DIST] [--seed S] --out FILE):
//     codes   U8  (m, k/2)   raw-q4 codes, two per byte, even column in the LOW nibble (klab/ref/q4.hpp)
//     scales  F16 (m, k/32)  one IEEE binary16 scale per 32 weights along a row (the bits klab holds)
//     x       F32 (k)
//     y       F64 (m)        the reference: dequant(W) x, every product and sum in f64
//     metadata: op, shape, m, k, dist, seed, bytes and macs (the op's byte model), git_commit, ...
//   gdn_recurrence (klab export --op gdn_recurrence --batch B [--input DIST] [--seed S] --out FILE):
//     one decode step of the GDN recurrence (operators 4-5, ref::gdn::recurrence) for B sequences
//     of Qwen3.5-27B's heads (16 key heads, 48 value heads, dk = dv = 128):
//     q, k    F32 (B, 16, 128)      RAW: not L2-normalised, not scaled (the conv output's views)
//     v       F32 (B, 48, 128)
//     g       F32 (B, 48)           log-domain decay: S *= exp(g)
//     beta    F32 (B, 48)           post-sigmoid
//     S0      F32 (B, 48, 128, 128) the state before the step, (dk, dv) row-major per value head
//     o       F64 (B, 48, 128)      the reference output S^T qn (updated S)
//     S       F64 (B, 48, 128, 128) the reference state after the step
//     qn, kn  F64 (B, 16, 128)      the reference's normalised q (scaled by 1/sqrt(dk)) and k
//   A peer that normalises in its kernel (fla: use_qk_l2norm_in_kernel=True, scale=1/sqrt(dk))
//   takes q, k; one that does not takes qn, kn (with scale 1).
#include <string>
#include <vector>

#include "klab/registry.hpp"

namespace klab::experiments {

// Registered in apps/klab/extra_commands.cpp, which passes the catalogue's registry (the op is
// looked up in `reg`). Returns 0 when the file was written; throws
// klab::Error on bad options (the CLI prints it and exits 2), before anything is written.
int export_command(const Registry& reg, const std::vector<std::string>& args, int argc, char** argv);

// The one-line usage shown by `klab --help`.
extern const char* const kExportUsage;

}  // namespace klab::experiments
