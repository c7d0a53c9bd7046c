"""Graphs captured and written in C++, read in Python.

* Files written by the C++ writer (fxcpp::torch::save, through
  ``Runtime.save``) load with ``fxcpp.aten.load`` with the same code and
  results as the Python-written file they came from.
* ``fxcpp.aten.from_torchscript``: TorchScript modules (torch.jit.trace of
  torchvision models) captured in C++; the GraphModule and the C++ runtime
  give TorchScript's results; the recorded op sequence is the tracer's
  (Note [Capture by dispatcher mode], Same ops as the tracer); Meta
  execution gives the real capture's graph or falls back.
"""
import functools
import io
import json
import operator
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
        # The capture of the caller's own model: vit's fused attention kernel
        # (_native_multi_head_attention) is not on the allow-list for files
        # from strangers, so the file is loaded as the user's own.
        cpp = aten.load(path, runtime='cpp', trusted=True)
        torch.testing.assert_close(cpp(x), want, rtol=1e-4, atol=1e-4)
    # It re-saves from Python like any lowered graph.
    again = tmp_path / f'{name}_py.fxpt'
    aten.save(gm, again)
    with torch.no_grad():
        torch.testing.assert_close(aten.load(again, trusted=True)(x), want, rtol=1e-4, atol=1e-4)


# ---- the same op sequence as torch.jit.trace ---------------------------------------------

@functools.lru_cache(maxsize=None)
def _traced(name):
    """(model, x, torch.jit.trace(model, x)): the tracer run on x."""
    make, shape = MODELS[name]
    torch.manual_seed(0)
    model = make().eval()
    x = torch.randn(*shape)
    with torch.no_grad():
        script = torch.jit.trace(model, x)
    return model, x, script


def _qualified(schema):
    return schema.name + ('.' + schema.overload_name if schema.overload_name else '')


# TorchScript interpreter operators that are not c10 dispatcher operators
# (found by the dispatcher lookup below; registered in
# torch/csrc/jit/runtime/register_prim_ops.cpp), with the dispatcher calls
# their LibTorch 1.13 kernels make, which the capture records in their place.
# An interpreter operator not listed here fails the test.
_INTERPRETER_OPS = {
    'aten::Int.Tensor': ['aten::item'],  # a.item<int64_t>()
    'prim::NumToTensor.Scalar': [],      # at::scalar_to_tensor: no dispatcher call for a CPU scalar
}


def _tracer_ops(graph):
    """The tracer's recording as the dispatcher calls TorchScript's interpreter
    makes when it runs it (Note [Capture by dispatcher mode], Same ops as the
    tracer): a node whose operator (name and overload, from its schema) the
    c10 dispatcher has is one call; a node without a schema (prim::Constant,
    prim::GetAttr, prim::ListConstruct) is an interpreter instruction, no
    call; an interpreter operator contributes its kernel's calls."""
    ops = []
    for node in graph.nodes():
        assert not list(node.blocks()), 'a trace has no control flow'
        schema = node.schema()
        if schema == '(no schema)':
            continue
        op = _qualified(torch._C.parse_schema(schema))
        if torch._C._dispatch_has_kernel(op):
            ops.append(op)
        else:
            assert op in _INTERPRETER_OPS, f'{op}: neither a dispatcher operator nor a known interpreter operator'
            ops.extend(_INTERPRETER_OPS[op])
    return ops


def _captured_ops(gm):
    """The recorded calls of a capture made with dead_code_elimination=False."""
    ops = []
    for n in gm.graph.nodes:
        if n.op != 'call_function':
            continue
        if n.target is operator.getitem:  # an element of a call's tuple result
            continue
        assert isinstance(n.target, torch._ops.OpOverload), n.target
        ops.append(_qualified(n.target._schema))
    return ops


# Dispatcher calls per model at the MODELS input sizes.
_SEQUENCE_LENGTHS = {'resnet18': 69, 'mobilenet_v3_small': 157, 'vit': 43}


@pytest.mark.parametrize('name', sorted(MODELS))
def test_same_ops_as_jit_tracer(name):
    """The capture of the traced module records, in order and by overload,
    what the tracer recorded on the same input, less the interpreter's own
    instructions (which the capture bakes in)."""
    model, x, script = _traced(name)
    want = _tracer_ops(script.inlined_graph)
    got = _captured_ops(aten.from_torchscript(script, x, dead_code_elimination=False))
    assert got == want
    assert len(got) == _SEQUENCE_LENGTHS[name]
    # With dead code elimination, what remains is a subsequence: the ops
    # whose results only fed baked-in values (vit's size arithmetic) go.
    kept = _captured_ops(aten.from_torchscript(script, x))
    it = iter(got)
    assert all(op in it for op in kept)
    if name != 'vit':
        assert kept == got


def test_interpreter_operators_are_not_dispatcher_operators():
    """The alignment rule's exceptions are what the dispatcher says they are."""
    for op in _INTERPRETER_OPS:
        assert not torch._C._dispatch_has_kernel(op), op
    for op in ('aten::_convolution', 'aten::size.int', 'aten::item', 'aten::floor_divide', 'aten::linear'):
        assert torch._C._dispatch_has_kernel(op), op
    _, _, script = _traced('vit')
    kinds = {node.kind() for node in script.inlined_graph.nodes()}
    assert {'aten::Int', 'prim::NumToTensor', 'aten::size'} <= kinds


# ---- Meta execution ---------------------------------------------------------------------

def _capture_info(script, x, tmp_path, execution):
    buf = io.BytesIO()
    torch.jit.save(script, buf)
    path = tmp_path / f'{execution}.fxpt'
    info = _C_torch.from_torchscript(buf.getvalue(), (x,), str(path), execution=execution)
    return info, aten.load(path, trusted=True)  # the capture of the test's own model


class _NoConv(torch.nn.Module):
    """Operators whose Meta kernels this process has: structured C++ ones
    (linear, softmax) and the Python ones torch registers at import
    (relu, native_batch_norm under layer_norm and batch_norm, hardswish)."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 32)
        self.ln = torch.nn.LayerNorm(32)
        self.bn = torch.nn.BatchNorm1d(5)
        self.b = torch.nn.Linear(32, 10)

    def forward(self, x):
        h = self.bn(self.ln(torch.relu(self.a(x))))
        return torch.nn.functional.hardswish(self.b(h)).softmax(-1)


def test_from_torchscript_meta_gives_the_real_graph(tmp_path):
    torch.manual_seed(0)
    model = _NoConv().eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        script = torch.jit.trace(model, x)
    real_info, real = _capture_info(script, x, tmp_path, 'real')
    assert not real_info['ran_on_meta']
    for execution in ('meta', 'meta_or_real'):
        info, gm = _capture_info(script, x, tmp_path, execution)
        assert info == dict(real_info, ran_on_meta=True)
        assert str(gm.graph) == str(real.graph)
        assert gm.code == real.code
        assert [n.meta.get('tensor_meta') for n in gm.graph.nodes if n.op == 'placeholder'] == \
            [n.meta.get('tensor_meta') for n in real.graph.nodes if n.op == 'placeholder']
        for k, v in real.state_dict().items():  # the real tensors, not Meta ones
            assert torch.equal(gm.state_dict()[k], v), k
    gm = aten.from_torchscript(script, x, execution='meta')
    x2 = torch.randn(2, 5, 16)
    with torch.no_grad():
        torch.testing.assert_close(gm(x2), model(x2))


# aten::_convolution has a Meta kernel in torch 2.x, none in 1.13.
_CONVOLUTION_HAS_META = torch._C._dispatch_has_kernel_for_dispatch_key('aten::_convolution', 'Meta')


@pytest.mark.parametrize('name', sorted(MODELS))
def test_from_torchscript_meta_falls_back_on_convolution(name, tmp_path):
    """A traced module calls aten::_convolution, which has no Meta kernel in
    1.13 (neither C++ nor Python: it reaches convolution_overrideable); where
    it has one (torch 2.x), the capture runs on Meta tensors."""
    model, x, script = _traced(name)
    real = aten.from_torchscript(script, x)
    info, gm = _capture_info(script, x, tmp_path, 'meta_or_real')
    if _CONVOLUTION_HAS_META:
        assert info['ran_on_meta'] and not info.get('meta_fallback')
        assert str(gm.graph) == str(real.graph)
        assert str(aten.from_torchscript(script, x, execution='meta').graph) == str(real.graph)
        return
    assert not info['ran_on_meta']
    assert info['meta_fallback'].startswith('aten::_convolution failed on Meta tensors: convolution_overrideable')
    assert str(gm.graph) == str(real.graph)
    with pytest.raises(RuntimeError, match='aten::_convolution failed on Meta tensors'):
        aten.from_torchscript(script, x, execution='meta')


def test_from_torchscript_meta_data_dependent(tmp_path):
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.nonzero(x > 0).float().sum() + x

    x = torch.randn(3, 4)
    script = torch.jit.script(M())
    info, gm = _capture_info(script, x, tmp_path, 'meta_or_real')
    assert not info['ran_on_meta'] and 'aten::nonzero failed on Meta tensors' in info['meta_fallback']
    assert gm.code == aten.from_torchscript(script, x).code
    with pytest.raises(RuntimeError, match='aten::nonzero failed on Meta tensors'):
        aten.from_torchscript(script, x, execution='meta')
    with pytest.raises(ValueError, match='execution'):
        aten.from_torchscript(script, x, execution='fake')


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
