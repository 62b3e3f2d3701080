#!/usr/bin/env python3
"""Nsight Compute's reading of every timed variant of a report, attached to the report.

    scripts/profile_ncu.py REPORT_DIR [--klab BIN] [--ncu PATH] [--variants GLOB] [--experiments GLOB]
                       [--shapes GLOB] [--timeout S] [--dry-run]

For each distinct (variant, shape, dist, seed) timed in REPORT_DIR/report.jsonl (mat-vecs only: a
measurement without a "shape", such as gdn_step's, is left out; optionally only
variants / experiments / shapes matching the globs), runs

    ncu --csv --print-units base --clock-control none --profile-from-start off --metrics ...
        BIN profile-one VARIANT --shape MxK --input DIST --seed S

(one launch between cudaProfilerStart and cudaProfilerStop: every kernel ncu reports belongs to that
variant; the clocks are left as the card has them) and appends one "profile" record per variant and
problem to the report: DRAM throughput as % of peak, achieved occupancy, registers per thread,
issue-slot utilisation and the top three warp-stall reasons of the longest kernel; SASS thread
instructions executed per multiply-accumulate (per weight, for a mat-vec) summed over all its
kernels; and each kernel's duration under the profiler. Without ncu it says so and exits 0 having
changed nothing: it never estimates. The report is rewritten atomically (temp file, then rename);
the records are appended at its end, each with the run's env (after the closing "end" record of a
schema-2 report: reports/SCHEMA.md).
Exit status: 0, 1 (ncu failed on every variant), 2 (bad arguments or report).
"""
import argparse
import csv
import fnmatch
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

METRICS = {
    "gpu__time_duration.sum": "duration_ns",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy_pct",
    "launch__registers_per_thread": "registers",
    "sm__inst_issued.avg.pct_of_peak_sustained_active": "issue_pct",
    "smsp__sass_thread_inst_executed.sum": "thread_insts",
}
STALL_PREFIX = "smsp__average_warps_issue_stalled_"
STALL_SUFFIX = "_per_issue_active.ratio"
STALL_REGEX = "regex:" + STALL_PREFIX + ".*" + STALL_SUFFIX.replace(".", r"\.")


def number(text):
    """ncu's numbers: '1,234.5' (thousands separators), 'n/a' -> None."""
    t = text.strip().replace(",", "")
    try:
        return float(t)
    except ValueError:
        return None


def parse_ncu_csv(text):
    """ncu --csv (one row per kernel and metric) -> [{id, name, metrics: {metric: value}}] in ID order.

    Lines before the header (==PROF== lines, the program's own output) are skipped."""
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        raise ValueError("no ncu CSV header (a line starting with \"ID\") in the output")
    rows = csv.DictReader(io.StringIO("\n".join(l for l in lines[start:] if not l.startswith("=="))))
    need = {"ID", "Kernel Name", "Metric Name", "Metric Value"}
    if not need.issubset(rows.fieldnames or []):
        raise ValueError("ncu CSV lacks columns %s" % sorted(need - set(rows.fieldnames or [])))
    kernels = {}
    for r in rows:
        k = kernels.setdefault(r["ID"], {"id": r["ID"], "name": r["Kernel Name"], "metrics": {}})
        v = number(r["Metric Value"])
        if r["Metric Name"] and v is not None:
            k["metrics"][r["Metric Name"]] = v
    return [kernels[i] for i in sorted(kernels, key=lambda s: int(s) if s.isdigit() else s)]


def summarize_kernels(kernels, macs):
    """The profile record's readings from the kernels of one variant's launch."""
    if not kernels:
        raise ValueError("ncu profiled no kernel")
    main = max(kernels, key=lambda k: k["metrics"].get("gpu__time_duration.sum", 0.0))
    m = main["metrics"]
    out = {"kernel": main["name"], "kernels": []}
    for name, key in METRICS.items():
        if key in ("duration_ns", "thread_insts"):
            continue
        if name in m:
            out[key] = m[name]
    stalls = sorted(((n[len(STALL_PREFIX):-len(STALL_SUFFIX)], v) for n, v in m.items()
                     if n.startswith(STALL_PREFIX) and n.endswith(STALL_SUFFIX)), key=lambda p: -p[1])
    # "selected" is the issuing warp itself, not a stall.
    out["top_stalls"] = [[n, v] for n, v in stalls if n != "selected"][:3]
    insts = sum(k["metrics"].get("smsp__sass_thread_inst_executed.sum", 0.0) for k in kernels)
    out["duration_ns"] = sum(k["metrics"].get("gpu__time_duration.sum", 0.0) for k in kernels)
    if macs and insts:
        out["sass_thread_inst_per_mac"] = insts / macs
    for k in kernels:
        out["kernels"].append({"name": k["name"], "duration_ns": k["metrics"].get("gpu__time_duration.sum")})
    return out


def timed_problems(records, variants, experiments, shapes="*"):
    """(experiment, variant, shape, dist, seed, macs) of every timed measurement, first occurrence.
    Only mat-vecs: `klab profile-one` takes --shape, so a measurement of an op without a shape
    (no "shape" key: its problem is named parameters, e.g. gdn_step) is left out."""
    seen, out = set(), []
    for r in records:
        if r.get("kind") != "measurement" or "timing" not in r or not isinstance(r.get("shape"), str):
            continue
        if not fnmatch.fnmatchcase(r["variant"], variants) or not fnmatch.fnmatchcase(r.get("experiment", ""), experiments):
            continue
        if not fnmatch.fnmatchcase(r["shape"], shapes):
            continue
        key = (r["variant"], r["shape"], r["dist"], r["seed"])
        if key in seen:
            continue
        seen.add(key)
        out.append((r.get("experiment", ""),) + key + (r.get("macs", 0),))
    return out


def find_ncu(given):
    for c in [given, os.environ.get("KLAB_NCU"), shutil.which("ncu"), "/usr/local/cuda/bin/ncu"]:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return c
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("report_dir")
    ap.add_argument("--klab", default=str(Path(__file__).resolve().parent.parent / "build/dev/bin/klab"))
    ap.add_argument("--ncu")
    ap.add_argument("--variants", default="*")
    ap.add_argument("--experiments", default="*")
    ap.add_argument("--shapes", default="*")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--dry-run", action="store_true", help="list what would be profiled, change nothing")
    a = ap.parse_args(argv)
    path = Path(a.report_dir) / "report.jsonl"
    if not path.is_file():
        print("profile_ncu.py: %s not found" % path, file=sys.stderr)
        return 2
    text = path.read_text()
    try:
        records = [json.loads(l) for l in text.splitlines() if l.strip()]
    except json.JSONDecodeError as e:
        print("profile_ncu.py: %s: malformed JSON Lines (%s)" % (path, e), file=sys.stderr)
        return 2
    todo = timed_problems(records, a.variants, a.experiments, a.shapes)
    if not todo:
        print("profile_ncu.py: no timed measurement matches --variants %s --experiments %s" % (a.variants, a.experiments), file=sys.stderr)
        return 2
    ncu = find_ncu(a.ncu)
    if a.dry_run or not ncu:
        if not ncu:
            print("profile_ncu.py: SKIP: Nsight Compute (ncu) not found (--ncu, $KLAB_NCU, PATH, /usr/local/cuda/bin); report unchanged")
        for t in todo:
            print("  would profile %s on %s/%s/seed=%s" % (t[1], t[2], t[3], t[4]))
        return 0
    metrics = ",".join(list(METRICS) + [STALL_REGEX])
    added, failed = [], 0
    for exp, variant, shape, dist, seed, macs in todo:
        cmd = [ncu, "--csv", "--print-units", "base", "--clock-control", "none", "--profile-from-start", "off",
               "--metrics", metrics, a.klab, "profile-one", variant, "--shape", shape, "--input", dist, "--seed", str(seed)]
        rec = {"kind": "profile", "experiment": exp, "variant": variant, "shape": shape, "dist": dist, "seed": seed,
               "tool": "ncu --clock-control none, one launch after two warm-ups", "env": records[0].get("env")}
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
            if p.returncode != 0:
                raise RuntimeError("ncu exited %d: %s" % (p.returncode, (p.stderr or p.stdout).strip().splitlines()[-1:] or ""))
            rec.update(summarize_kernels(parse_ncu_csv(p.stdout), macs))
            stalls = ", ".join("%s %.1f" % (n, v) for n, v in rec["top_stalls"])
            print("profile %s %s: dram %.0f%%, occupancy %.0f%%, %s regs, issue %.0f%%, %.2f inst/mac; stalls %s" % (
                variant, shape, rec.get("dram_pct", float("nan")), rec.get("occupancy_pct", float("nan")),
                rec.get("registers", "?"), rec.get("issue_pct", float("nan")), rec.get("sass_thread_inst_per_mac", float("nan")), stalls))
        except (RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
            failed += 1
            rec = {"kind": "skip", "experiment": exp, "what": "profile %s on %s/%s" % (variant, shape, dist),
                   "reason": "ncu: %s" % e, "env": records[0].get("env")}
            print("profile_ncu.py: %s on %s: %s" % (variant, shape, e), file=sys.stderr)
        added.append(rec)
    tmp = path.with_name(path.name + ".tmp.%d" % os.getpid())
    body = text if text.endswith("\n") else text + "\n"
    tmp.write_text(body + "".join(json.dumps(r, sort_keys=True) + "\n" for r in added))
    os.replace(tmp, path)
    print("profile_ncu.py: %d profile record(s) added to %s (%d failed)" % (len(added) - failed, path, failed))
    return 1 if failed == len(added) else 0


if __name__ == "__main__":
    sys.exit(main())
