#!/usr/bin/env python3
"""Writes tests/scripts/data/gdn-step/report.jsonl: a schema-2 report in the format of a klab with
named parameters (reports/SCHEMA.md; harness/src/race.cpp to_json(Measured)), built by hand. It is
test data, not a measurement: the GPU is "FIXTURE GPU (test data)" and every time is chosen so that
the figures the tests expect can be worked out by hand (per layer and token = the run's time / 16
tokens; the derivations are in tests/scripts/test_gdn_step.py).

    /usr/bin/python3 tests/scripts/data/make_gdn_step.py     (rewrites the file; deterministic)

Records, in the order klab writes them:
  header (schema 2; ceiling stream 4000, launch 3900 GB/s; modes launch and stream, headline stream)
  f32-gemv-vs-cublas: two mat-vec measurements at 64x64 (shape, m, k, params {k, m}, problem "64x64")
  gdn-q4-layer: op gdn_step on the q4 weights (params weights=1, tokens=16), outlier inputs: the f32
    tier (A), the q4 tier on its default kernel, the same through the host-facing API (launch only),
    three other q4 kernels (one rounding on purpose, with its tolerance; one failing verification,
    not timed), a skip (weights=0), five claims
  gdn-roundtrip: op gdn_step on the f32 weights (weights=0): api=host (A, launch only), api=run
    (launch only), the device-resident run; three claims
  end (complete)
"""
import json
import zlib
from pathlib import Path

OUT = Path(__file__).resolve().parent / "gdn-step" / "report.jsonl"

CEIL = {"launch": 3900.0, "stream": 4000.0}
ATTAIN = {"launch": 3600.0, "stream": 3800.0}
ENV = {
    "device": {"name": "FIXTURE GPU (test data)", "sm_count": 132, "l2_bytes": 62914560, "compute_capability": "9.0",
               "driver_version": 13000, "runtime_version": 13000, "theoretical_gbps": 4800.0},
    "ceiling": {"read_gbps": 4000.0, "copy_gbps": 3600.0, "mode": "launch and stream", "flush": "read",
                "modes": {"launch": {"read_gbps": 3900.0}, "stream": {"read_gbps": 4000.0}},
                "empty_kernel_us": {"launch": 2.5, "stream": 0.75}, "kernel": "read: fixture"},
    "git_commit": "f8d4d84000000000000000000000000000000000", "git_dirty": False, "date": "2026-12-01T06:00:00Z",
    "command": "klab run gdn-q4-layer gdn-roundtrip f32-gemv-vs-cublas --out reports/fixture",
    "options": {"reps": 5, "warmup": 2, "seed": 1, "l2_cold": True, "quick": False, "flush": "read",
                "modes": ["launch", "stream"], "headline": "stream"},
}
GEOMETRY = {"ck": 4, "dk": 128, "dv": 128, "hidden": 5120, "nk": 16, "nv": 48}
TOKENS = 16
# Bytes a perfect step of one layer moves per token (the op's byte model, as the H200 report's):
# the big three as q4 codes and f16 scales (weights=1) or f32 (weights=0), small weights, S and hist.
BYTES_PER_TOKEN = {1: 73548672, 0: 470041472}
MACS_PER_TOKEN = 118235136
SPREAD = (0.995, 0.9975, 1.0, 1.0025, 1.005)  # samples = median x these: min 0.995, max 1.005 x median
TENSORS = (("out", TOKENS * 5120), ("S", 48 * 128 * 128), ("hist", 3 * 10240), ("q", 2048), ("k", 2048),
           ("beta", 48), ("g", 48), ("onn", 6144))


def fake_hash(*parts):
    """0x + 16 hex digits, deterministic in its parts (not an FNV of real data: test data)."""
    a = zlib.crc32(repr(parts).encode())
    b = zlib.crc32(repr(parts[::-1]).encode() + b"klab")
    return f"0x{a:08x}{b:08x}"


def timing(mode, median):
    t = {"median_ms": median, "min_ms": median * SPREAD[0], "max_ms": median * SPREAD[-1], "mean_ms": median,
         "p10_ms": median * 0.996, "p90_ms": median * 1.004, "n": 5, "mode": mode, "flush": "read", "reps": 5,
         "kept": 5, "throttled": 0, "clock_mhz": 1980.0, "l2_cold": True,
         "samples_ms": [median * f for f in SPREAD], "samples_clock_mhz": [1980.0] * 5}
    if mode == "stream":
        t.update(launches=8, copies=3)
    return t


def vs(ratio):
    """A vs_a object: the interval 1% either side of the ratio, the harness's 1% verdict rule."""
    lo, hi = ratio * 0.99, ratio * 1.01
    verdict = "faster" if hi < 0.99 else "slower" if lo > 1.01 else "same"
    return {"ratio": ratio, "ci95_lo": lo, "ci95_hi": hi, "speedup": 1 / ratio, "verdict": verdict}


def mode_entry(mode, median, bytes_, macs, a_median=None):
    gbps = bytes_ / (median * 1e-3) / 1e9
    e = {"timing": timing(mode, median), "gbps": gbps, "gmacs": macs / (median * 1e-3) / 1e9,
         "pct_ceiling": 100.0 * gbps / ENV["ceiling"]["read_gbps"], "pct_attainable": 100.0 * gbps / ATTAIN[mode],
         "attainable_gbps": ATTAIN[mode], "attainable_pdl": False}
    if a_median is not None:
        e["vs_a"] = vs(median / a_median)
    return e


def gdn_step(experiment, axes, weights, times, a, a_times, errs, bits, *, verified=True, tolerance=1e-4, unavailable=None):
    """A measurement of op gdn_step. times: {mode: ms per run of 16 tokens}; errs: max_rel per
    tensor (the same for all when a number); bits: elements differing from A per tensor (None: this
    is A)."""
    params = dict(GEOMETRY, tokens=TOKENS, weights=weights)
    problem = ",".join(f"{k}={v}" for k, v in sorted(params.items()))
    variant = "gdn_step/" + ",".join(f"{k}={v}" for k, v in axes)
    bytes_, macs = TOKENS * BYTES_PER_TOKEN[weights], TOKENS * MACS_PER_TOKEN
    tensors = []
    for i, (name, n) in enumerate(TENSORS):
        e = errs if isinstance(errs, float) else errs[i]
        t = {"name": name, "accuracy": {"n": n, "max_abs": e * 3.5, "max_rel": e, "rms_rel": e / 4, "nmse": (e / 4) ** 2,
                                        "max_ref": 3.5, "nan": 0, "inf": 0, "unwritten": 0},
             "hash": fake_hash(variant, weights, name)}
        if bits is not None:
            t["bits_vs_a"] = bits if isinstance(bits, int) else bits[i]
        tensors.append(t)
    worst = max(tensors, key=lambda t: t["accuracy"]["max_rel"])["accuracy"]
    r = {"kind": "measurement", "experiment": experiment, "op": "gdn_step", "variant": variant, "peer": False,
         "axes": dict(axes), "params": params, "problem": problem, "dist": "outlier", "seed": 1, "accuracy": worst,
         "tensors": tensors, "verified": verified, "tolerance": tolerance, "a": a,
         "bits_vs_a": None if bits is None else sum(t["bits_vs_a"] for t in tensors),
         "input_hash": fake_hash("inputs", problem), "output_hash": fake_hash(variant, problem),
         "bytes": float(bytes_), "macs": float(macs)}
    if times:
        head = "stream" if "stream" in times else "launch"
        r["modes"] = {m: mode_entry(m, ms, bytes_, macs, None if bits is None else a_times.get(m)) for m, ms in times.items()}
        for k, v in r["modes"][head].items():
            r[k] = v
        r["ceiling_gbps"] = ENV["ceiling"]["read_gbps"]
    if unavailable:
        r["stream_unavailable"] = unavailable
    return r


def matvec(variant, times, a, a_times, bits):
    bytes_, macs = 64 * 64 * 4 + 64 * 4 * 2, 64 * 64
    r = {"kind": "measurement", "experiment": "f32-gemv-vs-cublas", "op": "f32_gemv", "variant": variant, "peer": "cublas" in variant,
         "axes": {"impl": variant.split("impl=")[1].split(",")[0]}, "shape": "64x64", "m": 64, "k": 64,
         "params": {"k": 64, "m": 64}, "problem": "64x64", "dist": "uniform", "seed": 1,
         "accuracy": {"n": 64, "max_abs": 1e-6, "max_rel": 1.2e-7, "rms_rel": 4e-8, "nmse": 1.6e-15, "max_ref": 8.0, "nan": 0,
                      "inf": 0, "unwritten": 0},
         "verified": True, "tolerance": 1e-5, "a": a, "bits_vs_a": bits, "bytes": float(bytes_), "macs": float(macs)}
    r["modes"] = {m: mode_entry(m, ms, bytes_, macs, None if bits is None else a_times[m]) for m, ms in times.items()}
    r.update(r["modes"]["stream"])
    r["ceiling_gbps"] = ENV["ceiling"]["read_gbps"]
    return r


def claim(experiment, index, cid, text, state, evidence):
    return {"kind": "claim", "experiment": experiment, "index": index, "id": cid, "text": text, "state": state, "evidence": evidence}


def records():
    out = []
    # f32-gemv-vs-cublas: a mat-vec in the new format (shape and problem both "64x64").
    wr1, wr4 = "f32_gemv/impl=warp-row,unroll=1", "f32_gemv/impl=warp-row,unroll=4"
    t1 = {"stream": 0.004, "launch": 0.006}
    out.append(matvec(wr1, t1, wr1, None, None))
    out.append(matvec(wr4, {"stream": 0.003, "launch": 0.005}, wr1, t1, 0))

    # gdn-q4-layer, weights=1. Per layer and token (/16): f32 stream 0.15, launch 0.16; q4 default
    # stream 0.07, launch 0.076; host-facing launch 0.096; per-lane stream 0.1, launch 0.11; f16x2
    # stream 0.065, launch 0.072.
    e = "gdn-q4-layer"
    A = "gdn_step/tier=f32"
    f32 = {"stream": 2.4, "launch": 2.56}
    q4_errs = [3.4e-6, 2.0e-6, 1.0e-6, 5.0e-7, 5.0e-7, 0.0, 0.0, 8.0e-7]
    q4_bits = [81000, 700000, 30000, 2000, 2000, 0, 0, 6000]
    default = (("tier", "q4"), ("proj", "map=block-per-thread+dot=offset+rows=8"))
    out.append(gdn_step(e, (("tier", "f32"),), 1, f32, A, None, 2.1e-6, None))
    out.append(gdn_step(e, default, 1, {"stream": 1.12, "launch": 1.216}, A, f32, q4_errs, q4_bits))
    out.append(gdn_step(e, (("tier", "q4"), ("api", "host")), 1, {"launch": 1.536}, A, f32, q4_errs, q4_bits,
                        unavailable="the host-facing step copies to the host and synchronises per token: not capturable in a CUDA graph"))
    out.append(gdn_step(e, (("tier", "q4"), ("proj", "scale=per-lane+chains=4+f16=hard+rows=1")), 1, {"stream": 1.6, "launch": 1.76},
                        A, f32, q4_errs, q4_bits))
    out.append(gdn_step(e, (("tier", "q4"), ("proj", "map=block-per-thread+dot=f16x2+rows=8")), 1, {"stream": 1.04, "launch": 1.152},
                        A, f32, 6.0e-4, 90000, tolerance=2e-3))
    out.append(gdn_step(e, (("tier", "q4"), ("proj", "map=warp-row+dot=offset")), 1, None, A, f32, 0.5, 80000, verified=False))
    out.append({"kind": "skip", "experiment": e,
                "what": "gdn-q4-layer on ck=4,dk=128,dv=128,hidden=5120,nk=16,nv=48,tokens=16,weights=0/outlier/seed=1",
                "reason": "the tiers race on the q4 weights (weights=1)"})
    key = "ck=4,dk=128,dv=128,hidden=5120,nk=16,nv=48,tokens=16,weights=1"
    out += [
        claim(e, 0, "q4-faster", "the q4 tier is faster than the f32 tier per layer per token, device-resident (the seed, RTX 5090: f32 "
              "0.40-0.47 ms, q4 0.156 ms)", "held", f"{key}: stream mode, per layer per token: f32 0.1500 ms, q4 0.0700 ms, x2.14 faster"),
        claim(e, 1, "step-run-bitwise", "host-facing steps and one device-resident run give bitwise equal q4 outputs", "held",
              f"{key}: 0/907488 elements (out, S, hist, intermediates) differ between 16 host-facing steps and one device-resident run"),
        claim(e, 2, "round-trip-cost", "the host round trip of the q4 tier costs under 0.05 ms per layer per token (the seed: 0.01-0.04 ms)",
              "held", f"{key}: launch mode: host-facing 0.0960 ms - device-resident 0.0760 ms = 0.0200 ms per layer per token"),
        claim(e, 3, "families-bitwise", "inside the GDN step, q4_gemv variants that differ only in axes documented to change no bit "
              "(scale read, f16 conversion, rows per warp) give bitwise equal layer outputs", "not_evaluated", "no two verified kernels of one family"),
        claim(e, 4, "default-fastest-exact", "the default q4 variant (kDefaultQ4Variant) is the fastest exact one (f32 arithmetic, no "
              "declared tolerance) inside the GDN step, or within 2% of it", "held",
              f"{key}: default q4_gemv/map=block-per-thread,dot=offset,rows=8 0.0700 ms; fastest exact the same 0.0700 ms per layer per token"),
    ]

    # gdn-roundtrip, weights=0. Launch per layer and token: host-facing 0.18, device-run 0.164,
    # device-resident 0.16 (stream 0.15).
    e = "gdn-roundtrip"
    H = "gdn_step/tier=f32,api=host"
    host = {"launch": 2.88}
    out.append(gdn_step(e, (("tier", "f32"), ("api", "host")), 0, host, H, None, 2.2e-6, None,
                        unavailable="the host-facing step copies to the host and synchronises per token: not capturable in a CUDA graph"))
    out.append(gdn_step(e, (("tier", "f32"), ("api", "run")), 0, {"launch": 2.624}, H, host, 2.2e-6, 0,
                        unavailable="GdnDevice::run copies to the host and synchronises: not capturable in a CUDA graph"))
    out.append(gdn_step(e, (("tier", "f32"),), 0, {"stream": 2.4, "launch": 2.56}, H, host, 2.2e-6, 0))
    key = "ck=4,dk=128,dv=128,hidden=5120,nk=16,nv=48,tokens=16,weights=0"
    out += [
        claim(e, 0, "bitwise", "host-facing step and device-resident run give bitwise equal outputs, final state and OUT over T tokens", "held",
              f"{key}: elements differing from the host-facing steps (out, S, hist, intermediates): run 0, device-resident 0, over 16 tokens"),
        claim(e, 1, "round-trip-cost", "the host round trip costs under 0.05 ms per layer per token (seed, RTX 5090: 0.01-0.04 ms)", "held",
              f"{key}: launch mode: host-facing 0.1800 ms - device-resident run 0.1640 ms = 0.0160 ms per layer per token"),
        claim(e, 2, "run-faster", "the device-resident run is faster than the host-facing step", "held",
              f"{key}: device-resident run against host-facing steps: x1.10 faster"),
    ]
    return out


def main():
    recs = records()
    header = {"kind": "header", "schema_version": 2, "env": ENV, "argv": ENV["command"].split(), "start": ENV["date"]}
    counts = {}
    for r in recs:
        counts[r["kind"]] = counts.get(r["kind"], 0) + 1
    end = {"kind": "end", "status": "complete", "records": len(recs), "counts": counts, "start": ENV["date"], "end": "2026-12-01T06:04:00Z"}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in [header] + recs + [end]), encoding="utf-8")
    print(f"make_gdn_step.py: {OUT} ({len(recs) + 2} records)")


if __name__ == "__main__":
    main()
