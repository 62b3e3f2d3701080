"""Reading klab reports for plot.py, summarize.py and compare.py (standard library only).

A report is a directory holding report.jsonl, or that file itself: one JSON object per line, each
with "kind" and "experiment" (reports/SCHEMA.md). Schema 1 (no header) puts the run's "env" on every
record; schema 2 writes it once, in a "header" record on the first line, and closes the file with an
"end" record (complete, failed or interrupted; a run killed hard leaves none). load() reads both: it
attaches the header's env to each record that has none, so the scripts read every record the same
way, and keeps the header and end records apart (Report.headers, Report.ends; Report.incomplete()
says why a report is not whole). load() checks the fields the scripts read and raises ReportError
naming file:line and the field when one is missing or of the wrong type, or when the report holds
no record at all.

    scripts/klab_report.py REPORT [--require-complete]

prints one line: the schema, the record counts, and whether the report is complete (exit 0; 1 with
--require-complete when it is not; 2 when it cannot be read). What the scripts compute from records (the seed ladder's
rungs, the figures a report gives) lives here too, so the plots and the summary cannot disagree.
"""
import gzip
import json
import math
import os
import re
import statistics
from pathlib import Path


class ReportError(Exception):
    """A report that cannot be read: the message names the file (and line) and the problem."""


# Timing modes: "launch" (one launch between events after a flush) and "stream" (a CUDA graph of K
# back-to-back launches over rotating copies: the headline). Reports from before the modes hold
# neither and were timed as "launch".
MODES = ("launch", "stream")
FLUSHES = ("read", "none")


# Field types: a name for messages and a test.
def _is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


_TYPES = {
    "string": lambda v: isinstance(v, str),
    "number": _is_num,
    "number or null": lambda v: v is None or _is_num(v),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "integer or null": lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool)),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "object or null": lambda v: v is None or isinstance(v, dict),
    "list of numbers": lambda v: isinstance(v, list) and all(x is None or _is_num(x) for x in v),
    "mode": lambda v: v in MODES,
    "flush": lambda v: v in FLUSHES,
    "list of modes": lambda v: isinstance(v, list) and all(x in MODES for x in v),
    "list of strings": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
    "list of objects": lambda v: isinstance(v, list) and all(isinstance(x, dict) for x in v),
    "list": lambda v: isinstance(v, list),
    "positive integer": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
}
# How a type is named in a message (the value sets are spelt out).
_TYPE_NAMES = {"mode": "one of " + ", ".join(MODES), "flush": "one of " + ", ".join(FLUSHES),
               "list of modes": "a list of " + ", ".join(MODES)}

# Per kind: (dotted field, type, required). "required" is True, False, or the dotted path of a
# parent: then the field is required when the parent is present.
_FIELDS = {
    "measurement": [
        # A mat-vec has "shape" (MxK); every record of a harness with named parameters has "problem"
        # (Problem::key(): "17408x5120", "ck=4,dk=128,...") and "params". One of the two is required
        # (_check); schema-1-era records have only "shape".
        ("experiment", "string", True), ("variant", "string", True), ("shape", "string", False),
        ("problem", "string", False), ("params", "object", False), ("tensors", "list of objects", False),
        ("dist", "string", True), ("op", "string", False), ("a", "string", False),
        ("axes", "object", False), ("verified", "boolean", False), ("tolerance", "number or null", False),
        ("bits_vs_a", "integer or null", False), ("bits_vs_prev", "integer or null", False),
        ("prev", "string", False), ("gbps", "number or null", False), ("gmacs", "number or null", False),
        ("pct_ceiling", "number or null", False), ("ceiling_gbps", "number or null", False),
        ("accuracy", "object", False), ("accuracy.max_rel", "number or null", False),
        ("accuracy.rms_rel", "number or null", False),
        ("timing", "object", False), ("timing.median_ms", "number", "timing"),
        ("timing.min_ms", "number", "timing"), ("timing.max_ms", "number", "timing"),
        ("timing.samples_ms", "list of numbers", False), ("timing.samples_clock_mhz", "list of numbers", False),
        ("vs_a", "object", False), ("vs_a.ratio", "number or null", "vs_a"),
        ("vs_a.ci95_lo", "number or null", "vs_a"), ("vs_a.ci95_hi", "number or null", "vs_a"),
        ("vs_a.speedup", "number or null", "vs_a"), ("vs_a.verdict", "string", "vs_a"),
        # Timing modes (issue 9): the headline's mode and flush, the size-matched ceiling, the other
        # modes (checked per mode by _check_modes), why a variant has no stream mode.
        ("timing.mode", "mode", False), ("timing.flush", "flush", False),
        ("timing.launches", "integer", False), ("timing.copies", "integer", False),
        ("pct_attainable", "number or null", False), ("attainable_gbps", "number or null", False),
        ("modes", "object", False), ("stream_unavailable", "string", False),
        # A variant with bytes of its own (Variant::traffic, e.g. a bf16 state): the op's beside them.
        ("bytes", "number", False), ("op_bytes", "number", False),
    ],
    "claim": [
        ("experiment", "string", True), ("index", "integer", True), ("text", "string", True),
        ("state", "string", True), ("evidence", "string", False),
    ],
    "skip": [("experiment", "string", True), ("what", "string", True), ("reason", "string", True)],
    # scripts/profile_ncu.py: Nsight Compute's reading of one timed variant on one problem.
    "profile": [
        ("experiment", "string", True), ("variant", "string", True), ("shape", "string", True), ("dist", "string", True),
        ("seed", "integer", False), ("tool", "string", False), ("kernel", "string", False), ("kernels", "list of objects", False),
        ("duration_ns", "number or null", False), ("dram_pct", "number or null", False), ("occupancy_pct", "number or null", False),
        ("registers", "number or null", False), ("issue_pct", "number or null", False), ("top_stalls", "list", False),
        ("sass_thread_inst_per_mac", "number or null", False),
    ],
    "error_budget": [
        ("experiment", "string", True), ("shape", "string", True), ("dist", "string", True),
        ("rms_rel", "number or null", True), ("max_rel", "number or null", True),
        ("what", "string", False), ("source", "string", False),
    ],
    "gdn_op": [
        ("experiment", "string", True), ("fixture", "string", True), ("pair", "string", True),
        ("op", "string", True), ("n", "integer", True), ("max_rel_t0", "number or null", True),
        ("rms_rel_t0", "number or null", True), ("rms_rel_last", "number or null", False),
        ("max_abs_ref", "number or null", False), ("rms_ref", "number or null", False),
        ("tokens", "integer", False),
    ],
    "gdn_timing": [
        ("experiment", "string", True), ("tier", "string", True), ("mode", "string", True),
        ("ms_per_layer_token", "object", True), ("ms_per_layer_token.median", "number", True),
        ("ms_per_layer_token.min", "number", False), ("ms_per_layer_token.max", "number", False),
        ("layers", "integer", True), ("tokens", "integer", True), ("samples_ms", "list of numbers", False),
        ("fixture", "string", False), ("timing", "object", False),
        ("timing.mode", "mode", False), ("timing.flush", "flush", False),
        ("gbps", "number or null", False), ("pct_ceiling", "number or null", False),
        ("pct_attainable", "number or null", False), ("attainable_gbps", "number or null", False),
    ],
    # gdn-stack (experiments/gdn_stack.cpp): one token through the layers as one CUDA graph, per tier.
    "gdn_stack": [
        ("experiment", "string", True), ("tier", "string", True), ("layers", "integer", True),
        ("timed", "boolean", True), ("graph_nodes", "integer", True), ("kernel_nodes", "integer", True),
        ("bitwise", "object", True), ("bitwise.out_differ", "integer", True), ("bitwise.S_differ", "integer", True),
        ("bitwise.hist_differ", "integer", True), ("bitwise.compared", "integer", True),
        ("out_finite", "boolean", True), ("out_max_abs", "number or null", True),
        ("max_abs_by_layer", "list of numbers", False), ("geometry", "object", False), ("projections", "string", False),
        ("ms_per_token", "object", False), ("ms_per_token.median", "number", "ms_per_token"),
        ("ms_per_token.ci95_lo", "number", "ms_per_token"), ("ms_per_token.ci95_hi", "number", "ms_per_token"),
        ("sequential_ms_per_token", "object", False), ("sequential_ms_per_token.median", "number", "sequential_ms_per_token"),
        ("timing", "object", False), ("timing.mode", "mode", False), ("timing.flush", "flush", False),
        ("bytes_per_token", "number", False), ("gbps", "number or null", False), ("ceiling_gbps", "number or null", False),
        ("pct_floor", "number or null", False), ("floor_ms", "number or null", False), ("cold", "object", False),
        ("not_timed_why", "string", False),
    ],
    # gdn-stack-layers (experiments/gdn_stack.cpp): gdn_stack's record at each layer count of the sweep, and per
    # tier the least-squares line through the counts' medians (ms per token against layers).
    "gdn_stack_layers_fit": [
        ("experiment", "string", True), ("tier", "string", True), ("layers", "list of numbers", True),
        ("ms_per_token", "list of numbers", True), ("fixed_us", "number", True), ("us_per_layer", "number", True),
        ("max_rel_residual", "number", True), ("us_per_layer_at_most", "number", True),
    ],
    # gdn-state-drift (experiments/gdn_state_drift.cpp): one 64-token window of one subject (a storage model or a kernel).
    "state_drift": [
        ("experiment", "string", True), ("regime", "string", True), ("subject", "string", True), ("window", "integer", True),
        ("t_begin", "integer", True), ("t_end", "integer", True), ("o_max_rel", "number or null", True),
        ("o_rms_rel", "number or null", True), ("S_max_rel", "number or null", True), ("S_rms_rel", "number or null", True),
        ("o_finite", "boolean", False), ("S_finite", "boolean", False), ("decay", "object", False), ("geometry", "object", False),
    ],
    # gdn-batch (experiments/gdn_batch.cpp): one token of B slots in one batched step against B single steps.
    "gdn_batch": [
        ("experiment", "string", True), ("B", "integer", True), ("layers", "integer", True),
        ("bitwise", "object", True), ("bitwise.out_differ", "integer", True), ("bitwise.S_differ", "integer", True),
        ("bitwise.hist_differ", "integer", True), ("bitwise.compared", "integer", True),
        ("batch_us_per_token", "object", True), ("batch_us_per_token.median", "number", True),
        ("batch_us_per_token.ci95_lo", "number", True), ("batch_us_per_token.ci95_hi", "number", True),
        ("singles_us_per_token", "object", True), ("singles_us_per_token.median", "number", True),
        ("singles_us_per_token.ci95_lo", "number", True), ("singles_us_per_token.ci95_hi", "number", True),
        ("us_per_slot", "number", False), ("batch_kernels", "integer", False), ("singles_kernels", "integer", False),
        ("batch_vs_singles", "object", False), ("geometry", "object", False),
        ("projections", "string", False), ("batch_gemm", "string", False), ("recurrence", "string", False),
        ("ba", "string", False), ("fused_prep", "boolean", False), ("pdl_chain", "boolean", False),
        ("bytes_per_token", "number", False), ("timing", "object", False), ("timing.mode", "mode", False),
        ("singles_timing", "object", False),
    ],
    # gdn-step-breakdown (experiments/gdn_breakdown.cpp): one record per tier and operator of the GDN
    # step, and one per tier for the whole step (whole: true).
    "gdn_breakdown": [
        ("experiment", "string", True), ("tier", "string", True), ("operator", "string", True),
        ("index", "integer", True), ("whole", "boolean", True), ("median_us", "number", True),
        ("ci95_lo_us", "number or null", False), ("ci95_hi_us", "number or null", False),
        ("bytes", "number", True), ("act_bytes", "number", True), ("weight_bytes", "number", False),
        ("state_bytes", "number", False), ("floor_us", "number or null", False), ("pct_floor", "number or null", False),
        ("share_of_step", "number or null", False), ("layers", "integer", False), ("launches", "integer", False),
        ("kernels", "integer", False), ("cold", "boolean", False), ("sum_of_operators_us", "number", False),
        ("projections", "string", False), ("timing", "object", False),
    ],
}
# gdn-stack-layers' record at one layer count is gdn-stack's record.
_FIELDS["gdn_stack_layers"] = _FIELDS["gdn_stack"]
# The report's own records (schema 2): the header (first line) and the closing record (last line).
SCHEMA_VERSIONS = (1, 2)
END_STATUSES = ("complete", "failed", "interrupted")
_HEADER_FIELDS = [("schema_version", "integer", True), ("env", "object", True), ("start", "string", False),
                  ("argv", "list of strings", False)]
_END_FIELDS = [("status", "string", True), ("records", "integer", True), ("counts", "object", False),
               ("error", "string", False), ("signal", "string", False), ("start", "string", False),
               ("end", "string", False)]
# What a record's "env" holds that the scripts read (checked when present).
_ENV_FIELDS = [
    ("ceiling", "object", False), ("ceiling.read_gbps", "number or null", False),
    ("ceiling.copy_gbps", "number or null", False), ("ceiling.kernel", "string", False),
    # "launch and stream" where both were measured (then "modes" holds each); a mode where one was.
    ("ceiling.mode", "string", False), ("ceiling.flush", "flush", False),
    ("ceiling.modes", "object", False), ("ceiling.modes.launch.read_gbps", "number or null", False),
    ("ceiling.modes.stream.read_gbps", "number or null", False),
    ("ceiling.modes.stream.copy_gbps", "number or null", False),
    ("ceiling.empty_kernel_us", "object", False), ("ceiling.empty_kernel_us.launch", "number or null", False),
    ("ceiling.empty_kernel_us.stream", "number or null", False),
    ("options", "object", False), ("options.modes", "list of modes", False), ("options.headline", "mode", False),
    ("options.flush", "flush", False),
]
# One entry of a measurement's "modes" object (the headline is one of them).
_MODE_FIELDS = [
    ("timing", "object", True), ("timing.median_ms", "number", True), ("timing.min_ms", "number", True),
    ("timing.max_ms", "number", True), ("timing.samples_ms", "list of numbers", False),
    ("timing.samples_clock_mhz", "list of numbers", False), ("timing.mode", "mode", False),
    ("timing.flush", "flush", False), ("timing.launches", "integer", False), ("timing.copies", "integer", False),
    ("gbps", "number or null", False), ("gmacs", "number or null", False), ("pct_ceiling", "number or null", False),
    ("pct_attainable", "number or null", False), ("attainable_gbps", "number or null", False),
    ("vs_a", "object", False), ("vs_a.ratio", "number or null", "vs_a"), ("vs_a.ci95_lo", "number or null", "vs_a"),
    ("vs_a.ci95_hi", "number or null", "vs_a"), ("vs_a.speedup", "number or null", "vs_a"),
    ("vs_a.verdict", "string", "vs_a"),
]
# One entry of a measurement's "tensors" (an op with named outputs other than a single "y").
_TENSOR_FIELDS = [
    ("name", "string", True), ("accuracy", "object", False), ("accuracy.max_rel", "number or null", False),
    ("accuracy.rms_rel", "number or null", False), ("hash", "string", False),
    ("bits_vs_a", "integer or null", False), ("bits_vs_prev", "integer or null", False),
]
CLAIM_STATES = ("held", "not_held", "not_evaluated")
# The GDN readback names in the order of the decode step (seed-digest section 3).
GDN_OPS = ("XC", "XCV", "Z", "Q", "K", "A", "B", "BETA", "G", "ON", "ONN", "OUT", "S", "HIST")
DISTS = ("uniform", "normal", "student-t", "outlier", "file")

_MISSING = object()


def get(record, dotted, default=None):
    """record["a"]["b"] for "a.b"; default when any step is absent (or not an object)."""
    cur = record
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return default
        cur = cur[part]
    return cur


def _check_fields(record, fields, where, what, prefix=""):
    """Each (dotted field, type, required) of `fields` in `record`; messages name prefix + field."""
    for field, typ, required in fields:
        value = get(record, field, _MISSING)
        name = _TYPE_NAMES.get(typ, typ)
        if value is _MISSING:
            if required is True or (isinstance(required, str) and get(record, required, _MISSING) is not _MISSING):
                raise ReportError(f"{where}: {what} lacks the field '{prefix}{field}' ({name})")
            continue
        if not _TYPES[typ](value):
            raise ReportError(f"{where}: {what}: field '{prefix}{field}' should be {name}, not {json.dumps(value)[:60]}")


def _check_modes(record, where):
    """A measurement's "modes": {mode: {timing, gbps, ...}}, keyed by launch or stream; an entry's
    timing.mode, when written, is its key."""
    for mode, entry in record["modes"].items():
        if mode not in MODES:
            raise ReportError(f"{where}: measurement record: 'modes' key '{mode}' should be one of {', '.join(MODES)}")
        if not isinstance(entry, dict):
            raise ReportError(f"{where}: measurement record: field 'modes.{mode}' should be object, not {json.dumps(entry)[:60]}")
        _check_fields(entry, _MODE_FIELDS, where, "measurement record", f"modes.{mode}.")
        if get(entry, "timing.mode", mode) != mode:
            raise ReportError(f"{where}: measurement record: 'modes.{mode}.timing.mode' is '{entry['timing']['mode']}', not its key '{mode}'")


def _check(record, where):
    kind = record["kind"]
    if "env" in record:
        if not isinstance(record["env"], dict):
            raise ReportError(f"{where}: {kind} record: field 'env' should be an object")
        _check_fields(record["env"], _ENV_FIELDS, where, f"{kind} record", "env.")
    _check_fields(record, _FIELDS.get(kind, []), where, f"{kind} record")
    if kind == "measurement":
        if "shape" not in record and "problem" not in record:
            raise ReportError(f"{where}: measurement record lacks the field 'problem' (string; or 'shape', in reports "
                              "from before named parameters)")
        if isinstance(record.get("modes"), dict):
            _check_modes(record, where)
        for i, t in enumerate(record.get("tensors") or []):
            _check_fields(t, _TENSOR_FIELDS, where, "measurement record", f"tensors[{i}].")
        if is_gdn_step(record):
            # Time per layer per token is the timing over params.tokens.
            _check_fields(record, [("params", "object", True), ("params.tokens", "positive integer", True)], where,
                          "gdn_step measurement record")
    cm = get(record, "env.ceiling.modes")
    if isinstance(cm, dict):
        for mode, entry in cm.items():
            if mode not in MODES or not isinstance(entry, dict):
                raise ReportError(f"{where}: {kind} record: 'env.ceiling.modes' should map {' or '.join(MODES)} to an object "
                                  f"holding read_gbps, not {json.dumps({mode: entry})[:60]}")
    if kind == "claim" and record["state"] not in CLAIM_STATES:
        raise ReportError(f"{where}: claim record: state '{record['state']}' is not one of {', '.join(CLAIM_STATES)}")


def report_file(path):
    """The .jsonl file of a report given as a directory (DIR/report.jsonl, or DIR/report.jsonl.gz: a
    committed report kept gzipped so that the tree stays small enough to travel to the GPU machine) or
    as the file (.jsonl or .jsonl.gz)."""
    p = Path(path)
    if p.is_dir():
        f = p / "report.jsonl"
        if not f.is_file() and (p / "report.jsonl.gz").is_file():
            return p / "report.jsonl.gz"
        if not f.is_file():
            raise ReportError(f"{p}: no report.jsonl (or report.jsonl.gz) in this directory (is it a klab report directory?)")
        return f
    if not p.exists():
        raise ReportError(f"{p}: no such report (give a report directory or its report.jsonl)")
    return p


class Report:
    def __init__(self, file, records, headers=(), ends=()):
        self.file = Path(file)
        self.dir = self.file.parent
        self.records = records          # the data records (header and end records apart, below)
        self.headers = list(headers)    # schema 2: one per run in the file (one, unless reports were joined)
        self.ends = list(ends)          # closing records, as {"record": end, "header": its header, "n": records between}
        self.cut = None                 # FILE:LINE of a last line cut short by a kill (left out), if any

    @property
    def schema_version(self):
        return max((h["schema_version"] for h in self.headers), default=1)

    def of(self, kind, experiment=None):
        return [r for r in self.records if r["kind"] == kind and (experiment is None or r.get("experiment") == experiment)]

    @property
    def env(self):
        """The environment of the run (the header's; schema 1: the first record's, every record of
        one run holds the same)."""
        if self.headers:
            return self.headers[0]["env"]
        for r in self.records:
            if isinstance(r.get("env"), dict):
                return r["env"]
        return {}

    def envs(self):
        """Distinct environments (by commit, date and device): more than one in a merged report."""
        seen, out = set(), []
        for e in [h["env"] for h in self.headers] + [r.get("env") for r in self.records]:
            if isinstance(e, dict):
                key = (e.get("git_commit"), e.get("date"), get(e, "device.name"))
                if key not in seen:
                    seen.add(key)
                    out.append(e)
        return out

    def experiments(self):
        """Experiment names in the order they first appear."""
        return list(dict.fromkeys(r["experiment"] for r in self.records if isinstance(r.get("experiment"), str)))

    def unknown_kinds(self):
        counts = {}
        for r in self.records:
            if r["kind"] not in _FIELDS:
                counts[r["kind"]] = counts.get(r["kind"], 0) + 1
        return counts

    def incomplete(self):
        """None when the report is whole; else why not, in words starting "incomplete (...)". A
        schema-1 report (no header) was written whole at the end of its run, so it is complete."""
        problems = []
        for h, run in self._runs():
            end, n = run["end"], run["n"]
            if end is None:
                started = f" (started {h['start']})" if isinstance(h.get("start"), str) else ""
                problems.append(f"incomplete (no closing record): the run{started} was killed or crashed after {n} records")
                continue
            e = end["record"]
            if e["status"] == "failed":
                problems.append(f"incomplete (the run failed after {n} records: {e.get('error', 'no error recorded')})")
            elif e["status"] == "interrupted":
                problems.append(f"incomplete (interrupted by {e.get('signal', 'a signal')} after {n} records)")
            if e["records"] != n:
                problems.append(f"incomplete (its closing record, {e['_where']}, counts {e['records']} records; "
                                f"the file holds {n} between the header and it)")
        if self.cut:
            problems.append(f"its last line, {self.cut}, is cut short (killed while writing it) and was left out")
        return "; ".join(problems) or None

    def _runs(self):
        """[(header, {"end": end or None, "n": data records after the header, up to its end})]."""
        out = []
        for h in self.headers:
            end = next((e for e in self.ends if e["header"] is h), None)
            out.append((h, {"end": end, "n": end["n"] if end else h["_n"]}))
        return out

    def status(self):
        """One line: where, schema, records by kind, complete or why not."""
        counts = {}
        for r in self.records:
            counts[r["kind"]] = counts.get(r["kind"], 0) + 1
        what = ", ".join(f"{k} {n}" for k, n in counts.items()) or "none"
        why = self.incomplete()
        if self.schema_version == 1:
            state = "complete (schema 1: written whole at the end of its run; no header or closing record)"
        else:
            state = why or "complete (closing record: " + ", ".join(e["record"]["status"] for e in self.ends) + ")"
        return f"{self.file}: schema {self.schema_version}; {len(self.records)} records ({what}); {state}"


def read_text(f):
    """A report file's text (.jsonl, or .jsonl.gz unpacked); raises ReportError naming what is wrong with it."""
    try:
        if f.name.endswith(".gz"):
            with gzip.open(f, "rt", encoding="utf-8") as z:
                return z.read()
        return f.read_text(encoding="utf-8")
    except (EOFError, gzip.BadGzipFile) as e:
        raise ReportError(f"{f}: not a whole gzip file ({e})") from None
    except UnicodeDecodeError as e:
        raise ReportError(f"{f}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise ReportError(f"{f}: cannot read: {e.strerror}") from None


def load(path):
    """Reads and checks a report; raises ReportError on a malformed line or an empty report."""
    f = report_file(path)
    text = read_text(f)
    records, headers, ends = [], [], []
    cut = None  # a last line cut short by a kill mid-write
    header = None  # the header of the run the records belong to (schema 2)
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{f}:{n}"
        try:
            r = json.loads(line)
        except json.JSONDecodeError as e:
            # A run killed mid-write can leave a last line cut short: say so rather than refuse it all.
            # It is left out, and the report says so (Report.incomplete()).
            last = not any(l.strip() for l in text.splitlines()[n:])
            if last and header is not None and not ends and not text.endswith("\n"):
                cut = where
                continue
            raise ReportError(f"{where}: malformed JSON: {e.msg} (column {e.colno})") from None
        if not isinstance(r, dict) or not isinstance(r.get("kind"), str):
            raise ReportError(f"{where}: not a record (a JSON object with a string \"kind\")")
        r["_where"] = where
        if r["kind"] == "header":
            _check_fields(r, _HEADER_FIELDS, where, "header record")
            if r["schema_version"] not in SCHEMA_VERSIONS:
                raise ReportError(f"{where}: header record: schema_version {r['schema_version']} is not one this reader "
                                  f"knows ({', '.join(map(str, SCHEMA_VERSIONS))}): a newer klab wrote it?")
            _check_fields(r["env"], _ENV_FIELDS, where, "header record", "env.")
            header = r
            header["_n"] = 0
            headers.append(r)
            continue
        if r["kind"] == "end":
            _check_fields(r, _END_FIELDS, where, "end record")
            if r["status"] not in END_STATUSES:
                raise ReportError(f"{where}: end record: status '{r['status']}' is not one of {', '.join(END_STATUSES)}")
            if header is None:
                raise ReportError(f"{where}: end record without a header record before it")
            if any(e["header"] is header for e in ends):
                raise ReportError(f"{where}: a second end record for the header at {header['_where']}")
            ends.append({"record": r, "header": header, "n": header["_n"]})
            continue
        _check(r, where)
        # Schema 2: the header's env on every record that has none (records appended after the end
        # record by peers/run.py --merge or scripts/profile_ncu.py carry their own).
        if header is not None and "env" not in r:
            r["env"] = header["env"]
        if header is not None and not any(e["header"] is header for e in ends):
            header["_n"] += 1
        records.append(r)
    if not records and not headers:
        raise ReportError(f"{f}: empty report (no records)")
    rep = Report(f, records, headers, ends)
    rep.cut = cut
    return rep


# ---- numbers --------------------------------------------------------------------------------

def is_finite(x):
    return _is_num(x) and math.isfinite(x)


def fmt_num(x, digits=3):
    """A value with `digits` significant digits, integers of 4+ digits in full; n/a for None."""
    if x is None:
        return "n/a"
    if not _is_num(x):
        return str(x)
    if not math.isfinite(x):
        return str(x)
    if x != 0 and abs(x) >= 10 ** digits:
        return f"{x:.0f}"
    return f"{x:.{digits}g}"


# A speed-up beside the interval of the time ratio, as the harness's claim evidence words it:
# "x0.983 (95% CI of time ratio 1.017..1.018, slower)".
_MIXED_CI = re.compile(r"((?:\bx|\bspeed-up )\d+(?:\.\d+)?) \(95% CI of time ratio (\d+(?:\.\d+)?)\.\.(\d+(?:\.\d+)?)")


def one_direction(text):
    """Claim evidence with every speed-up's interval in the speed-up's direction: "x0.983 (95% CI
    of time ratio 1.017..1.018, slower)" becomes "x0.983 (speed-up 95% CI x0.982..x0.983, slower)"
    (1/hi..1/lo of the time ratio's, from the 3 decimals the evidence gives). Anything else, a time
    ratio beside its own interval included, is left as it is."""
    def swap(m):
        lo, hi = float(m.group(2)), float(m.group(3))
        if lo <= 0 or hi <= 0:
            return m.group(0)
        return f"{m.group(1)} (speed-up 95% CI x{1 / hi:.3f}..x{1 / lo:.3f}"
    return _MIXED_CI.sub(swap, str(text))


def fmt_err(x):
    """An error figure in scientific notation (3.26e-03); exact zeros stay 0."""
    if x is None:
        return "n/a"
    if not _is_num(x) or not math.isfinite(x):
        return str(x)
    return "0" if x == 0 else f"{x:.2e}"


def timed(r):
    return isinstance(r.get("timing"), dict)


def median_ms(r):
    return get(r, "timing.median_ms") if timed(r) else None


def _pct(r, key, of):
    """r[key] where the record has it, else 100 * gbps / r[of] (None when neither can be had)."""
    p = r.get(key)
    if is_finite(p):
        return p
    g, c = r.get("gbps"), r.get(of)
    if is_finite(g) and is_finite(c) and c > 0:
        return 100.0 * g / c
    return None


def pct_ceiling(r):
    """% of the read ceiling measured in the record's run: pct_ceiling, else gbps / ceiling_gbps."""
    return _pct(r, "pct_ceiling", "ceiling_gbps")


def pct_attainable(r):
    """% of the size-matched read (exactly the op's bytes, same mode): pct_attainable, else
    gbps / attainable_gbps; None in reports from before the timing modes."""
    return _pct(r, "pct_attainable", "attainable_gbps")


def ceiling_by_mode(env):
    """{mode: read GB/s} of a run's ceiling: ceiling.modes where the run measured several, the
    one mode it names otherwise; "launch" for a report from before the timing modes."""
    c = env.get("ceiling") if isinstance(env, dict) else None
    if not isinstance(c, dict):
        return {}
    if isinstance(c.get("modes"), dict):
        return {m: e["read_gbps"] for m, e in c["modes"].items() if is_finite(get(e, "read_gbps"))}
    mode = c.get("mode", "launch")
    return {mode: c["read_gbps"]} if mode in MODES and is_finite(c.get("read_gbps")) else {}


def timing_mode(r):
    """The mode of a record's (headline) timing: timing.mode, "launch" in reports from before the
    modes; None when the record was not timed."""
    if not timed(r):
        return None
    m = r["timing"].get("mode")
    return m if isinstance(m, str) else "launch"


def has_modes(r):
    """Whether the record was written by a harness with timing modes (it says which it used)."""
    return isinstance(get(r, "timing.mode"), str) or isinstance(r.get("modes"), dict)


def mode_views(r):
    """[(mode, view)] of a measurement, the headline first, then the other modes (launch, stream,
    then others by name). A view holds timing, gbps, gmacs, pct_ceiling, pct_attainable,
    attainable_gbps and vs_a for its mode: the headline's view is the record itself (its
    top-level fields are the headline's), the others are entries of `modes`. An old record
    (no modes) gives [("launch", record)]; an untimed one gives []."""
    head = timing_mode(r)
    if head is None:
        return []
    views = [(head, r)]
    modes = r.get("modes")
    if isinstance(modes, dict):
        others = sorted((m for m in modes if m != head and isinstance(modes[m], dict)),
                        key=lambda m: (MODES.index(m) if m in MODES else len(MODES), m))
        views += [(m, modes[m]) for m in others if timed(modes[m])]
    return views


def mode_view(r, mode):
    """The view of one mode (as in mode_views), or None when the record has no timing in it."""
    return next((v for m, v in mode_views(r) if m == mode), None)


def mode_label(timing, with_flush=True):
    """A timing's mode in words: "stream, K=8, 3 copies" (K launches per graph over 3 rotating
    input copies), "launch"; ", no flush" under --hot. "launch" for an old timing."""
    mode = timing.get("mode") if isinstance(timing.get("mode"), str) else "launch"
    parts = [mode]
    if isinstance(timing.get("launches"), int):
        parts.append(f"K={timing['launches']}")
    if isinstance(timing.get("copies"), int):
        parts.append(f"{timing['copies']} copies")
    if with_flush and timing.get("flush") == "none":
        parts.append("no flush")
    return ", ".join(parts)


def kept_samples(timing, throttle_share=0.90):
    """The repetitions the harness kept: samples_ms without those whose SM clock was below 90% of
    the run's highest (harness/src/timing.cu), all of them if fewer than half would remain."""
    ms = [x for x in (timing.get("samples_ms") or []) if is_finite(x)]
    clk = timing.get("samples_clock_mhz") or []
    if not ms or len(clk) != len(ms) or not all(is_finite(c) for c in clk):
        return ms
    top = max(clk)
    kept = [t for t, c in zip(ms, clk) if c >= throttle_share * top]
    return kept if 2 * len(kept) >= len(ms) else ms


def quantile_sorted(s, q):
    """Linear interpolation between order statistics of a sorted list (as harness/src/stats.cpp)."""
    pos = q * (len(s) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(s) - 1)
    f = pos - lo
    return s[lo] * (1 - f) + s[hi] * f


def median(xs):
    return statistics.median(xs) if xs else None


# ---- names ----------------------------------------------------------------------------------

def slug(s):
    return re.sub(r"[^a-z0-9]+", "-", str(s).lower()).strip("-") or "x"


def chart_name(prefix, experiment, *parts):
    """prefix-EXPERIMENT[-PART...], without repeating a prefix the experiment name holds."""
    e = slug(experiment)
    head = e if prefix in e else f"{prefix}-{e}"
    return "-".join([head] + [slug(p) for p in parts if p])


def short_variant(r):
    """The variant's name without its "op/" prefix."""
    name = r["variant"]
    op = r.get("op")
    if op and name.startswith(op + "/"):
        return name[len(op) + 1:]
    return name.split("/", 1)[1] if "/" in name else name


def problem_of(r):
    """The problem of a measurement: its "problem" (Problem::key(): "17408x5120" for a mat-vec,
    "ck=4,dk=128,...,tokens=16,weights=1" for an op with its own parameters), else its "shape"
    (reports from before named parameters). A mat-vec's problem is its shape, so old and new
    reports give the same key."""
    p = r.get("problem")
    return p if isinstance(p, str) else r.get("shape", "")


def has_shape(r):
    return isinstance(r.get("shape"), str)


def params_of(r):
    """The problem's named parameters: "params", else {m, k} of an old record's shape."""
    p = r.get("params")
    if isinstance(p, dict):
        return p
    return {k: r[k] for k in ("m", "k") if isinstance(r.get(k), int)}


def problem_label(r, with_dist=True):
    return f"{problem_of(r)} {r['dist']}" if with_dist else problem_of(r)


def split_problem(problem):
    """'ck=4,dk=128' -> [('ck', '4'), ('dk', '128')]; a shape ('64x64') or a shape first
    ('64x64,batch=8') gives ('', '64x64') for it."""
    out = []
    for part in str(problem).split(","):
        name, eq, value = part.partition("=")
        out.append((name, value) if eq else ("", part))
    return out


def varying_params(problems):
    """{problem: short label} for a set of problems: shapes as they are; problems with named
    parameters by the parameters whose values differ among them (all of them when one problem)."""
    problems = list(dict.fromkeys(problems))
    parsed = {p: split_problem(p) for p in problems}
    values = {}
    for p in problems:
        for name, value in parsed[p]:
            values.setdefault(name, set()).add(value)
    vary = {n for n, v in values.items() if len(v) > 1 or n == ""}
    out = {}
    for p in problems:
        parts = [(n, v) for n, v in parsed[p] if n in vary] or parsed[p]
        out[p] = ",".join(v if n == "" else f"{n}={v}" for n, v in parts)
    return out


def group(records, key):
    """Records grouped by key(record), groups and members in file order."""
    out = {}
    for r in records:
        out.setdefault(key(r), []).append(r)
    return out


def problem_key(r):
    return (r.get("op") or "", problem_of(r), r["dist"])


# ---- ladders --------------------------------------------------------------------------------

def is_ladder(experiment):
    return "ladder" in experiment


def ladder_rungs(records):
    """The rungs of one ladder (the measurement records of one problem, in file order) with what
    each gave: speed-up over its previous rung and over rung 0 (ratios of median times), and
    whether it changed bits against the previous rung (reports/SCHEMA.md, "Ladders")."""
    rungs = []
    by_name = {}
    for i, r in enumerate(records):
        prev = None
        if i > 0:
            prev = rungs[-1]
            if isinstance(r.get("prev"), str):
                prev = by_name.get(r["prev"])
                if prev is None:
                    raise ReportError(f"{r.get('_where', 'report')}: ladder rung {r['variant']}: 'prev' names "
                                      f"'{r['prev']}', which is not an earlier rung of this ladder")
        t, t0 = median_ms(r), median_ms(records[0])
        tp = median_ms(prev["record"]) if prev else None
        if "bits_vs_prev" in r:
            bits, bits_from = r["bits_vs_prev"], "bits_vs_prev"
        elif i == 1 and r.get("a") == records[0]["variant"] and "bits_vs_a" in r:
            bits, bits_from = r["bits_vs_a"], "bits_vs_a"
        else:
            bits, bits_from = None, None
        axes, paxes = r.get("axes") or {}, (prev["record"].get("axes") or {}) if prev else {}
        changed = [f"{k}={v}" for k, v in axes.items() if prev and paxes.get(k) != v]
        rung = {
            "index": i,
            "record": r,
            "variant": r["variant"],
            "prev": prev["variant"] if prev else None,
            "changed": changed,
            "speedup_prev": (tp / t) if prev and is_finite(tp) and is_finite(t) and t > 0 else None,
            "speedup_first": (t0 / t) if is_finite(t0) and is_finite(t) and t > 0 else None,
            "bits_vs_prev": bits if prev else None,
            "bits_from": bits_from if prev else None,
        }
        rungs.append(rung)
        by_name[r["variant"]] = rung
    return rungs


def bits_label(rung):
    if rung["prev"] is None:
        return "(rung 0)"
    b = rung["bits_vs_prev"]
    if b is None:
        return "not recorded"
    return "bitwise equal" if b == 0 else f"{b} elements changed"


def ladders(report):
    """{(experiment, op, problem, dist): rungs} for every ladder experiment."""
    out = {}
    for e in report.experiments():
        if not is_ladder(e):
            continue
        for key, recs in group(report.of("measurement", e), problem_key).items():
            out[(e,) + key] = ladder_rungs(recs)
    return out


# ---- the GDN step (op gdn_step) -------------------------------------------------------------
# Schema 1 wrote the GDN step's times as kinds of their own (gdn_timing, gdn_q4_variant,
# gdn_roundtrip); since named parameters they are measurement records of op gdn_step, one layer over
# params.tokens tokens: time per layer and token = the timing / tokens, the tier and the round trip
# from the variant's axes (reports/SCHEMA.md).

GDN_STEP_OP = "gdn_step"
# The round trip of a gdn_step variant, from its "api" axis, named as gdn_timing's "mode": T
# host-facing steps (a copy in, a copy out and a sync per token), GdnDevice::run (one of each per run
# of T tokens), or the device-resident run alone (no api axis).
ROUND_TRIPS = {"host": "host-facing", "run": "device-run", None: "device-resident"}
ROUND_TRIP_ORDER = ("host-facing", "device-run", "device-resident")
TIER_ORDER = ("f32", "q4")


def is_gdn_step(r):
    return r.get("op") == GDN_STEP_OP or str(r.get("variant", "")).startswith(GDN_STEP_OP + "/")


def variant_axes(r):
    """The variant's axes: "axes", else parsed from its name ("op/a=1,b=2"; a value may hold '=')."""
    axes = r.get("axes")
    if isinstance(axes, dict):
        return {str(k): str(v) for k, v in axes.items()}
    out = {}
    for part in short_variant(r).split(","):
        k, eq, v = part.partition("=")
        if eq:
            out[k] = v
    return out


def round_trip_order(mode):
    return (ROUND_TRIP_ORDER.index(mode), mode) if mode in ROUND_TRIP_ORDER else (len(ROUND_TRIP_ORDER), mode)


def tier_order(tier):
    return (TIER_ORDER.index(tier), tier) if tier in TIER_ORDER else (len(TIER_ORDER), tier)


def _per_layer_token(view, n):
    t = view["timing"]
    return {"timing": t, "median": t["median_ms"] / n, "min": t["min_ms"] / n, "max": t["max_ms"] / n,
            "samples": [x / n for x in kept_samples(t)], "gbps": view.get("gbps"), "pct_ceiling": pct_ceiling(view),
            "pct_attainable": pct_attainable(view), "vs_a": view.get("vs_a")}


def gdn_step_rows(records):
    """The gdn_step measurements among `records`, in file order, as dicts: record, experiment,
    variant, tier, mode (the round trip: host-facing, device-run, device-resident), projections (the
    q4 kernel, the proj axis; None for f32), options (the step's other axes, e.g. "prep=fused,
    rec=impl=fused+cols=16+rows=8+pdl=on"; "" for the plain step), tokens, layers (1), problem, dist, bytes_per_step (the
    op's bytes / tokens), headline (timing mode) and views: {timing mode: {median, min, max (ms per
    layer and token), samples (kept repetitions, per layer and token), gbps, pct_ceiling,
    pct_attainable, vs_a, timing}} ({} when not timed)."""
    rows = []
    for r in records:
        if r.get("kind") != "measurement" or not is_gdn_step(r):
            continue
        axes, params = variant_axes(r), params_of(r)
        tokens = params["tokens"]
        layers = params.get("layers", 1) if isinstance(params.get("layers"), int) and params.get("layers", 1) > 0 else 1
        api = axes.get("api")
        n = tokens * layers
        rows.append({
            "record": r, "experiment": r["experiment"], "variant": r["variant"], "tier": axes.get("tier", "n/a"),
            "mode": ROUND_TRIPS.get(api, f"api={api}"), "projections": axes.get("proj"),
            "options": ", ".join(f"{a}={v}" for a, v in axes.items() if a not in ("tier", "api", "proj")), "tokens": tokens, "layers": layers,
            "problem": problem_of(r), "dist": r["dist"],
            "bytes_per_step": r["bytes"] / n if is_finite(r.get("bytes")) else None,
            "headline": timing_mode(r), "views": {m: _per_layer_token(v, n) for m, v in mode_views(r)},
        })
    return rows


def q4_kernel_rows(rows):
    """The q4 tier's device-resident runs of the plain step (no other option), one per q4 mat-vec
    kernel inside it."""
    return [s for s in rows if s["tier"] == "q4" and s["projections"] and s["mode"] == "device-resident" and not s["options"]]


def gdn_tier_rows(rows):
    """Per tier and round trip, one row (the schema-1 gdn_timing table): every row but the q4
    device-resident ones beyond the first of each problem (the race's own q4 kernel: gdn-q4-layer
    races its default second, after the f32 tier), sorted by problem, tier and round trip."""
    seen, out = set(), []
    for s in rows:
        key = (s["problem"], s["dist"], s["tier"], s["mode"])
        if key in seen:
            continue
        seen.add(key)
        out.append(s)
    problems = list(dict.fromkeys((s["problem"], s["dist"]) for s in out))
    return sorted(out, key=lambda s: (problems.index((s["problem"], s["dist"])), tier_order(s["tier"]), round_trip_order(s["mode"])))


def gdn_common_mode(rows, prefer="launch"):
    """The timing mode to show a set of GDN step rows in, so that they compare like with like:
    `prefer` when every timed row has it (launch: the host-facing API has no stream timing, and the
    round-trip claims are launch), else the mode most rows have as their headline."""
    timed = [s for s in rows if s["views"]]
    if not timed:
        return None
    if all(prefer in s["views"] for s in timed):
        return prefer
    heads = [s["headline"] for s in timed]
    return max(dict.fromkeys(heads), key=heads.count)


def gdn_view(s, mode):
    """(mode, view) of a GDN step row in `mode`, else in its headline (None, None when not timed)."""
    if mode in s["views"]:
        return mode, s["views"][mode]
    if s["headline"] in s["views"]:
        return s["headline"], s["views"][s["headline"]]
    return None, None


# ---- the figures a report gives -------------------------------------------------------------

def accuracy_in_one_decade(records):
    """(lowest, highest) max_rel of the records when every one is a positive finite number and the
    highest is less than 10x the lowest (bars of one height on a log axis: a table shows them
    better than a figure); None otherwise (an exact 0, a missing or non-finite max_rel, a spread)."""
    vals = [get(r, "accuracy.max_rel") for r in records]
    if not vals or not all(is_finite(v) and v > 0 for v in vals):
        return None
    lo, hi = min(vals), max(vals)
    return (lo, hi) if hi < 10 * lo else None


def chart_plan(report):
    """The figures plot.py draws for this report, as (name, kind, experiment, payload) tuples,
    and the notes that say which figures have no records to draw from."""
    plan, notes = [], []
    meas = report.of("measurement")
    if not meas:
        notes.append("no measurement records: no bandwidth, accuracy or ladder figure")
    for e in report.experiments():
        em = report.of("measurement", e)
        if not em:
            continue
        if any(timed(r) for r in em):
            plan.append((chart_name("bandwidth", e), "bandwidth", e, em))
        else:
            notes.append(f"{e}: no timed measurement: no bandwidth figure")
        flat = accuracy_in_one_decade(em)
        if flat:
            notes.append(f"{e}: every max_rel lies within one decade ({fmt_err(flat[0])}..{fmt_err(flat[1])}): "
                         "no accuracy figure, a table in summary.md instead")
        elif any(is_finite(get(r, "accuracy.max_rel")) for r in em):
            plan.append((chart_name("accuracy", e), "accuracy", e, em))
        else:
            notes.append(f"{e}: no accuracy.max_rel: no accuracy figure")
        if is_ladder(e):
            groups = group(em, problem_key)
            dists = {k[2] for k in groups}
            for (op, problem, dist), recs in groups.items():
                rungs = ladder_rungs(recs)
                if len(rungs) < 2 or not any(r["speedup_prev"] is not None for r in rungs):
                    notes.append(f"{e} {problem} {dist}: fewer than two timed rungs: no ladder figure")
                    continue
                plan.append((chart_name("ladder", e, problem, dist if len(dists) > 1 else ""), "ladder", e, rungs))
        # The GDN step (op gdn_step): time per layer and token by tier and round trip, and every q4
        # kernel inside the step (the figures the schema-1 kinds gdn_timing and gdn_q4_variant gave).
        steps = gdn_step_rows(em)
        if any(s["views"] for s in steps):
            plan.append((chart_name("gdn-timing", e), "gdn_step", e, steps))
            q4 = q4_kernel_rows(steps)
            if len({s["projections"] for s in q4}) > 1:
                plan.append((chart_name("gdn-q4-kernels", e), "gdn_q4_kernels", e, steps))
    if not any(is_ladder(e) for e in report.experiments()):
        notes.append("no ladder experiment (name containing 'ladder'): no seed-ladder figure")
    for kind, prefix, what in (("error_budget", "error-budget", "error-budget"), ("gdn_timing", "gdn-timing", "GDN timing")):
        recs = report.of(kind)
        if not recs:
            notes.append(f"no {kind} records: no {what} figure")
        for e, er in group(recs, lambda r: r["experiment"]).items():
            plan.append((chart_name(prefix, e), kind, e, er))
    for e, er in group(report.of("gdn_breakdown"), lambda r: r["experiment"]).items():
        plan.append((chart_name("step-breakdown", e), "gdn_breakdown", e, er))
    for e, er in group(report.of("state_drift"), lambda r: r["experiment"]).items():
        plan.append((chart_name("state-drift", e), "state_drift", e, er))
    ops = report.of("gdn_op")
    if not ops:
        notes.append("no gdn_op records: no GDN per-operator figure")
    for (e, fixture, pair), recs in group(ops, lambda r: (r["experiment"], r["fixture"], r["pair"])).items():
        plan.append((chart_name("gdn-ops", e, fixture, pair), "gdn_op", e, recs))
    # Names must be distinct (two shapes or fixtures may slug alike).
    seen = {}
    unique = []
    for name, kind, e, payload in plan:
        n = seen.get(name, 0)
        seen[name] = n + 1
        unique.append((name if n == 0 else f"{name}-{n + 1}", kind, e, payload))
    return unique, notes


def breakdown_tiers(records):
    """gdn_breakdown records by tier (f32 first, then q4, then others, in file order): each as
    (operators in step order, the whole-step record or None)."""
    out = {}
    for tier, rs in sorted(group(records, lambda r: r["tier"]).items(), key=lambda kv: tier_order(kv[0])):
        out[tier] = (sorted((r for r in rs if not r["whole"]), key=lambda r: r["index"]), next((r for r in rs if r["whole"]), None))
    return out


def gdn_op_order(op):
    return (GDN_OPS.index(op), op) if op in GDN_OPS else (len(GDN_OPS), op)


def dist_order(d):
    return (DISTS.index(d), d) if d in DISTS else (len(DISTS), d)


def write_atomically(path, text):
    """Writes text to a temporary file beside path, then renames it over path; a failed write leaves no temporary file."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def main(argv=None):
    import argparse
    import sys
    ap = argparse.ArgumentParser(description="Says whether a klab report is complete (one line).")
    ap.add_argument("report", help="report directory or its report.jsonl")
    ap.add_argument("--require-complete", action="store_true", help="exit 1 when the report is not complete")
    a = ap.parse_args(argv)
    try:
        rep = load(a.report)
    except ReportError as e:
        print(f"klab_report.py: {e}", file=sys.stderr)
        return 2
    print(rep.status())
    return 1 if a.require_complete and rep.incomplete() else 0


if __name__ == "__main__":
    raise SystemExit(main())
