#pragma once
// q4_gemv/map=packed,...,load=bulk|cp-async: the staged ring (issue 13), written once for the kernel
// (packed.cu, packed_ring_kernel) and its CPU bit-model (packed_model.cpp, model_ring): the work
// each persistent thread block takes, the ring's stages, and where a thread finds its bytes in a
// stage. Arithmetic (the q8-dp4a form) is packed.hpp's, unchanged.
//
// Why (Nsight Compute on grid=groups,xprep=launch,q8-dp4a,rows=8 at 17408x5120, H200, reports/h200):
// DRAM 68.5% of peak, issue 21.5%, long_scoreboard 21.8 cycles per issue: latency-bound. Its
// blocks issue their loads once, wait, compute and exit; between a block's last load and its
// successor's first nothing of that slot is in flight, and the loads sit in registers (64 per
// thread, 41% occupancy). Here the loads go to shared memory, S stages deep per block, and stay
// in flight across groups:
//   - grid: persistent blocks (as many as the SMs hold, at most one per group); block j takes
//     groups j, j + G, j + 2G, ... (G = grid), its n-th group in stage n % S, the (n / S)-th use of
//     that stage (mbarrier parity (n / S) & 1);
//   - a stage holds one whole group: W tiles of 576 R bytes (W = warps = chunks of 32 blocks), the
//     group's contiguous run of the packed layout, copied as it lies: warp w's tile at w 576 R,
//     row r's block of lane l at + 512 r + 16 l, the lane's R scales at + 512 R + 2 R l
//     (packed.hpp's tile, byte for byte);
//   - load=bulk: thread 0 brings a group in with ONE cp.async.bulk (TMA, 1-D) completing on the
//     stage's mbarrier; load=cp-async: every thread copies its own R code blocks and its scales with
//     cp.async (16 bytes; 8 for R = 4's scales) to the same offsets and waits for its own groups
//     (cp.async.wait_group), so it reads only bytes it copied itself;
//   - a stage is refilled (group n + S) only after the block's barrier that follows group n's
//     reads (the barrier the warps' row totals need anyway).
#include <cstdint>

#include "q4_gemv/packed.hpp"

namespace klab::q4_gemv::packed {

enum class Load { ldg, bulk, cp_async };  // ldg: the register loads of packed_kernel / packed_xl_kernel
KLAB_HD constexpr const char* load_name(Load l) { return l == Load::bulk ? "bulk" : l == Load::cp_async ? "cp-async" : "ldg"; }

constexpr int kRingMaxStages = 8;
// Dynamic shared memory a ring block aims at: two blocks per SM (228 KB of shared memory per SM on
// the H200 less 1 KB per block reserved and ~2 KB static each). At k = 5120: R = 8 -> 4 stages
// (92 KB), R = 4 -> 8 stages (92 KB); at k = 6144, R = 8 -> 3 stages (83 KB).
constexpr int kRingBudget = 100 * 1024;
// The most dynamic shared memory a ring block takes: sm_90 lets one block opt into 227 KB in all,
// static included (the ring's: part[2][32][R] floats and 8 mbarriers, 2.1 KB at R = 8).
constexpr int kRingMaxSmem = 220 * 1024;

struct RingPlan {
  int W = 1;       // warps per block = chunks (ceil(nb / 32)); the threads are W * 32
  int R = 8;       // rows per group
  int S = 1;       // stages
  int grid = 1;    // persistent blocks
  int groups = 0;  // ceil(m / R)
  KLAB_HD int tile() const { return R * (kChunk * 16 + kChunk * 2); }
  KLAB_HD int stage_bytes() const { return W * tile(); }
  // Groups block j takes: j, j + grid, ... below groups.
  KLAB_HD int mine(int j) const { return j < groups ? (groups - 1 - j) / grid + 1 : 0; }
  KLAB_HD std::int64_t group_of(int j, int n) const { return std::int64_t(j) + std::int64_t(n) * grid; }
  // Byte offset in the packed tensor of a group's run (= its first tile).
  KLAB_HD std::int64_t group_offset(std::int64_t g) const { return g * stage_bytes(); }
  // Offsets within a stage (= within the group's run).
  KLAB_HD int code_at(int warp, int lane, int r) const { return warp * tile() + r * (kChunk * 16) + lane * 16; }
  KLAB_HD int scales_at(int warp, int lane) const { return warp * tile() + R * (kChunk * 16) + lane * (2 * R); }

  // ---- tail=split (tail_pieces below): the last round's groups cut into q pieces of R / q rows ----
  int q = 1;  // pieces a group of the last round is cut into (1: none, the plan above)
  KLAB_HD int rounds() const { return groups / grid; }  // whole rounds: every block takes that many groups
  // Work items of block j: mine(j), or with q > 1 its rounds() groups and at most one piece.
  KLAB_HD int items(int j) const { return q == 1 ? mine(j) : rounds() + (j < (groups - rounds() * grid) * q ? 1 : 0); }
  KLAB_HD bool is_piece(int n) const { return q > 1 && n == rounds(); }
  // The group of block j's n-th item: group_of, but for a piece: group rounds() grid + j / q.
  KLAB_HD std::int64_t group_at(int j, int n) const { return is_piece(n) ? std::int64_t(rounds()) * grid + j / q : group_of(j, n); }
  // The rows of its group that block j's n-th item computes: [row0, row0 + rows_of): all R, or its piece's.
  KLAB_HD int row0(int j, int n) const { return is_piece(n) ? (j % q) * (R / q) : 0; }
  KLAB_HD int rows_of(int n) const { return is_piece(n) ? R / q : R; }
  // Bytes of a piece in its stage: of each of the W tiles the piece's rows' codes and the tile's scales.
  KLAB_HD int piece_bytes() const { return W * ((R / q) * (kChunk * 16) + R * (kChunk * 2)); }
};

// tail=split: the pieces q each group of the ring's last round is cut into. Why (H200, 2026-12-05): at
// 17408x5120 (rows=8) the ring's 2176 groups over 264 blocks are 8 rounds and 64 groups: 64 blocks take a
// ninth group while 200 take none, and the call ends with the slowest. Cut into q pieces of R / q rows, the
// last round's L groups are L q items on L q <= grid blocks: at 17408x5120 4 pieces of 2 rows (256 blocks
// take 8 groups and a quarter), at 5120x6144 (640 groups) 2 pieces of 4 rows. A piece's stage holds its
// rows' codes and its group's scales (piece_bytes); each row's arithmetic is the ring's, so its bits.
// q: the largest power of two up to R with L q <= grid, where L = groups mod grid (1 when L = 0).
KLAB_HD inline int tail_pieces(int groups, int grid, int R) {
  const int L = groups % grid;
  int q = 1;
  while (L > 0 && 2 * q <= R && 2 * q * L <= grid) q *= 2;
  return q;
}

// Stages for a block of W warps and R rows: as many as kRingBudget holds (1 to 8); 2 where one
// would not pipeline and two fit in kRingMaxSmem. k <= 32768: R = 8 takes 1 stage (up to 144 KB)
// only past k = 24576 (W > 24), R = 4 never fewer than 2.
KLAB_HD inline int ring_stages(int W, int R) {
  const int stage = W * R * (kChunk * 16 + kChunk * 2);
  int s = kRingBudget / stage;
  s = s > kRingMaxStages ? kRingMaxStages : s;
  if (s < 2) s = 2 * stage <= kRingMaxSmem ? 2 : 1;
  return s;
}

// per-sm=N past 2 (packed.cu's shared_ring): the stages of `stage` bytes that let N blocks share an SM's `smem` bytes of
// shared memory, each block also taking `reserved` (the driver's) and `fixed` (its static shared memory) bytes; at most
// `most` (ring_stages'), at least 1. On sm_90 (228 KB an SM, 1 KB reserved a block) at N = 3: k = 5120 3 stages at rows=8,
// 6 at rows=4; k = 6144 2 and 5 (tests/cpu/test_q4_packed.cpp).
KLAB_HD inline int shared_stages(int smem, int per_sm, int reserved, int fixed, int stage, int most) {
  const int s = (smem / per_sm - reserved - fixed) / stage;
  return s < 1 ? 1 : s > most ? most : s;
}

// row-split=split takes split W warps a block (W = chunks of 32 blocks), at most 32 (1024 threads); past that
// the kernels run row-split=1 (the same bits). The split a kernel runs, for its launchers and its models.
KLAB_HD constexpr int split_in_use(int split, int W) { return split * W <= 32 ? split : 1; }

// ---- grid=half: the ring in half an SM, so that the next launch co-resides (packed.cu, packed_ring_kernel) ----
// Why (H200, reports/h200/q4-ring-trial/, stream mode, % of the read ceiling at 17408x5120 /
// 10240x5120 / 6144x5120 / 5120x6144): grid=fill,load=bulk,rows=8 77.2 / 60.1 / 48.7 / 49.8 against
// grid=groups,xprep=launch,rows=8 73.3 / 62.0 / 56.9 / 56.1. grid=fill's two 92 KB blocks fill an
// SM's 228 KB of shared memory, so the next launch's blocks cannot become resident before this
// launch's blocks exit: every launch starts with empty rings and pays the DRAM latency with nothing
// in flight (the PDL trigger at the kernel's start buys nothing), and the xprep hop (main N done ->
// prep N+1 -> main N+1) sits on that critical path. grid=half caps a launch at half an SM's shared
// memory: P persistent blocks per SM (per-sm=P), each a ring of at most kHalfSmBudget / P bytes.
// With PDL the next launch's blocks become resident while this one runs and issue their first S
// groups (the weights do not depend on us) before their griddepcontrol.wait: the ~50 KB per SM
// the latency needs at the launch boundary (~1.5 us x 4.6 TB/s / 132) are already in flight.
// Balance: per-sm=1 takes 132 blocks: ceil(groups / 132) / (groups / 132) = 1.03 / 1.03 / 1.03 /
// 1.03 at the seed shapes (rows=8: 2176, 1280, 768, 640 groups), against grid=fill's 264 blocks
// (1.09 / 1.03 / 1.03 / 1.24).
// xprep=block: each persistent thread prepares its block of x itself (q8_prep, once per launch,
// after griddepcontrol.wait): no prep kernel, no g_xq (so also safe on concurrent streams), the
// same values as xprep_kernel<q8> writes, so the same bits.
// 110 KB of dynamic shared memory per SM per launch (the ring and the warps' row totals, part[2][W][R]
// floats, which grid=half keeps in dynamic shared memory: grid=fill's static part[2][32][R], 2 KB
// per block, would leave four per-sm=2 blocks at k = 6144 256 bytes short of an SM): two launches'
// blocks (+ ~0.1 KB static and 1 KB reserved per block) fit the H200's 228 KB; at k = 5120 rows=8
// per-sm=1 takes 4 stages (90 KB), per-sm=2 2 stages each (2 x 45 KB); at k = 6144 4 stages
// (108 KB) / 2 x 2 (2 x 54 KB).
constexpr int kHalfSmBudget = 110 * 1024;
KLAB_HD inline int half_part_bytes(int W, int R) { return 2 * W * R * 4; }
// Stages of a grid=half block: as many as kHalfSmBudget / P holds, 1 to 8; at least 1 (no overlap
// within the block, still across its SM's blocks and launches): at R = 8 one stage from W = 13
// (per-sm=1) or W = 7 (per-sm=2), and past W = 24 / 12 one stage exceeds the share (the next launch
// then waits, as grid=fill's). A stage never exceeds kRingMaxSmem (W <= 32).
KLAB_HD inline int half_stages(int W, int R, int P) {
  const int stage = W * R * (kChunk * 16 + kChunk * 2);
  int s = (kHalfSmBudget / P - half_part_bytes(W, R)) / stage;
  return s < 1 ? 1 : s > kRingMaxStages ? kRingMaxStages : s;
}
// Dynamic shared memory of a grid=half block: its S stages, then part[2][W][R] (16-byte aligned:
// a stage is a multiple of 16 bytes).
KLAB_HD inline int half_smem(int W, int R, int P) { return half_stages(W, R, P) * W * R * (kChunk * 16 + kChunk * 2) + half_part_bytes(W, R); }

// ---- pace=P: the ring fed by a producer warp (packed.cu, packed_paced_kernel) ----
// What the producer waits for before it requests the block's n-th group into stage n % S (S stages, at most P
// requests in flight): from n = S on, the consumers' release of the stage's previous use (empty[n % S] completing
// its phase n / S - 1: the consumers arrive once per use, after their barrier); and where P < S, the arrival of request
// n - P (full[(n - P) % S] completing its phase (n - P) / S). An mbarrier wait names a phase by its parity, so each
// wait must come while its barrier has completed that phase or the one before it, never two more: the refill of
// request n - P's stage is request n - P + S, issued after this one only where P < S (where P >= S the releases alone
// bound the requests in flight to S <= P). The consumers wait for full[n % S]'s phase n / S. Host and device share
// it; tests/cpu/test_q4_packed.cpp runs the protocol under every interleaving it draws and finds no wait that hangs.
struct PaceWaits {
  bool empty = false;  // wait for empty[empty_stage]'s phase of parity empty_parity
  int empty_stage = 0;
  unsigned empty_parity = 0;
  bool full = false;  // wait for full[full_stage]'s phase of parity full_parity
  int full_stage = 0;
  unsigned full_parity = 0;
};
KLAB_HD inline PaceWaits pace_waits(int n, int S, int P) {
  PaceWaits w;
  if (n >= S) w.empty = true, w.empty_stage = n % S, w.empty_parity = unsigned((n / S - 1) & 1);
  if (P < S && n >= P) w.full = true, w.full_stage = (n - P) % S, w.full_parity = unsigned(((n - P) / S) & 1);
  return w;
}

// ---- grid=own: each consumer warp owns its groups and a stage (packed.cu, packed_own_kernel) ----
// Its warps a block at k: `owners`, or as many whole-group stages as fit kRingMaxSmem beside x's prepared words (48 bytes
// a block of 32), at least 1 (a stage at k = 32768, rows=8, is 147 KB). At k = 5120: rows=8 8 warps (192 KB in all), rows=4
// 16 (192 KB); at k = 6144: 7 and 15.
// A grid=own block's shared memory: x's prepared words first (xe, xo, cd: three uint4 a block of 32, own_x_bytes), then
// its warps' stages.
KLAB_HD inline int own_x_bytes(int nb) { return 3 * nb * 16; }
KLAB_HD inline int own_warps(int k, int R, int owners) {
  const int nb = k / ref::kQ4Block, stage = RingPlan{(nb + kChunk - 1) / kChunk, R}.stage_bytes(), fit = (kRingMaxSmem - own_x_bytes(nb)) / stage;
  const int n = owners < fit ? owners : fit;
  return n < 1 ? 1 : n;
}

// Host: the ring's bit-model. Simulates every block of a grid of `grid` blocks with S stages: the
// stages filled on the kernel's schedule (prologue groups 0..S-1, group n + S after group n's
// barrier; cp-async copies only active threads' pieces, the rest of a stage holds stale bytes),
// each lane reading its words and scales at RingPlan's offsets, the q8-dp4a block values, the
// transposed butterfly lane by lane, the warps summed in order. S = 0: ring_stages(W, R).
// split (row-split, load=bulk): the threads of share h of a lane's block sum rows h R/split .. over the warp by
// their own transposed butterfly (warp_rows_host of R/split rows), as packed_ring_kernel's Split does.
// tail (tail=split, load=bulk): the last round in tail_pieces pieces (RingPlan::items, group_at), a piece's stage
// filled with its rows' codes and its group's scales only, and only its rows stored.
std::vector<float> model_ring(Load load, int R, int grid, int S, const ref::Q4Matrix& w, std::span<const float> x, int split = 1, bool tail = false);
// The transposed butterfly of packed.cu (warp_rows) on the host: v[l][i] lane l's value of row i
// (R rows); returns the rows' warp totals (row r as lane r * 32 / R ends with it).
std::vector<float> warp_rows_host(std::vector<std::vector<float>> v);

// ---- grid=split-k: clusters of C blocks, member c one chunk of k of the cluster's groups (packed.cu, packed_kc_kernel) ----
// C = the chunks of 32 blocks (warps_for(k): 5 at k = 5120, 6 at 6144; at most kKcMaxChunks, a portable cluster). Cluster q
// of Q takes groups q, q + Q, ... (the ring's j, j + grid with j = q): its i-th is the cluster's tile i; member c holds
// tile (group, chunk c), R 576 contiguous bytes of the packed layout (RingPlan's tile), and its `owners` warps take tiles
// i = w, w + owners, ..., each warp a ring of Sw stages of one tile. Tile i's chunk totals are folded by member i % C,
// in its slot i / C of `tot` (slot, chunk, row). A block's dynamic shared memory: x's words of its chunk (3 uint4 a block
// of 32), tot, the warps' stages. held(q) * R is at most kKcMaxRows (past it the launcher runs the paced ring: the same
// bits), so tot's size depends on k and R alone.
constexpr int kKcMaxChunks = 8;
constexpr int kKcMaxWarps = 16;
constexpr int kKcMaxStages = 4;
constexpr int kKcMaxRows = 1024;
struct KcPlan {
  int C = 1;       // cluster members = chunks
  int R = 8;       // rows a group
  int owners = 1;  // warps a block
  int Sw = 1;      // stages a warp
  int Q = 1;       // clusters
  int groups = 0;  // ceil(m / R)
  KLAB_HD int tile() const { return R * (kChunk * 16 + kChunk * 2); }
  KLAB_HD int held(int q) const { return q < groups ? (groups - 1 - q) / Q + 1 : 0; }
  KLAB_HD int slots() const { return (kKcMaxRows / R + C - 1) / C; }  // tot's slots a block
  KLAB_HD int x_bytes() const { return 3 * kChunk * 16; }
  KLAB_HD int tot_bytes() const { return (slots() * C * R * 4 + 127) / 128 * 128; }
  KLAB_HD int stage_at(int warp, int s) const { return x_bytes() + tot_bytes() + (warp * Sw + s) * tile(); }
  KLAB_HD int smem() const { return stage_at(owners, 0); }
};

}  // namespace klab::q4_gemv::packed
