#!/usr/bin/env python3
"""Reports that survive (issue 12, part 2; reports/SCHEMA.md, schema 2): the klab just built
(KLAB_CLI) runs CPU-only work (error-budget, and device experiments that skip without a GPU), and a
test hook (KLAB_TEST_STALL_AFTER_RECORDS=N: pause after the N-th record, saying so on stderr) holds
it mid-run while the test kills or interrupts it. Then: the file is JSON lines with the header
first; SIGKILL leaves no closing record, SIGINT and SIGTERM an "interrupted" one (exit 130, 143);
a failure (KLAB_TEST_FAIL_AFTER_RECORDS) a "failed" one; and scripts/klab_report.py,
summarize.py and compare.py say the report is incomplete. Bad options leave no report at all (and
do not touch the one already in --out). A schema-1 report still reads as before.

    KLAB_CLI=build/dev/bin/klab /usr/bin/python3 tests/scripts/test_report_survival.py
    (ctest: the "report-survival" test)
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SCRIPTS = ROOT / "scripts"
KLAB = os.environ.get("KLAB_CLI") or str(ROOT / "build" / "dev" / "bin" / "klab")
# Device experiments skip without a GPU (one skip record and their claims each); error-budget runs
# on the CPU. With a GPU this would be a real run: the tests hold it after a few records anyway.
EXPERIMENTS = ["f32-gemv-vs-cublas", "seed-ladder", "error-budget"]
STALL_AT = 3


def script(name, *args):
    return subprocess.run([sys.executable, str(SCRIPTS / name)] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=300)


def lines_of(d):
    """Every line of DIR/report.jsonl, parsed (each must be JSON)."""
    return [json.loads(l) for l in (d / "report.jsonl").read_text(encoding="utf-8").splitlines() if l.strip()]


class Survival(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="klab-survival-"))
        self.out = self.tmp / "run"

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start(self, hook="KLAB_TEST_STALL_AFTER_RECORDS", n=STALL_AT, args=()):
        env = dict(os.environ, **{hook: str(n)})
        return subprocess.Popen([KLAB, "run", *EXPERIMENTS, "--quick", "--out", str(self.out), *args], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def stall(self, p):
        """Reads stderr up to the hook's line: the run has written STALL_AT records and waits."""
        seen = []
        for line in p.stderr:
            seen.append(line)
            if f"test hook: stalling after record {STALL_AT}" in line:
                return
        p.wait(timeout=30)
        self.fail("the run ended without reaching the stall hook:\n" + "".join(seen))

    def assertHeader(self, recs):
        h = recs[0]
        self.assertEqual(h["kind"], "header")
        self.assertEqual(h["schema_version"], 2)
        self.assertIsInstance(h["env"], dict)
        self.assertIn("git_commit", h["env"])
        self.assertEqual(h["argv"][1:3], ["run", EXPERIMENTS[0]])
        self.assertIsInstance(h["start"], str)
        self.assertEqual([r for r in recs if r["kind"] == "header"], [h], "one header")
        for r in recs[1:]:
            self.assertNotIn("env", r, "the environment is in the header only")

    def test_sigkill_leaves_a_readable_report_without_a_closing_record(self):
        p = self.start()
        self.stall(p)
        p.kill()
        p.communicate(timeout=30)
        self.assertEqual(p.returncode, -signal.SIGKILL)
        recs = lines_of(self.out)
        self.assertHeader(recs)
        self.assertEqual(len(recs), 1 + STALL_AT, "the header and every record added before the kill")
        self.assertNotIn("end", [r["kind"] for r in recs])
        self.assertEqual(list(self.out.glob("*.csv")), [], "CSVs are written at the close only")
        k = script("klab_report.py", self.out)
        self.assertEqual(k.returncode, 0, k.stderr)
        self.assertIn("incomplete (no closing record)", k.stdout)
        self.assertIn(f"{STALL_AT} records", k.stdout)
        self.assertEqual(script("klab_report.py", self.out, "--require-complete").returncode, 1)
        s = script("summarize.py", self.out, "--out", "-")
        self.assertEqual(s.returncode, 0, s.stderr)
        top = s.stdout.splitlines()[2]
        self.assertIn("incomplete (no closing record)", top, "summarize.py says so at the top")
        # compare.py: a note naming the incomplete side.
        full = self.tmp / "full"
        c0 = subprocess.run([KLAB, "run", *EXPERIMENTS, "--quick", "--out", str(full)], capture_output=True, text=True, timeout=60)
        self.assertIn(c0.returncode, (0, 4), c0.stderr)
        c = script("compare.py", full, self.out)
        self.assertEqual(c.returncode, 0, c.stderr)
        notes = [l for l in c.stdout.splitlines() if l.startswith("note:")]
        self.assertTrue(any(l.startswith("note: NEW is incomplete (no closing record)") for l in notes), c.stdout)
        self.assertFalse(any(l.startswith("note: OLD") for l in notes), c.stdout)

    def interrupted(self, sig, code):
        p = self.start()
        self.stall(p)
        p.send_signal(sig)
        _, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, code, err)
        self.assertIn("interrupted", err)
        recs = lines_of(self.out)
        self.assertHeader(recs)
        end = recs[-1]
        self.assertEqual(end["kind"], "end")
        self.assertEqual(end["status"], "interrupted")
        self.assertEqual(end["signal"], signal.Signals(sig).name)
        self.assertEqual(end["records"], STALL_AT)
        self.assertEqual(len(recs), STALL_AT + 2)
        self.assertEqual(sum(end["counts"].values()), STALL_AT)
        # The CSVs of what there is, one per kind.
        kinds = {r["kind"] for r in recs[1:-1]}
        self.assertEqual({f.name for f in self.out.glob("*.csv")}, {f"report-{k}.csv" for k in kinds})
        k = script("klab_report.py", self.out)
        self.assertIn(f"incomplete (interrupted by {signal.Signals(sig).name} after {STALL_AT} records)", k.stdout)
        s = script("summarize.py", self.out, "--out", "-")
        self.assertIn("interrupted by", s.stdout.splitlines()[2])

    def test_sigint_closes_the_report_as_interrupted(self):
        self.interrupted(signal.SIGINT, 130)

    def test_sigterm_closes_the_report_as_interrupted(self):
        self.interrupted(signal.SIGTERM, 143)

    def test_a_failure_closes_the_report_as_failed(self):
        p = self.start("KLAB_TEST_FAIL_AFTER_RECORDS", 4)
        _, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 1, err)
        self.assertIn("holds the records before the error (closed as failed)", err)
        self.assertNotIn("no report written", err)
        recs = lines_of(self.out)
        self.assertHeader(recs)
        self.assertEqual((recs[-1]["kind"], recs[-1]["status"], recs[-1]["records"]), ("end", "failed", 4))
        self.assertIn("KLAB_TEST_FAIL_AFTER_RECORDS", recs[-1]["error"])
        k = script("klab_report.py", self.out)
        self.assertIn("incomplete (the run failed after 4 records: test hook", k.stdout)

    def test_a_complete_run_has_header_records_and_end(self):
        # A previous report in --out is replaced, its CSVs (schema 1's report.csv too) with it.
        self.out.mkdir()
        (self.out / "report.jsonl").write_text('{"kind":"old"}\n' * 500)
        (self.out / "report.csv").write_text("old\n")
        (self.out / "report-gdn_op.csv").write_text("old\n")
        p = subprocess.run([KLAB, "run", *EXPERIMENTS, "--quick", "--out", str(self.out)], capture_output=True, text=True, timeout=60)
        self.assertIn(p.returncode, (0, 4), p.stderr)
        recs = lines_of(self.out)
        self.assertHeader(recs)
        self.assertNotIn("old", [r["kind"] for r in recs])
        end = recs[-1]
        self.assertEqual((end["kind"], end["status"]), ("end", "complete"))
        data = recs[1:-1]
        self.assertEqual(end["records"], len(data))
        counts = {}
        for r in data:
            counts[r["kind"]] = counts.get(r["kind"], 0) + 1
        self.assertEqual(end["counts"], counts)
        self.assertIn("error_budget", counts)
        self.assertEqual({f.name for f in self.out.glob("*.csv")}, {f"report-{k}.csv" for k in counts})
        # Each CSV: a header line and one row per record of its kind (no line breaks inside fields here).
        claims = (self.out / "report-claim.csv").read_text().splitlines()
        self.assertEqual(len(claims), 1 + counts["claim"])
        self.assertNotIn("env.", claims[0])
        k = script("klab_report.py", self.out, "--require-complete")
        self.assertEqual(k.returncode, 0, k.stdout + k.stderr)
        self.assertIn("schema 2", k.stdout)
        self.assertIn("complete (closing record: complete)", k.stdout)
        s = script("summarize.py", self.out, "--out", "-")
        self.assertEqual(s.returncode, 0, s.stderr)
        self.assertNotIn("incomplete", s.stdout)
        self.assertIn("| commit |", s.stdout, "the header's env reaches the summary's environment table")
        # The env is ~30% of a schema-1 file: here it is written once.
        text = (self.out / "report.jsonl").read_text()
        self.assertEqual(text.count('"git_commit"'), 1)

    def test_bad_options_leave_no_report(self):
        for args in (["no-such-experiment"], [EXPERIMENTS[0], "--reps", "0"], [EXPERIMENTS[0], "--seed", "-1"],
                     [EXPERIMENTS[0], "--timing", "sometimes"], [EXPERIMENTS[0], "--set", "q=1"], [EXPERIMENTS[0], "--bogus"]):
            with self.subTest(args=args):
                fresh = self.tmp / "fresh"
                p = subprocess.run([KLAB, "run", *args, "--out", str(fresh)], capture_output=True, text=True, timeout=60)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn("no report written", p.stderr)
                self.assertFalse(fresh.exists(), "not even the directory")
                # A report already there is left as it was (the truncation comes after validation).
                kept = self.tmp / "kept"
                kept.mkdir(exist_ok=True)
                (kept / "report.jsonl").write_text('{"kind":"x"}\n')
                (kept / "report.csv").write_text("kind\nx\n")
                subprocess.run([KLAB, "run", *args, "--out", str(kept)], capture_output=True, text=True, timeout=60)
                self.assertEqual((kept / "report.jsonl").read_text(), '{"kind":"x"}\n')
                self.assertTrue((kept / "report.csv").exists())

    def test_schema_1_reports_still_read(self):
        """The committed previous reference report (schema 1: env on every record, no header, no end)
        reads as complete, every record with its env, and the summary has no incompleteness line."""
        k = script("klab_report.py", ROOT / "reports" / "h200" / "previous-ade16ef", "--require-complete")
        self.assertEqual(k.returncode, 0, k.stdout + k.stderr)
        self.assertIn("schema 1", k.stdout)
        sys.path.insert(0, str(SCRIPTS))
        import klab_report as kr
        rep = kr.load(HERE / "data" / "run")
        self.assertEqual(rep.schema_version, 1)
        self.assertIsNone(rep.incomplete())
        self.assertTrue(all(isinstance(r.get("env"), dict) for r in rep.records))

    def test_the_reference_report_is_a_complete_schema_2_report(self):
        k = script("klab_report.py", ROOT / "reports" / "h200", "--require-complete")
        self.assertEqual(k.returncode, 0, k.stdout + k.stderr)
        self.assertIn("schema 2", k.stdout)

    def test_schema_2_reads_as_schema_1(self):
        """Each committed schema-1 fixture rewritten as schema 2 (its env moved into a header, an end
        record added) gives the same summary and the same compare.py output as the original."""
        def to_v2(name):
            recs = [json.loads(l) for l in (HERE / "data" / name / "report.jsonl").read_text().splitlines() if l.strip()]
            env = recs[0]["env"]
            d = self.tmp / ("v2-" + name)
            d.mkdir()
            lines = [{"kind": "header", "schema_version": 2, "start": env.get("date", ""), "env": env}]
            lines += [{k: v for k, v in r.items() if k != "env"} for r in recs]
            lines.append({"kind": "end", "status": "complete", "records": len(recs)})
            (d / "report.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
            return d

        for name in ("run", "gdn", "nodevice", "compare-old"):
            with self.subTest(name=name):
                a = script("summarize.py", HERE / "data" / name, "--out", "-")
                b = script("summarize.py", to_v2(name), "--out", "-")
                self.assertEqual(a.returncode, 0, a.stderr)
                self.assertEqual(a.stdout, b.stdout)
        strip = lambda out: [l for l in out.splitlines() if not l.startswith(("OLD ", "NEW "))]
        a = script("compare.py", HERE / "data" / "compare-old", HERE / "data" / "compare-new")
        b = script("compare.py", self.tmp / "v2-compare-old", to_v2("compare-new"))
        self.assertEqual(a.returncode, b.returncode)
        self.assertEqual(strip(a.stdout), strip(b.stdout))
        self.assertGreater(len(strip(a.stdout)), 10)

    def test_reader_checks(self):
        """A header of an unknown schema version, an end without a header, two ends, an unknown end
        status are refused (exit 2, naming file:line); a count that disagrees with the records and a
        last line cut short by a kill are read and called incomplete."""
        sys.path.insert(0, str(SCRIPTS))
        import klab_report as kr
        h = {"kind": "header", "schema_version": 2, "env": {"git_commit": "x"}, "start": "2026-01-01T00:00:00Z"}
        rec = {"kind": "skip", "experiment": "e", "what": "w", "reason": "r"}
        end = {"kind": "end", "status": "complete", "records": 1}
        d = self.tmp / "r"
        d.mkdir()

        def write(*objs, tail=""):
            (d / "report.jsonl").write_text("".join(json.dumps(o) + "\n" for o in objs) + tail)

        for objs, says in (([dict(h, schema_version=3), rec], "schema_version 3"),
                           (([rec, end]), "end record without a header"),
                           (([h, rec, end, end]), "a second end record"),
                           (([h, rec, dict(end, status="done")]), "status 'done'")):
            with self.subTest(says=says):
                write(*objs)
                p = script("klab_report.py", d)
                self.assertEqual(p.returncode, 2)
                self.assertIn(says, p.stderr)
                self.assertIn("report.jsonl:", p.stderr)
        write(h, rec, dict(end, records=2))
        self.assertIn("counts 2 records; the file holds 1", kr.load(d).incomplete())
        write(h, rec, tail='{"kind": "skip", "experi')
        why = kr.load(d).incomplete()
        self.assertIn("no closing record", why)
        self.assertIn("report.jsonl:3, is cut short", why)
        # A header alone (killed before the first record) is a report, with nothing in it yet.
        write(h)
        self.assertEqual(kr.load(d).records, [])
        s = script("summarize.py", d, "--out", "-")
        self.assertEqual(s.returncode, 0, s.stderr)
        self.assertIn("after 0 records", s.stdout)


if __name__ == "__main__":
    if not Path(KLAB).is_file():
        print(f"test_report_survival.py: no klab binary at {KLAB} (set KLAB_CLI)", file=sys.stderr)
        sys.exit(1)
    unittest.main()
