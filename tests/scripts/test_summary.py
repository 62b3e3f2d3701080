#!/usr/bin/env python3
"""scripts/summarize.py's reading aids: the contents line, the claims overview first (not held, then
not evaluated, then held, each linking to its experiment's section), and each claim's evidence as
sub-bullets. The report is built here; expectations are worked out by hand.

    /usr/bin/python3 tests/scripts/test_summary.py      (ctest: the "scripts-summary" test)
"""
import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import summarize  # noqa: E402

ENV = {"device": None, "git_commit": "0" * 40, "date": "2026-12-01T00:00:00Z", "command": "klab run"}


def claim(e, i, state, text, evidence=""):
    return {"kind": "claim", "experiment": e, "index": i, "id": f"c{i}", "text": text, "state": state,
            "evidence": evidence, "env": ENV}


class Summary(unittest.TestCase):
    def summary(self, records):
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "report.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
            p = subprocess.run([sys.executable, str(ROOT / "scripts/summarize.py"), d], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            return (Path(d) / "summary.md").read_text()

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


if __name__ == "__main__":
    unittest.main()
