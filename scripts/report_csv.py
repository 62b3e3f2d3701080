#!/usr/bin/env python3
"""Writes a report's per-kind CSVs (report-KIND.csv) again from its report.jsonl or report.jsonl.gz.

    scripts/report_csv.py REPORT [--out DIR]

klab writes the CSVs beside report.jsonl when a run ends (reports/SCHEMA.md, "CSVs"); they are views
of the JSONL. Committed runs keep only report.jsonl.gz, so that the tracked tree stays small enough to
travel to the GPU machine (64 MiB with what a call carries); this script gives their CSVs back as
klab writes them (harness/src/report.cpp, to_csv): every record of the file but the header and end
records (with those tools appended after the end, as peers/run.py --merge writes them too), one
file per kind in order of first appearance, each record flattened into its scalar leaves as dotted
paths with keys in byte order (arrays stay in the JSONL), columns in order of first appearance,
each number spelt as in the JSONL.

REPORT is a report directory or its .jsonl / .jsonl.gz file; --out (default: the report's
directory) receives the files. Schema 1 reports (no header) are refused: klab wrote one union
report.csv for them, and committed schema 1 reports keep it. Exit status: 0 written; 2 bad input
(no such report, a malformed line, schema 1), nothing written.
"""
import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import klab_report  # noqa: E402


class UsageError(Exception):
    pass


class Literal(str):
    """A number as the file spells it: klab's CSVs print each number as its JSONL line does (nlohmann's
    shortest-digits search does not always find Python's shortest form)."""


def data_records(f, lines):
    """Every record of the file but the header and end records, in file order, numbers as Literal."""
    out, headers = [], 0
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            r = json.loads(line, parse_float=Literal, parse_int=Literal)
        except json.JSONDecodeError as e:
            raise UsageError(f"{f}:{n}: malformed JSON: {e.msg} (column {e.colno})") from None
        if not isinstance(r, dict) or not isinstance(r.get("kind"), str):
            raise UsageError(f"{f}:{n}: not a record (a JSON object with a string \"kind\")")
        if r["kind"] == "header":
            headers += 1
        elif r["kind"] != "end":
            out.append(r)
    if headers == 0:
        raise UsageError(f"{f}: a schema 1 report (no header record): klab wrote one report.csv for it, not per-kind CSVs")
    return out


def scalar(v):
    # a string as is, a number as the file spells it (Literal), true, false or null as nlohmann::json::dump
    return v if isinstance(v, str) else json.dumps(v)


def flatten(v, prefix, out):
    if isinstance(v, dict):
        for k in sorted(v):  # nlohmann::json keeps an object's keys in byte order
            flatten(v[k], k if not prefix else prefix + "." + k, out)
    elif isinstance(v, list):
        return  # samples stay in the JSONL
    else:
        out[prefix] = scalar(v)


def field(s):
    if not any(c in s for c in ',"\n'):
        return s
    return '"' + s.replace('"', '""') + '"'


def to_csv(records):
    rows, cols, seen = [], [], set()
    for r in records:
        row = {}
        flatten(r, "", row)
        for k in sorted(r):  # columns: first appearance, record by record, keys in record order
            sub = {}
            flatten(r[k], k, sub)
            for c in sorted(sub):
                if c not in seen:
                    seen.add(c)
                    cols.append(c)
        rows.append(row)
    lines = [",".join(field(c) for c in cols)]
    lines += [",".join(field(row[c]) if c in row else "" for c in cols) for row in rows]
    return "".join(l + "\n" for l in lines)


def csv_files(records):
    """{file name: text}: report-KIND.csv for each kind of `records` in order of first appearance
    (harness/src/report.cpp write_csv_per_kind; header and end records left out)."""
    by_kind = {}
    for r in records:
        if r.get("kind") not in ("header", "end"):
            by_kind.setdefault(str(r.get("kind")), []).append(r)
    return {"report-" + (re.sub(r"[^A-Za-z0-9_-]", "_", k) or "unknown") + ".csv": to_csv(rs) for k, rs in by_kind.items()}


def write_csvs(report_dir, records):
    """Writes csv_files(records) into report_dir, each file whole (a temporary file, then a rename);
    returns the paths written."""
    out = []
    for name, text in csv_files(records).items():
        klab_report.write_atomically(Path(report_dir) / name, text)
        out.append(Path(report_dir) / name)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", help="a report directory, or its report.jsonl or report.jsonl.gz")
    ap.add_argument("--out", help="where the CSVs go (default: the report's directory)")
    a = ap.parse_args(argv)
    try:
        try:
            f = klab_report.report_file(a.report)
            lines = klab_report.read_text(f).splitlines()
        except klab_report.ReportError as e:
            raise UsageError(str(e)) from None
        records = data_records(f, lines)
        out = Path(a.out) if a.out else f.parent
        if out.exists() and not out.is_dir():
            raise UsageError(f"--out {out}: not a directory")
        out.mkdir(parents=True, exist_ok=True)
    except UsageError as e:
        print(f"report_csv.py: {e}", file=sys.stderr)
        return 2
    for p in write_csvs(out, records):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
