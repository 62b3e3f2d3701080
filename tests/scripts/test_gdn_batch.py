#!/usr/bin/env python3
"""scripts/summarize.py's gdn-batch table and klab_report.py's check of gdn_batch records
(reports/SCHEMA.md), on a synthetic report built here. Expected cells are worked out by hand below,
not read from the scripts.

    /usr/bin/python3 tests/scripts/test_gdn_batch.py      (ctest: the "scripts-gdn-batch" test)

The synthetic run (the numbers are invented for the test, no GPU measured them; 3 layers rotating):
  B = 1:  batched 50 us (CI 49..51), singles 48 us (CI 47..49), 50 us per slot, x0.96 slower, bitwise equal
  B = 32: batched 400 us (CI 390..410), singles 1600 us (CI 1590..1610), 12.5 us per slot, x4 faster,
          2 elements of S differ of 1000
"""
import unittest

from synthetic import SummaryCase

ENV = {"device": None, "git_commit": "0" * 40, "date": "2026-12-01T00:00:00Z", "command": "klab run gdn-batch"}


def us(median, lo, hi):
    return {"median": median, "ci95_lo": lo, "ci95_hi": hi, "min": lo - 1, "max": hi + 1}


def rec(B, batch, singles, per_slot, vs, S_differ=0):
    return {"kind": "gdn_batch", "experiment": "gdn-batch", "env": ENV, "B": B, "layers": 3,
            "geometry": {"str": "hidden=5120 nk=16 nv=48 dk=128 dv=128 ck=4"},
            "batch_gemm": "q4_gemm/map=packed,dot=q8-dp4a,grid=groups,cols=8,rows=8",
            "bitwise": {"out_differ": 0, "S_differ": S_differ, "hist_differ": 0, "compared": 1000, "tokens": 4},
            "batch_us_per_token": batch, "singles_us_per_token": singles, "us_per_slot": per_slot,
            "batch_vs_singles": vs, "timing": {"mode": "stream", "flush": "read", "median_ms": batch["median"] / 1e3}}


B1 = rec(1, us(50, 49, 51), us(48, 47, 49), 50.0, {"ratio": 1.0417, "ci95_lo": 1.03, "ci95_hi": 1.05, "speedup": 0.96, "verdict": "slower"})
B32 = rec(32, us(400, 390, 410), us(1600, 1590, 1610), 12.5, {"ratio": 0.25, "ci95_lo": 0.24, "ci95_hi": 0.26, "speedup": 4.0, "verdict": "faster"},
          S_differ=2)


class GdnBatch(SummaryCase):
    def test_table_rows(self):
        md = self.summary([B32, B1])  # rows come out in B order
        self.assertIn("GDN batched slots (hidden=5120 nk=16 nv=48 dk=128 dv=128 ck=4, 3 layers rotating, "
                      "q4_gemm/map=packed,dot=q8-dp4a,grid=groups,cols=8,rows=8)", md)
        self.assertIn("| B | batched us per token (95% CI) | singles us per token (95% CI) | us per slot | speed-up | slots vs their single steps |", md)
        self.assertIn("| 1 | 50 (49..51) | 48 (47..49) | 50 | x0.96, slower | bitwise equal |", md)
        self.assertIn("| 32 | 400 (390..410) | 1600 (1590..1610) | 12.5 | x4, faster | 2 of 1000 differ |", md)
        self.assertLess(md.index("| 1 | 50"), md.index("| 32 | 400"))
        self.assertNotIn("Records of kinds this summary does not read", md)

    def test_schema_refuses_a_record_without_its_check_or_times(self):
        self.assert_each_required(B1, ("bitwise", "B", "batch_us_per_token", "singles_us_per_token"))
        self.assert_refused(dict(B1, batch_us_per_token={"median": 50.0}), "ci95_lo")  # an interval is part of the time


if __name__ == "__main__":
    unittest.main()
