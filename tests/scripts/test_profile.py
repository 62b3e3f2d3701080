#!/usr/bin/env python3
"""Tests of scripts/profile_ncu.py's pure parts: the ncu CSV parser, the per-variant summary, the choice
of what to profile, and the no-ncu path (a skip that leaves the report unchanged). The CSV below
follows the layout `ncu --csv --print-units base` prints (one row per kernel and metric, numbers
with thousands separators, ==PROF== lines mixed in); its values are made up, and every expected
figure is worked out by hand in the comments.

    /usr/bin/python3 tests/scripts/test_profile.py      (ctest: the "scripts-profile" test)
"""
import json
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import profile_ncu as prof  # noqa: E402

HEAD = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
        '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


def row(kid, kernel, metric, value):
    return ('"%s","7","klab","h","%s","1","13","(192, 1, 1)","(2176, 1, 1)","0","9.0","Command line profiler metrics",'
            '"%s","","%s"' % (kid, kernel, metric, value))


CSV = "\n".join([
    "==PROF== Connected to process 7 (klab)",
    '{"variant": "printed by klab itself"}',
    HEAD,
    row(0, "quantise_x", "gpu__time_duration.sum", "1,500"),
    row(0, "quantise_x", "smsp__sass_thread_inst_executed.sum", "1,000,000"),
    row(0, "quantise_x", "launch__registers_per_thread", "32"),
    row(1, "gemv_kernel<8>", "gpu__time_duration.sum", "12,000"),
    row(1, "gemv_kernel<8>", "dram__throughput.avg.pct_of_peak_sustained_elapsed", "91.5"),
    row(1, "gemv_kernel<8>", "sm__warps_active.avg.pct_of_peak_sustained_active", "62.25"),
    row(1, "gemv_kernel<8>", "launch__registers_per_thread", "40"),
    row(1, "gemv_kernel<8>", "sm__inst_issued.avg.pct_of_peak_sustained_active", "55"),
    row(1, "gemv_kernel<8>", "smsp__sass_thread_inst_executed.sum", "177,000,000"),
    row(1, "gemv_kernel<8>", "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio", "4.5"),
    row(1, "gemv_kernel<8>", "smsp__average_warps_issue_stalled_selected_per_issue_active.ratio", "9.0"),
    row(1, "gemv_kernel<8>", "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio", "0.75"),
    row(1, "gemv_kernel<8>", "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio", "2"),
    row(1, "gemv_kernel<8>", "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio", "0.5"),
    row(1, "gemv_kernel<8>", "smsp__average_warps_issue_stalled_drain_per_issue_active.ratio", "n/a"),
    "==PROF== Disconnected from process 7",
])


class Parse(unittest.TestCase):
    def test_kernels_in_id_order_with_numbers_unseparated(self):
        ks = prof.parse_ncu_csv(CSV)
        self.assertEqual([k["name"] for k in ks], ["quantise_x", "gemv_kernel<8>"])
        self.assertEqual(ks[0]["metrics"]["gpu__time_duration.sum"], 1500.0)
        self.assertEqual(ks[1]["metrics"]["smsp__sass_thread_inst_executed.sum"], 177e6)
        # "n/a" is no reading, not a zero.
        self.assertNotIn("smsp__average_warps_issue_stalled_drain_per_issue_active.ratio", ks[1]["metrics"])

    def test_output_without_a_header_is_an_error(self):
        with self.assertRaises(ValueError):
            prof.parse_ncu_csv("==ERROR== ERR_NVGPUCTRPERM - no permission\n")


class Summary(unittest.TestCase):
    def test_longest_kernel_gives_the_rates_and_all_kernels_the_counts(self):
        # 89128960 MACs (17408x5120): (1e6 + 177e6) / 89128960 = 1.99711... thread instructions per MAC.
        s = prof.summarize_kernels(prof.parse_ncu_csv(CSV), 17408 * 5120)
        self.assertEqual(s["kernel"], "gemv_kernel<8>")
        self.assertEqual(s["dram_pct"], 91.5)
        self.assertEqual(s["occupancy_pct"], 62.25)
        self.assertEqual(s["registers"], 40.0)  # the main kernel's, not quantise_x's 32
        self.assertEqual(s["issue_pct"], 55.0)
        self.assertEqual(s["duration_ns"], 13500.0)  # 1500 + 12000
        self.assertAlmostEqual(s["sass_thread_inst_per_mac"], 178e6 / (17408 * 5120), places=12)
        # Largest first, "selected" (the issuing warp, 9.0) left out: long_scoreboard 4.5, lg_throttle 2, wait 0.75.
        self.assertEqual(s["top_stalls"], [["long_scoreboard", 4.5], ["lg_throttle", 2.0], ["wait", 0.75]])
        self.assertEqual([k["name"] for k in s["kernels"]], ["quantise_x", "gemv_kernel<8>"])

    def test_no_kernel_is_an_error(self):
        with self.assertRaises(ValueError):
            prof.summarize_kernels([], 1)


def meas(exp, variant, shape="64x32", timed=True):
    r = {"kind": "measurement", "experiment": exp, "variant": variant, "shape": shape, "dist": "uniform", "seed": 1,
         "macs": 2048, "env": {"device": None}}
    if timed:
        r["timing"] = {"median_ms": 0.01}
    return r


class Choice(unittest.TestCase):
    def test_each_timed_problem_once_filtered_by_globs(self):
        recs = [meas("e1", "q4_gemv/a"), meas("e2", "q4_gemv/a"), meas("e1", "q4_gemv/b", timed=False),
                meas("e1", "f32_gemv/c"), meas("e1", "q4_gemv/a", shape="128x32"), {"kind": "claim"}]
        got = prof.timed_problems(recs, "q4_gemv/*", "*")
        self.assertEqual([(t[1], t[2]) for t in got], [("q4_gemv/a", "64x32"), ("q4_gemv/a", "128x32")])
        self.assertEqual(prof.timed_problems(recs, "*", "e2"), [("e2", "q4_gemv/a", "64x32", "uniform", 1, 2048)])
        self.assertEqual([t[2] for t in prof.timed_problems(recs, "q4_gemv/a", "*", "128x*")], ["128x32"])

    def test_without_ncu_the_report_is_left_unchanged(self):
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "report.jsonl"
            body = json.dumps(meas("e1", "q4_gemv/a")) + "\n"
            p.write_text(body)
            missing = str(Path(d) / "no-ncu-here")
            old = prof.find_ncu
            prof.find_ncu = lambda given: None  # as on a machine without the CUDA toolkit's ncu
            try:
                rc = prof.main([d, "--ncu", missing])
            finally:
                prof.find_ncu = old
            self.assertEqual(rc, 0)
            self.assertEqual(p.read_text(), body)

    def test_a_report_with_nothing_timed_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "report.jsonl").write_text(json.dumps(meas("e1", "q4_gemv/a", timed=False)) + "\n")
            self.assertEqual(prof.main([d]), 2)


if __name__ == "__main__":
    unittest.main()
