"""Reading the .pt2 archives torch.export.save writes (issue 25, item 1).

Differential: each model is exported with torch.export.export, saved by torch,
loaded by fxcpp (C++ loader, C++ runtime) and compared with the same archive
loaded back by torch (``torch.export.load(path).module()``), rtol = atol = 1e-4.
Needs torch.export (torch 2.x); the 1.13 leg skips the module.
"""
import os
import re
import zipfile

import pytest
import torch

from fxcpp import _torch_compat

pytestmark = pytest.mark.skipif(_torch_compat.TORCH_VERSION < (2, 5),
                                reason='torch.export.save writes .pt2 archives from torch 2.5 on; this torch '
                                       f'is {torch.__version__}')

import fxcpp.aten  # noqa: E402
from gpt2 import GPT2Decoder  # noqa: E402 -- examples/gpt2.py (conftest puts examples/ on the path)

TOL = dict(rtol=1e-4, atol=1e-4)


def _export(tmp_path, model, args, dynamic_shapes=None, name='m', decompose=False):
    model.eval()
    ep = torch.export.export(model, args, dynamic_shapes=dynamic_shapes)
    if decompose:
        ep = ep.run_decompositions()
    path = str(tmp_path / f'{name}.pt2')
    torch.export.save(ep, path)
    return path


def _close(got, want):
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor), type(got)
        assert got.shape == want.shape and got.dtype == want.dtype
        torch.testing.assert_close(got, want, **TOL)
    elif isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want)
        for k in want:
            _close(got[k], want[k])
    else:
        assert isinstance(got, (tuple, list)) and type(got) is type(want), (type(got), type(want))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _close(g, w)


def _check(path, *arg_sets, trusted=False, plan_memory=True):
    """fxcpp's run of the archive equals torch's, for each set of inputs."""
    mine = fxcpp.aten.load(path, runtime='cpp', trusted=trusted, plan_memory=plan_memory)
    ref = torch.export.load(path).module()
    for args in arg_sets:
        with torch.no_grad():
            want = ref(*args)
        _close(mine(*args), want)
    return mine, ref


class LinConvRelu(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.lin = torch.nn.Linear(4 * 6 * 6, 5)

    def forward(self, x):
        return self.lin(torch.relu(self.conv(x)).flatten(1))


class WithBuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer('scale', torch.arange(4.0) + 1)
        self.register_buffer('calls', torch.zeros(()))

    def forward(self, x):
        self.calls.add_(1)
        return x * self.scale + self.calls


class WithConstant(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c = torch.tensor([[1.0, -2.0, 3.0]])   # a plain attribute: a lifted tensor constant
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x) * self.c


class MultiOut(torch.nn.Module):
    def forward(self, x, y):
        v, i = torch.max(x, 1)
        a, b = x.split(2, 1)
        return {'sum': x + y, 'parts': (v, i, [a, b])}


def test_small_linear_conv_relu(tmp_path):
    path = _export(tmp_path, LinConvRelu(), (torch.randn(2, 3, 6, 6),))
    m, _ = _check(path, (torch.randn(2, 3, 6, 6),))
    assert m.input_names == ['x']
    names = {n for n, _ in m.named_buffers()}
    assert {'conv.weight', 'conv.bias', 'lin.weight', 'lin.bias'} <= names


def test_buffer_mutation_in_place(tmp_path):
    # The default (training) IR mutates the buffer in place: both runs count.
    path = _export(tmp_path, WithBuffer(), (torch.randn(3, 4),))
    x = torch.randn(3, 4)
    m, ref = _check(path, (x,), (x,), (x,))
    torch.testing.assert_close(dict(m.named_buffers())['calls'], ref.calls)


def test_buffer_mutation_as_output(tmp_path):
    # After run_decompositions the program is functional: the new value is a
    # BUFFER_MUTATION output that the loader writes back, as ep.module() does.
    path = _export(tmp_path, WithBuffer(), (torch.randn(3, 4),), decompose=True)
    x = torch.randn(3, 4)
    m, ref = _check(path, (x,), (x,))
    torch.testing.assert_close(dict(m.named_buffers())['calls'], ref.calls)
    assert float(ref.calls) == 2.0


def test_tensor_constant(tmp_path):
    path = _export(tmp_path, WithConstant(), (torch.randn(2, 3),))
    _check(path, (torch.randn(2, 3),))


@pytest.mark.parametrize('decompose', [False, True])
def test_multiple_outputs_nested(tmp_path, decompose):
    path = _export(tmp_path, MultiOut(), (torch.randn(3, 4), torch.randn(3, 4)), decompose=decompose)
    _check(path, (torch.randn(3, 4), torch.randn(3, 4)))


def test_dynamic_batch_symbolic_shapes(tmp_path):
    class Reshape(torch.nn.Module):
        def forward(self, x):
            n = x.shape[0]
            return x.reshape(n * 2, -1).relu(), x.sum(0)

    b = torch.export.Dim('b', min=1, max=64)
    for decompose in (False, True):
        path = _export(tmp_path, Reshape(), (torch.randn(4, 6),), dynamic_shapes=({0: b},),
                       name=f'r{decompose}', decompose=decompose)
        _check(path, (torch.randn(1, 6),), (torch.randn(3, 6),), (torch.randn(7, 6),))


def test_python_runtime_reads_pt2(tmp_path):
    # runtime='python' rebuilds a GraphModule from the graph the C++ reader made.
    path = _export(tmp_path, LinConvRelu(), (torch.randn(2, 3, 6, 6),))
    gm = fxcpp.aten.load(path)
    x = torch.randn(2, 3, 6, 6)
    with torch.no_grad():
        torch.testing.assert_close(gm(x), torch.export.load(path).module()(x), **TOL)
    assert 'torch.ops.aten.conv2d.default' in gm.code


def test_dtype_conversions_untrusted(tmp_path):
    # Each .to() comes with an aten._assert_tensor_metadata check in the exported
    # graph: dropped by the reader (off the allow-list, and absent from LibTorch 1.13).
    class Convert(torch.nn.Module):
        def forward(self, x, i):
            return x.to(torch.float64) * 2, x.float() + i.to(x.dtype), x.type_as(i)
    ep = torch.export.export(Convert(), (torch.randn(3), torch.arange(3)))
    assert any('_assert_tensor_metadata' in str(n.target) for n in ep.graph.nodes)
    path = str(tmp_path / 'to.pt2')
    torch.export.save(ep, path)
    _check(path, (torch.randn(3), torch.arange(3)))


def test_module_names_with_dashes(tmp_path):
    # torch allows any module name without '.'; torchvision's regnets use 'block1-0'.
    class Dashed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.add_module('block1-0', torch.nn.Linear(3, 3))

        def forward(self, x):
            return getattr(self, 'block1-0')(x).relu()
    path = _export(tmp_path, Dashed(), (torch.randn(2, 3),))
    m, _ = _check(path, (torch.randn(2, 3),))
    assert 'block1-0.weight' in dict(m.named_buffers())
    gm = fxcpp.aten.load(path)
    x = torch.randn(2, 3)
    with torch.no_grad():
        torch.testing.assert_close(gm(x), torch.export.load(path).module()(x), **TOL)
    assert 'getattr(self, "block1-0")' in gm.code


def test_unplanned_memory_matches(tmp_path):
    path = _export(tmp_path, LinConvRelu(), (torch.randn(2, 3, 6, 6),))
    _check(path, (torch.randn(2, 3, 6, 6),), plan_memory=False)


def test_from_buffer_and_content_dispatch(tmp_path):
    # The format is told by content: a .pt2 archive under another name loads.
    path = _export(tmp_path, LinConvRelu(), (torch.randn(2, 3, 6, 6),))
    other = str(tmp_path / 'model.bin')
    with open(path, 'rb') as f:
        data = f.read()
    with open(other, 'wb') as f:
        f.write(data)
    x = torch.randn(2, 3, 6, 6)
    a = fxcpp.aten.load(other, runtime='cpp')(x)
    b = fxcpp.aten._runtime._load_bytes(data, runtime='cpp')(x)
    torch.testing.assert_close(a, b, rtol=0, atol=0)


try:
    import torchvision
except ImportError:  # pragma: no cover
    torchvision = None


@pytest.mark.skipif(torchvision is None, reason='torchvision is not installed')
def test_resnet18_dynamic_batch(tmp_path):
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10).eval()
    b = torch.export.Dim('batch', min=1, max=16)
    path = _export(tmp_path, model, (torch.randn(2, 3, 64, 64),), dynamic_shapes=({0: b},))
    _check(path, (torch.randn(1, 3, 64, 64),), (torch.randn(3, 3, 64, 64),))


@pytest.mark.skipif(torchvision is None, reason='torchvision is not installed')
def test_resnet18_decomposed_loads_untrusted(tmp_path):
    # Decomposed, batch norm becomes aten::_native_batch_norm_legit_no_training,
    # which trusts its statistics' sizes: it is allowed behind its argument guard
    # (Note [Argument guards]), so the default policy loads the archive for the C++
    # runtime, and the plan still manages memory. The Python runtime runs the same guard
    # (Note [Argument guards in Python]) and loads it untrusted too.
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10).eval()
    path = _export(tmp_path, model, (torch.randn(1, 3, 64, 64),), decompose=True)
    mine, _ = _check(path, (torch.randn(1, 3, 64, 64),))
    assert mine._runtime.plan_stats()['managed'] > 0
    x = torch.randn(1, 3, 64, 64)
    py = fxcpp.aten.load(path, runtime='python')
    assert isinstance(py.forward, fxcpp.aten._guards._GuardedForward)
    _close(py(x), mine(x))
    _close(fxcpp.aten.load(path, runtime='python', trusted=True)(x), mine(x))


def test_transformer_encoder(tmp_path):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.0,
                                             batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    path = _export(tmp_path, model, (torch.randn(2, 5, 16),))
    # aten::scaled_dot_product_attention is allowed (probed with hostile arguments,
    # issue 35): the default policy loads it.
    assert any('scaled_dot_product_attention' in n for n in fxcpp._C_torch.allowed_operators())
    _check(path, (torch.randn(2, 5, 16),))


def test_gpt2_style_decoder_dynamic_batch_and_length(tmp_path):
    # Batch and sequence length symbolic (t < 16: at t == ctx export specialises the mask slice).
    torch.manual_seed(0)
    b, t = torch.export.Dim('b', min=1, max=8), torch.export.Dim('t', min=2, max=15)
    path = _export(tmp_path, GPT2Decoder(), (torch.randint(0, 50, (2, 8)),), dynamic_shapes=({0: b, 1: t},))
    _check(path, (torch.randint(0, 50, (1, 5)),), (torch.randint(0, 50, (3, 15)),), (torch.randint(0, 50, (2, 2)),))


# ---- refusals ---------------------------------------------------------------------------------


def _rewrite(src, dst, edit):
    """Copies archive `src` to `dst` (stored, as torch writes), `edit(name, bytes)` -> bytes or None (drop)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, 'w', zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = edit(info.filename, zin.read(info.filename))
            if data is not None:
                zout.writestr(info.filename, data)
    return dst


def _edit_model(tmp_path, fn, model=None, args=None, name='bad'):
    import json
    src = _export(tmp_path, model or LinConvRelu(), args or (torch.randn(2, 3, 6, 6),), name='src')

    def edit(filename, data):
        if filename.endswith('models/model.json'):
            doc = json.loads(data)
            fn(doc)
            return json.dumps(doc).encode()
        return data
    return _rewrite(src, str(tmp_path / f'{name}.pt2'), edit)


def test_newer_schema_major_refused_naming_both(tmp_path):
    def newer(doc):
        doc['schema_version'] = {'major': 99, 'minor': 0}
    path = _edit_model(tmp_path, newer)
    with pytest.raises(ValueError, match=r'99\.0.*8\.\d+'):
        fxcpp.aten.load(path, runtime='cpp')


def test_newer_minor_loads(tmp_path):
    def newer(doc):
        doc['schema_version']['minor'] += 100
    path = _edit_model(tmp_path, newer)
    fxcpp.aten.load(path, runtime='cpp')


def test_unknown_operator_refused(tmp_path):
    def swap(doc):
        for n in doc['graph_module']['graph']['nodes']:
            if n['target'] == 'torch.ops.aten.relu.default':
                n['target'] = 'torch.ops.aten.from_file.default'
    path = _edit_model(tmp_path, swap)
    with pytest.raises(ValueError, match='from_file'):
        fxcpp.aten.load(path, runtime='cpp')


def test_pickled_weight_refused_never_unpickled(tmp_path):
    # A weight marked use_pickle whose record is a pickle that would create a
    # marker file: refused with the reason, the marker never appears.
    import json
    import pickle
    marker = tmp_path / 'pwned'

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), 'w'))
    src = _export(tmp_path, LinConvRelu(), (torch.randn(2, 3, 6, 6),), name='src')

    def edit(filename, data):
        if filename.endswith('model_weights_config.json'):
            doc = json.loads(data)
            for entry in doc['config'].values():
                entry['use_pickle'] = True
            return json.dumps(doc).encode()
        if '/data/weights/weight_' in filename or filename.endswith('sample_inputs/model.pt'):
            return pickle.dumps(Payload())
        return data
    path = _rewrite(src, str(tmp_path / 'pickled.pt2'), edit)
    for trusted in (False, True):
        with pytest.raises(ValueError, match='pickled.*never unpickles'):
            fxcpp.aten.load(path, runtime='cpp', trusted=trusted)
    assert not marker.exists()


def test_sample_inputs_never_read(tmp_path):
    # The pickled sample inputs are skipped: a payload there changes nothing.
    import pickle
    marker = tmp_path / 'pwned'

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), 'w'))
    src = _export(tmp_path, LinConvRelu(), (torch.randn(2, 3, 6, 6),), name='src')
    path = _rewrite(src, str(tmp_path / 's.pt2'), lambda f, d: pickle.dumps(Payload()) if 'sample_inputs' in f else d)
    x = torch.randn(2, 3, 6, 6)
    torch.testing.assert_close(fxcpp.aten.load(path, runtime='cpp')(x), fxcpp.aten.load(src, runtime='cpp')(x))
    assert not marker.exists()


def test_keyword_inputs_refused(tmp_path):
    class Kw(torch.nn.Module):
        def forward(self, x, *, y):
            return x + y
    ep = torch.export.export(Kw(), (torch.randn(2),), {'y': torch.randn(2)})
    path = str(tmp_path / 'kw.pt2')
    torch.export.save(ep, path)
    with pytest.raises(ValueError, match='keyword inputs'):
        fxcpp.aten.load(path, runtime='cpp')


def test_oversized_tensor_refused(tmp_path):
    import json
    src = _export(tmp_path, LinConvRelu(), (torch.randn(2, 3, 6, 6),), name='src')

    def edit(filename, data):
        if filename.endswith('model_weights_config.json'):
            doc = json.loads(data)
            entry = doc['config']['lin.weight']['tensor_meta']
            entry['sizes'][0] = {'as_int': 1 << 40}
            return json.dumps(doc).encode()
        return data
    path = _rewrite(src, str(tmp_path / 'big.pt2'), edit)
    with pytest.raises(ValueError, match='extends past its record'):
        fxcpp.aten.load(path, runtime='cpp')


def test_truncated_and_flipped_refused(tmp_path):
    src = _export(tmp_path, LinConvRelu(), (torch.randn(2, 3, 6, 6),), name='src')
    with open(src, 'rb') as f:
        data = f.read()
    for cut in (0, 10, len(data) // 2, len(data) - 1):
        with pytest.raises(ValueError):
            fxcpp.aten._runtime._load_bytes(data[:cut], runtime='cpp')
    step = max(1, len(data) // 97)
    for at in range(0, len(data), step):
        flipped = bytearray(data)
        flipped[at] ^= 0x5A
        try:
            fxcpp.aten._runtime._load_bytes(bytes(flipped), runtime='cpp')
        except ValueError:
            pass


# ---- input checks: the same from both runtimes (Note [Exported input checks]) -------------------


def _error(fn, *args):
    """(type, text) of what fn(*args) raises, None when it runs."""
    try:
        with torch.no_grad():
            fn(*args)
    except Exception as e:  # noqa: BLE001 -- any error is compared as it is
        return type(e), str(e)
    return None


class TwoInputs(torch.nn.Module):
    def forward(self, x, y, z):
        return x.sum(1) + y.sum(1) + z[: x.shape[0]].sum(1)


def _two_inputs(tmp_path):
    # x [b, 4] with b in [3, 6]; y [b, 2] (the same symbol); z [2*b, 3] (a derived size).
    b = torch.export.Dim('b', min=3, max=6)
    args = (torch.randn(4, 4), torch.randn(4, 2), torch.randn(8, 3))
    return _export(tmp_path, TwoInputs(), args, dynamic_shapes=({0: b}, {0: b}, {0: 2 * b}), name='two')


@pytest.mark.parametrize('case, pattern', [
    ((torch.randn(4, 4), torch.randn(4, 2)), r'forward expects 3 inputs \(x, y, z\), got 2'),
    ((torch.randn(4, 4), torch.randn(4, 2), torch.randn(8, 3), 1), r'forward expects 3 inputs \(x, y, z\), got 4'),
    ((torch.randn(4, 4), 2.0, torch.randn(8, 3)), r"input 1 \('y'\): expected a Tensor, got a float"),
    ((torch.randn(4, 4).double(), torch.randn(4, 2), torch.randn(8, 3)),
     r'Expected input at x to have dtype float32 \(the program was exported for it\), but got float64'),
    ((torch.randn(4), torch.randn(4, 2), torch.randn(8, 3)), r'expected a 2-dimensional tensor, got one with 1'),
    ((torch.randn(4, 5), torch.randn(4, 2), torch.randn(8, 3)), r'x.shape\[1\] to be equal to 4, but got 5'),
    ((torch.randn(7, 4), torch.randn(7, 2), torch.randn(14, 3)), r'x.shape\[0\] to be <= 6, but got 7 \(the range of'),
    ((torch.randn(2, 4), torch.randn(2, 2), torch.randn(4, 3)), r'x.shape\[0\] to be >= 3, but got 2'),
    ((torch.randn(4, 4), torch.randn(5, 2), torch.randn(8, 3)),
     r"input 1 \('y'\): Expected input at y.shape\[0\] to be equal to x.shape\[0\] \(4\), but got 5"),
    ((torch.randn(4, 4), torch.randn(4, 2), torch.randn(9, 3)),
     r'z.shape\[0\] to be equal to 2\*x.shape\[0\] \(8\), but got 9'),
])
def test_input_errors_alike_from_both_runtimes(tmp_path, case, pattern):
    path = _two_inputs(tmp_path)
    mine, py = fxcpp.aten.load(path, runtime='cpp'), fxcpp.aten.load(path, runtime='python')
    want = _error(mine, *case)
    assert want is not None and want[0] is TypeError and re.search(pattern, want[1]), want
    assert _error(py, *case) == want


def test_input_checks_alike_on_random_inputs(tmp_path):
    # Hypothesis: any shapes and dtypes: both runtimes raise the same error or both run
    # (to the same result).
    from hypothesis import given, settings, strategies as st
    path = _two_inputs(tmp_path)
    mine, py = fxcpp.aten.load(path, runtime='cpp'), fxcpp.aten.load(path, runtime='python')
    shapes = st.lists(st.integers(0, 13), min_size=0, max_size=3)
    dtypes = st.sampled_from([torch.float32, torch.float64, torch.int64])

    @settings(max_examples=150, deadline=None, derandomize=True)
    @given(st.lists(st.tuples(shapes, dtypes), min_size=2, max_size=4))
    def check(specs):
        args = [torch.ones(s, dtype=d) for s, d in specs]
        want = _error(mine, *args)
        assert _error(py, *args) == want
        if want is None:
            with torch.no_grad():
                _close(py(*args), mine(*args))
    check()


def test_edited_python_graph_is_checked_as_it_is(tmp_path):
    # The checks read the placeholders at each call: a graph that takes another input now
    # is checked for it (the new placeholder carries no spec: any value).
    path = _export(tmp_path, LinConvRelu(), (torch.randn(2, 3, 6, 6),))
    gm = fxcpp.aten.load(path)
    x = torch.randn(2, 3, 6, 6)
    with pytest.raises(TypeError, match=r'forward expects 1 inputs \(x\), got 2'):
        gm(x, x)
    out = next(n for n in gm.graph.nodes if n.op == 'output')
    with gm.graph.inserting_after(next(n for n in gm.graph.nodes if n.op == 'placeholder')):
        extra = gm.graph.placeholder('scale')
    with gm.graph.inserting_before(out):
        scaled = gm.graph.call_function(torch.ops.aten.mul.Tensor, (out.args[0], extra))
    out.args = (scaled,)
    gm.recompile()
    with torch.no_grad():
        torch.testing.assert_close(gm(x, 2.0), 2 * torch.export.load(path).module()(x), **TOL)
    with pytest.raises(TypeError, match=r'Expected input at x.shape\[2\] to be equal to 6, but got 7'):
        gm(torch.randn(2, 3, 7, 6), 2.0)
