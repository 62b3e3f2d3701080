#!/usr/bin/env python3
"""scripts/kernel_trace.py: the reading of a trace (counts, medians, periods, gaps) from spans written by
the test into a measurement record taken from a committed report, the --match and --spans options,
and the refusals: no trace (exit 1), an unreadable report (exit 2); a gzipped report (report.jsonl.gz) reads the same.

    /usr/bin/python3 tests/scripts/test_kernel_trace.py     (ctest: the "scripts-kernel-trace" test)
"""
import gzip
import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "reports/h200/run-7a808bf/report.jsonl.gz"


def a_measurement():
    """The first race measurement of a committed report that has a stream mode."""
    with gzip.open(SOURCE, "rt", encoding="utf-8") as z:
        text = z.read()
    for line in text.splitlines():
        r = json.loads(line)
        if r.get("kind") == "measurement" and isinstance(r.get("modes"), dict) and "stream" in r["modes"]:
            return r
    raise AssertionError(f"{SOURCE}: no measurement with a stream mode")


def run(*args):
    return subprocess.run([sys.executable, str(ROOT / "scripts/kernel_trace.py")] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=60)


class TraceScript(unittest.TestCase):
    def write(self, d, records):
        (Path(d) / "report.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))

    def traced(self):
        r = a_measurement()
        # prep 1 us then main 4.3 us, one pair every 5 us; main starts 0.5 us before prep ends.
        spans = []
        for i in range(4):
            t = 5.0 * i
            spans += [[0, t, t + 1.0], [1, t + 0.5, t + 4.8]]
        r["modes"]["stream"]["timing"]["launches"] = 8
        r["modes"]["stream"]["timing"]["trace"] = {"kernels": 8, "span_names": ["prep", "main"], "spans": spans}
        return r

    def test_reading(self):
        with tempfile.TemporaryDirectory() as d:
            self.write(d, [self.traced()])
            p = run(d, "--spans", "3")
            self.assertEqual(p.returncode, 0, p.stderr)
            out = p.stdout
            self.assertIn("8 kernels over 19.80 us (2.475 us per launch of 8", out)
            self.assertIn("| prep | 4 | 1.000 | 5.000 |", out)
            self.assertIn("| main | 4 | 4.300 | 5.000 |", out)
            # gap: this start - the one before's end; end after end: this end - the one before's end
            self.assertIn("| prep -> main | 4 | -0.500 | 3.800 |", out)
            self.assertIn("| main -> prep | 3 | 0.200 | 1.200 |", out)
            # the cycle: prep -> main (4 pairs) and main -> prep (3, once less): 3.8 + 1.2 us, the 5 us period
            self.assertIn("The chain's cycle: 5.000 us (prep -> main 3.800, main -> prep 1.200)", out)
            # the first three kernels, with the gap to the one before
            self.assertIn("| 0 | prep | 0.000 | 1.000 | 1.000 |  |", out)
            self.assertIn("| 1 | main | 0.500 | 4.800 | 4.300 | -0.500 |", out)
            self.assertIn("| 2 | prep | 5.000 | 6.000 | 1.000 | 0.200 |", out)
            self.assertNotIn("\n| 3 | ", out)
            self.assertIn(" stream", out.splitlines()[0])

    def test_summary_table(self):
        """summarize.py gives a traced record one row: its span per launch beside its timed median, its kernels."""
        with tempfile.TemporaryDirectory() as d:
            r = self.traced()
            self.write(d, [r])
            p = subprocess.run([sys.executable, str(ROOT / "scripts/summarize.py"), d, "--out", "-"], capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            med = r["modes"]["stream"]["timing"]["median_ms"] * 1e3
            # 19.8 us over 8 launches; main 4 x 4.3 us (17.2 us in all) before prep 4 x 1 us
            # the chain: main ends 3.8 us after prep (4 pairs), prep 1.2 us after main (3 pairs)
            self.assertIn(f"| 8 | 2.475 | {med:.4g} | main 4 x 4.3 us, every 5; prep 4 x 1 us, every 5 | main +3.8 after prep; prep +1.2 after main |",
                          p.stdout)
            self.assertIn("Kernel traces", p.stdout)

    def test_layers_in_the_label_and_a_longer_cycle(self):
        """A gdn-stack-layers record names its layer count; its chain of three kernels a layer sums to a layer's time."""
        env = {"device": None, "git_commit": "0" * 40, "date": "2026-12-06T00:00:00Z", "command": "klab run gdn-stack-layers"}
        spans = []
        for i in range(3):  # a: 1 us, b ends 2 us after a, c 3 us after b; a layer every 6 us
            t = 6.0 * i
            spans += [[0, t, t + 1.0], [1, t + 0.5, t + 3.0], [2, t + 2.0, t + 6.0]]
        r = {"kind": "gdn_stack_layers", "experiment": "gdn-stack-layers", "env": env, "tier": "q4-fast", "layers": 8, "timed": True,
             "graph_nodes": 48, "kernel_nodes": 48, "out_finite": True, "out_max_abs": 1.0,
             "bitwise": {"out_differ": 0, "S_differ": 0, "hist_differ": 0, "compared": 10},
             "timing": {"mode": "launch", "launches": 1, "median_ms": 0.018,
                        "trace": {"kernels": 9, "span_names": ["a", "b", "c"], "spans": spans}}}
        with tempfile.TemporaryDirectory() as d:
            self.write(d, [r])
            p = run(d, "--match", "layers=8")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("## gdn-stack-layers q4-fast layers=8 timing", p.stdout)
            # a -> b 3 times (2 us), b -> c 3 times (3 us), c -> a twice (1 us): 6 us a cycle
            self.assertIn("The chain's cycle: 6.000 us (a -> b 2.000, b -> c 3.000, c -> a 1.000)", p.stdout)

    def test_gzipped_report(self):
        """A committed report kept as report.jsonl.gz reads as the plain one; a cut gzip file is refused."""
        with tempfile.TemporaryDirectory() as d:
            self.write(d, [self.traced()])
            plain = run(d).stdout
            raw = (Path(d) / "report.jsonl").read_bytes()
            (Path(d) / "report.jsonl").unlink()
            (Path(d) / "report.jsonl.gz").write_bytes(gzip.compress(raw))
            p = run(d)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(p.stdout, plain)
            (Path(d) / "report.jsonl.gz").write_bytes(gzip.compress(raw)[:-20])
            p = run(d)
            self.assertEqual(p.returncode, 2)
            self.assertIn("not a whole gzip file", p.stderr)

    def test_match_and_refusals(self):
        with tempfile.TemporaryDirectory() as d:
            plain = a_measurement()
            self.write(d, [plain, self.traced()])
            self.assertEqual(run(d, "--match", "stream").returncode, 0)
            p = run(d, "--match", "no-such-variant")
            self.assertEqual(p.returncode, 1)
            self.assertIn("no kernel trace matching 'no-such-variant'", p.stderr)
            self.write(d, [plain])
            p = run(d)
            self.assertEqual(p.returncode, 1)
            self.assertIn("klab run --trace", p.stderr)
            (Path(d) / "report.jsonl").write_text("{not json\n")
            p = run(d)
            self.assertEqual(p.returncode, 2)
            self.assertIn("malformed JSON", p.stderr)
            self.assertEqual(run(d, "--spans", "-1").returncode, 2)


if __name__ == "__main__":
    unittest.main()
