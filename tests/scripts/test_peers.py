#!/usr/bin/env python3
"""Tests of peers/ (unittest, no pytest): the repack mappings against klab's dequantisation, the
records against a small synthetic klab report, the merge, and the runner's plumbing on the CPU.

    /usr/bin/python3 tests/scripts/test_peers.py      (ctest: the "peers" test; numpy, no torch needed)

Without torch, the tests that need it are SKIPPED, saying why (never counted as passes); the GPU
tests (the peers' layouts checked bit for bit with one-hot activations) run only where torch sees a
CUDA device and the peer's package imports: on the GPU machine, with the carried wheels on
PYTHONPATH (peers/README.md). The runner's GPU path is exercised here with tests/scripts/fake_torch.py.
"""
import importlib
import io
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PEERS = ROOT / "peers"
sys.path.insert(0, str(PEERS))
sys.path.insert(0, str(HERE))

import records as rec  # noqa: E402
import repack as R  # noqa: E402
import st_numpy  # noqa: E402


def klab_binary():
    """The klab CLI (KLAB_CLI, else build/*/bin/klab), or None."""
    env = os.environ.get("KLAB_CLI")
    if env and Path(env).is_file():
        return Path(env)
    for d in ("dev", "ci"):
        p = ROOT / "build" / d / "bin" / "klab"
        if p.is_file():
            return p
    return None


def real_torch():
    """(torch, None) or (None, why): the real one, never the fake."""
    if "torch" in sys.modules and getattr(sys.modules["torch"], "__version__", "").endswith("-fake"):
        return None, "the fake torch is installed"
    try:
        return importlib.import_module("torch"), None
    except Exception as e:  # noqa: BLE001
        return None, f"torch is not importable here ({type(e).__name__}: {e}); this test needs it"


def random_q4(m, k, seed):
    """klab-format codes (every byte value) and f16 scales (normal, subnormal, zero, extreme)."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 256, size=(m, k // 2), dtype=np.uint8)
    s = (rng.standard_normal((m, k // 32)) * np.exp2(rng.integers(-20, 12, size=(m, k // 32)))).astype(np.float16)
    s.flat[0] = 0.0
    s.flat[-1] = np.float16(6.1e-5)  # about the smallest normal
    return codes, s.view(np.uint16)


class Q4Format(unittest.TestCase):
    def test_codes_decode_as_klab_documents(self):
        # byte 0x9F: low nibble F (column 0) = -1, high nibble 9 (column 1) = -7; 0x70: 0 and 7.
        n4 = R.q4_codes(np.array([[0x9F, 0x70]], dtype=np.uint8), 1, 4)
        self.assertEqual(n4.tolist(), [[-1, -7, 0, 7]])
        every = R.q4_codes(np.arange(256, dtype=np.uint8).reshape(1, 256), 1, 512)
        self.assertEqual(every.min(), -8)
        self.assertEqual(every.max(), 7)

    def test_dequant_is_n4_times_the_f16_scale(self):
        codes, s = random_q4(8, 64, 1)
        W = R.q4_dequant(codes, s, 8, 64)
        want = R.q4_codes(codes, 8, 64).astype(np.float64) * np.repeat(s.view(np.float16).astype(np.float64), 32, axis=1)
        self.assertTrue((W.astype(np.float64) == want).all())


class Bf16(unittest.TestCase):
    def test_round_to_nearest_even(self):
        x = np.array([1.0, 1.0 + 2**-8, 1.0 + 3 * 2**-8, 1.0 + 2**-8 + 2**-20, -(1.0 + 2**-8), 3.4e38, np.inf, -np.inf, 0.0, -0.0],
                     dtype=np.float32)
        b = R.f32_to_bf16_bits(x)
        # 1 + 2^-8 is a tie between 1 and 1 + 2^-7: to even (1); 1 + 3*2^-8 ties up to 1 + 2^-6; just over a tie rounds up.
        self.assertEqual([hex(v) for v in b[:5]], ["0x3f80", "0x3f80", "0x3f82", "0x3f81", "0xbf80"])
        self.assertEqual(hex(b[5]), "0x7f80")  # past the largest bf16: infinity
        self.assertEqual([hex(v) for v in b[6:]], ["0x7f80", "0xff80", "0x0", "0x8000"])
        self.assertTrue(np.isnan(R.bf16_bits_to_f32(R.f32_to_bf16_bits(np.array([np.nan], np.float32))))[0])

    def test_nearest_against_an_exhaustive_search(self):
        rng = np.random.default_rng(2)
        x = (rng.standard_normal(4000) * np.exp2(rng.integers(-60, 60, 4000))).astype(np.float32)
        got = R.bf16_bits_to_f32(R.f32_to_bf16_bits(x)).astype(np.float64)
        hi = R.bf16_bits_to_f32((x.view(np.uint32) >> 16).astype(np.uint16)).astype(np.float64)  # truncation
        up = R.bf16_bits_to_f32(((x.view(np.uint32) >> 16) + 1).astype(np.uint16)).astype(np.float64)
        xd = x.astype(np.float64)
        # |x| rounds to the nearer of the truncation and the next bf16 away from zero.
        want = np.where(np.abs(xd - hi) < np.abs(up - xd), hi, np.where(np.abs(xd - hi) > np.abs(up - xd), up, got))
        self.assertTrue((got == want).all())


class TorchInt4Format(unittest.TestCase):
    M, K = 16, 128

    def test_codes_map_exactly_and_both_constructions_agree(self):
        codes, s = random_q4(self.M, self.K, 3)
        n4 = R.q4_codes(codes, self.M, self.K)
        w = R.torch_int4_weight(n4)
        self.assertEqual(w.shape, (self.M, self.K // 2))
        self.assertTrue((w == R.torch_int4_weight_from_codes(codes)).all())
        q = R.torch_int4_unpack(w)
        self.assertTrue((q.astype(np.int16) - 8 == n4).all(), "q - 8 must be n4 for every weight")
        # Even column in the HIGH nibble (torch's CUDA layout): n4 = (-8, 7) -> q = (0, 15) -> byte 0x0F.
        self.assertEqual(R.torch_int4_weight(np.array([[-8, 7]], dtype=np.int8)).tolist(), [[0x0F]])

    def test_scales_and_zeros_layout_and_values(self):
        codes, s = random_q4(self.M, self.K, 4)
        sz = R.torch_int4_scales_and_zeros(s, self.M, self.K)
        self.assertEqual(sz.shape, (self.K // 32, self.M, 2))
        self.assertTrue((sz[:, :, 1] == 0).all())
        f16 = s.view(np.float16).astype(np.float32)
        self.assertTrue((sz[:, :, 0].T == R.f32_to_bf16_bits(f16)).all())
        rel = np.abs(R.bf16_bits_to_f32(sz[:, :, 0].T).astype(np.float64) - f16) / np.maximum(np.abs(f16), 1e-45)
        self.assertLessEqual(rel.max(), 2.0**-8)  # half a bf16 ulp

    def test_dequant_formula_reproduces_dequant_w_where_the_scale_fits_bf16(self):
        codes, s = random_q4(self.M, self.K, 5)
        # Make half the scales bf16-representable (8 significant bits): there the format is exact.
        f16 = s.view(np.float16).copy()
        f16[:, ::2] = R.round_bf16(f16[:, ::2].astype(np.float32)).astype(np.float16)
        s = f16.view(np.uint16)
        w = R.torch_int4_weight(R.q4_codes(codes, self.M, self.K))
        sz = R.torch_int4_scales_and_zeros(s, self.M, self.K)
        got = R.torch_int4_values(w, sz)  # (q - 8) * scale + zero, exact
        W = R.q4_dequant(codes, s, self.M, self.K).astype(np.float64)
        cols = np.repeat(np.arange(self.K // 32) % 2 == 0, 32)
        self.assertTrue((got[:, cols] == W[:, cols]).all(), "bit for bit in f32 where the scale fits bf16")
        n4 = R.q4_codes(codes, self.M, self.K).astype(np.float64)
        sb = np.repeat(R.bf16_bits_to_f32(sz[:, :, 0]).T.astype(np.float64), 32, axis=1)
        self.assertTrue((got == n4 * sb).all(), "everywhere: n4 times the bf16 scale")
        # The kernel then rounds each weight to bf16 once.
        self.assertTrue((R.torch_int4_kernel_weights(w, sz) == R.round_bf16((n4 * sb).astype(np.float32))).all())


class GemliteFormat(unittest.TestCase):
    def test_format_holds_dequant_w_bit_for_bit(self):
        M, K = 24, 96
        codes, s = random_q4(M, K, 6)
        n4 = R.q4_codes(codes, M, K)
        W_q, sc, z = R.gemlite_weight(n4), R.gemlite_scales(s, M, K), R.gemlite_zeros(M, K)
        self.assertEqual((W_q.dtype, W_q.shape, int(W_q.min()) >= 0, int(W_q.max()) <= 15), (np.dtype(np.uint8), (M, K), True, True))
        self.assertTrue((sc.view(np.uint16) == s.reshape(M, K // 32)).all(), "the f16 scales, bit for bit")
        self.assertTrue((R.gemlite_values(W_q, sc, z) == R.q4_dequant(codes, s, M, K).astype(np.float64)).all())
        # The kernel's fma(W_q, s, -8 s) in f16 is f16(n4 s): one rounding.
        want = (n4.astype(np.float64) * np.repeat(sc.astype(np.float64), 32, axis=1)).astype(np.float16)
        self.assertTrue((R.gemlite_kernel_weights(W_q, sc, z) == want).all())


class GdnModels(unittest.TestCase):
    def test_numpy_f64_recurrence_matches_a_hand_computed_head(self):
        # The case of tests/cpu/test_gdn_reference.cpp: nk = nv = 1, dk = 2, dv = 1.
        o, S = R.gdn_recurrence_f64(np.array([[[3.0, 4.0]]]), np.array([[[0.0, 2.0]]]), np.array([[[3.0]]]),
                                    np.array([[math.log(0.5)]]), np.array([[0.5]]), np.array([[[[1.0], [2.0]]]]), 1 / math.sqrt(2))
        self.assertAlmostEqual(S[0, 0, 0, 0], 0.5, places=12)
        self.assertAlmostEqual(S[0, 0, 1, 0], 2.0, places=5)
        self.assertAlmostEqual(o[0, 0, 0], 1.9 / math.sqrt(2), places=5)


# ---- records and the merge ------------------------------------------------------------------------------

def klab_env():
    return {"device": {"name": "FIXTURE GPU", "l2_bytes": 1 << 20, "sm_count": 1}, "ceiling": {"read_gbps": 4000.0},
            "git_commit": "0" * 40, "git_dirty": False, "date": "2026-12-01T00:00:00Z", "command": "klab run q4-vs-peers",
            "options": {"reps": 3, "warmup": 1, "seed": 1, "l2_cold": True, "quick": False}}


def klab_record(shape="64x256", variant="q4_gemv/map=block-per-thread,rows=8", bytes_=10496.0):
    timing = {"n": 3, "median_ms": 0.004, "min_ms": 0.0039, "max_ms": 0.0041, "samples_ms": [0.004, 0.0039, 0.0041]}
    return {"kind": "measurement", "experiment": "q4-vs-peers", "op": "q4_gemv", "variant": variant, "peer": False,
            "axes": {}, "shape": shape, "m": 64, "k": 256, "dist": "uniform", "seed": 1,
            "accuracy": {"n": 64, "max_rel": 1e-7, "rms_rel": 1e-8}, "verified": True, "tolerance": 1e-5, "bits_vs_a": None,
            "bytes": bytes_, "macs": 16384.0, "timing": dict(timing, mode="stream"), "gbps": 2.6, "gmacs": 4.1,
            "pct_ceiling": 0.07, "ceiling_gbps": 4000.0,
            "modes": {"launch": {"timing": dict(timing, mode="launch"), "attainable_gbps": 1000.0, "attainable_pdl": False},
                      "stream": {"timing": dict(timing, mode="stream"), "attainable_gbps": 2000.0, "attainable_pdl": True}},
            "env": klab_env()}


class Records(unittest.TestCase):
    def test_accuracy_follows_klab_metrics(self):
        ref = np.array([1.0, -2.0, 4.0, 0.5, np.nan])
        out = np.array([1.0, -2.5, 4.0, np.nan, 7.0], dtype=np.float32)
        a = rec.accuracy(out, ref)
        # max|ref| over finite refs = 4; errors 0, 0.5, 0 -> max_rel 0.125; one NaN output; the NaN ref is not compared.
        self.assertEqual((a["n"], a["max_ref"], a["max_abs"], a["nan"], a["inf"], a["unwritten"]), (5, 4.0, 0.5, 1, 0, 0))
        self.assertAlmostEqual(a["max_rel"], 0.125)
        self.assertAlmostEqual(a["nmse"], 0.25 / (1 + 4 + 16))
        self.assertAlmostEqual(a["rms_rel"], math.sqrt(0.25 / 21))
        b = rec.accuracy(out, ref, unwritten=np.array([0, 0, 0, 1, 0], bool))
        self.assertEqual((b["nan"], b["unwritten"]), (0, 1))
        self.assertFalse(rec.finite(b))

    def test_summary_quantiles_as_klab(self):
        s = rec.summarize([5.0, 1.0, 3.0, 2.0, 4.0])
        self.assertEqual((s["n"], s["median_ms"], s["min_ms"], s["max_ms"], s["mean_ms"]), (5, 3.0, 1.0, 5.0, 3.0))
        self.assertAlmostEqual(s["p10_ms"], 1.4)  # pos 0.4 between 1 and 2
        self.assertAlmostEqual(s["p90_ms"], 4.6)

    def test_measurement_record_against_a_synthetic_klab_report(self):
        klab = rec.KlabReport([klab_record()])
        self.assertEqual((klab.read_gbps(), klab.l2_bytes()), (4000.0, 1 << 20))
        matches = klab.match("q4-vs-peers", "64x256", "uniform", op="q4_gemv")
        att_s, pdl_s = klab.attainable(matches, "stream")
        att_l, _ = klab.attainable(matches, "launch")
        self.assertEqual((att_s, pdl_s, att_l), (2000.0, True, 1000.0))
        env = rec.peer_env(klab, {"torch": "2.11"}, "peers/run.py ...")
        self.assertEqual(env["peers"]["torch"], "2.11")
        self.assertNotIn("peers", klab.env, "the klab env is copied, not changed")
        acc = rec.accuracy(np.ones(64, np.float32), np.ones(64))
        modes = {"launch": ([0.02, 0.01, 0.03], 1, 1, "blocking", att_l, False),
                 "stream": ([0.005, 0.006, 0.004], 64, 64, "blocking", att_s, pdl_s)}
        r = rec.measurement(experiment="q4-vs-peers", op="q4_gemv", variant="q4_gemv/impl=torch-int4pack",
                            axes={"impl": "torch-int4pack"}, shape="64x256", m=64, k=256, dist="uniform", seed=1, acc=acc,
                            verified=True, tolerance=3e-2, bytes_=10496.0, macs=16384.0, modes=modes, stream_unavailable=None,
                            klab=klab, env=env)
        self.assertEqual((r["kind"], r["peer"], r["bits_vs_a"], r["source"]), ("measurement", True, None, rec.SOURCE))
        # The headline is stream: median 0.005 ms -> 10496 B / 5 us = 2.0992 GB/s; 0.0524...% of 4000; 0.105% of 2000.
        self.assertEqual(r["timing"]["mode"], "stream")
        self.assertAlmostEqual(r["gbps"], 2.0992)
        self.assertAlmostEqual(r["gmacs"], 3.2768)
        self.assertAlmostEqual(r["pct_ceiling"], 100 * 2.0992 / 4000)
        self.assertAlmostEqual(r["pct_attainable"], 100 * 2.0992 / 2000)
        self.assertEqual(r["attainable_gbps"], 2000.0)
        self.assertEqual((r["timing"]["launches"], r["timing"]["copies"], r["timing"]["flush"], r["timing"]["l2_cold"]), (64, 64, "read", True))
        self.assertEqual((r["timing"]["reps"], r["timing"]["kept"], r["timing"]["throttled"], r["timing"]["clock_mhz"]), (3, 3, 0, 0))
        self.assertEqual(r["timing"]["samples_ms"], [0.005, 0.006, 0.004])
        self.assertAlmostEqual(r["modes"]["launch"]["timing"]["median_ms"], 0.02)
        self.assertNotIn("launches", r["modes"]["launch"]["timing"])
        self.assertEqual(r["ceiling_gbps"], 4000.0)
        # Launch only (stream unavailable): the headline is launch and the reason is kept.
        r2 = rec.measurement(experiment="e", op="q4_gemv", variant="v", axes={}, shape="s", m=1, k=1, dist="uniform", seed=1,
                             acc=acc, verified=True, tolerance=1, bytes_=1.0, macs=1.0, modes={"launch": modes["launch"]},
                             stream_unavailable="cannot be captured", klab=klab, env=env)
        self.assertEqual((r2["timing"]["mode"], r2["stream_unavailable"]), ("launch", "cannot be captured"))
        # Not verified: no timing at all.
        r3 = rec.measurement(experiment="e", op="q4_gemv", variant="v", axes={}, shape="s", m=1, k=1, dist="uniform", seed=1,
                             acc=acc, verified=False, tolerance=1, bytes_=1.0, macs=1.0, modes={}, stream_unavailable=None,
                             klab=klab, env=env)
        self.assertNotIn("timing", r3)
        self.assertNotIn("modes", r3)
        # NaN and infinity are written as null; lines are compact, as klab's.
        line = rec.dumps({"kind": "skip", "x": float("nan"), "y": [float("inf")]})
        self.assertEqual(line, '{"kind":"skip","x":null,"y":[null]}')

    def test_merge_into_a_schema_2_report(self):
        """klab's report of schema 2: env once in the header, a closing record. The peers take the
        header's env; their records, with their own env, land after the end record; the report stays
        complete and every record reads with an env."""
        tmp = Path(tempfile.mkdtemp(prefix="klab-peers-test-"))
        try:
            env = klab_env()
            own = {k: v for k, v in klab_record().items() if k != "env"}
            lines = [json.dumps({"kind": "header", "schema_version": 2, "start": "2026-01-01T00:00:00Z", "env": env}),
                     json.dumps(own),
                     json.dumps({"kind": "end", "status": "complete", "records": 1, "counts": {"measurement": 1}})]
            (tmp / "report.jsonl").write_text("\n".join(lines) + "\n")
            klab = rec.KlabReport.load(tmp)
            self.assertEqual(klab.env, env)
            penv = rec.peer_env(klab, {}, "peers/run.py")
            s = rec.skip("q4-vs-peers", "q4_gemv/impl=x on 64x256", "torch is missing", penv)
            self.assertEqual(rec.merge(tmp, [rec.dumps(s)]), 1)
            self.assertEqual((tmp / "report.jsonl").read_text().splitlines()[:3], lines)
            self.assertEqual(sorted(p.name for p in tmp.glob("*.csv")), ["report-measurement.csv", "report-skip.csv"])
            sys.path.insert(0, str(ROOT / "scripts"))
            import klab_report
            loaded = klab_report.load(tmp)
            self.assertIsNone(loaded.incomplete())
            self.assertEqual([r["kind"] for r in loaded.records], ["measurement", "skip"])
            self.assertEqual(loaded.records[0]["env"], env)
            self.assertIn("peers", loaded.records[1]["env"])
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_merge_appends_atomically_and_the_scripts_read_the_result(self):
        tmp = Path(tempfile.mkdtemp(prefix="klab-peers-test-"))
        try:
            klab_lines = [json.dumps(klab_record(), separators=(",", ":"), sort_keys=True),
                          json.dumps({"kind": "claim", "experiment": "q4-vs-peers", "index": 0, "text": "t", "state": "held",
                                      "env": klab_env()}, separators=(",", ":"), sort_keys=True)]
            (tmp / "report.jsonl").write_text("\n".join(klab_lines) + "\n")
            klab = rec.KlabReport.load(tmp)
            env = rec.peer_env(klab, {}, "peers/run.py")
            acc = rec.accuracy(np.ones(64, np.float32), np.ones(64))
            r = rec.measurement(experiment="q4-vs-peers", op="q4_gemv", variant="q4_gemv/impl=gemlite-a16w4",
                                axes={"impl": "gemlite-a16w4"}, shape="64x256", m=64, k=256, dist="uniform", seed=1, acc=acc,
                                verified=True, tolerance=3e-2, bytes_=10496.0, macs=16384.0,
                                modes={"stream": ([0.005] * 3, 64, 64, None, 2000.0, True)}, stream_unavailable=None,
                                klab=klab, env=env)
            s = rec.skip("q4-vs-peers", "q4_gemv/impl=torch-int4pack on 64x256/uniform/seed=1", "torch is missing", env)
            n = rec.merge(tmp, [rec.dumps(r), rec.dumps(s)])
            self.assertEqual(n, 2)
            lines = (tmp / "report.jsonl").read_text().splitlines()
            self.assertEqual(lines[:2], klab_lines, "klab's own lines are kept as they were")
            self.assertEqual(len(lines), 4)
            self.assertEqual([p.name for p in tmp.iterdir() if ".tmp." in p.name], [], "no temporary file left")
            # One CSV per record kind (klab's report-KIND.csv), peer records in them.
            self.assertFalse((tmp / "report.csv").exists())
            csv = (tmp / "report-measurement.csv").read_text().splitlines()
            self.assertEqual(len(csv), 3)
            self.assertIn("variant", csv[0].split(","))
            self.assertIn("q4_gemv/impl=gemlite-a16w4", csv[2])
            self.assertEqual(len((tmp / "report-claim.csv").read_text().splitlines()), 2)
            self.assertIn("torch is missing", (tmp / "report-skip.csv").read_text())
            # klab's own records are still the only "own" match; the peer's is not taken for klab's.
            merged = rec.KlabReport.load(tmp)
            self.assertEqual([m["variant"] for m in merged.match("q4-vs-peers", "64x256", "uniform")], [klab_record()["variant"]])
            # scripts/klab_report.py accepts the merged report, and the summary shows the peer in the same table.
            sys.path.insert(0, str(ROOT / "scripts"))
            import klab_report
            loaded = klab_report.load(tmp)
            self.assertEqual(len(loaded.records), 4)
            p = subprocess.run([sys.executable, str(ROOT / "scripts" / "summarize.py"), str(tmp), "--out", "-"],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("impl=gemlite-a16w4", p.stdout)
            self.assertIn("torch is missing", p.stdout)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_merge_refuses_a_line_that_is_not_a_record_and_changes_nothing(self):
        tmp = Path(tempfile.mkdtemp(prefix="klab-peers-test-"))
        try:
            (tmp / "report.jsonl").write_text(json.dumps(klab_record()) + "\n")
            before = (tmp / "report.jsonl").read_text()
            with self.assertRaises(rec.ReportError):
                rec.merge(tmp, ['{"no_kind": 1}'])
            self.assertEqual((tmp / "report.jsonl").read_text(), before)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


# ---- the runner on exported problems --------------------------------------------------------------------

class Runner(unittest.TestCase):
    """peers/run.py on problems `klab export` writes (skipped, saying so, without the klab binary)."""

    @classmethod
    def setUpClass(cls):
        cls.klab = klab_binary()
        if cls.klab is None:
            raise unittest.SkipTest("no klab binary (build/dev/bin/klab or KLAB_CLI): cannot export problems")
        cls.tmp = Path(tempfile.mkdtemp(prefix="klab-peers-run-"))
        cls.problems = cls.tmp / "problems"
        cls.problems.mkdir()
        for args in (["--op", "q4_gemv", "--shape", "64x256", "--out", cls.problems / "q4-64x256.safetensors"],
                     ["--op", "q4_gemv", "--shape", "40x160", "--input", "student-t", "--out", cls.problems / "q4-40x160.safetensors"],
                     ["--op", "gdn_recurrence", "--batch", "1", "--out", cls.problems / "gdn-b1.safetensors"]):
            subprocess.run([str(cls.klab), "export"] + [str(a) for a in args], check=True, capture_output=True, timeout=300)
        (cls.tmp / "report.jsonl").write_text(json.dumps(klab_record()) + "\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_peers(self, *extra):
        return subprocess.run([sys.executable, str(PEERS / "run.py"), "--problems", str(self.problems), "--report",
                               str(self.tmp / "report.jsonl"), "--out", str(self.tmp / "peers.jsonl")] + list(extra),
                              capture_output=True, text=True, timeout=600)

    def records(self):
        return [json.loads(l) for l in (self.tmp / "peers.jsonl").read_text().splitlines()]

    def test_the_export_reads_back_and_the_numpy_recurrence_agrees_with_klabs(self):
        f = st_numpy.File(self.problems / "gdn-b1.safetensors")
        a = {n: f.get(n) for n in ("q", "k", "v", "g", "beta", "S0", "o", "S")}
        o, S = R.gdn_recurrence_f64(a["q"], a["k"], a["v"], a["g"], a["beta"], a["S0"], float(f.meta("scale")))
        self.assertLess(np.abs(o - a["o"]).max() / np.abs(a["o"]).max(), 1e-12)
        self.assertLess(np.abs(S - a["S"]).max() / np.abs(a["S"]).max(), 1e-12)
        q = st_numpy.File(self.problems / "q4-64x256.safetensors")
        W = R.q4_dequant(q.get("codes"), q.get("scales").view(np.uint16), 64, 256).astype(np.float64)
        self.assertLess(np.abs(W @ q.get("x").astype(np.float64) - q.get("y")).max(), 1e-12)

    def test_dry_run_checks_every_peer_on_the_cpu_and_times_nothing(self):
        p = self.run_peers("--dry-run")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        rs = self.records()
        self.assertTrue(rs and all(r["kind"] == "skip" for r in rs), "a dry run writes skips only")
        what = sorted(r["what"] for r in rs)
        self.assertEqual(what, sorted([
            "gdn_recurrence/impl=fla-fused-recurrent on batch=1,dk=128,dv=128,nk=16,nv=48/uniform/seed=1",
            "q4_gemv/impl=gemlite-a16w4 on 40x160/student-t/seed=1", "q4_gemv/impl=gemlite-a16w4 on 64x256/uniform/seed=1",
            "q4_gemv/impl=torch-int4pack on 40x160/student-t/seed=1", "q4_gemv/impl=torch-int4pack on 64x256/uniform/seed=1"]))
        for r in rs:
            self.assertIn("dry run", r["reason"])
            self.assertNotIn("OUTSIDE", r["reason"])
            self.assertEqual(r["env"]["ceiling"]["read_gbps"], 4000.0)
            self.assertIn("peers", r["env"])
        self.assertIn("codes exact: True", p.stdout)
        self.assertIn("format holds dequant(W) bit for bit: True", p.stdout)

    def test_without_cuda_every_peer_is_skipped_with_the_reason(self):
        torch, why = real_torch()
        if torch is not None and torch.cuda.is_available():
            self.skipTest("this machine has a CUDA device: the runner would time the peers")
        p = self.run_peers("--only", "*torch-int4pack*")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        rs = self.records()
        self.assertEqual([r["kind"] for r in rs], ["skip", "skip"])
        for r in rs:
            self.assertTrue("torch" in r["reason"] and ("import" in r["reason"] or "no CUDA" in r["reason"]), r["reason"])

    def test_bad_options_are_refused(self):
        for extra, says in ((["--reps", "0"], "--reps must be between"), (["--only", "nothing*"], "matches no peer")):
            p = self.run_peers(*extra)
            self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
            self.assertIn(says, p.stderr)
        p = subprocess.run([sys.executable, str(PEERS / "run.py"), "--problems", str(self.tmp / "none"), "--report",
                            str(self.tmp / "report.jsonl"), "--out", str(self.tmp / "x.jsonl")], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("not a directory", p.stderr)


class RunnerPlumbing(unittest.TestCase):
    """The runner's GPU path (verify with poison, interleaved timing, graphs, records) on the CPU, with
    tests/scripts/fake_torch.py standing in for torch, gemlite and fla (their numpy models as the ops)."""

    def test_gpu_path_with_the_fake_torch(self):
        if klab_binary() is None:
            self.skipTest("no klab binary (build/dev/bin/klab or KLAB_CLI): cannot export problems")
        torch, _ = real_torch()
        if torch is not None:
            self.skipTest("a real torch is importable here: the fake would shadow it; the GPU tests below cover this machine")
        import fake_torch
        tmp = Path(tempfile.mkdtemp(prefix="klab-peers-fake-"))
        names = fake_torch.install()
        try:
            (tmp / "problems").mkdir()
            for args in (["--op", "q4_gemv", "--shape", "64x256"], ["--op", "gdn_recurrence", "--batch", "1"]):
                subprocess.run([str(klab_binary()), "export"] + args + ["--out", str(tmp / "problems" / (args[1] + ".safetensors"))],
                               check=True, capture_output=True, timeout=300)
            (tmp / "report.jsonl").write_text(json.dumps(klab_record()) + "\n")
            import run as runner
            buf = io.StringIO()
            with redirect_stdout(buf):
                rc = runner.main(["--problems", str(tmp / "problems"), "--report", str(tmp / "report.jsonl"), "--out",
                                  str(tmp / "peers.jsonl"), "--reps", "3", "--warmup", "1"])
            out = buf.getvalue()
            self.assertEqual(rc, 0, out)
            rs = [json.loads(l) for l in (tmp / "peers.jsonl").read_text().splitlines()]
            by = {r["variant"]: r for r in rs if r["kind"] == "measurement"}
            self.assertEqual(sorted(by), ["gdn_recurrence/impl=fla-fused-recurrent", "q4_gemv/impl=gemlite-a16w4",
                                          "q4_gemv/impl=torch-int4pack"], out)
            for v, r in by.items():
                self.assertTrue(r["verified"], v)
                self.assertEqual(sorted(r["modes"]), ["launch", "stream"])
                self.assertEqual(r["timing"]["mode"], "stream")
                self.assertEqual(len(r["timing"]["samples_ms"]), 3)
                self.assertTrue(all(r["poisoned"].values()), f"{v}: the poisoned block was reused ({r['poisoned']})")
                self.assertEqual(r["accuracy"]["unwritten"], 0)
                self.assertIn("blocking kernel", r["timing"]["blocking"])
            q = by["q4_gemv/impl=torch-int4pack"]
            # L2 1 MiB (the report's), bytes 10496 -> 64 copies (the cap), K = 64; pct vs the report's ceiling and reads.
            self.assertEqual((q["timing"]["copies"], q["timing"]["launches"]), (64, 64))
            self.assertEqual(q["modes"]["stream"]["attainable_gbps"], 2000.0)
            self.assertEqual(q["modes"]["launch"]["attainable_gbps"], 1000.0)
            self.assertEqual(q["bytes"], 10496.0)
            self.assertIn("klab report", q["bytes_source"])
            self.assertEqual(q["peer_config"]["inner_k_tiles"], 8)
            g = by["gdn_recurrence/impl=fla-fused-recurrent"]
            self.assertEqual(sorted(g["accuracy_outputs"]), ["S", "o"])
            # As klab's own records of the op (harness/src/race.cpp): shape = the parameters' key, params,
            # no m x k; the export's input_hash; the experiment klab's gdn-recurrence.
            key = "batch=1,dk=128,dv=128,nk=16,nv=48"
            self.assertEqual((g["shape"], g["problem"], g["batch"], g["experiment"]), (key, key, 1, "gdn-recurrence"))
            self.assertEqual(g["params"], {"batch": 1, "dk": 128, "dv": 128, "nk": 16, "nv": 48})
            self.assertNotIn("m", g)
            self.assertRegex(g["input_hash"], r"^0x[0-9a-f]{16}$")
            self.assertEqual(q["params"], {"m": 64, "k": 256})
            self.assertEqual((q["m"], q["k"], q["problem"]), (64, 256, "64x256"))
            self.assertIsNone(g["attainable_gbps"])  # the report has no recurrence of klab's own
            self.assertIn("export metadata", g["bytes_source"])
            self.assertGreater(fake_torch.stats["graph_captures"], 0)
            self.assertGreater(fake_torch.stats["flush_sums"], 0)
        finally:
            fake_torch.uninstall(names)
            for m in ("run", "peers", "gpu_timing"):
                sys.modules.pop(m, None)
            shutil.rmtree(tmp, ignore_errors=True)


# ---- on the GPU: the layouts, bit for bit --------------------------------------------------------------

class GpuLayouts(unittest.TestCase):
    """With a one-hot x, y is one column of the weights as the kernel forms them: exact in bf16 / f16
    (one nonzero product, the rest zeros), so the peer's output must equal the numpy model of its
    dequantisation bit for bit: any layout, nibble-order or scale mistake shows as a mismatch."""

    M, K = 64, 256

    def setUp(self):
        torch, why = real_torch()
        if torch is None:
            self.skipTest(why)
        if not torch.cuda.is_available():
            self.skipTest(f"torch {torch.__version__} sees no CUDA device; this test needs one")
        self.torch = torch
        sys.path.insert(0, str(PEERS))

    def problem(self):
        codes, s = random_q4(self.M, self.K, 7)
        s = (np.abs(s.view(np.float16)) % np.float16(4) + np.float16(0.01)).astype(np.float16).view(np.uint16)  # positive, moderate
        return codes, s

    def test_torch_int4pack_layout(self):
        torch = self.torch
        if not hasattr(torch.ops.aten, "_weight_int4pack_mm"):
            self.skipTest(f"torch {torch.__version__} has no aten._weight_int4pack_mm")
        import peers as P
        codes, s = self.problem()
        n4 = R.q4_codes(codes, self.M, self.K)
        w, sz = R.torch_int4_weight(n4), R.torch_int4_scales_and_zeros(s, self.M, self.K)
        want = R.torch_int4_kernel_weights(w, sz)  # (M, K) f32 (bf16 values)
        packed = torch.ops.aten._convert_weight_to_int4pack(torch.from_numpy(w).cuda(), P.TorchInt4.inner_k_tiles(self.K))
        szd = torch.from_numpy(sz.view(np.int16)).cuda().view(torch.bfloat16)
        for j in (0, 1, 2, 31, 32, 33, 100, self.K - 1):
            x = np.zeros(self.K, np.float32)
            x[j] = 1.0
            xb = torch.from_numpy(R.f32_to_bf16_bits(x).view(np.int16).reshape(1, -1)).cuda().view(torch.bfloat16)
            y = torch.ops.aten._weight_int4pack_mm(xb, packed, 32, szd).float().cpu().numpy().ravel()
            self.assertTrue((y == want[:, j]).all(), f"column {j}: {y[:4]} vs {want[:4, j]}")

    def test_gemlite_layout(self):
        torch = self.torch
        try:
            import gemlite
        except Exception as e:  # noqa: BLE001
            self.skipTest(f"gemlite is not importable ({type(e).__name__}: {e})")
        codes, s = self.problem()
        n4 = R.q4_codes(codes, self.M, self.K)
        W_q, sc, z = R.gemlite_weight(n4), R.gemlite_scales(s, self.M, self.K), R.gemlite_zeros(self.M, self.K)
        want = R.gemlite_kernel_weights(W_q, sc, z).astype(np.float32)
        lin = gemlite.GemLiteLinearTriton(W_nbits=4, group_size=32, in_features=self.K, out_features=self.M,
                                          input_dtype=gemlite.DType.FP16, output_dtype=gemlite.DType.FP16)
        lin.pack(torch.from_numpy(W_q).cuda(), torch.from_numpy(sc).cuda(), torch.from_numpy(z).cuda(), bias=None)
        for j in (0, 1, 2, 31, 32, 33, 100, self.K - 1):
            x = np.zeros((1, self.K), np.float16)
            x[0, j] = 1.0
            y = lin(torch.from_numpy(x).cuda()).float().cpu().numpy().ravel()
            self.assertTrue((y == want[:, j]).all(), f"column {j}: {y[:4]} vs {want[:4, j]}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
