"""Reading the .safetensors files `klab export` writes, with the standard library and numpy only.

The format: 8 bytes little-endian N, N bytes of JSON header ({name: {dtype, shape, data_offsets}},
"__metadata__": {str: str}), then the data. Checked as far as a reader must (known dtype, size =
prod(shape) * itemsize, offsets inside the file); klab's own reader (reference/src/safetensors.cpp)
is the strict one. BF16 has no numpy dtype: it is returned as its uint16 bit patterns.
"""
import json
import struct
from pathlib import Path

import numpy as np

# dtype name -> numpy dtype (little-endian). BF16 -> the bits, as uint16.
DTYPES = {
    "BOOL": np.dtype("?"), "U8": np.dtype("u1"), "I8": np.dtype("i1"), "I16": np.dtype("<i2"),
    "U16": np.dtype("<u2"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2"), "I32": np.dtype("<i4"),
    "U32": np.dtype("<u4"), "F32": np.dtype("<f4"), "I64": np.dtype("<i8"), "U64": np.dtype("<u8"),
    "F64": np.dtype("<f8"),
}


class FormatError(Exception):
    """A file that is not what it claims to be; the message names the file and the tensor."""


class File:
    def __init__(self, path):
        self.path = Path(path)
        try:
            data = self.path.read_bytes()
        except OSError as e:
            raise FormatError(f"{self.path}: cannot be read: {e.strerror}") from None
        if len(data) < 8:
            raise FormatError(f"{self.path}: truncated ({len(data)} bytes)")
        (n,) = struct.unpack("<Q", data[:8])
        if n > len(data) - 8:
            raise FormatError(f"{self.path}: the header length says {n} bytes but only {len(data) - 8} follow")
        try:
            header = json.loads(data[8:8 + n].decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise FormatError(f"{self.path}: header is not valid JSON ({e})") from None
        if not isinstance(header, dict):
            raise FormatError(f"{self.path}: header is not a JSON object")
        self.metadata = dict(header.pop("__metadata__", {}) or {})
        self._data = memoryview(data)[8 + n:]
        self.tensors = {}
        for name, info in header.items():
            dt = DTYPES.get(info.get("dtype"))
            if dt is None:
                raise FormatError(f"{self.path}: tensor '{name}': unknown dtype {info.get('dtype')!r}")
            shape = tuple(int(s) for s in info["shape"])
            begin, end = (int(o) for o in info["data_offsets"])
            if not 0 <= begin <= end <= len(self._data) or end - begin != int(np.prod(shape, dtype=np.int64)) * dt.itemsize:
                raise FormatError(f"{self.path}: tensor '{name}': data_offsets [{begin}, {end}] do not fit its shape "
                                  f"{list(shape)} and dtype {info['dtype']} inside the file")
            self.tensors[name] = (info["dtype"], shape, begin, end)

    def __contains__(self, name):
        return name in self.tensors

    def dtype(self, name):
        return self._info(name)[0]

    def shape(self, name):
        return self._info(name)[1]

    def _info(self, name):
        if name not in self.tensors:
            raise FormatError(f"{self.path}: no tensor '{name}' (it has {', '.join(sorted(self.tensors)) or 'none'})")
        return self.tensors[name]

    def get(self, name, dtype=None, shape=None):
        """The tensor as a numpy array (a copy); `dtype`/`shape`, when given, must match the file's."""
        dname, shp, begin, end = self._info(name)
        if dtype is not None and dname != dtype:
            raise FormatError(f"{self.path}: tensor '{name}' is {dname}, expected {dtype}")
        if shape is not None and tuple(shape) != shp:
            raise FormatError(f"{self.path}: tensor '{name}' has shape {list(shp)}, expected {list(shape)}")
        return np.frombuffer(self._data[begin:end], dtype=DTYPES[dname]).reshape(shp).copy()

    def meta(self, key, default=None):
        return self.metadata.get(key, default)


def write(path, tensors, metadata=None):
    """Writes {name: (dtype name, numpy array)} (tests build small files with it)."""
    header, blobs, off = {}, [], 0
    for name, (dname, arr) in tensors.items():
        b = np.ascontiguousarray(arr, dtype=DTYPES[dname]).tobytes()
        header[name] = {"dtype": dname, "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    Path(path).write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))
