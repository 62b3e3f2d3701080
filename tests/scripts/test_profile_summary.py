#!/usr/bin/env python3
"""scripts/summarize.py's Nsight Compute table (kind profile, written by scripts/profile_ncu.py) and
klab_report.py's check of profile records (reports/SCHEMA.md), on a synthetic report built here. The
numbers are invented for the test (no GPU measured them); the expected cells are worked out by hand.

    /usr/bin/python3 tests/scripts/test_profile_summary.py      (ctest: the "scripts-profile-summary" test)

The synthetic run: variant v on 6144x5120/uniform timed at 6.8 us (stream), profiled with two kernels
(prep 3200 ns, main 8100 ns); variant w profiled but never timed (its time cell must say n/a).
"""
import unittest

from synthetic import SummaryCase

ENV = {"device": None, "git_commit": "0" * 40, "date": "2026-12-04T00:00:00Z", "command": "klab run e"}
V = "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=launch,pdl=on,rows=8"
W = "q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=producer,pdl=on,rows=8"

MEAS = {"kind": "measurement", "experiment": "e", "op": "q4_gemv", "variant": V, "shape": "6144x5120", "dist": "uniform",
        "env": ENV, "verified": True, "accuracy": {"max_rel": 1e-7},
        "timing": {"median_ms": 0.0068, "min_ms": 0.0067, "max_ms": 0.0069, "mode": "stream"}}


def profile(variant, **extra):
    r = {"kind": "profile", "experiment": "e", "variant": variant, "shape": "6144x5120", "dist": "uniform", "seed": 1,
         "tool": "ncu --clock-control none, one launch after two warm-ups", "env": ENV,
         "kernel": "void unnamed>::packed_xl_kernel<2, 8>(const unsigned char *)",
         "kernels": [{"name": "void unnamed>::xprep_kernel<2, 0, 0>(const float *)", "duration_ns": 3200.0},
                     {"name": "void unnamed>::packed_xl_kernel<2, 8>(const unsigned char *)", "duration_ns": 8100.0}],
         "duration_ns": 11300.0, "dram_pct": 45.38, "occupancy_pct": 41.93, "registers": 64.0, "issue_pct": 17.61,
         "top_stalls": [["long_scoreboard", 26.2], ["short_scoreboard", 2.38]], "sass_thread_inst_per_mac": 1.0307}
    r.update(extra)
    return r


class ProfileSummary(SummaryCase):
    def test_reading_beside_its_time(self):
        md = self.summary([MEAS, profile(V), profile(W, kernels=[], sass_thread_inst_per_mac=None)])
        self.assertIn("| variant | problem | timed median us | kernels under ncu (us) | DRAM % of peak | occupancy % | registers | issue % | "
                      "top stalls (cycles per issue) | SASS thread instructions per MAC |", md)
        self.assertIn(f"| {V} | 6144x5120/uniform | 6.8 (stream) | xprep_kernel<2, 0, 0> 3.2; packed_xl_kernel<2, 8> 8.1 | 45.4 | 41.9 | 64 | "
                      "17.6 | long_scoreboard 26.2, short_scoreboard 2.4 | 1.03 |", md)
        self.assertIn(f"| {W} | 6144x5120/uniform | n/a | n/a | 45.4 | 41.9 | 64 | 17.6 | long_scoreboard 26.2, short_scoreboard 2.4 | n/a |", md)
        self.assertNotIn("Records of kinds this summary does not read", md)

    def test_no_profile_no_table(self):
        self.assertNotIn("Nsight Compute", self.summary([MEAS]))

    def test_schema_refuses_a_record_without_what_it_profiled(self):
        self.assert_each_required(profile(V), ("experiment", "variant", "shape", "dist"))
        self.assert_refused(profile(V, top_stalls="long_scoreboard"), "top_stalls")
        self.assert_refused(profile(V, dram_pct="45%"), "dram_pct")


if __name__ == "__main__":
    unittest.main()
