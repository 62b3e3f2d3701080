#!/usr/bin/env python3
"""Tests of the scripts on a report in the format of named parameters: measurements of op gdn_step
(no "shape"; "params", "problem", "tensors"), beside mat-vec measurements that carry both a shape and
a problem. The fixture is tests/scripts/data/gdn-step/ (written by data/make_gdn_step.py, by hand to
reports/SCHEMA.md; its GPU is "FIXTURE GPU"). Expected figures are worked out from the fixture's
values in the comments, not read from the scripts.

    /usr/bin/python3 tests/scripts/test_gdn_step.py     (ctest runs it inside the "scripts" test)

The fixture's times, per run of 16 tokens, and per layer and token (/16):
  gdn-q4-layer (weights=1, 16 x 73548672 = 1176778752 bytes per run):
    f32 tier (A)                     stream 2.4   -> 0.15    launch 2.56  -> 0.16
    q4, block-per-thread dot=offset  stream 1.12  -> 0.07    launch 1.216 -> 0.076   (raced second: the tier's kernel)
    q4, api=host                                             launch 1.536 -> 0.096   (launch only)
    q4, per-lane chains=4            stream 1.6   -> 0.1     launch 1.76  -> 0.11
    q4, block-per-thread dot=f16x2   stream 1.04  -> 0.065   launch 1.152 -> 0.072   (tolerance 2e-3)
    q4, warp-row dot=offset          failed verification, not timed
  gdn-roundtrip (weights=0): api=host (A) launch 2.88 -> 0.18; api=run launch 2.624 -> 0.164;
    device-resident stream 2.4 -> 0.15, launch 2.56 -> 0.16.
Every timing's samples are its median x (0.995, 0.9975, 1, 1.0025, 1.005).
"""
import json
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SCRIPTS = ROOT / "scripts"
FIXTURE = HERE / "data" / "gdn-step"
sys.path.insert(0, str(SCRIPTS))
import klab_report as kr  # noqa: E402

Q4_DEFAULT = "gdn_step/tier=q4,proj=map=block-per-thread+dot=offset+rows=8"
Q1 = "ck=4,dk=128,dv=128,hidden=5120,nk=16,nv=48,tokens=16,weights=1"
Q0 = "ck=4,dk=128,dv=128,hidden=5120,nk=16,nv=48,tokens=16,weights=0"


def run(script, *args):
    return subprocess.run([sys.executable, str(SCRIPTS / script)] + [str(a) for a in args], capture_output=True, text=True, timeout=600)


def lines_of(path=FIXTURE / "report.jsonl"):
    return [json.loads(l) for l in Path(path).read_text().splitlines() if l.strip()]


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="klab-gdn-step-test-"))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def report(self, name, records):
        d = self.tmp / name
        d.mkdir()
        (d / "report.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        return d

    def assertOk(self, p):
        self.assertEqual(p.returncode, 0, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")


class ReadTest(Base):
    def test_fixture_is_what_make_gdn_step_writes(self):
        # The committed file is the generator's output (regenerate it rather than edit it).
        p = subprocess.run([sys.executable, str(HERE / "data" / "make_gdn_step.py")], capture_output=True, text=True,
                           cwd=self.tmp, env={"PATH": "/usr/bin:/bin"})
        self.assertOk(p)
        self.assertEqual(subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", "--", str(FIXTURE)]).returncode, 0,
                         "tests/scripts/data/gdn-step/report.jsonl differs from what make_gdn_step.py writes")

    def test_loads_complete(self):
        p = run("klab_report.py", FIXTURE, "--require-complete")
        self.assertOk(p)
        self.assertIn("schema 2; 20 records (measurement 11, skip 1, claim 8); complete", p.stdout)

    def test_rows_per_layer_and_token(self):
        rep = kr.load(FIXTURE)
        rows = kr.gdn_step_rows(rep.of("measurement", "gdn-q4-layer"))
        self.assertEqual(len(rows), 6)
        by = {r["variant"]: r for r in rows}
        f32 = by["gdn_step/tier=f32"]
        self.assertEqual((f32["tier"], f32["mode"], f32["projections"], f32["tokens"]), ("f32", "device-resident", None, 16))
        self.assertAlmostEqual(f32["views"]["stream"]["median"], 2.4 / 16)
        self.assertAlmostEqual(f32["views"]["launch"]["median"], 2.56 / 16)
        self.assertAlmostEqual(f32["bytes_per_step"], 73548672)
        host = by["gdn_step/tier=q4,api=host"]
        self.assertEqual((host["mode"], list(host["views"])), ("host-facing", ["launch"]))
        self.assertAlmostEqual(host["views"]["launch"]["median"], 0.096)
        self.assertEqual(by[Q4_DEFAULT]["projections"], "map=block-per-thread+dot=offset+rows=8")
        # The tier table: f32, then q4 host-facing before device-resident, the q4 row its race's own kernel.
        tiers = kr.gdn_tier_rows(rows)
        self.assertEqual([(r["tier"], r["mode"]) for r in tiers], [("f32", "device-resident"), ("q4", "host-facing"), ("q4", "device-resident")])
        self.assertEqual(tiers[2]["variant"], Q4_DEFAULT)
        # Every timed row has launch: the tier table is in launch; the q4 kernels' headline is stream.
        self.assertEqual(kr.gdn_common_mode(tiers), "launch")
        self.assertEqual(kr.gdn_common_mode(kr.q4_kernel_rows(rows), prefer=None), "stream")
        self.assertEqual(len(kr.q4_kernel_rows(rows)), 4)
        rt = kr.gdn_step_rows(rep.of("measurement", "gdn-roundtrip"))
        self.assertEqual([r["mode"] for r in rt], ["host-facing", "device-run", "device-resident"])

    def test_refused(self):
        step = next(r for r in lines_of() if r.get("variant") == Q4_DEFAULT)
        cases = []
        r = json.loads(json.dumps(step))
        del r["params"]["tokens"]
        cases.append((r, "'params.tokens'"))
        r = json.loads(json.dumps(step))
        r["params"]["tokens"] = 0
        cases.append((r, "'params.tokens'"))
        r = json.loads(json.dumps(step))
        del r["problem"]
        cases.append((r, "lacks the field 'problem'"))
        r = json.loads(json.dumps(step))
        del r["tensors"][2]["name"]
        cases.append((r, "'tensors[2].name'"))
        r = json.loads(json.dumps(step))
        r["tensors"][0]["bits_vs_a"] = "many"
        cases.append((r, "'tensors[0].bits_vs_a'"))
        for i, (rec, what) in enumerate(cases):
            p = run("summarize.py", self.report(f"bad{i}", [rec]), "--out", "-")
            self.assertEqual(p.returncode, 2, p.stdout)
            self.assertIn("report.jsonl:1", p.stderr)
            self.assertIn(what, p.stderr)


class SummarizeTest(Base):
    def test_tables(self):
        p = run("summarize.py", FIXTURE, "--out", "-")
        self.assertOk(p)
        t = p.stdout
        # Grouped by problem: a mat-vec by its shape, gdn_step by its parameters.
        self.assertIn("f32_gemv 64x64, uniform inputs (ceiling 4000 GB/s):", t)
        self.assertIn(f"gdn_step {Q1}, outlier inputs (ceiling 4000 GB/s):", t)
        self.assertIn(f"gdn_step {Q0}, outlier inputs (ceiling 4000 GB/s):", t)
        # Per layer and token: 2.4 / 16 = 0.15 (min 0.995 x, max 1.005 x); GB/s 1176778752 B / 2.4 ms = 490.3,
        # 12.3% of 4000, 12.9% of the 3800 size-matched stream read; launch 2.56 / 16 = 0.16. (0.15 x 1.005 = 0.15075
        # is 0.150749... in binary: 0.1507 to 4 digits.)
        self.assertIn("| f32 | device-resident |  | 0.15 (0.1492..0.1507) | stream, K=8, 3 copies | 490.3 | 12.3 | 12.9 | 0.16 | A |", t)
        # 1.536 / 16 = 0.096, launch only (its own headline): 766.1 GB/s = 19.2% of 4000, 21.3% of 3600.
        self.assertIn("| q4 | host-facing |  | 0.096 (0.09552..0.09648) | launch | 766.1 | 19.2 | 21.3 | (the headline) | faster x1.667", t)
        self.assertIn("| q4 | device-resident | map=block-per-thread+dot=f16x2+rows=8 | 0.065 (", t)
        self.assertIn("| q4 | device-resident | map=warp-row+dot=offset | not timed (failed verification) |", t)
        self.assertIn("| f32 | device-run |  | 0.164 (", t)
        # Named outputs: one column per tensor, max_rel and bits against A's same output.
        self.assertIn("| variant | out | S | hist | q | k | beta | g | onn |", t)
        self.assertIn(f"| {Q4_DEFAULT} | 3.40e-06; 81000 bits | 2.00e-06; 700000 bits |", t)
        # The mat-vec has a single output "y": no per-output table in its section.
        gemv = t[t.index("## f32-gemv-vs-cublas"):t.index("## gdn-q4-layer")]
        self.assertNotIn("Per output", gemv)
        self.assertNotIn("Records of kinds this summary does not read", t)


    def test_step_options_get_a_column_of_their_own(self):
        # gdn-step-fused's variants carry axes beyond tier and proj: the plain and the fused step of one
        # kernel must not read as two equal rows.
        recs = lines_of()
        plain = next(r for r in recs if r.get("variant") == Q4_DEFAULT)
        fused = json.loads(json.dumps(plain))
        fused["variant"] = Q4_DEFAULT + ",prep=fused,rec=impl=fused+cols=16+rows=8+pdl=on"
        fused["axes"] = dict(fused.get("axes", {}), prep="fused", rec="impl=fused+cols=16+rows=8+pdl=on")
        for r in (plain, fused):
            r["experiment"] = "gdn-step-fused"
        d = self.report("fused", [recs[0], plain, fused])
        rows = kr.gdn_step_rows(kr.load(d).of("measurement", "gdn-step-fused"))
        self.assertEqual([r["options"] for r in rows], ["", "prep=fused, rec=impl=fused+cols=16+rows=8+pdl=on"])
        self.assertEqual([r["variant"] for r in kr.q4_kernel_rows(rows)], [Q4_DEFAULT])  # the figure of q4 kernels: the plain step only
        p = run("summarize.py", d, "--out", "-")
        self.assertOk(p)
        self.assertIn("| tier | mode | projections (q4 kernel) | step options | ms per layer and token (min..max) |", p.stdout)
        self.assertIn("| q4 | device-resident | map=block-per-thread+dot=offset+rows=8 | prep=fused, rec=impl=fused+cols=16+rows=8+pdl=on | 0.07 (", p.stdout)
        self.assertIn("| q4 | device-resident | map=block-per-thread+dot=offset+rows=8 |  | 0.07 (", p.stdout)
        # Without options (the fixture's own gdn-q4-layer), no such column.
        self.assertNotIn("step options", run("summarize.py", FIXTURE, "--out", "-").stdout)


class PlotTest(Base):
    # No accuracy figure for f32-gemv-vs-cublas and gdn-roundtrip: every max_rel of each lies within one
    # decade (1.2e-7 and 2.2e-6 throughout), a table in summary.md instead.
    FIGURES = ["bandwidth-f32-gemv-vs-cublas", "bandwidth-gdn-q4-layer", "accuracy-gdn-q4-layer",
               "gdn-timing-gdn-q4-layer", "gdn-q4-kernels-gdn-q4-layer", "bandwidth-gdn-roundtrip",
               "gdn-timing-gdn-roundtrip"]

    @staticmethod
    def texts(svg):
        import re
        return set(re.findall(r"<!-- (.*?) -->", svg.read_text()))

    def test_figures(self):
        rep = self.tmp / "rep"
        shutil.copytree(FIXTURE, rep)
        p = run("plot.py", rep)
        self.assertOk(p)
        plots = rep / "plots"
        self.assertEqual(sorted(x.name for x in plots.iterdir()), sorted(f"{n}.{e}" for n in self.FIGURES for e in ("png", "svg")))
        t = self.texts(plots / "gdn-timing-gdn-q4-layer.svg")
        # Launch timing for every bar (the host-facing API has no stream): 0.16, 0.096, 0.076.
        self.assertIn("gdn-q4-layer: GDN step time by tier and round-trip mode, launch timing", t)
        for s in ("host-facing", "device-resident", "f32", "q4", "0.16", "0.096", "0.076"):
            self.assertIn(s, t)
        t = self.texts(plots / "gdn-timing-gdn-roundtrip.svg")
        for s in ("host-facing", "device-run", "device-resident", "0.18", "0.164", "0.16"):
            self.assertIn(s, t)
        # Every q4 kernel inside the step, fastest first (stream: 0.065, 0.07, 0.1), the failed one last.
        svg = (plots / "gdn-q4-kernels-gdn-q4-layer.svg").read_text()
        order = [svg.index(f"<!-- {s} -->") for s in (" 0.065", " 0.07", " 0.1", " failed verification")]
        self.assertEqual(order, sorted(order))
        self.assertIn("<!-- f32 tier, device-resident (0.15 ms, stream) -->", svg)
        # Problems without a shape: the axis says problem, the label gives the parameters.
        bw = self.texts(plots / "bandwidth-gdn-q4-layer.svg")
        self.assertTrue(any("bandwidth per variant and problem" in s for s in bw), bw)
        self.assertIn("tokens=16", bw)
        self.assertTrue(any("bandwidth per variant and shape" in s for s in self.texts(plots / "bandwidth-f32-gemv-vs-cublas.svg")))


class CompareTest(Base):
    def test_gdn_step_matched_by_problem(self):
        # NEW: the q4 tier's kernel 20% faster in both modes; everything else unchanged.
        recs = lines_of()
        for r in recs:
            if r.get("variant") == Q4_DEFAULT:
                for m, v in r["modes"].items():
                    t = v["timing"]
                    for f in ("median_ms", "min_ms", "max_ms"):
                        t[f] *= 0.8
                    t["samples_ms"] = [x * 0.8 for x in t["samples_ms"]]
                r["timing"] = r["modes"]["stream"]["timing"]
        new = self.report("new", recs)
        p = run("compare.py", FIXTURE, new, "--markdown")
        self.assertOk(p)
        rows = {}
        for line in p.stdout.splitlines():
            c = [x.strip() for x in line.strip().strip("|").split("|")]
            if len(c) == 10 and c[0] not in ("experiment",) and not c[0].startswith("---"):
                rows[(c[0], c[1], c[2], c[3])] = (c[6], c[8])
        self.assertEqual(rows[("gdn-q4-layer", Q4_DEFAULT, f"{Q1} outlier", "stream")], ("0.800", "faster"))
        self.assertEqual(rows[("gdn-q4-layer", Q4_DEFAULT, f"{Q1} outlier", "launch")], ("0.800", "faster"))
        # The f32 tier on weights=1 (gdn-q4-layer) and on weights=0 (gdn-roundtrip) are two problems.
        self.assertEqual(rows[("gdn-q4-layer", "gdn_step/tier=f32", f"{Q1} outlier", "stream")], ("1.000", "same"))
        self.assertEqual(rows[("gdn-roundtrip", "gdn_step/tier=f32", f"{Q0} outlier", "stream")], ("1.000", "same"))
        self.assertIn("summary: 2 faster, 0 slower, 15 same, 0 ambiguous, 1 not timed; 0 only in OLD, 0 only in NEW", p.stdout)
        g = run("compare.py", FIXTURE, new, "--fail-on-regression", "gdn_step/*")
        self.assertOk(g)

    def test_old_shape_records_line_up_with_new_problem_records(self):
        # A schema-1-era mat-vec (shape, no problem) against the same measurement with named parameters.
        new = [r for r in lines_of() if r.get("experiment") == "f32-gemv-vs-cublas"]
        old = []
        for r in new:
            o = {k: v for k, v in r.items() if k not in ("params", "problem", "modes")}
            o["timing"] = dict(r["modes"]["launch"]["timing"])
            del o["timing"]["mode"]
            o["env"] = {"device": {"name": "FIXTURE GPU (test data)"}}
            old.append(o)
        p = run("compare.py", self.report("old", old), self.report("new", [lines_of()[0]] + new), "--markdown")
        self.assertOk(p)
        self.assertIn("| f32-gemv-vs-cublas | f32_gemv/impl=warp-row,unroll=4 | 64x64 uniform | launch |", p.stdout)
        self.assertIn("0 only in OLD, 0 only in NEW", p.stdout)


class ReadmeTest(Base):
    def test_gdn_timing_block(self):
        doc = self.tmp / "R.md"
        doc.write_text("<!-- klab:results gdn-timing begin -->\n<!-- klab:results gdn-timing end -->\n")
        p = run("readme_results.py", FIXTURE, "--files", doc)
        self.assertOk(p)
        t = doc.read_text()
        # Launch: f32 2.56/16 = 0.16, q4 host 0.096, q4 device-resident 0.076; the stream column 0.15 and 0.07.
        self.assertIn("| f32 | device-resident | 0.16 (0.1592..0.1608) | 73.5 MB | 460 | 11.5 | 12.8 | 0.15 | f32 |", t)
        self.assertIn("| q4 | host-facing | 0.096 (0.09552..0.09648) | 73.5 MB | 766 | 19.2 | 21.3 | n/a |", t)
        self.assertIn("| q4 | device-resident | 0.076 (0.07562..0.07638) | 73.5 MB | 968 | 24.2 | 26.9 | 0.07 | `map=block-per-thread+dot=offset+rows=8` |", t)
        # Round trip 0.096 - 0.076 = 0.02; q4 vs f32: launch 0.16 / 0.076 = x2.11, stream 0.15 / 0.07 = x2.14.
        self.assertIn("Host round trip (launch timing, minus device-resident, per layer and token): q4 host-facing 0.02 ms.", t)
        self.assertIn("q4 tier vs f32 tier, device-resident: launch x2.11, faster", t)
        self.assertIn("; stream x2.14, faster", t)
        kern = t[t.index("Every q4 mat-vec kernel"):]
        order = [kern.index(s) for s in ("dot=f16x2", "dot=offset+rows=8` (the tier's row above)", "per-lane", "warp-row")]
        self.assertEqual(order, sorted(order))
        self.assertIn("| `map=warp-row+dot=offset` | not timed (failed verification) | n/a | n/a | 5.00e-01 FAILED | 0.0001 |", t)
        c = run("readme_results.py", FIXTURE, "--check", "--files", doc)
        self.assertOk(c)

    def test_other_blocks_take_no_shape_from_gdn_step(self):
        # Blocks over mat-vec experiments never read gdn_step records: put one into q4-vs-peers.
        recs = lines_of()
        step = next(r for r in recs if r.get("variant") == Q4_DEFAULT)
        recs.append(dict(step, experiment="q4-vs-peers"))
        recs.append(dict(step, experiment="seed-ladder"))
        doc = self.tmp / "R.md"
        doc.write_text("".join(f"<!-- klab:results {n} begin -->\n<!-- klab:results {n} end -->\n"
                               for n in ("header", "f32", "seed-ladder", "q4-vs-peers", "q4-to-ceiling", "profile", "not-held")))
        p = run("readme_results.py", self.report("rep", recs), "--files", doc)
        self.assertOk(p)
        self.assertIn("`q4-vs-peers` has no timed kernel of ours on a seed shape in this report.", doc.read_text())


class ProfileTest(Base):
    def test_ops_without_a_shape_are_not_profiled(self):
        import profile_ncu
        todo = profile_ncu.timed_problems(lines_of(), "*", "*")
        self.assertEqual([t[1] for t in todo], ["f32_gemv/impl=warp-row,unroll=1", "f32_gemv/impl=warp-row,unroll=4"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
