#!/usr/bin/env python3
"""scripts/gpu_noise.py and compare.py --gpu-noise (issue 12, part 7) on small synthetic reports
(their GPUs are "FIXTURE GPU": not measurements): the spread of matched measurements, worked out by
hand below; reports of different runs, of one GPU, or with nothing matched refused (exit 2, naming
what differs, nothing written); compare.py's verdict turned from "faster" to "same" by a GPU spread
wider than the difference, per mode, and unchanged by one narrower.

    /usr/bin/python3 tests/scripts/test_gpu_noise.py      (ctest: the "scripts-gpu-noise" test)
"""
import json
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = HERE.parents[1] / "scripts"
sys.path.insert(0, str(HERE))
import test_scripts as ts  # noqa: E402  (its measurement() record builder and compare table reader)


def run(script, *args):
    return subprocess.run([sys.executable, str(SCRIPTS / script)] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=300)


def env(device=0, host="node", commit="c0ffee", seed=1, reps=5, experiments=("e",), no_gpu=False, **extra):
    argv = ["/x/klab", "run", *experiments, "--reps", str(reps), "--seed", str(seed), "--device", str(device),
            "--out", f"out/device-{device}"]
    e = {"git_commit": commit, "git_dirty": False, "date": "2026-12-01T00:00:00Z", "host": host, "command": " ".join(argv),
         "device": {"name": "FIXTURE GPU (test data)", "index": device},
         "options": {"reps": reps, "warmup": 5, "seed": seed, "modes": ["launch", "stream"], "headline": "stream"}}
    e.update(extra)
    if no_gpu:
        e["device"] = None
    return argv, e


def m(variant, launch=None, stream=None):
    """A measurement timed launch and/or stream, each repetition at the given ms (median = it)."""
    modes = {k: [v] * 5 for k, v in (("launch", launch), ("stream", stream)) if v is not None}
    r = ts.measurement(variant, modes=modes, headline="stream" if stream is not None else "launch")
    del r["env"]  # the header's
    return r


# Device 0 and device 1 of one run. Spreads max/min - 1 per matched measurement:
#   v/a launch 1.00 vs 1.10 -> 0.10;          stream 2.00 vs 2.00 -> 0
#   v/b launch 1.00 vs 0.95 -> 1/0.95 - 1;    stream 1.00 vs 1.02 -> 0.02
#   v/c launch 2.00 vs 2.02 -> 0.01;          stream 3.00 vs 3.03 -> 0.01
#   v/d launch 4.00 vs 4.00 -> 0;             stream on device 0 only: not matched in stream
#   v/only on device 0: not matched (1 unmatched)
# launch, sorted: 0, 0.01, 0.052632, 0.10: median (0.01 + 0.052632) / 2; p90 at 0.9 * 3 = 2.7:
# 0.052632 + 0.7 * (0.10 - 0.052632). stream: 0, 0.01, 0.02: median 0.01, p90 at 1.8: 0.018.
DEV0 = [m("v/a", 1.0, 2.0), m("v/b", 1.0, 1.0), m("v/c", 2.0, 3.0), m("v/d", 4.0, 5.0), m("v/only", 1.0, 1.0)]
DEV1 = [m("v/a", 1.10, 2.0), m("v/b", 0.95, 1.02), m("v/c", 2.02, 3.03), m("v/d", 4.0)]
LAUNCH_MEDIAN = (0.01 + (1 / 0.95 - 1)) / 2
LAUNCH_P90 = (1 / 0.95 - 1) + 0.7 * (0.10 - (1 / 0.95 - 1))


def write_report(tmp, name, records, **env_args):
    """A complete schema-2 report tmp/name of these records, its header's env from env(**env_args)."""
    argv, e = env(**env_args)
    lines = [{"kind": "header", "schema_version": 2, "start": e["date"], "argv": argv, "env": e}] + records
    lines.append({"kind": "end", "status": "complete", "records": len(records)})
    d = tmp / name
    d.mkdir()
    (d / "report.jsonl").write_text("".join(json.dumps(l) + "\n" for l in lines), encoding="utf-8")
    return d


def gpu_noise(tmp, *args):
    """gpu_noise.py ARGS --out tmp/noiseN.json: (the process, the JSON's path)."""
    out = tmp / f"noise{len(list(tmp.iterdir()))}.json"
    return run("gpu_noise.py", *args, "--out", out), out


class GpuNoise(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="klab-gpu-noise-"))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def report(self, name, records, **env_args):
        return write_report(self.tmp, name, records, **env_args)

    def noise(self, *args):
        return gpu_noise(self.tmp, *args)

    def test_spread_of_matched_measurements(self):
        a, b = self.report("d0", DEV0, device=0), self.report("d1", DEV1, device=1)
        p, out = self.noise(a, b)
        self.assertEqual(p.returncode, 0, p.stderr)
        j = json.loads(out.read_text())
        self.assertEqual(j["what"], "GPU-to-GPU")
        self.assertEqual([g["index"] for g in j["gpus"]], [0, 1])
        self.assertEqual(j["gpus"][0]["name"], "FIXTURE GPU (test data)")
        la, st = j["modes"]["launch"], j["modes"]["stream"]
        self.assertEqual((la["matched"], st["matched"]), (4, 3))
        self.assertAlmostEqual(la["median"], LAUNCH_MEDIAN, places=12)
        self.assertAlmostEqual(la["p90"], LAUNCH_P90, places=12)
        self.assertAlmostEqual(la["max"], 0.10, places=12)
        self.assertEqual(la["worst"]["name"], "v/a")
        self.assertAlmostEqual(st["median"], 0.01, places=12)
        self.assertAlmostEqual(st["p90"], 0.018, places=12)
        self.assertEqual(j["unmatched"], {str(a / "report.jsonl"): 1})
        self.assertIn(f"launch: 4 matched measurement(s), 4 comparison(s): |t_i/t_j - 1| median {100 * LAUNCH_MEDIAN:.2f}%, "
                      f"p90 {100 * LAUNCH_P90:.2f}%, max 10.00%", p.stdout)
        # The order the reports are given in does not change the spread.
        p2, out2 = self.noise(b, a)
        self.assertEqual(p2.returncode, 0, p2.stderr)
        self.assertAlmostEqual(json.loads(out2.read_text())["modes"]["launch"]["p90"], LAUNCH_P90, places=12)
        # Three GPUs: three pairs; device 2 equal to device 1 adds 0.10, 1/0.95 - 1, ... again (pair 0-2) and zeros (1-2).
        c = self.report("d2", DEV1, device=2)
        p3, out3 = self.noise(a, b, c)
        self.assertEqual(p3.returncode, 0, p3.stderr)
        j3 = json.loads(out3.read_text())
        self.assertEqual([(q["a"], q["b"]) for q in j3["pairs"]], [(0, 1), (0, 2), (1, 2)])
        self.assertEqual(j3["modes"]["launch"]["comparisons"], 12)
        self.assertEqual(j3["pairs"][2]["modes"]["launch"]["max"], 0)

    def refused(self, says, *reports, same_gpu=False):
        p, out = self.noise(*reports, *(["--same-gpu"] if same_gpu else []))
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn(says, p.stderr)
        self.assertIn("nothing written", p.stderr)
        self.assertFalse(out.exists())

    def test_reports_of_different_runs_or_nothing_matched_are_refused(self):
        a = self.report("a", DEV0, device=0)
        self.refused("git_commit differs", a, self.report("commit", DEV1, device=1, commit="beef"))
        self.refused("options.seed differs", a, self.report("seed", DEV1, device=1, seed=2))
        self.refused("options.reps differs", a, self.report("reps", DEV1, device=1, reps=9))
        self.refused("the command lines differ", a, self.report("exps", DEV1, device=1, experiments=("e", "f")))
        self.refused("no timed measurement matched", a, self.report("other", [m("v/x", 1.0, 1.0)], device=1))
        self.refused("a shard report", a, self.report("shard", DEV1, device=1, options={"shard": {"index": 0, "count": 2}}))
        self.refused("ran without a GPU", a, self.report("nodev", DEV1, device=1, no_gpu=True))
        self.refused("give two reports or more", a)
        self.refused("given twice", a, a / "report.jsonl")
        # Two reports of one GPU (same host and index): run-to-run, refused unless --same-gpu says so.
        same = self.report("same", DEV1, device=0)
        self.refused("ran on the same GPU", a, same)
        p, out = self.noise(a, same, "--same-gpu")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(out.read_text())["what"], "run-to-run on one GPU")
        self.assertTrue(p.stdout.startswith("run-to-run on one GPU spread"))
        # The same index on another host is another GPU.
        self.assertEqual(self.noise(a, self.report("host", DEV1, device=0, host="other"))[0].returncode, 0)


class CompareWithGpuNoise(ts.TempDir):
    def setUp(self):
        super().setUp()
        self.old = self.write_report("old", [json.dumps(ts.measurement("v/k", modes={"launch": [2.0] * 10, "stream": [1.0] * 10}))])
        # 4% faster in both modes, every repetition: the interval is 0.96..0.96, beyond the 3% band.
        self.new = self.write_report("new", [json.dumps(ts.measurement("v/k", modes={"launch": [1.92] * 10, "stream": [0.96] * 10}))])

    def compare(self, *args):
        return run("compare.py", self.old, self.new, "--markdown", *args)

    def noise_file(self, launch_p90, name="noise.json", **fields):
        j = {"kind": "klab_gpu_noise", "version": 1, "what": "GPU-to-GPU", "gpus": [{"name": "FIXTURE GPU (test data)"}] * 2,
             "modes": {"launch": {"matched": 7, "p90": launch_p90}, "stream": {"matched": 7, "p90": 0.018}}}
        j.update(fields)
        f = self.tmp / name
        f.write_text(json.dumps(j))
        return f

    def verdicts(self, p):
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        table, _ = ts.CompareTest.rows(None, p.stdout, by_mode=True)
        return {mode: v[2] for (_, mode), v in table.items()}

    def test_a_wider_gpu_spread_turns_faster_into_same(self):
        self.assertEqual(self.verdicts(self.compare()), {"launch": "faster", "stream": "faster"})
        # launch: the GPUs differ by up to 8.6% (p90): 4% faster is inside it. stream: 1.8% < 3%: unchanged.
        p = self.compare("--gpu-noise", self.noise_file(LAUNCH_P90))
        self.assertEqual(self.verdicts(p), {"launch": "same", "stream": "faster"})
        self.assertIn(f"band launch: 1 -/+ {LAUNCH_P90:.4f}, set by the GPU-to-GPU spread", p.stdout)
        self.assertIn("band stream: 1 -/+ 0.0300, set by --band (the GPU-to-GPU spread's p90 1.80% is not wider)", p.stdout)
        self.assertIn(f"launch 1 -/+ {LAUNCH_P90:.4f} (GPU-to-GPU)", p.stdout.splitlines()[-1])
        # A spread narrower than the difference changes nothing.
        self.assertEqual(self.verdicts(self.compare("--gpu-noise", self.noise_file(0.02, "narrow.json"))),
                         {"launch": "faster", "stream": "faster"})
        # The JSON gpu_noise.py writes is what compare.py reads.
        a, b = write_report(self.tmp, "d0", DEV0, device=0), write_report(self.tmp, "d1", DEV1, device=1)
        n, out = gpu_noise(self.tmp, a, b)
        self.assertEqual(n.returncode, 0, n.stderr)
        self.assertEqual(self.verdicts(self.compare("--gpu-noise", out))["launch"], "same")

    def test_one_gpu_on_both_sides_is_noted(self):
        noise = self.noise_file(LAUNCH_P90)
        old = write_report(self.tmp, "o", [m("v/k", 2.0, 1.0)], device=0)
        for name, device, noted in (("same", 0, True), ("other", 1, False)):
            new = write_report(self.tmp, name, [m("v/k", 1.92, 0.96)], device=device)
            p = run("compare.py", old, new, "--gpu-noise", noise)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual("note: OLD and NEW ran on one GPU (host node, device 0)" in p.stdout, noted, p.stdout)

    def test_a_file_that_is_not_gpu_noise_is_refused(self):
        for f, says in ((self.noise_file(0.05, "kind.json", kind="other"), "not the JSON of scripts/gpu_noise.py"),
                        (self.noise_file(-1, "neg.json"), "modes.launch: needs a mode"),
                        (self.tmp / "missing.json", "cannot read")):
            p = self.compare("--gpu-noise", f)
            self.assertEqual(p.returncode, 2, p.stdout)
            self.assertIn(says, p.stderr)


if __name__ == "__main__":
    unittest.main()
