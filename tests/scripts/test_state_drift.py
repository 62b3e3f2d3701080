#!/usr/bin/env python3
"""scripts/summarize.py's gdn-state-drift table, plot.py's figure of it and klab_report.py's check of state_drift records
(reports/SCHEMA.md), on a synthetic report built here. Expected cells are worked out by hand below,
not read from the scripts.

    /usr/bin/python3 tests/scripts/test_state_drift.py      (ctest: the "scripts-state-drift" test)

The synthetic run (the numbers are invented for the test, nothing measured them): regime "seeded",
two windows (tokens 0..63, 64..127), subjects model-f32 and model-bf16, model-bf16 missing in the
second window; regime "long-memory", one window of model-bf16.
"""
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from synthetic import ROOT, SummaryCase, kr, write_report

ENV = {"device": None, "git_commit": "0" * 40, "date": "2026-12-01T00:00:00Z", "command": "klab run gdn-state-drift"}


def rec(regime, subject, window, o, S, lo=0.9, hi=0.999):
    return {"kind": "state_drift", "experiment": "gdn-state-drift", "env": ENV, "regime": regime, "decay": {"lo": lo, "hi": hi},
            "geometry": {"nk": 2, "nv": 6, "dk": 32, "dv": 48}, "subject": subject, "window": window,
            "t_begin": 64 * window, "t_end": 64 * window + 63, "o_max_rel": o, "o_rms_rel": o / 10, "S_max_rel": S,
            "S_rms_rel": S / 10, "o_finite": True, "S_finite": True}


RECS = [rec("seeded", "model-f32", 0, 1.25e-7, 2.5e-7), rec("seeded", "model-bf16", 0, 0.00733, 0.0071),
        rec("seeded", "model-f32", 1, 1.5e-7, 3e-7),
        rec("long-memory", "model-bf16", 0, 0.0116, 0.0127, 0.98, 0.99999)]


class StateDrift(SummaryCase):
    def test_table_per_regime(self):
        md = self.summary(RECS)
        self.assertIn("State drift, regime seeded (exp(g) in [0.9, 0.999)):", md)
        self.assertIn("| tokens | model-f32 o / S | model-bf16 o / S |", md)
        self.assertIn("| 0..63 | 1.25e-07 / 2.5e-07 | 0.00733 / 0.0071 |", md)
        self.assertIn("| 64..127 | 1.5e-07 / 3e-07 | n/a |", md)  # the missing cell says so
        self.assertIn("State drift, regime long-memory (exp(g) in [0.98, 0.99999)):", md)
        self.assertIn("| tokens | model-bf16 o / S |", md)
        self.assertIn("| 0..63 | 0.0116 / 0.0127 |", md)
        self.assertLess(md.index("regime seeded"), md.index("regime long-memory"))
        self.assertNotIn("Records of kinds this summary does not read", md)

    def test_figure_planned_and_drawn(self):
        with tempfile.TemporaryDirectory() as d:
            write_report(d, RECS)
            plan, _ = kr.chart_plan(kr.load(d))
            drift = [(name, kind) for name, kind, e, _ in plan if kind == "state_drift"]
            self.assertEqual(drift, [("gdn-state-drift", "state_drift")])  # one figure: both regimes as panels
            p = subprocess.run([sys.executable, str(ROOT / "scripts/plot.py"), d, "--formats", "png"], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertTrue((Path(d) / "plots" / "gdn-state-drift.png").is_file())

    def test_schema_refuses_a_record_without_its_window_or_errors(self):
        self.assert_each_required(RECS[0], ("regime", "subject", "window", "o_max_rel", "S_max_rel"))


if __name__ == "__main__":
    unittest.main()
