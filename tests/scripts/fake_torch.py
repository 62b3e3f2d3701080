"""A stand-in for torch (and for gemlite's and fla's entry points) on the CPU, for the plumbing tests
of peers/run.py: numpy arrays behind the few tensor operations the runner uses, a caching
"allocator" that hands a released block of the same size back (as PyTorch's does on one stream),
CUDA events that report a fixed time, and the peers' ops as the numpy models of peers/repack.py.

It checks the runner's own code (shapes, dtypes, the poison check, the timing loop, the records),
never the peers' kernels: those run only on the GPU.
"""
import itertools
import sys
import types

import numpy as np

_NP = {"int32": np.int32, "int16": np.int16, "int64": np.int64, "uint8": np.uint8, "float32": np.float32,
       "float16": np.float16, "bfloat16": np.uint16}  # bf16 held as its bits


class dtype:
    def __init__(self, name):
        self.name = name
        self.itemsize = np.dtype(_NP[name]).itemsize

    def __repr__(self):
        return f"torch.{self.name}"


int32, int16, int64, uint8, float32, float16, bfloat16 = (dtype(n) for n in ("int32", "int16", "int64", "uint8", "float32", "float16", "bfloat16"))
_BY_NP = {np.dtype(np.int32): int32, np.dtype(np.int16): int16, np.dtype(np.int64): int64, np.dtype(np.uint8): uint8,
          np.dtype(np.float32): float32, np.dtype(np.float16): float16}

# The allocator: released blocks by byte size, handed back last-released first.
_free = {}
_next = itertools.count(0x7F0000000000, 0x100000)
stats = {"launches": 0, "graph_captures": 0, "replays": 0, "sleeps": 0, "flush_sums": 0}


class Tensor:
    def __init__(self, arr, dt, base=None, ptr=None):
        self.a = arr
        self.dtype = dt
        self._base = base  # a view keeps its base (and its block) alive
        if base is None:
            nbytes = arr.nbytes
            self._ptr = _free[nbytes].pop() if _free.get(nbytes) else next(_next)
            self._nbytes = nbytes
        else:
            self._ptr = ptr

    def __del__(self):
        if self._base is None:
            _free.setdefault(self._nbytes, []).append(self._ptr)

    @property
    def shape(self):
        return self.a.shape

    def data_ptr(self):
        return self._ptr

    def numel(self):
        return int(self.a.size)

    def cuda(self):
        return Tensor(self.a.copy(), self.dtype)

    def cpu(self):
        return self

    def numpy(self):
        return self.a

    def clone(self):
        return Tensor(self.a.copy(), self.dtype)

    def contiguous(self):
        return self

    def view(self, dt):
        assert isinstance(dt, dtype) and dt.itemsize == self.dtype.itemsize, "a dtype view of another size"
        return Tensor(self.a.view(_NP[dt.name]), dt, base=self._base or self, ptr=self._ptr)

    def float(self):
        if self.dtype is bfloat16:
            return Tensor((self.a.astype(np.uint32) << 16).view(np.float32), float32)
        return Tensor(self.a.astype(np.float32), float32)

    def sum(self):
        stats["flush_sums"] += 1
        return Tensor(np.array([int(self.a.sum(dtype=np.int64))]), int64)


def from_numpy(a):
    return Tensor(np.array(a, copy=True), _BY_NP[a.dtype])


def full(shape, value, dtype, device=None):
    return Tensor(np.full(shape, value, dtype=_NP[dtype.name]), dtype)


__version__ = "0.0-fake"
version = types.SimpleNamespace(cuda="0.0-fake")


class _Ctx:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


class _Cuda:
    def __init__(self):
        self.capturing = None

    def is_available(self):
        return True

    def get_device_name(self, i=0):
        return "FAKE GPU (tests/scripts/fake_torch.py)"

    def get_device_properties(self, i=0):
        return types.SimpleNamespace(name="FAKE GPU", L2_cache_size=1 << 20)

    def synchronize(self):
        pass

    def empty_cache(self):
        _free.clear()

    def _sleep(self, cycles):
        stats["sleeps"] += 1

    def stream(self, s):
        return _Ctx()

    def Stream(self):
        return object()

    def Event(self, enable_timing=False):
        return _Event()

    def CUDAGraph(self):
        return _Graph()

    def graph(self, g):
        cuda = self

        class Capture(_Ctx):
            def __enter__(self):
                stats["graph_captures"] += 1
                cuda.capturing = g
                return self

            def __exit__(self, *a):
                cuda.capturing = None
                return False
        return Capture()


class _Event:
    _clock = itertools.count()

    def record(self):
        self.t = next(self._clock)

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return 0.01 * (end.t - self.t)  # ms: 10 us per tick


class _Graph:
    def replay(self):
        stats["replays"] += 1


cuda = _Cuda()


# ---- the peers' ops, as their numpy models ---------------------------------------------------------------

def _repack():
    import repack  # peers/ is on sys.path when the runner runs
    return repack


def _convert_weight_to_int4pack(w, inner_k_tiles):
    assert w.dtype is uint8 and w.a.ndim == 2 and inner_k_tiles in (2, 4, 8)
    assert (2 * w.a.shape[1]) % (inner_k_tiles * 16) == 0
    t = Tensor(w.a.copy(), uint8)  # the fake keeps the (n, k/2) input layout as the "packed" weight
    return t


def _weight_int4pack_mm(x, w, group, sz):
    R = _repack()
    assert x.dtype is bfloat16 and x.a.shape[0] == 1 and group == 32 and sz.dtype is bfloat16
    assert sz.a.shape == (2 * w.a.shape[1] // 32, w.a.shape[0], 2), f"scales_and_zeros {sz.a.shape}"
    stats["launches"] += 1
    xf = R.bf16_bits_to_f32(x.a.ravel())
    y = R.torch_int4_model(w.a, sz.a, xf)
    return Tensor(R.f32_to_bf16_bits(y).reshape(1, -1), bfloat16)


ops = types.SimpleNamespace(aten=types.SimpleNamespace(_convert_weight_to_int4pack=_convert_weight_to_int4pack,
                                                       _weight_int4pack_mm=_weight_int4pack_mm))


# ---- gemlite and fla ---------------------------------------------------------------------------------------

def _gemlite_module():
    g = types.ModuleType("gemlite")
    g.__version__ = "0.0-fake"
    g.DType = types.SimpleNamespace(FP16="FP16", BF16="BF16")

    class GemLiteLinearTriton:
        def __init__(self, W_nbits, group_size, in_features, out_features, input_dtype, output_dtype):
            assert W_nbits == 4 and group_size == 32 and input_dtype == "FP16" and output_dtype == "FP16"
            self.k, self.n = in_features, out_features
            self.W_group_mode = 4

        def pack(self, W_q, scales, zeros, bias=None):
            assert W_q.dtype is uint8 and W_q.a.shape == (self.n, self.k) and 0 <= W_q.a.min() and W_q.a.max() <= 15
            assert scales.dtype is float16 and zeros.dtype is float16 and scales.a.shape == zeros.a.shape == (self.n, self.k // 32)
            self.W_q, self.s, self.z = W_q.a.copy(), scales.a.copy(), zeros.a.copy()
            return self

        def __call__(self, x):
            assert x.dtype is float16 and x.a.shape == (1, self.k)
            stats["launches"] += 1
            y = _repack().gemlite_model(self.W_q, self.s, self.z, x.a.ravel().astype(np.float32))
            return Tensor(y.astype(np.float16).reshape(1, -1), float16)

    g.GemLiteLinearTriton = GemLiteLinearTriton
    return g


def _fla_modules():
    def fused_recurrent_gated_delta_rule(q, k, v, g=None, beta=None, scale=None, initial_state=None, output_final_state=False,
                                         use_qk_l2norm_in_kernel=False, **kw):
        assert use_qk_l2norm_in_kernel and output_final_state and not kw
        B, T, H, K = q.a.shape
        HV, V = v.a.shape[2], v.a.shape[3]
        assert T == 1 and k.a.shape == q.a.shape and g.a.shape == (B, T, HV) and beta.a.shape == (B, T, HV)
        assert initial_state.a.shape == (B, HV, K, V) and all(t.dtype is float32 for t in (q, k, v, g, beta, initial_state))
        stats["launches"] += 1
        o, S = _repack().gdn_recurrence_f32(q.a[:, 0], k.a[:, 0], v.a[:, 0], g.a[:, 0], beta.a[:, 0], initial_state.a, scale)
        return Tensor(o.reshape(B, 1, HV, V), float32), Tensor(S, float32)

    fla = types.ModuleType("fla")
    fla.__path__ = []
    ops_ = types.ModuleType("fla.ops")
    ops_.__path__ = []
    gdr = types.ModuleType("fla.ops.gated_delta_rule")
    gdr.fused_recurrent_gated_delta_rule = fused_recurrent_gated_delta_rule
    return {"fla": fla, "fla.ops": ops_, "fla.ops.gated_delta_rule": gdr}


def install(with_gemlite=True, with_fla=True):
    """Puts the fakes in sys.modules (torch, and gemlite and fla when asked); returns what it added."""
    added = {"torch": sys.modules[__name__]}
    if with_gemlite:
        added["gemlite"] = _gemlite_module()
    if with_fla:
        added.update(_fla_modules())
    for k, v in added.items():
        sys.modules[k] = v
    return list(added)


def uninstall(names):
    for k in names:
        sys.modules.pop(k, None)
