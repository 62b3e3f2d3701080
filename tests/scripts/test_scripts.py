#!/usr/bin/env python3
"""Tests of scripts/plot.py, scripts/summarize.py and scripts/compare.py (unittest, no pytest).

Each script runs as a subprocess under this interpreter (sys.executable) on the small reports in
tests/scripts/data/ (hand-made, following reports/SCHEMA.md; their GPU is "FIXTURE GPU": they are
not measurements) or on reports built in a temporary directory. Expected figures below are worked
out from the fixture values by hand (the derivation is in the comments), not read from the scripts.

    /usr/bin/python3 tests/scripts/test_scripts.py      (ctest: the "scripts" test)

matplotlib is required: without it this fails, saying so, rather than skipping.
"""
import json
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SCRIPTS = ROOT / "scripts"
DATA = HERE / "data"

WR1 = "f32_gemv/impl=warp-row,unroll=1"
WR4 = "f32_gemv/impl=warp-row,unroll=4"
WR8 = "f32_gemv/impl=warp-row,unroll=8"
CUB = "f32_gemv/impl=cublas-sgemv"


# The environment of the reports built below (a FIXTURE GPU, like the committed ones).
ENV = {"device": {"name": "FIXTURE GPU (test data)"}, "ceiling": {"read_gbps": 4000.0, "copy_gbps": 3600.0},
       "git_commit": "0123456789abcdef", "git_dirty": False, "date": "2026-01-01T00:00:00Z"}


def timing(samples, mode=None, **extra):
    """A timing object over these repetitions (median, min, max of them); with a mode, as the
    harness with timing modes writes it (flush "read" unless extra says otherwise)."""
    t = {"median_ms": statistics.median(samples), "min_ms": min(samples), "max_ms": max(samples), "samples_ms": list(samples)}
    if mode:
        t.update(mode=mode, flush="read")
        if mode == "stream":
            t.update(launches=8, copies=3)
    t.update(extra)
    return t


def measurement(variant, samples=None, modes=None, headline="stream", experiment="e", shape="64x64", dist="uniform", env=None, **extra):
    """A measurement record. samples: timed the old way (no mode); modes: {mode: samples or
    (samples, {field: value})}, the harness with timing modes (headline one of them; its fields
    are also the record's top-level ones)."""
    r = {"kind": "measurement", "experiment": experiment, "variant": variant, "op": variant.split("/")[0], "shape": shape,
         "dist": dist, "env": ENV if env is None else env, "verified": True}
    if samples is not None:
        r["timing"] = timing(samples)
    if modes:
        r["modes"] = {}
        for m, v in modes.items():
            s, fields = v if isinstance(v, tuple) else (v, {})
            r["modes"][m] = dict({"timing": timing(s, m)}, **fields)
        r.update(r["modes"][headline])
    r.update(extra)
    return r


def run(script, *args):
    return subprocess.run([sys.executable, str(SCRIPTS / script)] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=600)


class TempDir(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="klab-scripts-test-"))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def copy(self, name):
        """A fixture report copied into the temporary directory (the scripts write beside it)."""
        dst = self.tmp / name
        shutil.copytree(DATA / name, dst)
        return dst

    def write_report(self, name, lines):
        d = self.tmp / name
        d.mkdir()
        (d / "report.jsonl").write_text("".join(l + "\n" for l in lines), encoding="utf-8")
        return d

    def assertOk(self, p):
        self.assertEqual(p.returncode, 0, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")


def modes_report():
    """Records of a run with timing modes (stream the headline), worked out by hand: f32_gemv on
    1000x1000, 4e6 bytes and 1e6 MACs. A: stream median 0.002 ms -> 4e6 B / 2e-6 s = 2000 GB/s =
    50% of the 4000 GB/s ceiling, 80% of a 2500 GB/s size-matched read, 1e6 / 2e-6 s = 500 GMAC/s;
    launch 0.004 ms -> 1000 GB/s = 25%, 50% of 2000 GB/s. B could not be captured in a graph:
    launch only, 0.005 ms -> 800 GB/s = 20%, 800 / 2000 = 40% of attainable (pct_attainable not
    written: from attainable_gbps), 200 GMAC/s."""
    # The ceiling as the harness writes it: both modes, read_gbps the higher.
    env = dict(ENV, ceiling={"read_gbps": 4000.0, "copy_gbps": 3600.0, "mode": "launch and stream", "flush": "read",
                             "modes": {"launch": {"read_gbps": 3900.0}, "stream": {"read_gbps": 4000.0, "copy_gbps": 3700.0}},
                             "empty_kernel_us": {"stream": 0.75, "launch": 2.5},
                             "hop_us": {"one_block": {"plain": 1.25, "pdl": 1.5}, "full_grid": {"plain": 2.25, "pdl": 1.75}}},
               options={"reps": 3, "flush": "read", "modes": ["launch", "stream"], "headline": "stream"})
    common = dict(experiment="modes", shape="1000x1000", env=env, bytes=4e6, macs=1e6, ceiling_gbps=4000.0, a="f32_gemv/impl=a")
    a = measurement("f32_gemv/impl=a", modes={
        "stream": ([0.0019, 0.002, 0.0021], {"gbps": 2000.0, "gmacs": 500.0, "pct_ceiling": 50.0, "pct_attainable": 80.0, "attainable_gbps": 2500.0}),
        "launch": ([0.0039, 0.004, 0.0041], {"gbps": 1000.0, "gmacs": 250.0, "pct_ceiling": 25.0, "pct_attainable": 50.0, "attainable_gbps": 2000.0})},
        **common)
    b = measurement("f32_gemv/impl=b", headline="launch", stream_unavailable="captures a cuBLAS handle", modes={
        "launch": ([0.0045, 0.005, 0.0055], {"gbps": 800.0, "gmacs": 200.0, "pct_ceiling": 20.0, "attainable_gbps": 2000.0,
                                              "vs_a": {"ratio": 1.25, "ci95_lo": 1.2, "ci95_hi": 1.3, "speedup": 0.8, "verdict": "slower"}})},
        **common)
    # GDN: 1e6 bytes per step in 0.1 ms = 10000 GB/s... a fixture: 250% of the ceiling, 200% of 5000 GB/s.
    gdn = {"kind": "gdn_timing", "experiment": "modes", "tier": "q4", "mode": "device-resident", "layers": 1, "tokens": 4,
           "ms_per_layer_token": {"median": 0.1}, "timing": timing([0.4], "launch"), "env": env,
           "gbps": 10000.0, "pct_ceiling": 250.0, "attainable_gbps": 5000.0, "pct_attainable": 200.0}
    return [json.dumps(r) for r in (a, b, gdn)]


class PlotTest(TempDir):
    # No accuracy-seed-ladder: the ladder's max_rel all lie within one decade (a table in summary.md).
    RUN_FIGURES = ["bandwidth-f32-gemv-vs-cublas", "accuracy-f32-gemv-vs-cublas", "bandwidth-seed-ladder",
                   "seed-ladder-17408x5120"]
    GDN_FIGURES = ["error-budget", "gdn-timing", "gdn-ops-gdn-oracle-qwen35-27b-layer0-t5-q4-vs-f32",
                   "gdn-ops-gdn-oracle-qwen35-27b-layer0-t5-gpu-f32-vs-oracle"]

    def assertFigures(self, plots, names):
        self.assertEqual(sorted(p.name for p in plots.iterdir()), sorted(f"{n}.{e}" for n in names for e in ("png", "svg")))
        for n in names:
            png = (plots / f"{n}.png").read_bytes()
            self.assertTrue(png.startswith(b"\x89PNG\r\n\x1a\n"), f"{n}.png is not a PNG")
            self.assertGreater(len(png), 5000, f"{n}.png is suspiciously small")
            # IHDR's colour type (byte 25): 3, a palette PNG (plot.py's to_palette), not 6 (RGBA, 4x the bytes)
            self.assertEqual(png[25], 3, f"{n}.png is not a palette PNG")
            svg = (plots / f"{n}.svg").read_text()
            self.assertIn("<svg", svg)
            self.assertGreater(len(svg), 5000)

    @staticmethod
    def bandwidth_bars(rep, experiment):
        """(bar heights rounded to 0.01, the strings drawn on the axes, the title) of the bandwidth
        figure plot.py draws for one experiment of a report."""
        sys.path.insert(0, str(SCRIPTS))
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import klab_report as kr
        import plot
        report = kr.load(rep)
        plan, _ = kr.chart_plan(report)
        recs = next(payload for _, kind, e, payload in plan if kind == "bandwidth" and e == experiment)
        figs = plot.draw_bandwidth(plt, report, experiment, recs)
        fig = figs[0] if isinstance(figs, list) else figs
        ax = fig.axes[0]
        out = ([round(b.get_height(), 2) for b in ax.patches], [t.get_text() for t in ax.texts], ax.get_title())
        plt.close(fig)
        return out

    @staticmethod
    def texts(svg_file):
        """The strings drawn in an SVG figure (matplotlib writes each as a comment beside its path)."""
        return set(re.findall(r"<!-- (.*?) -->", svg_file.read_text()))

    def test_measurements_give_bandwidth_accuracy_and_ladder_figures(self):
        rep = self.copy("run")
        p = run("plot.py", rep)
        self.assertOk(p)
        self.assertFigures(rep / "plots", self.RUN_FIGURES)
        # The absent kinds are skipped with a note, not silently.
        for kind in ("error_budget", "gdn_op", "gdn_timing"):
            self.assertIn(f"no {kind} records", p.stdout)
        bw = self.texts(rep / "plots" / "bandwidth-f32-gemv-vs-cublas.svg")
        # The ceiling of this run is drawn: env.ceiling.read_gbps = 4000.
        self.assertIn("read ceiling measured in this run (4000 GB/s)", bw)
        # The bars, from the figure itself (an SVG's strings hold the axis ticks too: "80" is one).
        heights, labels, title = self.bandwidth_bars(rep, "f32-gemv-vs-cublas")
        # warp-row on 4096x4096: 67141632 bytes / 0.02005 ms = 3349 GB/s = 83.72% of 4000 -> "84";
        # cuBLAS: 67141632 / 0.02105 ms = 3190 GB/s = 79.74% -> "80"; on 33x160: 21892 B / 0.003 ms
        # = 7.297 GB/s = 0.1824% -> "0.18", and 21892 / 0.0042 ms = 5.212 GB/s = 0.1303% -> "0.13".
        # Drawn variant by variant (in the order they first appear: warp-row,unroll=1, cuBLAS,
        # warp-row,unroll=4), each over the shapes; unroll=4 failed verification on 33x160: no bar.
        self.assertEqual(heights, [83.72, 0.18, 79.74, 0.13])
        self.assertEqual(labels, ["84", "0.18", "80", "0.13", "failed\nverification"])
        # A report from before the timing modes was timed in launch mode.
        self.assertIn("bandwidth per variant and shape, launch timing\n", title)
        # unroll=4 failed verification on 33x160: no bar, a label saying why.
        self.assertIn("verification", bw)
        self.assertIn("impl=warp-row,unroll=4", bw)
        lad = self.texts(rep / "plots" / "seed-ladder-17408x5120.svg")
        # Medians 0.1413, 0.0996, 0.0520, 0.0582 ms: per rung 1.42, 1.92, 0.89; cumulative 2.72, 2.43.
        for s in ("x1.42", "x1.92", "x0.89", "x2.72", "x2.43", "bitwise equal to the previous rung",
                  "bits changed vs the previous rung", "f16=hard", "rows=4"):
            self.assertIn(s, lad)
        # 17408*5120 MACs / 0.0520 ms = 1714 GMAC/s.
        self.assertIn("1714 GMAC/s", lad)
        acc = self.texts(rep / "plots" / "accuracy-f32-gemv-vs-cublas.svg")
        self.assertIn("tolerance (max_rel allowed)", acc)
        self.assertIn("5.00e-01", acc)  # the failed variant's max_rel

    def test_bandwidth_in_the_headline_mode(self):
        rep = self.write_report("modes", modes_report())
        self.assertOk(run("plot.py", rep))
        heights, labels, title = self.bandwidth_bars(rep, "modes")
        # The headline's % of ceiling (modes_report: A stream 50%, B launch only 20%); B's bar says
        # it is launch, and so does the title.
        self.assertEqual(heights, [50.0, 20.0])
        self.assertEqual(labels, ["50", "20\nlaunch"])
        self.assertIn("modes: bandwidth per variant and shape, stream timing (launch where marked)", title)
        bw = self.texts(rep / "plots" / "bandwidth-modes.svg")
        self.assertIn("read ceiling measured in this run (4000 GB/s; launch 3900; stream 4000)", bw)

    def test_gdn_and_error_budget_figures(self):
        rep = self.copy("gdn")
        p = run("plot.py", rep)
        self.assertOk(p)
        self.assertFigures(rep / "plots", self.GDN_FIGURES)
        self.assertIn("no measurement records", p.stdout)
        eb = self.texts(rep / "plots" / "error-budget.svg")
        for d in ("uniform", "normal", "student-t", "outlier", "file"):
            self.assertIn(d, eb)
        self.assertIn("3.26e-03", eb)
        self.assertIn("4.53e-02", eb)
        ops = self.texts(rep / "plots" / "gdn-ops-gdn-oracle-qwen35-27b-layer0-t5-q4-vs-f32.svg")
        for op in ("XC", "XCV", "Z", "Q", "K", "A", "B", "BETA", "G", "ON", "ONN", "OUT", "S", "HIST"):
            self.assertIn(op, ops)
        self.assertIn("0", ops)  # BETA and G are exactly 0: marked, not lost on the log axis
        self.assertIn("rms_rel, last token", ops)
        svg = (rep / "plots" / "gdn-ops-gdn-oracle-qwen35-27b-layer0-t5-q4-vs-f32.svg").read_text()
        # Drawn in step order although the fixture lists OUT first.
        self.assertLess(svg.index("<!-- XC -->"), svg.index("<!-- OUT -->"))
        t = self.texts(rep / "plots" / "gdn-timing.svg")
        for s in ("host-facing", "device-resident", "f32", "q4", "0.156", "0.47"):
            self.assertIn(s, t)

    def test_report_without_measurements_gives_no_figure_and_exit_0(self):
        rep = self.copy("nodevice")  # real `klab run` output on a machine without a GPU
        p = run("plot.py", rep)
        self.assertOk(p)
        self.assertIn("no figure", p.stdout)
        self.assertIn("no measurement records", p.stdout)
        self.assertFalse((rep / "plots").exists() and any((rep / "plots").iterdir()))

    def test_untimed_measurement_still_gives_a_figure(self):
        # Two variants 3e-7 and 3e-4 apart (more than a decade: a figure, not a table).
        rec = {"kind": "measurement", "experiment": "cpu-only", "variant": "f32_gemv/impl=x", "op": "f32_gemv",
               "shape": "8x8", "dist": "normal", "accuracy": {"max_rel": 3e-7}, "verified": True, "tolerance": 1e-5}
        rec2 = dict(rec, variant="f32_gemv/impl=y", accuracy={"max_rel": 3e-4}, verified=False)
        rep = self.write_report("untimed", [json.dumps(rec), json.dumps(rec2)])
        p = run("plot.py", rep)
        self.assertOk(p)
        self.assertIn("cpu-only: no timed measurement", p.stdout)
        self.assertFigures(rep / "plots", ["accuracy-cpu-only"])

    def test_out_and_formats(self):
        out = self.tmp / "figs"
        p = run("plot.py", DATA / "gdn" / "report.jsonl", "--out", out, "--formats", "png")
        self.assertOk(p)
        self.assertEqual(sorted(f.name for f in out.iterdir()), sorted(f"{n}.png" for n in self.GDN_FIGURES))
        bad = run("plot.py", DATA / "gdn", "--out", out, "--formats", "gif")
        self.assertEqual(bad.returncode, 2)
        self.assertIn("gif", bad.stderr)

    def test_figures_are_byte_stable(self):
        # Committed figures should change only when the data does: two runs give the same bytes.
        a, b = self.tmp / "a", self.tmp / "b"
        self.assertOk(run("plot.py", DATA / "run", "--out", a))
        self.assertOk(run("plot.py", DATA / "run", "--out", b))
        for f in a.iterdir():
            self.assertEqual(f.read_bytes(), (b / f.name).read_bytes(), f"{f.name} differs between two runs")


def many_variants_report(n_ours=15, n_peers=2, shapes=("64x64", "128x128")):
    """n_ours variants of ours and n_peers peers (peer: true) on each shape, every one timed
    (4e6 bytes in 0.002 ms: 2000 GB/s, 50% of 4000) and with a max_rel spread over decades (1e-7 .. 1e-2), so that both figures are
    bar charts with n_ours + n_peers series."""
    lines = []
    for shape in shapes:
        for i in range(n_ours + n_peers):
            peer = i >= n_ours
            v = f"f32_gemv/impl={'peer' if peer else 'ours'}{i}"
            extra = {"peer": True} if peer else {}
            lines.append(json.dumps(measurement(v, [0.0019, 0.002, 0.0021], experiment="many", shape=shape, bytes=4e6, gbps=2000.0,
                                                ceiling_gbps=4000.0, accuracy={"max_rel": 10.0 ** -(7 - i % 6)}, **extra)))
    return lines


class ScalingPlotTest(TempDir):
    """Figures with many series: reads the artists of figures drawn in this process."""

    def draw(self, rep, kind, experiment):
        sys.path.insert(0, str(SCRIPTS))
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import klab_report as kr
        import plot
        report = kr.load(rep)
        plan, _ = kr.chart_plan(report)
        figs = []
        for _, k, e, payload in plan:
            if k == kind and experiment in (None, e):
                drawn = plot.DRAW[kind](plt, report, e, payload)
                figs += drawn if isinstance(drawn, list) else [drawn]
                if experiment is not None:
                    break
        self.assertTrue(figs, f"no {kind} figure")
        self.addCleanup(lambda: [plt.close(f) for f in figs])
        return figs

    @staticmethod
    def looks(ax):
        """(facecolour, hatch) of each bar container of an axes, in drawing order, with whether
        its bars are outlined in black."""
        from matplotlib.colors import to_hex
        from matplotlib.container import BarContainer
        out = []
        for c in ax.containers:
            if isinstance(c, BarContainer) and len(c.patches):
                b = c.patches[0]
                out.append((to_hex(b.get_facecolor()), b.get_hatch() or "", to_hex(b.get_edgecolor()) == "#000000"))
        return out

    def test_no_two_series_look_alike_and_peers_stand_apart(self):
        rep = self.write_report("many", many_variants_report())
        for kind in ("bandwidth", "accuracy"):
            figs = self.draw(rep, kind, "many")
            for fig in figs:
                for ax in fig.axes:
                    looks = self.looks(ax)
                    if not looks:
                        continue
                    seen = [(f, h) for f, h, _ in looks]
                    # 17 series: with ten colours, two would share one unless told apart.
                    self.assertEqual(len(seen), len(set(seen)), f"{kind}: two series look alike: {seen}")
            # All 17 series are drawn (15 ours, then 2 peers, in record order), over the figures.
            looks = [l for fig in figs for ax in fig.axes for l in self.looks(ax)]
            self.assertEqual(len(looks), 17, kind)
            # Peers: black outline and a "//" hatching; none of ours has either.
            for i, (_, hatch, black) in enumerate(looks):
                peer = i >= 15
                self.assertEqual("//" in hatch, peer, f"{kind} series {i}: hatch {hatch!r}")
                self.assertEqual(black, peer, f"{kind} series {i}")


    def assertLegendsOutside(self, fig, what):
        """Every legend of the figure lies outside every axes' data area (display coordinates)."""
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        legends = [l for l in [ax.get_legend() for ax in fig.axes] + list(fig.legends) if l is not None]
        self.assertTrue(legends, f"{what}: no legend")
        for leg in legends:
            lb = leg.get_window_extent(renderer)
            for ax in fig.axes:
                self.assertFalse(lb.overlaps(ax.get_window_extent(renderer)), f"{what}: the legend covers the data area")

    def test_legends_outside_the_data(self):
        # The error budget's legend sat inside its left panel, the ladder's and GDN timing's inside
        # their axes.
        gdn = self.copy("gdn")
        for kind in ("error_budget", "gdn_timing", "gdn_op"):
            for fig in self.draw_all(gdn, kind):
                self.assertLegendsOutside(fig, kind)
        for fig in self.draw_all(self.copy("run"), "ladder"):
            self.assertLegendsOutside(fig, "ladder")
        many = self.write_report("many", many_variants_report())
        for kind in ("bandwidth", "accuracy"):
            for fig in self.draw(many, kind, "many"):
                self.assertLegendsOutside(fig, kind)

    def draw_all(self, rep, kind):
        """Every figure of one kind in a report."""
        return self.draw(rep, kind, None)

    def test_wide_figures_are_split(self):
        # 40 variants on 2 shapes: 1.2 + 2 * (0.5 + 0.35 * 40) = 30.2 in, 3624 px at 120 dpi in one
        # figure. Capped at 16 in: one shape per figure (1.2 + 14.5 = 15.7 in), so two parts each,
        # every one under 16 in plus margins (a legend, a secondary axis): 2300 px at most.
        rep = self.write_report("wide", many_variants_report(n_ours=38, n_peers=2))
        self.assertOk(run("plot.py", rep, "--formats", "png"))
        names = sorted(p.name for p in (rep / "plots").iterdir())
        self.assertEqual(names, ["accuracy-many-part2.png", "accuracy-many.png", "bandwidth-many-part2.png", "bandwidth-many.png"])
        for n in names:
            png = (rep / "plots" / n).read_bytes()
            width = int.from_bytes(png[16:20], "big")
            self.assertLess(width, 2300, n)
        # Each part holds all 40 series of one shape (the looks stay distinct, across the parts too).
        for kind in ("bandwidth", "accuracy"):
            figs = self.draw(rep, kind, "many")
            self.assertEqual(len(figs), 2)
            looks = [self.looks(fig.axes[0]) for fig in figs]
            self.assertEqual([len(l) for l in looks], [40, 40])
            self.assertEqual(looks[0], looks[1])
            self.assertEqual(len({(f, h) for f, h, _ in looks[0]}), 40)


    # Issue 12: peers off the ladder line, flat accuracy as a table, the error budget's width capped.
    def test_ladder_peers_stand_apart_from_the_line(self):
        # Rungs 0.2, 0.1, 0.08 ms; a peer at 0.05 ms recorded between rungs 1 and 2. The line runs
        # through the rungs only: x 0, 1, 2 at 0.2/0.2 = 1, 0.2/0.1 = 2, 0.2/0.08 = 2.5; rung 2's
        # previous is rung 1 (0.1/0.08 = 1.25), not the peer. The peer: a marker at 0.2/0.05 = 4.0,
        # right of every rung.
        recs = [measurement(f"q4_gemv/rung={i}", [ms] * 3, experiment="seed-ladder", shape="64x64", axes={"rung": str(i)}, **x)
                for i, ms, x in ((0, 0.2, {}), (1, 0.1, {"bits_vs_prev": 0}))]
        recs.append(measurement("q4_gemv/impl=cublas", [0.05] * 3, experiment="seed-ladder", shape="64x64", peer=True))
        recs.append(measurement("q4_gemv/rung=2", [0.08] * 3, experiment="seed-ladder", shape="64x64", axes={"rung": "2"}, bits_vs_prev=3))
        rep = self.write_report("ladder", [json.dumps(r) for r in recs])
        (fig,) = self.draw(rep, "ladder", "seed-ladder")
        ax = fig.axes[0]
        line = next(l for l in ax.lines if l.get_label() == "cumulative: vs rung 0")
        self.assertEqual(list(line.get_xdata()), [0, 1, 2])
        self.assertEqual([round(y, 6) for y in line.get_ydata()], [1.0, 2.0, 2.5])
        from matplotlib.container import BarContainer
        heights = [round(b.get_height(), 6) for c in ax.containers if isinstance(c, BarContainer) for b in c.patches]
        self.assertEqual(heights, [1.0, 2.0, 1.25])
        (peer,) = [l for l in ax.lines if l.get_gid() == "ladder-peer"]
        self.assertGreater(peer.get_xdata()[0], 2.5)
        self.assertAlmostEqual(peer.get_ydata()[0], 4.0)
        self.assertIn("peer\nimpl=\ncublas", [t.get_text() for t in ax.get_xticklabels()][-1])
        self.assertLegendsOutside(fig, "ladder")

    def test_flat_accuracy_is_a_table_not_a_figure(self):
        # max_rel 1e-7, 2e-7, 3e-7: 3e-7 < 10 x 1e-7, one decade: no figure, a table with a note.
        flat = [json.dumps(measurement(f"f32_gemv/impl=v{i}", [0.01] * 3, experiment="flat", accuracy={"max_rel": (i + 1) * 1e-7},
                                       tolerance=1e-5)) for i in range(3)]
        # 1e-7 and 1e-6: 10x apart, not within one decade: a figure.
        spread = [json.dumps(measurement(f"f32_gemv/impl=v{i}", [0.01] * 3, experiment="spread", accuracy={"max_rel": 10.0 ** (i - 7)}))
                  for i in range(2)]
        rep = self.write_report("acc", flat + spread)
        p = run("plot.py", rep, "--formats", "png")
        self.assertOk(p)
        names = sorted(x.name for x in (rep / "plots").iterdir())
        self.assertEqual(names, ["accuracy-spread.png", "bandwidth-flat.png", "bandwidth-spread.png"])
        self.assertIn("flat: every max_rel lies within one decade (1.00e-07..3.00e-07): no accuracy figure, a table in summary.md instead",
                      p.stdout)
        self.assertOk(run("summarize.py", rep))
        md = (rep / "summary.md").read_text()
        self.assertIn("Accuracy (max_rel = max|y-ref| / max|ref|) as a table, not a figure: every max_rel lies within one decade "
                      "(1.00e-07..3.00e-07); tolerance 1e-05:", md)
        self.assertIn("| f32_gemv/impl=v2 | 3.00e-07 |", md)
        self.assertEqual(md.count("as a table, not a figure"), 1)  # not for "spread"

    def test_error_budget_width_capped(self):
        # 12 series (6 shapes x 2 comparisons) x 5 distributions: 2 + 1.6 * 5 * sqrt(12) = 29.7 in before.
        # Capped at 16 in (1920 px at 120 dpi), the legend below the panels: split into parts.
        recs = [json.dumps({"kind": "error_budget", "experiment": "error-budget", "shape": f"{64 * (i + 1)}x64", "dist": d,
                            "what": w, "rms_rel": 0.01, "max_rel": 0.02, "env": ENV})
                for i in range(6) for w in ("q4 vs f32 weights", "q8_0 vs f32 activations")
                for d in ("uniform", "normal", "student-t", "outlier", "file")]
        rep = self.write_report("eb", recs)
        self.assertOk(run("plot.py", rep, "--formats", "png"))
        names = sorted(x.name for x in (rep / "plots").iterdir())
        self.assertGreater(len(names), 1, names)
        for n in names:
            png = (rep / "plots" / n).read_bytes()
            self.assertLessEqual(int.from_bytes(png[16:20], "big"), 1920, n)
        figs = self.draw(rep, "error_budget", "error-budget")
        self.assertEqual(len(figs), len(names))
        for fig in figs:
            self.assertLegendsOutside(fig, "error_budget")
        # Every series drawn once over the parts (two panels each), with a look of its own.
        looks = [l for fig in figs for l in self.looks(fig.axes[0])]
        self.assertEqual(len(looks), 12)
        self.assertEqual(len({(f, h) for f, h, _ in looks}), 12)

    def test_verdict_marks_on_bandwidth_bars(self):
        # modes_report: B (the second of two variants) has vs_a.verdict "slower"; A none. Two
        # series: bars 0.4 wide, at -0.2 and +0.2 of the group's centre 0: one "v" mark at x 0.2.
        rep = self.write_report("modes", modes_report())
        (fig,) = self.draw(rep, "bandwidth", "modes")
        ax = fig.axes[0]
        marks = [(l.get_gid(), l.get_marker(), [round(x, 9) for x in l.get_xdata()]) for l in ax.lines if (l.get_gid() or "").startswith("verdict-")]
        self.assertEqual(marks, [("verdict-slower", "v", [0.2])])
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        self.assertIn("slower than A (vs_a verdict)", labels)
        self.assertNotIn("faster than A (vs_a verdict)", labels)


class SummarizeTest(TempDir):
    def test_tables_claims_and_skips(self):
        rep = self.copy("run")
        p = run("summarize.py", rep)
        self.assertOk(p)
        md = (rep / "summary.md").read_text()
        # Environment: 52428800 bytes of L2 = 50 MiB.
        self.assertIn("| GPU | FIXTURE GPU (test data) (132 SMs, L2 50 MiB, cc 9.0) |", md)
        self.assertIn("| read ceiling (measured in this run) | 4000 GB/s (copy 3600 GB/s) |", md)
        self.assertIn("| commit | 0123456789ab |", md)
        self.assertIn("| date | 2026-01-01T00:00:00Z |", md)
        # Claims with their states, in index order.
        self.assertIn("1. **NOT HELD**: every variant is within 1e-5", md)
        self.assertIn("2. **held**: warp-row is faster than cuBLAS SGEMV", md)
        self.assertIn("3. not evaluated: warp-row reaches at least 85%", md)
        self.assertIn("| variant | median ms (min..max) | GB/s | % of ceiling | GMAC/s | max_rel | bits vs A | verdict vs A |", md)
        # A: median of 8 samples = 0.02005; 67141632 B / 0.02005 ms = 3349 GB/s = 83.7% of 4000;
        # 4096*4096 MACs / 0.02005 ms = 836.8 GMAC/s.
        self.assertIn(f"| {WR1} (A) | 0.02005 (0.0199..0.0203) | 3349 | 83.7 | 836.8 | 1.20e-07 | A | A |", md)
        # cuBLAS: 0.02105 ms -> 3190 GB/s, 79.7%, 797 GMAC/s; 37 bits differ; vs_a from the record.
        self.assertIn(f"| {CUB} | 0.02105 (0.0209..0.0213) | 3190 | 79.7 | 797 | 2.40e-07 | 37 | slower x0.953 (speed-up 95% CI x0.945..x0.962) |", md)
        self.assertIn(f"| {WR4} | not timed | n/a | n/a | n/a | 5.00e-01 FAILED | 33 | not timed (failed verification) |", md)
        self.assertIn(f"- {WR4} on 4096x4096 uniform seed 1: fixture reason: k must be a multiple of 512", md)

    def test_timing_modes(self):
        rep = self.write_report("modes", modes_report())
        p = run("summarize.py", rep, "--out", "-")
        self.assertOk(p)
        md = p.stdout
        self.assertIn("| read ceiling (measured in this run) | 4000 GB/s (copy 3600 GB/s, stream 3700 GB/s); launch 3900 GB/s, stream 4000 GB/s; "
                      "flush read |", md)
        self.assertIn("| empty kernel (launch overhead) | launch 2.5 us, stream 0.75 us |", md)
        self.assertIn("| dependent hop (graph, per kernel) | one block plain 1.25 us, one block pdl 1.5 us, full grid plain 2.25 us, "
                      "full grid pdl 1.75 us |", md)
        self.assertIn('| options | reps 3, flush "read", modes ["launch", "stream"], headline "stream" |', md)
        self.assertIn("| variant | mode | median ms (min..max) | GB/s | % of ceiling | % of attainable | "
                      "launch: median ms (% of ceiling, % of attainable) | GMAC/s | max_rel | bits vs A | verdict vs A |", md)
        # Worked out in modes_report().
        self.assertIn("| f32_gemv/impl=a (A) | stream, K=8, 3 copies | 0.002 (0.0019..0.0021) | 2000 | 50 | 80 | 0.004 (25, 50) | 500 | n/a | A | A |", md)
        self.assertIn("| f32_gemv/impl=b | launch | 0.005 (0.0045..0.0055) | 800 | 20 | 40 | (the headline) | 200 | n/a | n/a | "
                      "slower x0.800 (speed-up 95% CI x0.769..x0.833) |", md)
        self.assertIn("- f32_gemv/impl=b: launch timing only: captures a cuBLAS handle", md)
        # GDN: the round trip is "mode", the timing's mode its own column.
        self.assertIn("| tier | mode | layers | tokens | ms per layer and token (min..max) | ms per token, all layers | GB/s | "
                      "% of ceiling | % of attainable | timing |", md)
        self.assertIn("| q4 | device-resident | 1 | 4 | 0.1 | 0.1 | 10000 | 250 | 200 | launch, flush read |", md)

    def test_seed_ladder_table(self):
        md_file = self.tmp / "s.md"
        self.assertOk(run("summarize.py", DATA / "run", "--out", md_file))
        md = md_file.read_text()
        rows = {int(m.group(1)): m.group(0) for m in re.finditer(r"^\| (\d) \| q4_gemv/.*\|$", md, re.M)}
        self.assertEqual(sorted(rows), [0, 1, 2, 3])
        # rung 0: 17408*5120 MACs / 0.1413 ms = 630.8 GMAC/s.
        self.assertIn("| (base) | 0.1413 | 630.8 |", rows[0])
        self.assertIn("(rung 0)", rows[0])
        # rung 1: 0.1413/0.0996 = 1.42; bits from bits_vs_a (its A is rung 0): 517 changed.
        self.assertIn("| scale=all-lanes, chains=4 |", rows[1])
        self.assertIn("| x1.42 | x1.42 | 517 elements changed (from bits_vs_a) |", rows[1])
        # rung 2: 0.0996/0.0520 = 1.92, 0.1413/0.0520 = 2.72, bits_vs_prev 0.
        self.assertIn("| f16=hard |", rows[2])
        self.assertIn("| x1.92 | x2.72 | bitwise equal |", rows[2])
        # rung 3 (prev named explicitly = rung 2): 0.0520/0.0582 = 0.89, 0.1413/0.0582 = 2.43.
        self.assertIn("| rows=4 |", rows[3])
        self.assertIn("| x0.89 | x2.43 | bitwise equal |", rows[3])

    def test_error_budget_and_gdn_tables(self):
        md = run("summarize.py", DATA / "gdn", "--out", "-")
        self.assertOk(md)
        t = md.stdout
        # 4.53e-2 / 3.26e-3 = 13.9 times the uniform error.
        self.assertIn("| 17408x5120 | q4 vs f64 reference | file (acts/layer0.npy) | 4.53e-02 | 1.20e-01 | x13.9 |", t)
        self.assertIn("| 17408x5120 | q4 vs f64 reference | uniform | 3.26e-03 | 1.10e-02 | x1.0 |", t)
        self.assertIn("GDN per operator, q4 vs f32, qwen35-27b-layer0-T5, 5 tokens:", t)
        self.assertIn("| BETA | 48 | 3.5 | 0.42 | 0 | 0 | 0 |", t)
        self.assertIn("| XC | 10240 | 3.5 | 0.42 | 1.36e-01 | 4.53e-02 | 4.98e-02 |", t)
        q4 = t[t.index("q4 vs f32"):t.index("gpu-f32 vs oracle")]
        order = [m.group(1) for m in re.finditer(r"^\| ([A-Z]+) \| \d", q4, re.M)]
        self.assertEqual(order, ["XC", "XCV", "Z", "Q", "K", "A", "B", "BETA", "G", "ON", "ONN", "OUT", "S", "HIST"])
        self.assertIn("| OUT | 5120 | 3.5 | 0.42 | 3.80e-07 | 9.50e-08 | 1.27e-07 |", t)
        # q4 device-resident: median of 6 samples 0.156 ms; x 48 layers = 7.488 ms per token.
        self.assertIn("| q4 | device-resident | 48 | 64 | 0.156 (0.1544..0.1591) | 7.488 |", t)
        self.assertIn("1. **held**: beta and g are exact under q4", t)
        self.assertIn("(dirty: uncommitted changes)", t)

    def test_figures_linked_when_plotted(self):
        rep = self.copy("run")
        self.assertOk(run("summarize.py", rep))
        self.assertNotIn("![", (rep / "summary.md").read_text())
        self.assertOk(run("plot.py", rep))
        self.assertOk(run("summarize.py", rep))
        md = (rep / "summary.md").read_text()
        for n in PlotTest.RUN_FIGURES:
            self.assertIn(f"![{n}](plots/{n}.png)", md)

    def test_no_device_report(self):
        rep = self.copy("nodevice")
        self.assertOk(run("summarize.py", rep))
        md = (rep / "summary.md").read_text()
        self.assertIn("| GPU | none: no CUDA device", md)
        self.assertIn("| read ceiling | not measured in this run |", md)
        self.assertEqual(md.count("not evaluated:"), 3)
        self.assertIn("Skipped:", md)
        self.assertIn("- f32-gemv-vs-cublas: no CUDA device", md)


class CompareTest(TempDir):
    OLD, NEW = DATA / "compare-old", DATA / "compare-new"

    def rows(self, out, by_mode=False):
        """variant -> (new/old, 95% CI, verdict) of its first row (the headline mode) in the Markdown
        table; with by_mode, (variant, mode) -> the same, and the order of the rows."""
        table, order = {}, []
        for line in out.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) == 10 and cells[0] != "experiment" and not cells[0].startswith("---"):
                key = (cells[1], cells[3]) if by_mode else cells[1]
                order.append(key)
                table.setdefault(key, (cells[6], cells[7], cells[8]))
        return (table, order) if by_mode else table

    def compare(self, old_lines, new_lines, *args):
        """compare.py --markdown on two reports built from records."""
        old = self.write_report(f"old{len(list(self.tmp.iterdir()))}", [json.dumps(r) for r in old_lines])
        new = self.write_report(f"new{len(list(self.tmp.iterdir()))}", [json.dumps(r) for r in new_lines])
        return run("compare.py", old, new, "--markdown", *args)

    def test_verdicts(self):
        p = run("compare.py", self.OLD, self.NEW, "--markdown")
        self.assertOk(p)
        rows = self.rows(p.stdout)
        # NEW's samples are OLD's times 0.8 (unroll=4), 1.18 (cuBLAS), the same (unroll=1).
        self.assertEqual(rows[WR4][2], "faster")
        self.assertEqual(rows[CUB][2], "slower")
        self.assertEqual(rows[WR1][2], "same")
        # Medians 0.02 / 0.025 = 0.800, and the interval holds it.
        self.assertEqual(rows[WR4][0], "0.800")
        lo, hi = map(float, rows[WR4][1].split(".."))
        self.assertTrue(lo <= 0.8 <= hi < 0.99, rows[WR4])
        # "noisy": medians differ by 5% but the repetitions spread over 2x: the interval reaches
        # beyond both edges of the 3% band, so neither a change nor its absence is shown.
        self.assertEqual(rows["f32_gemv/impl=noisy"][0], "1.050")
        self.assertEqual(rows["f32_gemv/impl=noisy"][2], "ambiguous")
        lo, hi = map(float, rows["f32_gemv/impl=noisy"][1].split(".."))
        self.assertTrue(lo < 0.97 and hi > 1.03, rows["f32_gemv/impl=noisy"])
        self.assertEqual(rows[WR8][2], "not timed")  # failed verification in NEW
        self.assertEqual(rows["gdn_timing/tier=q4,mode=device-resident"][2], "same")
        self.assertIn("only in OLD:\n  f32-gemv-vs-cublas f32_gemv/impl=retired 4096x4096 uniform", p.stdout)
        self.assertIn("only in NEW:\n  f32-gemv-vs-cublas f32_gemv/impl=added 4096x4096 uniform", p.stdout)
        self.assertIn("max_rel 1.20e-07 -> 1.90e-07; bits_vs_a 0 -> 12", p.stdout)
        self.assertIn("verified yes -> NO", p.stdout)
        # Two identical ceilings (4000 GB/s) and no control: the band is --band's default, 3%.
        self.assertIn("band: 1 -/+ 0.0300", p.stdout)
        self.assertIn("summary: 1 faster, 1 slower, 2 same, 1 ambiguous, 1 not timed; 1 only in OLD, 1 only in NEW", p.stdout)

    def test_pure_python_bootstrap_agrees(self):
        # The H200 machine has numpy, but compare.py must not need it.
        code = ("import sys; sys.path.insert(0, sys.argv[1]); import compare; compare.np = None; "
                "sys.exit(compare.main(sys.argv[2:]))")
        p = subprocess.run([sys.executable, "-c", code, str(SCRIPTS), str(self.OLD), str(self.NEW), "--markdown"],
                           capture_output=True, text=True, timeout=600)
        self.assertOk(p)
        rows = self.rows(p.stdout)
        self.assertEqual([rows[v][2] for v in (WR4, CUB, WR1, "f32_gemv/impl=noisy")], ["faster", "slower", "same", "ambiguous"])

    def test_fail_on_regression_exit_codes(self):
        cases = [((), 0),                                      # no guard: a report, not a gate
                 (("--fail-on-regression",), 1),                # every variant: cuBLAS got slower
                 (("--fail-on-regression", "*cublas*"), 1),
                 (("--fail-on-regression", "*unroll=4"), 0),    # faster
                 (("--fail-on-regression", "*unroll=1"), 0),    # same
                 (("--fail-on-regression", "*unroll=8"), 1),    # lost verification
                 (("--fail-on-regression", "gdn_timing/*"), 0),
                 (("--fail-on-regression", "*unroll=4", "--fail-on-regression", "*cublas*"), 1),
                 (("--fail-on-regression", "*no-such-variant*"), 2)]  # guards nothing: refused
        for args, code in cases:
            with self.subTest(args=args):
                p = run("compare.py", self.OLD, self.NEW, *args)
                self.assertEqual(p.returncode, code, p.stdout + p.stderr)
                if code == 1:
                    self.assertIn("REGRESSION", p.stdout)
        p = run("compare.py", self.OLD, self.NEW, "--fail-on-regression", "*cublas*")
        self.assertIn(f"{CUB} 4096x4096 uniform [launch]: slower", p.stdout)
        p = run("compare.py", self.OLD, self.NEW, "--fail-on-regression", "*unroll=8")
        self.assertIn("passed verification in OLD, fails it in NEW", p.stdout)

    def test_a_report_against_itself(self):
        p = run("compare.py", DATA / "run", DATA / "run" / "report.jsonl", "--fail-on-regression", "--markdown")
        self.assertOk(p)
        # Nothing changed, yet one of the 8 timed comparisons cannot show it: warp-row,unroll=1 on
        # 33x160 has 8 repetitions, five of 0.003 ms and three of 0.0031-0.0032. A resample with 5+
        # of the slow three (P(Bin(8, 3/8) >= 5) = 0.137) has median >= 0.0031; one with at most 3
        # (P = 0.651) has 0.003. So P(ratio >= 0.0031/0.003 = 1.033) >= 0.137 * 0.651 = 0.089 >
        # 2.5%: the interval reaches beyond 1.03 (and, symmetrically, below 0.97): ambiguous.
        self.assertIn("0 faster, 0 slower, 7 same, 1 ambiguous, 1 not timed", p.stdout)
        rows, order = self.rows(p.stdout, by_mode=True)
        self.assertEqual(rows[(WR1, "launch")][2], "same")  # 4096x4096 comes first
        self.assertEqual([k for k in order if k[0] == WR1], [(WR1, "launch"), (WR1, "launch")])
        self.assertIn("claims: no state changed (4 compared)", p.stdout)

    def test_band_threshold(self):
        # cuBLAS is 18% slower: with a 25% band that is "same". --noise is the band's former name.
        for flag in ("--band", "--noise"):
            p = run("compare.py", self.OLD, self.NEW, "--markdown", flag, "0.25")
            self.assertOk(p)
            self.assertEqual(self.rows(p.stdout)[CUB][2], "same")
            self.assertIn("band: 1 -/+ 0.2500", p.stdout)
            self.assertEqual(run("compare.py", self.OLD, self.NEW, flag, "2").returncode, 2)

    def test_ambiguous_when_the_interval_straddles_a_band_edge(self):
        # OLD: ten repetitions of 1.0 ms (every resample's median is 1.0). NEW: five of 1.00 and
        # five of 1.06: a resample's median is 1.00 with 4 or fewer of the 1.06 (P = (1 - C(10,5)/
        # 2^10) / 2 = 0.377), 1.03 with exactly 5, 1.06 with 6 or more (0.377). The 2.5% and 97.5%
        # quantiles are therefore 1.00 and 1.06; the ratio of medians is 1.03 / 1.00.
        old = [measurement("v/a", [1.0] * 10), measurement("v/slow", [1.0] * 10)]
        new = [measurement("v/a", [1.0] * 5 + [1.06] * 5), measurement("v/slow", [1.10] * 10)]
        p = self.compare(old, new, "--fail-on-regression", "v/a")
        self.assertOk(p)  # ambiguous is not a regression
        rows = self.rows(p.stdout)
        # 1.00..1.06 against 0.97..1.03: inside at the bottom, beyond at the top.
        self.assertEqual(rows["v/a"], ("1.030", "1.000..1.060", "ambiguous"))
        self.assertEqual(rows["v/slow"], ("1.100", "1.100..1.100", "slower"))
        self.assertIn("0 faster, 1 slower, 0 same, 1 ambiguous, 0 not timed", p.stdout)
        # A 7% band holds the whole interval: same. A 0.5% band: ambiguous still (1.00 is inside).
        self.assertEqual(self.rows(self.compare(old, new, "--band", "0.07").stdout)["v/a"][2], "same")
        self.assertEqual(self.rows(self.compare(old, new, "--band", "0.005").stdout)["v/a"][2], "ambiguous")

    def test_band_widened_by_drifting_controls(self):
        # "v/k" takes 4% longer in NEW (2.00 -> 2.08 ms, every repetition): beyond the 3% band.
        # The control "v/ctrl" (unchanged code) takes 5% longer (1.00 -> 1.05): the machine drifted
        # by that much, so the band becomes 5% and "v/k" is the same.
        old = [measurement("v/ctrl", [1.0] * 10), measurement("v/k", [2.0] * 10)]
        new = [measurement("v/ctrl", [1.05] * 10), measurement("v/k", [2.08] * 10)]
        p = self.compare(old, new)
        self.assertEqual(self.rows(p.stdout)["v/k"], ("1.040", "1.040..1.040", "slower"))
        p = self.compare(old, new, "--control", "*ctrl")
        self.assertOk(p)
        self.assertIn("band: 1 -/+ 0.0500", p.stdout)
        self.assertIn("largest drift 5.00%, v/ctrl 64x64 uniform [launch]", p.stdout)
        self.assertEqual(self.rows(p.stdout)["v/k"][2], "same")
        self.assertIn("control", [l for l in p.stdout.splitlines() if "| v/ctrl |" in l][0])
        # A control matching nothing controls nothing: refused.
        p = self.compare(old, new, "--control", "*nothing*")
        self.assertEqual(p.returncode, 2)
        self.assertIn("nothing to control with", p.stderr)
        # The read ceiling is a control too (these reports have no timing modes: it counts as launch):
        # 4000 -> 3800 GB/s is 4000/3800 - 1 = 5.26% more time.
        slow_env = dict(ENV, ceiling={"read_gbps": 3800.0})
        p = self.compare([old[1]], [measurement("v/k", [2.08] * 10, env=slow_env)])
        self.assertIn("read ceiling launch 4000 -> 3800 GB/s: 5.26%", p.stdout)
        self.assertIn("band: 1 -/+ 0.0526", p.stdout)
        self.assertEqual(self.rows(p.stdout)["v/k"][2], "same")
        # ... but not when the ceilings were measured in different modes, or on different GPUs.
        for env, why in ((dict(ENV, ceiling={"read_gbps": 3800.0, "mode": "stream"}), "no mode measured in both runs (OLD launch; NEW stream)"),
                         (dict(ENV, ceiling={"read_gbps": 3800.0, "kernel": "a faster read"}), "its kernel changed"),
                         (dict(ENV, ceiling={"read_gbps": 3800.0}, device={"name": "OTHER GPU"}), "different GPUs")):
            p = self.compare([old[1]], [measurement("v/k", [2.08] * 10, env=env)])
            self.assertIn(why, p.stdout)
            self.assertIn("band: 1 -/+ 0.0300", p.stdout)
            self.assertEqual(self.rows(p.stdout)["v/k"][2], "slower")

    def test_ceiling_drift_per_mode(self):
        # Ceilings of both modes in both runs (as the harness writes them): launch 3900 -> 3900,
        # stream 4000 -> 3800 GB/s. The drift is the larger: 4000/3800 - 1 = 5.26%; "v/k" (4% slower)
        # is then the same.
        def env(launch, stream):
            return dict(ENV, ceiling={"read_gbps": max(launch, stream), "mode": "launch and stream",
                                      "modes": {"launch": {"read_gbps": launch}, "stream": {"read_gbps": stream}}})
        p = self.compare([measurement("v/k", [2.0] * 10, env=env(3900.0, 4000.0))], [measurement("v/k", [2.08] * 10, env=env(3900.0, 3800.0))])
        self.assertIn("read ceiling launch 3900 -> 3900 GB/s: 0.00%, stream 4000 -> 3800 GB/s: 5.26%", p.stdout)
        self.assertIn("band: 1 -/+ 0.0526", p.stdout)
        self.assertEqual(self.rows(p.stdout)["v/k"][2], "same")

    def test_claims_whose_state_changed(self):
        def claim(e, i, state):
            return {"kind": "claim", "experiment": e, "index": i, "text": f"claim {i} of {e}", "state": state, "env": ENV}
        old = [claim("e", 0, "held"), claim("e", 1, "not_held"), claim("e", 2, "not_evaluated"), claim("gone", 0, "held")]
        new = [claim("e", 0, "held"), claim("e", 1, "held"), claim("e", 2, "not_held"), claim("e", 3, "held")]
        p = self.compare(old, new)
        self.assertOk(p)
        # e's claims 1 and 2 changed, 3 is new; 0 did not; "gone" is not in NEW at all: not compared.
        self.assertIn("claims whose state changed (3 of 4):", p.stdout)
        self.assertIn("| e | 1 | not_held | held | claim 1 of e |", p.stdout)
        self.assertIn("| e | 2 | not_evaluated | not_held | claim 2 of e |", p.stdout)
        self.assertIn("| e | 3 | absent | held | claim 3 of e |", p.stdout)
        self.assertNotIn("claim 0 of", p.stdout)
        self.assertIn("3 claim(s) changed state", p.stdout)

    def test_determinism_hashes(self):
        # The same seed must give the same input bytes, and the same bytes the same output bits.
        same = "0x00000000000000aa"
        old = [measurement("v/same", input_hash=same, output_hash="0x1"),
               measurement("v/outputs", input_hash=same, output_hash="0x1"),
               measurement("v/inputs", input_hash=same, output_hash="0x1"),
               measurement("v/nohash")]
        new = [measurement("v/same", input_hash=same, output_hash="0x1"),
               measurement("v/outputs", input_hash=same, output_hash="0x2"),
               measurement("v/inputs", input_hash="0x00000000000000bb", output_hash="0x2"),
               measurement("v/nohash", output_hash="0x9")]
        p = self.compare(old, new)
        self.assertOk(p)
        self.assertIn("output bits differ on the same inputs (output_hash 0x1 -> 0x2)", p.stdout)
        self.assertIn("inputs differ (input_hash 0x00000000000000aa -> 0x00000000000000bb)", p.stdout)
        # Only the two that changed; a record without hashes on one side is no evidence either way.
        self.assertIn("2 with accuracy or bit changes", p.stdout)

    def test_modes_are_matched(self):
        # "v/a": both reports timed it in both modes; stream (the headline) got 20% faster (0.5 ->
        # 0.4 ms), launch is unchanged. "v/old": OLD is a report from before the timing modes (its
        # timing counts as launch); NEW has launch and stream: only launch is compared. "v/nograph":
        # NEW could not capture it in a graph (launch only).
        old = [measurement("v/a", modes={"launch": [1.0] * 10, "stream": [0.5] * 10}),
               measurement("v/old", [1.0] * 10), measurement("v/nograph", modes={"launch": [1.0] * 10, "stream": [0.5] * 10})]
        new = [measurement("v/a", modes={"launch": [1.0] * 10, "stream": [0.4] * 10}),
               measurement("v/old", modes={"launch": [1.0] * 10, "stream": [0.3] * 10}),
               measurement("v/nograph", modes={"launch": [1.2] * 10}, headline="launch", stream_unavailable="not capturable")]
        p = self.compare(old, new, "--fail-on-regression")
        self.assertEqual(p.returncode, 1)  # v/nograph: launch 1.0 -> 1.2 ms
        rows, order = self.rows(p.stdout, by_mode=True)
        self.assertEqual(order, [("v/a", "stream"), ("v/a", "launch"), ("v/old", "launch"), ("v/nograph", "launch")])
        self.assertEqual(rows[("v/a", "stream")], ("0.800", "0.800..0.800", "faster"))
        self.assertEqual(rows[("v/a", "launch")][2], "same")
        self.assertEqual(rows[("v/old", "launch")][2], "same")
        self.assertEqual(rows[("v/nograph", "launch")], ("1.200", "1.200..1.200", "slower"))
        self.assertIn("v/nograph 64x64 uniform [launch]: slower", p.stdout)
        self.assertIn("stream: 1 matched measurement(s) timed in it in NEW only", p.stdout)
        self.assertIn("stream: 1 matched measurement(s) timed in it in OLD only", p.stdout)
        self.assertIn("summary: 1 faster, 1 slower, 2 same, 0 ambiguous, 0 not timed", p.stdout)
        # --mode stream: only v/a is compared.
        p = self.compare(old, new, "--mode", "stream")
        rows, order = self.rows(p.stdout, by_mode=True)
        self.assertEqual(order, [("v/a", "stream")])
        self.assertIn("summary: 1 faster, 0 slower, 0 same, 0 ambiguous, 0 not timed", p.stdout)

    def test_identical_distributions_give_no_change(self):
        # Two runs of unchanged code: ten variants, each timed 50 times in both modes, every
        # repetition drawn from one normal distribution (sd 0.5% of the mean) in both runs. The
        # median of 50 has sd 1.2533 * 0.5% / sqrt(50) = 0.089%, a ratio of two sqrt(2) times that,
        # 0.125%: the 95% intervals reach about 1 -/+ 0.25% from their centre, and the centres of
        # 20 ratios stay within about 3 sd (0.4%) of 1: every interval lies well inside 1 -/+ 3%.
        rng = random.Random(20261201)

        def run_of(drift=1.0, ceiling=4000.0):
            env = dict(ENV, ceiling={"read_gbps": ceiling})
            return [measurement(f"v/{i}", env=env, modes={
                m: [drift * rng.gauss(mean, 0.005 * mean) for _ in range(50)] for m, mean in (("launch", 0.1 + i / 100), ("stream", 0.08 + i / 100))})
                for i in range(10)]
        base = run_of()
        p = self.compare(base, run_of())
        self.assertOk(p)
        self.assertIn("summary: 0 faster, 0 slower, 20 same, 0 ambiguous, 0 not timed", p.stdout)
        # The same with the whole machine 2% slower in NEW (its read ceiling too: 4000/1.02 GB/s):
        # centres within 1.02 -/+ 0.4%, intervals within 1.02 -/+ 0.65%: inside 1 -/+ 3% still.
        drifted = run_of(drift=1.02, ceiling=4000 / 1.02)
        p = self.compare(base, drifted)
        self.assertIn("read ceiling launch 4000 -> 3922 GB/s: 2.00%", p.stdout)
        self.assertIn("summary: 0 faster, 0 slower, 20 same, 0 ambiguous, 0 not timed", p.stdout)
        # The harness's within-run rule (1%), with a ceiling that did not move, calls every one of
        # them slower: each interval lies above 1.02 - 0.65% > 1.01. That is what the first
        # compare.py said of two runs of unchanged code.
        p = self.compare(base, run_of(drift=1.02), "--band", "0.01")
        self.assertIn("band: 1 -/+ 0.0100", p.stdout)
        self.assertIn("summary: 0 faster, 20 slower, 0 same, 0 ambiguous", p.stdout)

    def test_bad_input(self):
        bad = self.write_report("bad", [json.dumps({"kind": "measurement"})])
        p = run("compare.py", self.OLD, bad)
        self.assertEqual(p.returncode, 2)
        self.assertIn("report.jsonl:1", p.stderr)
        self.assertEqual(run("compare.py", self.OLD).returncode, 2)  # usage
        p = run("compare.py", self.OLD, self.tmp / "nowhere")
        self.assertEqual(p.returncode, 2)
        self.assertIn("no such report", p.stderr)


class MalformedTest(TempDir):
    """Every script refuses a malformed or empty report with status 2 and a message naming it."""

    GOOD = json.dumps({"kind": "skip", "experiment": "e", "what": "w", "reason": "r"})

    def refused(self, rep, *needles):
        for script in ("plot.py", "summarize.py", "compare.py"):
            with self.subTest(script=script):
                args = [DATA / "run", rep] if script == "compare.py" else [rep]
                p = run(script, *args)
                self.assertEqual(p.returncode, 2, f"{script}: {p.stdout}{p.stderr}")
                self.assertNotIn("Traceback", p.stderr)
                for n in needles:
                    self.assertIn(n, p.stderr)

    def test_malformed_json_names_file_and_line(self):
        rep = self.write_report("m", [self.GOOD, '{"kind": "measurement", "experiment": '])
        self.refused(rep, "report.jsonl:2", "malformed JSON")

    def test_not_a_record(self):
        self.refused(self.write_report("m", [self.GOOD, self.GOOD, "[1, 2]"]), "report.jsonl:3", "not a record")
        self.refused(self.write_report("n", ['{"experiment": "e"}']), "report.jsonl:1", "\"kind\"")

    def test_missing_or_mistyped_field(self):
        rec = {"kind": "measurement", "experiment": "e", "shape": "4x4", "dist": "uniform"}
        self.refused(self.write_report("a", [self.GOOD, json.dumps(rec)]), "report.jsonl:2", "'variant'")
        rec["variant"] = "v"
        rec["timing"] = {"median_ms": "fast", "min_ms": 1, "max_ms": 1}
        self.refused(self.write_report("b", [json.dumps(rec)]), "report.jsonl:1", "'timing.median_ms'", "number")
        rec["timing"] = {"median_ms": 1.0, "max_ms": 1}
        self.refused(self.write_report("c", [json.dumps(rec)]), "'timing.min_ms'")
        claim = {"kind": "claim", "experiment": "e", "index": 0, "text": "t", "state": "maybe"}
        self.refused(self.write_report("d", [json.dumps(claim)]), "report.jsonl:1", "maybe")
        timing = {"kind": "gdn_timing", "experiment": "e", "tier": "q4", "mode": "host-facing", "layers": 48, "tokens": 4,
                  "ms_per_layer_token": {"min": 0.1}}
        self.refused(self.write_report("g", [json.dumps(timing)]), "'ms_per_layer_token.median'")

    def test_timing_mode_fields(self):
        # Fields of the timing modes are checked where present; the line and the field are named.
        good = json.dumps(measurement("f32_gemv/impl=x", modes={"launch": [1.0, 1.1], "stream": [0.9, 1.0]}))
        for name, rec, needles in [
                ("mode", measurement("v/x", modes={"stream": [1.0]}, timing=timing([1.0], "burst")),
                 ["'timing.mode'", "one of launch, stream", "burst"]),
                ("flush", measurement("v/x", timing=timing([1.0], "launch", flush="cold")), ["'timing.flush'", "one of read, none"]),
                ("pct", measurement("v/x", samples=[1.0], pct_attainable="high"), ["'pct_attainable'", "number"]),
                ("key", measurement("v/x", modes={"launch": [1.0]}, headline="launch") | {"modes": {"graph": {}}},
                 ["'modes' key 'graph'", "one of launch, stream"]),
                ("entry", measurement("v/x", modes={"launch": [1.0], "stream": ([1.0], {"gbps": "x"})}, headline="launch"),
                 ["'modes.stream.gbps'", "number or null"]),
                ("untimed", measurement("v/x", modes={"launch": [1.0]}, headline="launch") | {"modes": {"stream": {"gbps": 1.0}}},
                 ["lacks the field 'modes.stream.timing'"]),
                ("mismatch", measurement("v/x", modes={"launch": [1.0]}, headline="launch") | {"modes": {"stream": {"timing": timing([1.0], "launch")}}},
                 ["'modes.stream.timing.mode' is 'launch'"]),
                ("ceiling", measurement("v/x", env=dict(ENV, ceiling={"read_gbps": 4000.0, "flush": "cold"})), ["'env.ceiling.flush'"]),
                ("ceiling modes", measurement("v/x", env=dict(ENV, ceiling={"read_gbps": 4000.0, "modes": {"stream": {"read_gbps": "4 TB/s"}}})),
                 ["'env.ceiling.modes.stream.read_gbps'", "number"]),
                ("ceiling mode key", measurement("v/x", env=dict(ENV, ceiling={"read_gbps": 4000.0, "modes": {"graph": {"read_gbps": 1.0}}})),
                 ["'env.ceiling.modes'", "graph"]),
                ("options flush", measurement("v/x", env=dict(ENV, options={"flush": "cold"})), ["'env.options.flush'"]),
                ("empty", measurement("v/x", env=dict(ENV, ceiling={"read_gbps": 4000.0, "empty_kernel_us": {"launch": "2us"}})),
                 ["'env.ceiling.empty_kernel_us.launch'"]),
                ("headline", measurement("v/x", env=dict(ENV, options={"modes": ["launch", "stream"], "headline": "both"})),
                 ["'env.options.headline'"]),
                ("gdn", {"kind": "gdn_timing", "experiment": "e", "tier": "q4", "mode": "host-facing", "layers": 1, "tokens": 4,
                         "ms_per_layer_token": {"median": 0.1}, "timing": timing([0.4], "graph")}, ["'timing.mode'"])]:
            with self.subTest(name):
                self.refused(self.write_report(name, [good, json.dumps(rec)]), "report.jsonl:2", *needles)

    def test_empty_report(self):
        self.refused(self.write_report("empty", []), "empty report (no records)")
        self.refused(self.write_report("blank", ["", "   "]), "empty report (no records)")
        d = self.tmp / "nothing"
        d.mkdir()
        self.refused(d, "no report.jsonl")

    def test_bad_ladder_prev(self):
        base = {"kind": "measurement", "experiment": "seed-ladder", "op": "q4_gemv", "shape": "8x64", "dist": "uniform",
                "timing": {"median_ms": 1.0, "min_ms": 1.0, "max_ms": 1.0}}
        lines = [json.dumps(dict(base, variant="q4_gemv/a")), json.dumps(dict(base, variant="q4_gemv/b", prev="q4_gemv/zz"))]
        rep = self.write_report("ladder", lines)
        for script in ("plot.py", "summarize.py"):
            p = run(script, rep)
            self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
            self.assertIn("report.jsonl:2", p.stderr)
            self.assertIn("q4_gemv/zz", p.stderr)


if __name__ == "__main__":
    try:
        import matplotlib  # noqa: F401
    except ImportError as e:
        print(f"FAIL: matplotlib is not importable by {sys.executable} ({e}): plot.py cannot run. Install "
              "python3-matplotlib (apt), or point KLAB_PYTHON at an interpreter that has it.", file=sys.stderr)
        sys.exit(1)
    # The tests on a report with named parameters (gdn_step) run here too: ctest's "scripts" test.
    sys.path.insert(0, str(HERE))
    from test_gdn_step import (CompareTest as GdnStepCompareTest, PlotTest as GdnStepPlotTest,  # noqa: E402,F401
                               ProfileTest as GdnStepProfileTest, ReadmeTest as GdnStepReadmeTest,
                               ReadTest as GdnStepReadTest, SummarizeTest as GdnStepSummarizeTest)
    unittest.main(verbosity=2)
