#!/usr/bin/env python3
"""The tracked tree stays small enough to travel to the GPU machine beside the binaries a call carries.

A device call sends the whole working tree with what it carries, 64 MiB in all (docs/DEVICE-RUNBOOK.md); klab and
klab_gpu_tests travel as a ~9.3 MiB .txz (with libcupti). So: the tracked files total at most BUDGET_MIB (the rest is the carry's),
and committed reports follow reports/SCHEMA.md ("Committed reports keep report.jsonl.gz alone"): no report-KIND.csv
or report.csv beside a report.jsonl.gz, no plain report.jsonl. On a failure the largest folders are named.
Outside a git checkout (a source tarball) it says so and passes nothing: exit 77 (ctest: skipped).

    /usr/bin/python3 tests/scripts/test_tree_budget.py   (ctest: "tree-budget")
"""
import subprocess
import sys
import unittest
from collections import Counter
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[2]
BUDGET_MIB = 56


def tracked():
    p = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, timeout=60)
    if p.returncode != 0:
        return None
    return [f for f in p.stdout.decode("utf-8", "replace").split("\0") if f]


class TreeBudget(unittest.TestCase):
    files = None

    def test_tracked_files_fit_the_budget(self):
        # Counted as an archive holds them: each file rounded up to 512-byte blocks plus a 512-byte header. The plain
        # byte sum undercounts a tree of ~2600 files by ~2 MiB: a call with 52.7 MiB of bytes and a 9.25 MiB carry
        # (62 MiB) was refused as over 64 MiB (2026-12-06); in blocks it was 54.8 + 9.25 = 64.06.
        sizes = {f: -(-(ROOT / f).stat().st_size // 512) * 512 + 512 for f in self.files if (ROOT / f).is_file()}
        total = sum(sizes.values())
        by_dir = Counter()
        for f, n in sizes.items():
            parts = PurePosixPath(f).parts
            by_dir["/".join(parts[:3]) if len(parts) > 3 else "/".join(parts[:-1]) or "."] += n
        largest = ", ".join(f"{d} {n / 2**20:.1f}" for d, n in by_dir.most_common(8))
        self.assertLessEqual(total, BUDGET_MIB * 2**20,
                             f"the tracked tree is {total / 2**20:.1f} MiB, over {BUDGET_MIB} MiB: a device call could not carry "
                             f"the binaries beside it. Largest folders (MiB): {largest}")

    def test_committed_reports_keep_their_jsonl_gzipped_alone(self):
        gz_dirs = {str(PurePosixPath(f).parent) for f in self.files if f.startswith("reports/") and f.endswith("/report.jsonl.gz")}
        views = [f for f in self.files if f.startswith("reports/") and str(PurePosixPath(f).parent) in gz_dirs
                 and PurePosixPath(f).name.endswith(".csv") and PurePosixPath(f).name.startswith("report")]
        plain = [f for f in self.files if f.startswith("reports/") and PurePosixPath(f).name == "report.jsonl"]
        self.assertEqual(views, [], "CSV views committed beside report.jsonl.gz (scripts/report_csv.py writes them again): git rm them")
        self.assertEqual(plain, [], "plain report.jsonl committed: gzip -9 -n it (the scripts read report.jsonl.gz)")


if __name__ == "__main__":
    TreeBudget.files = tracked()
    if TreeBudget.files is None:
        print("test_tree_budget.py: not a git checkout (git ls-files failed): nothing to check", file=sys.stderr)
        sys.exit(77)
    unittest.main()
