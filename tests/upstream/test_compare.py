"""scripts/upstream/compare.py on small junit XML files. Run by scripts/upstream/run.sh."""
import os
import subprocess
import sys

_SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "upstream", "compare.py")


def _xml(tmp_path, name, cases):
    body = "".join(
        f'<testcase classname="test_fx.T" name="{n}">{inner}</testcase>' for n, inner in cases)
    p = tmp_path / name
    p.write_text(f'<?xml version="1.0"?><testsuites><testsuite>{body}</testsuite></testsuites>')
    return str(p)


def _run(ref, ours, strict):
    env = dict(os.environ, FXCPP_UPSTREAM_STRICT="1" if strict else "0")
    return subprocess.run([sys.executable, _SCRIPT, ref, ours], capture_output=True, text=True, env=env)


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
