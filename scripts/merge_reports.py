#!/usr/bin/env python3
"""Merges the shard reports of ONE klab run (`klab run ... --shard I/N`, or the shards `klab run
--devices` starts) into one schema-2 report (reports/SCHEMA.md), standard library only; or, with
--parts, the reports of one reference run split by experiment lists (one part a device call).

    scripts/merge_reports.py OUT REPORT_DIR...
    scripts/merge_reports.py --parts OUT REPORT_DIR...

writes OUT/report.jsonl (OUT is created; a report already there is replaced; no per-kind CSVs: the
shards' own stay beside their reports). The shards must be of one run: the same git commit, the same
command line apart from --shard, --out and --device, the same N, and shards 0..N-1 each exactly once;
anything else is refused (exit 2, naming the problem and the report), and nothing is written.

What the merged report holds:
- one header: shard 0's env, with env.options.shard removed and env.shards added: per shard, in
  order, {index, count, host, device (its env.device), date, command, report (the path merged)};
- every data record of every shard, shard by shard in file order, each with "shard" (its index) and
  "env" (its shard's header env, or the record's own if it had one, so that per-GPU figures read
  against their own GPU); claim records excepted:
- each claim (by experiment and id, else index) once, where it first appears, with this rule (the
  claims cannot be re-evaluated here, only their shard verdicts joined): not_held if any shard has it
  not_held; held if some shard has it held and none not_held; else not_evaluated. Its evidence joins
  the shards' ("shard 0/2 held: ...; shard 1/2 not_evaluated: ..."), and "shard_states" lists each
  shard's state. So a claim stated over evaluations that the shards split between them
  (ClaimRef::needs) is not_evaluated in every shard, and stays not_evaluated merged: say so, do not
  read it as held;
- an end record: complete only if every shard's report is complete (its end record says complete
  and counts the records the file holds); else failed, its error naming each incomplete shard.

--parts: reports of one commit (the same git_commit and git_dirty), none a shard, on the same kind of
GPU (env.device.name) with the same options (env.options), whose command lines differ only in the
experiments they name and --out, and whose experiments (every record's "experiment") are disjoint;
anything else is refused (exit 2, naming the problem), and nothing is written. The merged report:
part 0's header with env.parts (per part: index, host, device, date, command, report, experiments);
every record of every part in order, each with "part" (its index) and its part's env (its own
ceiling: parts run on different machines); the claims as each part has them (their experiments are
the part's alone); the end record complete only if every part is.
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import klab_report  # noqa: E402


class MergeError(Exception):
    pass


# Options that differ between the shards of one run (each with its value, as "--opt V" or "--opt=V").
_PER_SHARD = ("--shard", "--out", "--device")


def run_words(argv):
    """The command line without the program path and the per-shard options."""
    out, skip = [], False
    for w in argv[1:]:
        if skip:
            skip = False
            continue
        if w in _PER_SHARD:
            skip = True
            continue
        if any(w.startswith(o + "=") for o in _PER_SHARD):
            continue
        out.append(w)
    return out


def _strip(r):
    return {k: v for k, v in r.items() if not k.startswith("_")}


def read_one(path):
    """(report, header) of one klab run's report; MergeError when it cannot be read or has other than one header."""
    try:
        rep = klab_report.load(path)
    except klab_report.ReportError as e:
        raise MergeError(f"{path}: cannot read: {e}") from None
    if len(rep.headers) != 1:
        raise MergeError(f"{rep.file}: {len(rep.headers)} header records: not the report of one klab run (schema 2)")
    return rep, rep.headers[0]


def check_commit(rep, h, rep0, h0, what):
    """MergeError ("not one `what`") unless the two reports' headers name the same commit and dirty state."""
    for field in ("git_commit", "git_dirty"):
        if h["env"].get(field) != h0["env"].get(field):
            raise MergeError(f"not one {what}: {rep.file} has {field} {h['env'].get(field)!r}, {rep0.file} {h0['env'].get(field)!r}")


def end_record(records, start, reps, incomplete, what):
    """The merged report's end record: complete only when no input is incomplete (`incomplete`: their reasons)."""
    kinds = {}
    for r in records:
        kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
    ends = [e["record"].get("end") for rep in reps for e in rep.ends]
    end = {"kind": "end", "status": "failed" if incomplete else "complete", "records": len(records), "counts": kinds,
           "start": start, "end": max([e for e in ends if isinstance(e, str)], default=start)}
    if incomplete:
        end["error"] = f"merged from incomplete {what}: " + "; ".join(incomplete)
    return end


def read_shard(path):
    """(report, header, shard index, shard count); MergeError when it is not one shard report."""
    rep, h = read_one(path)
    shard = klab_report.get(h, "env.options.shard")
    if not isinstance(shard, dict) or not isinstance(shard.get("index"), int) or not isinstance(shard.get("count"), int):
        raise MergeError(f"{rep.file}: not a shard report (its header has no env.options.shard: run with --shard I/N)")
    return rep, h, shard["index"], shard["count"]


def merge_claim(claims):
    """claims: [(shard label, record)] -> the merged claim record (rule in the docstring)."""
    states = [c["state"] for _, c in claims]
    if "not_held" in states:
        state = "not_held"
    elif "held" in states:
        state = "held"
    else:
        state = "not_evaluated"
    merged = {k: v for k, v in claims[0][1].items() if k not in ("env", "shard")}
    merged["state"] = state
    merged["evidence"] = "; ".join(f"shard {label} {c['state']}" + (f": {c['evidence']}" if c.get("evidence") else "")
                                   for label, c in claims)
    merged["shard_states"] = states
    return merged


def merge(paths):
    """The merged report's lines (header, records, end) from the shard reports at `paths`."""
    shards = [read_shard(p) for p in paths]
    counts = {n for _, _, _, n in shards}
    if len(counts) != 1:
        raise MergeError("the reports are shards of different splits: " +
                         ", ".join(f"{r.file} is {i}/{n}" for r, _, i, n in shards))
    n = counts.pop()
    by_index = {}
    for s in shards:
        rep, _, i, _ = s
        if i in by_index:
            raise MergeError(f"shard {i}/{n} given twice: {by_index[i][0].file} and {rep.file}")
        by_index[i] = s
    missing = [i for i in range(n) if i not in by_index]
    if missing:
        raise MergeError(f"missing shard(s) {', '.join(f'{i}/{n}' for i in missing)} (got "
                         f"{', '.join(f'{i}/{n}' for i in sorted(by_index))})")
    first_rep, first_h, _, _ = by_index[0]
    for i in range(1, n):
        rep, h, _, _ = by_index[i]
        check_commit(rep, h, first_rep, first_h, "run")
        a, b = run_words(first_h.get("argv", [])), run_words(h.get("argv", []))
        if a != b:
            raise MergeError(f"not one run: the command lines differ (apart from --shard, --out, --device): "
                             f"{first_rep.file}: {' '.join(a)!r}; {rep.file}: {' '.join(b)!r}")

    env = json.loads(json.dumps(first_h["env"]))
    env.get("options", {}).pop("shard", None)
    env["shards"] = [{"index": i, "count": n, "host": h["env"].get("host"), "device": h["env"].get("device"),
                      "date": h["env"].get("date"), "command": h["env"].get("command"), "report": str(rep.file)}
                     for i, (rep, h, _, _) in sorted(by_index.items())]
    header = {"kind": "header", "schema_version": 2, "start": first_h.get("start", env.get("date")),
              "argv": first_h.get("argv", []), "env": env}

    out, claims, incomplete = [], {}, []
    for i in range(n):
        rep, h, _, _ = by_index[i]
        label = f"{i}/{n}"
        why = rep.incomplete()
        if why:
            incomplete.append(f"shard {label} ({rep.file}): {why}")
        for r in rep.records:
            r = _strip(r)
            if r["kind"] == "claim":
                key = (r.get("experiment"), r.get("id", r.get("index")))
                if key not in claims:
                    claims[key] = []
                    out.append(("claim", key))
                claims[key].append((label, r))
                continue
            r["shard"] = i  # its env: the shard's header env (load() put it there), or its own if it had one
            out.append(("record", r))
    records = [merge_claim(claims[x]) if what == "claim" else x for what, x in out]
    return [header] + records + [end_record(records, header["start"], [rep for rep, _, _, _ in by_index.values()], incomplete, "shards")]


def experiments_of(rep):
    return {r["experiment"] for r in rep.records if isinstance(r.get("experiment"), str)}


def part_words(argv, experiments):
    """The command line without the program path, --out and the experiments the part names."""
    return [w for w in run_words(argv) if w not in experiments]


def merge_parts(paths):
    """The merged report's lines from the reports of one run split by experiment lists (--parts)."""
    parts = []
    for p in paths:
        rep, h = read_one(p)
        if klab_report.get(h, "env.options.shard") is not None:
            raise MergeError(f"{rep.file}: a shard report (env.options.shard): merge shards without --parts")
        parts.append((rep, h, experiments_of(rep)))
    rep0, h0, _ = parts[0]
    seen = {}
    for rep, h, exps in parts:
        check_commit(rep, h, rep0, h0, "commit")
        name, name0 = klab_report.get(h, "env.device.name"), klab_report.get(h0, "env.device.name")
        if name != name0:
            raise MergeError(f"not one kind of GPU: {rep.file} ran on {name!r}, {rep0.file} on {name0!r}")
        if h["env"].get("options") != h0["env"].get("options"):
            raise MergeError(f"not one run's options: {rep.file} has {json.dumps(h['env'].get('options'))}, "
                             f"{rep0.file} {json.dumps(h0['env'].get('options'))}")
        a, b = part_words(h0.get("argv", []), experiments_of(rep0)), part_words(h.get("argv", []), exps)
        if a != b:
            raise MergeError(f"not one run: the command lines differ (apart from the experiments and --out): "
                             f"{rep0.file}: {' '.join(a)!r}; {rep.file}: {' '.join(b)!r}")
        for e in sorted(exps):
            if e in seen:
                raise MergeError(f"experiment {e} is in two parts: {seen[e]} and {rep.file}")
            seen[e] = rep.file
    env = json.loads(json.dumps(h0["env"]))
    env["parts"] = [{"index": i, "host": h["env"].get("host"), "device": h["env"].get("device"), "date": h["env"].get("date"),
                     "command": h["env"].get("command"), "report": str(rep.file), "experiments": sorted(exps)}
                    for i, (rep, h, exps) in enumerate(parts)]
    header = {"kind": "header", "schema_version": 2, "start": h0.get("start", env.get("date")), "argv": h0.get("argv", []), "env": env}
    records, incomplete = [], []
    for i, (rep, h, _) in enumerate(parts):
        why = rep.incomplete()
        if why:
            incomplete.append(f"part {i} ({rep.file}): {why}")
        for r in rep.records:
            r = _strip(r)
            r["part"] = i
            records.append(r)
    return [header] + records + [end_record(records, header["start"], [rep for rep, _, _ in parts], incomplete, "parts")]


def main(argv):
    parts = len(argv) > 1 and argv[1] == "--parts"
    if parts:
        argv = argv[:1] + argv[2:]
    if len(argv) < 3 or argv[1] in ("-h", "--help"):
        print(__doc__.strip().split("\n\n")[1].strip(), file=sys.stderr)
        return 2 if len(argv) < 3 else 0
    out = Path(argv[1])
    try:
        lines = merge_parts(argv[2:]) if parts else merge(argv[2:])
    except MergeError as e:
        print(f"merge_reports.py: {e}; nothing written", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    f = out / "report.jsonl"
    tmp = f.with_name(f.name + ".tmp")
    tmp.write_text("".join(json.dumps(r, allow_nan=False) + "\n" for r in lines), encoding="utf-8")
    tmp.replace(f)
    end = lines[-1]
    states = {}
    for r in lines:
        if r["kind"] == "claim":
            states[r["state"]] = states.get(r["state"], 0) + 1
    print(f"merged {len(argv) - 2} {'parts' if parts else 'shards'} into {f}: {end['records']} records; claims "
          + ", ".join(f"{states.get(s, 0)} {s}" for s in klab_report.CLAIM_STATES)
          + ("; complete" if end["status"] == "complete" else "; INCOMPLETE: " + end["error"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
