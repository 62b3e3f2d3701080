#!/usr/bin/env python3
"""Tables from the JSON lines of klab's probes: `klab probe-ring` (probe "ring-read"), `klab probe-rec` (probe
"rec-stamps"), `klab probe-hop` (probe "hop-under-load"), `klab probe-q4` (probe "q4-stamps") and `klab probe-cluster` (probe
"cluster-entry"), one markdown table per kind, a row per line in file order.

    scripts/probe_table.py FILE.jsonl [--out TABLE.md]

ring-read: the shape, the ring's loads alone (us, median and p10..p90), the PDL read of the same bytes (us) and the read's
share of the ring's time. rec-stamps: the kernel (cols, rows, pdl, batch), the period, the hop (the launch before's last
exit -> the first release from the wait), the span after the release, a block's phases after it, how early launches
enter, and the timer's smallest step; ns as the probe wrote them, shown in us. hop-under-load: the background (loads a
thread x blocks an SM) and its bytes in flight an SM, its read rate alone and beside the foreground, the dependent hop
of one block and of a grid (us a launch) and one dependent L2 load (ns). q4-stamps: the kernel (the ring and its depth,
grid=groups or the paced ring; with its prep launch or on prepared x), the period and the rate it makes of the weights'
bytes, the hop, the span after the release, a block's phases from the release (x in; its bytes: the ring's first stage,
grid=groups' whole group; its work: the ring's first group, grid=groups' dots; then the ring's other groups or
grid=groups' barrier; the exit) and, for the rings, their waits for their stages' bytes (us, and their share of the span
after the release); grid=split-k's lines (--grid split-k|split-k1|split-k4|split-k-last) go to a table of their own, whose
block phases are x's chunk quantised into shared memory, the cluster's wait (0 for fold=last), warp 0's first tile's
bytes, its tiles, the fold and exit, then warp 0's waits for its tiles' bytes. cluster-entry: the form (blocks a cluster,
none for 0; PDL; KB of shared memory a block; blocks an SM's worth), the blocks launched, the blocks of the form the
device holds at once (- on lines from before the probe said so), the period between the grids' last exits and the next
grid's first entry less this grid's last exit (negative: it entered early), both in us as the probe wrote them.

Exit 0 with the tables on stdout (or in --out); 2, writing nothing, when the file cannot be read, a line is not a JSON
object, or a line's probe is not one of the five (named in the message).
"""
import argparse
import json
import sys
from pathlib import Path

KINDS = ("ring-read", "rec-stamps", "hop-under-load", "q4-stamps", "cluster-entry")


def us(ns):
    return "-" if ns is None else f"{ns / 1000:.2f}"


def header(*cols):
    """A markdown table's first two lines."""
    return ["| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]


def ring_table(rows):
    out = header("shape", "the ring's loads alone (us)", "p10..p90", "the PDL read (us)", "read / ring")
    for r in rows:
        ring, read = r["ring_read_us"], r["read_us"]
        out.append(f"| {r['shape']} | {ring:.2f} | {r['ring_read_us_p10']:.2f}..{r['ring_read_us_p90']:.2f} | {read:.2f} | {100 * read / ring:.1f}% |")
    return out


def rec_table(rows):
    out = header("kernel", "batch", "period (us)", "hop (us)", "after the release (us)", "a block: inputs and pass 1", "pass 2, S stored",
                 "o, exit", "launches enter before the one before ends (us)", "timer step (ns)")
    for r in rows:
        p = r["block_phase_ns"]
        kernel = f"cols={r['cols']},rows={r['rows']},pdl={r.get('pdl', 'ahead')}"
        out.append(f"| {kernel} | {r['batch']} | {us(r['period_ns'])} | {us(r['hop_ns'])} | {us(r['after_release_ns'])} | "
                   f"{us(p['inputs_pass1'])} | {us(p['kv_pass2_stores'])} | {us(p['o_exit'])} | {us(r['entry_ahead_ns'])} | "
                   f"{r['timer_step_ns'] if r['timer_step_ns'] is not None else '-'} |")
    return out


def hop_table(rows):
    out = header("background", "in flight an SM (KB)", "its read alone (GB/s)", "beside the foreground (GB/s)", "hop, one block (us)",
                 "hop, a grid (us)", "dependent L2 load (ns)")
    for r in rows:
        bg = r["bg_loads"] > 0
        out.append(f"| {r['background']} | {r['bg_inflight_kb_per_sm']:.0f} | {r['bg_gbps']:.0f} | {r['bg_gbps_with']:.0f} | "
                   f"{r['hop_one_us']:.2f} | {r['hop_grid_us']:.2f} | {r['chase_ns']:.0f} |" if bg else
                   f"| {r['background']} | 0 | - | - | {r['hop_one_us']:.2f} | {r['hop_grid_us']:.2f} | {r['chase_ns']:.0f} |")
    return out


SPLIT_K = {"split-k": "split-k, per-sm=2 (115)", "split-k1": "split-k, per-sm=1 (116)", "split-k4": "split-k, rows=4, 4 stages, per-sm=1 (121)",
           "split-k-last": "split-k, fold=last (119)"}


def split_k_table(rows):
    out = header("kernel", "shape", "period (us)", "GB/s", "hop (us)", "after the release (us)", "a block: x", "cluster wait", "first bytes",
                 "tiles", "fold, exit", "waits for bytes (us)", "share")
    for r in rows:
        p = r["block_phase_ns"]
        kernel = SPLIT_K[r["grid"]] + (", prepared x" if r["prepared"] else ", x in the launch")
        out.append(f"| {kernel} | {r['shape']} | {us(r['period_ns'])} | {r['period_gbps']:.0f} | {us(r['hop_ns'])} | {us(r['after_release_ns'])} | "
                   + " | ".join(us(p[n]) for n in ("x", "started", "first_bytes", "tiles", "fold_exit"))
                   + f" | {us(r['bytes_wait_ns'])} | {100 * r['bytes_wait_share']:.0f}% |")
    return out


def q4_table(rows):
    out = header("kernel", "shape", "period (us)", "GB/s", "hop (us)", "after the release (us)", "a block: x", "its bytes", "its work", "then",
                 "exit", "waits for bytes (us)", "share")
    for r in rows:
        p = r["block_phase_ns"]
        ring = r["grid"] in ("fill", "paced")  # the paced ring stamps the ring's points
        name = {"fill": f"ring, depth={r['depth']}" if r["depth"] else "ring", "paced": "pace=1,xprep=warps"}.get(r["grid"], "grid=groups")
        kernel = name + (", prepared x" if r["prepared"] else ", prep launch")
        phases = [p["first_bytes"], p["first_group"], p["rest"], p["last_group_exit"]] if ring else [p["bytes"], p["dots"], p["barrier"], p["store_exit"]]
        waits = f"{us(r['bytes_wait_ns'])} | {100 * r['bytes_wait_share']:.0f}%" if ring else "- | -"
        out.append(f"| {kernel} | {r['shape']} | {us(r['period_ns'])} | {r['period_gbps']:.0f} | {us(r['hop_ns'])} | "
                   f"{us(r['after_release_ns'])} | {us(p['x'])} | " + " | ".join(us(v) for v in phases) + f" | {waits} |")
    return out


def cluster_table(rows):
    out = header("cluster", "pdl", "KB a block", "blocks an SM", "grid", "held at once", "period (us)", "next grid's entry - this grid's exit (us)")
    for r in rows:
        cluster = r["cluster"] if r["cluster"] else "none"
        held = r.get("resident_blocks", "-")  # the probe's lines before it said so (reports/h100/run-call66) lack it
        out.append(f"| {cluster} | {'on' if r['pdl'] else 'off'} | {r['smem_kb']} | {r['per_sm']} | {r['grid']} | {held} | {r['period_us']:.2f} | "
                   f"{r['entry_gap_us']:.2f} |")
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--out", help="write the tables here instead of stdout")
    a = ap.parse_args(argv)
    try:
        text = Path(a.file).read_text(encoding="utf-8")
    except OSError as e:
        print(f"probe_table: cannot read {a.file}: {e.strerror}", file=sys.stderr)
        return 2
    by_kind = {k: [] for k in KINDS + ("q4-stamps-split-k",)}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError as e:
            print(f"probe_table: {a.file}:{n}: not JSON ({e.msg})", file=sys.stderr)
            return 2
        kind = r.get("probe") if isinstance(r, dict) else None
        if kind not in by_kind:
            print(f"probe_table: {a.file}:{n}: probe {kind!r} is none of {', '.join(KINDS)}", file=sys.stderr)
            return 2
        by_kind["q4-stamps-split-k" if kind == "q4-stamps" and r.get("grid") in SPLIT_K else kind].append(r)
    lines = []
    try:
        for kind, table in (("ring-read", ring_table), ("rec-stamps", rec_table), ("hop-under-load", hop_table), ("q4-stamps", q4_table),
                            ("q4-stamps-split-k", split_k_table), ("cluster-entry", cluster_table)):
            if by_kind[kind]:
                device = sorted({r.get("device", "?") for r in by_kind[kind]})
                lines += [f"## {kind} ({', '.join(device)})", ""] + table(by_kind[kind]) + [""]
    except (KeyError, TypeError, ZeroDivisionError) as e:
        print(f"probe_table: {a.file}: a {kind} line lacks what its table needs ({e!r})", file=sys.stderr)
        return 2
    text = "\n".join(lines)
    if a.out:
        Path(a.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
