#!/usr/bin/env python3
"""Tests of scripts/readme_results.py (unittest, no pytest): its blocks from a small report built here
(a FIXTURE GPU, not a measurement), the marker handling, --check, and that the committed READMEs
match the report their markers name.

Every expected cell is worked out by hand from the fixture values (the arithmetic is in the
comments), never read from the script. Samples are constant where a speed-up is checked, so the
bootstrap interval of the time ratio is the ratio itself and can be written down.

    /usr/bin/python3 tests/scripts/test_readme_results.py      (ctest: the "scripts-readme" test)
"""
import json
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SCRIPT = ROOT / "scripts" / "readme_results.py"
BLOCK_NAMES = ("header", "f32", "seed-ladder", "q4-vs-peers", "q4-to-ceiling", "profile", "gdn-correctness",
               "gdn-timing", "error-budget", "not-held", "gdn-recurrence")

ENV = {
    "device": {"name": "FIXTURE GPU (test data)", "sm_count": 10, "l2_bytes": 4 * 2**20,
               "driver_version": 12040, "runtime_version": 12080},
    "ceiling": {"read_gbps": 1000.0, "copy_gbps": 800.0, "bytes": 2**30, "mode": "launch and stream", "flush": "read",
                "modes": {"launch": {"read_gbps": 900.0}, "stream": {"read_gbps": 1000.0}},
                "empty_kernel_us": {"launch": 2.5, "stream": 0.5}},
    "git_commit": "abcdef0123456789", "git_dirty": False, "date": "2026-01-01T00:00:00Z",
    "options": {"reps": 5, "warmup": 1, "flush": "read", "modes": ["launch", "stream"], "headline": "stream", "l2_cold": True},
}
# A report from before the timing modes: no modes, no headline, no per-mode ceiling.
OLD_ENV = {"device": {"name": "FIXTURE GPU (test data)", "sm_count": 10, "l2_bytes": 4 * 2**20},
           "ceiling": {"read_gbps": 1000.0}, "git_commit": "0123456789abcdef", "git_dirty": True,
           "date": "2025-01-01T00:00:00Z", "options": {"reps": 5, "l2_cold": True}}

SEED_SHAPE = "17408x5120"
Q4_BYTES = 50225152.0  # 17408 x 5120 weights x (0.5 code + 2/32 scale) bytes = 0.5625 x 89128960


def tmg(ms, mode, n=5):
    """A timing of n identical repetitions of ms in one mode."""
    t = {"median_ms": ms, "min_ms": ms, "max_ms": ms, "samples_ms": [ms] * n, "mode": mode, "flush": "read"}
    if mode == "stream":
        t.update(launches=16, copies=2)
    return t


def meas(experiment, variant, stream, launch=None, shape=SEED_SHAPE, dist="uniform", env=ENV, **fields):
    """A measurement as the harness with timing modes writes it: the stream timing at the top level,
    both modes under "modes" (fields given as launch_X go to the launch mode only)."""
    m, k = (int(x) for x in shape.split("x"))
    launch_fields = {k_[7:]: v for k_, v in fields.items() if k_.startswith("launch_")}
    top = {k_: v for k_, v in fields.items() if not k_.startswith("launch_")}
    r = {"kind": "measurement", "experiment": experiment, "variant": variant, "op": variant.split("/")[0],
         "shape": shape, "m": m, "k": k, "dist": dist, "env": env, "verified": True, "peer": False,
         "timing": tmg(stream, "stream")}
    r.update(top)
    r["modes"] = {"stream": {"timing": r["timing"], **{f: r[f] for f in ("gbps", "pct_ceiling", "pct_attainable") if f in r}}}
    if launch is not None:
        r["modes"]["launch"] = {"timing": tmg(launch, "launch"), **launch_fields}
    return r


def old_meas(experiment, variant, ms, **fields):
    """A measurement from before the timing modes (timed in launch mode, saying nothing of it)."""
    r = {"kind": "measurement", "experiment": experiment, "variant": variant, "op": variant.split("/")[0],
         "shape": SEED_SHAPE, "dist": "uniform", "env": OLD_ENV, "verified": True,
         "timing": {"median_ms": ms, "min_ms": ms, "max_ms": ms, "samples_ms": [ms] * 5}}
    r.update(fields)
    return r


def claim(experiment, index, state, text, evidence):
    return {"kind": "claim", "experiment": experiment, "index": index, "state": state, "text": text, "evidence": evidence, "env": ENV}


F32_A, F32_OURS, F32_PEER = "f32_gemv/impl=warp-row,unroll=1", "f32_gemv/impl=warp-row,unroll=4", "f32_gemv/impl=cublas-sgemv"
Q4_ORIG = "q4_gemv/scale=lane0-shfl,chains=1,f16=soft,rows=1"
Q4_A = "q4_gemv/scale=per-lane,chains=4,f16=soft,rows=1"
Q4_B = "q4_gemv/scale=per-lane,chains=4,f16=hard,rows=1"
BF16, F32P, INT4 = "q4_gemv/impl=cublas-bf16-gemmex", "q4_gemv/impl=cublas-sgemv-f32", "q4_gemv/impl=torch-int4"
LONG_EVIDENCE = " ".join(f"shape{i}: 0.0{i} ms;" for i in range(40))  # 40 x ~15 chars: ~560 characters


def full_report():
    recs = [
        # f32: A 0.12 ms; ours 0.08 ms (launch 0.09); the peer 0.10 ms (launch 0.12).
        meas("f32-gemv-vs-cublas", F32_A, 0.12, 0.13, a=F32_A, gbps=600.0, pct_ceiling=60.0, pct_attainable=63.0,
             accuracy={"max_rel": 2e-7}, tolerance=1e-5),
        meas("f32-gemv-vs-cublas", F32_OURS, 0.08, 0.09, a=F32_A, gbps=900.0, pct_ceiling=90.0, pct_attainable=95.0,
             accuracy={"max_rel": 3e-7}, tolerance=1e-5,
             vs_a={"ratio": 0.6667, "ci95_lo": 0.66, "ci95_hi": 0.67, "speedup": 1.5, "verdict": "faster"}),
        meas("f32-gemv-vs-cublas", F32_PEER, 0.10, 0.12, a=F32_A, peer=True, gbps=720.0, pct_ceiling=72.0, pct_attainable=76.0,
             accuracy={"max_rel": 1e-7}, tolerance=1e-5),
        # seed ladder: original 0.2, A 0.2, B 0.1 ms; a bf16 peer 0.05 ms.
        meas("seed-ladder", Q4_ORIG, 0.2, a=Q4_ORIG, bytes=Q4_BYTES, gbps=251.0, gmacs=446.0, pct_ceiling=25.1,
             axes={"scale": "lane0-shfl", "chains": "1", "f16": "soft", "rows": "1"}),
        meas("seed-ladder", Q4_A, 0.2, a=Q4_ORIG, bytes=Q4_BYTES, gbps=251.0, gmacs=446.0, pct_ceiling=25.1, bits_vs_prev=7,
             axes={"scale": "per-lane", "chains": "4", "f16": "soft", "rows": "1"}),
        meas("seed-ladder", Q4_B, 0.1, a=Q4_ORIG, bytes=Q4_BYTES, gbps=502.0, gmacs=891.0, pct_ceiling=50.2, bits_vs_prev=0,
             axes={"scale": "per-lane", "chains": "4", "f16": "hard", "rows": "1"}),
        meas("seed-ladder", BF16, 0.05, a=Q4_ORIG, peer=True, bytes=Q4_BYTES, gbps=1004.0, gmacs=1783.0, pct_ceiling=100.4,
             bits_vs_a=17408, axes={"impl": "cublas-bf16-gemmex"}),
        # q4-vs-peers: B 0.01 ms is fastest but is not "ours"; ours 0.03 and 0.02 ms; peers 0.04, 0.08, 0.05 ms.
        meas("q4-vs-peers", Q4_B, 0.01, 0.011, bytes=Q4_BYTES),
        meas("q4-vs-peers", "q4_gemv/map=block-per-lane,rows=4", 0.03, 0.031, bytes=Q4_BYTES),
        meas("q4-vs-peers", "q4_gemv/map=block-per-thread,rows=8", 0.02, 0.025, bytes=Q4_BYTES, gbps=2511.0,
             pct_ceiling=50.0, pct_attainable=55.0),
        meas("q4-vs-peers", BF16, 0.04, 0.05, peer=True, bytes=Q4_BYTES),
        meas("q4-vs-peers", F32P, 0.08, 0.09, peer=True, bytes=Q4_BYTES),
        meas("q4-vs-peers", INT4, 0.05, 0.06, peer=True, bytes=Q4_BYTES),
        # GDN timing: f32 0.15 / 0.17 ms, q4 0.075 / 0.09 ms per layer and token.
        *[{"kind": "gdn_timing", "experiment": "gdn-q4-layer", "tier": tier, "mode": mode, "layers": 1, "tokens": 16,
           "ms_per_layer_token": {"median": ms, "min": ms, "max": ms}, "samples_ms": [ms] * 5, "bytes_per_step": b,
           "gbps": g, "pct_ceiling": p, "pct_attainable": a, "env": ENV,
           "timing": {"median_ms": ms * 16, "min_ms": ms * 16, "max_ms": ms * 16, "mode": "launch", "flush": "read", "reps": 5}}
          for tier, mode, ms, b, g, p, a in (
              ("f32", "device-resident", 0.15, 470041472.0, 3134.0, 71.2, 80.0),
              ("f32", "host-facing", 0.17, 470041472.0, 2765.0, 63.7, 70.0),
              ("q4", "device-resident", 0.075, 73548672.0, 981.0, 23.4, 30.0),
              ("q4", "host-facing", 0.09, 73548672.0, 817.0, 19.2, 25.0))],
        # Error budget: two shapes, weights error flat, activation error heavy-tailed.
        *[{"kind": "error_budget", "experiment": "error-budget", "shape": shape, "dist": dist, "what": f"seeded W {proj}: {what}",
           "rms_rel": rms, "max_rel": rms * 2, "env": ENV}
          for shape, proj, what, dist, rms in (
              ("100x64", "p", "q4 vs f32 weights", "uniform", 0.1), ("100x64", "p", "q4 vs f32 weights", "student-t", 0.1),
              ("100x64", "p", "q4 vs f32 weights", "outlier", 0.1),
              ("100x64", "p", "q8_0 vs f32 activations", "uniform", 0.004), ("100x64", "p", "q8_0 vs f32 activations", "student-t", 0.008),
              ("100x64", "p", "q8_0 vs f32 activations", "outlier", 0.012),
              ("64x100", "o", "q4 vs f32 weights", "uniform", 0.1), ("64x100", "o", "q4 vs f32 weights", "student-t", 0.11),
              ("64x100", "o", "q8_0 vs f32 activations", "uniform", 0.004), ("64x100", "o", "q8_0 vs f32 activations", "student-t", 0.01))],
        claim("f32-gemv-vs-cublas", 0, "held", "ours is faster than cuBLAS", "x1.25"),
        claim("q4-vs-peers", 0, "not_held", "the fastest reaches 70% of the ceiling", LONG_EVIDENCE),
        claim("gdn-f32-oracle", 0, "held", "the output is within 1e-4 of the fixtures", "worst max_rel 1e-06"),
        claim("gdn-q4-per-op", 0, "not_evaluated", "errors are not amplified", "no CUDA device"),
        claim("error-budget", 0, "not_held", "heavy-tailed inputs give 2x", "x1.00 (rms_rel; the seed: uniform 0.00326, real activations 0.0453)"),
    ]
    # gdn-recurrence at batch 1 (an op without a shape: params): ours 0.004 and 0.005 ms, fla 0.006 ms.
    for variant, ms, peer in (("gdn_recurrence/impl=seed", 0.005, False), ("gdn_recurrence/impl=fused,cols=16", 0.004, False),
                              ("gdn_recurrence/impl=fla-fused-recurrent", 0.006, True)):
        r = meas("gdn-recurrence", variant, ms, gbps=1500.0, pct_ceiling=30.0, pct_attainable=40.0, peer=peer)
        for f in ("m", "k"):
            del r[f]
        r["shape"] = r["problem"] = "batch=1,dk=128,dv=128,nk=16,nv=48"
        r["params"] = {"batch": 1, "dk": 128, "dv": 128, "nk": 16, "nv": 48}
        recs.append(r)
    return recs


def write_report(d, records, summary=True):
    d = Path(d)
    d.mkdir(parents=True, exist_ok=True)
    (d / "report.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    if summary:
        (d / "summary.md").write_text("# fixture summary\n")
    return d


def run(*args):
    p = subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def markers(names):
    return "".join(f"<!-- klab:results {n} begin -->\n<!-- klab:results {n} end -->\n\n" for n in names)


def table_rows(text):
    """Each Markdown table row as a list of cells (header and separator rows included)."""
    return [[c.strip() for c in line.strip().strip("|").split(" | ")] for line in text.splitlines() if line.startswith("|")]


def row(text, first):
    return next(r for r in table_rows(text) if r[0] == first)


class Blocks(unittest.TestCase):
    """Every block from the full fixture report; the README-like file lies in doc/, the report in rep/."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        t = Path(cls.tmp.name)
        cls.rep = write_report(t / "rep", full_report())
        cls.doc = t / "doc" / "README.md"
        cls.doc.parent.mkdir()
        cls.doc.write_text(markers(BLOCK_NAMES))
        rc, out, err = run(cls.rep, "--files", cls.doc)
        assert rc == 0, err
        text = cls.doc.read_text()
        cls.b = {n: re.search(rf"<!-- klab:results {n} begin[^\n]*\n(.*?)<!-- klab:results {n} end -->", text, re.S).group(1)
                 for n in BLOCK_NAMES}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_header(self):
        h = self.b["header"]
        # 12040 = 12 x 1000 + 4 x 10: CUDA 12.4; 12080: 12.8. 4 x 2^20 bytes of L2 = 4 MiB.
        self.assertIn("FIXTURE GPU (test data) (10 SMs, 4 MiB L2), driver 12.4, runtime 12.8", h)
        self.assertIn("commit `abcdef0`", h)
        self.assertIn("2026-01-01T00:00:00Z; 5 repetitions per timing after 1 warm-up", h)
        self.assertIn("over 1 GiB: **1000 GB/s** (per timing mode: launch 900 GB/s, stream 1000 GB/s)", h)
        self.assertIn("an empty kernel takes 2.5 us (launch), 0.5 us (stream)", h)
        # Every stream timing of the fixture: 16 launches per graph over 2 copies.
        self.assertIn("**stream** (the headline): a CUDA graph of K back-to-back launches over rotating input copies "
                      "(K = 16 launches over 2 copies)", h)
        self.assertIn("**launch**: CUDA events around one launch", h)
        # 5 claims: held (f32, gdn-f32-oracle) 2, not held (q4-vs-peers, error-budget) 2, not evaluated 1.
        self.assertIn("Claims: 2 held, 2 not held, 1 not evaluated (of 5, over 5 experiments)", h)
        self.assertIn("](../rep/) ([summary.md](../rep/summary.md) holds every table and claim)", h)  # links relative to the file

    def test_f32(self):
        r = row(self.b["f32"], SEED_SHAPE)
        # shape | ours ms, GB/s, %ceil, %att | peer ms, GB/s, %ceil, %att | ours vs peer | unroll=4 vs 1 | launch
        self.assertEqual(r[1:9], ["0.08", "900", "90.0", "95.0", "0.1", "720", "72.0", "76.0"])
        # stream: 0.10 / 0.08 = 1.25; time ratio 0.08 / 0.10 = 0.800 (constant samples: no spread) < 0.99;
        # the speed-up's interval 1/0.800..1/0.800 = x1.250..x1.250.
        self.assertEqual(r[9], "x1.25, faster (speed-up 95% CI x1.250..x1.250)")
        # The record's own vs_a: speed-up 1.5 over A, time ratio interval 0.66..0.67: the speed-up's
        # 1/0.67 = 1.4925..1/0.66 = 1.5152 -> x1.493..x1.515 (never 0.660..0.670 beside x1.50).
        self.assertEqual(r[10], "x1.50, faster (speed-up 95% CI x1.493..x1.515)")
        # launch: 0.12 / 0.09 = 1.333; time ratio 0.09 / 0.12 = 0.750, 1/0.750 = 1.333.
        self.assertEqual(r[11], "0.09, 0.12, x1.33, faster (speed-up 95% CI x1.333..x1.333)")
        # worst of 2e-7, 3e-7, 1e-7: ours' 3e-7; 3 of 3 verified.
        self.assertIn("3 of 3 measurements verified against the f64 reference; worst max_rel 3.00e-07 (impl=warp-row,unroll=4, "
                      "17408x5120; tolerance 1e-05)", self.b["f32"])

    def test_seed_ladder(self):
        b = self.b["seed-ladder"]
        # rung | variant | what changed | ms | GMAC/s | GB/s | % ceiling | % attainable | vs previous | vs original | bits
        r0, ra, rb = row(b, "original"), row(b, "A"), row(b, "B")
        self.assertEqual(r0[3:7], ["0.2", "446", "251", "25.1"])
        self.assertEqual(ra[2], "scale=per-lane, chains=4")  # the axes that differ from the original, in A's order
        # A: 0.2 / 0.2 = 1.00, time ratio 1.000 (speed-up 1/1.000): inside 1 -/+ 1%: same. 7 of m = 17408 elements changed.
        self.assertEqual(ra[-3:], ["x1.00, same (speed-up 95% CI x1.000..x1.000)", "x1.00", "7 of 17408 elements"])
        # B: 0.2 / 0.1 = 2.00 over A and over the original (time ratio 0.500, 1/0.500 = 2.000); bits_vs_prev 0.
        self.assertEqual(rb[2], "f16=hard")
        self.assertEqual(rb[-3:], ["x2.00, faster (speed-up 95% CI x2.000..x2.000)", "x2.00", "none (bitwise equal)"])
        peer = row(b, "peer")
        # The peer: 0.2 / 0.05 = x4.00 over the original; its rates marked as counting the q4 bytes.
        self.assertEqual(peer[1], "impl=cublas-bf16-gemmex")
        self.assertEqual(peer[5:7], ["1004*", "100.4*"])
        self.assertEqual(peer[-2], "x4.00")
        # bf16 W: 2 x 17408 x 5120 = 178257920 bytes / 50225152 = 3.549 -> x3.55; f32: 7.098 -> x7.10.
        self.assertIn("(50.2 MB)", b)
        self.assertIn("a bf16 copy of W alone is x3.55 those bytes, an f32 copy x7.10", b)

    def test_q4_vs_peers(self):
        b = self.b["q4-vs-peers"]
        head = table_rows(b)[0]
        self.assertEqual(head[:7], ["shape", "best of ours", "ms", "GB/s", "% ceiling", "% attainable", "seed's B ms"])
        # Every peer gets a column, in file order.
        self.assertEqual(head[7:10], ["impl=cublas-bf16-gemmex ms", "impl=cublas-sgemv-f32 ms", "impl=torch-int4 ms"])
        r = row(b, SEED_SHAPE)
        # B (0.01 ms) is fastest but excluded: best of ours = block-per-thread,rows=8 at 0.02 ms.
        self.assertEqual(r[1:10], ["map=block-per-thread,rows=8", "0.02", "2511", "50.0", "55.0", "0.01", "0.04", "0.08", "0.05"])
        # best peer bf16 0.04: 0.04 / 0.02 = x2.00, time ratio 0.500, speed-up interval 1/0.500 = x2.000.
        self.assertEqual(r[10], "x2.00, faster (speed-up 95% CI x2.000..x2.000) over impl=cublas-bf16-gemmex")
        # vs B: 0.01 / 0.02 = x0.50, time ratio 2.000 > 1.01: slower; speed-up interval 1/2.000 = x0.500.
        self.assertEqual(r[11], "x0.50, slower (speed-up 95% CI x0.500..x0.500)")
        # launch: ours 0.025, best launch peer bf16 0.05: x2.00.
        self.assertEqual(r[12], "0.025, x2.00, faster (speed-up 95% CI x2.000..x2.000)")
        # 50225152 bytes = 50.2 MB; 0.02 ms = 20.0 us.
        self.assertIn("Across these shapes: ours vs best peer x2.00; % of ceiling 50.0; the problems move 50.2 MB in 20.0 us.", b)

    def test_gdn_recurrence(self):
        b = self.b["gdn-recurrence"]
        self.assertEqual(table_rows(b)[0][-2:], ["impl=fla-fused-recurrent us", "ours vs best peer"])
        r = row(b, "1")
        # The faster of ours (0.004 ms = 4.00 us) against fla's 6.00 us: 0.006 / 0.004 = x1.50, time ratio
        # 0.667 < 0.99: faster; the speed-up interval 1/0.667 = x1.500.
        self.assertEqual(r[1:4], ["impl=fused,cols=16", "4.00", "1500"])
        self.assertEqual(r[6], "6.00")
        self.assertEqual(r[7], "x1.50, faster (speed-up 95% CI x1.500..x1.500)")

    def test_missing_experiment_says_so(self):
        self.assertEqual(self.b["q4-to-ceiling"].strip(), "No `q4-to-ceiling` measurements in this report.")
        self.assertIn("No Nsight Compute reading in this report", self.b["profile"])

    def test_gdn_timing(self):
        b = self.b["gdn-timing"]
        # tier | mode | ms (min..max) | bytes per step | GB/s | % ceiling | % attainable
        self.assertEqual(row(b, "f32")[1:7], ["device-resident", "0.15 (0.15..0.15)", "470.0 MB", "3134", "71.2", "80.0"])
        q4 = [r for r in table_rows(b) if r[0] == "q4"]
        self.assertEqual(q4[1][1:7], ["host-facing", "0.09 (0.09..0.09)", "73.5 MB", "817", "19.2", "25.0"])
        # round trip: f32 0.17 - 0.15 = 0.02; q4 0.09 - 0.075 = 0.015.
        self.assertIn("f32 0.02 ms, q4 0.015 ms", b)
        # q4 vs f32 device-resident: 0.15 / 0.075 = x2.00; time ratio 0.500, speed-up interval x2.000..x2.000.
        self.assertIn("q4 tier vs f32 tier, device-resident: x2.00, faster (speed-up 95% CI x2.000..x2.000)", b)
        self.assertIn("each repetition steps 16 tokens through 1 layer from a zero state", b)
        self.assertIn("only token 0 follows a flush", b)
        self.assertIn("(4 MiB)", b)

    def test_gdn_correctness(self):
        b = self.b["gdn-correctness"]
        self.assertEqual(row(b, "gdn-f32-oracle")[1:], ["the output is within 1e-4 of the fixtures", "**held**", "worst max_rel 1e-06"])
        self.assertEqual(row(b, "gdn-q4-per-op")[2], "not evaluated")
        self.assertIn("Not in this report: gdn-reset-replay, gdn-cross-layer, gdn-roundtrip, gdn-drift.", b)

    def test_error_budget(self):
        b = self.b["error-budget"]
        # weights | compared | inputs | shapes | rms_rel | x uniform
        r = next(x for x in table_rows(b) if x[1] == "q4 vs f32 weights" and x[2] == "student-t")
        # 100x64: 0.1 / 0.1 = 1.00; 64x100: 0.11 / 0.1 = 1.10.
        self.assertEqual(r, ["seeded W", "q4 vs f32 weights", "student-t", "2", "1.00e-01..1.10e-01", "x1.00..x1.10"])
        r = next(x for x in table_rows(b) if x[1] == "q8_0 vs f32 activations" and x[2] == "outlier")
        # one shape: 0.012 / 0.004 = 3.00.
        self.assertEqual(r, ["seeded W", "q8_0 vs f32 activations", "outlier", "1", "1.20e-02", "x3.00"])
        # heavy-tailed over uniform: weights 1.0, 1.0, 1.1; activations 2.0, 3.0, 0.01 / 0.004 = 2.5.
        self.assertIn("q4 vs f32 weights x1.00..x1.10; q8_0 vs f32 activations x2.00..x3.00", b)
        # the seed: 0.0453 / 0.00326 = 13.896 -> x13.9.
        self.assertIn("are x13.9 apart", b)

    def test_not_held(self):
        b = self.b["not-held"]
        self.assertIn("Not held (2 of 5 claims):", b)
        self.assertIn("Not evaluated (1 of 5 claims):", b)
        r = row(b, "q4-vs-peers")
        self.assertEqual(r[1], "the fastest reaches 70% of the ceiling")
        # the ~560-character evidence is cut to at most 200 characters, an ellipsis and a link to the summary
        ev, link = r[2].split("… ", 1)
        self.assertLessEqual(len(ev), 200)
        self.assertTrue(LONG_EVIDENCE.startswith(ev))
        self.assertEqual(link, "([more](../rep/summary.md#q4-vs-peers))")
        self.assertEqual(row(b, "gdn-q4-per-op")[1:], ["errors are not amplified", "no CUDA device"])


    def test_ratios_in_one_direction(self):
        """No block puts a time ratio's interval (0.500..0.500) beside a speed-up: every interval is
        spelled as a speed-up's ("speed-up 95% CI x..x"), and the notes say so."""
        for name, text in self.b.items():
            # A verdict's bracket holds the speed-up's interval, nothing else.
            self.assertIsNone(re.search(r"\b(faster|slower|same) \((?!speed-up 95% CI x)", text), name)
            self.assertNotIn("interval of the time ratio", text, name)
            self.assertNotIn("interval is of the time ratio", text, name)
        self.assertIn("x = speed-up, the ratio of median times", self.b["f32"])
        self.assertIn("(speed-up 95% CI)", self.b["seed-ladder"])


class Evidence(unittest.TestCase):
    def test_quoted_evidence_gets_the_speedup_interval(self):
        # The harness words evidence "x0.983 (95% CI of time ratio 1.017..1.018, slower)": the
        # speed-up's interval is 1/1.018 = 0.98232 .. 1/1.017 = 0.98328 -> x0.982..x0.983. A time
        # ratio beside its own interval ("time ratio run/step 0.897 (95% CI 0.895..0.899)") is one
        # direction already and stays.
        ev = "17408x5120: B x0.983 (95% CI of time ratio 1.017..1.018, slower); time ratio run/step 0.897 (95% CI 0.895..0.899)"
        with tempfile.TemporaryDirectory() as t:
            rep = write_report(Path(t) / "rep", [claim("accum-chains", 0, "not_held", "B is faster", ev)])
            doc = Path(t) / "R.md"
            doc.write_text(markers(("not-held",)))
            rc, out, err = run(rep, "--files", doc)
            self.assertEqual(rc, 0, err)
            r = row(doc.read_text(), "accum-chains")
            self.assertEqual(r[2], "17408x5120: B x0.983 (speed-up 95% CI x0.982..x0.983, slower); "
                                   "time ratio run/step 0.897 (95% CI 0.895..0.899)")


class Missing(unittest.TestCase):
    def test_blocks_without_their_records_say_so(self):
        with tempfile.TemporaryDirectory() as t:
            rep = write_report(Path(t) / "rep", [full_report()[0]], summary=False)
            doc = Path(t) / "R.md"
            doc.write_text(markers(BLOCK_NAMES))
            rc, out, err = run(rep, "--files", doc)
            self.assertEqual(rc, 0, err)
            text = doc.read_text()
            for line in ("No `seed-ladder` measurements in this report.", "No `q4-vs-peers` measurements in this report.",
                         "No timed `gdn_step` measurement (or schema-1 `gdn_timing` record) of `gdn-q4-layer` in this report.",
                         "No `error_budget` records in this report.",
                         "No claims in this report.", "- Claims: none in this report."):
                self.assertIn(line, text)
            self.assertIn("No claims of the GDN correctness experiments", text)
            # f32 has A only: no ours and no peer to compare.
            self.assertIn("has no timed `f32_gemv/impl=warp-row,unroll=4` and peer on a seed shape", text)

    def test_report_before_the_timing_modes(self):
        recs = [old_meas("f32-gemv-vs-cublas", F32_A, 0.12, a=F32_A),
                old_meas("f32-gemv-vs-cublas", F32_OURS, 0.08, a=F32_A, gbps=900.0, pct_ceiling=90.0),
                old_meas("f32-gemv-vs-cublas", F32_PEER, 0.1, a=F32_A, peer=True, gbps=720.0, pct_ceiling=72.0)]
        with tempfile.TemporaryDirectory() as t:
            rep = write_report(Path(t) / "rep", recs)
            doc = Path(t) / "R.md"
            doc.write_text(markers(("header", "f32")))
            rc, out, err = run(rep, "--files", doc)
            self.assertEqual(rc, 0, err)
            text = doc.read_text()
            self.assertIn("Timing: launch mode only (this run predates the stream mode)", text)
            self.assertIn("commit `0123456` (dirty: uncommitted changes)", text)
            self.assertIn("**1000 GB/s** (launch mode)", text)
            # No % attainable and no launch column: the headline is launch.
            # 0.1 / 0.08 = x1.25; time ratio 0.800, speed-up interval 1/0.800 = x1.250.
            self.assertEqual(row(text, SEED_SHAPE)[1:], ["0.08", "900", "90.0", "0.1", "720", "72.0",
                                                         "x1.25, faster (speed-up 95% CI x1.250..x1.250)", "n/a"])
            self.assertIn("(No % attainable: this report predates the size-matched read.)", text)

    def test_profile_records(self):
        prof = {"kind": "profile", "experiment": "q4-vs-peers", "variant": Q4_B, "shape": SEED_SHAPE, "dist": "uniform",
                "dram_pct": 91.5, "occupancy_pct": 62.5, "registers": 40.0, "issue_pct": 55.0,
                "top_stalls": [["long_scoreboard", 4.5], ["lg_throttle", 2.0]], "sass_thread_inst_per_mac": 2.0, "env": ENV}
        with tempfile.TemporaryDirectory() as t:
            rep = write_report(Path(t) / "rep", [full_report()[0], prof])
            doc = Path(t) / "R.md"
            doc.write_text(markers(("profile",)))
            rc, out, err = run(rep, "--files", doc)
            self.assertEqual(rc, 0, err)
            self.assertEqual(row(doc.read_text(), Q4_B)[1:],
                             [SEED_SHAPE, "91.5", "62.5", "40", "55.0", "long_scoreboard 4.5, lg_throttle 2.0", "2.00"])


class Markers(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.rep = write_report(Path(self.tmp.name) / "rep", full_report())
        self.doc = Path(self.tmp.name) / "README.md"

    def tearDown(self):
        self.tmp.cleanup()

    def test_text_outside_the_markers_is_untouched(self):
        head = "# Title\n\nprose with | pipes and <!-- another comment -->\n\n"
        tail = "\n\nclosing prose\nno newline at the end"
        self.doc.write_text(head + "<!-- klab:results f32 begin -->\nstale table\n<!-- klab:results f32 end -->" + tail)
        rc, _, err = run(self.rep, "--files", self.doc)
        self.assertEqual(rc, 0, err)
        text = self.doc.read_text()
        self.assertTrue(text.startswith(head + "<!-- klab:results f32 begin (generated by scripts/readme_results.py from "))
        self.assertTrue(text.endswith("<!-- klab:results f32 end -->" + tail))
        self.assertNotIn("stale table", text)
        # A second run changes nothing.
        rc, out, _ = run(self.rep, "--files", self.doc)
        self.assertEqual((rc, self.doc.read_text()), (0, text))
        self.assertIn("1 block(s), 0 rewritten", out)

    def assert_refused(self, text, where, words):
        self.doc.write_text(text)
        rc, out, err = run(self.rep, "--files", self.doc)
        self.assertEqual(rc, 2, out + err)
        self.assertIn(f"{self.doc}:{where}:", err)
        self.assertIn(words, err)
        self.assertEqual(self.doc.read_text(), text)  # nothing written

    def test_begin_without_end(self):
        self.assert_refused("a\nb\n<!-- klab:results f32 begin -->\nc\n", 3, "has no end")

    def test_end_without_begin(self):
        self.assert_refused("a\n<!-- klab:results f32 end -->\n", 2, "without its begin")

    def test_begin_inside_a_block(self):
        self.assert_refused("<!-- klab:results f32 begin -->\n<!-- klab:results header begin -->\n<!-- klab:results header end -->\n",
                            2, "inside block 'f32'")

    def test_unknown_block(self):
        self.assert_refused("x\n\n<!-- klab:results nonsense begin -->\n<!-- klab:results nonsense end -->\n", 3, "unknown block 'nonsense'")

    def test_malformed_marker(self):
        self.assert_refused("<!-- klab:results f32 -->\n", 1, "malformed")

    def test_check(self):
        self.doc.write_text("intro\n\n" + markers(("header", "f32")))
        fresh = self.doc.read_text()
        # Never generated: both blocks differ; --check writes nothing.
        rc, out, _ = run(self.rep, "--check", "--files", self.doc)
        self.assertEqual(rc, 1)
        self.assertIn(f"{self.doc.name}:3: block 'header' differs", out)
        self.assertEqual(self.doc.read_text(), fresh)
        # Generated: passes.
        self.assertEqual(run(self.rep, "--files", self.doc)[0], 0)
        rc, out, _ = run(self.rep, "--check", "--files", self.doc)
        self.assertEqual(rc, 0, out)
        # A hand edit inside the f32 block is caught and named; the header block is not.
        text = self.doc.read_text()
        self.doc.write_text(text.replace("| 0.08 |", "| 0.07 |", 1))
        rc, out, _ = run(self.rep, "--check", "--files", self.doc)
        self.assertEqual(rc, 1)
        self.assertIn("block 'f32' differs", out)
        self.assertNotIn("block 'header'", out)
        # An edit outside any block is not the check's business.
        self.doc.write_text(text.replace("intro", "introduction"))
        self.assertEqual(run(self.rep, "--check", "--files", self.doc)[0], 0)

    def test_bad_report_and_missing_file(self):
        rc, _, err = run(Path(self.tmp.name) / "nowhere", "--files", self.doc)
        self.assertEqual(rc, 2)
        self.assertIn("nowhere", err)
        rc, _, err = run(self.rep, "--files", Path(self.tmp.name) / "absent.md")
        self.assertEqual(rc, 2)
        self.assertIn("absent.md", err)


class MergedHeader(unittest.TestCase):
    def test_runs_of_one_commit_and_of_two(self):
        """A report joined from parts (merge_reports.py --parts) says how many runs, of which commit(s), over which
        dates; one run's report says nothing of it."""
        with tempfile.TemporaryDirectory() as tmp:
            t = Path(tmp)
            doc = t / "README.md"
            for name, second, want in (("one", None, None),
                                       ("same", dict(ENV, date="2026-01-02T00:00:00Z"),
                                        "merges 2 runs of commit `abcdef0`, 2026-01-01T00:00:00Z to 2026-01-02T00:00:00Z;"),
                                       ("two", dict(ENV, git_commit="1234567aaaa", date="2026-01-02T00:00:00Z"),
                                        "merges 2 runs of commits `1234567`, `abcdef0`, 2026-01-01T00:00:00Z to 2026-01-02T00:00:00Z;")):
                with self.subTest(name=name):
                    recs = full_report()
                    if second is not None:
                        recs[-1] = dict(recs[-1], env=second)
                    rep = write_report(t / name, recs)
                    doc.write_text(markers(["header"]))
                    rc, _, err = run(rep, "--files", doc)
                    self.assertEqual(rc, 0, err)
                    text = doc.read_text()
                    if want is None:
                        self.assertNotIn("merges", text)
                    else:
                        self.assertIn(want, text)
                        self.assertIn("each record's share of the ceiling is its own run's", text)


class CommittedReadmes(unittest.TestCase):
    def test_blocks_match_the_report_they_name(self):
        """README.md and the variants' READMEs hold blocks generated from a committed report: a hand
        edit of a block (or a regenerated report without its READMEs) fails here."""
        checked = 0
        for name in ("README.md", "variants/q4_gemv/README.md", "variants/gdn/README.md", "variants/f32_gemv/README.md"):
            f = ROOT / name
            if not f.is_file():
                continue
            labels = set(re.findall(r"^<!-- klab:results \S+ begin \(generated by scripts/readme_results.py from (.+?); do not edit\) -->$",
                                    f.read_text(), re.M))
            for label in labels:
                rep = ROOT / label
                if not ((rep / "report.jsonl").is_file() or (rep / "report.jsonl.gz").is_file()):
                    continue  # a block made from a report outside the repository: nothing to check against
                rc, out, err = run(rep, "--check", "--files", f)
                self.assertEqual(rc, 0, f"{name} vs {label}:\n{out}{err}")
                checked += 1
        self.assertGreater(checked, 0, "no README block names a committed report")


if __name__ == "__main__":
    unittest.main(verbosity=2)
