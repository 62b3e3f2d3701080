#!/usr/bin/env python3
"""Prints the kernel traces of a report written by `klab run ... --trace` (harness/include/klab/trace.hpp).

Each traced timing (a race's modes.MODE.timing.trace, a GDN experiment's timing.trace, ...) is one
untimed run of the timed subject under CUPTI: every kernel's start and end on the GPU. Per trace
this prints, from the spans themselves:
  - the subject (experiment, variant or tier, problem, mode) and its timed median per launch;
  - per kernel name: how many, the median duration, the median start-to-start interval (the
    chain's period when the name recurs once a period);
  - per neighbour pair (by start order): the median gap, this start minus the one before's end
    (negative: it started before the other ended, as PDL lets it), and the median end after end, this
    end minus the one before's (in a dependent chain, what each kernel adds to the period: at
    6144x5120 xprep=warps' prep ends 2.08 us after the main kernel before it, the next main kernel
    4.54 us after that, medians over 33 calls; reports/h200/run-c00d582);
  - the chain's cycle: the pairs that recur once a cycle (as often as the most frequent pair, or once less: a chain of
    n cycles has n - 1 pairs across its cycles' seams) and the sum of their median end after end, what one cycle of
    the chain takes (a GDN layer in gdn-stack's graph: its six kernels' pairs; reports/h100/run-defer);
  - with --spans N, the first N kernels: start, end, duration, gap to the one before.
A record with a layer count (gdn-stack, gdn-stack-layers) names it in the label (layers=N).

    scripts/kernel_trace.py REPORT [--match TEXT] [--spans N]

--match keeps the traces whose label contains TEXT. Exit 0; 1 when the report holds no trace (or
none matches); 2 when it cannot be read.
"""
import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import klab_report  # noqa: E402


def traces(record):
    """(where, timing) for each timing dict holding a "trace" in the record: the race's modes
    (the headline "timing" is a copy of one of them and is left out when modes are there), else any
    nested dict."""
    modes = record.get("modes")
    if isinstance(modes, dict):
        for m, v in sorted(modes.items()):
            t = v.get("timing") if isinstance(v, dict) else None
            if isinstance(t, dict) and isinstance(t.get("trace"), dict):
                yield m, t
        return

    def walk(obj, path):
        if isinstance(obj, dict):
            if isinstance(obj.get("trace"), dict) and "spans" in obj["trace"]:
                yield ".".join(path) or "timing", obj
            for k, v in obj.items():
                if k != "trace" and k != "env":
                    yield from walk(v, path + [k])
        elif isinstance(obj, list):
            for i, v in enumerate(obj):
                yield from walk(v, path + [str(i)])

    yield from walk(record, [])


def label(record, where):
    parts = [record.get("experiment", "?")]
    for key in ("variant", "tier", "operator", "name"):
        if isinstance(record.get(key), str):
            parts.append(record[key])
            break
    p = klab_report.problem_of(record)
    if p:
        parts.append(p)
    if isinstance(record.get("layers"), int):
        parts.append(f"layers={record['layers']}")
    parts.append(where)
    return " ".join(parts)


def spans_of(trace):
    names = trace.get("span_names", [])
    return [(names[i] if 0 <= i < len(names) else "?", float(s), float(e)) for i, s, e in trace.get("spans", [])]


def summary(spans):
    """The same reading klab computes (summarize_trace), from the relative spans."""
    spans = sorted(spans, key=lambda x: x[1])
    dur, period, last, gaps, ends = {}, {}, {}, {}, {}
    for i, (n, s, e) in enumerate(spans):
        dur.setdefault(n, []).append(e - s)
        if n in last:
            period.setdefault(n, []).append(s - last[n])
        last[n] = s
        if i:
            pn, _, pe = spans[i - 1]
            gaps.setdefault((pn, n), []).append(s - pe)
            ends.setdefault((pn, n), []).append(e - pe)
    names = {n: (len(d), statistics.median(d), statistics.median(period[n]) if n in period else 0.0) for n, d in dur.items()}
    pairs = {k: (len(g), statistics.median(g), statistics.median(ends[k])) for k, g in gaps.items()}
    span = (max(e for _, _, e in spans) - spans[0][1]) if spans else 0.0
    return span, names, pairs


def cycle_of(pairs):
    """The pairs that recur once a cycle (count >= the most frequent pair's - 1) with their median end after end, in
    the pairs' order of the chain (each pair's `after` the next one's `before` where they link); [] when fewer than two
    pairs recur (no chain of several kernels)."""
    if not pairs:
        return []
    top = max(c for c, _, _ in pairs.values())
    rec = {k: v[2] for k, v in pairs.items() if v[0] >= top - 1 and top > 1}
    if len(rec) < 2:
        return []
    out, seen = [], set()
    k = max(rec, key=lambda k: pairs[k][0])  # the first of the most frequent pairs
    while k not in seen:
        seen.add(k)
        out.append((k, rec[k]))
        k = next((n for n in rec if n[0] == k[1] and n not in seen), None)
        if k is None:
            break
    out += [(k, v) for k, v in rec.items() if k not in seen]
    return out


def print_trace(record, where, timing, nspans, out):
    tr = timing["trace"]
    spans = spans_of(tr)
    span, names, pairs = summary(spans)
    launches = timing.get("launches", 1) or 1
    med = timing.get("median_ms")
    timed = f", timed median {med * 1e3:.3f} us per launch" if isinstance(med, (int, float)) else ""
    out.write(f"## {label(record, where)}\n")
    out.write(f"{len(spans)} kernels over {span:.2f} us ({span / launches:.3f} us per launch of {launches}{timed})\n\n")
    out.write("| kernel | count | median us | period us |\n| --- | --- | --- | --- |\n")
    for n, (c, d, p) in sorted(names.items(), key=lambda kv: -kv[1][0] * kv[1][1]):
        out.write(f"| {n} | {c} | {d:.3f} | {p:.3f} |\n")
    if pairs:
        out.write("\n| before -> after | count | median gap us | median end after end us |\n| --- | --- | --- | --- |\n")
        for (a, b), (c, g, ee) in sorted(pairs.items(), key=lambda kv: -kv[1][0]):
            out.write(f"| {a} -> {b} | {c} | {g:.3f} | {ee:.3f} |\n")
        cycle = cycle_of(pairs)
        if cycle:
            out.write(f"\nThe chain's cycle: {sum(ee for _, ee in cycle):.3f} us (" +
                      ", ".join(f"{a} -> {b} {ee:.3f}" for (a, b), ee in cycle) + ")\n")
    if nspans:
        out.write("\n| # | kernel | start us | end us | us | gap us |\n| --- | --- | --- | --- | --- | --- |\n")
        prev_end = None
        for i, (n, s, e) in enumerate(sorted(spans, key=lambda x: x[1])[:nspans]):
            gap = "" if prev_end is None else f"{s - prev_end:.3f}"
            out.write(f"| {i} | {n} | {s:.3f} | {e:.3f} | {e - s:.3f} | {gap} |\n")
            prev_end = e
    out.write("\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("report")
    ap.add_argument("--match", default="", help="only the traces whose label contains this text")
    ap.add_argument("--spans", type=int, default=0, help="print the first N kernels of each trace")
    a = ap.parse_args(argv)
    if a.spans < 0:
        ap.error("--spans must be >= 0")
    try:
        rep = klab_report.load(a.report)
    except klab_report.ReportError as e:
        print(f"kernel_trace.py: {e}", file=sys.stderr)
        return 2
    found = 0
    for r in rep.records:
        for where, t in traces(r):
            if a.match and a.match not in label(r, where):
                continue
            print_trace(r, where, t, a.spans, sys.stdout)
            found += 1
    if not found:
        why = " matching '" + a.match + "'" if a.match else ""
        print(f"kernel_trace.py: no kernel trace{why} in {a.report} (was it run with klab run --trace?)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
