"""The demo (examples/demo.py) as a smoke test of the main job, plus unit checks of
its Conv2d+BatchNorm2d folding pass on both fxcpp and torch.fx."""
import importlib.util
import os
import subprocess
import sys

import pytest
import torch
import torch.fx
import torch.nn as nn

import fxcpp

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO = os.path.join(REPO, "examples", "demo.py")
PYTHON = sys.executable  # the interpreter (and torch) of this session: the package under test is built for it


def _env():
    env = dict(os.environ)
    # the fxcpp this test session imports (python/ of the checkout under `make test`)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(fxcpp.__file__)))
    env["PYTHONPATH"] = pkg_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _load_demo():
    spec = importlib.util.spec_from_file_location("fxcpp_demo", DEMO)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_demo_runs_end_to_end():
    # Correctness only: the demo's own timings (it prints how much faster fxcpp is)
    # are not asserted here; bench/ measures speed.
    proc = subprocess.run([PYTHON, DEMO, "--quick"], env=_env(), cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "GraphModule with 71 nodes" in out
    assert "opcode" in out and "call_module" in out            # graph table
    assert "def forward(self, x : torch.Tensor)" in out        # generated code
    assert "folded 20 BatchNorm2d into their Conv2d: 71 -> 51 nodes" in out
    assert "rtol=1e-4, atol=1e-4): True" in out
    assert "symbolic_trace(resnet18)" in out and "torch.fx" in out
    assert "identical to torch.fx's: yes" in out
    assert "identical outputs: yes" in out
    assert "7. torch.export" in out
    from fxcpp import _torch_compat
    if _torch_compat.HAS_EXPORT:  # torch's .pt2 run by the C++ program, checked against eager
        assert "C++ program's logits for torch's .pt2, eager model(x), rtol=1e-4, atol=1e-4): True" in out
    else:
        assert "has no torch.export" in out


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, bias=True)
        self.bn_a = nn.BatchNorm2d(8)
        self.b = nn.Conv2d(8, 8, 3, bias=False)
        self.bn_b = nn.BatchNorm2d(8)
        self.shared = nn.Conv2d(8, 8, 1)
        self.bn_s = nn.BatchNorm2d(8)

    def forward(self, x):
        y = self.bn_a(self.a(x)).relu()
        y = self.bn_b(self.b(y))
        s = self.shared(y)            # conv output used twice: must not be folded
        return self.bn_s(s) + s


@pytest.mark.parametrize("lib", [fxcpp, torch.fx], ids=["fxcpp", "torch.fx"])
def test_fold_conv_bn_pass(lib):
    demo = _load_demo()
    torch.manual_seed(0)
    model = _Net()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.normal_()
                m.running_var.uniform_(0.5, 2)
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_()
    model.eval()
    x = torch.randn(2, 3, 12, 12)
    gm = lib.symbolic_trace(model)
    stats = {}
    demo.fold_conv_bn(gm, stats)
    assert stats["folded"] == 2
    targets = [n.target for n in gm.graph.nodes if n.op == "call_module"]
    assert targets == ["a", "b", "shared", "bn_s"]
    assert not hasattr(gm, "bn_a") and not hasattr(gm, "bn_b")   # unused submodules deleted
    with torch.no_grad():
        assert torch.allclose(gm(x), model(x), rtol=1e-4, atol=1e-5)
    # the original model is untouched
    assert isinstance(model.bn_a, nn.BatchNorm2d) and model.a.weight is not gm.a.weight


def test_fold_is_identical_across_libraries():
    demo = _load_demo()
    model = _Net().eval()
    codes = []
    for lib in (fxcpp, torch.fx):
        gm = demo.fold_conv_bn(lib.symbolic_trace(model))
        codes.append(gm.code)
        assert str(gm.graph).count("call_module") == 4
    assert codes[0] == codes[1]
