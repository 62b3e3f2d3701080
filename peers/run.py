#!/usr/bin/env python3
"""Runs the Python peers (torch's int4 mat-vec, gemlite, fla's GDN recurrence) on the problems
`klab export` wrote, with klab's protocol, and writes their records in klab's schema.

    peers/run.py --problems DIR --report KLAB_REPORT --out PEERS.jsonl [--reps N] [--warmup N]
                 [--timing launch|stream|both] [--only GLOB] [--dry-run] [--merge]
    peers/run.py --unavailable REASON --report KLAB_REPORT --out PEERS.jsonl [--merge]

For each problem file (DIR/*.safetensors) and each peer of its op: repack the exported bytes into
the peer's format (outside timing), run it once on poisoned outputs and check it against the f64
reference under its declared tolerance, then time the verified peers of that problem together,
their repetitions interleaved over peers and modes, with klab's read flush in launch and stream
mode (peers/gpu_timing.py). A peer that cannot run (package missing, no CUDA, a shape it cannot
take) gets a `skip` record with the reason. The records join KLAB_REPORT's run: its environment
(plus the peers' versions), its read ceiling, and its own size-matched reads of the same problems.

--dry-run (no GPU needed): the repacking and a numpy model of each peer's arithmetic are checked
against the reference on the CPU; every peer is recorded as skipped (no timing is ever made up).
--unavailable REASON: no problems, no run: one skip record per peer with the reason (scripts/run,
when python3 has no torch with a CUDA device). --merge: append the records to KLAB_REPORT's
report.jsonl (and rewrite its report-KIND.csv), each written to a temporary file and renamed.
Exit: 0 ran, 2 bad options or files, 3 a dry run whose CPU check failed.
"""
import argparse
import fnmatch
import math
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

import peers as P  # noqa: E402
import records as rec  # noqa: E402
import st_numpy  # noqa: E402
from gpu_timing import Timer, copies_for  # noqa: E402

# klab's experiment of the recurrence (experiments/gdn_recurrence.cpp): the peers join it.
GDN_DEFAULT_EXPERIMENT = "gdn-recurrence"


def parse(argv):
    ap = argparse.ArgumentParser(prog="peers/run.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", help="directory of `klab export` files (*.safetensors)")
    ap.add_argument("--report", required=True, help="the klab report these records join (directory or report.jsonl)")
    ap.add_argument("--out", required=True, help="the JSON Lines file to write (written whole or not at all)")
    ap.add_argument("--reps", type=int, default=50, help="timed repetitions (default 50, as klab)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed rounds first (default 5, as klab)")
    ap.add_argument("--timing", default="both", choices=("launch", "stream", "both"), help="timing modes (default both)")
    ap.add_argument("--only", default="*", help="run only the peers whose variant name matches this glob")
    ap.add_argument("--q4-experiment", default="q4-vs-peers", help="the experiment the q4 peers join (default q4-vs-peers)")
    ap.add_argument("--gdn-experiment", default=None,
                    help=f"the experiment the recurrence peers join (default: the klab report's gdn_recurrence experiment "
                         f"when it has exactly one, else {GDN_DEFAULT_EXPERIMENT})")
    ap.add_argument("--dry-run", action="store_true", help="no GPU: check the repacking and the peers' arithmetic on the CPU")
    ap.add_argument("--unavailable", metavar="REASON", help="write one skip per peer with this reason (no problems needed)")
    ap.add_argument("--merge", action="store_true", help="append the records to the klab report (report.jsonl, report-KIND.csv)")
    a = ap.parse_args(argv)
    if (a.problems is None) == (a.unavailable is None):
        ap.error("give --problems DIR (a run) or --unavailable REASON (skips only), not both or neither")
    if not 1 <= a.reps <= 100000:
        ap.error(f"--reps must be between 1 and 100000 (got {a.reps})")
    if not 0 <= a.warmup <= 10000:
        ap.error(f"--warmup must be between 0 and 10000 (got {a.warmup})")
    return a


def fail(msg):
    print(f"peers/run.py: {msg}", file=sys.stderr)
    return 2


def gdn_experiment(klab, chosen):
    if chosen:
        return chosen
    names = sorted({r.get("experiment") for r in klab.measurements(op="gdn_recurrence")})
    return names[0] if len(names) == 1 else GDN_DEFAULT_EXPERIMENT


def denominators(problem, klab, experiment):
    """(bytes, macs, where they came from, klab's own matching measurements): klab's record of the same
    experiment and problem when there is one (one denominator for every variant), else the export's."""
    if problem.op == "q4_gemv":
        matches = klab.match(experiment, problem.shape, problem.dist, op="q4_gemv")
    else:
        matches = [r for r in klab.measurements(experiment, "gdn_recurrence")
                   if (r.get("problem") == problem.key or r.get("shape") == problem.shape) and r.get("dist") == problem.dist]
    for r in matches:
        if isinstance(r.get("bytes"), (int, float)) and r["bytes"] > 0:
            return float(r["bytes"]), float(r.get("macs") or problem.macs), f"klab report ({r.get('variant')})", matches
    return problem.bytes, problem.macs, "klab export metadata (no klab measurement of this problem in the report)", matches


def verify(torch, timer, peer, call, problem):
    """Runs copy 0 once on poisoned outputs: each output's byte size is allocated, filled with the
    poison pattern and released just before the call, so the op's own allocation of that size takes
    that block (PyTorch's caching allocator, same stream); whether it did is checked by address.
    Returns (accuracies per output, {output: poisoned}, outputs as float32 arrays)."""
    kinds = [k for _, k in peer.outputs]
    refs = problem.refs()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    with torch.cuda.stream(timer.stream):
        blocks = [torch.full((ref.size,), P.poison_signed(kind), dtype=torch.int32 if kind == "f32" else torch.int16,
                             device="cuda") for (_, ref), kind in zip(refs, kinds)]
        ptrs = {b.data_ptr() for b in blocks}
        del blocks
        outs = call(0)
    torch.cuda.synchronize()
    if len(outs) != len(refs):
        raise RuntimeError(f"{peer.variant} returned {len(outs)} outputs, expected {len(refs)}")
    accs, poisoned, values = [], {}, []
    for (name, ref), kind, out in zip(refs, kinds, outs):
        if out.numel() != ref.size:
            raise RuntimeError(f"{peer.variant}: output {name} has {out.numel()} elements, expected {ref.size} {list(ref.shape)}")
        poisoned[name] = out.data_ptr() in ptrs
        (vals, bits), = P.output_arrays(torch, [out], [kind])
        unwritten = bits == rec.POISON[kind]
        accs.append(rec.accuracy(vals, ref, unwritten))
        values.append(vals)
    return accs, poisoned, values


def fmt_acc(accs, names):
    return ", ".join(f"{n} max_rel {a['max_rel']:.3g}" + ("" if rec.finite(a) else
                     f" ({a['nan']} NaN, {a['inf']} inf, {a['unwritten']} unwritten)") for n, a in zip(names, accs))


def run_gpu(torch, timer, problem, peers, avail, klab, env, args, experiment, out):
    modes = ("launch", "stream") if args.timing == "both" else (args.timing,)
    bytes_, macs, bytes_src, matches = denominators(problem, klab, experiment)
    copies = copies_for(bytes_, timer.l2_bytes) if "stream" in modes else 1
    ready = []  # (peer, call, info, accs, poisoned)
    for peer in peers:
        what = f"{peer.variant} on {problem.label()}"
        why = avail[peer.variant] or peer.can_implement(problem)
        if why:
            out.append(rec.skip(experiment, what, why, env))
            print(f"  skip   {what}: {why}")
            continue
        try:
            call, info = peer.prepare(torch, problem, copies)
            accs, poisoned, _ = verify(torch, timer, peer, call, problem)
        except Exception as e:  # noqa: BLE001 - the peer failed to run: say so, go on with the others
            reason = f"failed to run: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            out.append(rec.skip(experiment, what, reason, env))
            print(f"  skip   {what}: {reason}")
            continue
        names = [n for n, _ in problem.refs()]
        ok = all(rec.finite(a) and a["max_rel"] <= peer.tolerance for a in accs)
        print(f"  verify {peer.variant}: {fmt_acc(accs, names)} (tolerance {peer.tolerance:g})" + ("" if ok else "  FAILED VERIFICATION"))
        ready.append((peer, call, info, accs, poisoned, ok))

    # Time the verified peers together: every mode, repetitions interleaved over peers and modes.
    subjects, owners, stream_why = [], [], {}
    for i, (peer, call, *_rest, ok) in enumerate(ready):
        if not ok:
            continue
        for mode in modes:
            if mode == "launch":
                subjects.append(timer.launch_subject(lambda c=call: c(0)))
                owners.append((i, "launch"))
            else:
                sub, why = timer.stream_subject([lambda c=call, j=j: c(j) for j in range(copies)])
                if sub is None:
                    stream_why[i] = why
                    print(f"  {peer.variant}: stream mode unavailable, {why}")
                    if "launch" not in modes:
                        subjects.append(timer.launch_subject(lambda c=call: c(0)))
                        owners.append((i, "launch"))
                else:
                    subjects.append(sub)
                    owners.append((i, "stream"))
    samples, timing_error = [], None
    if subjects:
        try:
            samples = timer.time_interleaved(subjects, args.reps, args.warmup)
        except Exception as e:  # noqa: BLE001
            timing_error = f"timing failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            print(f"  {timing_error}")
    per_peer = {}
    for (i, mode), sub, s in zip(owners, subjects, samples):
        att, att_pdl = klab.attainable(matches, mode)
        per_peer.setdefault(i, {})[mode] = (s, sub.launches, sub.copies, timer.blocking(), att, att_pdl)

    names = [n for n, _ in problem.refs()]
    for i, (peer, call, info, accs, poisoned, ok) in enumerate(ready):
        extra = {"description": peer.description, "tolerance_reason": peer.tolerance_reason, "peer_config": info,
                 "poisoned": poisoned, "problem_file": Path(problem.path).name, "problem_commit": problem.git_commit,
                 "bytes_source": bytes_src}
        if len(accs) > 1:
            extra["accuracy_outputs"] = dict(zip(names, accs))
        if problem.op == "gdn_recurrence":
            extra["batch"] = problem.batch
        extra["params"] = problem.params
        extra["problem"] = problem.key
        if problem.input_hash:
            extra["input_hash"] = problem.input_hash
        if ok and timing_error:
            extra["not_timed"] = timing_error
        r = rec.measurement(experiment=experiment, op=problem.op, variant=peer.variant, axes=peer.axes, shape=problem.shape,
                            m=problem.m, k=problem.k, dist=problem.dist, seed=problem.seed, acc=accs[0], verified=ok,
                            tolerance=peer.tolerance, bytes_=bytes_, macs=macs, modes=per_peer.get(i, {}),
                            stream_unavailable=stream_why.get(i), klab=klab, env=env, extra=extra)
        out.append(r)
        if "timing" in r:
            line = "  ".join(f"{m} {v['timing']['median_ms']:.4f} ms ({v['gbps']:.0f} GB/s"
                             + (f", {v['pct_ceiling']:.1f}% of ceiling" if v["pct_ceiling"] is not None else "") + ")"
                             for m, v in r["modes"].items())
            print(f"  time   {peer.variant}: {line}")
    del ready, subjects
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def run_cpu(problem, peers, reason, env, experiment, out, dry_run):
    """No GPU: each peer is skipped with the reason; a dry run first checks it on the CPU."""
    bad = 0
    for peer in peers:
        what = f"{peer.variant} on {problem.label()}"
        why = peer.can_implement(problem)
        if why:
            out.append(rec.skip(experiment, what, why, env))
            print(f"  skip   {what}: {why}")
            continue
        note = reason
        if dry_run:
            t0 = time.perf_counter()
            line, models = peer.cpu_check(problem)
            refs = problem.refs()
            accs = [rec.accuracy(mo, ref) for mo, (_, ref) in zip(models, refs)]
            ok = all(rec.finite(a) and a["max_rel"] <= peer.tolerance for a in accs) and "False" not in line
            bad += not ok
            check = (f"{line} {fmt_acc(accs, [n for n, _ in refs])} (tolerance {peer.tolerance:g})"
                     + ("" if ok else " OUTSIDE"))
            print(f"  cpu    {peer.variant} on {problem.label()}: {check} [{time.perf_counter() - t0:.1f} s]")
            note = f"{reason}; dry run on the CPU: {check}"
        out.append(rec.skip(experiment, what, note, env))
    return bad


def main(argv=None):
    args = parse(argv)
    try:
        klab = rec.KlabReport.load(args.report)
    except rec.ReportError as e:
        return fail(str(e))
    out_path = Path(args.out)
    if not out_path.parent.is_dir():
        return fail(f"--out {out_path}: its directory does not exist")
    peers = [p for p in P.ALL if fnmatch.fnmatch(p.variant, args.only) or fnmatch.fnmatch(p.impl, args.only)]
    if not peers:
        return fail(f"--only {args.only!r} matches no peer ({', '.join(p.variant for p in P.ALL)})")
    command = " ".join(["peers/run.py"] + list(argv if argv is not None else sys.argv[1:]))
    if args.unavailable is not None:
        env = rec.peer_env(klab, P.versions(), command)
        out = [rec.skip(args.q4_experiment if p.op == "q4_gemv" else gdn_experiment(klab, args.gdn_experiment),
                        f"{p.variant} (every problem)", args.unavailable, env) for p in peers]
        return finish(out, out_path, args, 0)
    pdir = Path(args.problems)
    if not pdir.is_dir():
        return fail(f"--problems {pdir}: not a directory")
    files = sorted(pdir.glob("*.safetensors"))
    if not files:
        return fail(f"--problems {pdir}: no *.safetensors (write them with `klab export`)")
    try:
        problems = [P.Problem(f) for f in files]
    except (st_numpy.FormatError, KeyError, ValueError, TypeError) as e:
        return fail(f"{e}")

    env = rec.peer_env(klab, P.versions(), command)
    if args.dry_run:
        torch, no_gpu = None, "dry run: not timed (no GPU used)"
    else:
        torch, no_gpu = P.cuda_torch()
    out, bad = [], 0
    timer = None
    avail = {}
    if torch is not None:
        avail = {p.variant: p.available(torch) for p in peers}
        l2 = klab.l2_bytes() or getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0)
        if not l2:
            return fail("the L2 size is unknown (neither the klab report's env.device.l2_bytes nor torch's device properties)")
        timer = Timer(torch, l2)
        print(f"peers/run.py: {torch.cuda.get_device_name(0)}, L2 {l2 / 2**20:.0f} MiB, flush {2 * l2 / 2**20:.0f} MiB read; "
              f"{args.reps} reps after {args.warmup} warm-up rounds; modes {args.timing}")
    else:
        print(f"peers/run.py: {no_gpu}: every peer is skipped" + (" after its CPU check" if args.dry_run else ""))
    for problem in problems:
        experiment = args.q4_experiment if problem.op == "q4_gemv" else gdn_experiment(klab, args.gdn_experiment)
        ps = [p for p in peers if p.op == problem.op]
        if not ps:
            continue
        print(f"{problem.op} {problem.label()} ({Path(problem.path).name}) -> {experiment}")
        if torch is None:
            bad += run_cpu(problem, ps, no_gpu, env, experiment, out, args.dry_run)
        else:
            run_gpu(torch, timer, problem, ps, avail, klab, env, args, experiment, out)
    if bad:
        print(f"peers/run.py: {bad} CPU check(s) outside the tolerance", file=sys.stderr)
    return finish(out, out_path, args, 3 if bad else 0)


def finish(out, out_path, args, code):
    lines = [rec.dumps(r) for r in out]
    rec.write_atomically(out_path, "".join(l + "\n" for l in lines))
    n_meas = sum(r["kind"] == "measurement" for r in out)
    n_skip = sum(r["kind"] == "skip" for r in out)
    print(f"peers/run.py: {n_meas} measurement(s), {n_skip} skip(s) -> {out_path}")
    if args.merge:
        try:
            n = rec.merge(rec.report_dir(args.report), lines)
        except (OSError, rec.ReportError) as e:
            return fail(f"merging into {args.report}: {e}")
        print(f"peers/run.py: {n} record(s) appended to {rec.report_dir(args.report) / 'report.jsonl'}")
    return code


if __name__ == "__main__":
    sys.exit(main())
