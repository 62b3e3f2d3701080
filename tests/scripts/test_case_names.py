#!/usr/bin/env python3
"""Guard: every doctest case of the given binaries is one CTest test that runs it.

CMake's doctest_discover_tests (tests/CMakeLists.txt) makes one CTest test per case, passing its
name as --test-case. A name with ';' is split there (a CMake list), and each piece matches no case:
doctest runs nothing and CTest counts a pass. On 2026-12-04, 25 of klab_cpu_tests' 202 cases were
never run that way, and one of them had been failing unseen. So: no ';' in a case name, and the
listing must name at least one case (a binary that lists nothing is not a pass either). And the
binary itself (tests/filter_guard.hpp) must fail a run whose --test-case filter matches no case,
and pass one that names a case exactly (its first, run here).

    tests/scripts/test_case_names.py BIN [BIN...]
"""
import re
import subprocess
import sys


def case_names(binary):
    out = subprocess.run([binary, "--list-test-cases"], capture_output=True, text=True, check=True).stdout
    names, inside = [], False
    for line in out.splitlines():
        if line.startswith("====="):
            inside = not inside
            continue
        if inside:
            names.append(line)
    return names


def main(argv):
    if len(argv) < 2:
        print("usage: test_case_names.py BIN [BIN...]", file=sys.stderr)
        return 2
    bad = 0
    for binary in argv[1:]:
        names = case_names(binary)
        if not names:
            print(f"{binary}: lists no test case", file=sys.stderr)
            bad += 1
        for n in names:
            if ";" in n:
                print(f"{binary}: test case name has ';' (CTest would run nothing for it): {n}", file=sys.stderr)
                bad += 1
        none = subprocess.run([binary, "--test-case=klab: no case has this name"], capture_output=True, text=True)
        if none.returncode != 1 or "nothing ran" not in none.stderr:
            print(f"{binary}: a --test-case filter matching nothing gave rc={none.returncode}, not 1 with 'nothing ran': "
                  f"{none.stderr.strip()[:200]}", file=sys.stderr)
            bad += 1
        if names:
            first = names[0].replace(",", "\\,")  # doctest splits a filter at unescaped commas
            one = subprocess.run([binary, f"--test-case={first}"], capture_output=True, text=True)
            if one.returncode != 0 or not re.search(r"test cases: +1 \| +1 passed", one.stdout):
                print(f"{binary}: running its first case by name gave rc={one.returncode}: {one.stdout.strip()[-200:]}", file=sys.stderr)
                bad += 1
        print(f"{binary}: {len(names)} test cases, {bad} bad so far")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
