"""Graphs captured and written in C++, read in Python.

* Files written by the C++ writer (fxcpp::torch::save, through
  ``Runtime.save``) load with ``fxcpp.aten.load`` with the same code and
  results as the Python-written file they came from.
* ``fxcpp.aten.from_torchscript``: TorchScript modules (torch.jit.trace of
  torchvision models) captured in C++; the GraphModule and the C++ runtime
  give TorchScript's results.
"""
import io
import json
import os
import zipfile

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import fxcpp
from fxcpp import _C_torch, aten

torchvision = pytest.importorskip('torchvision')

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, '..', 'cpp_torch', 'fixtures', 'small_v1.fxpt')


def _doc(path):
    doc = json.loads(_C_torch.graph_json(path))
    doc.pop('producer')
    return doc


def _small_input(n):
    return (torch.arange(n * 3 * 8 * 8, dtype=torch.float32).reshape(n, 3, 8, 8) % 7 - 3) / 4


# ---- the C++ writer ---------------------------------------------------------------------

def test_cpp_saved_fixture_loads_in_python(tmp_path):
    out = tmp_path / 'cpp.fxpt'
    _C_torch.load(FIXTURE).save(out)
    assert _doc(out) == _doc(FIXTURE)
    want, got = aten.load(FIXTURE), aten.load(out)
    assert got.code == want.code
    assert dict(got.named_parameters()).keys() == dict(want.named_parameters()).keys()
    for n in (1, 3):
        x = _small_input(n)
        torch.testing.assert_close(got(x), want(x), rtol=0, atol=0)
        torch.testing.assert_close(aten.load(out, runtime='cpp')(x), want(x), rtol=1e-5, atol=1e-6)
    # The archive is PyTorch's container, as Python writes it.
    with zipfile.ZipFile(out) as z:
        names = z.namelist()
    assert any(n.endswith('/graph.json') for n in names) and any('/data/' in n for n in names)


def test_cpp_saved_lowered_graph_matches_code(tmp_path):
    def f(x, y):
        z = torch.cat([x, y], dim=1).softmax(-1)
        return {'out': z[:, 1:] * 2.5, 'n': x.shape[0] + 1}

    x, y = torch.randn(2, 3), torch.randn(2, 4)
    gm = fxcpp.from_torch_fx(make_fx(f)(x, y))
    py_path, cpp_path = tmp_path / 'py.fxpt', tmp_path / 'cpp.fxpt'
    aten.save(gm, py_path)
    _C_torch.load(py_path).save(cpp_path)
    # The C++ Module keeps no class name: the C++ writer writes 'GraphModule'.
    assert _doc(cpp_path) == dict(_doc(py_path), class_name='GraphModule')
    got = aten.load(cpp_path)
    assert got.code == aten.load(py_path).code
    torch.testing.assert_close(got(x, y), f(x, y))


# ---- from_torchscript -------------------------------------------------------------------

def _vit():
    from torchvision.models.vision_transformer import VisionTransformer
    return VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64)


MODELS = {
    'resnet18': (lambda: torchvision.models.resnet18(), (1, 3, 32, 32)),
    'mobilenet_v3_small': (lambda: torchvision.models.mobilenet_v3_small(), (1, 3, 32, 32)),
    'vit': (_vit, (2, 3, 32, 32)),
}


@pytest.mark.parametrize('name', sorted(MODELS))
def test_from_torchscript_torchvision(name, tmp_path):
    make, shape = MODELS[name]
    torch.manual_seed(0)
    model = make().eval()
    x = torch.randn(*shape)
    with torch.no_grad():
        script = torch.jit.trace(model, x)
        want = script(x)
    path = tmp_path / f'{name}.fxpt'
    gm = aten.from_torchscript(script, x, path=path)
    assert isinstance(gm, fxcpp.GraphModule)
    assert 'def forward(self, x)' in gm.code
    assert all(n.op in ('placeholder', 'get_attr', 'call_function', 'output') for n in gm.graph.nodes)
    # Parameters and buffers keep their module paths.
    params = dict(model.named_parameters())
    got_params = dict(gm.named_parameters())
    assert got_params.keys() <= params.keys() and len(got_params) > 0
    for k, v in got_params.items():
        assert torch.equal(v, params[k])
    with torch.no_grad():
        torch.testing.assert_close(gm(x), want, rtol=1e-4, atol=1e-4)
        cpp = aten.load(path, runtime='cpp')
        torch.testing.assert_close(cpp(x), want, rtol=1e-4, atol=1e-4)
    # It re-saves from Python like any lowered graph.
    again = tmp_path / f'{name}_py.fxpt'
    aten.save(gm, again)
    with torch.no_grad():
        torch.testing.assert_close(aten.load(again)(x), want, rtol=1e-4, atol=1e-4)


def test_from_torchscript_file_and_bytes(tmp_path):
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 3)
            self.register_buffer('scale', torch.tensor([1.0, 2.0, 3.0]))

        def forward(self, a, b):
            return torch.relu(self.lin(a)) * self.scale + b.sum()

    torch.manual_seed(0)
    m = M().eval()
    a, b = torch.randn(2, 4), torch.randn(5)
    pt = tmp_path / 'm.pt'
    torch.jit.save(torch.jit.script(m), str(pt))
    gm = aten.from_torchscript(str(pt), a, b)
    assert 'def forward(self, a, b)' in gm.code
    kinds = {name: kind for name, kind, _ in _C_torch.load(_save(gm, tmp_path)).tensors()}
    assert kinds == {'lin.weight': 'parameter', 'lin.bias': 'parameter', 'scale': 'buffer'}
    a2, b2 = torch.randn(2, 4), torch.randn(5)
    with torch.no_grad():
        torch.testing.assert_close(gm(a2, b2), m(a2, b2))
    # From the bytes of the file, straight into the C++ runtime.
    cpp = aten.from_torchscript(torch.jit.load(io.BytesIO(pt.read_bytes())), a, b, runtime='cpp')
    with torch.no_grad():
        torch.testing.assert_close(cpp(a2, b2), m(a2, b2))


def _save(gm, tmp_path):
    path = tmp_path / 'resaved.fxpt'
    aten.save(gm, path)
    return path


def test_from_torchscript_errors(tmp_path):
    with pytest.raises(TypeError, match='ScriptModule'):
        aten.from_torchscript(torch.nn.Linear(2, 2), torch.randn(1, 2))
    script = torch.jit.script(torch.nn.Linear(2, 2))
    with pytest.raises(TypeError, match='tensors'):
        aten.from_torchscript(script, 3)
    with pytest.raises(RuntimeError, match='cannot load the TorchScript module'):
        aten.from_torchscript(str(tmp_path / 'missing.pt'), torch.randn(1, 2))
    with pytest.raises(RuntimeError):
        aten.from_torchscript(script, torch.randn(1, 3))  # the wrong shape fails in the interpreter


# ---- examples/cpp/capture_loop.cpp ------------------------------------------------------

CAPTURE_LOOP = os.path.join(os.environ.get('FXCPP_BUILD_DIR', os.path.join(HERE, '..', '..', 'build')),
                            'fxcpp_example_capture_loop')


@pytest.mark.skipif(not os.path.exists(CAPTURE_LOOP),
                    reason='build/fxcpp_example_capture_loop is not built (make build)')
def test_capture_loop_example(tmp_path):
    """The C++ example captures a torch::nn CNN, folds its batch norms, runs and
    saves it; the file loads in Python and gives the C++ runtime's output."""
    import subprocess

    import numpy as np
    out = str(tmp_path / 'cnn.fxpt')
    proc = subprocess.run([CAPTURE_LOOP, out, '--repeat', '2'], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert 'after folding 3 batch_norm(s) into conv2d' in proc.stdout
    assert 'allclose(fxcpp, eager): true' in proc.stdout
    assert 'timings: capture' in proc.stdout
    gm = aten.load(out)
    targets = [str(n.target) for n in gm.graph.nodes if n.op == 'call_function']
    assert targets.count('aten.conv2d.default') == 3
    assert not any('batch_norm' in t for t in targets)
    x = torch.from_numpy(np.fromfile(out + '.x.bin', dtype=np.float32)).reshape(2, 3, 32, 32)
    y = torch.from_numpy(np.fromfile(out + '.y.bin', dtype=np.float32)).reshape(2, 10)
    with torch.no_grad():
        torch.testing.assert_close(gm(x), y, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(aten.load(out, runtime='cpp')(x), y, rtol=1e-5, atol=1e-6)
