#pragma once
#include "gdn_recurrence/kernels.hpp"
#include "gdn_recurrence/op.hpp"

namespace klab::gdn_recurrence {
// max_rel every variant must reach against the f64 reference, on o and on S: the f32 GDN tier's
// criterion (experiments/gdn.cpp kTol) and the fla peer's (peers/README.md), so that all are judged
// alike. f32 sums of dk = 128 terms give ~1e-6 (not measured here: the race records each max_rel).
inline constexpr double kTolerance = 1e-4;
// The Variant of a kernel of the table (kernels.hpp): dense buffers, S restored from S0 by reset().
Variant make_variant(const RecurrenceKernel& kern);
// Registers the op and its variants (every kernel of recurrence_kernels(), in ladder order).
void register_all(Registry& r);
}  // namespace klab::gdn_recurrence
