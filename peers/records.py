"""Measurement records in klab's schema (reports/SCHEMA.md, harness/src/race.cpp to_json(Measured)),
and merging them into a klab report. Standard library and numpy only.

Definitions mirror klab's own, so that a peer's figures sit beside klab's in one table:
  accuracy()   harness/src/metrics.cpp accuracy(): max_rel normalised by max|ref| of the whole tensor
  summarize()  harness/src/stats.cpp summarize()/quantile_sorted() (linear interpolation)
  rates        gbps = bytes / median, gmacs = macs / median, pct_ceiling vs env.ceiling.read_gbps,
               pct_attainable vs the klab report's own size-matched read (modes.MODE.attainable_gbps)
"""
import json
import math
from pathlib import Path
import sys

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

# The poison written into outputs before the verification run (klab: kPoisonBits, a quiet NaN with
# payload 0x0BAD), and the same idea for 16-bit outputs (NaNs with a recognisable payload).
POISON = {"f32": 0x7FC00BAD, "bf16": 0x7FAD, "f16": 0x7EAD}


# Every record this runner writes says so (and is never taken for one of klab's own).
SOURCE = "peers/run.py"


class ReportError(Exception):
    """A klab report that cannot be used (the message names the file and line)."""


# ---- accuracy and statistics ----------------------------------------------------------------------

def accuracy(out, ref, unwritten=None):
    """klab's Accuracy of `out` (float32 values) against `ref` (float64), as metrics.cpp computes it.
    `unwritten`: a boolean mask of outputs still holding the poison (counted, not compared)."""
    out = np.asarray(out, dtype=np.float32).ravel()
    ref = np.asarray(ref, dtype=np.float64).ravel()
    if out.shape != ref.shape:
        raise ValueError(f"accuracy: output has {out.size} elements, reference {ref.size}")
    unw = np.zeros(out.shape, bool) if unwritten is None else np.asarray(unwritten, bool).ravel()
    rfin = np.isfinite(ref)
    max_ref = float(np.abs(ref[rfin]).max()) if rfin.any() else 0.0
    cmp = ~unw & rfin
    o = out[cmp].astype(np.float64)
    r = ref[cmp]
    nan = int(np.isnan(o).sum())
    inf = int(np.isinf(o).sum())
    fin = np.isfinite(o)
    e = np.abs(o[fin] - r[fin])
    max_abs = float(e.max()) if e.size else 0.0
    err2 = float((e * e).sum())
    ref2 = float((r[fin] * r[fin]).sum())
    nmse = err2 / ref2 if ref2 > 0 else err2
    return {"n": int(out.size), "max_abs": max_abs, "max_rel": max_abs / max_ref if max_ref > 0 else max_abs,
            "rms_rel": math.sqrt(nmse), "nmse": nmse, "max_ref": max_ref, "nan": nan, "inf": inf,
            "unwritten": int(unw.sum())}


def finite(acc):
    return acc["nan"] == 0 and acc["inf"] == 0 and acc["unwritten"] == 0


from klab_report import quantile_sorted, write_atomically  # noqa: E402  (scripts/: the harness's quantile and writer, one definition)
import report_csv  # noqa: E402  (scripts/: the report CSVs as klab writes them, one definition)


def summarize(samples):
    if not samples:
        raise ValueError("summarize: no samples")
    s = sorted(samples)
    return {"n": len(s), "median_ms": quantile_sorted(s, 0.5), "min_ms": s[0], "max_ms": s[-1],
            "p10_ms": quantile_sorted(s, 0.1), "p90_ms": quantile_sorted(s, 0.9), "mean_ms": sum(s) / len(s)}


def timing_json(mode, samples_ms, launches, copies, l2_cold=True, blocking=None):
    """klab's to_json(Timing): per-launch samples, no clock probe here (clock_mhz 0: unknown, so no
    repetition is flagged throttled and every one is kept)."""
    t = summarize(samples_ms)
    t.update({"mode": mode, "flush": "read" if l2_cold else "none", "reps": len(samples_ms), "kept": len(samples_ms),
              "throttled": 0, "clock_mhz": 0, "l2_cold": bool(l2_cold), "samples_ms": list(samples_ms)})
    if mode == "stream":
        t["launches"] = launches
        t["copies"] = copies
    if blocking:
        t["blocking"] = blocking
    return t


# ---- the klab report a run merges into -------------------------------------------------------------

def report_dir(path):
    """The report directory of a report given as its directory or its report.jsonl."""
    p = Path(path)
    return p if p.is_dir() else p.parent


def read_jsonl(path):
    path = Path(path)
    if path.is_dir():
        path = path / "report.jsonl"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ReportError(f"{path}: cannot be read: {e.strerror}") from None
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError as e:
            raise ReportError(f"{path}:{i}: malformed JSON ({e.msg})") from None
        if not isinstance(r, dict) or "kind" not in r:
            raise ReportError(f"{path}:{i}: not a record (an object with \"kind\")")
        out.append(r)
    return out


class KlabReport:
    """What a peer record takes from the klab run it joins: the environment, the read ceiling, the
    L2 size, and klab's own measurements of the same problems (bytes, size-matched reads)."""

    def __init__(self, records, source="klab report"):
        self.records = records
        self.source = str(source)
        self.env = next((r["env"] for r in records if isinstance(r.get("env"), dict)), {})

    @classmethod
    def load(cls, path):
        return cls(read_jsonl(path), path)

    def read_gbps(self):
        c = self.env.get("ceiling") or {}
        g = c.get("read_gbps")
        return float(g) if isinstance(g, (int, float)) and g > 0 else None

    def l2_bytes(self):
        d = self.env.get("device") or {}
        b = d.get("l2_bytes")
        return int(b) if isinstance(b, (int, float)) and b > 0 else None

    def measurements(self, experiment=None, op=None):
        return [r for r in self.records if r.get("kind") == "measurement" and r.get("source") != SOURCE
                and (experiment is None or r.get("experiment") == experiment) and (op is None or r.get("op") == op)]

    def match(self, experiment, shape, dist=None, op=None):
        """klab's own (non-python) measurements of this experiment and problem, timed ones first."""
        ms = [r for r in self.measurements(experiment, op) if r.get("shape") == shape and (dist is None or r.get("dist") == dist)]
        return sorted(ms, key=lambda r: 0 if isinstance(r.get("modes"), dict) else 1)

    @staticmethod
    def attainable(matches, mode):
        """modes.MODE.attainable_gbps of the first match that has it (it depends only on bytes and mode)."""
        for r in matches:
            g = ((r.get("modes") or {}).get(mode) or {}).get("attainable_gbps")
            if isinstance(g, (int, float)) and g > 0:
                return float(g), bool(((r.get("modes") or {}).get(mode) or {}).get("attainable_pdl", False))
        return None, False


# ---- records -----------------------------------------------------------------------------------------

def rates(bytes_, macs, median_ms, read_gbps, attainable_gbps):
    sec = median_ms * 1e-3
    gbps = bytes_ / sec / 1e9
    return {"gbps": gbps, "gmacs": macs / sec / 1e9,
            "pct_ceiling": 100.0 * gbps / read_gbps if read_gbps else None,
            "pct_attainable": 100.0 * gbps / attainable_gbps if attainable_gbps else None,
            "attainable_gbps": attainable_gbps}


def measurement(*, experiment, op, variant, axes, shape, m, k, dist, seed, acc, verified, tolerance, bytes_, macs,
                modes, stream_unavailable, klab, env, extra=None):
    """One measurement record as klab writes it. `modes`: {mode: (samples_ms, launches, copies, blocking,
    attainable_gbps, attainable_pdl)} for the modes timed (empty when the peer was not timed). `m`, `k`: None
    for an op whose dimensions are all parameters (then the record has neither, as klab's)."""
    r = {"kind": "measurement", "experiment": experiment, "op": op, "variant": variant, "peer": True, "axes": dict(axes),
         "shape": shape, "dist": dist, "seed": int(seed), "accuracy": acc,
         "verified": bool(verified), "tolerance": tolerance, "bits_vs_a": None, "bytes": float(bytes_), "macs": float(macs)}
    if m is not None:
        r["m"], r["k"] = int(m), int(k)
    read_gbps = klab.read_gbps()
    if modes:
        mj = {}
        for mode, (samples, launches, copies, blocking, att, att_pdl) in modes.items():
            t = timing_json(mode, samples, launches, copies, blocking=blocking)
            rr = rates(bytes_, macs, t["median_ms"], read_gbps, att)
            mj[mode] = {"timing": t, "gbps": rr["gbps"], "gmacs": rr["gmacs"], "pct_ceiling": rr["pct_ceiling"],
                        "pct_attainable": rr["pct_attainable"], "attainable_gbps": att, "attainable_pdl": att_pdl}
        head = "stream" if "stream" in mj else next(iter(mj))
        h = mj[head]
        r.update({"modes": mj, "timing": h["timing"], "gbps": h["gbps"], "gmacs": h["gmacs"], "pct_ceiling": h["pct_ceiling"],
                  "pct_attainable": h["pct_attainable"], "attainable_gbps": h["attainable_gbps"]})
    if stream_unavailable:
        r["stream_unavailable"] = stream_unavailable
    r["ceiling_gbps"] = read_gbps
    r["source"] = SOURCE
    r["env"] = env
    if extra:
        r.update(extra)
    return r


def skip(experiment, what, reason, env):
    return {"kind": "skip", "experiment": experiment, "what": what, "reason": reason, "source": SOURCE, "env": env}


def peer_env(klab, versions, command):
    """The klab run's environment with a "peers" entry: what the peers ran under."""
    env = json.loads(json.dumps(klab.env))  # a deep copy
    env["peers"] = dict(versions, command=command)
    return env


def dumps(record):
    """One JSON Lines line as klab writes it (compact, keys sorted, NaN and infinity as null)."""
    return json.dumps(_nulls(record), separators=(",", ":"), sort_keys=True, allow_nan=False)


def _nulls(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _nulls(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_nulls(v) for v in x]
    if isinstance(x, np.generic):
        return _nulls(x.item())
    return x


# ---- merging into a report -----------------------------------------------------------------------

def csv_per_kind(report_dir, records):
    """REPORT/report-KIND.csv for each kind of `records` as klab writes them (scripts/report_csv.py;
    header and end records left out); a report.csv of schema 1 (one union CSV) goes, as it no longer
    describes report.jsonl. Returns the files written."""
    files = report_csv.write_csvs(report_dir, records)
    (Path(report_dir) / "report.csv").unlink(missing_ok=True)
    return files


def merge(report_dir, peer_lines):
    """Appends peer records (JSON Lines strings) to REPORT/report.jsonl and rewrites REPORT's CSVs
    (report-KIND.csv) from all records: each file written whole to a temporary file and renamed (CSVs
    first, as klab does, so report.jsonl changes last). The records carry their own "env"; in a
    schema-2 report they land after the closing "end" record (reports/SCHEMA.md: records appended
    by tools). Returns the number of records appended."""
    d = Path(report_dir)
    jsonl = d / "report.jsonl"
    old = jsonl.read_text(encoding="utf-8")
    new_lines = [l for l in peer_lines if l.strip()]
    for i, l in enumerate(new_lines, 1):
        r = json.loads(l)
        if not isinstance(r, dict) or "kind" not in r:
            raise ReportError(f"peer record {i} is not a record (an object with \"kind\")")
    text = old + ("" if not old or old.endswith("\n") else "\n") + "".join(l.rstrip("\n") + "\n" for l in new_lines)
    records = [json.loads(l, parse_float=report_csv.Literal, parse_int=report_csv.Literal) for l in text.splitlines() if l.strip()]
    csv_per_kind(d, records)
    write_atomically(jsonl, text)
    return len(new_lines)
