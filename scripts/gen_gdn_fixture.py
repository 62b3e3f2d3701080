#!/usr/bin/env python3
"""Generate a GDN oracle fixture from Hugging Face transformers' own Gated DeltaNet layer.

Builds one Qwen3_5GatedDeltaNet layer (falling back to Qwen3NextGatedDeltaNet when this
transformers has no Qwen3.5), in float32 on the CPU, with seeded random weights in realistic ranges,
and decodes T tokens one at a time through the module's own cache: token 0 takes the layer's prefill
path (causal_conv1d_fn + torch_chunk_gated_delta_rule), tokens 1..T-1 its decode path
(causal_conv1d_update + torch_recurrent_gated_delta_rule). The torch reference implementations are
forced (hub kernels off, flash-linear-attention and causal-conv1d bypassed), each is counted, and the
run is refused if the decode path was not the one taken.

The .safetensors file written holds (all float32):
  <prefix>in_proj_qkv.weight (conv_dim, hidden)   <prefix>in_proj_z.weight (nv*dv, hidden)
  <prefix>in_proj_b.weight   (nv, hidden)         <prefix>in_proj_a.weight (nv, hidden)
  <prefix>out_proj.weight    (hidden, nv*dv)      <prefix>conv1d.weight    (conv_dim, 1, ck)
  <prefix>A_log (nv)   <prefix>dt_bias (nv)   <prefix>norm.weight (dv)
  inputs.h     (T, hidden)       the layer input of each token
  expect.y     (T, hidden)       the layer output of each token
  expect.S     (nv, dk, dv)      recurrent state after the last token = HF recurrent_states[0][0]
  expect.hist  (ck-1, conv_dim)  conv history after the last token, oldest frame first, pre-SiLU
                                 projections = HF conv_states[0][0, :, 1:].T (HF keeps ck frames;
                                 the oldest reaches no further output)
and __metadata__ (strings): geometry (hidden nk nv dk dv ck rms_norm_eps), tokens, seed, the class,
transformers / torch versions, the path taken and the call counts. The prefix defaults to
"model.layers.0.linear_attn." (klab accepts any prefix, or none).

Check a fixture with:  klab gdn --weights FILE --expect FILE
The CPU test suite checks every tests/fixtures/gdn/*.safetensors (tests/cpu/test_gdn_reference.cpp).

Needs: python3, torch, transformers (5.x), safetensors. No GPU, no network. Run and checked with
transformers 5.17.0 and torch 2.11.0 (CPU): the reference reproduces its fixtures to ~1e-6.
"""
import argparse
import inspect
import math
import os
import platform
import sys
from pathlib import Path

# Before transformers is imported: no hub kernels (they would replace the torch code paths).
os.environ["USE_HUB_KERNELS"] = "0"

GEOMETRIES = {
    # name: hidden, nk, nv, dk, dv, ck, default tokens
    "tiny": dict(hidden=64, nk=2, nv=4, dk=16, dv=16, ck=4, tokens=64),
    # Qwen3.5's head dims (dk = dv = 128, nv = 2 nk) on a small hidden size.
    "qwen-head": dict(hidden=256, nk=1, nv=2, dk=128, dv=128, ck=4, tokens=16),
}
RMS_NORM_EPS = 1e-6
REPO = Path(__file__).resolve().parent.parent


def die(msg):
    print(f"gen_gdn_fixture: error: {msg}", file=sys.stderr)
    sys.exit(1)


def parse_args():
    p = argparse.ArgumentParser(
        description="Generate a GDN oracle fixture (.safetensors) from transformers' Qwen3.5 Gated DeltaNet layer.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="geometries:\n"
        + "\n".join(
            f"  {k:10s} hidden={g['hidden']} nk={g['nk']} nv={g['nv']} dk={g['dk']} dv={g['dv']} ck={g['ck']}, "
            f"{g['tokens']} tokens by default"
            for k, g in GEOMETRIES.items()
        ),
    )
    p.add_argument("--geometry", choices=sorted(GEOMETRIES), default="tiny", help="layer geometry (default: tiny)")
    p.add_argument("--tokens", type=int, default=None, help="tokens to decode (default: the geometry's)")
    p.add_argument("--seed", type=int, default=1, help="seed for weights and inputs (default: 1)")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output file (default: tests/fixtures/gdn/gdn-GEOMETRY-tT-sSEED.safetensors in the repository)",
    )
    p.add_argument("--prefix", default="model.layers.0.linear_attn.", help="tensor name prefix of the weights")
    p.add_argument("--force", action="store_true", help="overwrite an existing output file")
    a = p.parse_args()
    geo = dict(GEOMETRIES[a.geometry])
    a.tokens = geo["tokens"] if a.tokens is None else a.tokens
    if not 1 <= a.tokens <= 100000:
        p.error(f"--tokens must be between 1 and 100000 (got {a.tokens})")
    if a.seed < 0:
        p.error("--seed must be >= 0")
    if a.prefix and not a.prefix.endswith("."):
        a.prefix += "."
    if a.out is None:
        a.out = REPO / "tests" / "fixtures" / "gdn" / f"gdn-{a.geometry}-t{a.tokens}-s{a.seed}.safetensors"
    if a.out.exists() and not a.force:
        p.error(f"{a.out} exists (use --force to overwrite)")
    return a, geo


def load_model_code():
    """The modeling module, the GDN class, the text config class, and which model family it is."""
    try:
        from transformers.models.qwen3_5 import modeling_qwen3_5 as m
        from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig as cfg

        return m, m.Qwen3_5GatedDeltaNet, cfg, "qwen3_5"
    except (ImportError, AttributeError) as e:
        print(f"gen_gdn_fixture: no Qwen3.5 in this transformers ({e}); falling back to Qwen3-Next", file=sys.stderr)
    try:
        from transformers.models.qwen3_next import modeling_qwen3_next as m
        from transformers.models.qwen3_next.configuration_qwen3_next import Qwen3NextConfig as cfg

        return m, m.Qwen3NextGatedDeltaNet, cfg, "qwen3_next"
    except (ImportError, AttributeError) as e:
        die(f"this transformers has neither Qwen3_5GatedDeltaNet nor Qwen3NextGatedDeltaNet ({e})")


# The torch reference functions of the GDN layer, by role, under the names transformers has used for
# them; and the names of the optimised implementations that must not run.
TORCH_FUNCTIONS = {
    "conv_prefill": ["causal_conv1d_fn", "torch_causal_conv1d_fn"],
    "conv_decode": ["causal_conv1d_update", "torch_causal_conv1d_update"],
    "rule_chunk": ["torch_chunk_gated_delta_rule"],
    "rule_recurrent": ["torch_recurrent_gated_delta_rule"],
}
FAST_NAMES = ["causal_conv1d_fn", "causal_conv1d_update", "chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule"]
INSTANCE_ATTRS = ["causal_conv1d_fn", "causal_conv1d_update", "chunk_gated_delta_rule", "recurrent_gated_delta_rule"]


def force_torch_paths(modeling):
    """Rebinds the modeling module's GDN functions to transformers' own torch implementations,
    wrapped to count their calls. Returns (counts, wrappers)."""
    counts = {role: 0 for role in TORCH_FUNCTIONS}
    wrappers = set()
    src = os.path.realpath(modeling.__file__)

    def ours(fn):
        code = getattr(fn, "__code__", None)
        return code is not None and os.path.realpath(code.co_filename) == src

    def counted(role, fn):
        sig = inspect.signature(fn)
        takes_any = any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())

        def wrapper(*args, **kwargs):
            counts[role] += 1
            if not takes_any:  # as transformers' own dispatch wrapper does
                kwargs = {k: v for k, v in kwargs.items() if k in sig.parameters}
            return fn(*args, **kwargs)

        wrapper.__name__ = f"counted_{fn.__name__}"
        wrappers.add(wrapper)
        return wrapper

    found = {}
    for role, names in TORCH_FUNCTIONS.items():
        for name in names:
            fn = getattr(modeling, name, None)
            if not callable(fn):
                continue
            base = inspect.unwrap(fn)  # transformers' dispatch wrapper keeps the torch function as __wrapped__
            if ours(base):
                setattr(modeling, name, counted(role, base))
                found.setdefault(role, name)
    # Optimised implementations imported under these names (older transformers): unbind them, so the
    # layer's constructor picks the torch ones.
    for name in FAST_NAMES:
        fn = getattr(modeling, name, None)
        if fn is not None and fn not in wrappers and not ours(inspect.unwrap(fn)):
            setattr(modeling, name, None)
    if hasattr(modeling, "is_fast_path_available"):
        modeling.is_fast_path_available = False
    missing = [r for r in ("rule_chunk", "rule_recurrent") if r not in found]
    if missing:
        die(f"could not find transformers' torch {', '.join(missing)} in {modeling.__name__}: this transformers is not supported")
    return counts, wrappers, found


def check_instance(layer, wrappers):
    """Older transformers bind the implementations in __init__: refuse any that is not a torch path."""
    for attr in INSTANCE_ATTRS:
        v = layer.__dict__.get(attr, None)
        if v is not None and v not in wrappers:
            die(f"the layer's {attr} is {v!r}, not transformers' torch implementation; cannot force the torch path")


def make_config(cfg_cls, geo):
    kw = dict(
        hidden_size=geo["hidden"],
        num_hidden_layers=1,
        layer_types=["linear_attention"],
        linear_num_key_heads=geo["nk"],
        linear_num_value_heads=geo["nv"],
        linear_key_head_dim=geo["dk"],
        linear_value_head_dim=geo["dv"],
        linear_conv_kernel_dim=geo["ck"],
        rms_norm_eps=RMS_NORM_EPS,
        hidden_act="silu",
    )
    try:
        return cfg_cls(**kw)
    except Exception as e:  # noqa: BLE001 - report whatever the config class refuses
        die(f"{cfg_cls.__name__}({kw}) failed: {e}")


def make_cache(cfg, modeling):
    """The cache the model itself would build: the model-specific class where this transformers has
    one, else DynamicCache(config=...) (transformers >= 5.x builds linear-attention layers from it)."""
    for name in ("Qwen3_5DynamicCache", "Qwen3NextDynamicCache"):
        cls = getattr(modeling, name, None)
        if cls is not None:
            return cls(config=cfg), name
    from transformers.cache_utils import DynamicCache

    try:
        return DynamicCache(config=cfg), "DynamicCache(config=...)"
    except TypeError as e:
        die(f"cannot build a cache for the layer: DynamicCache(config=...) failed: {e}")


def cache_states(cache):
    """(conv_state, recurrent_state) of layer 0, batch entry 0: (conv_dim, k) and (nv, dk, dv)."""
    layers = getattr(cache, "layers", None)
    if layers and hasattr(layers[0], "recurrent_states"):
        conv, rec = layers[0].conv_states[0], layers[0].recurrent_states[0]
    else:  # older per-model caches: lists indexed by layer
        conv, rec = cache.conv_states[0], cache.recurrent_states[0]
    return conv[0], rec[0]


def main():
    args, geo = parse_args()
    import torch
    import transformers
    from safetensors.torch import save_file

    torch.set_grad_enabled(False)
    torch.manual_seed(args.seed)  # the constructor draws A_log; we overwrite it, but keep runs reproducible
    modeling, gdn_cls, cfg_cls, family = load_model_code()
    counts, wrappers, found = force_torch_paths(modeling)

    hidden, nk, nv, dk, dv, ck = (geo[k] for k in ("hidden", "nk", "nv", "dk", "dv", "ck"))
    T = args.tokens
    key_dim, value_dim = nk * dk, nv * dv
    conv_dim = 2 * key_dim + value_dim
    r = nv // nk

    cfg = make_config(cfg_cls, geo)
    layer = gdn_cls(cfg, layer_idx=0).to(dtype=torch.float32, device="cpu").eval()
    check_instance(layer, wrappers)

    # Seeded weights in realistic ranges (the same recipe as klab::ref::gdn::random_weights):
    # projections U(-1,1)/sqrt(fan_in); A_log = log U(1,16); dt_bias = log(expm1(U(1e-3,1e-1))), so
    # softplus(dt_bias) spans 1e-3..1e-1; conv U(-1,1)/sqrt(ck); norm 1 + 0.1 U(-1,1).
    gen = torch.Generator().manual_seed(args.seed)

    def U(shape, lo, hi):
        return (lo + (hi - lo) * torch.rand(shape, generator=gen, dtype=torch.float64)).to(torch.float32)

    sh, sv, sc = 1 / math.sqrt(hidden), 1 / math.sqrt(value_dim), 1 / math.sqrt(ck)
    W = {
        "in_proj_qkv.weight": U((conv_dim, hidden), -sh, sh),
        "in_proj_z.weight": U((value_dim, hidden), -sh, sh),
        "in_proj_b.weight": U((nv, hidden), -sh, sh),
        "in_proj_a.weight": U((nv, hidden), -sh, sh),
        "out_proj.weight": U((hidden, value_dim), -sv, sv),
        "A_log": torch.log(U((nv,), 1.0, 16.0)),
        "dt_bias": torch.log(torch.expm1(U((nv,), 1e-3, 1e-1))),
        "conv1d.weight": U((conv_dim, 1, ck), -sc, sc),
        "norm.weight": 1 + 0.1 * U((dv,), -1.0, 1.0),
    }
    params = dict(layer.named_parameters())
    if family == "qwen3_5":
        for name, value in W.items():
            if name not in params or tuple(params[name].shape) != tuple(value.shape):
                die(f"{gdn_cls.__name__} has no parameter {name} of shape {tuple(value.shape)} "
                    f"(it has: {', '.join(f'{k}{tuple(v.shape)}' for k, v in params.items())})")
            params[name].copy_(value)
        converted = ""
    else:
        # Qwen3-Next fuses the projections per key head: in_proj_qkvz rows are, for each key head g,
        # [q_g (dk), k_g (dk), v_g (r*dv), z_g (r*dv)]; in_proj_ba rows [b_g (r), a_g (r)], r = nv/nk.
        Wq, Wk, Wv = W["in_proj_qkv.weight"].split([key_dim, key_dim, value_dim])
        qkvz = [torch.cat([Wq[g * dk:(g + 1) * dk], Wk[g * dk:(g + 1) * dk], Wv[g * r * dv:(g + 1) * r * dv],
                           W["in_proj_z.weight"][g * r * dv:(g + 1) * r * dv]]) for g in range(nk)]
        ba = [torch.cat([W["in_proj_b.weight"][g * r:(g + 1) * r], W["in_proj_a.weight"][g * r:(g + 1) * r]]) for g in range(nk)]
        fused = {"in_proj_qkvz.weight": torch.cat(qkvz), "in_proj_ba.weight": torch.cat(ba)}
        for name in ("out_proj.weight", "A_log", "dt_bias", "conv1d.weight", "norm.weight"):
            fused[name] = W[name]
        for name, value in fused.items():
            if name not in params or tuple(params[name].shape) != tuple(value.shape):
                die(f"{gdn_cls.__name__} has no parameter {name} of shape {tuple(value.shape)}")
            params[name].copy_(value)
        converted = "in_proj_qkvz / in_proj_ba packed per key head from the split Qwen3.5 weights stored here"

    h = torch.randn((T, hidden), generator=gen, dtype=torch.float32)
    cache, cache_kind = make_cache(cfg, modeling)

    ys = []
    for t in range(T):
        out = layer(h[t].view(1, 1, hidden), cache_params=cache)
        if isinstance(out, tuple):
            out = out[0]
        ys.append(out.reshape(hidden).clone())
    y = torch.stack(ys)

    # The path actually taken: one prefill step, then T-1 decode steps, all through the torch code.
    expect_calls = {"rule_chunk": 1, "rule_recurrent": T - 1}
    if "conv_decode" in found:
        expect_calls["conv_decode"] = T - 1
    wrong = {k: (counts[k], v) for k, v in expect_calls.items() if counts[k] != v}
    if wrong:
        die(f"unexpected code path: calls (got, expected) {wrong}; all counts {counts}")

    conv, rec = cache_states(cache)
    if tuple(rec.shape) != (nv, dk, dv):
        die(f"recurrent state has shape {tuple(rec.shape)}, expected (nv, dk, dv) = {(nv, dk, dv)}")
    if conv.shape[0] != conv_dim or conv.shape[1] not in (ck, ck - 1):
        die(f"conv state has shape {tuple(conv.shape)}, expected (conv_dim, ck) = {(conv_dim, ck)}")
    hist = conv[:, conv.shape[1] - (ck - 1):].transpose(0, 1).contiguous()  # (ck-1, conv_dim), oldest first
    # The newest frame must be the last token's raw projection: checks the layout read above.
    xc_last = torch.nn.functional.linear(h[T - 1], W["in_proj_qkv.weight"])
    if ck > 1 and not torch.allclose(hist[-1], xc_last, rtol=1e-5, atol=1e-6):
        die("the conv state's newest frame is not the last token's in_proj_qkv output: unknown conv state layout")
    if not (torch.isfinite(y).all() and torch.isfinite(rec).all()):
        die("non-finite outputs or state")

    tensors = {args.prefix + k: v.contiguous() for k, v in W.items()}
    tensors.update({
        "inputs.h": h.contiguous(),
        "expect.y": y.contiguous(),
        "expect.S": rec.to(torch.float32).contiguous(),
        "expect.hist": hist.to(torch.float32).contiguous(),
    })
    meta = {
        "format": "klab-gdn-fixture/1",
        "generator": "scripts/gen_gdn_fixture.py",
        "geometry": args.geometry,
        "hidden": str(hidden), "nk": str(nk), "nv": str(nv), "dk": str(dk), "dv": str(dv), "ck": str(ck),
        "rms_norm_eps": repr(RMS_NORM_EPS),
        "tokens": str(T),
        "seed": str(args.seed),
        "layer_prefix": args.prefix,
        "class": f"{gdn_cls.__module__}.{gdn_cls.__name__}",
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "device": "cpu",
        "dtype": "float32",
        "cache": cache_kind,
        "path": "token 0: prefill (causal_conv1d_fn + torch_chunk_gated_delta_rule); tokens 1..T-1: decode "
                "(causal_conv1d_update + torch_recurrent_gated_delta_rule); torch implementations forced, "
                "USE_HUB_KERNELS=0",
        "calls": ", ".join(f"{k}={v}" for k, v in counts.items()),
        "inputs": "h ~ N(0, 1)",
        "weights": "projections U(-1,1)/sqrt(fan_in); A_log = log U(1,16); dt_bias = log(expm1(U(1e-3,1e-1))); "
                   "conv U(-1,1)/sqrt(ck); norm 1 + 0.1 U(-1,1)",
        "layout.expect.S": "(nv, dk, dv) = HF recurrent_states[0][0] after the last token",
        "layout.expect.hist": "(ck-1, conv_dim) oldest frame first, pre-SiLU = HF conv_states[0][0, :, 1:].T after the last token",
    }
    if converted:
        meta["weights.converted"] = converted

    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(args.out.name + f".tmp.{os.getpid()}")
    save_file(tensors, str(tmp), metadata=meta)
    os.chmod(tmp, 0o644)  # safetensors creates it private; a fixture is meant to be committed and shared
    os.replace(tmp, args.out)

    print(f"gen_gdn_fixture: {meta['class']} (transformers {transformers.__version__}, torch {torch.__version__}), cache {cache_kind}")
    print(f"  geometry {args.geometry}: hidden={hidden} nk={nk} nv={nv} dk={dk} dv={dv} ck={ck} eps={RMS_NORM_EPS}; {T} tokens, seed {args.seed}")
    print(f"  calls: {meta['calls']}")
    print(f"  max|y| {y.abs().max().item():.4g}, rms(y) {y.pow(2).mean().sqrt().item():.4g}, max|S| {rec.abs().max().item():.4g}")
    print(f"  wrote {args.out} ({args.out.stat().st_size} bytes, {len(tensors)} tensors)")
    print(f"  check: klab gdn --weights {args.out} --expect {args.out}")


if __name__ == "__main__":
    main()
