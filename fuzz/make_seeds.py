#!/usr/bin/env python3
"""Writes the fuzz targets' seed inputs: small valid files (and command lines), built here byte by
byte from the formats' specifications (not by klab's writers), into fuzz/corpus/<target>/seed-*.
Run once; the committed corpus is these seeds plus what libFuzzer found, minimised (fuzz/README.md).
Python's standard library only."""
import json
import pathlib
import struct

ROOT = pathlib.Path(__file__).resolve().parent / "corpus"


def write(target, name, data):
    d = ROOT / target
    d.mkdir(parents=True, exist_ok=True)
    (d / f"seed-{name}").write_bytes(data if isinstance(data, bytes) else data.encode())


# ---- .safetensors: u64 LE header length, JSON header, data buffer.
SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2, "F16": 2,
         "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}


def safetensors(tensors, metadata=None, pad=True):
    """tensors: [(name, dtype, shape, data bytes)] in buffer order."""
    header, off = {}, 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, data in tensors:
        n = SIZES[dtype]
        for s in shape:
            n *= s
        assert n == len(data), name
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(t[3] for t in tensors)


write("fuzz_safetensors", "empty", safetensors([]))
write("fuzz_safetensors", "f32", safetensors([("w", "F32", [2, 3], struct.pack("<6f", 1, -2, 0.5, 3e38, -0.0, 1e-40))]))
write("fuzz_safetensors", "f16-bf16", safetensors(
    [("h", "F16", [4], struct.pack("<4H", 0x3C00, 0x0001, 0x7C00, 0xFE01)),
     ("b", "BF16", [2, 2], struct.pack("<4H", 0x3F80, 0x8000, 0x7F80, 0x7FC1))],
    metadata={"format": "pt", "dk": "4"}))
write("fuzz_safetensors", "f64-scalar", safetensors([("s", "F64", [], struct.pack("<d", 3.141592653589793))]))
write("fuzz_safetensors", "ints", safetensors(
    [("a", "I64", [1], struct.pack("<q", -1)), ("b", "U8", [3], b"\x01\x02\x03"), ("c", "I32", [1, 1], struct.pack("<i", 7)),
     ("d", "BOOL", [2], b"\x00\x01"), ("e", "U16", [1], b"\xff\xff"), ("f", "F8_E4M3", [1], b"\x38")]))
write("fuzz_safetensors", "zero-size", safetensors(
    [("z", "F32", [0, 4], b""), ("x", "F32", [1], struct.pack("<f", 2)), ("y", "F16", [3, 0], b"")]))
write("fuzz_safetensors", "unpadded-meta-only", safetensors([], metadata={"k": "v", "": "\u00e9"}, pad=False))
write("fuzz_safetensors", "gdn-like", safetensors(
    [("model.layers.0.linear_attn.A_log", "F32", [2], struct.pack("<2f", 0.1, 0.2)),
     ("model.layers.0.linear_attn.dt_bias", "F32", [2], struct.pack("<2f", 0.0, 1.0)),
     ("model.layers.0.linear_attn.in_proj_qkv.weight", "BF16", [4, 2], bytes(16))],
    metadata={"dk": "2", "dv": "2", "rms_eps": "1e-06"}))

# ---- .npy: magic, version, header length (2 bytes in 1.0, 4 in 2.0 and 3.0), dict, data.


def npy(dict_text, data, version=1, align=64):
    body = dict_text
    hl = 2 if version == 1 else 4
    total = 8 + hl + len(body) + 1
    body += " " * ((align - total % align) % align) + "\n"
    return b"\x93NUMPY" + bytes([version, 0]) + struct.pack("<H" if hl == 2 else "<I", len(body)) + body.encode("latin-1") + data


write("fuzz_npy", "f4-2x3", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", struct.pack("<6f", 1, 2, 3, -4, 0.5, 1e-40)))
write("fuzz_npy", "f2-vec", npy("{'descr': '<f2', 'fortran_order': False, 'shape': (5,), }", struct.pack("<5H", 0x3C00, 0x0001, 0x7C00, 0xFC00, 0x7E01)))
write("fuzz_npy", "scalar", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", struct.pack("<f", 7)))
write("fuzz_npy", "empty", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }", b""))
write("fuzz_npy", "v2", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 2), }", struct.pack("<2f", 1, 2), version=2))
write("fuzz_npy", "v3-unaligned", npy('{"descr": "=f2", "shape": (2L, 1L), "fortran_order": False}', struct.pack("<2H", 1, 2), version=3, align=1))
write("fuzz_npy", "pipe-order", npy("{'shape': (1,), 'fortran_order': False, 'descr': '|f4'}", struct.pack("<f", -0.0)))

# ---- command lines: one word a line, as `klab run` / `klab ab` take them (after the command).
for name, words in {
    "run": ["gemv-f32", "--reps", "20", "--warmup=3", "--seed", "42", "--hot", "--quick", "--strict"],
    "ab": ["a", "b", "--shape", "4096x4096", "--input", "student-t", "--out", "out/x"],
    "typed": ["--int", "-12", "--u64=18446744073709551615", "--str", "", "--switch", "--flag", "-h", "--", "--x"],
    "numbers": ["1e-4", "+7", "-0", "0x1p-3", "inf", "nan", "9223372036854775807", "2147483647x1", "heavy-tailed"],
}.items():
    write("fuzz_cli", name, "\n".join(words))
