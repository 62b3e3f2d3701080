#pragma once
// hist=ring: the conv history as a ring of ck frames instead of ck-1 frames shifted every token.
//
// Why: prep=conv forms the conv inside the recurrence, where every block of a key head reads its q and k
// history, so no block may shift it in place; the shift went to a later launch (the gated norm's
// HistShift), which costs it 0.7-1.3 us (reports/h200/run-prep-conv) and leaves the gated-norm launch in
// the step. With a ring, a launch reads ck-1 frames and writes the newest into the ck-th, which none of
// its blocks reads: any block may write it at any time, and nothing is moved.
//
// The layout: (ck, conv_dim) f32 frames and one position n in [0, ck) per layer and slot (with a ticket
// beside it, RecurrenceArgs::hist_ring). Logical frame j (j < ck-1, 0 the oldest: the (ck-1, conv_dim)
// form every readback, load_state and guard uses) is physical frame (n + j) mod ck; the launch of a
// token reads those, writes xc into frame (n + ck - 1) mod ck, and the last block to take its ticket
// moves n to (n + 1) mod ck. n = 0 is the shifted form itself (frames 0 .. ck-2, oldest first; frame
// ck-1 unused), so a zeroed state, a loaded state and the kernels that shift agree at n = 0.
// tests/cpu/test_gdn_recurrence.cpp holds these three against the shift over many tokens.
#include <cuda_runtime.h>

namespace klab::gdn_recurrence {

// Physical frame of logical frame j (0 the oldest) at position n.
__host__ __device__ constexpr int ring_frame(int n, int j, int ck) { return n + j < ck ? n + j : n + j - ck; }
// The frame a launch at position n writes its xc into: the one it does not read.
__host__ __device__ constexpr int ring_write_frame(int n, int ck) { return ring_frame(n, ck - 1, ck); }
// The position after a launch at n.
__host__ __device__ constexpr int ring_next(int n, int ck) { return n + 1 < ck ? n + 1 : 0; }

}  // namespace klab::gdn_recurrence
