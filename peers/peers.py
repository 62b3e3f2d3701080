"""The peers: what a kernel engineer would run instead of klab's kernels, on the problems klab exports.

Each peer: its variant name (as klab names variants: op/axis=value), its declared tolerance with
the reason, can_implement(problem), the CPU part (repack from the export's bytes, numpy only) and
the GPU part (prepare copies of its inputs on the device; call(i) runs it on copy i and returns
its outputs). torch and the peers' packages are imported only by available() and prepare().
"""
import importlib
import importlib.metadata
import math

import numpy as np

import repack as R
import st_numpy

# ---- problems (the files `klab export` writes) --------------------------------------------------------


class Problem:
    def __init__(self, path):
        self.path = path
        self.file = st_numpy.File(path)
        f = self.file
        self.op = f.meta("op")
        if self.op not in ("q4_gemv", "gdn_recurrence"):
            raise st_numpy.FormatError(f"{path}: metadata op is {self.op!r}, not q4_gemv or gdn_recurrence (was it written by klab export?)")
        self.shape = f.meta("shape")
        self.dist = f.meta("dist", "uniform")
        self.seed = int(f.meta("seed", "1"))
        self.bytes = float(f.meta("bytes"))
        self.macs = float(f.meta("macs"))
        self.git_commit = f.meta("git_commit", "")
        # What klab's own records of this problem carry (harness/src/race.cpp to_json): its
        # parameters, its key and the hash of every input byte (absent from exports before them).
        self.input_hash = f.meta("input_hash")
        if self.op == "q4_gemv":
            self.m, self.k = int(f.meta("m")), int(f.meta("k"))
            self.params = {"m": self.m, "k": self.k}
            self.key = self.shape
            m, k = self.m, self.k
            self.codes = f.get("codes", "U8", (m, k // 2))
            self.scales = f.get("scales", "F16", (m, k // R.GROUP)).view(np.uint16)  # the f16 bits
            self.x = f.get("x", "F32", (k,))
            self.y = f.get("y", "F64", (m,))
        else:
            self.batch = int(f.meta("batch"))
            self.nk, self.nv, self.dk, self.dv = (int(f.meta(n)) for n in ("nk", "nv", "dk", "dv"))
            self.scale = float(f.meta("scale"))
            B = self.batch
            self.q = f.get("q", "F32", (B, self.nk, self.dk))
            self.k_ = f.get("k", "F32", (B, self.nk, self.dk))
            self.v = f.get("v", "F32", (B, self.nv, self.dv))
            self.g = f.get("g", "F32", (B, self.nv))
            self.beta = f.get("beta", "F32", (B, self.nv))
            self.S0 = f.get("S0", "F32", (B, self.nv, self.dk, self.dv))
            self.o = f.get("o", "F64", (B, self.nv, self.dv))
            self.S = f.get("S", "F64", (B, self.nv, self.dk, self.dv))
            # The op's parameters, as klab's gdn_recurrence records name them; its records have no
            # m x k shape: `shape` is the parameters' key ("batch=1,dk=128,dv=128,nk=16,nv=48").
            self.params = {"batch": B, "dk": self.dk, "dv": self.dv, "nk": self.nk, "nv": self.nv}
            self.key = f.meta("problem") or ",".join(f"{n}={v}" for n, v in sorted(self.params.items()))
            self.shape = self.key
            self.m = self.k = None

    def label(self):
        return f"{self.shape}/{self.dist}/seed={self.seed}"

    def refs(self):
        """The reference of each output, in the order the peer returns its outputs."""
        return [("y", self.y)] if self.op == "q4_gemv" else [("o", self.o), ("S", self.S)]


def _version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _import(name):
    """(module, None) or (None, why)."""
    try:
        return importlib.import_module(name), None
    except Exception as e:  # noqa: BLE001 - an import that fails for any reason makes the peer unavailable
        return None, f"import {name} failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def versions():
    import platform
    v = {"python": platform.python_version(), "numpy": np.__version__}
    for dist in ("torch", "triton", "fla-core", "gemlite", "safetensors"):
        v[dist] = _version(dist)
    try:
        import torch
        v["torch_cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            v["device"] = torch.cuda.get_device_name(0)
    except Exception:  # noqa: BLE001
        pass
    return v


def cuda_torch():
    """(torch, None) when torch imports and sees a CUDA device, else (None, why)."""
    torch, why = _import("torch")
    if torch is None:
        return None, why
    if not torch.cuda.is_available():
        return None, f"torch {torch.__version__} sees no CUDA device"
    return torch, None


# ---- the peers -----------------------------------------------------------------------------------------


class Peer:
    op = ""
    impl = ""
    tolerance = 0.0
    tolerance_reason = ""
    description = ""
    outputs = ()  # per output: (name, poison kind: f32 | bf16 | f16)

    @property
    def variant(self):
        return f"{self.op}/impl={self.impl}"

    @property
    def axes(self):
        return {"impl": self.impl}

    def can_implement(self, p):
        return None

    def available(self, torch):
        """None when the peer can run with this torch, else the reason."""
        return None

    def cpu_check(self, p):
        """The repack checked and the peer's arithmetic modelled on the CPU (numpy): a one-line
        result and the model's outputs (one per output), for a dry run."""
        raise NotImplementedError


class TorchInt4(Peer):
    op = "q4_gemv"
    impl = "torch-int4pack"
    description = ("peer: torch.ops.aten._weight_int4pack_mm (tinygemm), bf16 activations, int4 weights with bf16 scales, "
                   "group 32, bf16 output")
    # Measured expectation: peers/repack.py torch_int4_model (the kernel's bf16 weights, bf16 x, f64
    # sums, bf16 output) gives max_rel 3.27e-3..3.93e-3 on the four seed shapes (uniform, seed 1;
    # 2026-12-01, on the CPU). 3e-2 is klab's cuBLAS bf16 peer's budget: ~8x over the model, while a
    # wrong layout or scale is off by O(1).
    tolerance = 3e-2
    tolerance_reason = ("bf16 activations, f16 scales rounded to bf16 (<= 2^-8), weights formed by a bf16 fma, bf16 output: "
                        "the numpy model of that arithmetic gives max_rel 3.3e-3..3.9e-3 on the seed shapes; 3e-2 as klab's "
                        "cuBLAS bf16 peer")
    outputs = (("y", "bf16"),)

    def can_implement(self, p):
        if p.m % 8:
            return f"m = {p.m} is not a multiple of 8 (the int4pack layout's n-tile; rows would need padding)"
        if p.k % 32:
            return f"k = {p.k} is not a multiple of 32"
        return None

    def available(self, torch):
        missing = [n for n in ("_convert_weight_to_int4pack", "_weight_int4pack_mm") if not hasattr(torch.ops.aten, n)]
        return f"torch {torch.__version__} has no aten.{', aten.'.join(missing)}" if missing else None

    @staticmethod
    def inner_k_tiles(k):
        # 8 k-tiles of 16 per 16-byte load when k allows (torchao's default), else 4 or 2.
        return next(t for t in (8, 4, 2) if k % (t * 16) == 0)

    def repack(self, p):
        n4 = R.q4_codes(p.codes, p.m, p.k)
        w = R.torch_int4_weight(n4)
        sz = R.torch_int4_scales_and_zeros(p.scales, p.m, p.k)
        xb = R.f32_to_bf16_bits(p.x)
        return n4, w, sz, xb

    def cpu_check(self, p):
        n4, w, sz, xb = self.repack(p)
        codes_exact = bool((R.torch_int4_unpack(w).astype(np.int16) - 8 == n4).all())
        values = R.torch_int4_values(w, sz)
        exact = R.q4_dequant(p.codes, p.scales, p.m, p.k).astype(np.float64)
        scale_rel = float(np.max(np.abs(values - exact)) / max(np.max(np.abs(exact)), 1e-300))
        y = R.torch_int4_model(w, sz, p.x)
        return (f"codes exact: {codes_exact}; format vs dequant(W): max change {scale_rel:.2e} of max|W| "
                f"(the bf16 scales); model of the kernel's arithmetic:"), [y]

    def prepare(self, torch, p, copies):
        _, w, sz, xb = self.repack(p)
        ikt = self.inner_k_tiles(p.k)
        w_dev = torch.from_numpy(w).cuda()
        packed = torch.ops.aten._convert_weight_to_int4pack(w_dev, ikt)
        sz_dev = torch.from_numpy(sz.view(np.int16)).cuda().view(torch.bfloat16)
        x_dev = torch.from_numpy(xb.view(np.int16).reshape(1, p.k)).cuda().view(torch.bfloat16)
        inputs = [(packed, sz_dev, x_dev)] + [(packed.clone(), sz_dev.clone(), x_dev.clone()) for _ in range(copies - 1)]
        torch.cuda.synchronize()  # every copy written before any stream reads it
        del w_dev
        mm = torch.ops.aten._weight_int4pack_mm

        def call(i):
            pk, s, x = inputs[i]
            return (mm(x, pk, R.GROUP, s),)  # (1, m) bf16

        return call, {"inner_k_tiles": ikt, "activations": "bf16", "scales": "bf16", "output": "bf16"}


class Gemlite(Peer):
    op = "q4_gemv"
    impl = "gemlite-a16w4"
    description = ("peer: gemlite GemLiteLinearTriton A16W4 (Triton; GEMV_REVSPLITK at batch 1), f16 activations, int4 weights, "
                   "f16 scales and zeros (W ~ (W_q - 8) s), group 32, f16 output")
    # Measured expectation: peers/repack.py gemlite_model gives max_rel 3.4e-4..4.7e-4 on the four seed
    # shapes; with its split-K partial sums added into the f16 output one at a time (simulated in
    # numpy, random order) 3.3e-3..3.6e-3. 3e-2: ~8x over that, as for the bf16 peers.
    tolerance = 3e-2
    tolerance_reason = ("f16 activations, weights formed by an f16 fma, split-K partial sums added atomically into an f16 "
                        "output: a numpy model with those atomics gives max_rel 3.3e-3..3.6e-3 on the seed shapes; 3e-2 as "
                        "klab's bf16 peers")
    outputs = (("y", "f16"),)

    def can_implement(self, p):
        if p.k % 32:
            return f"k = {p.k} is not a multiple of 32"
        if np.any(np.abs(p.scales.view(np.float16).astype(np.float32)) * 8 > 65504):
            return "a scale above 8188: pack() would store -8 * scale as an f16 infinity"
        return None

    def available(self, torch):
        _, why = _import("gemlite")
        return why

    def repack(self, p):
        n4 = R.q4_codes(p.codes, p.m, p.k)
        return R.gemlite_weight(n4), R.gemlite_scales(p.scales, p.m, p.k), R.gemlite_zeros(p.m, p.k)

    def cpu_check(self, p):
        W_q, s, z = self.repack(p)
        exact = bool((R.gemlite_values(W_q, s, z) == R.q4_dequant(p.codes, p.scales, p.m, p.k)).all())
        y = R.gemlite_model(W_q, s, z, p.x)
        return f"format holds dequant(W) bit for bit: {exact}; model of the kernel's arithmetic (without its atomics):", [y]

    def prepare(self, torch, p, copies):
        import gemlite
        W_q, s, z = self.repack(p)
        x_dev = torch.from_numpy(p.x.astype(np.float16).reshape(1, p.k)).cuda()
        mods, xs = [], []
        for _ in range(copies):
            lin = gemlite.GemLiteLinearTriton(W_nbits=4, group_size=R.GROUP, in_features=p.k, out_features=p.m,
                                              input_dtype=gemlite.DType.FP16, output_dtype=gemlite.DType.FP16)
            lin.pack(torch.from_numpy(W_q).cuda(), torch.from_numpy(s).cuda(), torch.from_numpy(z).cuda(), bias=None)
            mods.append(lin)
            xs.append(x_dev.clone())
        torch.cuda.synchronize()

        def call(i):
            return (mods[i](xs[i]),)  # (1, m) f16

        return call, {"activations": "f16", "scales": "f16", "zeros": "f16 (8)",
                      "output": "f16, zero-filled by the op before its atomic adds: the poison cannot show an unwritten element "
                                "(a missing partial sum shows as error)",
                      "W_group_mode": int(mods[0].W_group_mode), "gemlite": _version("gemlite")}


class FlaRecurrence(Peer):
    op = "gdn_recurrence"
    impl = "fla-fused-recurrent"
    description = ("peer: fla.ops.gated_delta_rule.fused_recurrent_gated_delta_rule (Triton; vLLM's and transformers' fast "
                   "path), f32 inputs and state, q/k L2-normalised in the kernel, scale 1/sqrt(dk), one token")
    # Measured expectation: peers/repack.py gdn_recurrence_f32 (f32 throughout, in the kernel's order)
    # gives max_rel 5.4e-7 (o) and 1.6e-7 (S) at batch 1, 8 and 32. 1e-4 is klab's criterion for its
    # f32 GDN tier against the transformers oracle.
    tolerance = 1e-4
    tolerance_reason = ("f32 throughout (the kernel's own l2norm with the epsilon inside the root, as the reference): an f32 "
                        "numpy model in the kernel's order gives max_rel 5.4e-7 (o), 1.6e-7 (S); 1e-4 as klab's f32 GDN tier")
    outputs = (("o", "f32"), ("S", "f32"))

    def can_implement(self, p):
        if p.nv % p.nk:
            return f"nv = {p.nv} is not a multiple of nk = {p.nk}"
        return None

    def available(self, torch):
        mod, why = _import("fla.ops.gated_delta_rule")
        if mod is None:
            return why
        return None if hasattr(mod, "fused_recurrent_gated_delta_rule") else "fla.ops.gated_delta_rule has no fused_recurrent_gated_delta_rule"

    def cpu_check(self, p):
        o, S = R.gdn_recurrence_f32(p.q, p.k_, p.v, p.g, p.beta, p.S0, p.scale)
        return "model of the kernel's f32 arithmetic (in its order):", [o, S]

    def prepare(self, torch, p, copies):
        from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule as frgdr
        B = p.batch

        def dev(a, shape):
            return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32).reshape(shape)).cuda()

        base = (dev(p.q, (B, 1, p.nk, p.dk)), dev(p.k_, (B, 1, p.nk, p.dk)), dev(p.v, (B, 1, p.nv, p.dv)),
                dev(p.g, (B, 1, p.nv)), dev(p.beta, (B, 1, p.nv)), dev(p.S0, (B, p.nv, p.dk, p.dv)))
        inputs = [base] + [tuple(t.clone() for t in base) for _ in range(copies - 1)]
        torch.cuda.synchronize()
        scale = p.scale

        def call(i):
            q, k, v, g, beta, h0 = inputs[i]
            o, ht = frgdr(q, k, v, g=g, beta=beta, scale=scale, initial_state=h0, output_final_state=True,
                          use_qk_l2norm_in_kernel=True)
            return (o, ht)  # (B, 1, nv, dv) and (B, nv, dk, dv), f32

        return call, {"inputs": "f32 (q, k raw: use_qk_l2norm_in_kernel=True)", "state": "f32 [N, HV, K, V]",
                      "scale": scale, "fla-core": _version("fla-core")}


ALL = (TorchInt4(), Gemlite(), FlaRecurrence())


def poison_signed(kind):
    """The poison bit pattern as the signed integer torch.full takes for an int16 / int32 tensor."""
    from records import POISON
    bits = POISON[kind]
    width = 32 if kind == "f32" else 16
    return bits - (1 << width) if bits >= 1 << (width - 1) else bits


def output_arrays(torch, outs, kinds):
    """Per output: (float32 values, raw bit patterns) copied to the host."""
    res = []
    for t, kind in zip(outs, kinds):
        t = t.contiguous()
        bits = t.view(torch.int32 if kind == "f32" else torch.int16).cpu().numpy().ravel()
        bits = bits.view(np.uint32 if kind == "f32" else np.uint16)
        res.append((t.float().cpu().numpy().ravel(), bits))
    return res


def math_ok(x):
    return isinstance(x, (int, float)) and math.isfinite(x)
