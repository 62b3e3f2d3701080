#pragma once
#include "gdn_recurrence/kernels.hpp"
#include "gdn_recurrence/op.hpp"

namespace klab::gdn_recurrence {
// max_rel every variant must reach against the f64 reference, on o and on S: the f32 GDN tier's
// criterion (experiments/gdn.cpp kTol) and the fla peer's (peers/README.md), so that all are judged
// alike. f32 sums of dk = 128 terms give ~1e-6 (not measured here: the race records each max_rel).
inline constexpr double kTolerance = 1e-4;
// The same for a state=bf16 kernel: S0 enters rounded to bf16 and S leaves rounded again, each a
// relative 2^-9 (1.95e-3) of the element at most, so S is within ~3.9e-3 of max |S| and o (the f32 dot
// of the rounded S0's update with qn) within a few 1e-3; 1e-2 leaves a margin without hiding a
// wrong kernel (an unwritten tile keeps S0, off by the decay and the update: far more).
inline constexpr double kBf16Tolerance = 1e-2;
// The Variant of a kernel of the table (kernels.hpp): dense buffers, S restored from S0 by reset().
Variant make_variant(const RecurrenceKernel& kern);
// Registers the op and its variants (every kernel of recurrence_kernels(), in ladder order).
void register_all(Registry& r);
}  // namespace klab::gdn_recurrence
