#!/usr/bin/env python3
"""Every Claim an experiment source declares is stated in that file's claims list.

An experiment that settles a claim it does not state fails at run time, after its timed work ("settles claim X but
states only ..."), losing the run's report: on the lent device that is minutes of a 30-minute budget. This reads
experiments/*.cpp: each `Claim NAME{"id", ...}` must have NAME inside a `claims = {...}` list of the same file, or be
added to one by `claims.push_back(NAME)`.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
DECL = re.compile(r"\bClaim\s+(\w+)\s*\{")
LIST = re.compile(r"\bclaims\s*=\s*\{([^}]*)\}", re.S)
PUSH = re.compile(r"\bclaims\.(?:push|emplace)_back\(\s*(\w+)\s*\)")


def unstated(text):
    declared = DECL.findall(text)
    stated = set()
    for body in LIST.findall(text):
        stated.update(re.findall(r"\w+", body))
    stated.update(PUSH.findall(text))
    return [name for name in declared if name not in stated]


def main():
    # The check itself, on sources of known shape: one stated, one not.
    sample = 'const Claim kA{"a", "x"};\nconst Claim kB{"b", "y"};\nE e{.claims = {kA}, .run = f};\n'
    assert unstated(sample) == ["kB"], unstated(sample)
    assert unstated('const Claim kA{"a"};\n  e.claims = {kA,\n  kZ};\n') == []
    assert unstated('const Claim kA{"a"};\n  if (c) e.claims.push_back(kA);\n') == []
    files = sorted((ROOT / "experiments").glob("*.cpp"))
    assert files, "no experiment sources under " + str(ROOT / "experiments")
    bad = []
    seen = 0
    for f in files:
        text = f.read_text()
        seen += len(DECL.findall(text))
        bad += [f"{f.relative_to(ROOT)}: {name}" for name in unstated(text)]
    assert seen > 50, f"only {seen} Claim declarations found: the pattern no longer matches the sources"
    if bad:
        print("claims declared but not in their experiment's claims list:\n  " + "\n  ".join(bad))
        return 1
    print(f"{seen} claims in {len(files)} experiment sources, each stated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
