#!/usr/bin/env python3
"""scripts/probe_table.py: tables from probe lines built by the test with known values (a ring-read line and a
rec-stamps line), in file order, and the refusals: an unreadable file, a line that is not JSON, an unknown probe,
a line lacking a field (exit 2, nothing written to --out).

    /usr/bin/python3 tests/scripts/test_probe_table.py     (ctest: the "scripts-probe-table" test)
"""
import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

RING = {"probe": "ring-read", "device": "GPU X", "shape": "64x5120", "ring_read_us": 5.0, "ring_read_us_p10": 4.5,
        "ring_read_us_p90": 5.5, "read_us": 4.0}
REC = {"probe": "rec-stamps", "device": "GPU X", "cols": 32, "rows": 8, "pdl": "next", "batch": 1, "period_ns": 3584.0,
       "hop_ns": 512.0, "after_release_ns": 3072.0, "entry_ahead_ns": 6656.0, "timer_step_ns": 32,
       "block_phase_ns": {"inputs_pass1": 1280.0, "kv_pass2_stores": 512.0, "o_exit": 256.0}}
HOP_IDLE = {"probe": "hop-under-load", "device": "GPU X", "background": "none", "bg_loads": 0, "bg_blocks_per_sm": 0,
            "bg_inflight_kb_per_sm": 0.0, "bg_gbps": 0.0, "bg_gbps_with": 0.0, "hop_one_us": 0.731, "hop_grid_us": 0.829,
            "chase_ns": 140.5}
Q4 = {"probe": "q4-stamps", "device": "GPU X", "shape": "6144x5120", "grid": "fill", "depth": 2, "prepared": False, "bytes": 17694720,
      "blocks": 264, "launches": 64, "copies": 64, "period_ns": 7040.0, "hop_ns": 2560.0, "after_release_ns": 4480.0,
      "release_spread_ns": 320.0, "entry_ahead_ns": 1024.0, "timer_step_ns": 32,
      "block_phase_ns": {"request": 64.0, "wait": 2048.0, "x": 416.0, "first_bytes": 96.0, "first_group": 512.0, "rest": 1920.0,
                         "last_group_exit": 608.0},
      "bytes_wait_ns": 1344.0, "bytes_wait_share": 0.3125, "period_gbps": 2513.45}
CLUSTER = {"probe": "cluster-entry", "device": "GPU X", "cluster": 5, "pdl": True, "smem_kb": 80, "per_sm": 1, "grid": 130,
           "launches": 299, "period_us": 5.12, "entry_gap_us": -4.864, "pre_us": 2.0, "post_us": 3.0, "form": "5,on,80,1"}
HOP_BUSY = dict(HOP_IDLE, background="8 loads x 4 blocks", bg_loads=8, bg_blocks_per_sm=4, bg_inflight_kb_per_sm=128.0,
                bg_gbps=3122.4, bg_gbps_with=3171.6, hop_one_us=4.791, hop_grid_us=13.288, chase_ns=1005.25)


def run(*args):
    return subprocess.run([sys.executable, str(ROOT / "scripts/probe_table.py")] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=60)


class ProbeTable(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.d = Path(self.dir.name)

    def tearDown(self):
        self.dir.cleanup()

    def write(self, *lines):
        f = self.d / "p.jsonl"
        f.write_text("".join(l + "\n" for l in lines))
        return f

    def test_tables_from_known_lines(self):
        second = dict(RING, shape="128x5120", ring_read_us=8.0, read_us=6.0)
        p = run(self.write(json.dumps(RING), json.dumps(REC), json.dumps(second)))
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        self.assertIn("## ring-read (GPU X)", lines)
        self.assertIn("| 64x5120 | 5.00 | 4.50..5.50 | 4.00 | 80.0% |", lines)  # 4.0 / 5.0
        self.assertIn("| 128x5120 | 8.00 | 4.50..5.50 | 6.00 | 75.0% |", lines)
        self.assertLess(lines.index("| 64x5120 | 5.00 | 4.50..5.50 | 4.00 | 80.0% |"), lines.index("| 128x5120 | 8.00 | 4.50..5.50 | 6.00 | 75.0% |"))
        self.assertIn("| cols=32,rows=8,pdl=next | 1 | 3.58 | 0.51 | 3.07 | 1.28 | 0.51 | 0.26 | 6.66 | 32 |", lines)

    def test_hop_table(self):
        p = run(self.write(json.dumps(HOP_IDLE), json.dumps(HOP_BUSY)))
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        self.assertIn("## hop-under-load (GPU X)", lines)
        self.assertIn("| none | 0 | - | - | 0.73 | 0.83 | 140 |", lines)  # 140.5 rounds to even
        self.assertIn("| 8 loads x 4 blocks | 128 | 3122 | 3172 | 4.79 | 13.29 | 1005 |", lines)
        self.assertLess(lines.index("| none | 0 | - | - | 0.73 | 0.83 | 140 |"), lines.index("| 8 loads x 4 blocks | 128 | 3122 | 3172 | 4.79 | 13.29 | 1005 |"))

    def test_q4_table(self):
        prepared = dict(Q4, depth=0, prepared=True, period_ns=5504.0, period_gbps=3214.9)
        groups = {k: v for k, v in Q4.items() if k not in ("bytes_wait_ns", "bytes_wait_share")}
        groups.update(grid="groups", depth=0, blocks=768, block_phase_ns={"request": 32.0, "wait": 1000.0, "x": 448.0, "bytes": 0.0,
                                                                          "dots": 704.0, "barrier": 160.0, "store_exit": 96.0})
        paced = dict(Q4, grid="paced", depth=0, bytes_wait_ns=2048.0, bytes_wait_share=0.5)  # the ring's points and waits
        p = run(self.write(json.dumps(Q4), json.dumps(prepared), json.dumps(groups), json.dumps(paced)))
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        self.assertIn("## q4-stamps (GPU X)", lines)
        first = "| ring, depth=2, prep launch | 6144x5120 | 7.04 | 2513 | 2.56 | 4.48 | 0.42 | 0.10 | 0.51 | 1.92 | 0.61 | 1.34 | 31% |"
        second = "| ring, prepared x | 6144x5120 | 5.50 | 3215 | 2.56 | 4.48 | 0.42 | 0.10 | 0.51 | 1.92 | 0.61 | 1.34 | 31% |"
        third = "| grid=groups, prep launch | 6144x5120 | 7.04 | 2513 | 2.56 | 4.48 | 0.45 | 0.00 | 0.70 | 0.16 | 0.10 | - | - |"
        fourth = "| pace=1,xprep=warps, prep launch | 6144x5120 | 7.04 | 2513 | 2.56 | 4.48 | 0.42 | 0.10 | 0.51 | 1.92 | 0.61 | 2.05 | 50% |"
        for line in (first, second, third, fourth):
            self.assertIn(line, lines)
        self.assertLess(lines.index(first), lines.index(second))
        self.assertLess(lines.index(second), lines.index(third))
        self.assertLess(lines.index(third), lines.index(fourth))

    def test_split_k_table(self):
        kc = dict(Q4, grid="split-k1", depth=0, prepared=False, bytes_wait_ns=512.0, bytes_wait_share=0.125,
                  block_phase_ns={"request": 64.0, "wait": 2048.0, "x": 1024.0, "started": 256.0, "first_bytes": 128.0, "tiles": 1536.0,
                                  "fold_exit": 768.0})
        p = run(self.write(json.dumps(kc), json.dumps(Q4)))
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        self.assertIn("## q4-stamps-split-k (GPU X)", lines)
        self.assertIn("## q4-stamps (GPU X)", lines)  # the ring's line keeps its own table
        row = "| split-k, per-sm=1 (116), x in the launch | 6144x5120 | 7.04 | 2513 | 2.56 | 4.48 | 1.02 | 0.26 | 0.13 | 1.54 | 0.77 | 0.51 | 12% |"
        self.assertIn(row, lines)
        self.assertLess(lines.index("## q4-stamps (GPU X)"), lines.index(row))  # the kinds' tables in their fixed order

    def test_cluster_table(self):
        none_off = dict(CLUSTER, cluster=0, pdl=False, smem_kb=0, per_sm=2, grid=264, period_us=7.168, entry_gap_us=1.792, resident_blocks=2112)
        p = run(self.write(json.dumps(CLUSTER), json.dumps(none_off)))
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        self.assertIn("## cluster-entry (GPU X)", lines)
        first, second = "| 5 | on | 80 | 1 | 130 | - | 5.12 | -4.86 |", "| none | off | 0 | 2 | 264 | 2112 | 7.17 | 1.79 |"
        self.assertIn(first, lines)
        self.assertIn(second, lines)
        self.assertLess(lines.index(first), lines.index(second))

    def test_out_file(self):
        out = self.d / "t.md"
        p = run(self.write(json.dumps(REC)), "--out", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, "")
        self.assertIn("## rec-stamps (GPU X)", out.read_text())
        self.assertNotIn("ring-read", out.read_text())

    def test_refusals_write_nothing(self):
        out = self.d / "t.md"
        cases = [(lambda: self.d / "missing.jsonl", "cannot read"),
                 (lambda: self.write(json.dumps(RING), "{not json"), ":2: not JSON"),
                 (lambda: self.write(json.dumps({"probe": "other"})), "'other' is none of ring-read, rec-stamps"),
                 (lambda: self.write(json.dumps({k: v for k, v in REC.items() if k != "hop_ns"})), "lacks what its table needs")]
        for make, says in cases:
            with self.subTest(says=says):
                p = run(make(), "--out", out)
                self.assertEqual(p.returncode, 2)
                self.assertIn(says, p.stderr)
                self.assertFalse(out.exists())


if __name__ == "__main__":
    unittest.main()
