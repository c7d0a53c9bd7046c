"""torch.compile(model, backend="fxcpp") (fxcpp.aten._dynamo): results match eager, graphs the
C++ runtime cannot run fall back to PyTorch with a log line, dynamic shapes serve several sizes."""
import logging

import pytest
import torch

from fxcpp._torch_compat import HAS_DYNAMO

pytestmark = pytest.mark.skipif(not HAS_DYNAMO, reason='torch.compile (Dynamo) needs torch 2.x')

TOL = dict(rtol=1e-4, atol=1e-4)


@pytest.fixture(autouse=True)
def dynamo():
    from fxcpp.aten import _dynamo
    assert _dynamo.register()
    torch._dynamo.reset()
    yield _dynamo
    torch._dynamo.reset()


@pytest.fixture
def loads(dynamo, monkeypatch):
    """The graphs loaded into the C++ runtime, in order."""
    seen = []
    real = dynamo._load

    def spy(gm):
        rt = real(gm)
        seen.append(rt)
        return rt
    monkeypatch.setattr(dynamo, '_load', spy)
    return seen


def fallbacks(caplog):
    return [r.getMessage() for r in caplog.records if r.name == 'fxcpp' and 'eager PyTorch' in r.getMessage()]


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 4)

    def forward(self, x):
        return torch.softmax(self.fc2(torch.nn.functional.gelu(self.fc1(x))), dim=-1)


class Conv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 1), 1))


def check(model, *inputs, backend='fxcpp', **kw):
    model.eval()
    compiled = torch.compile(model, backend=backend, **kw)
    with torch.no_grad():
        expected = model(*inputs)
        got = compiled(*inputs)
    torch.testing.assert_close(got, expected, **TOL)
    return got


@pytest.mark.parametrize('make, shape', [(MLP, (5, 16)), (Conv, (2, 3, 12, 12))])
def test_small_models_match_eager(make, shape, loads, caplog):
    torch.manual_seed(0)
    check(make(), torch.randn(shape))
    assert len(loads) == 1
    assert fallbacks(caplog) == []


def test_backend_function_and_string_name(loads):
    from fxcpp.aten._dynamo import fxcpp_backend
    torch.manual_seed(0)
    check(MLP(), torch.randn(3, 16), backend=fxcpp_backend)
    torch._dynamo.reset()
    check(MLP(), torch.randn(3, 16), backend='fxcpp')
    assert len(loads) == 2
    assert 'fxcpp' in torch._dynamo.list_backends()


def test_resnet18(loads, caplog):
    torchvision = pytest.importorskip('torchvision')
    torch.manual_seed(0)
    check(torchvision.models.resnet18(num_classes=10), torch.randn(2, 3, 64, 64))
    assert len(loads) == 1
    assert fallbacks(caplog) == []


class Breaks(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = torch.tanh(self.fc(x))
        s = y.sum().item()  # a graph break: Dynamo compiles the parts on either side
        return y * s + torch.cos(y)


def test_graph_break_matches_eager(loads):
    torch.manual_seed(0)
    check(Breaks(), torch.randn(4, 8))
    assert len(loads) >= 2


def _custom_module():
    """A model calling a torch.library custom op (a Python kernel), made once."""
    global _CUSTOM
    if _CUSTOM is None:
        @torch.library.custom_op('fxcpp_compile_test::twice', mutates_args=())
        def twice(x: torch.Tensor) -> torch.Tensor:
            return x * 2

        @twice.register_fake
        def _(x):
            return torch.empty_like(x)

        class Custom(torch.nn.Module):
            def forward(self, x):
                return twice(torch.sin(x)) + 1
        _CUSTOM = Custom
    return _CUSTOM()


_CUSTOM = None


def test_refused_op_falls_back_with_log_line(loads, caplog):
    caplog.set_level(logging.WARNING, logger='fxcpp')
    check(_custom_module(), torch.randn(3, 4))
    assert loads == []
    msgs = fallbacks(caplog)
    assert len(msgs) == 1
    assert 'fxcpp_compile_test.twice' in msgs[0] and 'not an ATen operator' in msgs[0]


def test_training_with_grad_falls_back(loads, caplog):
    caplog.set_level(logging.WARNING, logger='fxcpp')
    torch.manual_seed(0)
    model = MLP().train()
    ref = MLP().train()
    ref.load_state_dict(model.state_dict())
    x = torch.randn(4, 16)
    compiled = torch.compile(model, backend='fxcpp')
    compiled(x).sum().backward()
    ref(x).sum().backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, **TOL)
    assert loads == []
    msgs = fallbacks(caplog)
    assert len(msgs) == 1 and 'requires grad' in msgs[0]


def test_dynamic_batch_one_graph(loads, caplog):
    torch.manual_seed(0)
    model = Conv().eval()
    compiled = torch.compile(model, backend='fxcpp', dynamic=True)
    with torch.no_grad():
        for n in (2, 5, 7):
            x = torch.randn(n, 3, 10, 10)
            torch.testing.assert_close(compiled(x), model(x), **TOL)
    assert len(loads) == 1
    assert fallbacks(caplog) == []


def test_number_in_tensor_argument_keeps_eager_dtypes(loads):
    # AOTAutograd writes aten.mul.Tensor(x, 2.5) / aten.add.Tensor(i, 3): the backend wraps the
    # numbers (the runtime does not), and type promotion must come out as eager's.
    class M(torch.nn.Module):
        def forward(self, x, i, h):
            return x * 2.5, i + 3, i * 1.5, h * 0.5, i > 2
    x = torch.randn(3, 4)
    i = torch.arange(12, dtype=torch.int32).reshape(3, 4)
    h = torch.randn(3, 4).half()
    got = check(M(), x, i, h)
    expected = M()(x, i, h)
    assert [t.dtype for t in got] == [t.dtype for t in expected]
    assert len(loads) == 1


ENTRY_POINT_SCRIPT = '''
import sys, torch
from torch._dynamo.backends import registry
assert 'fxcpp' not in sys.modules
m = torch.nn.Linear(4, 2).eval()
c = torch.compile(m, backend='fxcpp')
with torch.no_grad():
    x = torch.randn(3, 4)
    torch.testing.assert_close(c(x), m(x))
assert 'fxcpp.aten._dynamo' in sys.modules
print('entry point ok', registry._COMPILER_FNS['fxcpp'].__module__)
'''


def test_entry_point_needs_no_import(tmp_path):
    """backend="fxcpp" in a process that never imports fxcpp: Dynamo finds the
    torch_dynamo_backends entry point pyproject.toml declares (here installed as a
    bare dist-info, as pip would write it)."""
    import os
    import subprocess
    import sys
    import tomllib
    root = os.path.join(os.path.dirname(__file__), '..', '..')
    with open(os.path.join(root, 'pyproject.toml'), 'rb') as f:
        eps = tomllib.load(f)['project']['entry-points']['torch_dynamo_backends']
    info = tmp_path / 'fxcpp-0.1.0.dist-info'
    info.mkdir()
    (info / 'METADATA').write_text('Metadata-Version: 2.1\nName: fxcpp\nVersion: 0.1.0\n')
    lines = ''.join(f'{name} = {target}\n' for name, target in eps.items())
    (info / 'entry_points.txt').write_text('[torch_dynamo_backends]\n' + lines)
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join([str(tmp_path)] + [p for p in [env.get('PYTHONPATH')] if p])
    p = subprocess.run([sys.executable, '-c', ENTRY_POINT_SCRIPT], env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert 'entry point ok fxcpp.aten._dynamo' in p.stdout


def test_inference_mode(loads, caplog):
    torch.manual_seed(0)
    model = MLP().eval()
    compiled = torch.compile(model, backend='fxcpp')
    x = torch.randn(2, 16)
    with torch.inference_mode():
        torch.testing.assert_close(compiled(x), model(x), **TOL)
    assert len(loads) == 1
    assert fallbacks(caplog) == []


def test_tensor_constants_in_forward(loads, caplog):
    # Tensors made in forward become the AOT graph's get_attr constants, written while
    # AOTAutograd's fake mode is active (swin_t has one): they must reach the runtime.
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.where(x > 0, x, torch.tensor(-1.0)) + x.new_tensor(3.0)
    check(M(), torch.randn(3, 5))
    assert len(loads) == 1
    assert fallbacks(caplog) == []
