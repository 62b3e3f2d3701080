#!/usr/bin/env python3
"""Regenerates every figure of a klab report (PNG and SVG), from its records alone.

    scripts/plot.py REPORT [--out DIR] [--formats png,svg]

REPORT is a report directory (holding report.jsonl) or the .jsonl file. Figures go to
REPORT/plots/ unless --out says otherwise; reports/SCHEMA.md lists them and the records each is
drawn from. Bandwidth figures show each measurement's headline timing (stream in reports with
timing modes, launch in older ones) and say which mode in the title; a bar timed in another mode
(a variant that could not be captured in a graph) is marked with its mode. A figure whose records are absent is skipped with a printed note,
and so is an accuracy figure whose every max_rel lies within one decade (summary.md shows those as a
table). A ladder's peers stand apart from its rungs, off the cumulative line; the error budget is split
into parts rather than drawn wider than the other figures. Exit status: 0 when
the figures were written (none, with notes, when the report holds no measurement), 2 on a
malformed or empty report, bad arguments, or matplotlib missing.

Needs matplotlib (Debian: python3-matplotlib; use /usr/bin/python3 where another python3 comes
first on PATH).
"""
import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import klab_report as kr  # noqa: E402

# Colours: bit-equality with the previous rung, and a fixed cycle for series.
EQUAL, CHANGED, UNKNOWN, BASE = "#2e7d32", "#ef6c00", "#9e9e9e", "#607d8b"
CYCLE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
# Past ten series the colours come round again with a hatching of their own (then another...), so
# no two series of one figure look alike. A peer (a record with peer: true, another project's
# kernel) is outlined in black and hatched "//" on top of its series look.
CYCLE_HATCHES = ["", "..", "xx", "oo", "--", "||", "++", "**"]
PEER_HATCH = "//"


def series_style(i, peer=False):
    """(facecolour, hatch, edgecolour, linewidth) of series i: distinct for every i below
    len(CYCLE) * len(CYCLE_HATCHES), and a peer's differs from every non-peer's."""
    hatch = CYCLE_HATCHES[(i // len(CYCLE)) % len(CYCLE_HATCHES)]
    if peer:
        return CYCLE[i % len(CYCLE)], PEER_HATCH + hatch, "black", 1.0
    return CYCLE[i % len(CYCLE)], hatch, ("white" if hatch else CYCLE[i % len(CYCLE)]), (0.0 if not hatch else 0.5)


def style_kwargs(i, peer=False):
    face, hatch, edge, lw = series_style(i, peer)
    return {"facecolor": face, "hatch": hatch or None, "edgecolor": edge, "linewidth": lw}


def gpu_label(report):
    d = report.env.get("device")
    if isinstance(d, dict) and d.get("name"):
        return str(d["name"])
    return "no device"


def ceiling_of(report, recs):
    for r in recs:
        if kr.is_finite(r.get("ceiling_gbps")):
            return r["ceiling_gbps"]
    c = kr.get(report.env, "ceiling.read_gbps")
    return c if kr.is_finite(c) else None


def log_floor(values):
    """Where to draw exact zeros on a log axis: a decade below the smallest positive value."""
    pos = [v for v in values if kr.is_finite(v) and v > 0]
    return (min(pos) / 10.0) if pos else 1e-12


def wrap(text, width=22):
    """Breaks a variant name at commas so tick labels and legends stay narrow."""
    out, line = [], ""
    for part in str(text).split(","):
        piece = part if not line else "," + part
        if line and len(line) + len(piece) > width:
            out.append(line + ",")
            line = part
        else:
            line += piece
    out.append(line)
    return "\n".join(out)


def problem_labels(recs):
    """Label per problem key: the shape (an op with named parameters: the parameters that vary
    among the figure's problems, all of them when there is one, a line each), plus the
    distribution and op only where they vary."""
    keys = list(kr.group(recs, kr.problem_key))
    ops = {k[0] for k in keys}
    dists = {k[2] for k in keys}
    short = kr.varying_params(k[1] for k in keys)
    labels = {}
    for op, problem, dist in keys:
        parts = ([op] if len(ops) > 1 else []) + short[problem].split(",") + ([dist] if len(dists) > 1 else [])
        labels[(op, problem, dist)] = "\n".join(parts)
    return labels


def problem_word(recs):
    """What the x axis holds: shapes (mat-vecs) or problems (ops with named parameters)."""
    return "shape" if all(kr.has_shape(r) for r in recs) else "problem"


def bar_layout(n_series):
    width = 0.8 / max(n_series, 1)
    return width, [(-0.4 + width * (i + 0.5)) for i in range(n_series)]


# The widest a grouped-bar figure is drawn (inches; 120 dpi: about 1900 px before its margins).
# One with more bars is split into parts, by groups of shapes, and by groups of variants where one
# shape alone would be wider; a variant keeps its look in every part.
MAX_WIDTH_IN = 16.0


def grouped_width(n_keys, n_variants):
    return 1.2 + n_keys * (0.5 + 0.35 * n_variants)


def split_parts(keys, variants):
    """[(keys, [(global index, variant)])] of figures none wider than MAX_WIDTH_IN (one if all fit)."""
    per_v = max(1, int((MAX_WIDTH_IN - 1.2 - 0.5) / 0.35))
    vchunks = [list(enumerate(variants))[i:i + per_v] for i in range(0, len(variants), per_v)] or [[]]
    parts = []
    for vc in vchunks:
        per_k = max(1, int((MAX_WIDTH_IN - 1.2) / (0.5 + 0.35 * len(vc))))
        for i in range(0, max(len(keys), 1), per_k):
            parts.append((keys[i:i + per_k], vc))
    return parts


def part_title(i, n):
    return f" (part {i + 1} of {n})" if n > 1 else ""


# Marks above a bandwidth bar with an A/B verdict against A (vs_a.verdict): marker, colour, legend.
VERDICT_MARKS = {"faster": ("^", "#2e7d32", "faster than A (vs_a verdict)"),
                 "slower": ("v", "#b71c1c", "slower than A (vs_a verdict)"),
                 "same": ("$=$", "#424242", "same as A, within the noise (vs_a verdict)")}


def headline_mode(report, recs):
    """The timing mode of most bars (the run's headline, options.headline, when any bar has it;
    "launch" for reports from before the modes) and the other modes some bars were timed in (a
    variant that could not be captured in a graph has only launch)."""
    modes = [kr.timing_mode(r) for r in recs if kr.timed(r)]
    if not modes:
        return None, []
    preferred = kr.get(report.env, "options.headline")
    main = preferred if preferred in modes else max(dict.fromkeys(modes), key=modes.count)
    return main, [m for m in dict.fromkeys(modes) if m != main]


def draw_bandwidth(plt, report, e, recs):
    # Problems run for accuracy and bits only (no timed variant) have no bar to show: leave them
    # out, unless nothing was timed at all (then the figure says so per variant).
    timed_keys = {kr.problem_key(r) for r in recs if kr.timed(r)}
    if timed_keys:
        recs = [r for r in recs if kr.problem_key(r) in timed_keys]
    labels = problem_labels(recs)
    parts = split_parts(list(labels), list(dict.fromkeys(r["variant"] for r in recs)))
    return [draw_bandwidth_part(plt, report, e, recs, labels, keys, indexed, part_title(i, len(parts)))
            for i, (keys, indexed) in enumerate(parts)]


def draw_bandwidth_part(plt, report, e, recs, labels, keys, indexed, part):
    by = {(kr.problem_key(r), r["variant"]): r for r in recs}
    ceiling = ceiling_of(report, recs)
    mode, other_modes = headline_mode(report, recs)
    width, offs = bar_layout(len(indexed))
    fig, ax = plt.subplots(figsize=(max(6.0, grouped_width(len(keys), len(indexed))), 4.8))
    from matplotlib.patches import Patch
    from matplotlib.lines import Line2D
    from matplotlib.transforms import offset_copy
    handles = []
    verdicts = set()
    top = 100.0
    for pi, (vi, v) in enumerate(indexed):
        xs, ys, lo, hi = [], [], [], []
        for ki, k in enumerate(keys):
            r = by.get((k, v))
            if r is None:
                continue
            x = ki + offs[pi]
            p = kr.pct_ceiling(r)
            if not kr.timed(r) or p is None:
                why = "failed\nverification" if r.get("verified") is False else "not timed"
                ax.text(x, 1, why, rotation=90, ha="center", va="bottom", fontsize=6, color="#555555")
                continue
            t = r["timing"]
            med, tmin, tmax = t["median_ms"], t["min_ms"], t["max_ms"]
            # Bandwidth is bytes / time: the slowest repetition gives the lowest share.
            plo = p * med / tmax if tmax > 0 else p
            phi = p * med / tmin if tmin > 0 else p
            xs.append(x)
            ys.append(p)
            lo.append(max(p - plo, 0))
            hi.append(max(phi - p, 0))
            top = max(top, phi)
            # A bar timed in another mode than the figure's says which.
            own = kr.timing_mode(r)
            ax.text(x, phi, (f"{p:.0f}" if p >= 10 else f"{p:.2g}") + (f"\n{own}" if own != mode else ""), ha="center", va="bottom", fontsize=6)
            # The A/B verdict of this bar against A, a marker above its value.
            verdict = kr.get(r, "vs_a.verdict")
            if verdict in VERDICT_MARKS:
                marker, colour, _ = VERDICT_MARKS[verdict]
                lift = offset_copy(ax.transData, fig=fig, y=18 if own == mode else 26, units="points")
                ax.plot([x], [phi], linestyle="none", marker=marker, color=colour, markersize=5, transform=lift, gid=f"verdict-{verdict}")
                verdicts.add(verdict)
        peer = is_peer(by_variant(recs, v))
        if xs:
            ax.bar(xs, ys, width * 0.95, **style_kwargs(vi, peer))
            ax.errorbar(xs, ys, yerr=[lo, hi], fmt="none", ecolor="black", elinewidth=0.8, capsize=2)
        # Every variant in the legend, also one with no timed bar (it failed verification).
        handles.append(Patch(**style_kwargs(vi, peer), label=wrap(kr.short_variant(by_variant(recs, v)), 40) + (" (peer)" if peer else "")))
    for verdict, (marker, colour, what) in VERDICT_MARKS.items():
        if verdict in verdicts:
            handles.append(Line2D([], [], linestyle="none", marker=marker, color=colour, markersize=5, label=what))
    # With timing modes: the ceiling per mode (the 100% line is the higher of them).
    by_mode = kr.ceiling_by_mode(report.env) if isinstance(kr.get(report.env, "ceiling.mode"), str) else {}
    ceil_txt = (f"{ceiling:.0f} GB/s" if ceiling else "value not recorded") + \
        "".join(f"; {m} {by_mode[m]:.0f}" for m in kr.MODES if m in by_mode)
    handles.append(ax.axhline(100.0, color="black", linestyle="--", linewidth=1.0, label=f"read ceiling measured in this run ({ceil_txt})"))
    if ceiling:
        sec = ax.secondary_yaxis("right", functions=(lambda p: p * ceiling / 100.0, lambda g: g * 100.0 / ceiling))
        sec.set_ylabel("GB/s")
    ax.set_ylim(0, top * 1.12)
    ax.set_xlim(-0.6, len(keys) - 0.4)
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([labels[k] for k in keys], fontsize=8)
    ax.set_ylabel("% of the measured read ceiling (median; bars: min..max)")
    cold = kr.get(report.env, "options.l2_cold")
    timing = f", {mode} timing" + (f" ({', '.join(other_modes)} where marked)" if other_modes else "") if mode else ""
    ax.set_title(f"{e}: bandwidth per variant and {problem_word(recs)}{timing}{part}\n{gpu_label(report)}" + (", L2-cold" if cold else ", L2-hot" if cold is False else ""), fontsize=10)
    ax.legend(handles=handles, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=min(3, len(handles)), frameon=False)
    return fig


def by_variant(recs, v):
    return next(r for r in recs if r["variant"] == v)


def is_peer(r):
    return r.get("peer") is True


def draw_accuracy(plt, report, e, recs):
    labels = problem_labels(recs)
    parts = split_parts(list(labels), list(dict.fromkeys(r["variant"] for r in recs)))
    return [draw_accuracy_part(plt, report, e, recs, labels, keys, indexed, part_title(i, len(parts)))
            for i, (keys, indexed) in enumerate(parts)]


def draw_accuracy_part(plt, report, e, recs, labels, keys, indexed, part):
    by = {(kr.problem_key(r), r["variant"]): r for r in recs}
    floor = log_floor([kr.get(r, "accuracy.max_rel") for r in recs] + [r.get("tolerance") for r in recs])
    series = [(wrap(kr.short_variant(by_variant(recs, v)), 40) + (" (peer)" if is_peer(by_variant(recs, v)) else ""),
               {k: kr.get(by[(k, v)], "accuracy.max_rel") for k in keys if (k, v) in by}, is_peer(by_variant(recs, v)), vi)
              for vi, v in indexed]
    fig, ax = plt.subplots(figsize=(max(6.0, grouped_width(len(keys), len(indexed))), 4.8))
    grouped_log_bars(ax, keys, series, floor)
    width, offs = bar_layout(len(indexed))
    tol_label = "tolerance (max_rel allowed)"
    for pi, (vi, v) in enumerate(indexed):
        for ki, k in enumerate(keys):
            tol = by[(k, v)].get("tolerance") if (k, v) in by else None
            if kr.is_finite(tol) and tol > 0:
                x = ki + offs[pi]
                ax.plot([x - width / 2, x + width / 2], [tol, tol], color="#b71c1c", linewidth=1.2, label=tol_label)
                tol_label = None
    ax.set_xticklabels([labels[k] for k in keys], fontsize=8)
    ax.set_ylabel("max_rel vs the CPU reference (max|y-ref| / max|ref|)")
    ax.set_title(f"{e}: accuracy per variant and {problem_word(recs)}{part}\n{gpu_label(report)}", fontsize=10)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=min(3, len(indexed) + 1), frameon=False)
    return fig


PEER_MARK = "#6a1b9a"


def draw_ladder(plt, report, e, rungs):
    """The rungs as bars (speed-up over the previous rung, coloured by bit-equality) and the
    cumulative line through them; peers (records with peer: true, a library's kernel) are not
    rungs: they stand apart, right of a separator, as markers at their speed-up over rung 0, off
    the line."""
    from matplotlib.patches import Patch
    from matplotlib.lines import Line2D
    peers = [r["record"] for r in rungs if is_peer(r["record"])]
    if peers:
        rungs = kr.ladder_rungs([r["record"] for r in rungs if not is_peer(r["record"])])
    r0 = rungs[0]["record"]
    fig, ax = plt.subplots(figsize=(min(MAX_WIDTH_IN, max(6.0, 1.0 + 1.5 * (len(rungs) + len(peers)) + 0.75 * bool(peers))), 5.0))
    xs = list(range(len(rungs)))
    heights, colours, cumulative = [], [], []
    for rung in rungs:
        if rung["prev"] is None:
            heights.append(1.0)
            colours.append(BASE)
        else:
            heights.append(rung["speedup_prev"] if rung["speedup_prev"] is not None else 0.0)
            b = rung["bits_vs_prev"]
            colours.append(UNKNOWN if b is None else EQUAL if b == 0 else CHANGED)
        cumulative.append(rung["speedup_first"])
    ax.bar(xs, heights, 0.6, color=colours, edgecolor="black", linewidth=0.5)
    for x, rung, h in zip(xs, rungs, heights):
        r = rung["record"]
        rate = f"{r['gmacs']:.0f} GMAC/s" if kr.is_finite(r.get("gmacs")) else (f"{r['gbps']:.0f} GB/s" if kr.is_finite(r.get("gbps")) else "not timed")
        head = "rung 0" if rung["prev"] is None else (f"x{rung['speedup_prev']:.2f}" if rung["speedup_prev"] is not None else "not timed")
        # Inside the bar, so that the cumulative line above never covers it.
        ax.text(x, h / 2 if h > 0 else 0, f"{head}\n{rate}", ha="center", va="center" if h > 0 else "bottom", fontsize=7,
                color="white" if h > 0 else "black", fontweight="bold")
    cx = [x for x, c in zip(xs, cumulative) if c is not None]
    cy = [c for c in cumulative if c is not None]
    if cx:
        ax.plot(cx, cy, "o--", color="black", markersize=4, linewidth=0.8, label="cumulative: vs rung 0")
        for x, c in zip(cx[1:], cy[1:]):
            ax.annotate(f"x{c:.2f}", (x, c), textcoords="offset points", xytext=(6, 4), fontsize=7)
    # Peers apart: past a gap and a separator, a marker each at median(rung 0) / median(peer).
    t0 = kr.median_ms(r0)
    px = [len(rungs) + 0.5 + i for i in range(len(peers))]
    py = []
    if peers:
        sep = len(rungs) - 0.25
        ax.axvline(sep, color="#9e9e9e", linestyle=":", linewidth=1.0)
        ax.axvspan(sep, px[-1] + 0.6, color="#f3e5f5", alpha=0.6, linewidth=0, zorder=0)
        for x, p in zip(px, peers):
            t = kr.median_ms(p)
            v = t0 / t if kr.is_finite(t0) and kr.is_finite(t) and t > 0 else None
            py.append(v)
            if v is None:
                ax.text(x, 1.0, "not timed", ha="center", va="bottom", fontsize=7)
                continue
            ax.plot([x], [v], linestyle="none", marker="D", markersize=7, color=PEER_MARK, gid="ladder-peer")
            ax.annotate(f"x{v:.2f}", (x, v), textcoords="offset points", xytext=(7, -3), fontsize=7, color=PEER_MARK)
        ax.text((sep + px[-1] + 0.6) / 2, 0.02, "peers (not rungs)", transform=ax.get_xaxis_transform(),
                ha="center", va="bottom", fontsize=7, color=PEER_MARK)
    ax.axhline(1.0, color="black", linewidth=0.6)
    ax.set_ylim(0, max(heights + cy + [v for v in py if v is not None] + [1.0]) * 1.25)
    ticks = []
    for rung in rungs:
        what = rung["changed"] or [kr.short_variant(rung["record"])]
        ticks.append(f"{rung['index']}\n" + "\n".join(wrap(w, 18) for w in what))
    ticks += ["peer\n" + wrap(kr.short_variant(p), 18).replace("=", "=\n", 1) for p in peers]
    ax.set_xticks(xs + px)
    ax.set_xticklabels(ticks, fontsize=7)
    if peers:
        ax.set_xlim(-0.6, px[-1] + 0.6)
    ax.set_ylabel("speed-up over the previous rung (ratio of median times)")
    ax.set_title(f"{e}: {kr.problem_of(r0)} {r0['dist']}, what each rung gave\n{gpu_label(report)}", fontsize=10)
    handles = [Patch(color=EQUAL, label="bitwise equal to the previous rung"),
               Patch(color=CHANGED, label="bits changed vs the previous rung"),
               Patch(color=UNKNOWN, label="bit-equality not recorded"), Patch(color=BASE, label="rung 0 (baseline)")]
    line_handles, _ = ax.get_legend_handles_labels()
    if peers:
        line_handles.append(Line2D([], [], linestyle="none", marker="D", markersize=7, color=PEER_MARK,
                                   label="peer (a library's kernel, not a rung): vs rung 0"))
    # Beside the axes, never over the bars.
    ax.legend(handles=handles + line_handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return fig


def grouped_log_bars(ax, categories, series, floor):
    """series: [(label, {category: value}) or (label, {category: value}, peer[, style index])] on a log axis. An exact zero cannot be drawn there: it
    is an outlined, hatched bar up to the floor, marked 0 (GDN's beta and g under q4 are exact)."""
    width, offs = bar_layout(len(series))
    top = floor
    for pos, (label, values, *rest) in enumerate(series):
        peer = bool(rest and rest[0])
        si = rest[1] if len(rest) > 1 else pos
        xs, ys, zx = [], [], []
        colour = CYCLE[si % len(CYCLE)]
        for ci, c in enumerate(categories):
            if c not in values:
                continue
            v = values[c]
            x = ci + offs[pos]
            if not kr.is_finite(v):
                ax.text(x, floor, "n/a", rotation=90, ha="center", va="bottom", fontsize=6, color="#b71c1c")
            elif v > 0:
                xs.append(x)
                ys.append(v)
                top = max(top, v)
                ax.text(x, v, kr.fmt_err(v), rotation=90, ha="center", va="bottom", fontsize=6)
            else:
                zx.append(x)
                ax.text(x, floor, "0", ha="center", va="bottom", fontsize=7)
        if xs:
            ax.bar(xs, ys, width * 0.95, label=label, **style_kwargs(si, peer))
        if zx:
            ax.bar(zx, [floor] * len(zx), width * 0.95, facecolor="none", edgecolor=colour, hatch="//", label=None if xs else label)
    ax.set_yscale("log")
    # Room above the tallest bar for its rotated value.
    ax.set_ylim(floor / 2, top * 6)
    ax.set_xticks(range(len(categories)))
    ax.set_xlim(-0.6, len(categories) - 0.4)


# The error budget's bars per series and distribution (inches): the rotated value above each bar needs this much.
EB_BAR_IN = 0.2


def draw_error_budget(plt, report, e, recs):
    """rms_rel and max_rel (two panels) by input distribution, one bar series per (shape, what);
    no wider than MAX_WIDTH_IN: past that the series are split over parts (a series keeps its look
    in every part), the legend below the panels, never over the bars."""
    dists = sorted({r["dist"] for r in recs}, key=kr.dist_order)
    series_keys = list(dict.fromkeys((r["shape"], r.get("what", "")) for r in recs))
    per_part = max(1, int((MAX_WIDTH_IN - 2.0) / 2 / (EB_BAR_IN * len(dists)) - 1))
    n_parts = -(-len(series_keys) // per_part)
    size = -(-len(series_keys) // n_parts)
    chunks = [list(enumerate(series_keys))[i:i + size] for i in range(0, len(series_keys), size)]
    return [draw_error_budget_part(plt, e, recs, dists, chunk, part_title(i, len(chunks))) for i, chunk in enumerate(chunks)]


def draw_error_budget_part(plt, e, recs, dists, chunk, part):
    panel = 0.6 + EB_BAR_IN * len(dists) * (len(chunk) + 1)
    fig, axes = plt.subplots(1, 2, figsize=(min(MAX_WIDTH_IN, max(8.0, 2.0 + 2 * panel)), 4.6))
    for ax, field in zip(axes, ("rms_rel", "max_rel")):
        floor = log_floor([r[field] for r in recs])
        series = []
        for si, (shape, what) in chunk:
            vals = {r["dist"]: r[field] for r in recs if r["shape"] == shape and r.get("what", "") == what}
            series.append((f"{shape} {what}".strip(), vals, False, si))
        grouped_log_bars(ax, dists, series, floor)
        labels = []
        for d in dists:
            src = next((r.get("source") for r in recs if r["dist"] == d and r.get("source")), None)
            labels.append(f"{d}\n({Path(src).name})" if src else d)
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_ylabel(field + (" = rms(y-ref)/rms(ref)" if field == "rms_rel" else " = max|y-ref|/max|ref|"))
        ax.set_xlabel("input distribution")
    # One legend below both panels (and their axis labels), never over the bars, and not widening the figure.
    fig.suptitle(f"{e}: error by input distribution{part}", fontsize=10)
    fig.tight_layout()
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, frameon=False)
    return fig


def draw_gdn_ops(plt, report, e, recs):
    r0 = recs[0]
    ops = sorted(dict.fromkeys(r["op"] for r in recs), key=kr.gdn_op_order)
    fields = [("rms_rel_t0", "rms_rel, first token"), ("rms_rel_last", "rms_rel, last token"), ("max_rel_t0", "max_rel, first token")]
    fields = [(f, l) for f, l in fields if any(f in r for r in recs)]
    floor = log_floor([r.get(f) for r in recs for f, _ in fields])
    series = [(label, {r["op"]: r.get(f) for r in recs if f in r}) for f, label in fields]
    fig, ax = plt.subplots(figsize=(max(7.0, 1.0 + 0.3 * len(ops) * (1 + len(fields))), 4.6))
    grouped_log_bars(ax, ops, series, floor)
    ax.set_xticklabels(ops, fontsize=8)
    ax.set_xlabel("operator (readback name, in step order)")
    ax.set_ylabel("relative error (hatched: exactly 0)")
    tokens = r0.get("tokens")
    ax.set_title(f"{e}: {r0['pair']}, per operator\n{r0['fixture']}" + (f", {tokens} tokens" if tokens else ""), fontsize=10)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=len(fields), frameon=False)
    return fig


def draw_gdn_timing(plt, report, e, recs):
    configs = list(dict.fromkeys((r.get("fixture", ""), r["layers"], r["tokens"]) for r in recs))
    tiers = sorted(dict.fromkeys(r["tier"] for r in recs), key=lambda t: ({"f32": 0, "q4": 1}.get(t, 2), t))
    cats = [(t, c) for c in configs for t in tiers if any(r["tier"] == t and (r.get("fixture", ""), r["layers"], r["tokens"]) == c for r in recs)]
    modes = sorted(dict.fromkeys(r["mode"] for r in recs), key=lambda m: ({"host-facing": 0, "device-resident": 1}.get(m, 2), m))
    width, offs = bar_layout(len(modes))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.5 + 1.4 * len(cats)), 4.6))
    top = 0.0
    for mi, mode in enumerate(modes):
        xs, ys, lo, hi = [], [], [], []
        for ci, (tier, cfg) in enumerate(cats):
            r = next((r for r in recs if r["tier"] == tier and r["mode"] == mode and (r.get("fixture", ""), r["layers"], r["tokens"]) == cfg), None)
            if r is None:
                continue
            t = r["ms_per_layer_token"]
            med = t["median"]
            tmin, tmax = t.get("min", med), t.get("max", med)
            xs.append(ci + offs[mi])
            ys.append(med)
            lo.append(max(med - tmin, 0))
            hi.append(max(tmax - med, 0))
            top = max(top, tmax)
            ax.text(ci + offs[mi], tmax, f"{med:.3g}", ha="center", va="bottom", fontsize=7)
        if xs:
            ax.bar(xs, ys, width * 0.95, label=mode, **style_kwargs(mi))
            ax.errorbar(xs, ys, yerr=[lo, hi], fmt="none", ecolor="black", elinewidth=0.8, capsize=2)
    ax.set_ylim(0, top * 1.2 if top > 0 else 1)
    ax.set_xticks(range(len(cats)))
    ax.set_xticklabels([f"{t}\n{c[1]} layers x {c[2]} tokens" + (f"\n{c[0]}" if c[0] and len(configs) > 1 else "") for t, c in cats], fontsize=8)
    ax.set_ylabel("ms per layer and token (median; bars: min..max)")
    ax.set_title(f"{e}: GDN step time by tier and round-trip mode\n{gpu_label(report)}", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return fig


def draw_gdn_step(plt, report, e, steps):
    """gdn_step measurements: ms per layer and token (min..max) by tier and round trip, as the
    schema-1 gdn_timing figure, in one timing mode (launch where every bar has it: the host-facing
    API has no stream timing); the q4 tier on its race's own kernel (the other kernels have a figure
    of their own)."""
    rows = [s for s in kr.gdn_tier_rows(steps) if s["views"]]
    mode = kr.gdn_common_mode(rows)
    problems = list(dict.fromkeys((s["problem"], s["dist"]) for s in rows))
    short = kr.varying_params(p for p, _ in problems)
    tiers = sorted(dict.fromkeys(s["tier"] for s in rows), key=kr.tier_order)
    cats = [(t, p) for p in problems for t in tiers if any(s["tier"] == t and (s["problem"], s["dist"]) == p for s in rows)]
    modes = sorted(dict.fromkeys(s["mode"] for s in rows), key=kr.round_trip_order)
    width, offs = bar_layout(len(modes))
    fig, ax = plt.subplots(figsize=(min(MAX_WIDTH_IN, max(6.0, 1.5 + 1.4 * len(cats))), 4.6))
    top = 0.0
    for mi, rt in enumerate(modes):
        xs, ys, lo, hi = [], [], [], []
        for ci, (tier, prob) in enumerate(cats):
            s = next((s for s in rows if s["tier"] == tier and s["mode"] == rt and (s["problem"], s["dist"]) == prob), None)
            if s is None:
                continue
            own, v = kr.gdn_view(s, mode)
            x = ci + offs[mi]
            xs.append(x)
            ys.append(v["median"])
            lo.append(max(v["median"] - v["min"], 0))
            hi.append(max(v["max"] - v["median"], 0))
            top = max(top, v["max"])
            ax.text(x, v["max"], f"{v['median']:.3g}" + (f"\n{own}" if own != mode else ""), ha="center", va="bottom", fontsize=7)
        if xs:
            ax.bar(xs, ys, width * 0.95, label=rt, **style_kwargs(mi))
            ax.errorbar(xs, ys, yerr=[lo, hi], fmt="none", ecolor="black", elinewidth=0.8, capsize=2)
    ax.set_ylim(0, top * 1.25 if top > 0 else 1)
    ax.set_xticks(range(len(cats)))
    tokens = {p: sorted({s["tokens"] for s in rows if (s["problem"], s["dist"]) == p}) for p in problems}
    ax.set_xticklabels([f"{t}\n1 layer x {'/'.join(map(str, tokens[p]))} tokens"
                        + ("\n" + short[p[0]].replace(",", "\n") if len(problems) > 1 else "") for t, p in cats], fontsize=8)
    ax.set_ylabel("ms per layer and token (median; bars: min..max)")
    ax.set_title(f"{e}: GDN step time by tier and round-trip mode, {mode} timing\n{gpu_label(report)}", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return fig


def draw_gdn_q4_kernels(plt, report, e, steps):
    """Every q4 mat-vec kernel inside the GDN step (the q4 tier's device-resident run on each; the
    schema-1 gdn_q4_variant records): ms per layer and token, one horizontal bar each (the figure
    grows in height, not width), fastest first, the f32 tier's device-resident time as a line."""
    rows = kr.q4_kernel_rows(steps)
    mode = kr.gdn_common_mode(rows, prefer=None) or "launch"
    problems = list(dict.fromkeys((s["problem"], s["dist"]) for s in rows))
    short = kr.varying_params(p for p, _ in problems)
    entries, untimed = [], []
    for s in rows:
        own, v = kr.gdn_view(s, mode)
        label = wrap(s["projections"].replace("+", ","), 48) + (f"\n[{short[s['problem']]}]" if len(problems) > 1 else "")
        if v is None:
            untimed.append((0.0, 0.0, 0.0, label, "failed verification" if s["record"].get("verified") is False else "not timed", s))
        else:
            entries.append((v["median"], v["min"], v["max"], label, own, s))
    # Fastest first; a kernel not timed (it failed verification) last, saying so.
    entries = sorted(entries, key=lambda t: t[0]) + untimed
    fig, ax = plt.subplots(figsize=(9.0, max(3.0, 1.2 + 0.45 * len(entries))))
    ys = list(range(len(entries)))
    meds = [t[0] for t in entries]
    ax.barh(ys, meds, 0.7, xerr=[[max(t[0] - t[1], 0) for t in entries], [max(t[2] - t[0], 0) for t in entries]],
            color=[CYCLE[0] if t[5]["record"].get("verified") is not False else UNKNOWN for t in entries],
            ecolor="black", error_kw={"elinewidth": 0.8, "capsize": 2})
    for y, t in zip(ys, entries):
        ax.text(t[2], y, (f" {t[0]:.4g}" + (f" ({t[4]})" if t[4] != mode else "")) if t[4] in kr.MODES else f" {t[4]}", va="center", fontsize=7)
    f32 = [s for s in steps if s["tier"] == "f32" and s["mode"] == "device-resident" and s["views"]]
    for s in f32[:1]:
        own, v = kr.gdn_view(s, mode)
        ax.axvline(v["median"], color="#b71c1c", linestyle="--", linewidth=1.0, label=f"f32 tier, device-resident ({v['median']:.4g} ms, {own})")
    ax.set_yticks(ys)
    ax.set_yticklabels([t[3] for t in entries], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, max(meds + [v["median"] for s in f32[:1] for _, v in [kr.gdn_view(s, mode)]]) * 1.3)
    ax.set_xlabel(f"ms per layer and token (median; bars: min..max), {mode} timing")
    ax.set_title(f"{e}: every q4 kernel inside the GDN step (q4 tier, device-resident)\n{gpu_label(report)}", fontsize=10)
    if f32:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return fig


def draw_breakdown(plt, report, e, recs):
    """gdn-step-breakdown: one bar per tier, its operators' median times stacked in step order (the
    sum of the parts), the whole step timed alone as a black tick across the bar; the legend outside
    the axes, right of the bars."""
    tiers = kr.breakdown_tiers(recs)
    # Every tier's operators in its step order: an operator one tier has alone (a fused one) goes
    # right after the operator before it in that tier.
    names = []
    for ops, _ in tiers.values():
        at = 0
        for r in ops:
            if r["operator"] not in names:
                names.insert(at, r["operator"])
            at = names.index(r["operator"]) + 1
    fig, ax = plt.subplots(figsize=(min(MAX_WIDTH_IN, 3.0 + 1.3 * len(tiers)), 5.2))
    xs = list(range(len(tiers)))
    bottoms = [0.0] * len(tiers)
    for i, name in enumerate(names):
        hs = [next((r["median_us"] for r in ops if r["operator"] == name), 0.0) for ops, _ in tiers.values()]
        ax.bar(xs, hs, 0.6, bottom=bottoms, label=name, **style_kwargs(i))
        bottoms = [b + h for b, h in zip(bottoms, hs)]
    top = max(bottoms + [1e-9])
    whole_label = True
    for x, (tier, (ops, whole)) in zip(xs, tiers.items()):
        text = f"sum {bottoms[x]:.3g} us"
        if whole:
            w = whole["median_us"]
            ax.plot([x - 0.38, x + 0.38], [w, w], color="black", linewidth=2.0, label="whole step, timed alone" if whole_label else None)
            whole_label = False
            text += f"\nstep {w:.3g} us"
            top = max(top, w)
        ax.text(x, max(bottoms[x], whole["median_us"] if whole else 0) * 1.02, text, ha="center", va="bottom", fontsize=8)
    ax.set_ylim(0, top * 1.22)
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{t} tier" for t in tiers], fontsize=9)
    ax.set_ylabel("us per layer and token (stream mode, median)")
    ax.set_title(f"{e}: the GDN step by operator\n{gpu_label(report)}", fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    # The whole step first, then the operators top of the stack first, as the bars read.
    order = [i for i, l in enumerate(labels) if l not in names] + [i for i, l in enumerate(labels) if l in names][::-1]
    ax.legend([handles[i] for i in order], [labels[i] for i in order], fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return fig


def draw_state_drift(plt, report, e, recs):
    """gdn-state-drift: one panel per decay regime, o's worst max_rel per 64-token window against the
    window's last token, one line per subject (the storage models, then the kernels), log scale: does
    the error grow with t, and how far apart are the state precisions."""
    regimes = list(dict.fromkeys(r["regime"] for r in recs))
    subjects = list(dict.fromkeys(r["subject"] for r in recs))
    fig, axes = plt.subplots(1, len(regimes), figsize=(min(MAX_WIDTH_IN, 1.5 + 4.2 * len(regimes)), 4.2), sharey=True, squeeze=False)
    for ax, regime in zip(axes[0], regimes):
        for i, subject in enumerate(subjects):
            pts = sorted((r["t_end"], r["o_max_rel"]) for r in recs
                         if r["regime"] == regime and r["subject"] == subject and kr.is_finite(r.get("o_max_rel")) and r["o_max_rel"] > 0)
            if not pts:
                continue
            ax.plot([t for t, _ in pts], [v for _, v in pts], marker="o", markersize=3, color=series_style(i)[0], label=subject.replace("gdn_recurrence/", ""))
        ax.set_yscale("log")
        ax.set_title(regime, fontsize=9)
        ax.set_xlabel("token (window's last)")
        ax.grid(True, which="major", axis="y", alpha=0.3)
    axes[0][0].set_ylabel("o max_rel vs f64 (worst in the window)")
    fig.suptitle(f"{e}: the recurrence's error over time, per state precision\n{gpu_label(report)}", fontsize=10)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 0.9), frameon=False)
    fig.tight_layout()
    return fig


DRAW = {"bandwidth": draw_bandwidth, "accuracy": draw_accuracy, "ladder": draw_ladder,
        "error_budget": draw_error_budget, "gdn_op": draw_gdn_ops, "gdn_timing": draw_gdn_timing,
        "gdn_step": draw_gdn_step, "gdn_q4_kernels": draw_gdn_q4_kernels, "gdn_breakdown": draw_breakdown,
        "state_drift": draw_state_drift}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="plot.py", description="Regenerates the figures of a klab report (PNG and SVG).")
    ap.add_argument("report", help="report directory (holding report.jsonl) or the .jsonl file")
    ap.add_argument("--out", help="directory for the figures (default: REPORT/plots)")
    ap.add_argument("--formats", default="png,svg", help="comma-separated: png, svg, pdf (default png,svg)")
    args = ap.parse_args(argv)
    formats = [f.strip().lower() for f in args.formats.split(",") if f.strip()]
    bad = [f for f in formats if f not in ("png", "svg", "pdf")]
    if not formats or bad:
        print(f"plot.py: --formats: unknown format(s) {', '.join(bad) or '(none given)'} (png, svg, pdf)", file=sys.stderr)
        return 2
    try:
        report = kr.load(args.report)
        plan, notes = kr.chart_plan(report)
    except kr.ReportError as e:
        print(f"plot.py: {e}", file=sys.stderr)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"plot.py: matplotlib is not importable by {sys.executable} ({e}); install python3-matplotlib "
              "(Debian/Ubuntu) or run with an interpreter that has it, e.g. /usr/bin/python3", file=sys.stderr)
        return 2
    # Byte-stable output: no dates in the files, a fixed SVG id salt.
    matplotlib.rcParams["svg.hashsalt"] = "klab"
    matplotlib.rcParams["svg.fonttype"] = "path"
    out = Path(args.out) if args.out else report.dir / "plots"
    if plan:
        out.mkdir(parents=True, exist_ok=True)
    if report.incomplete():
        print(f"plot.py: note: {report.file} is {report.incomplete()}: the figures show only what it holds")
    for n in notes:
        print(f"plot.py: note: {n}")
    written = []
    for name, kind, e, payload in plan:
        figs = DRAW[kind](plt, report, e, payload)
        # A figure too wide is drawn in parts: NAME, NAME-part2, NAME-part3...
        for i, fig in enumerate(figs if isinstance(figs, list) else [figs]):
            for f in formats:
                path = out / (f"{name}.{f}" if i == 0 else f"{name}-part{i + 1}.{f}")
                meta = {"png": {"Software": None}, "svg": {"Date": None}, "pdf": {"CreationDate": None}}[f]
                fig.savefig(path, format=f, dpi=120, bbox_inches="tight", metadata=meta)
                if f == "png":
                    to_palette(path)
                written.append(path)
            plt.close(fig)
    if written:
        print(f"plot.py: {len(plan)} figure(s) in {out}: " + ", ".join(name for name, *_ in plan))
    else:
        print(f"plot.py: no figure: {report.file} holds no record a figure is drawn from")
    return 0


def to_palette(path):
    """Rewrites a PNG as 256 colours (a palette PNG, no dithering). A figure has a few hundred colours, most of them the
    anti-aliased edges of its text; the palette form is about a quarter of the RGBA file's bytes, which is what keeps
    committed plots inside the tree that travels to the GPU machine (tests/scripts/test_tree_budget.py). Pillow is one
    of matplotlib's own requirements; the result is byte-stable (median cut, fixed order, no metadata)."""
    from PIL import Image
    with Image.open(path) as im:
        q = im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    q.save(path, format="PNG", optimize=True)


if __name__ == "__main__":
    sys.exit(main())
