#!/usr/bin/env python3
"""Did a change alter the machine code of kernels it was not meant to touch? Compares the SASS of two
builds of CUDA code, kernel by kernel, standard library only.

    scripts/sass_diff.py OLD NEW [--only REGEX] [--show N] [--flags-off] [--ignore-params]

OLD and NEW: object files, libraries or executables with device code (cuobjdump -sass reads them),
or text files that hold cuobjdump -sass output already (a file whose first bytes are text). cuobjdump
is looked for in $CUOBJDUMP, on PATH and in /usr/local/cuda/bin (it needs nvdisasm beside it or on
PATH; Debian's CUDA toolkit may lack both: pip's nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm
wheels carry them).

Kernels are matched by mangled name with the anonymous-namespace tag nvcc derives from the file path
(_GLOBAL__N__<hash>_<n>_<file>_cu_<hash>) taken out, so a file compiled from another path still
matches. --flags-off: a kernel that gained trailing bool template parameters, all false (a new
template flag, off by default), matches its old instance (..ELi4ELb0EE.. as ..ELi4EE..).
--ignore-params: names are compared without their parameter list (a kernel that gained an argument
matches its old self; a template's instances stay apart). An instruction is its text without its address and encoding; branch targets (addresses)
are taken out too. Per kernel in both builds: "identical" (every instruction the same, in order), or
"changed" with the instruction counts and the first differing lines (--show, default 8); kernels
only in one build are listed as such (a new template instance is not a change of an old one).
--only keeps the kernels whose (tag-free) name matches REGEX.

Exit status: 0 every kernel in both builds identical; 1 some kernel changed; 2 bad input (a file
missing or unreadable, cuobjdump missing or failing, no kernel found in a build), nothing compared.
Used for klab's claims that a change "keeps the SASS instruction for instruction" (e.g. the
template-flag variants of variants/q4_gemv/packed.cu, 2026-12-01).
"""
import difflib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")
BRANCH = re.compile(r"^(@!?U?P\w+\s+)?(BRA|BRX|BSSY|CALL|JMP|JMX|RET|BREAK|SSY|PBK|PCNT|WARPSYNC)\b")
HEX = re.compile(r"0x[0-9a-f]+")


class SassError(Exception):
    pass


def find_cuobjdump():
    for c in (os.environ.get("CUOBJDUMP"), shutil.which("cuobjdump"), "/usr/local/cuda/bin/cuobjdump"):
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return c
    raise SassError("cuobjdump not found ($CUOBJDUMP, PATH, /usr/local/cuda/bin); pip's nvidia-cuda-cuobjdump and "
                    "nvidia-cuda-nvdisasm wheels carry it and the nvdisasm it needs")


def is_text(path):
    with open(path, "rb") as f:
        head = f.read(4096)
    return b"\0" not in head and (b"Function" in head or b"code for sm_" in head or b"Fatbin" in head or not head.startswith(b"\x7fELF"))


def sass_text(path):
    p = Path(path)
    if not p.is_file():
        raise SassError(f"{path}: no such file")
    try:
        if is_text(p):
            return p.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise SassError(f"{path}: {e.strerror}")
    exe = find_cuobjdump()
    r = subprocess.run([exe, "-sass", str(p)], capture_output=True, text=True)
    if r.returncode != 0:
        raise SassError(f"{path}: cuobjdump failed: {(r.stderr or r.stdout).strip()[:300]}")
    return r.stdout


class _Mangled:
    """Just enough of the Itanium mangling to walk a kernel's name: nested names, length-prefixed
    identifiers, substitutions, builtin types and the literals of non-type template arguments."""

    def __init__(self, s):
        self.s, self.i = s, 0

    def peek(self):
        return self.s[self.i] if self.i < len(self.s) else ""

    def take(self, c):
        if self.peek() != c:
            raise ValueError(f"expected {c!r} at {self.i}")
        self.i += 1

    def source(self):
        j = self.i
        while self.peek().isdigit():
            self.i += 1
        n = int(self.s[j:self.i])
        ident = self.s[self.i:self.i + n]
        if len(ident) != n:
            raise ValueError("short identifier")
        self.i += n
        return ident

    def subst(self):
        self.take("S")
        if self.peek() == "t":
            self.i += 1
            return
        while self.peek() and self.peek() != "_":
            self.i += 1
        self.take("_")

    def nested(self):
        self.take("N")
        while self.peek() != "E":
            if self.peek() == "S":
                self.subst()
            elif self.peek().isdigit():
                self.source()
            else:
                raise ValueError("unexpected in a nested name")
        self.take("E")

    def type(self):
        while self.peek() in ("P", "K", "R", "V"):
            self.i += 1
        c = self.peek()
        if c == "N":
            self.nested()
        elif c == "S":
            self.subst()
        elif c.isdigit():
            self.source()
        elif c and c.isalpha():
            self.i += 1  # a builtin type (i, b, f, h, x, ...)
        else:
            raise ValueError("no type")

    def arg(self):
        start = self.i
        if self.peek() == "L":
            self.i += 1
            self.nested() if self.peek() == "N" else self.type()
            if self.peek() == "n":
                self.i += 1
            while self.peek().isdigit():
                self.i += 1
            self.take("E")
        else:
            self.type()
        return self.s[start:self.i]


def split_mangled(name):
    """A kernel's mangled name _ZN <components> [I <args> E] E <params> as (components, args, params):
    components the length-prefixed names, nvcc's anonymous-namespace tag as "_ANON_"; args the
    template arguments, each as written; params the rest. None for a name of another form."""
    if not name.startswith("_ZN"):
        return None
    m = _Mangled(name)
    m.i = 3
    comps, args = [], []
    try:
        while m.peek().isdigit():
            comp = m.source()
            comps.append("_ANON_" if comp.startswith("_GLOBAL__N_") else comp)
        if m.peek() == "I":
            m.i += 1
            while m.peek() != "E":
                args.append(m.arg())
            m.take("E")
        m.take("E")
    except (ValueError, IndexError):
        return None
    return comps, args, name[m.i:]


def normalize(name, flags_off=False, ignore_params=False, defaults=()):
    """The mangled name as a matching key: without nvcc's anonymous-namespace tag; with flags_off,
    without its trailing false bool template arguments (Lb0E); without trailing template arguments
    named in defaults (a new parameter's default value, e.g. Li1E for int 1), interleaved with those;
    with ignore_params, without its parameter list (and the return type a template instance carries)."""
    parts = split_mangled(name)
    if parts is None:
        return name
    comps, args, params = parts
    while args and ((flags_off and args[-1] == "Lb0E") or args[-1] in defaults):
        args.pop()
    key = "::".join(comps) + ("<" + ",".join(args) + ">" if args else "")
    if not ignore_params:
        key += "(" + (params[1:] if parts[1] and params.startswith("v") else params) + ")"
    return key


def kernels(text, where, flags_off=False, ignore_params=False, defaults=()):
    """{normalized name: [instructions]} in the order of the dump."""
    out, cur = {}, None
    for line in text.splitlines():
        m = FUNCTION.match(line)
        if m:
            cur = normalize(m.group(1), flags_off, ignore_params, defaults)
            if cur in out:
                raise SassError(f"{where}: two kernels read as {cur} (drop --flags-off / --ignore-params, or narrow with --only)")
            out[cur] = []
            continue
        m = INSTRUCTION.match(line)
        if m and cur is not None:
            ins = re.sub(r"\s+", " ", m.group(1))
            if BRANCH.match(ins):
                ins = HEX.sub("ADDR", ins)
            out[cur].append(ins)
    if not out:
        raise SassError(f"{where}: no kernel (no 'Function :' section) in its SASS")
    return out


def compare(old, new, only=None, show=8):
    """(lines, changed): a report line per kernel and whether any kernel in both builds changed."""
    keep = (lambda n: re.search(only, n) is not None) if only else (lambda n: True)
    lines, changed = [], False
    both = [n for n in old if n in new and keep(n)]
    for n in both:
        a, b = old[n], new[n]
        if a == b:
            lines.append(f"identical  {n}  ({len(a)} instructions)")
            continue
        changed = True
        diff = [d for d in difflib.unified_diff(a, b, lineterm="", n=0) if not d.startswith(("---", "+++", "@@"))]
        lines.append(f"CHANGED    {n}  ({len(a)} -> {len(b)} instructions, {len(diff)} lines differ)")
        lines += [f"             {d}" for d in diff[:show]]
    lines += [f"only old   {n}" for n in old if n not in new and keep(n)]
    lines += [f"only new   {n}" for n in new if n not in old and keep(n)]
    if not both:
        lines.append("no kernel in both builds" + (f" matching {only!r}" if only else ""))
    return lines, changed


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(prog="sass_diff.py", description="Compare the SASS of two builds, kernel by kernel.")
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--only", help="only kernels whose name matches this regular expression")
    ap.add_argument("--show", type=int, default=8, help="differing lines shown per changed kernel (default 8)")
    ap.add_argument("--flags-off", action="store_true", help="match a kernel with trailing false bool template flags to its old instance")
    ap.add_argument("--ignore-params", action="store_true", help="match kernels by name and template arguments, not parameters")
    ap.add_argument("--default-arg", action="append", default=[], metavar="ARG",
                    help="match a kernel with trailing template arguments ARG (mangled, e.g. Li1E: a new int parameter's default 1) "
                         "to its old instance; repeatable")
    try:
        args = ap.parse_args(argv[1:])
    except SystemExit as e:
        return 2 if e.code else 0
    if args.only:
        try:
            re.compile(args.only)
        except re.error as e:
            print(f"sass_diff.py: --only {args.only!r}: not a regular expression ({e})", file=sys.stderr)
            return 2
    try:
        old = kernels(sass_text(args.old), args.old, args.flags_off, args.ignore_params, tuple(args.default_arg))
        new = kernels(sass_text(args.new), args.new, args.flags_off, args.ignore_params, tuple(args.default_arg))
    except SassError as e:
        print(f"sass_diff.py: {e}; nothing compared", file=sys.stderr)
        return 2
    lines, changed = compare(old, new, args.only, args.show)
    try:
        print("\n".join(lines))
    except BrokenPipeError:  # a reader that stopped early (| head): the status still says what was found
        sys.stdout = None
        return 1 if changed else 0
    same = sum(1 for l in lines if l.startswith("identical"))
    print(f"{same} identical, {sum(1 for l in lines if l.startswith('CHANGED'))} changed, "
          f"{sum(1 for l in lines if l.startswith('only old'))} only in old, {sum(1 for l in lines if l.startswith('only new'))} only in new")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
