#!/usr/bin/env python3
"""The import structure: reference and harness at the bottom, then variants, experiments, catalog,
apps; no include reaches up. Every C++/CUDA file under a layer's folder is scanned; each
`#include "X"` (or <X>) is resolved the way the build resolves it (the including file's folder
first, then every layer's include root) and the layer of the file it names must not sit above the
includer's. Includes that name no file of ours (std, CUDA, Eigen, ...) are ignored. tests/ and
fuzz/ may use everything and are not scanned.

    /usr/bin/python3 tests/scripts/test_layers.py      (ctest: the "layers" test)
    /usr/bin/python3 tests/scripts/test_layers.py --list   (print every upward include and exit 1)
"""
import re
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# (layer, folder, include root), bottom up: a file may include files of its own layer or below.
# reference depends on nothing of ours, so it sits under harness.
LAYERS = [
    ("reference", "reference", "reference/include"),
    ("harness", "harness", "harness/include"),
    ("variants", "variants", "variants"),
    ("experiments", "experiments", "experiments"),
    ("catalog", "catalog", "catalog/include"),
    ("apps", "apps", None),  # apps/NAME/: each program includes its own folder's files only
]
RANK = {name: i for i, (name, _, _) in enumerate(LAYERS)}
SOURCES = {".hpp", ".h", ".cuh", ".cpp", ".cu", ".cc", ".inl"}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)


def layer_of(root, path):
    rel = path.resolve().relative_to(root.resolve()).parts
    for name, folder, _ in LAYERS:
        if rel[: len(Path(folder).parts)] == Path(folder).parts:
            return name
    return None


def resolve(root, includer, name):
    """The file `#include name` in `includer` names, or None when it is none of ours."""
    cands = [includer.parent / name] + [root / inc / name for _, _, inc in LAYERS if inc]
    for c in cands:
        if c.is_file():
            return c
    return None


def upward_includes(root):
    """[(includer, line, include, includer's layer, included file's layer)] for every include that reaches up."""
    root = Path(root)
    bad = []
    for name, folder, _ in LAYERS:
        base = root / folder
        if not base.is_dir():
            continue
        for f in sorted(base.rglob("*")):
            if f.suffix not in SOURCES or not f.is_file():
                continue
            text = f.read_text(errors="replace")
            for m in INCLUDE.finditer(text):
                target = resolve(root, f, m.group(1))
                if target is None:
                    continue
                to = layer_of(root, target)
                if to is not None and RANK[to] > RANK[name]:
                    line = text.count("\n", 0, m.start()) + 1
                    bad.append((str(f.relative_to(root)), line, m.group(1), name, to))
    return bad


def fmt(bad):
    return "\n".join("%s:%d: #include \"%s\": %s reaches up to %s" % b for b in bad)


class Layers(unittest.TestCase):
    def test_no_include_reaches_up(self):
        bad = upward_includes(ROOT)
        self.assertEqual(bad, [], "includes that reach up a layer:\n" + fmt(bad))

    def test_the_scan_sees_every_layer(self):
        # Guards the scan itself: each layer's folder exists, so a move cannot silently empty it.
        for name, folder, inc in LAYERS:
            self.assertTrue((ROOT / folder).is_dir(), folder)
            if inc:
                self.assertTrue((ROOT / inc).is_dir(), inc)

    def test_an_upward_include_is_caught(self):
        # A tree with one include per forbidden direction, and the allowed ones beside them.
        with tempfile.TemporaryDirectory() as d:
            r = Path(d)
            files = {
                "reference/include/klab/ref/a.hpp": '#include <vector>\n',
                "reference/src/a.cpp": '#include "klab/ref/a.hpp"\n#include "klab/h.hpp"\n',  # up: harness
                "harness/include/klab/h.hpp": '#include "klab/ref/a.hpp"\n#include "fam/v.hpp"\n',  # up: variants
                "harness/src/h.cpp": '#include "klab/cat.hpp"\n',  # up: catalog
                "variants/fam/v.hpp": '#include "klab/h.hpp"\n#include "exp.hpp"\n',  # up: experiments
                "experiments/exp.hpp": '#include "fam/v.hpp"\n#include "klab/cat.hpp"\n',  # up: catalog
                "experiments/e.cpp": '#include "exp.hpp"\n#include "cli.hpp"\n',  # "cli.hpp" is no file of theirs: ignored
                "catalog/include/klab/cat.hpp": '#include "exp.hpp"\n#include "fam/v.hpp"\n',
                "apps/klab/cli.hpp": '#include "klab/cat.hpp"\n',
                "apps/klab/main.cpp": '#include "cli.hpp"\n#include "exp.hpp"\n',
            }
            for p, body in files.items():
                (r / p).parent.mkdir(parents=True, exist_ok=True)
                (r / p).write_text(body)
            got = [(f, inc, frm, to) for f, _, inc, frm, to in upward_includes(r)]
            self.assertEqual(sorted(got), sorted([
                ("reference/src/a.cpp", "klab/h.hpp", "reference", "harness"),
                ("harness/include/klab/h.hpp", "fam/v.hpp", "harness", "variants"),
                ("harness/src/h.cpp", "klab/cat.hpp", "harness", "catalog"),
                ("variants/fam/v.hpp", "exp.hpp", "variants", "experiments"),
                ("experiments/exp.hpp", "klab/cat.hpp", "experiments", "catalog"),
            ]))


if __name__ == "__main__":
    if "--list" in sys.argv:
        bad = upward_includes(ROOT)
        print(fmt(bad) or "no include reaches up")
        sys.exit(1 if bad else 0)
    unittest.main()
