#!/usr/bin/env python3
"""scripts/summarize.py's gdn-stack table and klab_report.py's check of gdn_stack records
(reports/SCHEMA.md), on a synthetic report built here. Expected cells are worked out by hand below,
not read from the scripts.

    /usr/bin/python3 tests/scripts/test_gdn_stack.py      (ctest: the "scripts-gdn-stack" test)

The synthetic run (48 layers; the numbers are invented for the test, no GPU measured them):
  f32: 6.0 ms per token (CI 5.9..6.1), enqueued 6.5 ms, 4416 GB/s = 92.0 % of floor, 480 kernel nodes of 480,
       bitwise equal (0 of 37748736 differ), max |out| 12.5, weights 440x the L2
  q4:  1.2 ms per token (CI 1.19..1.21), enqueued 2.4 ms, 3000 GB/s = 62.5 % of floor, 528 kernel nodes of 530,
       3 elements of S differ, output not finite (max |out| null)
  q4 on a second run: not timed (the graph differed), with its reason.
gdn-stack-layers (invented too): q4-fast at 4 and 48 layers, 0.12 and 1.44 ms per token, so its line has slope
(1.44 - 0.12) / 44 = 0.03 ms = 30.00 us a layer and intercept 0.12 - 4 * 0.03 = 0 us; 1.44 / 48 = 30.00 us a layer at 48.
"""
import unittest

from synthetic import SummaryCase

ENV = {"device": None, "git_commit": "0" * 40, "date": "2026-12-01T00:00:00Z", "command": "klab run gdn-stack"}


def rec(tier, timed=True, **extra):
    r = {"kind": "gdn_stack", "experiment": "gdn-stack", "env": ENV, "tier": tier, "layers": 48, "timed": timed,
         "graph_nodes": 480, "kernel_nodes": 480, "out_finite": True, "out_max_abs": 12.5,
         "bitwise": {"out_differ": 0, "S_differ": 0, "hist_differ": 0, "compared": 37748736}}
    r.update(extra)
    return r


F32 = rec("f32", ms_per_token={"median": 6.0, "ci95_lo": 5.9, "ci95_hi": 6.1, "min": 5.8, "max": 6.3},
          sequential_ms_per_token={"median": 6.5, "ci95_lo": 6.4, "ci95_hi": 6.6, "min": 6.3, "max": 6.9},
          timing={"mode": "launch", "flush": "none", "median_ms": 6.0, "min_ms": 5.8, "max_ms": 6.3},
          gbps=4416.0, pct_floor=92.0, ceiling_gbps=4800.0, bytes_per_token=26.496e9,
          cold={"flush": "none", "weights_over_l2": 440.0})
Q4 = rec("q4", graph_nodes=530, kernel_nodes=528, out_finite=False, out_max_abs=None,
         bitwise={"out_differ": 0, "S_differ": 3, "hist_differ": 0, "compared": 37748736},
         ms_per_token={"median": 1.2, "ci95_lo": 1.19, "ci95_hi": 1.21, "min": 1.18, "max": 1.3},
         sequential_ms_per_token={"median": 2.4, "ci95_lo": 2.3, "ci95_hi": 2.5, "min": 2.2, "max": 2.6},
         gbps=3000.0, pct_floor=62.5, ceiling_gbps=4800.0)
UNTIMED = rec("q4", timed=False, not_timed_why="the graph differs from the sequential enqueue: q4: 5 of 9 differ",
              bitwise={"out_differ": 5, "S_differ": 0, "hist_differ": 0, "compared": 9})


FIT = {"kind": "gdn_stack_layers_fit", "experiment": "gdn-stack-layers", "env": ENV, "tier": "q4-fast", "layers": [4, 48],
       "ms_per_token": [0.12, 1.44], "us_per_layer": 30.0, "fixed_us": 0.0, "max_rel_residual": 0.0015, "us_per_layer_at_most": 30.0}
AT4 = dict(F32, kind="gdn_stack_layers", experiment="gdn-stack-layers", tier="q4-fast", layers=4)


class GdnStack(SummaryCase):
    def test_table_rows(self):
        md = self.summary([F32, Q4])
        self.assertIn("| tier | layers | ms per token (95% CI) | enqueued ms | GB/s | % of floor | kernel nodes (all) | graph vs enqueued |", md)
        self.assertIn("| f32 | 48 | 6 (5.9..6.1) | 6.5 | 4416 | 92 | 480 (480) | bitwise equal; max \\|out\\| 12.5 |", md)
        self.assertIn("| q4 | 48 | 1.2 (1.19..1.21) | 2.4 | 3000 | 62.5 | 528 (530) | 3 of 37748736 differ, output NOT FINITE; max \\|out\\| n/a |", md)
        self.assertIn("Weights cold by size, no flush: f32 440x the L2.", md)
        # Known kind: not listed among the kinds the summary does not read.
        self.assertNotIn("Records of kinds this summary does not read", md)

    def test_not_timed_says_why(self):
        md = self.summary([UNTIMED])
        self.assertIn("| q4 | 48 | not timed: the graph differs from the sequential enqueue: q4: 5 of 9 differ |  |  |  | 480 (480) | "
                      "5 of 9 differ; max \\|out\\| 12.5 |", md)

    def test_layers_sweep_tables(self):
        md = self.summary([AT4, FIT])
        self.assertIn("| q4-fast | 4 | 6 (5.9..6.1) | 6.5 | 4416 | 92 | 480 (480) | bitwise equal; max \\|out\\| 12.5 |", md)
        self.assertIn("| tier | layers: ms per token | us a layer (slope) | us fixed (intercept) | largest residual (%) | us a layer at the most layers |", md)
        self.assertIn("| q4-fast | 4: 0.12, 48: 1.44 | 30.00 | 0.0 | 0.15 | 30.00 |", md)
        self.assertNotIn("Records of kinds this summary does not read", md)

    def test_schema_refuses_a_line_without_its_slope(self):
        self.assert_each_required(FIT, ("us_per_layer", "fixed_us", "layers"))

    def test_schema_refuses_a_record_without_its_check(self):
        self.assert_each_required(F32, ("bitwise", "tier", "kernel_nodes"))
        self.assert_refused(dict(F32, ms_per_token={"median": 6.0}), "ci95_lo")  # an interval is part of the time


if __name__ == "__main__":
    unittest.main()
