#!/usr/bin/env python3
"""scripts/summarize.py's reading aids: the contents line, the claims overview first (not held, then
not evaluated, then held, each linking to its experiment's section), and each claim's evidence as
sub-bullets. The report is built here; expectations are worked out by hand.

    /usr/bin/python3 tests/scripts/test_summary.py      (ctest: the "scripts-summary" test)
"""
import sys
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import summarize  # noqa: E402
from synthetic import SummaryCase  # noqa: E402

ENV = {"device": None, "git_commit": "0" * 40, "date": "2026-12-01T00:00:00Z", "command": "klab run"}


def claim(e, i, state, text, evidence=""):
    return {"kind": "claim", "experiment": e, "index": i, "id": f"c{i}", "text": text, "state": state,
            "evidence": evidence, "env": ENV}


class Summary(SummaryCase):
    def test_anchors_as_github_makes_them(self):
        self.assertEqual(summarize.anchor("f32-gemv-vs-cublas"), "#f32-gemv-vs-cublas")
        # ':' and '/' dropped, as GitHub does: "ab:64x96/uniform" -> "ab64x96uniform".
        self.assertEqual(summarize.anchor("ab:64x96/uniform"), "#ab64x96uniform")
        self.assertEqual(summarize.anchor("Claims"), "#claims")

    def test_contents_overview_and_evidence(self):
        md = self.summary([
            claim("e1", 0, "held", "A is exact", "64x64: 0 differ; 128x64: 0 differ"),
            claim("e1", 1, "not_held", "B is faster", "64x64: x0.9"),
            claim("e2", 0, "not_evaluated", "C reaches 90%"),
        ])
        self.assertIn("Contents: [environment](#environment), [claims](#claims); experiments: [e1](#e1), [e2](#e2)", md)
        # Counts, then not held before not evaluated before held.
        self.assertIn("1 held, 1 not held, 1 not evaluated (of 3)", md)
        rows = [l for l in md.splitlines() if l.startswith("| ") and "](#e" in l]
        self.assertEqual(rows, ["| **NOT HELD** | [e1](#e1) | B is faster |",
                                "| not evaluated | [e2](#e2) | C reaches 90% |",
                                "| **held** | [e1](#e1) | A is exact |"])
        # The overview comes before the first experiment's section.
        self.assertLess(md.index("## Claims"), md.index("## e1"))
        # Evidence split at '; ' into sub-bullets under its claim.
        self.assertIn("1. **held**: A is exact\n   - 64x64: 0 differ\n   - 128x64: 0 differ\n", md)
        self.assertIn("2. **NOT HELD**: B is faster\n   - 64x64: x0.9\n", md)

    def test_no_claims_no_overview(self):
        md = self.summary([{"kind": "skip", "experiment": "e", "what": "w", "reason": "r", "env": ENV}])
        self.assertNotIn("## Claims", md)
        self.assertNotIn("[claims](#claims)", md)

    def test_variant_x_shape_table_first(self):
        def m(v, shape, ms=None, a="q4_gemv/a", **extra):
            r = {"kind": "measurement", "experiment": "e", "op": "q4_gemv", "variant": v, "shape": shape, "dist": "uniform",
                 "a": a, "env": ENV, "verified": True, "accuracy": {"max_rel": 1e-7}}
            if ms is not None:
                r["timing"] = {"median_ms": ms, "min_ms": ms, "max_ms": ms, "mode": "stream"}
            r.update(extra)
            return r
        md = self.summary([
            claim("e", 0, "held", "B is faster", "64x64: x1.25"),
            m("q4_gemv/a", "64x64", 0.02, pct_ceiling=40.0),
            m("q4_gemv/b", "64x64", 0.016, pct_ceiling=50.0,
              # the time ratio B/A 0.016/0.02 = 0.8, its interval 0.78..0.82: the speed-up's is
              # 1/0.82 = 1.2195..1/0.78 = 1.2821 -> x1.220..x1.282.
              vs_a={"ratio": 0.8, "ci95_lo": 0.78, "ci95_hi": 0.82, "speedup": 1.25, "verdict": "faster"}),
            m("q4_gemv/a", "128x64", 0.04, pct_ceiling=40.0),
            m("q4_gemv/b", "128x64", None, verified=False),
            m("q4_gemv/c", "128x64", 0.05, pct_ceiling=32.0, peer=True,
              vs_a={"ratio": 1.25, "ci95_lo": 1.24, "ci95_hi": 1.26, "speedup": 0.8, "verdict": "slower"}),
        ])
        section = md[md.index("## e"):]
        # The first table of the experiment: the fastest per shape. At 64x64 b (0.016 ms) over a (0.02), no peer; at 128x64
        # a (0.04 ms: b failed verification and was not timed), the peer c 0.05 ms: ours over it 0.05 / 0.04 = x1.25.
        tables = [l for l in section.splitlines() if l.startswith("| ") and not l.startswith("| ---")]
        self.assertEqual(tables[0], "| shape | fastest of ours | fastest peer | ours over the peer |")
        self.assertIn("q4_gemv fastest per shape, uniform inputs, stream timing:", section)
        self.assertEqual(tables[1], "| 64x64 | q4_gemv/b<br>0.016 ms, 50% of ceiling |  |  |")
        self.assertEqual(tables[2], "| 128x64 | q4_gemv/a<br>0.04 ms, 40% of ceiling | q4_gemv/c<br>0.05 ms, 32% of ceiling | x1.25 |")
        # Then rows variants, columns shapes.
        self.assertEqual(tables[3], "| variant | 64x64 | 128x64 |")
        self.assertLess(section.index("fastest per shape"), section.index("variant x shape"))
        self.assertIn("q4_gemv variant x shape, uniform inputs, stream timing:", section)
        self.assertIn("| q4_gemv/a (A) | 0.02 ms<br>40% of ceiling<br>A | 0.04 ms<br>40% of ceiling<br>A |", section)
        self.assertIn("| q4_gemv/b | 0.016 ms<br>50% of ceiling<br>faster x1.250 (speed-up 95% CI x1.220..x1.282) | "
                      "not timed (failed verification) |", section)
        # 1/1.26 = 0.7937, 1/1.24 = 0.8065; the peer has no 64x64 cell.
        self.assertIn("| q4_gemv/c (peer) |  | 0.05 ms<br>32% of ceiling<br>slower x0.800 (speed-up 95% CI x0.794..x0.806) |", section)
        # The per-problem tables stay, below it.
        self.assertLess(section.index("| variant | 64x64 |"), section.index("Per problem, in detail:"))
        self.assertIn("q4_gemv 128x64, uniform inputs", section)
        # Evidence quoting a time ratio's interval beside a speed-up gets the speed-up's.
        md = self.summary([claim("e", 0, "not_held", "B is faster", "64x64: B x0.983 (95% CI of time ratio 1.017..1.018, slower)")])
        self.assertIn("   - 64x64: B x0.983 (speed-up 95% CI x0.982..x0.983, slower)\n", md)

    def test_no_variant_x_shape_table_for_ops_without_a_shape(self):
        r = {"kind": "measurement", "experiment": "g", "op": "gdn_step", "variant": "gdn_step/tier=f32", "dist": "uniform",
             "problem": "tokens=4", "params": {"tokens": 4}, "env": ENV, "verified": True,
             "timing": {"median_ms": 1.0, "min_ms": 1.0, "max_ms": 1.0}}
        self.assertNotIn("variant x shape", self.summary([r]))


if __name__ == "__main__":
    unittest.main()
