#!/usr/bin/env python3
"""Compares two klab reports, measurement by measurement, with a noise-aware verdict.

    scripts/compare.py OLD NEW [--noise 0.01] [--resamples 2000] [--seed 12345] [--markdown]
                       [--fail-on-regression [GLOB]]...

OLD and NEW are report directories (holding report.jsonl) or .jsonl files. Measurements are matched
by (experiment, variant, shape, dist), GDN timings by (experiment, tier, mode, layers, tokens,
fixture). For each match: the ratio of median times NEW/OLD (< 1: NEW is faster) with a percentile
bootstrap 95% interval from the repetitions (timing.samples_ms, less those the harness left out as
throttled; resampled with a fixed seed), and a verdict: "faster" when the whole interval lies below
1 - noise, "slower" when above 1 + noise, "same" otherwise (the harness's own A/B rule). Also listed:
measurements found in one report only, and changes of accuracy (max_rel), of verification and of
bit-equality (bits_vs_a, bits_vs_prev).

--fail-on-regression [GLOB] (repeatable; GLOB defaults to '*') makes the exit status 1 when a
matched measurement whose variant name matches GLOB is slower, or passed verification in OLD and
fails it in NEW. GDN timings are named gdn_timing/tier=TIER,mode=MODE for this. A guard that finds no
timed measurement matching its globs in both reports exits 2: it would guard nothing.
Exit status: 0, 1 (a chosen measurement regressed), 2 (bad arguments, malformed or empty report).
Standard library only (numpy, when importable, makes the bootstrap faster).
"""
import argparse
import fnmatch
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


def quantile_sorted(s, q):
    """Linear interpolation between order statistics (as harness/src/stats.cpp)."""
    pos = q * (len(s) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(s) - 1)
    f = pos - lo
    return s[lo] * (1 - f) + s[hi] * f


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
    """One thing timed in one report: a measurement or a GDN timing."""

    def __init__(self, key, experiment, name, problem, record, med, samples):
        self.key, self.experiment, self.name, self.problem = key, experiment, name, problem
        self.record, self.median, self.samples = record, med, samples


def items_of(report):
    out = {}
    for r in report.records:
        if r["kind"] == "measurement":
            key = ("measurement", r["experiment"], r["variant"], r["shape"], r["dist"])
            samples = kr.kept_samples(r["timing"]) if kr.timed(r) else []
            med = statistics.median(samples) if samples else kr.median_ms(r)
            item = Item(key, r["experiment"], r["variant"], f"{r['shape']} {r['dist']}", r, med, samples)
        elif r["kind"] == "gdn_timing":
            fixture = r.get("fixture", "")
            key = ("gdn_timing", r["experiment"], r["tier"], r["mode"], r["layers"], r["tokens"], fixture)
            samples = [x for x in (r.get("samples_ms") or []) if kr.is_finite(x)]
            med = statistics.median(samples) if samples else r["ms_per_layer_token"]["median"]
            name = f"gdn_timing/tier={r['tier']},mode={r['mode']}"
            item = Item(key, r["experiment"], name, f"{r['layers']} layers x {r['tokens']} tokens {fixture}".strip(), r, med, samples)
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


def compare(old, new, args):
    """The time comparison of one matched pair, or None when either side was not timed."""
    if not kr.is_finite(old.median) or not kr.is_finite(new.median) or old.median <= 0:
        return None
    ratio = new.median / old.median
    note = ""
    if len(old.samples) >= 2 and len(new.samples) >= 2:
        seed = (args.seed ^ zlib.crc32(repr(old.key).encode())) & 0xFFFFFFFF
        lo, hi = bootstrap_ratio(old.samples, new.samples, args.resamples, seed)
        if min(len(old.samples), len(new.samples)) < 5:
            note = "few repetitions"
    else:
        lo = hi = ratio
        note = "no repetitions recorded: medians only"
    verdict = "faster" if hi < 1 - args.noise else "slower" if lo > 1 + args.noise else "same"
    return {"ratio": ratio, "lo": lo, "hi": hi, "verdict": verdict, "note": note}


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
    return out


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
    return gpu, ceil, f"{report.file}: {gpu}" + (f", ceiling {ceil:.0f} GB/s" if kr.is_finite(ceil) else "") + \
        f", commit {str(env.get('git_commit', '?'))[:12]}{' (dirty)' if env.get('git_dirty') else ''}, {env.get('date', '?')}"


def main(argv=None):
    ap = argparse.ArgumentParser(prog="compare.py", description="Compares two klab reports with a noise-aware verdict per measurement.")
    ap.add_argument("old", help="the baseline report (directory or .jsonl)")
    ap.add_argument("new", help="the report to judge (directory or .jsonl)")
    ap.add_argument("--noise", type=float, default=0.01, help="differences within this share are 'same' (default 0.01 = 1%%)")
    ap.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default 2000)")
    ap.add_argument("--seed", type=int, default=12345, help="bootstrap seed (default 12345)")
    ap.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    ap.add_argument("--fail-on-regression", metavar="GLOB", nargs="?", const="*", action="append",
                    help="exit 1 when a matched measurement whose variant matches GLOB (default '*') is slower or lost verification")
    args = ap.parse_args(argv)
    if not (0 <= args.noise < 1) or args.resamples < 100:
        print("compare.py: --noise must be in [0, 1) and --resamples at least 100", file=sys.stderr)
        return 2
    try:
        old_r, new_r = kr.load(args.old), kr.load(args.new)
    except kr.ReportError as e:
        print(f"compare.py: {e}", file=sys.stderr)
        return 2
    old_i, new_i = items_of(old_r), items_of(new_r)
    (g_old, c_old, d_old), (g_new, c_new, d_new) = describe(old_r), describe(new_r)
    print(f"OLD {d_old}")
    print(f"NEW {d_new}")
    if g_old != g_new:
        print(f"note: different GPUs ({g_old} vs {g_new}): the ratios compare the machines as well as the code")
    elif kr.is_finite(c_old) and kr.is_finite(c_new) and abs(c_new / c_old - 1) > 0.02:
        print(f"note: the measured ceilings differ by {100 * (c_new / c_old - 1):+.1f}%: the machine's state changed between runs")
    print(f"verdict: the 95% bootstrap interval of median(NEW)/median(OLD) against 1 -/+ {args.noise:g} (noise)\n")

    rows, regressions, guarded = [], [], 0
    counts = {"faster": 0, "slower": 0, "same": 0, "not timed": 0}
    acc_rows = []
    globs = args.fail_on_regression or []
    for key, o in old_i.items():
        n = new_i.get(key)
        if n is None:
            continue
        c = compare(o, n, args)
        chosen = any(fnmatch.fnmatchcase(o.name, g) for g in globs)
        if c is None:
            counts["not timed"] += 1
            rows.append((o.experiment, o.name, o.problem, fmt_ms(o.median), fmt_ms(n.median), "", "", "not timed", ""))
        else:
            counts[c["verdict"]] += 1
            guarded += chosen
            rows.append((o.experiment, o.name, o.problem, fmt_ms(o.median), fmt_ms(n.median), f"{c['ratio']:.3f}",
                         f"{c['lo']:.3f}..{c['hi']:.3f}", c["verdict"], c["note"]))
            if chosen and c["verdict"] == "slower":
                regressions.append(f"{o.experiment} {o.name} {o.problem}: slower, x{c['ratio']:.3f} (95% {c['lo']:.3f}..{c['hi']:.3f})")
        ch = changes(o, n)
        if ch:
            acc_rows.append((o.experiment, o.name, o.problem, "; ".join(ch)))
        if chosen and o.record.get("verified") is True and n.record.get("verified") is False:
            regressions.append(f"{o.experiment} {o.name} {o.problem}: passed verification in OLD, fails it in NEW")
    header = ("experiment", "variant", "problem", "old ms", "new ms", "new/old", "95% CI", "verdict", "note")
    if rows:
        print_table(header, rows, args.markdown)
    else:
        print("no measurement appears in both reports")
    only_old = [o for k, o in old_i.items() if k not in new_i]
    only_new = [n for k, n in new_i.items() if k not in old_i]
    for title, items in (("only in OLD", only_old), ("only in NEW", only_new)):
        if items:
            print(f"\n{title}:")
            for it in items:
                print(f"  {it.experiment} {it.name} {it.problem}")
    if acc_rows:
        print("\naccuracy and bit-equality changes:")
        print_table(("experiment", "variant", "problem", "change"), acc_rows, args.markdown)
    print(f"\nsummary: {counts['faster']} faster, {counts['slower']} slower, {counts['same']} same, {counts['not timed']} not timed; "
          f"{len(only_old)} only in OLD, {len(only_new)} only in NEW, {len(acc_rows)} with accuracy or bit changes")
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
