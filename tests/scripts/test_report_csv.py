#!/usr/bin/env python3
"""scripts/report_csv.py: the CSVs of a hand-written report (nested fields, an array, a string that needs
quoting, a number spelt with more digits than Python's shortest form, a record appended after the end),
written out by hand here; klab's own CSVs of a device-free run (KLAB_CLI's error-budget) given back byte
for byte from its report.jsonl, also gzipped; and the refusals (no report, a malformed line, a schema 1
report: exit 2, nothing written).

    KLAB_CLI=build/dev/bin/klab /usr/bin/python3 tests/scripts/test_report_csv.py   (ctest: "scripts-report-csv")
"""
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KLAB = os.environ.get("KLAB_CLI") or str(ROOT / "build" / "dev" / "bin" / "klab")


def run(*args):
    return subprocess.run([sys.executable, str(ROOT / "scripts/report_csv.py")] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=60)


class ReportCsv(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.d = Path(self.dir.name)

    def tearDown(self):
        self.dir.cleanup()

    def test_hand_written_report(self):
        lines = [
            '{"kind":"header","schema_version":2,"env":{"gpu":"X"},"argv":["klab"],"start":"t"}',
            # keys out of order on purpose: klab's CSV takes them in byte order
            '{"variant":"a,b","kind":"measurement","timing":{"samples_ms":[1.0,2.0],"median_ms":49.359564960112976},"n":3,"ok":true}',
            '{"kind":"claim","what":"say \\"x\\"","held":null}',
            '{"kind":"measurement","variant":"c","extra":{"z":1e-05},"n":4,"ok":false}',
            '{"kind":"end","status":"complete","records":3,"counts":{},"start":"t","end":"t"}',
            '{"kind":"profile","env":{"gpu":"X"},"dram":65.7}',
        ]
        (self.d / "report.jsonl").write_text("".join(l + "\n" for l in lines))
        p = run(self.d, "--out", self.d / "out")
        self.assertEqual(p.returncode, 0, p.stderr)
        out = self.d / "out"
        self.assertEqual(sorted(f.name for f in out.iterdir()), ["report-claim.csv", "report-measurement.csv", "report-profile.csv"])
        self.assertEqual((out / "report-measurement.csv").read_text(),
                         "kind,n,ok,timing.median_ms,variant,extra.z\n"
                         "measurement,3,true,49.359564960112976,\"a,b\",\n"
                         "measurement,4,false,,c,1e-05\n")
        self.assertEqual((out / "report-claim.csv").read_text(), 'held,kind,what\nnull,claim,"say ""x"""\n')
        self.assertEqual((out / "report-profile.csv").read_text(), "dram,env.gpu,kind\n65.7,X,profile\n")

    @unittest.skipUnless(Path(KLAB).is_file(), f"no klab binary at {KLAB} (set KLAB_CLI)")
    def test_klab_csvs_given_back(self):
        rep = self.d / "run"
        k = subprocess.run([KLAB, "run", "error-budget", "--quick", "--out", str(rep)], capture_output=True, text=True, timeout=300)
        self.assertEqual(k.returncode, 0, k.stderr)
        written = sorted(rep.glob("report-*.csv"))
        self.assertGreaterEqual(len(written), 2)  # measurements or error records, and claims
        # gzipped, as committed runs keep it, and the CSVs gone
        kept = self.d / "kept"
        kept.mkdir()
        with open(rep / "report.jsonl", "rb") as f, gzip.open(kept / "report.jsonl.gz", "wb") as z:
            shutil.copyfileobj(f, z)
        p = run(kept)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(sorted(f.name for f in kept.glob("report-*.csv")), [f.name for f in written])
        for f in written:
            self.assertEqual((kept / f.name).read_bytes(), f.read_bytes(), f.name)

    def test_refusals(self):
        out = self.d / "out"
        p = run(self.d / "nothing", "--out", out)
        self.assertEqual(p.returncode, 2)
        self.assertIn("no such report", p.stderr)
        bad = self.d / "bad"
        bad.mkdir()
        (bad / "report.jsonl").write_text('{"kind":"header","schema_version":2}\n{"kind": "measurement", \n')
        p = run(bad, "--out", out)
        self.assertEqual(p.returncode, 2)
        self.assertIn("report.jsonl:2: malformed JSON", p.stderr)
        old = self.d / "old"
        old.mkdir()
        (old / "report.jsonl").write_text(json.dumps({"kind": "measurement", "env": {}}) + "\n")
        p = run(old, "--out", out)
        self.assertEqual(p.returncode, 2)
        self.assertIn("schema 1", p.stderr)
        self.assertFalse(out.exists())


if __name__ == "__main__":
    unittest.main()
