#!/usr/bin/env python3
"""Compares two klab reports, measurement by measurement, with a verdict that holds across runs.

    scripts/compare.py OLD NEW [--band 0.03] [--control GLOB]... [--mode MODE]... [--resamples 2000]
                       [--seed 12345] [--markdown] [--fail-on-regression [GLOB]]... [--gpu-noise FILE]

OLD and NEW are report directories (holding report.jsonl) or .jsonl files. Measurements are matched
by (experiment, variant, problem, dist, timing mode), where the problem is the record's "problem"
(Problem::key(): "17408x5120" for a mat-vec, "ck=4,dk=128,...,tokens=16,weights=1" for an op with
its own parameters, such as gdn_step) or, in reports from before named parameters, its "shape" (the
same string for a mat-vec, so old and new reports line up); schema-1 GDN timings (gdn_timing) by
(experiment, tier, mode, layers, tokens, fixture, timing mode). A measurement is compared in each timing mode present in both reports,
NEW's headline first (reports from before the timing modes were timed in "launch"; --mode MODE
compares only the modes named). For each match: the ratio of median times NEW/OLD (< 1: NEW is
faster) with a percentile bootstrap 95% interval from the repetitions (timing.samples_ms, less
those the harness left out as throttled; resampled with a fixed seed), and a verdict against a
run-to-run band:

  faster     the whole interval lies below 1 - band
  slower     the whole interval lies above 1 + band
  same       the whole interval lies inside [1 - band, 1 + band]
  ambiguous  the interval straddles an edge of the band: neither a change nor its absence is shown

The band is not the harness's 1% A/B rule: that rule compares two variants timed side by side in one
run, while OLD and NEW are two runs, between which the whole machine drifts (1-3% measured between
runs of unchanged code on the H200, where a 1% band called 29 unchanged measurements "slower"). It
is the largest of --band (default 0.03), the drift of the read ceiling (env.ceiling.read_gbps, per
mode where env.ceiling.modes holds several: |OLD/NEW - 1|, as a time ratio, the largest over the
modes both runs measured; used when both ran the same ceiling kernel on the same GPU), and
the drift of the --control GLOB variants, assumed unchanged (the largest |median ratio - 1| over
them, every compared mode). The band used and where it came from are printed.

--gpu-noise FILE (the JSON of scripts/gpu_noise.py: one run measured on several GPUs) widens the band
per timing mode to the GPU-to-GPU spread: band(mode) = max(the band above, FILE's 90th percentile of
|t_i/t_j - 1| in that mode); a mode FILE lacks keeps the band above. For OLD and NEW from different
GPUs of one kind (a cluster, a machine with several), where the GPUs differ as much as the code may.
The band of each mode and the term that set it (--band, the read ceiling, the controls, or the
GPU-to-GPU spread) are printed. Without it nothing changes.

A report that is not whole (schema 2: no closing record, or one saying failed or interrupted) gets
a note naming its side; what it lacks is listed as found in one report only.

Also listed: measurements found in one report only, timing modes found in one report only, changes
of accuracy (max_rel), of verification and of bit-equality (bits_vs_a, bits_vs_prev; and, where both
reports carry them, input_hash and output_hash: the same seed must give the same input bytes and the
same output bits run after run), and the
claims (of experiments in both reports) whose state changed. The last line is the summary: "N
faster, N slower, N same, N ambiguous, N not timed; ...".

--fail-on-regression [GLOB] (repeatable; GLOB defaults to '*') makes the exit status 1 when a
matched measurement whose variant name matches GLOB is slower (in any compared mode), or passed
verification in OLD and fails it in NEW; ambiguous is not a regression. GDN timings are named
gdn_timing/tier=TIER,mode=MODE for this and for --control. A guard or a control that finds no timed
measurement matching its globs in both reports exits 2: it would guard (or control) nothing.
Exit status: 0, 1 (a chosen measurement regressed), 2 (bad arguments, malformed or empty report).
Standard library only (numpy, when importable, makes the bootstrap faster).

Changes from the first version: the verdict band was --noise 0.01 (still accepted, as a name of
--band) with "same" for any interval not beyond it; "ambiguous", the controls, the timing modes
(a "mode" column) and the claims section are new.
"""
import argparse
import fnmatch
import json
import math
import random
import statistics
import sys
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import klab_report as kr  # noqa: E402

try:
    import numpy as np
except ImportError:  # the pure-Python bootstrap is slower, not different in kind
    np = None


quantile_sorted = kr.quantile_sorted


def bootstrap_ratio(old, new, resamples, seed):
    """95% percentile-bootstrap interval of median(new)/median(old)."""
    if np is not None:
        rng = np.random.default_rng(seed)
        o, n = np.asarray(old, dtype=float), np.asarray(new, dtype=float)
        mo = np.median(o[rng.integers(0, len(o), (resamples, len(o)))], axis=1)
        mn = np.median(n[rng.integers(0, len(n), (resamples, len(n)))], axis=1)
        r = np.sort(mn / mo)
        return quantile_sorted(r, 0.025), quantile_sorted(r, 0.975)
    rng = random.Random(seed)
    ratios = sorted(statistics.median(rng.choices(new, k=len(new))) / statistics.median(rng.choices(old, k=len(old)))
                    for _ in range(resamples))
    return quantile_sorted(ratios, 0.025), quantile_sorted(ratios, 0.975)


class Item:
    """One thing timed in one report: a measurement or a GDN timing, with its timing per mode."""

    def __init__(self, key, experiment, name, problem, record, views):
        self.key, self.experiment, self.name, self.problem = key, experiment, name, problem
        # [(mode, median ms, kept samples)], the headline first; [] when not timed.
        self.record, self.views = record, views

    def view(self, mode):
        return next(((med, samples) for m, med, samples in self.views if m == mode), None)


def measurement_views(r):
    out = []
    for mode, v in kr.mode_views(r):
        samples = kr.kept_samples(v["timing"])
        out.append((mode, statistics.median(samples) if samples else kr.median_ms(v), samples))
    return out


def items_of(report):
    out = {}
    for r in report.records:
        if r["kind"] == "measurement":
            # The problem: Problem::key() ("17408x5120", "ck=4,...,tokens=16,weights=1"), or an old
            # record's shape (a mat-vec's problem is its shape, so old and new reports line up).
            problem = kr.problem_of(r)
            key = ("measurement", r["experiment"], r["variant"], problem, r["dist"])
            item = Item(key, r["experiment"], r["variant"], f"{problem} {r['dist']}", r, measurement_views(r))
        elif r["kind"] == "gdn_timing":
            fixture = r.get("fixture", "")
            key = ("gdn_timing", r["experiment"], r["tier"], r["mode"], r["layers"], r["tokens"], fixture)
            samples = [x for x in (r.get("samples_ms") or []) if kr.is_finite(x)]
            med = statistics.median(samples) if samples else r["ms_per_layer_token"]["median"]
            # Its "mode" is the round trip (host-facing, device-resident); the timing's is launch.
            mode = kr.get(r, "timing.mode", "launch")
            name = f"gdn_timing/tier={r['tier']},mode={r['mode']}"
            item = Item(key, r["experiment"], name, f"{r['layers']} layers x {r['tokens']} tokens {fixture}".strip(), r,
                        [(mode, med, samples)])
        else:
            continue
        # The same variant on the same problem twice in one experiment: number the repeats.
        n, k = 1, item.key
        while k in out:
            n += 1
            k = item.key + (f"#{n}",)
        item.key = k
        out[k] = item
    return out


def measure(key, old, new, args):
    """Ratio of medians and its bootstrap interval for one mode of a matched pair (old, new are
    (median, samples)), or None when either side has no usable median."""
    (om, osamp), (nm, nsamp) = old, new
    if not kr.is_finite(om) or not kr.is_finite(nm) or om <= 0:
        return None
    ratio = nm / om
    note = ""
    if len(osamp) >= 2 and len(nsamp) >= 2:
        seed = (args.seed ^ zlib.crc32(repr(key).encode())) & 0xFFFFFFFF
        lo, hi = bootstrap_ratio(osamp, nsamp, args.resamples, seed)
        if min(len(osamp), len(nsamp)) < 5:
            note = "few repetitions"
    else:
        lo = hi = ratio
        note = "no repetitions recorded: medians only"
    return {"ratio": ratio, "lo": lo, "hi": hi, "note": note}


def verdict(lo, hi, band):
    """faster / slower: the whole interval beyond the band; same: the whole interval inside it;
    ambiguous: the interval straddles one of its edges."""
    if hi < 1 - band:
        return "faster"
    if lo > 1 + band:
        return "slower"
    if lo >= 1 - band and hi <= 1 + band:
        return "same"
    return "ambiguous"


def ceiling_drift(old_r, new_r):
    """(drift, description): the read ceiling's change between the runs as a time ratio |OLD/NEW -
    1|, the largest over the modes both runs measured it in; or (None, why it is not used). Only
    the same ceiling kernel on the same GPU is a control (a new kernel moves it, not the machine)."""
    co, cn = kr.ceiling_by_mode(old_r.env), kr.ceiling_by_mode(new_r.env)
    if not (co and cn):
        return None, "read ceiling not measured in both runs"
    go, gn = kr.get(old_r.env, "device.name"), kr.get(new_r.env, "device.name")
    if go != gn:
        return None, f"read ceiling not used: different GPUs ({go} vs {gn})"
    if kr.get(old_r.env, "ceiling.kernel") != kr.get(new_r.env, "ceiling.kernel"):
        return None, "read ceiling not used: its kernel changed between the runs (env.ceiling.kernel)"
    common = [m for m in kr.MODES if m in co and m in cn and co[m] > 0 and cn[m] > 0]
    if not common:
        return None, f"read ceiling not used: no mode measured in both runs (OLD {', '.join(co)}; NEW {', '.join(cn)})"
    drifts = [(abs(co[m] / cn[m] - 1), m) for m in common]
    d = max(t[0] for t in drifts)
    return d, "read ceiling " + ", ".join(f"{m} {co[m]:.0f} -> {cn[m]:.0f} GB/s: {100 * x:.2f}%" for x, m in drifts)


def changes(old, new):
    """Accuracy, verification and bit-equality changes between the two records."""
    o, n = old.record, new.record
    out = []
    if o["kind"] != "measurement":
        return out
    mo, mn = kr.get(o, "accuracy.max_rel"), kr.get(n, "accuracy.max_rel")
    if mo != mn and not (kr.is_finite(mo) and kr.is_finite(mn) and math.isclose(mo, mn, rel_tol=1e-12, abs_tol=0)):
        out.append(f"max_rel {kr.fmt_err(mo)} -> {kr.fmt_err(mn)}")
    if "verified" in o and "verified" in n and o["verified"] != n["verified"]:
        out.append("verified " + ("yes -> NO" if o["verified"] else "no -> yes"))
    for f in ("bits_vs_a", "bits_vs_prev"):
        if (f in o or f in n) and o.get(f) != n.get(f):
            out.append(f"{f} {o.get(f, 'absent')} -> {n.get(f, 'absent')}".replace("None", "null"))
    # Determinism (where both reports carry the hashes): the same problem must be the same bytes, and
    # the same bytes through the same variant the same output bits.
    if o.get("input_hash") and n.get("input_hash") and o["input_hash"] != n["input_hash"]:
        out.append(f"inputs differ (input_hash {o['input_hash']} -> {n['input_hash']}): the same seed gave other bytes")
    elif o.get("output_hash") and n.get("output_hash") and o["output_hash"] != n["output_hash"]:
        out.append(f"output bits differ on the same inputs (output_hash {o['output_hash']} -> {n['output_hash']})")
    return out


def load_gpu_noise(path):
    """scripts/gpu_noise.py's JSON, checked: {kind, version, modes: {MODE: {p90 >= 0, matched, ...}},
    gpus, what}; kr.ReportError naming the file and the problem otherwise."""
    try:
        j = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise kr.ReportError(f"--gpu-noise {path}: cannot read: {e}") from None
    if not isinstance(j, dict) or j.get("kind") != "klab_gpu_noise" or j.get("version") != 1:
        raise kr.ReportError(f"--gpu-noise {path}: not the JSON of scripts/gpu_noise.py (kind klab_gpu_noise, version 1)")
    modes = j.get("modes")
    if not isinstance(modes, dict) or not modes:
        raise kr.ReportError(f"--gpu-noise {path}: no mode in it")
    for m, s in modes.items():
        if m not in kr.MODES or not isinstance(s, dict) or not kr.is_finite(s.get("p90")) or s["p90"] < 0:
            raise kr.ReportError(f"--gpu-noise {path}: modes.{m}: needs a mode of {', '.join(kr.MODES)} with a p90 >= 0")
    j["_file"] = str(path)
    return j


def gpu_noise_bands(noise, band, band_term, modes, gpus, where):
    """({mode: band}, lines to print): each compared mode's band, the run-to-run `band` (set by
    `band_term`) widened to the GPU-to-GPU spread's 90th percentile of that mode where it is wider.
    gpus: OLD's and NEW's GPU names; where: their (host, device index)."""
    names = sorted({str(g.get("name")) for g in noise.get("gpus", []) if isinstance(g, dict)})
    lines = [f"GPU-to-GPU spread ({noise['_file']}: {noise.get('what', 'GPU-to-GPU')}, {len(noise.get('gpus', []))} reports on "
             f"{', '.join(names) or '?'}): " + "; ".join(f"{m} p90 {100 * s['p90']:.2f}% over {s.get('matched', '?')} matched"
                                                          for m, s in noise["modes"].items())]
    if where[0] == where[1] and None not in where[0]:
        lines.append(f"note: OLD and NEW ran on one GPU (host {where[0][0]}, device {where[0][1]}): the GPU-to-GPU "
                     "spread is wider than this comparison needs")
    other = [g for g in dict.fromkeys(gpus) if g not in names]
    if other:
        lines.append(f"note: the spread was measured on {', '.join(names) or '?'}, these reports ran on {', '.join(other)}")
    bands = {}
    for m in modes:
        s = noise["modes"].get(m)
        if s is None:
            lines.append(f"band {m}: 1 -/+ {band:.4f}, set by {band_term} ({noise['_file']} has no {m} spread)")
        elif s["p90"] > band:
            bands[m] = s["p90"]
            lines.append(f"band {m}: 1 -/+ {s['p90']:.4f}, set by the GPU-to-GPU spread (p90 {100 * s['p90']:.2f}% > "
                         f"{100 * band:.2f}% run-to-run)")
        else:
            lines.append(f"band {m}: 1 -/+ {band:.4f}, set by {band_term} (the GPU-to-GPU spread's p90 {100 * s['p90']:.2f}% "
                         "is not wider)")
    return bands, lines


def fmt_ms(x):
    return f"{x:.4g}" if kr.is_finite(x) else "not timed"


def print_table(header, rows, markdown):
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join(" --- " for _ in header) + "|")
        for r in rows:
            print("| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |")
        return
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    for r in [header] + rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())


def describe(report):
    env = report.env
    dev = env.get("device")
    gpu = dev.get("name", "?") if isinstance(dev, dict) else "no device"
    ceil = kr.get(env, "ceiling.read_gbps")
    cmode = kr.get(env, "ceiling.mode")
    head = kr.get(env, "options.headline")
    return gpu, f"{report.file}: {gpu}" + (f", ceiling {ceil:.0f} GB/s" if kr.is_finite(ceil) else "") + \
        (f" ({cmode})" if isinstance(cmode, str) and kr.is_finite(ceil) else "") + \
        (f", headline timing {head}" if isinstance(head, str) else "") + \
        f", commit {str(env.get('git_commit', '?'))[:12]}{' (dirty)' if env.get('git_dirty') else ''}, {env.get('date', '?')}"


def claim_changes(old_r, new_r):
    """(changed, compared): claims of experiments in both reports whose state differs, as
    (experiment, index, old state, new state, text); a claim in one report only is "absent" in
    the other."""
    both = set(old_r.experiments()) & set(new_r.experiments())
    co = {(c["experiment"], c["index"]): c for c in old_r.of("claim") if c["experiment"] in both}
    cn = {(c["experiment"], c["index"]): c for c in new_r.of("claim") if c["experiment"] in both}
    changed = []
    for key in list(dict.fromkeys(list(co) + list(cn))):
        o, n = co.get(key), cn.get(key)
        so, sn = (o["state"] if o else "absent"), (n["state"] if n else "absent")
        if so != sn:
            changed.append((key[0], key[1], so, sn, (n or o)["text"]))
    return changed, len(set(co) | set(cn))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="compare.py", description="Compares two klab reports with a verdict per measurement that holds across runs.")
    ap.add_argument("old", help="the baseline report (directory or .jsonl)")
    ap.add_argument("new", help="the report to judge (directory or .jsonl)")
    ap.add_argument("--band", "--noise", dest="band", type=float, default=0.03,
                    help="run-to-run band: intervals inside 1 -/+ band are 'same' (default 0.03: 1-3%% drift measured between "
                         "runs of unchanged code on the H200); widened to the drift of the read ceiling and of --control variants")
    ap.add_argument("--control", metavar="GLOB", action="append",
                    help="variants assumed unchanged between the runs (repeatable): their drift widens the band")
    ap.add_argument("--mode", action="append", choices=kr.MODES, help="compare only this timing mode (repeatable; default: every mode in both)")
    ap.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default 2000)")
    ap.add_argument("--seed", type=int, default=12345, help="bootstrap seed (default 12345)")
    ap.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    ap.add_argument("--fail-on-regression", metavar="GLOB", nargs="?", const="*", action="append",
                    help="exit 1 when a matched measurement whose variant matches GLOB (default '*') is slower or lost verification")
    ap.add_argument("--gpu-noise", metavar="FILE",
                    help="scripts/gpu_noise.py's JSON: widen each mode's band to its GPU-to-GPU spread (90th percentile)")
    args = ap.parse_args(argv)
    if not (0 <= args.band < 1) or args.resamples < 100:
        print("compare.py: --band (--noise) must be in [0, 1) and --resamples at least 100", file=sys.stderr)
        return 2
    try:
        old_r, new_r = kr.load(args.old), kr.load(args.new)
        gpu_noise = load_gpu_noise(args.gpu_noise) if args.gpu_noise else None
    except kr.ReportError as e:
        print(f"compare.py: {e}", file=sys.stderr)
        return 2
    old_i, new_i = items_of(old_r), items_of(new_r)
    (g_old, d_old), (g_new, d_new) = describe(old_r), describe(new_r)
    print(f"OLD {d_old}")
    print(f"NEW {d_new}")
    for side, rep in (("OLD", old_r), ("NEW", new_r)):
        if rep.incomplete():
            print(f"note: {side} is {rep.incomplete()}; what it lacks is listed as in one report only")
    if g_old != g_new:
        print(f"note: different GPUs ({g_old} vs {g_new}): the ratios compare the machines as well as the code")

    globs, controls = args.fail_on_regression or [], args.control or []
    # 1. Ratios and intervals of every mode in both reports (the band needs the controls' first).
    pairs = []  # (old item, new item, [(mode, measure or None)]); [] when either side is not timed
    one_sided = {}  # (side, mode) -> count of matched measurements timed in that mode on one side only
    for key, o in old_i.items():
        n = new_i.get(key)
        if n is None:
            continue
        compared = []
        if o.views and n.views:
            om, nm = [m for m, _, _ in o.views], [m for m, _, _ in n.views]
            for side, mine, theirs in (("OLD", om, nm), ("NEW", nm, om)):
                for m in mine:
                    if m not in theirs and (not args.mode or m in args.mode):
                        one_sided[(side, m)] = one_sided.get((side, m), 0) + 1
            for m in nm + [m for m in om if m not in nm]:
                if m in om and m in nm and (not args.mode or m in args.mode):
                    compared.append((m, measure(key + (m,), o.view(m), n.view(m), args)))
        pairs.append((o, n, compared))

    # 2. The run-to-run band.
    c_drift, c_text = ceiling_drift(old_r, new_r)
    band, sources = args.band, [f"--band {100 * args.band:.2f}%", c_text]
    band_term = "--band"  # the term that set the band (said with --gpu-noise)
    if c_drift is not None and c_drift > band:
        band, band_term = c_drift, "the read ceiling's drift"
    if controls:
        devs = [(abs(c["ratio"] - 1), o, m) for o, n, cmp in pairs for m, c in cmp
                if c is not None and any(fnmatch.fnmatchcase(o.name, g) for g in controls)]
        if not devs:
            print(f"compare.py: --control {' '.join(controls)}: no timed measurement matching it is in both reports: "
                  "nothing to control with", file=sys.stderr)
            return 2
        d, o, m = max(devs, key=lambda t: t[0])
        if d > band:
            band, band_term = d, "the controls' drift"
        sources.append(f"controls ({len(devs)} timings): largest drift {100 * d:.2f}%, {o.name} {o.problem} [{m}]")
    else:
        sources.append("no --control")
    print(f"band: 1 -/+ {band:.4f} (run-to-run; the largest of: {'; '.join(sources)})")
    bands = {}  # mode -> its band, where --gpu-noise widened it
    if gpu_noise:
        modes = list(dict.fromkeys(m for _, _, cmp in pairs for m, _ in cmp))
        where = [(r.env.get("host"), kr.get(r.env, "device.index")) for r in (old_r, new_r)]
        bands, lines = gpu_noise_bands(gpu_noise, band, band_term, modes, (describe(old_r)[0], describe(new_r)[0]), where)
        for line in lines:
            print(line)
        print("verdict: the 95% bootstrap interval of median(NEW)/median(OLD) against its mode's band: faster below "
              "1 - band, slower above 1 + band, same inside, ambiguous across an edge\n")
    else:
        print(f"verdict: the 95% bootstrap interval of median(NEW)/median(OLD): faster below {1 - band:.4f}, "
              f"slower above {1 + band:.4f}, same inside, ambiguous across an edge\n")

    # 3. Verdicts.
    rows, regressions, guarded = [], [], 0
    counts = {"faster": 0, "slower": 0, "same": 0, "ambiguous": 0, "not timed": 0}
    acc_rows = []
    for o, n, compared in pairs:
        chosen = any(fnmatch.fnmatchcase(o.name, g) for g in globs)
        control = any(fnmatch.fnmatchcase(o.name, g) for g in controls)
        if not o.views or not n.views:
            counts["not timed"] += 1
            med_o = o.views[0][1] if o.views else None
            med_n = n.views[0][1] if n.views else None
            rows.append((o.experiment, o.name, o.problem, "", fmt_ms(med_o), fmt_ms(med_n), "", "", "not timed", ""))
        timed_here = False
        for m, c in compared:
            (mo, _), (mn, _) = o.view(m), n.view(m)
            if c is None:
                counts["not timed"] += 1
                rows.append((o.experiment, o.name, o.problem, m, fmt_ms(mo), fmt_ms(mn), "", "", "not timed", ""))
                continue
            timed_here = True
            mb = bands.get(m, band)
            v = verdict(c["lo"], c["hi"], mb)
            counts[v] += 1
            note = "; ".join(x for x in (c["note"], "control" if control else "") if x)
            rows.append((o.experiment, o.name, o.problem, m, fmt_ms(mo), fmt_ms(mn), f"{c['ratio']:.3f}",
                         f"{c['lo']:.3f}..{c['hi']:.3f}", v, note))
            if chosen and v == "slower":
                regressions.append(f"{o.experiment} {o.name} {o.problem} [{m}]: slower, x{c['ratio']:.3f} "
                                   f"(95% {c['lo']:.3f}..{c['hi']:.3f}, band 1 -/+ {mb:.4f})")
        guarded += chosen and timed_here
        ch = changes(o, n)
        if ch:
            acc_rows.append((o.experiment, o.name, o.problem, "; ".join(ch)))
        if chosen and o.record.get("verified") is True and n.record.get("verified") is False:
            regressions.append(f"{o.experiment} {o.name} {o.problem}: passed verification in OLD, fails it in NEW")
    header = ("experiment", "variant", "problem", "mode", "old ms", "new ms", "new/old", "95% CI", "verdict", "note")
    if rows:
        print_table(header, rows, args.markdown)
    else:
        print("no measurement appears in both reports" + (f" in mode {', '.join(args.mode)}" if args.mode else ""))
    only_old = [o for k, o in old_i.items() if k not in new_i]
    only_new = [n for k, n in new_i.items() if k not in old_i]
    for title, items in (("only in OLD", only_old), ("only in NEW", only_new)):
        if items:
            print(f"\n{title}:")
            for it in items:
                print(f"  {it.experiment} {it.name} {it.problem}")
    if one_sided:
        print("\ntiming modes in one report only (not compared):")
        for (side, m), k in sorted(one_sided.items(), key=lambda t: (t[0][0] != "OLD", t[0][1])):
            print(f"  {m}: {k} matched measurement(s) timed in it in {side} only")
    if acc_rows:
        print("\naccuracy and bit-equality changes:")
        print_table(("experiment", "variant", "problem", "change"), acc_rows, args.markdown)
    claims, n_claims = claim_changes(old_r, new_r)
    if claims:
        print(f"\nclaims whose state changed ({len(claims)} of {n_claims}):")
        print_table(("experiment", "index", "old state", "new state", "claim"), claims, args.markdown)
    elif n_claims:
        print(f"\nclaims: no state changed ({n_claims} compared)")
    print(f"\nsummary: {counts['faster']} faster, {counts['slower']} slower, {counts['same']} same, "
          f"{counts['ambiguous']} ambiguous, {counts['not timed']} not timed; "
          f"{len(only_old)} only in OLD, {len(only_new)} only in NEW, {len(acc_rows)} with accuracy or bit changes, "
          f"{len(claims)} claim(s) changed state; band 1 -/+ {band:.4f}"
          + "".join(f", {m} 1 -/+ {b:.4f} (GPU-to-GPU)" for m, b in bands.items() if b > band))
    if globs:
        if regressions:
            print(f"\nREGRESSION ({', '.join(globs)}):")
            for r in regressions:
                print(f"  {r}")
            return 1
        if guarded == 0:
            print(f"compare.py: --fail-on-regression {' '.join(globs)}: no timed measurement matching it is in both reports: "
                  "nothing guarded", file=sys.stderr)
            return 2
        print(f"no regression among the {guarded} measurement(s) matching {', '.join(globs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
