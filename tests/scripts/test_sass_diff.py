#!/usr/bin/env python3
"""scripts/sass_diff.py on small SASS dumps written here (cuobjdump -sass's layout: a Function line,
then instructions as /*addr*/ TEXT ; /* encoding */), so no cuobjdump is needed; every expected
verdict is worked out by hand from the dumps below.

    /usr/bin/python3 tests/scripts/test_sass_diff.py      (ctest: "scripts-sass-diff")
"""
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPT = HERE.parents[1] / "scripts" / "sass_diff.py"
sys.path.insert(0, str(SCRIPT.parent))
import sass_diff  # noqa: E402

# nvcc's anonymous-namespace tags for two file paths, length-prefixed as in a mangled name.
TAG_A = (lambda t: f"{len(t)}{t}")("_GLOBAL__N__9d91a44d_9_packed_cu_91933127")
TAG_B = (lambda t: f"{len(t)}{t}")("_GLOBAL__N__618ca831_18_packed_tmp_cu_91933127")


def fn(name, body):
    lines = [f"\t\tFunction : {name}", '\t.headerflags\t@"EF_CUDA_SM90"']
    for i, ins in enumerate(body):
        lines.append(f"        /*{i * 16:04x}*/                   {ins} ;   /* 0x000fe20000000800 */")
        lines.append("                                                  /* 0x000fe20000000800 */")
    return "\n".join(lines)


def dump(*fns):
    return "\n\nFatbin elf code:\n================\narch = sm_90\n\n\tcode for sm_90\n" + "\n".join(fns) + "\n"


KERNEL = ["S2R R0, SR_TID.X", "ISETP.GE.AND P0, PT, R0, 0x20, PT", "@P0 BRA 0x80", "STG.E [R2.64], R0", "EXIT"]


def mangled(tag, ident, args=""):
    # _ZN 4klab 7q4_gemv <tag> <ident> [I args E] E <params>: a template instance has a v (its return type) first
    return f"_ZN4klab7q4_gemv{tag}{len(ident)}{ident}" + (f"I{args}EEv" if args else "E") + "PKfi"


class SassDiff(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="klab-sass-test-"))

    def write(self, name, text):
        p = self.tmp / name
        p.write_text(text)
        return p

    def run_script(self, *args):
        return subprocess.run([sys.executable, str(SCRIPT)] + [str(a) for a in args], capture_output=True, text=True, timeout=60)

    def test_identical_across_file_paths_and_branch_addresses(self):
        # Another path gives another tag; the branch target moves (0x80 -> 0x90) with no other change.
        moved = KERNEL[:2] + ["@P0 BRA 0x90"] + KERNEL[3:]
        a = self.write("a.sass", dump(fn(mangled(TAG_A, "k"), KERNEL)))
        b = self.write("b.sass", dump(fn(mangled(TAG_B, "k"), moved)))
        p = self.run_script(a, b)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("identical  klab::q4_gemv::_ANON_::k(PKfi)  (5 instructions)", p.stdout)
        self.assertIn("1 identical, 0 changed, 0 only in old, 0 only in new", p.stdout)

    def test_a_changed_operand_is_a_change(self):
        other = KERNEL[:1] + ["ISETP.GE.AND P0, PT, R0, 0x40, PT"] + KERNEL[2:]
        a = self.write("a.sass", dump(fn(mangled(TAG_A, "k"), KERNEL)))
        b = self.write("b.sass", dump(fn(mangled(TAG_A, "k"), other)))
        p = self.run_script(a, b)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("CHANGED    klab::q4_gemv::_ANON_::k(PKfi)  (5 -> 5 instructions, 2 lines differ)", p.stdout)
        self.assertIn("-ISETP.GE.AND P0, PT, R0, 0x20, PT", p.stdout)
        self.assertIn("+ISETP.GE.AND P0, PT, R0, 0x40, PT", p.stdout)

    def test_a_new_false_flag_matches_with_flags_off_and_only_then(self):
        # k<4> became k<4, false> (a template flag, off): the same code.
        a = self.write("a.sass", dump(fn(mangled(TAG_A, "k", "Li4E"), KERNEL)))
        b = self.write("b.sass", dump(fn(mangled(TAG_A, "k", "Li4ELb0E"), KERNEL), fn(mangled(TAG_A, "k", "Li4ELb1E"), KERNEL + ["NOP"])))
        p = self.run_script(a, b)
        self.assertEqual(p.returncode, 0)
        self.assertIn("0 identical, 0 changed, 1 only in old, 2 only in new", p.stdout)
        p = self.run_script(a, b, "--flags-off")
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertIn("identical  klab::q4_gemv::_ANON_::k<Li4E>(PKfi)", p.stdout)
        self.assertIn("only new   klab::q4_gemv::_ANON_::k<Li4E,Lb1E>(PKfi)", p.stdout)

    def test_a_new_int_parameter_at_its_default_matches_with_default_arg(self):
        # k<4, false> became k<4, false, 1> (a new int parameter, default 1): with --flags-off and
        # --default-arg Li1E it is the old k; k<4, false, 2> stays new.
        a = self.write("a.sass", dump(fn(mangled(TAG_A, "k", "Li4ELb0E"), KERNEL)))
        b = self.write("b.sass", dump(fn(mangled(TAG_A, "k", "Li4ELb0ELi1E"), KERNEL), fn(mangled(TAG_A, "k", "Li4ELb0ELi2E"), KERNEL + ["NOP"])))
        self.assertIn("0 identical, 0 changed, 1 only in old, 2 only in new", self.run_script(a, b, "--flags-off").stdout)
        p = self.run_script(a, b, "--flags-off", "--default-arg", "Li1E")
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertIn("identical  klab::q4_gemv::_ANON_::k<Li4E>(PKfi)", p.stdout)
        self.assertIn("only new   klab::q4_gemv::_ANON_::k<Li4E,Lb0E,Li2E>(PKfi)", p.stdout)
        self.assertEqual(sass_diff.normalize("_ZN4klab1kILi4ELb0ELi1EEEvPKf", defaults=("Li1E",)), "klab::k<Li4E,Lb0E>(PKf)")

    def test_a_new_parameter_matches_with_ignore_params(self):
        a = self.write("a.sass", dump(fn(mangled(TAG_A, "k"), KERNEL)))
        b = self.write("b.sass", dump(fn(mangled(TAG_A, "k").replace("PKfi", "PKfiPKhx"), KERNEL)))
        self.assertIn("1 only in old, 1 only in new", self.run_script(a, b).stdout)
        p = self.run_script(a, b, "--ignore-params")
        self.assertEqual(p.returncode, 0)
        self.assertIn("identical  klab::q4_gemv::_ANON_::k  (5 instructions)", p.stdout)

    def test_only_filters_and_two_kernels_that_collapse_are_refused(self):
        a = self.write("a.sass", dump(fn(mangled(TAG_A, "keep"), KERNEL), fn(mangled(TAG_A, "drop"), KERNEL)))
        b = self.write("b.sass", dump(fn(mangled(TAG_A, "keep"), KERNEL), fn(mangled(TAG_A, "drop"), KERNEL + ["NOP"])))
        p = self.run_script(a, b, "--only", "keep")
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertNotIn("drop", p.stdout)
        self.assertEqual(self.run_script(a, b).returncode, 1)
        # k(PKfi) and k(PKfiPKhx) are one key without their parameters: refused, not silently merged.
        c = self.write("c.sass", dump(fn(mangled(TAG_A, "k"), KERNEL), fn(mangled(TAG_A, "k").replace("PKfi", "PKfiPKhx"), KERNEL)))
        p = self.run_script(c, c, "--ignore-params")
        self.assertEqual(p.returncode, 2)
        self.assertIn("two kernels read as", p.stderr)

    def test_bad_input_exit_2_nothing_compared(self):
        a = self.write("a.sass", dump(fn(mangled(TAG_A, "k"), KERNEL)))
        p = self.run_script(a, self.tmp / "missing.o")
        self.assertEqual(p.returncode, 2)
        self.assertIn("no such file", p.stderr)
        self.assertIn("nothing compared", p.stderr)
        empty = self.write("empty.sass", "Fatbin elf code:\n(no functions)\n")
        p = self.run_script(a, empty)
        self.assertEqual(p.returncode, 2)
        self.assertIn("no kernel", p.stderr)
        p = self.run_script(a, a, "--only", "(")
        self.assertEqual(p.returncode, 2)
        self.assertIn("not a regular expression", p.stderr)

    def test_names_of_other_forms_are_kept_as_they_are(self):
        self.assertEqual(sass_diff.normalize("plain_c_kernel"), "plain_c_kernel")
        self.assertEqual(sass_diff.normalize("_ZN4klab1kILi4ELNS1_4FormE2EEEvPKf", flags_off=True), "klab::k<Li4E,LNS1_4FormE2E>(PKf)")
        self.assertEqual(sass_diff.normalize("_ZN4klab1kILb0EEEvPKf", flags_off=True, ignore_params=True), "klab::k")
        self.assertEqual(sass_diff.normalize("_ZN4klab1kEPKf", flags_off=True, ignore_params=True), "klab::k")


if __name__ == "__main__":
    unittest.main(verbosity=2)
