#!/usr/bin/env python3
"""The GPU-to-GPU spread of one klab run measured on several GPUs (issue 12, part 7): an input to
compare.py's noise band (compare.py --gpu-noise FILE).

    scripts/gpu_noise.py A B [C...] [--out FILE.json] [--same-gpu]

A, B, ... are reports (directories holding report.jsonl, or the files) of the SAME run on different
GPUs: `klab run EXP... --devices 0,1 --replicate --out OUT` writes them as OUT/device-0,
OUT/device-1; on a cluster, one `klab run` per node with the same command line. They must share the
git commit (and its dirty flag), env.options (seed, reps, warm-up, modes, L2 flush, --quick,
--variants, --set) and the command line apart from --device, --out and --shard; a report that ran
without a GPU, a shard report or a merged one is refused. Anything else is refused (exit 2, naming
what differs and in which report), and nothing is written.

Timed measurements are matched as compare.py matches them (compare.items_of: experiment, variant,
problem/params, dist; GDN timings by their own key), in each timing mode every report timed them in.
For a matched measurement, each pair of reports (i, j) gives the spread |t_i / t_j - 1| taken the
larger way round (max(t_i, t_j) / min(t_i, t_j) - 1, so it does not depend on the order the reports
are given), t the median of its kept repetitions (compare.py's median: the throttled repetitions left
out). Each GPU's own run-to-run noise is in it too: it is what one run on two GPUs differs by, the
situation compare.py --gpu-noise is for. Per mode: how many measurements matched, the median, the 90th percentile (linear interpolation,
as klab_report.quantile_sorted) and the largest spread with the measurement that gave it; the same per
pair of reports. No matched measurement: refused.

The JSON (--out; written atomically) holds {"kind": "klab_gpu_noise", "version": 1, "what", "same_gpu",
"git_commit", "git_dirty", "options", "gpus": [{report, host, index, name, uuid}], "modes": {MODE:
{matched, comparisons, median, p90, max, worst}}, "pairs": [{a, b, modes}], "incomplete", "unmatched"};
compare.py reads "modes" (p90) and "gpus". The text goes to stdout. GPUs are told apart by
env.device.uuid where the reports carry one, else by (host, device index): two reports of one GPU
measure the run-to-run spread, not the GPU-to-GPU one, and are refused unless --same-gpu is given
(then "what" says "run-to-run on one GPU"; a way to try this on a machine with one GPU).

Exit status: 0 written; 2 refused (bad arguments, unreadable or mismatched reports, nothing matched).
Standard library only.
"""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import klab_report as kr  # noqa: E402
from compare import items_of  # noqa: E402  (the matching compare.py's verdicts use)
from merge_reports import run_words  # noqa: E402  (the command line without --device, --out, --shard)

KIND, VERSION = "klab_gpu_noise", 1


class NoiseError(Exception):
    pass


def gpu_of(rep):
    """The GPU a report ran on, from its env: {report, host, index, name, uuid (None if absent)}."""
    dev = rep.env.get("device")
    if not isinstance(dev, dict):
        raise NoiseError(f"{rep.file}: ran without a GPU (env.device is null): no time to compare")
    return {"report": str(rep.file), "host": rep.env.get("host"), "index": dev.get("index"), "name": dev.get("name"),
            "uuid": dev.get("uuid")}


def same_gpu(a, b):
    if a["uuid"] and b["uuid"]:
        return a["uuid"] == b["uuid"]
    return a["host"] == b["host"] and a["index"] == b["index"]


def command_words(rep):
    """The run's command line without the program and its per-GPU options; None when not recorded."""
    argv = rep.headers[0].get("argv") if rep.headers else None
    if not isinstance(argv, list):
        cmd = rep.env.get("command")
        argv = cmd.split() if isinstance(cmd, str) else None
    return run_words(argv) if argv else None


def check_one_run(reps):
    """Raises NoiseError naming the first difference between reps[0] and another report."""
    for rep in reps:
        if len(rep.headers) > 1 or rep.env.get("shards") is not None:
            raise NoiseError(f"{rep.file}: a merged report (several runs or shards): give the reports of each GPU")
        if kr.get(rep.env, "options.shard") is not None:
            raise NoiseError(f"{rep.file}: a shard report (--shard) holds part of a run: replicate the whole run "
                             "(klab run ... --devices D1,D2 --replicate)")
    first = reps[0]
    for rep in reps[1:]:
        for field in ("git_commit", "git_dirty"):
            a, b = first.env.get(field), rep.env.get(field)
            if a != b:
                raise NoiseError(f"not one run: {field} differs: {first.file} has {a!r}, {rep.file} {b!r}")
        oa, ob = first.env.get("options") or {}, rep.env.get("options") or {}
        for k in sorted(set(oa) | set(ob)):
            if oa.get(k, "absent") != ob.get(k, "absent"):
                raise NoiseError(f"not one run: options.{k} differs: {first.file} has {oa.get(k, 'absent')!r}, "
                                 f"{rep.file} {ob.get(k, 'absent')!r}")
        wa, wb = command_words(first), command_words(rep)
        if wa != wb:
            raise NoiseError(f"not one run: the command lines differ (apart from --device, --out, --shard): "
                             f"{first.file}: {' '.join(wa or ['?'])!r}; {rep.file}: {' '.join(wb or ['?'])!r}")


def stats(values):
    """{comparisons, median, p90, max} of a list of spreads (sorted here)."""
    s = sorted(values)
    return {"comparisons": len(s), "median": kr.quantile_sorted(s, 0.5), "p90": kr.quantile_sorted(s, 0.9), "max": s[-1]}


def spread(reps):
    """(modes, pairs, unmatched): the spread per mode and per pair of reports (module docstring)."""
    items = [items_of(r) for r in reps]
    keys = [k for k in items[0] if all(k in it for it in items[1:])]
    n = len(reps)
    per_mode, per_pair, matched, worst = {}, {}, {}, {}
    for key in keys:
        group = [it[key] for it in items]
        for mode in dict.fromkeys(m for it in group for m, _, _ in it.views):
            views = [it.view(mode) for it in group]
            ts = [v[0] if v else None for v in views]
            if not all(kr.is_finite(t) and t > 0 for t in ts):
                continue  # not timed in this mode on every GPU
            matched[mode] = matched.get(mode, 0) + 1
            for i in range(n):
                for j in range(i + 1, n):
                    d = max(ts[i], ts[j]) / min(ts[i], ts[j]) - 1
                    per_mode.setdefault(mode, []).append(d)
                    pm = per_pair.setdefault((i, j), {}).setdefault(mode, {"matched": 0, "values": []})
                    pm["values"].append(d)
                    pm["matched"] += 1
                    if d >= worst.get(mode, (-1,))[0]:
                        worst[mode] = (d, group[0], i, j, ts[i], ts[j])
    modes = {}
    for m in sorted(per_mode, key=lambda m: (kr.MODES.index(m) if m in kr.MODES else len(kr.MODES), m)):
        d, it, i, j, ti, tj = worst[m]
        modes[m] = dict({"matched": matched[m]}, **stats(per_mode[m]),
                        worst={"experiment": it.experiment, "name": it.name, "problem": it.problem, "a": i, "b": j,
                               "ms_a": ti, "ms_b": tj})
    pairs = [{"a": i, "b": j, "modes": {m: dict({"matched": v["matched"]}, **stats(v["values"])) for m, v in pm.items()}}
             for (i, j), pm in sorted(per_pair.items())]
    timed = [{k for k, it in its.items() if it.views} for its in items]
    unmatched = {str(r.file): len(t - set(keys)) for r, t in zip(reps, timed) if t - set(keys)}
    return modes, pairs, unmatched


def pct(x):
    return f"{100 * x:.2f}%"


def gpu_label(g):
    return f"{g['name'] or '?'} (host {g['host'] or '?'}, device {g['index']}" + (f", {g['uuid']}" if g["uuid"] else "") + ")"


def analyse(paths, allow_same_gpu):
    """The JSON object for the reports at `paths`; NoiseError when they are refused."""
    if len(paths) < 2:
        raise NoiseError("give two reports or more (the same run on different GPUs)")
    reps = []
    for p in paths:
        try:
            reps.append(kr.load(p))
        except kr.ReportError as e:
            raise NoiseError(f"cannot read {p}: {e}") from None
    files = [r.file.resolve() for r in reps]
    for i, f in enumerate(files):
        if f in files[:i]:
            raise NoiseError(f"{f} given twice")
    gpus = [gpu_of(r) for r in reps]
    check_one_run(reps)
    same = [(i, j) for i in range(len(gpus)) for j in range(i + 1, len(gpus)) if same_gpu(gpus[i], gpus[j])]
    if same and not allow_same_gpu:
        i, j = same[0]
        raise NoiseError(f"{reps[i].file} and {reps[j].file} ran on the same GPU ({gpu_label(gpus[i])}): their spread is "
                         "run-to-run, not GPU-to-GPU (--same-gpu takes it as that)")
    modes, pairs, unmatched = spread(reps)
    if not modes:
        raise NoiseError("no timed measurement matched in every report (the same experiment, variant, problem and "
                         "timing mode): nothing to measure")
    npairs = len(gpus) * (len(gpus) - 1) // 2
    what = "GPU-to-GPU" if not same else "run-to-run on one GPU" if len(same) == npairs else \
        "GPU-to-GPU and run-to-run (some reports on one GPU)"
    return {"kind": KIND, "version": VERSION, "what": what, "same_gpu": bool(same),
            "git_commit": reps[0].env.get("git_commit"), "git_dirty": reps[0].env.get("git_dirty"),
            "options": reps[0].env.get("options"), "gpus": gpus, "modes": modes, "pairs": pairs,
            "incomplete": {str(r.file): r.incomplete() for r in reps if r.incomplete()}, "unmatched": unmatched}


def text(j):
    opts = j["options"] or {}
    out = [f"{j['what']} spread of one run (commit {str(j['git_commit'])[:12]}{' (dirty)' if j['git_dirty'] else ''}, "
           f"seed {opts.get('seed', '?')}) over {len(j['gpus'])} reports:"]
    out += [f"  [{i}] {g['report']}: {gpu_label(g)}" for i, g in enumerate(j["gpus"])]
    for m, s in j["modes"].items():
        w = s["worst"]
        out.append(f"{m}: {s['matched']} matched measurement(s), {s['comparisons']} comparison(s): |t_i/t_j - 1| median "
                   f"{pct(s['median'])}, p90 {pct(s['p90'])}, max {pct(s['max'])} ({w['experiment']} {w['name']} {w['problem']}: "
                   f"[{w['a']}] {w['ms_a']:.4g} ms vs [{w['b']}] {w['ms_b']:.4g} ms)")
    if len(j["pairs"]) > 1:
        for p in j["pairs"]:
            out.append(f"  [{p['a']}] vs [{p['b']}]: " + "; ".join(f"{m} p90 {pct(s['p90'])} over {s['matched']}"
                                                               for m, s in p["modes"].items()))
    for f, n in j["unmatched"].items():
        out.append(f"note: {n} timed measurement(s) of {f} not matched in every report (left out)")
    for f, why in j["incomplete"].items():
        out.append(f"note: {f} is {why}")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="gpu_noise.py", description="The GPU-to-GPU spread of one klab run on several GPUs.")
    ap.add_argument("reports", nargs="+", help="two or more reports (directories or .jsonl) of the same run on different GPUs")
    ap.add_argument("--out", help="write the JSON here (compare.py --gpu-noise FILE reads it)")
    ap.add_argument("--same-gpu", action="store_true",
                    help="accept reports of one GPU: the spread is then run-to-run on that GPU, and says so")
    args = ap.parse_args(argv)
    try:
        j = analyse(args.reports, args.same_gpu)
    except NoiseError as e:
        print(f"gpu_noise.py: {e}; nothing written", file=sys.stderr)
        return 2
    print(text(j))
    if args.out:
        kr.write_atomically(args.out, json.dumps(j, indent=1, allow_nan=False) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
