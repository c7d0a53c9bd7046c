"""scripts/upstream/expect_files.py: which test/expect/ members fetch.sh extracts.

Run by scripts/upstream/run.sh before the upstream suite.
"""
import os
import subprocess
import sys

_SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "upstream", "expect_files.py")

_MEMBERS = """\
pytorch-v2/test/expect/TestFXAPIBackwardCompatibility.test_class_member_back_compat-fx_backcompat_class_members.expect
pytorch-v2/test/expect/TestFXAPIBackwardCompatibility.test_function_back_compat-fx_backcompat_function_signatures.expect
pytorch-v2/test/expect/TestJit.test_cu_escaped_number.expect
pytorch-v2/test/expect/TestFX.test_other.expect
pytorch-v2/test/expect/TestFXExperimental.test_x.expect
pytorch-v2/test/expect/TestFX.txt
pytorch-v2/test/expect/sub/TestFX.test_nested.expect
pytorch-v2/test/test_fx.py
pytorch-v1/test/expect/TestFX.test_wrong_top.expect
"""


def _run(tmp_path, files):
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    r = subprocess.run([sys.executable, _SCRIPT, str(tmp_path), "pytorch-v2"], input=_MEMBERS,
                       capture_output=True, text=True, check=True)
    return r.stdout.splitlines()


def test_expect_files_of_the_classes_the_tests_define(tmp_path):
    out = _run(tmp_path, {
        "test/test_fx.py": "import unittest\nclass TestFX(unittest.TestCase):\n    pass\n"
                           "class TestFXAPIBackwardCompatibility:\n"
                           "    class TestJit: pass  # nested: not a test class of the file\n",
        "test/fx/test_x.py": "def f():\n    class TestFXExperimental: pass\n",
        "test/fx/broken.py": "class TestJit(:\n",   # does not parse: skipped
        "test/fx/notes.txt": "class TestJit: pass\n",
    })
    assert out == [
        "pytorch-v2/test/expect/TestFX.test_other.expect",
        "pytorch-v2/test/expect/TestFXAPIBackwardCompatibility.test_class_member_back_compat-"
        "fx_backcompat_class_members.expect",
        "pytorch-v2/test/expect/TestFXAPIBackwardCompatibility.test_function_back_compat-"
        "fx_backcompat_function_signatures.expect",
    ]


def test_no_test_classes_no_expect_files(tmp_path):
    assert _run(tmp_path, {"test/test_fx.py": "x = 1\n"}) == []
