"""What the script tests of scripts/summarize.py share: a synthetic report (records built by the test,
nothing measured) written to a temporary directory, and the summary the script itself writes of it."""
import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import klab_report as kr  # noqa: E402


def write_report(d, records):
    """d/report.jsonl holding `records`, one JSON object a line."""
    (Path(d) / "report.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


class SummaryCase(unittest.TestCase):
    def write(self, d, records):
        write_report(d, records)

    def summary(self, records):
        """summary.md as `scripts/summarize.py DIR` writes it for a report of `records` (exit 0 asserted)."""
        with tempfile.TemporaryDirectory() as d:
            write_report(d, records)
            p = subprocess.run([sys.executable, str(ROOT / "scripts/summarize.py"), d], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            return (Path(d) / "summary.md").read_text()

    def assert_refused(self, record, needle):
        """klab_report.load refuses a report of `record` alone, naming `needle`."""
        with tempfile.TemporaryDirectory() as d:
            write_report(d, [record])
            with self.assertRaises(kr.ReportError) as cm:
                kr.load(d)
            self.assertIn(needle, str(cm.exception))

    def assert_each_required(self, record, fields):
        """Each of `fields` is required: the record without it is refused, naming it."""
        for field in fields:
            bad = dict(record)
            del bad[field]
            self.assert_refused(bad, field)
