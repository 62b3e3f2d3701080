#!/usr/bin/env python3
"""Writes the Markdown summary of a klab report: the tables README.md shows.

    scripts/summarize.py REPORT [--out FILE]

REPORT is a report directory (holding report.jsonl) or the .jsonl file. The summary goes to
REPORT/summary.md unless --out says otherwise ("-": standard output). It holds the environment
(GPU, measured ceiling and how it was timed, empty-kernel times, commit, date), then per experiment
its claims and their state (evidence as sub-bullets), first for mat-vecs a variant x shape table per
input distribution (cell: headline time, % of ceiling, verdict vs A with the speed-up's 95% CI), then
its measurements per problem (variant | median ms (min..max) | GB/s |
% of ceiling | GMAC/s | max_rel | bits vs A | verdict vs A; reports with timing modes add the
headline's mode, % of attainable (vs a read of exactly the op's bytes in that mode) and, when the
headline is not launch, a launch column, and name the variants timed in launch mode only), the seed ladder, error-budget and GDN tables where the report has those
records (the GDN step per layer and token from gdn_step measurements, or schema-1 gdn_timing records;
gdn-stack's layers per token as one CUDA graph from gdn_stack records (and gdn-stack-layers' counts and their line from
gdn_stack_layers and gdn_stack_layers_fit records), gdn-batch's batched slots from
gdn_batch records),
the named outputs of ops that have several (per output max_rel and bits vs A), figures from
REPORT/plots/ that exist, and what was skipped and why. Measurements are grouped by problem (the
shape of a mat-vec; an op's own parameters, "ck=4,dk=128,...", otherwise). A report that is not
whole (schema 2: no closing record, or one that says failed or interrupted) says so in its first line.
Exit status: 0 written, 2 on a malformed or empty report or bad arguments. Standard library only.
"""
import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import klab_report as kr  # noqa: E402
import kernel_trace  # noqa: E402

STATE = {"held": "**held**", "not_held": "**NOT HELD**", "not_evaluated": "not evaluated"}


def cell(x):
    return str(x).replace("|", "\\|").replace("\n", " ")


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    out += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return out + [""]


def mib(b):
    return f"{b / 2**20:.0f} MiB" if kr.is_finite(b) else "n/a"


def environment(report):
    env = report.env
    dev = env.get("device")
    rows = []
    if isinstance(dev, dict):
        facts = ([f"{dev['sm_count']} SMs"] if "sm_count" in dev else []) + \
                ([f"L2 {mib(dev['l2_bytes'])}"] if "l2_bytes" in dev else []) + \
                ([f"cc {dev['compute_capability']}"] if "compute_capability" in dev else [])
        rows.append(("GPU", str(dev.get("name", "n/a")) + (f" ({', '.join(facts)})" if facts else "")))
        if "driver_version" in dev or "runtime_version" in dev:
            rows.append(("driver / runtime", f"{dev.get('driver_version', 'n/a')} / {dev.get('runtime_version', 'n/a')}"))
        if kr.is_finite(dev.get("theoretical_gbps")):
            rows.append(("theoretical bandwidth", f"{dev['theoretical_gbps']:.0f} GB/s"))
    else:
        rows.append(("GPU", "none: " + str(env.get("no_device_reason") or "no CUDA device")))
    c = env.get("ceiling")
    if isinstance(c, dict):
        # How it was timed: per mode where both were measured (read_gbps is then the higher).
        by_mode = kr.ceiling_by_mode(env)
        how = ([", ".join(f"{m} {kr.fmt_num(by_mode[m], 4)} GB/s" for m in sorted(by_mode, key=mode_order))]
               if isinstance(c.get("modes"), dict) and by_mode else [f"{c['mode']} mode"] if isinstance(c.get("mode"), str) else [])
        how += [f"flush {c['flush']}"] if isinstance(c.get("flush"), str) else []
        stream = c.get("modes", {}).get("stream", {}) if isinstance(c.get("modes"), dict) else {}
        copy_stream = stream.get("copy_gbps") if isinstance(stream, dict) else None
        copies = f"copy {kr.fmt_num(c.get('copy_gbps'), 4)} GB/s" + (
            f", stream {kr.fmt_num(copy_stream, 4)} GB/s" if isinstance(copy_stream, (int, float)) and copy_stream > 0 else "")
        rows.append(("read ceiling (measured in this run)", f"{kr.fmt_num(c.get('read_gbps'), 4)} GB/s ({copies})"
                     + "".join(f"; {h}" for h in how)))
        empty = c.get("empty_kernel_us")
        if isinstance(empty, dict) and empty:
            rows.append(("empty kernel (launch overhead)", ", ".join(f"{m} {kr.fmt_num(empty[m])} us" for m in sorted(empty, key=mode_order))))
        hop = c.get("hop_us")
        if isinstance(hop, dict) and isinstance(hop.get("full_grid"), dict) and isinstance(hop.get("one_block"), dict):
            # A chain of dependent kernels pays this per kernel even when it moves no bytes (timing.hpp, Ceiling::hop_*).
            rows.append(("dependent hop (graph, per kernel)",
                         ", ".join(f"{g.replace('_', ' ')} {m} {kr.fmt_num(hop[g].get(m))} us"
                                   for g in ("one_block", "full_grid") for m in ("plain", "pdl"))))
    else:
        rows.append(("read ceiling", "not measured in this run"))
    commit = str(env.get("git_commit", "n/a"))
    rows.append(("commit", commit[:12] + (" (dirty: uncommitted changes)" if env.get("git_dirty") else "")))
    rows.append(("date", env.get("date", "n/a")))
    if env.get("command"):
        rows.append(("command", f"`{env['command']}`"))
    o = env.get("options")
    if isinstance(o, dict):
        rows.append(("options", ", ".join(f"{k} {json.dumps(v)}" for k, v in o.items())))
    lines = ["## Environment", ""] + table(("", ""), rows)
    if len(report.envs()) > 1:
        lines += [f"Note: this report merges {len(report.envs())} runs (different commit, date or device); the table shows the first.", ""]
    return lines


def mode_order(m):
    return (kr.MODES.index(m) if m in kr.MODES else len(kr.MODES), m)


def verdict_vs_a(r):
    if not kr.timed(r):
        return "not timed (failed verification)" if r.get("verified") is False else "not timed"
    v = r.get("vs_a")
    if not isinstance(v, dict):
        return "A" if r.get("a") == r["variant"] else "n/a"
    s = v.get("speedup")
    speed = f" x{s:.3f}" if kr.is_finite(s) else ""
    ci = ""
    # One direction on the line: the speed-up median(A)/median(B) and its interval (1/hi..1/lo of
    # the time ratio's), never the time ratio beside a speed-up.
    lo, hi = v.get("ci95_lo"), v.get("ci95_hi")
    if kr.is_finite(lo) and kr.is_finite(hi) and lo > 0 and hi > 0:
        ci = f" (speed-up 95% CI x{1 / hi:.3f}..x{1 / lo:.3f})"
    return f"{v['verdict']}{speed}{ci}"


def timing_cell(t):
    return f"{t['median_ms']:.4g} ({t['min_ms']:.4g}..{t['max_ms']:.4g})"


def measurement_columns(recs):
    """Which of the timing-mode columns a problem's table needs: the headline's mode and %
    of attainable (reports with timing modes), and a launch column (when a headline is not launch)."""
    modal = any(kr.has_modes(r) or kr.pct_attainable(r) is not None for r in recs)
    launch = any(kr.timing_mode(r) not in (None, "launch") and kr.mode_view(r, "launch") is not None for r in recs)
    return modal, launch


def measurement_header(modal, launch):
    return (("variant",) + (("mode",) if modal else ()) + ("median ms (min..max)", "GB/s", "% of ceiling")
            + (("% of attainable",) if modal else ())
            + (("launch: median ms (% of ceiling, % of attainable)",) if launch else ())
            + ("GMAC/s", "max_rel", "bits vs A", "verdict vs A"))


def measurement_rows(recs, modal=False, launch=False):
    rows = []
    for i, r in enumerate(recs):
        # A is named by the records; older records without "a" put A first.
        is_a = r["a"] == r["variant"] if isinstance(r.get("a"), str) else i == 0
        name = r["variant"] + (" (A)" if is_a else "")
        med = timing_cell(r["timing"]) if kr.timed(r) else "not timed"
        b = r.get("bits_vs_a")
        bits = "A" if is_a else ("n/a" if b is None else str(b))
        acc = kr.fmt_err(kr.get(r, "accuracy.max_rel"))
        if r.get("verified") is False:
            acc += " FAILED"
        row = (name,)
        if modal:
            row += (kr.mode_label(r["timing"]) if kr.timed(r) else "",)
        row += (med, kr.fmt_num(r.get("gbps"), 4), kr.fmt_num(kr.pct_ceiling(r)))
        if modal:
            row += (kr.fmt_num(kr.pct_attainable(r)),)
        if launch:
            lv = kr.mode_view(r, "launch")
            if lv is None:
                row += ("n/a" if kr.timed(r) else "",)
            elif lv is r:
                row += ("(the headline)",)
            else:
                row += (f"{lv['timing']['median_ms']:.4g} ({kr.fmt_num(kr.pct_ceiling(lv))}, {kr.fmt_num(kr.pct_attainable(lv))})",)
        rows.append(row + (kr.fmt_num(r.get("gmacs"), 4), acc, bits, "A" if is_a and kr.timed(r) else verdict_vs_a(r)))
    return rows


def grid_cell(r, mode):
    """One variant on one shape: headline time, % of ceiling, verdict vs A with the speed-up's
    interval (a timing in another mode than the table's says which)."""
    if not kr.timed(r):
        return "not timed (failed verification)" if r.get("verified") is False else "not timed"
    own = kr.timing_mode(r)
    is_a = r.get("a") == r["variant"]
    parts = [f"{r['timing']['median_ms']:.4g} ms" + (f" ({own})" if own != mode else ""),
             f"{kr.fmt_num(kr.pct_ceiling(r))}% of ceiling", "A" if is_a else verdict_vs_a(r)]
    if r.get("verified") is False:
        parts.append("FAILED verification")
    return "<br>".join(parts)


def fastest_cell(r):
    """A fastest record: its variant, median time and % of the read ceiling."""
    return f"{r['variant']}<br>{r['timing']['median_ms']:.4g} ms, {kr.fmt_num(kr.pct_ceiling(r))}% of ceiling"


def fastest_rows(rs, shapes):
    """Per shape, the fastest of ours and the fastest peer among the timed records that did not fail verification
    (lowest median), and ours over that peer as the ratio of the two medians (not the harness's race: the verdicts
    with their intervals are in the table below it)."""
    rows = []
    for sh in shapes:
        here = [r for r in rs if kr.problem_of(r) == sh and kr.timed(r) and r.get("verified") is not False]
        ours = min((r for r in here if r.get("peer") is not True), key=kr.median_ms, default=None)
        peer = min((r for r in here if r.get("peer") is True), key=kr.median_ms, default=None)
        ratio = f"x{kr.median_ms(peer) / kr.median_ms(ours):.2f}" if ours and peer and kr.median_ms(ours) > 0 else ""
        rows.append((sh, fastest_cell(ours) if ours else "none timed", fastest_cell(peer) if peer else "", ratio))
    return rows


def variant_shape_tables(recs):
    """Mat-vec measurements as two tables per (op, input distribution): the fastest of ours and the
    fastest peer per shape (fastest_rows), then a row per variant, a column per shape (in the order of
    the report), each cell the headline time, % of ceiling and verdict vs A with the speed-up's 95% interval. [] when a record has no shape (ops with named
    parameters keep their per-problem tables)."""
    if not recs or not all(re.fullmatch(r"\d+x\d+", str(r.get("shape"))) for r in recs):
        return []
    lines = []
    for (op, dist), rs in kr.group(recs, lambda r: (r.get("op") or "", r["dist"])).items():
        if not any(kr.timed(r) for r in rs):
            lines += [f"{op + ' ' if op else ''}{dist} inputs: not timed (accuracy and bits only: in the detail below).", ""]
            continue
        shapes = list(dict.fromkeys(kr.problem_of(r) for r in rs))
        variants = list(dict.fromkeys(r["variant"] for r in rs))
        by = {(r["variant"], kr.problem_of(r)): r for r in rs}
        modes = [kr.timing_mode(r) for r in rs if kr.timed(r)]
        mode = max(dict.fromkeys(modes), key=modes.count) if modes else None
        rows = []
        for v in variants:
            own = [by[(v, sh)] for sh in shapes if (v, sh) in by]
            is_a = all(r.get("a") == v for r in own)
            peer = any(r.get("peer") is True for r in own)
            rows.append((v + (" (A)" if is_a else "") + (" (peer)" if peer else ""),)
                        + tuple(grid_cell(by[(v, sh)], mode) if (v, sh) in by else "" for sh in shapes))
        lines += [f"{op + ' ' if op else ''}fastest per shape, {dist} inputs" + (f", {mode} timing" if mode else "")
                  + ": the fastest of ours and the fastest peer (lowest median, verified), ours over the peer as the ratio of medians:", ""]
        lines += table(("shape", "fastest of ours", "fastest peer", "ours over the peer"), fastest_rows(rs, shapes))
        lines += [f"{op + ' ' if op else ''}variant x shape, {dist} inputs" + (f", {mode} timing" if mode else "")
                  + ": median time, % of the read ceiling, verdict vs A (the harness's race, speed-up with its 95% CI):", ""]
        lines += table(("variant",) + tuple(shapes), rows)
    return lines


def stream_notes(recs):
    """Variants timed in launch mode only, and why (they could not be captured in a graph)."""
    notes = [f"- {r['variant']}: launch timing only: {r['stream_unavailable']}" for r in recs if isinstance(r.get("stream_unavailable"), str)]
    return ["Not timed in stream mode:", ""] + notes + [""] if notes else []


def ladder_lines(rungs):
    r0 = rungs[0]["record"]
    modal, _ = measurement_columns([rung["record"] for rung in rungs])
    modes = list(dict.fromkeys(kr.timing_mode(rung["record"]) for rung in rungs if kr.timed(rung["record"])))
    timing = f" ({', '.join(modes)} timing)" if modal and modes else ""
    head = (f"Seed ladder, {kr.problem_of(r0)} {r0['dist']}{timing}: speed-up per rung = median(previous) / median(rung); "
            "bits compared with the previous rung.")
    rows = []
    for rung in rungs:
        r = rung["record"]
        what = ", ".join(rung["changed"]) if rung["changed"] else "(base)" if rung["prev"] is None else "(same axes)"
        sp = "" if rung["prev"] is None else (f"x{rung['speedup_prev']:.2f}" if rung["speedup_prev"] is not None else "n/a")
        sf = f"x{rung['speedup_first']:.2f}" if rung["speedup_first"] is not None else "n/a"
        bits = kr.bits_label(rung) + (" (from bits_vs_a)" if rung["bits_from"] == "bits_vs_a" else "")
        rows.append((rung["index"], r["variant"], what, kr.fmt_num(kr.median_ms(r), 4), kr.fmt_num(r.get("gmacs"), 4),
                     kr.fmt_num(r.get("gbps"), 4), kr.fmt_num(kr.pct_ceiling(r)))
                    + ((kr.fmt_num(kr.pct_attainable(r)),) if modal else ()) + (sp, sf, bits))
    return [head, ""] + table(("rung", "variant", "what changed", "median ms", "GMAC/s", "GB/s", "% of ceiling")
                              + (("% of attainable",) if modal else ()) + ("speed-up vs previous", "vs rung 0", "bits vs previous"), rows)


def error_budget_lines(recs):
    rows = []
    uniform = {(r["shape"], r.get("what", "")): r["rms_rel"] for r in recs if r["dist"] == "uniform"}
    for r in sorted(recs, key=lambda r: (r["shape"], r.get("what", ""), kr.dist_order(r["dist"]))):
        u = uniform.get((r["shape"], r.get("what", "")))
        ratio = f"x{r['rms_rel'] / u:.1f}" if kr.is_finite(u) and u > 0 and kr.is_finite(r["rms_rel"]) else "n/a"
        dist = r["dist"] + (f" ({r['source']})" if r.get("source") else "")
        rows.append((r["shape"], r.get("what", ""), dist, kr.fmt_err(r["rms_rel"]), kr.fmt_err(r["max_rel"]), ratio))
    return ["Error by input distribution (rms_rel = rms(y-ref)/rms(ref), max_rel = max|y-ref|/max|ref|):", ""] + \
        table(("shape", "what", "input", "rms_rel", "max_rel", "rms_rel / uniform"), rows)


def gdn_op_lines(recs):
    lines = []
    for (fixture, pair), rs in kr.group(recs, lambda r: (r["fixture"], r["pair"])).items():
        rows = [(r["op"], r["n"], kr.fmt_num(r.get("max_abs_ref")), kr.fmt_num(r.get("rms_ref")), kr.fmt_err(r["max_rel_t0"]),
                 kr.fmt_err(r["rms_rel_t0"]), kr.fmt_err(r.get("rms_rel_last")))
                for r in sorted(rs, key=lambda r: kr.gdn_op_order(r["op"]))]
        tokens = rs[0].get("tokens")
        lines += [f"GDN per operator, {pair}, {fixture}" + (f", {tokens} tokens" if tokens else "") + ":", ""]
        lines += table(("op", "n", "max\\|ref\\|", "rms ref", "max_rel t0", "rms_rel t0", "rms_rel last"), rows)
    return lines


def gdn_timing_lines(recs):
    rows = []
    fixtures = any(r.get("fixture") for r in recs)
    # The round trip is "mode"; how the time was taken (launch, flush) is the timing's mode.
    timings = any(kr.has_modes(r) for r in recs)
    rates = any(kr.pct_attainable(r) is not None for r in recs)
    for r in recs:
        t = r["ms_per_layer_token"]
        rng = f" ({t['min']:.4g}..{t['max']:.4g})" if kr.is_finite(t.get("min")) and kr.is_finite(t.get("max")) else ""
        rows.append((r["tier"], r["mode"], r["layers"], r["tokens"], f"{t['median']:.4g}{rng}", f"{t['median'] * r['layers']:.4g}")
                    + ((kr.fmt_num(r.get("gbps"), 4), kr.fmt_num(kr.pct_ceiling(r)), kr.fmt_num(kr.pct_attainable(r))) if rates else ())
                    + ((kr.mode_label(r["timing"]) + (f", flush {r['timing']['flush']}" if "flush" in r["timing"] else "")
                        if kr.timed(r) else "n/a",) if timings else ())
                    + ((r.get("fixture", ""),) if fixtures else ()))
    return ["GDN step time (ms per token, all layers = median x layers):", ""] + \
        table(("tier", "mode", "layers", "tokens", "ms per layer and token (min..max)", "ms per token, all layers")
              + (("GB/s", "% of ceiling", "% of attainable") if rates else ())
              + (("timing",) if timings else ()) + (("fixture",) if fixtures else ()), rows)


def tensor_lines(recs):
    """Per named output (ops with outputs other than a single "y": the "tensors" of each record):
    max_rel against the reference and the elements differing bit for bit from A's same output."""
    recs = [r for r in recs if isinstance(r.get("tensors"), list) and r["tensors"]]
    if not recs:
        return []
    names = list(dict.fromkeys(t["name"] for r in recs for t in r["tensors"]))
    rows = []
    for r in recs:
        by = {t["name"]: t for t in r["tensors"]}
        cells = []
        for n in names:
            t = by.get(n)
            if t is None:
                cells.append("")
                continue
            b = t.get("bits_vs_a")
            cells.append(kr.fmt_err(kr.get(t, "accuracy.max_rel")) + ("" if b is None else f"; {b} bits"))
        rows.append((r["variant"],) + tuple(cells))
    return ["Per output: max_rel against the reference; elements differing bit for bit from A's same output (bits):", ""] + \
        table(("variant",) + tuple(names), rows)


def gdn_step_lines(steps):
    """The GDN step (op gdn_step) per layer and token: the tables the schema-1 gdn_timing records
    gave, from measurement records (time per run of T tokens / T)."""
    lines = []
    for (problem, dist), rows in kr.group(steps, lambda s: (s["problem"], s["dist"])).items():
        launch = any(s["headline"] not in (None, "launch") and "launch" in s["views"] for s in rows)
        options = any(s["options"] for s in rows)  # the step's other axes (gdn-step-fused): a column of their own
        out = []
        for s in rows:
            mode, v = kr.gdn_view(s, s["headline"])
            if v is None:
                t, rates = "not timed" + (" (failed verification)" if s["record"].get("verified") is False else ""), ("", "", "", "")
            else:
                t = f"{v['median']:.4g} ({v['min']:.4g}..{v['max']:.4g})"
                rates = (kr.mode_label(v["timing"]), kr.fmt_num(v["gbps"], 4), kr.fmt_num(v["pct_ceiling"]), kr.fmt_num(v["pct_attainable"]))
            row = (s["tier"], s["mode"], s["projections"] or "") + ((s["options"],) if options else ()) + (t,) + rates
            if launch:
                lv = s["views"].get("launch")
                row += ("(the headline)" if mode == "launch" else f"{lv['median']:.4g}" if lv else "n/a",)
            out.append(row + (verdict_vs_a(s["record"]),))
        tokens = sorted({s["tokens"] for s in rows})
        lines += [f"GDN step per layer and token ({dist} inputs, {', '.join(map(str, tokens))} tokens per run; {problem}): "
                  "the measurement's time / tokens; mode = the round trip (host-facing: a copy in, a copy out and a sync per "
                  "token; device-run: one of each per run; device-resident: the run alone):", ""]
        lines += table(("tier", "mode", "projections (q4 kernel)") + (("step options",) if options else ()) + ("ms per layer and token (min..max)", "timing", "GB/s",
                        "% of ceiling", "% of attainable") + (("launch: ms per layer and token",) if launch else ()) + ("verdict vs A",), out)
    return lines


def gdn_stack_lines(recs):
    """gdn-stack: one token through the layers as one CUDA graph, per tier: ms per token (median and
    its 95% bootstrap interval), GB/s, % of the byte floor (the layers' bytes at the read ceiling),
    the graph's nodes, and the check against the sequential enqueue."""
    rows = []
    for r in recs:
        b = r["bitwise"]
        differ = b["out_differ"] + b["S_differ"] + b["hist_differ"]
        check = (f"{differ} of {b['compared']} differ" if differ else "bitwise equal") + \
            ("" if r["out_finite"] else ", output NOT FINITE") + f"; max |out| {kr.fmt_num(r.get('out_max_abs'))}"
        t = r.get("ms_per_token") if r.get("timed") else None
        if isinstance(t, dict):
            ms = f"{t['median']:.4g} ({t['ci95_lo']:.4g}..{t['ci95_hi']:.4g})"
            seq = r.get("sequential_ms_per_token")
            seq = f"{seq['median']:.4g}" if isinstance(seq, dict) else "n/a"
        else:
            ms, seq = "not timed" + (f": {r['not_timed_why']}" if r.get("not_timed_why") else ""), ""
        rows.append((r["tier"], r["layers"], ms, seq, kr.fmt_num(r.get("gbps"), 4) if t else "", kr.fmt_num(r.get("pct_floor")) if t else "",
                     f"{r['kernel_nodes']} ({r['graph_nodes']})", check))
    cold = [f"{r['tier']} {kr.fmt_num(r['cold']['weights_over_l2'])}x the L2" for r in recs
            if isinstance(r.get("cold"), dict) and kr.is_finite(r["cold"].get("weights_over_l2"))]
    note = f" Weights cold by size, no flush: {', '.join(cold)}." if cold else ""
    return ["GDN layers per token as one CUDA graph (launch timing: one graph launch between events; ms per token: median (95% bootstrap "
            "interval); enqueued: the same layers launched one by one; % of floor: GB/s over the run's read ceiling):" + note, ""] + \
        table(("tier", "layers", "ms per token (95% CI)", "enqueued ms", "GB/s", "% of floor", "kernel nodes (all)", "graph vs enqueued"), rows)


def stack_fit_lines(recs):
    """gdn-stack-layers: per tier, the least-squares line through the graph's ms per token at each layer count: its
    slope (us a layer), its intercept (us fixed), the largest residual (% of the count's time), and the time a layer at
    the largest count (its time over its layers) for comparison."""
    rows = []
    for r in recs:
        points = ", ".join(f"{kr.fmt_num(l)}: {m:.4g}" for l, m in zip(r["layers"], r["ms_per_token"]))
        rows.append((r["tier"], points, f"{r['us_per_layer']:.2f}", f"{r['fixed_us']:.1f}", f"{100 * r['max_rel_residual']:.2f}",
                     f"{r['us_per_layer_at_most']:.2f}"))
    return ["The graph's time against its layer count (a least-squares line through the medians: its slope is the graph's cost "
            "per layer, its intercept the fixed part):", ""] + \
        table(("tier", "layers: ms per token", "us a layer (slope)", "us fixed (intercept)", "largest residual (%)",
               "us a layer at the most layers"), rows)


def gdn_batch_lines(recs):
    """gdn-batch: one token of B slots in one batched GDN step against the B slots' single steps, per B:
    us per token of each (median and its 95% bootstrap interval), us per slot, the speed-up of the
    batch (verdict with its interval), and the per-slot bit check."""
    rows = []
    for r in sorted(recs, key=lambda r: r["B"]):
        b = r["bitwise"]
        differ = b["out_differ"] + b["S_differ"] + b["hist_differ"]
        check = f"{differ} of {b['compared']} differ" if differ else "bitwise equal"
        bt, st = r["batch_us_per_token"], r["singles_us_per_token"]
        vs = r.get("batch_vs_singles")
        speed = f"x{vs['speedup']:.3g}, {vs['verdict']}" if isinstance(vs, dict) and kr.is_finite(vs.get("speedup")) and "verdict" in vs else "n/a"
        rows.append((r["B"], f"{bt['median']:.4g} ({bt['ci95_lo']:.4g}..{bt['ci95_hi']:.4g})",
                     f"{st['median']:.4g} ({st['ci95_lo']:.4g}..{st['ci95_hi']:.4g})", kr.fmt_num(r.get("us_per_slot"), 4), speed, check))
    first = recs[0]
    where = ", ".join(x for x in (kr.get(first, "geometry.str"), f"{first['layers']} layers rotating", first.get("batch_gemm")) if x)
    return [f"GDN batched slots ({where}): stream mode, us per token of one layer for all B slots (median (95% bootstrap interval)); "
            "singles: the B slots' single steps one after another; speed-up: singles / batched:", ""] + \
        table(("B", "batched us per token (95% CI)", "singles us per token (95% CI)", "us per slot", "speed-up", "slots vs their single steps"), rows)


def state_drift_lines(recs):
    """gdn-state-drift: per regime, one row per 64-token window, one column pair per subject (the
    storage models, then the kernels, in the order they first appear): the window's worst o max_rel
    and S's max_rel at its end against the f64 reference."""
    lines = []
    regimes = list(dict.fromkeys(r["regime"] for r in recs))
    for regime in regimes:
        rs = [r for r in recs if r["regime"] == regime]
        subjects = list(dict.fromkeys(r["subject"] for r in rs))
        cell = {(r["window"], r["subject"]): r for r in rs}
        header = ["tokens"] + [f"{s} o / S" for s in subjects]
        rows = []
        for w in sorted({r["window"] for r in rs}):
            first = next(r for r in rs if r["window"] == w)
            row = [f"{first['t_begin']}..{first['t_end']}"]
            for s in subjects:
                r = cell.get((w, s))
                row.append(f"{kr.fmt_num(r['o_max_rel'], 3)} / {kr.fmt_num(r['S_max_rel'], 3)}" if r else "n/a")
            rows.append(tuple(row))
        decay = rs[0].get("decay") or {}
        where = f" (exp(g) in [{decay['lo']}, {decay['hi']}))" if "lo" in decay and "hi" in decay else ""
        lines += [f"State drift, regime {regime}{where}: per window, the worst max_rel of o over its tokens / S's at its end, "
                  "against the f64 reference:", ""] + table(header, rows)
    return lines


def breakdown_lines(recs):
    """gdn-step-breakdown: per tier, each operator of the GDN step in stream mode (kernels, median time
    and its 95% CI, the bytes of the step's model, the activations, the floor, % of floor, share of the
    whole step, whether its rotation over the layers was L2-cold), their sum, and the whole step."""
    lines = []
    for tier, (ops, whole) in kr.breakdown_tiers(recs).items():
        def row(name, r, us, share):
            ci = f" ({r['ci95_lo_us']:.3g}..{r['ci95_hi_us']:.3g})" if kr.is_finite(r.get("ci95_lo_us")) and kr.is_finite(r.get("ci95_hi_us")) else ""
            return (name, r.get("kernels", "n/a"), f"{us:.3g}{ci}", kr.fmt_num(r["bytes"] / 1e6), kr.fmt_num(r["act_bytes"] / 1e3),
                    kr.fmt_num(r.get("floor_us")), kr.fmt_num(r.get("pct_floor")), share, "" if "cold" not in r else ("yes" if r["cold"] else "no"))
        step_us = whole["median_us"] if whole else None
        rows = [row(r["operator"], r, r["median_us"], f"{100 * r['median_us'] / step_us:.1f}%" if step_us else "n/a") for r in ops]
        total = sum(r["median_us"] for r in ops)
        kernels = [r.get("kernels") for r in ops]
        floor = [r.get("floor_us") for r in ops]
        rows.append(("sum of operators", sum(kernels) if all(isinstance(k, int) for k in kernels) else "n/a", f"{total:.3g}",
                     kr.fmt_num(sum(r["bytes"] for r in ops) / 1e6), kr.fmt_num(sum(r["act_bytes"] for r in ops) / 1e3),
                     kr.fmt_num(sum(floor)) if all(kr.is_finite(f) for f in floor) else "n/a", "",
                     f"{100 * total / step_us:.1f}%" if step_us else "n/a", ""))
        if whole:
            rows.append(row("step (whole)", whole, step_us, "100%"))
        first = (ops or [whole])[0]
        where = ", ".join(x for x in (kr.get(first, "geometry.str"), f"{first['layers']} layers rotating" if "layers" in first else None,
                                      first.get("projections")) if x)
        lines += [f"GDN step breakdown, {tier} tier" + (f" ({where})" if where else "") + ": stream mode, time per launch "
                  "(graph time / launches); MB = weights + state (the step's byte model), KB = activations in and out; "
                  "floor = (MB + KB) / the read ceiling; cold = the operator's rotation over the layers exceeds 3x L2:", ""]
        lines += table(("operator", "kernels", "median us (95% CI)", "MB", "act KB", "floor us", "% of floor", "share of step", "cold"), rows)
    return lines


def trace_lines(recs):
    """The kernel traces of `klab run --trace` in these records (scripts/kernel_trace.py reads the same): one row a
    traced subject, its span per launch beside its timed median, its kernels by total time, and its chain: per
    neighbour pair seen more than once, the median time the later one ends after the earlier (what each kernel
    adds to the period of a dependent chain)."""
    rows = []
    for r in recs:
        for where, t in kernel_trace.traces(r):
            spans = kernel_trace.spans_of(t["trace"])
            span, names, pairs = kernel_trace.summary(spans)
            launches = t.get("launches", 1) or 1
            med = t.get("median_ms")
            top = sorted(names.items(), key=lambda kv: -kv[1][0] * kv[1][1])[:4]
            kernels = "; ".join(f"{n} {c} x {d:.3g} us" + (f", every {p:.3g}" if c > 1 else "") for n, (c, d, p) in top)
            links = sorted(((a, b, c, ee) for (a, b), (c, _, ee) in pairs.items() if c > 1), key=lambda x: -x[2])[:4]
            chain = "; ".join(f"{b} +{ee:.3g} after {a}" for a, b, _, ee in links) or "-"
            rows.append((kernel_trace.label(r, where), str(len(spans)), f"{span / launches:.4g}",
                         f"{med * 1e3:.4g}" if kr.is_finite(med) else "n/a", kernels, chain))
    if not rows:
        return []
    lines = ["Kernel traces (`klab run --trace`: one untimed run of each subject under CUPTI; every kernel's spans, gaps "
             "and overlaps: `scripts/kernel_trace.py REPORT --match SUBJECT --spans N`):", ""]
    return lines + table(("subject", "kernels", "us per launch (trace)", "timed median us", "kernels by total time: count x median, period",
                          "chain: ends after the kernel before (median us)"), rows)


def profile_lines(profiles, meas):
    """Nsight Compute's readings (kind profile, scripts/profile_ncu.py), each beside the timed median of its
    variant on its problem: the headline and, where measured, stream and launch."""
    if not profiles:
        return []
    timed = {}
    for m in meas:
        if m.get("shape") and isinstance(m.get("timing"), dict):
            timed[(m["variant"], m["shape"], m.get("dist"))] = m

    def f(v, fmt_):
        return fmt_.format(v) if kr.is_finite(v) else "n/a"

    rows = []
    for r in profiles:
        m = timed.get((r.get("variant"), r.get("shape"), r.get("dist")))
        t = "n/a"
        if m:
            mode = m["timing"].get("mode", "launch")
            t = f"{m['timing']['median_ms'] * 1e3:.3g} ({mode})"
        stalls = r.get("top_stalls")
        stalls = ", ".join(f"{x[0]} {x[1]:.1f}" for x in stalls if isinstance(x, list) and len(x) == 2 and kr.is_finite(x[1])) \
            if isinstance(stalls, list) else ""
        kernels = r.get("kernels") if isinstance(r.get("kernels"), list) else []
        ks = "; ".join(f"{k.get('name', '?').split('(')[0].split('::')[-1]} {k['duration_ns'] / 1e3:.3g}"
                       for k in kernels if kr.is_finite(k.get("duration_ns")))
        rows.append((r.get("variant", "n/a"), f"{r.get('shape', 'n/a')}/{r.get('dist', 'n/a')}", t, ks or "n/a",
                     f(r.get("dram_pct"), "{:.1f}"), f(r.get("occupancy_pct"), "{:.1f}"), f(r.get("registers"), "{:.0f}"),
                     f(r.get("issue_pct"), "{:.1f}"), stalls or "n/a", f(r.get("sass_thread_inst_per_mac"), "{:.2f}")))
    tool = next((r["tool"] for r in profiles if isinstance(r.get("tool"), str)), "ncu")
    lines = [f"Nsight Compute ({tool}; `scripts/profile_ncu.py`), the longest kernel of each variant's launch, beside its timed "
             "median; instructions per MAC over all its kernels:", ""]
    return lines + table(("variant", "problem", "timed median us", "kernels under ncu (us)", "DRAM % of peak", "occupancy %",
                          "registers", "issue %", "top stalls (cycles per issue)", "SASS thread instructions per MAC"), rows)


def accuracy_table_lines(recs):
    """max_rel per variant and problem, where plot.py draws no accuracy figure because every
    max_rel lies within one decade (kr.accuracy_in_one_decade)."""
    flat = kr.accuracy_in_one_decade(recs)
    if not flat:
        return []
    keys = list(dict.fromkeys(kr.problem_key(r) for r in recs))
    ops, dists = {k[0] for k in keys}, {k[2] for k in keys}
    label = {k: " ".join(([k[0]] if len(ops) > 1 else []) + [k[1]] + ([k[2]] if len(dists) > 1 else [])) for k in keys}
    by = {(r["variant"], kr.problem_key(r)): r for r in recs}
    rows = []
    for v in dict.fromkeys(r["variant"] for r in recs):
        rows.append((v,) + tuple(kr.fmt_err(kr.get(by[(v, k)], "accuracy.max_rel")) + (" FAILED" if by[(v, k)].get("verified") is False else "")
                                 if (v, k) in by else "" for k in keys))
    tols = sorted({r["tolerance"] for r in recs if kr.is_finite(r.get("tolerance"))})
    return [f"Accuracy (max_rel = max|y-ref| / max|ref|) as a table, not a figure: every max_rel lies within one decade "
            f"({kr.fmt_err(flat[0])}..{kr.fmt_err(flat[1])})" + (f"; tolerance {', '.join(kr.fmt_num(t) for t in tols)}" if tols else "")
            + ":", ""] + table(("variant",) + tuple(label[k] for k in keys), rows)


def figures_for(report, plan, e, plots):
    out = []
    for name, kind, pe, _ in plan:
        if pe != e:
            continue
        # A figure plot.py split for width comes as NAME.png, NAME-part2.png, ...
        parts = [plots / f"{name}.png"] + sorted(plots.glob(f"{name}-part*.png"), key=lambda p: int(p.stem.rsplit("part", 1)[1]))
        for png in parts:
            if png.is_file():
                rel = png.relative_to(report.dir) if png.is_relative_to(report.dir) else png
                out.append(f"![{png.stem}]({rel.as_posix()})")
    return out + [""] if out else []


def anchor(heading):
    """The anchor GitHub gives a Markdown heading: lower case, punctuation but '-' and '_' dropped,
    spaces to '-'."""
    kept = "".join(ch for ch in heading.lower() if ch.isalnum() or ch in " -_")
    return "#" + kept.replace(" ", "-")


def claims_overview(report):
    """Every claim of the report first: counts, then the ones not held, not evaluated and held, each
    linking to its experiment's section (where its evidence is)."""
    claims = report.of("claim")
    if not claims:
        return []
    count = {s: sum(c["state"] == s for c in claims) for s in STATE}
    lines = ["## Claims", "",
             f"{count['held']} held, {count['not_held']} not held, {count['not_evaluated']} not evaluated "
             f"(of {len(claims)}); the evidence is under each experiment.", ""]
    rows = []
    for state in ("not_held", "not_evaluated", "held"):
        for c in claims:
            if c["state"] == state:
                rows.append((STATE[state], f"[{c['experiment']}]({anchor(c['experiment'])})", c["text"]))
    return lines + table(("state", "experiment", "claim"), rows)


def evidence_lines(evidence):
    """A claim's evidence as sub-bullets, one per '; '-separated part (one line per shape or problem,
    not one line of thousands of characters); a speed-up beside the time ratio's interval is given
    the speed-up's interval instead (kr.one_direction)."""
    return [f"   - {part.strip()}" for part in kr.one_direction(evidence).split("; ") if part.strip()]


def summarize(report, plots):
    plan, _ = kr.chart_plan(report)
    lines = [f"# klab report: {', '.join(report.experiments()) or 'no experiment'}", ""]
    why = report.incomplete()
    if why:
        lines += [f"**This report is {why}.** The tables below hold only what was written before that.", ""]
    lines += [f"From `{report.file.name}` ({len(report.records)} records); regenerate with "
             f"`scripts/summarize.py` and `scripts/plot.py` on this directory.", ""]
    if report.experiments():
        lines += ["Contents: [environment](#environment)"
                  + (", [claims](#claims)" if report.of("claim") else "") + "; experiments: "
                  + ", ".join(f"[{e}]({anchor(e)})" for e in report.experiments()), ""]
    lines += environment(report)
    lines += claims_overview(report)
    for e in report.experiments():
        lines += [f"## {e}", ""]
        claims = sorted(report.of("claim", e), key=lambda r: r["index"])
        if claims:
            lines += ["Claims:", ""]
            for c in claims:
                lines.append(f"{c['index'] + 1}. {STATE[c['state']]}: {c['text']}")
                lines += evidence_lines(c.get("evidence") or "")
            lines.append("")
        meas = report.of("measurement", e)
        grid = variant_shape_tables(meas)
        lines += grid
        if kr.is_ladder(e):
            for _, recs in kr.group(meas, kr.problem_key).items():
                lines += ladder_lines(kr.ladder_rungs(recs))
        if grid and meas:
            lines += ["Per problem, in detail:", ""]
        for (op, problem, dist), recs in kr.group(meas, kr.problem_key).items():
            ceil = next((r["ceiling_gbps"] for r in recs if kr.is_finite(r.get("ceiling_gbps"))), None)
            lines += [f"{op + ' ' if op else ''}{problem}, {dist} inputs" + (f" (ceiling {ceil:.0f} GB/s):" if ceil else ":"), ""]
            modal, launch = measurement_columns(recs)
            lines += table(measurement_header(modal, launch), measurement_rows(recs, modal, launch))
            lines += tensor_lines(recs)
            lines += stream_notes(recs)
        steps = kr.gdn_step_rows(meas)
        if steps:
            lines += gdn_step_lines(steps)
        if report.of("error_budget", e):
            lines += error_budget_lines(report.of("error_budget", e))
        if report.of("gdn_op", e):
            lines += gdn_op_lines(report.of("gdn_op", e))
        if report.of("gdn_timing", e):
            lines += gdn_timing_lines(report.of("gdn_timing", e))
        if report.of("gdn_stack", e):
            lines += gdn_stack_lines(report.of("gdn_stack", e))
        if report.of("gdn_stack_layers", e):
            lines += gdn_stack_lines(report.of("gdn_stack_layers", e))
        if report.of("gdn_stack_layers_fit", e):
            lines += stack_fit_lines(report.of("gdn_stack_layers_fit", e))
        if report.of("gdn_batch", e):
            lines += gdn_batch_lines(report.of("gdn_batch", e))
        if report.of("gdn_breakdown", e):
            lines += breakdown_lines(report.of("gdn_breakdown", e))
        if report.of("state_drift", e):
            lines += state_drift_lines(report.of("state_drift", e))
        lines += accuracy_table_lines(meas)
        lines += profile_lines(report.of("profile", e), meas)
        lines += trace_lines([r for r in report.records if r.get("experiment") == e])
        lines += figures_for(report, plan, e, plots)
        skips = report.of("skip", e)
        if skips:
            lines += ["Skipped:", ""] + [f"- {s['what']}: {s['reason']}" for s in skips] + [""]
    other = report.unknown_kinds()
    if other:
        lines += ["Records of kinds this summary does not read: " + ", ".join(f"{k} ({n})" for k, n in other.items()), ""]
    return "\n".join(lines).rstrip() + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(prog="summarize.py", description="Writes the Markdown summary of a klab report.")
    ap.add_argument("report", help="report directory (holding report.jsonl) or the .jsonl file")
    ap.add_argument("--out", help="output file (default: REPORT/summary.md; '-' for standard output)")
    args = ap.parse_args(argv)
    try:
        report = kr.load(args.report)
        text = summarize(report, report.dir / "plots")
    except kr.ReportError as e:
        print(f"summarize.py: {e}", file=sys.stderr)
        return 2
    if args.out == "-":
        sys.stdout.write(text)
        return 0
    out = Path(args.out) if args.out else report.dir / "summary.md"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        kr.write_atomically(out, text)
    except OSError as e:
        print(f"summarize.py: cannot write {out}: {e.strerror}", file=sys.stderr)
        return 2
    if report.incomplete():
        print(f"summarize.py: note: {report.file} is {report.incomplete()}", file=sys.stderr)
    print(f"summarize.py: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
