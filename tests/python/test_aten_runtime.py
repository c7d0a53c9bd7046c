"""fxcpp.aten.save/load and the C++ runtime from Python (fxcpp._C_torch).

Differential against eager PyTorch and torch.fx: saved graphs come back with
the same code, the C++ runtime gives the eager results, loading runs no code
from a file, and corrupt files raise Python exceptions.
"""
import inspect
import importlib.util
import os
import pickle
import struct
import threading

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st
from torch.fx.experimental.proxy_tensor import make_fx

import fxcpp
from fxcpp import aten

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, '..', 'cpp_torch', 'fixtures')


def _fixtures_module():
    spec = importlib.util.spec_from_file_location('make_fixtures', os.path.join(FIXTURES, 'make_fixtures.py'))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


fixtures = _fixtures_module()


def _expected(version):
    with open(os.path.join(FIXTURES, f'small_v{version}.expected.bin'), 'rb') as f:
        data = f.read()
    out, pos = {}, 0
    for n in (1, 3):
        (count,) = struct.unpack_from('<q', data, pos)
        pos += 8
        out[n] = torch.tensor(struct.unpack_from(f'<{count}f', data, pos))
        pos += 4 * count
    return out


def chain(x, y):
    for _ in range(10):
        x = torch.relu(torch.mul(torch.add(x, y), y))
    return x


@pytest.fixture
def chain_file(tmp_path):
    x, y = torch.randn(2, 8), torch.randn(2, 8)
    path = tmp_path / 'chain.fxpt'
    aten.save(fxcpp.from_torch_fx(make_fx(chain)(x, y)), path)
    return path


@pytest.mark.parametrize('version', range(1, aten.FORMAT_VERSION + 1))
def test_every_format_version_loads_in_both_runtimes(version):
    path = os.path.join(FIXTURES, f'small_v{version}.fxpt')
    expected = _expected(version)
    gm = aten.load(path)
    cpp = aten.load(path, runtime='cpp')
    assert isinstance(gm, fxcpp.GraphModule) and isinstance(cpp, torch.nn.Module)
    for n in (1, 3):
        x = fixtures.small_input(n)
        torch.testing.assert_close(gm(x)['out'].detach().reshape(-1), expected[n])
        for _ in range(2):
            torch.testing.assert_close(cpp(x)['out'].reshape(-1), expected[n])


def test_save_load_round_trip_keeps_code_graph_and_meta(tmp_path):
    gm = fixtures.small_module()
    path = tmp_path / 'small.fxpt'
    aten.save(gm, path)
    back = aten.load(path)
    assert back.code == gm.code
    assert str(back.graph) == str(gm.graph)
    for a, b in zip(gm.graph.nodes, back.graph.nodes):
        assert a.name == b.name and a.op == b.op and a.target == b.target
        if 'tensor_meta' in a.meta:
            assert b.meta['tensor_meta'] == a.meta['tensor_meta']
    params = dict(back.named_parameters())
    assert set(params) == {'conv.weight', 'conv.bias', 'fc.weight', 'fc.bias'}
    assert all(p.requires_grad for p in params.values())
    torch.testing.assert_close(dict(back.named_buffers())['_tensor_constant0'], gm._tensor_constant0)
    x = fixtures.small_input(2)
    torch.testing.assert_close(back(x), gm(x))
    # The archive is PyTorch's zip container: readable by torch's own reader.
    reader = torch._C.PyTorchFileReader(str(path))
    assert reader.get_record('graph.json').startswith(b'{"format":"fxcpp-aten","version":1')


@pytest.mark.parametrize('kind', ['make_fx', 'named', 'keyword'])
def test_graph_modules_with_any_class_name_save_and_load(tmp_path, kind):
    """make_fx names its GraphModule '<lambda>', which no loader accepts as a class name (Note
    [Names a file may use]): the file records 'GraphModule' then, and a class name that is an
    identifier is kept. Found by bench/bench_runtime.py, which saves make_fx graphs."""
    def model(x):
        return torch.relu(x) + 1
    x = torch.randn(2, 3)
    if kind == 'make_fx':
        gm = fxcpp.from_torch_fx(make_fx(lambda t: model(t))(x))  # named '<lambda>', as make_fx(module) is
    else:
        lowered = aten.lower(fxcpp.symbolic_trace(model), x)
        gm = fxcpp.GraphModule(lowered, lowered.graph, 'Named' if kind == 'named' else 'class')
    name = type(gm).__name__ if type(gm).__name__ != 'GraphModule' else gm._get_name()
    path = tmp_path / 'm.fxpt'
    aten.save(gm, path)
    back = aten.load(path)
    assert type(back).__name__ == (name if name.isidentifier() and name != 'class' else 'GraphModule'), name
    torch.testing.assert_close(back(x), model(x))
    torch.testing.assert_close(aten.load(path, runtime='cpp')(x), model(x))


def test_cpp_runtime_matches_eager_and_plans_memory(chain_file):
    m = aten.load(chain_file, runtime='cpp')
    stats = m._runtime.plan_stats()
    assert stats['instructions'] == 30 and stats['managed'] == 29 and stats['buffers'] == 2
    for rows in (2, 2, 5, 1):
        x, y = torch.randn(rows, 8), torch.randn(rows, 8)
        first = m(x, y)
        torch.testing.assert_close(first, chain(x, y))
        second = m(x * 2, y)
        torch.testing.assert_close(first, chain(x, y))  # not overwritten by the next forward
        torch.testing.assert_close(second, chain(x * 2, y))
    # Outputs are inference tensors, as under torch.inference_mode().
    assert m(x, y).is_inference()


def test_cpp_module_shares_parameter_storage():
    path = os.path.join(FIXTURES, 'small_v1.fxpt')
    m = aten.load(path, runtime='cpp')
    tensors = {name: t for name, _, t in m._runtime.tensors()}
    state = m.state_dict()
    assert set(state) == set(tensors)
    for name, t in tensors.items():
        assert state[name].data_ptr() == t.data_ptr()
    assert m.input_names == ['x']
    assert 'torch.ops.aten.conv2d.default' in m.graph_str()


def test_threads_share_one_loaded_module(chain_file):
    m = aten.load(chain_file, runtime='cpp')
    y = torch.randn(3, 8)
    xs = [torch.randn(3, 8) for _ in range(8)]
    results = [None] * 8
    errors = []

    def work(t):
        try:
            for _ in range(50):
                for i in range(t, 8, 2):
                    results[i] = m(xs[i], y)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i in range(8):
        torch.testing.assert_close(results[i], chain(xs[i], y))


def test_inputs_are_checked_at_the_boundary(chain_file):
    m = aten.load(chain_file, runtime='cpp')
    with pytest.raises(TypeError, match=r"forward expects 2 inputs \(x_1, y_1\), got 1"):
        m(torch.randn(2, 8))
    with pytest.raises(TypeError, match=r"input 0 \('x_1'\): expected a Tensor, got a str"):
        m('no', torch.randn(2, 8))
    with pytest.raises(TypeError, match=r"takes tensors, numbers"):
        m(object(), torch.randn(2, 8))
    with pytest.raises(RuntimeError, match=r"node 'add' \(aten::add.Tensor\) failed"):
        m(torch.randn(2, 8), torch.randn(3, 8))
    fx_small = aten.load(os.path.join(FIXTURES, 'small_v1.fxpt'), runtime='cpp')
    with pytest.raises(TypeError, match='expected a 4-dimensional tensor'):
        fx_small(torch.randn(3, 8, 8))


def test_save_refuses_graphs_that_are_not_lowered(tmp_path):
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(2, 2)

        def forward(self, x):
            return self.lin(x).relu()

    with pytest.raises(ValueError, match=r"call_module node; lower the model first"):
        aten.save(fxcpp.symbolic_trace(M()), tmp_path / 'm.fxpt')
    gm = fxcpp.symbolic_trace(lambda x: torch.relu(x) + 1)
    with pytest.raises(ValueError, match=r"neither an ATen operator overload nor a runtime primitive"):
        aten.save(gm, tmp_path / 'f.fxpt')


def test_module_names_with_dashes_round_trip(tmp_path):
    # torch module names may hold '-' (torchvision's regnets: "block1-0"); what
    # fxcpp saves, it loads (Note [Names a file may use] in src/torch/names.h).
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.add_module('block1-0', torch.nn.Linear(3, 3))

        def forward(self, x):
            return getattr(self, 'block1-0')(x).relu()

    m, x = M().eval(), torch.randn(2, 3)
    gm = aten.lower(m, x)
    aten.save(gm, tmp_path / 'm.fxpt')
    for runtime in ('cpp', 'python'):
        loaded = aten.load(tmp_path / 'm.fxpt', runtime=runtime)
        torch.testing.assert_close(loaded(x), m(x))
    assert 'getattr(self, "block1-0")' in aten.load(tmp_path / 'm.fxpt', runtime='python').code


def test_save_refuses_names_the_loader_would_refuse(tmp_path):
    gm = aten.lower(fxcpp.symbolic_trace(lambda x: torch.relu(x) + 1), torch.randn(2))
    node = next(n for n in gm.graph.nodes if n.op == 'call_function')
    node.name = 'relu default'
    with pytest.raises(ValueError, match=r"cannot save node 'relu default': its name is not an ASCII Python identifier"):
        aten.save(gm, tmp_path / 'm.fxpt')
    assert not (tmp_path / 'm.fxpt').exists()


def test_loading_under_a_fake_tensor_mode_makes_real_constants(tmp_path):
    # torch.compile calls backends under a FakeTensorMode: the plan's constants (here the
    # wrapped numbers 2.5 and 3 that aten.mul/div.Tensor take as Tensors) stay real tensors
    # (Note [Plans are built from real tensors] in src/torch/compile.cpp).
    fake_tensor = pytest.importorskip('torch._subclasses.fake_tensor')
    g = fxcpp.Graph()
    x = g.placeholder('x')
    y = g.call_function(torch.ops.aten.mul.Tensor, (x, 2.5))
    y = g.call_function(torch.ops.aten.div.Tensor, (3, y))
    g.output(g.call_function(torch.ops.aten.relu.default, (y,)))
    gm = fxcpp.GraphModule(torch.nn.Module(), g)
    aten.save(gm, tmp_path / 'm.fxpt')
    with fake_tensor.FakeTensorMode():
        loaded = aten.load(tmp_path / 'm.fxpt', runtime='cpp')
    for x in (torch.randn(3), torch.arange(4)):
        torch.testing.assert_close(loaded(x), gm(x))


@pytest.mark.skipif(not hasattr(torch.library, 'custom_op'), reason='torch.library.custom_op needs torch 2.4')
def test_custom_operators_run_only_when_trusted(tmp_path):
    # A torch.library operator with a Python kernel: refused from an untrusted file; trusted,
    # it runs from the C++ runtime with the GIL released (the kernel takes the GIL), from threads.
    @torch.library.custom_op('fxcpp_test::twice', mutates_args=())
    def twice(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    g = fxcpp.Graph()
    g.output(g.call_function(torch.ops.fxcpp_test.twice.default, (g.placeholder('x'),)))
    aten.save(fxcpp.GraphModule(torch.nn.Module(), g), tmp_path / 'm.fxpt')
    with pytest.raises(ValueError, match=r'calls fxcpp_test::twice, which a file from an untrusted source may '
                                         r'not call \(it is not in the aten namespace\)'):
        aten.load(tmp_path / 'm.fxpt', runtime='cpp')
    loaded = aten.load(tmp_path / 'm.fxpt', runtime='cpp', trusted=True)
    results = [None] * 4

    def work(i):
        results[i] = loaded(torch.full((3,), float(i)))
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert [r.tolist() for r in results] == [[2.0 * i] * 3 for i in range(4)]


class _Payload:
    """Runs a command when unpickled: what an unrestricted loader would execute."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f'touch {self.marker}',))


def test_loading_never_runs_code_from_a_file(tmp_path):
    marker = tmp_path / 'pwned'
    # A bare pickle, and PyTorch's zip container with a pickle inside (what
    # torch.save and GraphModule pickling write), both named .fxpt.
    bare = tmp_path / 'bare.fxpt'
    bare.write_bytes(pickle.dumps(_Payload(marker)))
    zipped = tmp_path / 'zipped.fxpt'
    torch.save({'model': _Payload(marker)}, zipped)
    # A graph.json whose target names a Python callable.
    crafted = tmp_path / 'crafted.fxpt'
    gm = fxcpp.from_torch_fx(make_fx(chain)(torch.randn(1, 8), torch.randn(1, 8)))
    aten.save(gm, crafted)
    reader = torch._C.PyTorchFileReader(str(crafted))
    text = reader.get_record('graph.json').replace(b'"aten::relu"', b'"os.system"', 1)
    writer = torch._C.PyTorchFileWriter(str(crafted))
    writer.write_record('graph.json', text, len(text))
    writer.write_end_of_file()
    for path, message in ((bare, 'not a readable model archive'), (zipped, "no record 'graph.json'"),
                          (crafted, "'os.system' is not a runtime primitive")):
        for runtime in ('python', 'cpp'):
            with pytest.raises(ValueError, match=message):
                aten.load(path, runtime=runtime)
    assert not marker.exists()


def test_newer_versions_are_refused(tmp_path):
    path = tmp_path / 'future.fxpt'
    text = torch._C.PyTorchFileReader(os.path.join(FIXTURES, 'small_v1.fxpt')).get_record('graph.json')
    text = text.replace(b'"version":1', b'"version":7', 1)
    writer = torch._C.PyTorchFileWriter(str(path))
    writer.write_record('graph.json', text, len(text))
    writer.write_end_of_file()
    with pytest.raises(ValueError, match=r'format version 7, newer than the newest this build reads \(1\)'):
        aten.load(path)


_FIXTURE_BYTES = open(os.path.join(FIXTURES, 'small_v1.fxpt'), 'rb').read()


@settings(max_examples=int(os.environ.get('FXCPP_HYPOTHESIS_MAX_EXAMPLES', 60)), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, len(_FIXTURE_BYTES) - 1), st.integers(1, 255)), min_size=1, max_size=6),
       st.integers(0, len(_FIXTURE_BYTES)))
def test_corrupt_files_raise_python_errors(tmp_path, flips, cut):
    data = bytearray(_FIXTURE_BYTES[:max(cut, 1)] if cut < 200 else _FIXTURE_BYTES)
    for pos, x in flips:
        if pos < len(data):
            data[pos] ^= x
    path = tmp_path / 'fuzz.fxpt'
    path.write_bytes(bytes(data))
    for runtime in ('cpp', 'python'):
        try:
            m = aten.load(path, runtime=runtime)
        except ValueError:
            continue
        try:
            m(fixtures.small_input(1))
        except (RuntimeError, TypeError, ValueError):
            pass


def _lowered(model, *inputs):
    lower = getattr(aten, 'lower', None)
    if lower is None:
        pytest.skip('fxcpp.aten.lower is not available')
    return lower(model, *inputs)


def test_lowered_resnet18_runs_in_cpp_at_other_batch_sizes(tmp_path):
    torchvision = pytest.importorskip('torchvision')
    torch.manual_seed(0)
    model = torchvision.models.resnet18().eval()
    gm = _lowered(model, torch.randn(1, 3, 64, 64))
    path = tmp_path / 'resnet18.fxpt'
    aten.save(gm, path)
    assert aten.load(path).code == gm.code
    m = aten.load(path, runtime='cpp')
    for n in (1, 3):
        x = torch.randn(n, 3, 64, 64)
        with torch.no_grad():
            ref = model(x)
        for _ in range(2):
            torch.testing.assert_close(m(x), ref, rtol=1e-4, atol=1e-4)


# ---- property: the memory planner on random graphs with views and in-place ops ----------

_aten = torch.ops.aten


@st.composite
def _random_graphs(draw):
    """A random ATen graph over [rows, 8] inputs: elementwise ops, views (view, t,
    slice), in-place ops on live values (including views), cat; returns a random
    subset of its values (views of intermediates included)."""
    g = fxcpp.Graph()
    vals = {'full': [g.placeholder('x'), g.placeholder('y')], 'flat': [], 'T': []}
    steps = draw(st.integers(1, 25))
    for _ in range(steps):
        kind = draw(st.sampled_from([k for k in vals if vals[k]]))
        a = draw(st.sampled_from(vals[kind]))
        b = draw(st.sampled_from(vals[kind]))
        op = draw(st.sampled_from(['add', 'mul', 'relu', 'sigmoid', 'neg', 'relu_', 'mul_', 'view', 't',
                                   'slice', 'clone', 'cat', 'sum']))
        if op in ('add', 'mul'):
            n = g.call_function(getattr(_aten, op).Tensor, (a, b))
        elif op in ('relu', 'sigmoid', 'neg', 'clone'):
            n = g.call_function(getattr(_aten, op).default, (a,))
        elif op == 'relu_':
            n = g.call_function(_aten.relu_.default, (a,))
        elif op == 'mul_':
            n = g.call_function(_aten.mul_.Tensor, (a, 0.5))
        elif op == 'view' and kind == 'full':
            n, kind = g.call_function(_aten.reshape.default, (a, [-1])), 'flat'
        elif op == 't' and kind in ('full', 'T'):
            n, kind = g.call_function(_aten.t.default, (a,)), 'T' if kind == 'full' else 'full'
        elif op == 'slice' and kind == 'full':
            n = g.call_function(_aten.slice.Tensor, (a, 1, 0, 8, 1))
        elif op == 'cat' and kind == 'full':
            n = g.call_function(_aten.slice.Tensor, (g.call_function(_aten.cat.default, ([a, b], 1)), 1, 4, 12))
        elif op == 'sum' and kind == 'full':
            n = g.call_function(_aten.add.Tensor, (a, g.call_function(_aten.sum.dim_IntList, (b, [1], True))))
        else:
            continue
        vals[kind].append(n)
    every = [v for k in vals for v in vals[k]]
    outs = draw(st.lists(st.sampled_from(every), min_size=1, max_size=4))
    g.output(tuple(outs))
    return g


@settings(max_examples=int(os.environ.get('FXCPP_HYPOTHESIS_MAX_EXAMPLES', 60)), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(_random_graphs(), st.lists(st.integers(1, 4), min_size=2, max_size=4))
def test_planned_runtime_matches_python_on_random_graphs(tmp_path, graph, rows):
    gm = fxcpp.GraphModule(torch.nn.Module(), graph)
    path = tmp_path / 'random.fxpt'
    aten.save(gm, path)
    m = aten.load(path, runtime='cpp')
    for r in rows:
        x, y = torch.randn(r, 8), torch.randn(r, 8)
        want = gm(x.clone(), y.clone())
        got = m(x.clone(), y.clone())
        assert len(got) == len(want)
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, equal_nan=True)



class _Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
        self.register_buffer('scale', torch.ones(3))

    def forward(self, x):
        return torch.relu(self.lin(x)) * self.scale


@pytest.fixture
def scaled_file(tmp_path):
    torch.manual_seed(0)
    path = tmp_path / 'scaled.fxpt'
    aten.save(aten.lower(fxcpp.symbolic_trace(_Scaled().eval()), torch.randn(2, 4)), path)
    return path


def test_assigning_a_loaded_tensor_changes_what_runs(scaled_file):
    """m.lin.weight = t, register_buffer/register_parameter of a loaded name, setattr and
    load_state_dict(assign=True) reach the C++ runtime, as load_state_dict does: the module
    computes what an eager module given the same tensors computes, and what the Python runtime
    (whose get_attr reads the attribute) computes (Note [Assigning a loaded tensor])."""
    x = torch.randn(5, 4)
    m = aten.load(scaled_file, runtime='cpp', mmap=False)
    py = aten.load(scaled_file, runtime='python', mmap=False)
    eager = _Scaled().eval()
    eager.load_state_dict(m.state_dict())
    torch.testing.assert_close(m(x), eager(x))

    def check():
        for k, v in eager.state_dict().items():
            assert torch.equal(m.state_dict()[k], v), k
        torch.testing.assert_close(m(x), eager(x))
        torch.testing.assert_close(py(x), eager(x))

    w = torch.randn(3, 4)
    m.lin.weight = w
    py.lin.weight = torch.nn.Parameter(w.clone())
    eager.lin.weight = torch.nn.Parameter(w.clone())  # plain nn.Module: the attribute is rebound
    assert m.lin.weight is not w and not m.lin.weight.requires_grad  # copied into the runtime's tensor
    check()
    s = torch.full((3,), 2.5)
    m.register_buffer('scale', s)
    py.register_buffer('scale', s.clone())
    eager.register_buffer('scale', s.clone())
    check()
    b = torch.nn.Parameter(torch.randn(3))
    m.lin.register_parameter('bias', b)
    setattr(py.lin, 'bias', torch.nn.Parameter(b.detach().clone()))
    eager.lin.bias = torch.nn.Parameter(b.detach().clone())
    check()
    setattr(m.lin, 'bias', b.detach().double())  # the runtime's tensor keeps its dtype, as load_state_dict does
    assert m.lin.bias.dtype == torch.float32
    torch.testing.assert_close(m(x), eager(x))
    state = {k: torch.randn_like(v) for k, v in m.state_dict().items()}
    if 'assign' in inspect.signature(torch.nn.Module.load_state_dict).parameters:  # torch 2.1+
        m.load_state_dict(state, assign=True)
    else:
        m.load_state_dict(state)
    py.load_state_dict(state)
    eager.load_state_dict(state)
    check()
    m.lin.weight += 1  # in place, then assigned to itself
    eager.lin.weight.data += 1
    torch.testing.assert_close(m(x), eager(x))
    # Names that are not the runtime's work as on any module, and change nothing that runs.
    m.note = 'mine'
    m.register_buffer('extra', torch.ones(2))
    m.lin.other = torch.nn.Identity()
    assert m.note == 'mine' and 'extra' in m.state_dict()
    torch.testing.assert_close(m(x), eager(x))
    assert repr(m).startswith('CppModule(\n  inputs=') and '(lin): Module(\n' in repr(m)


def test_what_cannot_reach_the_runtime_is_refused(scaled_file):
    x = torch.randn(2, 4)
    m = aten.load(scaled_file, runtime='cpp')
    before = m(x)
    state = {k: v.clone() for k, v in m.state_dict().items()}
    refusals = [
        (lambda: setattr(m.lin, 'weight', torch.randn(4, 3)), RuntimeError,
         r"shape \[4, 3\] to 'lin\.weight', one of the tensors the C\+\+ runtime runs with, of shape \[3, 4\]"),
        (lambda: setattr(m, 'scale', torch.ones(1)), RuntimeError, r"'scale'.*so the shape must stay"),
        (lambda: setattr(m.lin, 'weight', None), TypeError, r"cannot assign a NoneType to 'lin\.weight'"),
        (lambda: m.register_buffer('scale', None), TypeError, "cannot assign a NoneType to 'scale'"),
        (lambda: m.lin.register_parameter('bias', None), TypeError, "cannot assign a NoneType to 'lin.bias'"),
        (lambda: setattr(m, 'scale', 2.0), TypeError, "assign a tensor of shape"),
        (lambda: m.register_buffer('scale', torch.ones(3), persistent=False), RuntimeError, 'persistent=False'),
        (lambda: delattr(m.lin, 'weight'), RuntimeError, r"cannot delete 'lin\.weight'"),
        (lambda: setattr(m, 'lin', torch.nn.Linear(4, 3)), RuntimeError,
         r"submodule 'lin': it holds tensors the C\+\+ runtime runs with \('lin\.bias', 'lin\.weight'\).*"
         r"load_state_dict"),
        (lambda: m.add_module('lin', torch.nn.Identity()), RuntimeError, "submodule 'lin'"),
        (lambda: delattr(m, 'lin'), RuntimeError, "submodule 'lin'"),
    ]
    for call, error, message in refusals:
        with pytest.raises(error, match=message):
            call()
    for k, v in m.state_dict().items():
        assert torch.equal(v, state[k]), k
    assert torch.equal(m(x), before)
