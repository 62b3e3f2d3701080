"""The problem's bytes in each peer's own weight format, and numpy models of the peers' arithmetic.

numpy only (no torch): these are the parts of the peers that can be checked without a GPU
(tests/scripts/test_peers.py checks every mapping against klab's dequantisation, bit for bit).

klab's raw-q4 format (reference/include/klab/ref/q4.hpp): W (m x k), value(i, j) = n4(i, j) *
scale(i, j / 32); n4 int4 two's complement in [-8, 7]; codes (m, k/2) bytes, byte i*(k/2) + j/2
holds column j, even j in the LOW nibble; scales (m, k/32) IEEE binary16.

torch int4 (aten._weight_int4pack_mm, "tinygemm"; torch's int4mm.cu and test_linalg.py's
_group_quantize_tensor): the input of _convert_weight_to_int4pack on CUDA is (n, k/2) uint8 of
unsigned q in [0, 15], even k in the HIGH nibble; scales_and_zeros is (k/group, n, 2) bf16 with
[g, i, 0] the scale and [g, i, 1] the zero of row i's group g; the kernel dequantises as
bf16(fma(bf16(q - 8), scale, zero)) (__hfma2 on bf16), multiplies with bf16 activations on the
tensor cores (f32 accumulation) and writes bf16. Our mapping: q = n4 + 8 (exact: q - 8 == n4), zero
= 0, scale = bf16(scale), round to nearest even: the format has no f16 scales, so the scale is the
one thing that does not carry over exactly (relative change <= 2^-8, half a bf16 ulp; exact where the f16 scale has
<= 8 significant bits).

gemlite (GemLiteLinearTriton.pack, the HQQ convention W ~ (W_q - zeros) * scales): W_q (n, k)
uint8 unpacked values, scales and zeros (n, k/group) in the activations' dtype. Our mapping, with
f16 activations: W_q = n4 + 8, scales = the f16 scales bit for bit, zeros = 8: (W_q - 8) * s = n4 s
exactly, so the format holds dequant(W) exactly. pack() (fma_mode, its default) stores zeros as
f16(-zeros * scales) = -8 s (exact: a power-of-two multiple) and the kernel computes
fma(f16(W_q), s, -8 s) in f16: f16(n4 s), one rounding (n4 s may need 14 significant bits).
"""
import numpy as np

GROUP = 32  # weights per scale along a row (klab's kQ4Block; the group size of both q4 peers)


# ---- klab's raw-q4 format ---------------------------------------------------------------------------

def q4_codes(codes, m, k):
    """n4 (m, k) int8 in [-8, 7] from the packed codes (m, k/2) uint8 (even column in the low nibble)."""
    codes = np.asarray(codes, dtype=np.uint8).reshape(m, k // 2)
    nib = np.empty((m, k), dtype=np.int16)
    nib[:, 0::2] = codes & 0x0F
    nib[:, 1::2] = codes >> 4
    return (nib - ((nib & 0x8) << 1)).astype(np.int8)


def q4_dequant(codes, scales, m, k):
    """dequant(W) (m, k) float32: n4 * scale, exact in f32 (4 bits times 11 bits)."""
    n4 = q4_codes(codes, m, k).astype(np.float32)
    s = np.asarray(scales).reshape(m, k // GROUP)
    s = s.view(np.float16) if s.dtype == np.uint16 else s.astype(np.float16)
    return n4 * np.repeat(s.astype(np.float32), GROUP, axis=1)


# ---- bf16 and f16 ----------------------------------------------------------------------------------

def f32_to_bf16_bits(x):
    """float32 -> bf16 bit patterns (uint16), round to nearest even; NaN stays NaN (quiet)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = ((u + (0x7FFF + ((u >> 16) & 1))) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    return np.where(nan, ((u >> 16) | 0x0040).astype(np.uint16), rounded)


def bf16_bits_to_f32(b):
    """bf16 bit patterns (uint16) -> float32 (exact)."""
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def round_bf16(x):
    """float32 values rounded to the nearest bf16 (as float32)."""
    return bf16_bits_to_f32(f32_to_bf16_bits(x))


# ---- torch int4 (aten._weight_int4pack_mm) ----------------------------------------------------------

def torch_int4_weight(n4):
    """(n, k/2) uint8, q = n4 + 8 unsigned, even column in the HIGH nibble: _convert_weight_to_int4pack's CUDA input."""
    q = (np.asarray(n4, dtype=np.int16) + 8).astype(np.uint8)
    return ((q[:, 0::2] << 4) | q[:, 1::2]).astype(np.uint8)


def torch_int4_weight_from_codes(codes):
    """The same straight from klab's bytes: q = n4 + 8 is the nibble with its top bit flipped (n4's two's
    complement + 8 = nib ^ 8), and the nibbles swap places: byte ^ 0x88, then swap."""
    c = np.asarray(codes, dtype=np.uint8) ^ 0x88
    return ((c << 4) | (c >> 4)).astype(np.uint8)


def torch_int4_scales_and_zeros(scales_f16_bits, m, k):
    """(k/32, m, 2) bf16 bit patterns: [g, i, 0] = bf16(scale(i, g)) (nearest even), [g, i, 1] = +0."""
    s = np.asarray(scales_f16_bits).reshape(m, k // GROUP)
    s = s.view(np.float16) if s.dtype == np.uint16 else s.astype(np.float16)
    out = np.zeros((k // GROUP, m, 2), dtype=np.uint16)
    out[:, :, 0] = f32_to_bf16_bits(s.astype(np.float32)).T
    return out


def torch_int4_unpack(w_u8):
    """q (n, k) uint8 in [0, 15] from the (n, k/2) input layout (even column in the high nibble)."""
    w = np.asarray(w_u8, dtype=np.uint8)
    q = np.empty((w.shape[0], 2 * w.shape[1]), dtype=np.uint8)
    q[:, 0::2] = w >> 4
    q[:, 1::2] = w & 0x0F
    return q


def torch_int4_values(w_u8, sz_bits):
    """The format's values before the kernel rounds: (q - 8) * scale + zero, float64 (exact), (n, k)."""
    q = torch_int4_unpack(w_u8).astype(np.float64)
    n, k = q.shape
    scale = bf16_bits_to_f32(sz_bits[:, :, 0]).astype(np.float64).T  # (n, k/32)
    zero = bf16_bits_to_f32(sz_bits[:, :, 1]).astype(np.float64).T
    return (q - 8.0) * np.repeat(scale, GROUP, axis=1) + np.repeat(zero, GROUP, axis=1)


def torch_int4_kernel_weights(w_u8, sz_bits):
    """What the kernel multiplies with: bf16(fma(q - 8, scale, zero)) (one rounding of the exact value)."""
    return round_bf16(torch_int4_values(w_u8, sz_bits).astype(np.float32))  # f64 -> f32 exact here (<= 16 bits)


def torch_int4_model(w_u8, sz_bits, x):
    """A model of the peer's output: bf16 weights as the kernel forms them, bf16(x), sums in f64 (the
    tensor cores' f32 accumulation is not modelled), output rounded to bf16. float32 (n,)."""
    w = torch_int4_kernel_weights(w_u8, sz_bits).astype(np.float64)
    xb = round_bf16(np.asarray(x, dtype=np.float32)).astype(np.float64)
    return round_bf16((w @ xb).astype(np.float32))


# ---- gemlite (A16W4, f16 activations) -----------------------------------------------------------------

def gemlite_weight(n4):
    """W_q (n, k) uint8 = n4 + 8, in [0, 15] (pack() packs it itself)."""
    return (np.asarray(n4, dtype=np.int16) + 8).astype(np.uint8)


def gemlite_scales(scales_f16_bits, m, k):
    """(n, k/32) float16: klab's scales, bit for bit."""
    s = np.asarray(scales_f16_bits).reshape(m, k // GROUP)
    return s.view(np.float16).copy() if s.dtype == np.uint16 else s.astype(np.float16)


def gemlite_zeros(m, k):
    """(n, k/32) float16, all 8: (W_q - 8) * s = n4 s."""
    return np.full((m, k // GROUP), 8.0, dtype=np.float16)


def gemlite_values(W_q, scales, zeros):
    """The format's values, (W_q - zeros) * scales, float64 (exact), (n, k)."""
    return (np.asarray(W_q, np.float64) - np.repeat(np.asarray(zeros, np.float64), GROUP, axis=1)) * \
        np.repeat(np.asarray(scales, np.float64), GROUP, axis=1)


def gemlite_kernel_weights(W_q, scales, zeros):
    """What the kernel multiplies with (fma mode): fma(f16(W_q), s, f16(-zeros * s)) rounded once to f16."""
    s = np.repeat(np.asarray(scales, np.float64), GROUP, axis=1)
    z = np.repeat((-np.asarray(zeros, np.float32) * np.asarray(scales, np.float32)).astype(np.float16).astype(np.float64), GROUP, axis=1)
    return (np.asarray(W_q, np.float64) * s + z).astype(np.float16)


def gemlite_model(W_q, scales, zeros, x):
    """A model of the peer's output: f16 weights as the kernel forms them, f16(x), sums in f64, output
    rounded to f16. The kernel's split-K partial sums added atomically into the f16 output (each add
    rounds) are not modelled: its error is larger. float32 (n,)."""
    w = gemlite_kernel_weights(W_q, scales, zeros).astype(np.float64)
    xh = np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float64)
    return (w @ xh).astype(np.float16).astype(np.float32)


# ---- the GDN recurrence --------------------------------------------------------------------------------

def gdn_recurrence_f64(q, k, v, g, beta, S0, scale):
    """The f64 recurrence (ref::gdn::recurrence), batched, in numpy: q, k (B, nk, dk) raw; v (B, nv, dv);
    g, beta (B, nv); S0 (B, nv, dk, dv). Returns o (B, nv, dv) and S (B, nv, dk, dv). Value head h
    uses key head h // (nv // nk)."""
    q, k, v, g, beta = (np.asarray(a, np.float64) for a in (q, k, v, g, beta))
    S = np.array(S0, dtype=np.float64)
    nk, nv = q.shape[1], v.shape[1]
    qn = q * (scale / np.sqrt((q * q).sum(-1, keepdims=True) + 1e-6))
    kn = k / np.sqrt((k * k).sum(-1, keepdims=True) + 1e-6)
    qh = np.repeat(qn, nv // nk, axis=1)  # (B, nv, dk)
    kh = np.repeat(kn, nv // nk, axis=1)
    S *= np.exp(g)[:, :, None, None]
    kv = np.einsum("bhij,bhi->bhj", S, kh)
    t = (v - kv) * beta[:, :, None]
    S += kh[:, :, :, None] * t[:, :, None, :]
    o = np.einsum("bhij,bhi->bhj", S, qh)
    return o, S


def gdn_recurrence_f32(q, k, v, g, beta, S0, scale):
    """The same in float32 throughout, in the order of fla's fused_recurrent kernel (l2norm in the
    kernel, q scaled after it, decay, kv, update, o): a model of a peer's f32 arithmetic."""
    f = np.float32
    q, k, v, g, beta = (np.asarray(a, f) for a in (q, k, v, g, beta))
    S = np.array(S0, dtype=f)
    nk, nv = q.shape[1], v.shape[1]
    qn = (q / np.sqrt((q * q).sum(-1, keepdims=True, dtype=f) + f(1e-6))) * f(scale)
    kn = k / np.sqrt((k * k).sum(-1, keepdims=True, dtype=f) + f(1e-6))
    qh = np.repeat(qn, nv // nk, axis=1)
    kh = np.repeat(kn, nv // nk, axis=1)
    S *= np.exp(g)[:, :, None, None]
    kv = np.einsum("bhij,bhi->bhj", S, kh)
    t = beta[:, :, None] * (v - kv)
    S += kh[:, :, :, None] * t[:, :, None, :]
    o = np.einsum("bhij,bhi->bhj", S, qh)
    return o.astype(f), S.astype(f)
