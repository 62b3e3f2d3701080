#!/usr/bin/env python3
"""scripts/pack_carry.py on a throwaway git repository with stand-in binaries (shell scripts whose `env` prints the
commit they claim to be built from and exits 4, as klab does without a GPU): the archive and bin.commit from a clean tree built at HEAD; refusals (exit 2, no
archive written, an earlier archive untouched) for uncommitted tracked changes, binaries of another commit, binaries
stamped dirty, and a missing binary; --allow-dirty packs a dirty tree.

    /usr/bin/python3 tests/scripts/test_pack_carry.py     (ctest: the "scripts-pack-carry" test)
"""
import json
import subprocess
import sys
import tarfile
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "pack_carry.py"


def sh(cwd, *args):
    return subprocess.run(list(args), cwd=cwd, check=True, capture_output=True, text=True).stdout


class PackCarry(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.repo = Path(self.tmp.name) / "repo"
        self.repo.mkdir()
        sh(self.repo, "git", "init", "-q")
        sh(self.repo, "git", "config", "user.email", "t@example.com")
        sh(self.repo, "git", "config", "user.name", "t")
        (self.repo / ".gitignore").write_text("build/\n.carry/\n")
        (self.repo / "a.txt").write_text("one\n")
        sh(self.repo, "git", "add", "-A")
        sh(self.repo, "git", "commit", "-qm", "first")
        self.head = sh(self.repo, "git", "rev-parse", "HEAD").strip()

    def tearDown(self):
        self.tmp.cleanup()

    def stand_ins(self, commit, dirty=False, only=None):
        bin_dir = self.repo / "build" / "dev" / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        for name in only or ("klab", "klab_gpu_tests"):
            p = bin_dir / name
            # as klab on a machine without a GPU: its JSON on stdout, then exit 4 (a skip)
            p.write_text("#!/bin/sh\necho '" + json.dumps({"git_commit": commit, "git_dirty": dirty}) + "'\nexit 4\n")
            p.chmod(0o755)

    def run_script(self, *extra):
        return subprocess.run([sys.executable, str(SCRIPT), "--no-build", *extra], cwd=self.repo, capture_output=True, text=True)

    def test_packs_a_clean_tree_built_at_head(self):
        self.stand_ins(self.head)
        r = self.run_script()
        self.assertEqual(r.returncode, 0, r.stderr)
        txz = self.repo / ".carry" / "bin.txz"
        with tarfile.open(txz) as t:
            names = set(t.getnames())
        self.assertTrue({"bin", "bin/klab", "bin/klab_gpu_tests"} <= names, names)
        self.assertEqual((self.repo / ".carry" / "bin.commit").read_text().strip(), self.head[:7])
        self.assertEqual([p.name for p in (self.repo / ".carry").iterdir() if p.is_dir()], [])  # no staging left behind

    def refused(self, *extra, says):
        r = self.run_script(*extra)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn(says, r.stderr)
        return r

    def test_refuses_uncommitted_changes_and_keeps_the_old_archive(self):
        self.stand_ins(self.head)
        self.assertEqual(self.run_script().returncode, 0)
        txz = self.repo / ".carry" / "bin.txz"
        before = txz.read_bytes()
        (self.repo / "a.txt").write_text("two\n")
        self.refused(says="a.txt")
        self.assertEqual(txz.read_bytes(), before)

    def test_refuses_binaries_of_another_commit(self):
        self.stand_ins("0" * 40)
        self.refused(says=f"HEAD is {self.head[:12]}")
        self.assertFalse((self.repo / ".carry" / "bin.txz").exists())

    def test_refuses_binaries_stamped_dirty(self):
        self.stand_ins(self.head, dirty=True)
        self.refused(says="uncommitted changes")
        self.assertFalse((self.repo / ".carry" / "bin.txz").exists())

    def test_refuses_a_missing_binary(self):
        self.stand_ins(self.head, only=("klab",))
        self.refused(says="klab_gpu_tests is not built")

    def test_allow_dirty_packs_a_dirty_tree(self):
        self.stand_ins(self.head, dirty=True)
        (self.repo / "a.txt").write_text("two\n")
        r = self.run_script("--allow-dirty")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("dirty tree allowed", r.stdout)


if __name__ == "__main__":
    unittest.main()
