#!/usr/bin/env python3
"""scripts/merge_reports.py (issue 12, part 7): shard reports of one run merged into one schema-2
report; shards of different runs (commit, command line), a missing shard, a shard given twice, a
report that is not a shard are refused (exit 2, nothing written); the merged claim states; the end
record complete only when every shard is. With KLAB_CLI (the klab just built), also real shards of a
device-free run, merged and read back by klab_report.py.

    KLAB_CLI=build/dev/bin/klab /usr/bin/python3 tests/scripts/test_merge_reports.py
    (ctest: the "scripts-merge" test)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SCRIPTS = ROOT / "scripts"
sys.path.insert(0, str(SCRIPTS))
import klab_report  # noqa: E402

KLAB = os.environ.get("KLAB_CLI") or str(ROOT / "build" / "dev" / "bin" / "klab")


def merge(*args):
    return subprocess.run([sys.executable, str(SCRIPTS / "merge_reports.py")] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=120)


def shard_report(d, index, count, claims, commit="abc123", extra=(), status="complete", device="GPU-A", measurements=1):
    """A shard report in d: header (env.options.shard), `measurements` records, the claims
    {(experiment, id): (state, evidence)}, an end record with `status` (None: none)."""
    d.mkdir(parents=True, exist_ok=True)
    argv = ["/x/klab", "run", "exp", *extra, "--shard", f"{index}/{count}", "--out", str(d)]
    env = {"git_commit": commit, "git_dirty": False, "date": f"2026-01-0{index + 1}T00:00:00Z", "command": " ".join(argv),
           "host": f"node{index}", "device": {"name": device, "index": index},
           "options": {"reps": 50, "shard": {"index": index, "count": count}}}
    lines = [{"kind": "header", "schema_version": 2, "start": env["date"], "argv": argv, "env": env}]
    for m in range(measurements):
        lines.append({"kind": "skip", "experiment": "exp", "what": f"v on race {index}.{m}", "reason": "test"})
    for i, ((exp, cid), (state, ev)) in enumerate(claims.items()):
        lines.append({"kind": "claim", "experiment": exp, "index": i, "id": cid, "text": cid, "state": state, "evidence": ev})
    if status:
        lines.append({"kind": "end", "status": status, "records": len(lines) - 1, "start": env["date"], "end": env["date"]})
    (d / "report.jsonl").write_text("".join(json.dumps(l) + "\n" for l in lines), encoding="utf-8")
    return d


class Merge(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="klab-merge-"))
        self.out = self.tmp / "merged"

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def refused(self, says, *dirs):
        r = merge(self.out, *dirs)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn(says, r.stderr)
        self.assertFalse(self.out.exists(), "a refused merge wrote something")

    def test_claim_states_and_records(self):
        c0 = {("exp", "a"): ("held", "a0"), ("exp", "b"): ("held", "b0"), ("exp", "c"): ("not_evaluated", "c0"),
              ("exp", "d"): ("not_evaluated", "")}
        c1 = {("exp", "a"): ("held", "a1"), ("exp", "b"): ("not_held", "b1"), ("exp", "c"): ("held", "c1"),
              ("exp", "d"): ("not_evaluated", "")}
        c2 = {("exp", "a"): ("not_evaluated", "a2"), ("exp", "b"): ("held", "b2"), ("exp", "c"): ("not_evaluated", ""),
              ("exp", "d"): ("not_evaluated", "")}
        dirs = [shard_report(self.tmp / f"s{i}", i, 3, c, device=f"GPU-{i}", measurements=i + 1)
                for i, c in enumerate([c0, c1, c2])]
        # Given in any order.
        r = merge(self.out, dirs[2], dirs[0], dirs[1])
        self.assertEqual(r.returncode, 0, r.stderr)
        rep = klab_report.load(self.out)
        self.assertIsNone(rep.incomplete())
        self.assertEqual(len(rep.headers), 1)
        env = rep.headers[0]["env"]
        self.assertNotIn("shard", env["options"])
        self.assertEqual([s["index"] for s in env["shards"]], [0, 1, 2])
        self.assertEqual([s["device"]["name"] for s in env["shards"]], ["GPU-0", "GPU-1", "GPU-2"])
        self.assertEqual([s["host"] for s in env["shards"]], ["node0", "node1", "node2"])
        claims = {c["id"]: c for c in rep.of("claim")}
        self.assertEqual(len(rep.of("claim")), 4)  # each once
        self.assertEqual(claims["a"]["state"], "held")          # held in some, not_held in none
        self.assertEqual(claims["b"]["state"], "not_held")      # not_held in one
        self.assertEqual(claims["c"]["state"], "held")
        self.assertEqual(claims["d"]["state"], "not_evaluated")  # nowhere evaluated
        self.assertEqual(claims["b"]["shard_states"], ["held", "not_held", "held"])
        self.assertIn("shard 1/3 not_held: b1", claims["b"]["evidence"])
        self.assertIn("shard 0/3 held: b0", claims["b"]["evidence"])
        # Every shard's records, each with its shard and its shard's env.
        skips = rep.of("skip")
        self.assertEqual(len(skips), 1 + 2 + 3)
        self.assertEqual([s["shard"] for s in skips], [0, 1, 1, 2, 2, 2])
        self.assertEqual([s["env"]["device"]["name"] for s in skips], ["GPU-0", "GPU-1", "GPU-1", "GPU-2", "GPU-2", "GPU-2"])
        self.assertEqual(rep.ends[0]["record"]["status"], "complete")
        self.assertEqual(rep.ends[0]["record"]["records"], 10)

    def test_incomplete_shard_makes_an_incomplete_merge(self):
        a = shard_report(self.tmp / "s0", 0, 2, {("exp", "a"): ("held", "")})
        b = shard_report(self.tmp / "s1", 1, 2, {("exp", "a"): ("held", "")}, status=None)
        r = merge(self.out, a, b)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("INCOMPLETE", r.stdout)
        rep = klab_report.load(self.out)
        end = rep.ends[0]["record"]
        self.assertEqual(end["status"], "failed")
        self.assertIn("shard 1/2", end["error"])
        self.assertNotIn("shard 0/2", end["error"])
        self.assertIsNotNone(rep.incomplete())

    def test_refusals(self):
        c = {("exp", "a"): ("held", "")}
        s0 = shard_report(self.tmp / "s0", 0, 2, c)
        s1 = shard_report(self.tmp / "s1", 1, 2, c)
        self.refused("missing shard(s) 1/2", s0)
        self.refused("shard 0/2 given twice", s0, s0, s1)
        self.refused("shards of different splits", s0, shard_report(self.tmp / "t1", 1, 3, c))
        self.refused("has git_commit 'def456'", s0, shard_report(self.tmp / "u1", 1, 2, c, commit="def456"))
        self.refused("the command lines differ", s0, shard_report(self.tmp / "v1", 1, 2, c, extra=("--reps", "10")))
        # Not a shard: a report run without --shard.
        plain = self.tmp / "plain"
        plain.mkdir()
        lines = (s1 / "report.jsonl").read_text().splitlines()
        h = json.loads(lines[0])
        del h["env"]["options"]["shard"]
        (plain / "report.jsonl").write_text("\n".join([json.dumps(h)] + lines[1:]) + "\n")
        self.refused("not a shard report", s0, plain)
        self.refused("cannot read", s0, self.tmp / "nowhere")
        r = merge(self.out)
        self.assertEqual(r.returncode, 2)
        # --out, --device and --shard may differ (as --devices gives them), also as --opt=V.
        d0 = shard_report(self.tmp / "d0", 0, 2, c, extra=("--device", "0"))
        d1 = shard_report(self.tmp / "d1", 1, 2, c, extra=("--device=1",))
        self.assertEqual(merge(self.out, d0, d1).returncode, 0)

    @unittest.skipUnless(Path(KLAB).is_file(), f"no klab at {KLAB} (set KLAB_CLI)")
    def test_real_shards(self):
        """klab's own shards (device experiments skip without a GPU; error-budget runs on the CPU)."""
        dirs = []
        for i in range(2):
            d = self.tmp / f"k{i}"
            p = subprocess.run([KLAB, "run", "f32-gemv-vs-cublas", "error-budget", "--quick", "--shard", f"{i}/2", "--out", str(d)],
                               capture_output=True, text=True, timeout=300)
            self.assertIn(p.returncode, (0, 4), p.stderr)
            dirs.append(d)
        r = merge(self.out, *dirs)
        self.assertEqual(r.returncode, 0, r.stderr)
        rep = klab_report.load(self.out)
        self.assertIsNone(rep.incomplete())
        self.assertEqual(len(rep.headers[0]["env"]["shards"]), 2)
        shard_claims = sum(len(klab_report.load(d).of("claim")) for d in dirs)
        self.assertEqual(len(rep.of("claim")) * 2, shard_claims)
        s = subprocess.run([sys.executable, str(SCRIPTS / "klab_report.py"), str(self.out), "--require-complete"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(s.returncode, 0, s.stdout + s.stderr)


def part_report(d, experiments, commit="abc123", options=None, device="NVIDIA H200", status="complete", host="node0", ceiling=4600.0):
    """A report of one run naming `experiments` (no shard): a header, a skip and a held claim per experiment, an end record."""
    d.mkdir(parents=True, exist_ok=True)
    argv = ["/x/klab", "run", *experiments, "--reps", "50", "--out", str(d)]
    env = {"git_commit": commit, "git_dirty": False, "date": "2026-01-01T00:00:00Z", "command": " ".join(argv), "host": host,
           "device": {"name": device, "index": 0}, "options": options or {"reps": 50},
           "ceiling": {"read_gbps": ceiling}}
    lines = [{"kind": "header", "schema_version": 2, "start": env["date"], "argv": argv, "env": env}]
    for i, e in enumerate(experiments):
        lines.append({"kind": "skip", "experiment": e, "what": f"v of {e}", "reason": "test"})
        lines.append({"kind": "claim", "experiment": e, "index": 0, "id": "c", "text": "c", "state": "held", "evidence": f"{e} ev"})
    if status:
        lines.append({"kind": "end", "status": status, "records": len(lines) - 1, "start": env["date"], "end": env["date"]})
    (d / "report.jsonl").write_text("".join(json.dumps(l) + "\n" for l in lines), encoding="utf-8")
    return d


class Parts(unittest.TestCase):
    """--parts: one run's reports split by experiment lists (one device call each) joined into one."""

    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="klab-parts-"))
        self.out = self.tmp / "merged"

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def refused(self, says, *dirs):
        r = merge("--parts", self.out, *dirs)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn(says, r.stderr)
        self.assertFalse(self.out.exists(), "a refused merge wrote something")

    def test_disjoint_parts_merge(self):
        a = part_report(self.tmp / "a", ["e1", "e2"], host="m1", ceiling=4567.0)
        b = part_report(self.tmp / "b", ["e3"], host="m2", ceiling=4669.0)
        r = merge("--parts", self.out, a, b)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("merged 2 parts", r.stdout)
        rep = klab_report.load(self.out)
        self.assertIsNone(rep.incomplete())
        self.assertEqual(len(rep.headers), 1)
        parts = rep.headers[0]["env"]["parts"]
        self.assertEqual([p["experiments"] for p in parts], [["e1", "e2"], ["e3"]])
        self.assertEqual([p["host"] for p in parts], ["m1", "m2"])
        claims = [r for r in rep.records if r["kind"] == "claim"]
        self.assertEqual([(c["experiment"], c["state"], c["evidence"]) for c in claims],
                         [("e1", "held", "e1 ev"), ("e2", "held", "e2 ev"), ("e3", "held", "e3 ev")])
        # Every record keeps its part and its part's ceiling.
        self.assertEqual({(r["experiment"], r["part"], r["env"]["ceiling"]["read_gbps"]) for r in rep.records},
                         {("e1", 0, 4567.0), ("e2", 0, 4567.0), ("e3", 1, 4669.0)})

    def test_incomplete_part(self):
        a = part_report(self.tmp / "a", ["e1"])
        b = part_report(self.tmp / "b", ["e2"], status=None)
        r = merge("--parts", self.out, a, b)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("INCOMPLETE", r.stdout)
        self.assertIn("part 1", klab_report.load(self.out).incomplete())

    def test_refusals(self):
        a = part_report(self.tmp / "a", ["e1", "e2"])
        self.refused("experiment e2 is in two parts", a, part_report(self.tmp / "b", ["e2", "e3"]))
        self.refused("not one commit", a, part_report(self.tmp / "c", ["e3"], commit="def456"))
        self.refused("not one kind of GPU", a, part_report(self.tmp / "d", ["e3"], device="NVIDIA H100"))
        self.refused("not one run's options", a, part_report(self.tmp / "e", ["e3"], options={"reps": 10}))
        self.refused("a shard report", a, shard_report(self.tmp / "f", 0, 2, {}))
        self.refused("cannot read", a, self.tmp / "nothing-here")


if __name__ == "__main__":
    unittest.main()
