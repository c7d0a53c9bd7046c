"""scripts/upstream/compare.py on small junit XML files. Run by scripts/upstream/run.sh."""
import os
import subprocess
import sys

_SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "upstream", "compare.py")


def _xml(tmp_path, name, cases):
    body = "".join(
        f'<testcase classname="{n.split("::")[0] if "::" in n else "test_fx.T"}" '
        f'name="{n.split("::")[-1]}">{inner}</testcase>' for n, inner in cases)
    p = tmp_path / name
    p.write_text(f'<?xml version="1.0"?><testsuites><testsuite>{body}</testsuite></testsuites>')
    return str(p)


def _run(ref, ours, strict, *opts):
    env = dict(os.environ, FXCPP_UPSTREAM_STRICT="1" if strict else "0")
    return subprocess.run([sys.executable, _SCRIPT, *opts, ref, ours], capture_output=True, text=True,
                          env=env)


def test_counts_regressions_gains_and_strict(tmp_path):
    fail = '<failure message="AssertionError: boom&#10;second line">tb</failure>'
    ref = _xml(tmp_path, "ref.xml", [
        ("test_a", ""), ("test_b", ""), ("test_c", fail), ("test_d", '<skipped message="s"/>'),
        ("test_p_&lt;function f at 0x7f00aa&gt;", ""),
        ("test_q_&lt;class 'torch_fx_passes_m_P'&gt;", "")])
    ours = _xml(tmp_path, "ours.xml", [
        ("test_a", ""), ("test_b", '<error message="TypeError: no">tb</error>'), ("test_c", ""),
        ("test_d", '<skipped message="s"/>'), ("test_p_&lt;function f at 0x7f11bb&gt;", ""),
        ("test_q_&lt;class 'fxcpp_passes_m_P'&gt;", "")])
    r = _run(ref, ours, strict=False)
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert any(l.split() == ["torch.fx", "4", "1", "1", "6"] for l in lines), r.stdout
    assert any(l.split() == ["fxcpp", "4", "1", "1", "6"] for l in lines), r.stdout
    assert "Pass with torch.fx, fail with fxcpp (1):" in r.stdout
    assert "test_fx.T::test_b" in r.stdout and "TypeError: no" in r.stdout
    assert "Pass with fxcpp, fail with torch.fx (1):" in r.stdout
    assert "torch.fx: AssertionError: boom" in r.stdout and "second line" not in r.stdout
    assert "one side only" not in r.stdout  # addresses in parametrized ids are ignored,
    # and fxcpp's class paths match torch.fx's
    assert _run(ref, ours, strict=True).returncode == 1
    assert _run(ref, ref, strict=True).returncode == 0


def test_missing_results(tmp_path):
    ref = _xml(tmp_path, "ref.xml", [("test_a", "")])
    missing = str(tmp_path / "none.xml")
    assert _run(ref, missing, strict=False).returncode == 0
    assert _run(ref, missing, strict=True).returncode == 1


_FAIL = '<failure message="AssertionError: differs">tb</failure>'


def test_per_class_counts_and_tsv(tmp_path):
    ref = _xml(tmp_path, "ref.xml", [
        ("test_fx.TestFX::test_a", ""), ("test_fx.TestFX::test_b", ""),
        ("fx.test_dce.TestDCE::test_c", ""), ("fx.test_dce.TestDCE::test_d", '<skipped message="s"/>'),
        ("::fx.test_z3", '<error message="ImportError: z3">tb</error>')])
    ours = _xml(tmp_path, "ours.xml", [
        ("test_fx.TestFX::test_a", _FAIL), ("test_fx.TestFX::test_b", ""),
        ("fx.test_dce.TestDCE::test_c", _FAIL), ("fx.test_dce.TestDCE::test_d", '<skipped message="s"/>'),
        ("::fx.test_z3", '<error message="ImportError: z3">tb</error>')])
    tsv = tmp_path / "per_class.tsv"
    r = _run(ref, ours, False, "--title", "pytorch 9.9 FX tests", "--per-class", str(tsv))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith("pytorch 9.9 FX tests")
    rows = [line.split("\t") for line in tsv.read_text().splitlines()]
    assert rows[0][0] == "class" and rows[0][-1] == "regressions"
    assert rows[1:] == [["(collection)", "0", "1", "0", "0", "1", "0", "0"],
                        ["fx.test_dce.TestDCE", "1", "0", "1", "0", "1", "1", "1"],
                        ["test_fx.TestFX", "2", "0", "0", "1", "1", "0", "1"]]
    assert any(l.split() == ["test_fx.TestFX", "2/0/0", "1/1/0", "1"] for l in r.stdout.splitlines())


def test_known_differences(tmp_path):
    ref = _xml(tmp_path, "ref.xml", [("test_fx.T::test_a", ""), ("test_fx.T::test_b", ""),
                                     ("test_fx.T::test_c", "")])
    ours = _xml(tmp_path, "ours.xml", [("test_fx.T::test_a", _FAIL), ("test_fx.T::test_b", _FAIL),
                                       ("test_fx.T::test_c", "")])
    known = tmp_path / "known.txt"
    known.write_text("# comment\n\ntest_fx.T::test_a | issue 23: lives on the C base\n"
                     "test_fx.T::test_b | issue 23: too\n"
                     "test_fx.T::not_run | stays listed: not in this selection\n")
    r = _run(ref, ours, True, "--known", str(known))
    assert r.returncode == 0, r.stdout
    assert "Pass with torch.fx, fail with fxcpp (0):" in r.stdout
    assert "Known differences, pass with torch.fx, fail with fxcpp (2):" in r.stdout
    assert "reason: issue 23: lives on the C base" in r.stdout
    assert "no longer differ" not in r.stdout
    # An entry whose test now passes on both sides is stale: strict mode fails on it.
    known.write_text("test_fx.T::test_a | a\ntest_fx.T::test_b | b\ntest_fx.T::test_c | c\n")
    r = _run(ref, ours, True, "--known", str(known))
    assert r.returncode == 1
    assert "no longer differ" in r.stdout and "  test_fx.T::test_c" in r.stdout
    assert _run(ref, ours, False, "--known", str(known)).returncode == 0
    known.write_text("test_fx.T::test_a without a reason\n")
    r = _run(ref, ours, False, "--known", str(known))
    assert r.returncode != 0 and "TEST_ID | reason" in r.stderr
