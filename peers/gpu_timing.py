"""Timing with torch on a CUDA device: klab's protocol (harness/src/timing.cu), in Python.

  flush   a READ pass over 2x the L2 (the sum of a 2x-L2 int32 tensor: plain loads, one 8-byte
          result), outside the timed region, before every repetition
  launch  one launch between two CUDA events after the flush
  stream  K launches back to back in ONE CUDA graph (torch.cuda.CUDAGraph), launch i on copy i % N
          of the op's inputs, N = max(2, ceil(3 L2 / problem bytes)) capped at 64, K the smallest
          multiple of N >= 32; time per launch = graph replay time / K
  rounds  warm-up rounds, then reps rounds; each round times every subject once, in order (ABAB...)

One addition klab's C++ harness does not need: before each flush the stream is held by a spin
kernel (torch.cuda._sleep) long enough for the host to enqueue the flush, the events and the op,
so that Python's launch cost (tens of microseconds for a Triton op) is not timed as GPU idle
between the events. This is nvbench's blocking kernel; its length is twice the slowest host
enqueue measured in the warm-up rounds (at least 50 us), and the records say so.
"""
import math
import time

# The stream-mode constants of harness/include/klab/timing.hpp (TimingOptions::min_launches) and
# harness/src/timing.cu (copies_for).
MIN_LAUNCHES = 32
MAX_COPIES = 64


def copies_for(problem_bytes, l2_bytes):
    """Copies of the inputs stream mode rotates over: together >= 3x the L2, at least 2, at most 64."""
    if problem_bytes <= 0:
        raise ValueError("copies_for: a problem of no bytes")
    return int(min(max(math.ceil(3.0 * max(l2_bytes, 1 << 20) / problem_bytes), 2), MAX_COPIES))


def launches_for(copies, min_launches=MIN_LAUNCHES):
    """K: the smallest multiple of `copies` >= min_launches."""
    return copies * ((max(min_launches, 1) + copies - 1) // copies)


class Subject:
    def __init__(self, mode, body, launches=1, copies=1, keep=None):
        self.mode, self.body, self.launches, self.copies = mode, body, launches, copies
        self.keep = keep  # what the graph's launches allocated: alive as long as the graph


class Timer:
    def __init__(self, torch, l2_bytes):
        self.torch = torch
        self.l2_bytes = int(l2_bytes)
        self.stream = torch.cuda.Stream()
        with torch.cuda.stream(self.stream):
            # Written once, synchronously: from then on the flush only reads it.
            self.flush_buf = torch.full((2 * self.l2_bytes // 4,), 0x5A5A5A5A, dtype=torch.int32, device="cuda")
        torch.cuda.synchronize()
        self.cycles_per_ms = self._calibrate_sleep()
        self.block_ms = 1.0

    def _calibrate_sleep(self):
        t = self.torch
        if not hasattr(t.cuda, "_sleep"):
            return None
        with t.cuda.stream(self.stream):
            t.cuda._sleep(1000)
            a, b = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
            a.record()
            t.cuda._sleep(1_000_000)
            b.record()
        b.synchronize()
        ms = a.elapsed_time(b)
        return 1e6 / ms if ms > 0 else None

    def blocking(self):
        if self.cycles_per_ms is None:
            return "none (torch.cuda._sleep is missing): launch-mode times may include host launch cost"
        return (f"torch.cuda._sleep for {self.block_ms * 1e3:.0f} us before each flush, so that the host's launch cost "
                f"stays out of the events (nvbench's blocking kernel)")

    def flush(self):
        self.flush_buf.sum()

    def block(self):
        if self.cycles_per_ms is not None:
            self.torch.cuda._sleep(max(1, int(self.cycles_per_ms * self.block_ms)))

    def launch_subject(self, fn):
        return Subject("launch", fn)

    def stream_subject(self, fns, min_launches=MIN_LAUNCHES):
        """fns[i % N] for i in [0, K) captured into one CUDA graph. Returns (subject, None), or (None,
        why) when the launches cannot be captured."""
        t = self.torch
        n = len(fns)
        k = launches_for(n, min_launches)
        with t.cuda.stream(self.stream):
            for f in fns:  # lazy initialisation (and any autotuning) outside the graph
                f()
        t.cuda.synchronize()
        graph = t.cuda.CUDAGraph()
        keep = [None] * n
        try:
            with t.cuda.graph(graph):
                for i in range(k):
                    keep[i % n] = fns[i % n]()  # each copy's outputs reuse their memory launch after launch
        except Exception as e:  # noqa: BLE001 - any failure to capture is a reason to time launch mode only
            try:
                t.cuda.synchronize()
            except Exception:  # noqa: BLE001
                pass
            return None, f"cannot be captured in a CUDA graph: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        t.cuda.synchronize()
        return Subject("stream", graph.replay, launches=k, copies=n, keep=(graph, keep)), None

    def time_interleaved(self, subjects, reps, warmup, l2_cold=True):
        """Per subject, the time per launch (ms) of each repetition, in order."""
        t = self.torch
        if reps < 1:
            raise ValueError("timing needs at least 1 repetition (--reps)")
        ns = len(subjects)
        ev = [[(t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)) for _ in range(ns)] for _ in range(reps)]
        host_ms = 0.0
        with t.cuda.stream(self.stream):
            for r in range(-warmup, reps):
                for j, s in enumerate(subjects):
                    h0 = time.perf_counter()
                    self.block()
                    if l2_cold:
                        self.flush()
                    if r >= 0:
                        ev[r][j][0].record()
                    s.body()
                    if r >= 0:
                        ev[r][j][1].record()
                    if r < 0:
                        host_ms = max(host_ms, (time.perf_counter() - h0) * 1e3)
                if r == -1:  # after the warm-up: hold the stream for twice the slowest enqueue seen
                    self.block_ms = min(max(2.0 * host_ms, 0.05), 50.0)
                if r >= 0:
                    ev[r][ns - 1][1].synchronize()  # the host never runs more than one round ahead
        t.cuda.synchronize()
        return [[ev[r][j][0].elapsed_time(ev[r][j][1]) / subjects[j].launches for r in range(reps)] for j in range(ns)]
