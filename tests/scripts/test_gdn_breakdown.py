#!/usr/bin/env python3
"""scripts/summarize.py and scripts/plot.py on gdn-step-breakdown's records (kind gdn_breakdown,
reports/SCHEMA.md), on a small synthetic report built here; every expected figure is worked out by
hand from the values below, not read from the scripts.

    /usr/bin/python3 tests/scripts/test_gdn_breakdown.py      (ctest: "scripts-breakdown")

The report (us per launch; MB = bytes / 1e6, KB = act_bytes / 1e3):
  f32: in_proj_qkv 70 (209.7152 MB), recurrence 10 (6.291456 MB), out_proj 40 (125.8291 MB); step 125.
       sum 120 = 96.0% of the step; shares 56.0%, 8.0%, 32.0%.
  q4:  in_proj_qkv 30, recurrence 9, out_proj 12; step 50. sum 51 = 102.0%; shares 60.0%, 18.0%, 24.0%.
The q4 records come first in the file: the tables and bars put f32 first all the same.
"""
import json
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SCRIPTS = ROOT / "scripts"
sys.path.insert(0, str(SCRIPTS))
import klab_report as kr  # noqa: E402

E = "gdn-step-breakdown"
ENV = {"device": {"name": "FIXTURE GPU", "l2_bytes": 60 * 2**20}, "git_commit": "0" * 40, "date": "2026-12-01T00:00:00Z",
       "command": "klab run gdn-step-breakdown", "ceiling": {"read_gbps": 4000.0}}
OPS = [("in_proj_qkv", 209715200.0, 61440.0), ("recurrence", 6291456.0, 100000.0), ("out_proj", 125829120.0, 45056.0)]
TIMES = {"f32": ([70.0, 10.0, 40.0], 125.0), "q4": ([30.0, 9.0, 12.0], 50.0)}


def rec(tier, i, name, us, bytes_, act, whole=False, step=None):
    floor = (bytes_ + act) / (4000.0 * 1e3)
    r = {"kind": "gdn_breakdown", "experiment": E, "env": ENV, "tier": tier, "operator": name, "index": i, "whole": whole,
         "median_us": us, "ci95_lo_us": us * 0.99, "ci95_hi_us": us * 1.01, "bytes": bytes_, "act_bytes": act,
         "weight_bytes": bytes_, "state_bytes": 0.0, "floor_us": floor, "pct_floor": 100 * floor / us,
         "share_of_step": us / step, "layers": 64, "launches": 64, "kernels": 1, "cold": i != 1,
         "geometry": {"str": "hidden=5120 nk=16"}}
    if whole:
        r["kernels"] = 9
        r["sum_of_operators_us"] = sum(TIMES[tier][0]) if tier in TIMES else None
    return r


def records():
    out = []
    for tier in ("q4", "f32"):
        parts, step = TIMES[tier]
        for i, ((name, b, a), us) in enumerate(zip(OPS, parts)):
            out.append(rec(tier, i, name, us, b, a, step=step))
        out.append(rec(tier, 3, "step", step, sum(b for _, b, _ in OPS), 40960.0, whole=True, step=step))
    return out


def run(script, *args):
    return subprocess.run([sys.executable, str(SCRIPTS / script)] + [str(a) for a in args], capture_output=True, text=True, timeout=300)


class Breakdown(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="klab-breakdown-test-"))
        (self.tmp / "report.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records()))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_summary_table_per_tier(self):
        p = run("summarize.py", self.tmp, "--out", "-")
        self.assertEqual(p.returncode, 0, p.stderr)
        md = p.stdout
        self.assertNotIn("kinds this summary does not read", md)
        f32, q4 = md.index("GDN step breakdown, f32 tier"), md.index("GDN step breakdown, q4 tier")
        self.assertLess(f32, q4)  # f32 first, though the file holds q4 first
        self.assertIn("(hidden=5120 nk=16, 64 layers rotating)", md)
        f32_table = md[f32:q4]
        # operator | kernels | median (CI) | MB | act KB | floor us | % of floor | share | cold
        # in_proj_qkv: floor (209715200 + 61440) / 4e6 = 52.44 us, 74.9% of 70 us.
        self.assertIn("| in_proj_qkv | 1 | 70 (69.3..70.7) | 210 | 61.4 | 52.4 | 74.9 | 56.0% | yes |", f32_table)
        self.assertIn("| recurrence | 1 | 10 (9.9..10.1) | 6.29 | 100 | 1.6 | 16 | 8.0% | no |", f32_table)
        self.assertIn("| out_proj | 1 | 40 (39.6..40.4) | 126 | 45.1 | 31.5 | 78.7 | 32.0% | yes |", f32_table)
        # The sum: 3 kernels, 120 us, 341.8 MB, 206.5 KB, floor 85.54 us, 96.0% of the step.
        self.assertIn("| sum of operators | 3 | 120 | 342 | 206 | 85.5 |  | 96.0% |  |", f32_table)
        # The whole step: (341835776 + 40960) / 4e6 = 85.47 us floor, 68.4% of 125 us.
        self.assertIn("| step (whole) | 9 | 125 (124..126) | 342 | 41 | 85.5 | 68.4 | 100% | yes |", f32_table)
        q4_table = md[q4:]
        self.assertIn("| sum of operators | 3 | 51 | 342 | 206 | 85.5 |  | 102.0% |  |", q4_table)
        self.assertIn("| in_proj_qkv | 1 | 30 (29.7..30.3) | 210 | 61.4 | 52.4 | 175 | 60.0% | yes |", q4_table)
        # Operators in step order (index), whatever their order in the file.
        self.assertLess(f32_table.index("| in_proj_qkv"), f32_table.index("| recurrence"))
        self.assertLess(f32_table.index("| recurrence"), f32_table.index("| out_proj"))

    def test_stacked_bars_and_legend_outside(self):
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        sys.path.insert(0, str(SCRIPTS))
        import plot
        report = kr.load(self.tmp)
        plan, _ = kr.chart_plan(report)
        self.assertIn(("gdn-step-breakdown", "gdn_breakdown"), [(n, k) for n, k, _, _ in plan])
        fig = plot.draw_breakdown(plt, report, E, report.of("gdn_breakdown"))
        ax = fig.axes[0]
        self.assertEqual([t.get_text() for t in ax.get_xticklabels()], ["f32 tier", "q4 tier"])
        # The stack tops: f32 70, 80, 120; q4 30, 39, 51 (bars in legend order qkv, recurrence, out_proj).
        bars = [(round(b.get_x() + b.get_width() / 2), b.get_y() + b.get_height()) for b in ax.patches]
        self.assertEqual(sorted(bars), sorted([(0, 70.0), (0, 80.0), (0, 120.0), (1, 30.0), (1, 39.0), (1, 51.0)]))
        # The whole step as a line at 125 (f32) and 50 (q4).
        self.assertEqual(sorted(l.get_ydata()[0] for l in ax.lines), [50.0, 125.0])
        # The legend lies right of the axes, not over the bars.
        fig.canvas.draw()
        leg = ax.get_legend().get_window_extent()
        self.assertGreaterEqual(leg.x0, ax.get_window_extent().x1)
        self.assertEqual([t.get_text() for t in ax.get_legend().get_texts()],
                         ["whole step, timed alone", "out_proj", "recurrence", "in_proj_qkv"])
        plt.close(fig)
        p = run("plot.py", self.tmp, "--formats", "png")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertTrue((self.tmp / "plots" / "gdn-step-breakdown.png").is_file())

    def test_a_tier_with_an_operator_of_its_own_stacks_it_in_its_step_order(self):
        # A third tier, the fused prep: in_proj_qkv 30, conv_norm_bg 2, recurrence 9, out_proj 12 (step 52);
        # conv_norm_bg, which no other tier has, belongs right after in_proj_qkv, not on top of the stack.
        rs = records()
        fused = [("in_proj_qkv", 30.0), ("conv_norm_bg", 2.0), ("recurrence", 9.0), ("out_proj", 12.0)]
        for i, (name, us) in enumerate(fused):
            rs.append(rec("q4-fused-prep", i, name, us, 1e6, 1e3, step=52.0))
        rs.append(rec("q4-fused-prep", 4, "step", 52.0, 4e6, 1e3, whole=True, step=52.0))
        rs[-1]["sum_of_operators_us"] = 53.0  # 30 + 2 + 9 + 12
        (self.tmp / "report.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rs))
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import plot
        report = kr.load(self.tmp)
        fig = plot.draw_breakdown(plt, report, E, report.of("gdn_breakdown"))
        ax = fig.axes[0]
        self.assertEqual([t.get_text() for t in ax.get_xticklabels()], ["f32 tier", "q4 tier", "q4-fused-prep tier"])
        self.assertEqual([t.get_text() for t in ax.get_legend().get_texts()],
                         ["whole step, timed alone", "out_proj", "recurrence", "conv_norm_bg", "in_proj_qkv"])
        tops = sorted(b.get_y() + b.get_height() for b in ax.patches if round(b.get_x() + b.get_width() / 2) == 2)
        self.assertEqual(tops, [30.0, 32.0, 41.0, 53.0])
        plt.close(fig)

    def test_missing_field_refused(self):
        rs = records()
        del rs[2]["median_us"]
        (self.tmp / "report.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rs))
        p = run("summarize.py", self.tmp, "--out", "-")
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("report.jsonl:3", p.stderr)
        self.assertIn("median_us", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
