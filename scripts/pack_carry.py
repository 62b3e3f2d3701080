#!/usr/bin/env python3
"""Packs the binaries a device call carries: OUT/bin.txz (bin/klab, bin/klab_gpu_tests, stripped, and libcupti.so.13
where the CUDA toolkit has it, for --trace) and OUT/bin.commit (the commit they were built from), from a build of HEAD.

    scripts/pack_carry.py [--build-dir build/dev] [--out .carry] [--no-build] [--allow-dirty]

Why: a report names the commit its binaries were built from (`klab env`: git_commit, git_dirty, stamped at build time).
Binaries built before the last commit carry the commit before it, marked dirty, into every report they write
(reports/h100/run-call61's header names e5a4dd2 "dirty" for fd8244e's code). So this script
  1. refuses a tree with uncommitted changes to tracked files (naming them), unless --allow-dirty;
  2. builds (`cmake --build BUILD_DIR`, which also stamps HEAD), unless --no-build;
  3. refuses binaries whose `klab env` names another commit than HEAD, or a dirty tree (unless --allow-dirty);
  4. writes bin.txz through a temporary file and renames it, so a refusal or a failure leaves no half-written archive
     (and an older bin.txz, if any, untouched until the new one is whole).
Exit 0 packed, 2 refused (the reason on stderr), 1 a step failed. The runbook's calls unpack it with
`tar xJf .carry/bin.txz -C /tmp/kb`.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

BINARIES = ("klab", "klab_gpu_tests")
CUPTI = "libcupti.so.13"


class Refused(Exception):
    pass


def git(root, *args):
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


def cupti_path():
    homes = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"]
    for home in filter(None, homes):
        for sub in ("lib64", "extras/CUPTI/lib64", "targets/x86_64-linux/lib"):
            p = Path(home) / sub / CUPTI
            if p.is_file():
                return p
    return None


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def pack(root, build_dir, out, build=True, allow_dirty=False, log=sys.stdout):
    head = git(root, "rev-parse", "HEAD").strip()
    changed = [line[3:] for line in git(root, "status", "--porcelain", "--untracked-files=no").splitlines() if line.strip()]
    if changed and not allow_dirty:
        raise Refused("uncommitted changes to tracked files (commit them, or pass --allow-dirty): " + ", ".join(changed))
    if build:
        subprocess.run(["cmake", "--build", str(build_dir)], check=True)
    bins = [build_dir / "bin" / name for name in BINARIES]
    for b in bins:
        if not b.is_file():
            raise Refused(f"{b} is not built (cmake --preset dev && cmake --build --preset dev)")
    # `klab env` prints its JSON and, without a GPU (as here, where the binaries are built), exits 4 (a skip): the JSON counts.
    env = json.loads(subprocess.run([str(bins[0]), "env"], capture_output=True, text=True).stdout)
    built, dirty = env.get("git_commit", ""), bool(env.get("git_dirty", True))
    if built != head:
        raise Refused(f"the binaries are of {built[:12] or 'no commit'}{' (dirty)' if dirty else ''}, HEAD is {head[:12]}: build again")
    if dirty and not allow_dirty:
        raise Refused(f"the binaries were built from {head[:12]} with uncommitted changes: commit, then build again")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        stage = Path(tmp) / "bin"
        stage.mkdir()
        for b in bins:
            dst = stage / b.name
            shutil.copy2(b, dst)
            if is_elf(dst):
                subprocess.run(["strip", str(dst)], check=True)
        cupti = cupti_path()
        if cupti:
            shutil.copy2(cupti, stage / CUPTI)
        else:
            print(f"pack_carry: no {CUPTI} in the CUDA toolkit: klab run --trace will say so on the device", file=log)
        part = Path(tmp) / "bin.txz"
        with tarfile.open(part, "w:xz") as t:
            t.add(stage, arcname="bin")
        os.replace(part, out / "bin.txz")
    (out / "bin.commit").write_text(head[:7] + "\n")
    size = (out / "bin.txz").stat().st_size
    print(f"pack_carry: {out / 'bin.txz'} ({size / 2**20:.1f} MiB) from {head[:12]}"
          f"{' (dirty tree allowed)' if changed else ''}; carry it with the call's script", file=log)
    return out / "bin.txz"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default="build/dev")
    ap.add_argument("--out", default=".carry")
    ap.add_argument("--no-build", action="store_true", help="pack what is built; still refuses binaries of another commit")
    ap.add_argument("--allow-dirty", action="store_true", help="pack binaries of a tree with uncommitted changes (say so in the report)")
    a = ap.parse_args(argv)
    try:
        root = Path(git(Path.cwd(), "rev-parse", "--show-toplevel").strip())
    except subprocess.CalledProcessError:
        print("pack_carry: not inside a git work tree", file=sys.stderr)
        return 2
    build_dir = Path(a.build_dir) if Path(a.build_dir).is_absolute() else root / a.build_dir
    out = Path(a.out) if Path(a.out).is_absolute() else root / a.out
    try:
        pack(root, build_dir, out, build=not a.no_build, allow_dirty=a.allow_dirty)
    except Refused as e:
        print(f"pack_carry: refused: {e}", file=sys.stderr)
        return 2
    except (subprocess.CalledProcessError, OSError, json.JSONDecodeError) as e:
        print(f"pack_carry: failed: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
