"""Files from strangers (issue 24), the Python side: strings of a file never
become code (Note [Strings in generated code]), the load path reads the file
once and every bad file raises ValueError (Note [Python load path]), saving is
atomic and checked (Note [Atomic saving]), and a CppModule refuses conversions
that would make its state_dict differ from what runs."""
import copy
import json
import os
import pickle
import resource
import signal
import stat
import threading
import time
import zipfile

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

import fxcpp
from fxcpp import aten

MAX_EXAMPLES = int(os.environ.get('FXCPP_HYPOTHESIS_MAX_EXAMPLES', 60))


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 4)
        self.register_buffer('shift', torch.arange(4.0))

    def forward(self, x):
        return torch.softmax(self.lin(x) + self.shift, dim=-1)


def _lowered():
    torch.manual_seed(0)
    return aten.lower(Small().eval(), torch.randn(2, 3))


def _records(path):
    """The archive's records by their name under the top-level folder."""
    with zipfile.ZipFile(path) as z:
        return {n.split('/', 1)[1]: z.read(n) for n in z.namelist()}


def _write(path, doc, records):
    """An archive with this graph.json and the other records (PyTorch's writer)."""
    text = json.dumps(doc).encode()
    writer = torch._C.PyTorchFileWriter(str(path))
    writer.write_record('graph.json', text, len(text))
    for name, data in records.items():
        if name.startswith('data/'):
            writer.write_record(name, data, len(data))
    writer.write_end_of_file()


@pytest.fixture(scope='module')
def small_file(tmp_path_factory):
    path = tmp_path_factory.mktemp('files') / 'small.fxpt'
    aten.save(_lowered(), path)
    records = _records(path)
    return path, json.loads(records['graph.json']), records


# ---- Note [Strings in generated code] ----------------------------------------------

def _touch(marker):
    return f"x=__import__('os').system('touch {marker}')"


def test_placeholder_target_never_runs(tmp_path, small_file):
    """A placeholder target torch.fx would write into `def forward(self, ...)`:
    refused with a ValueError naming the node at GraphModule construction,
    pickling and to_torch_fx; nothing runs. (torch.fx
    itself runs it: a deliberate divergence.)"""
    marker = tmp_path / 'MARKER'
    g = fxcpp.Graph()
    x = g.placeholder(_touch(marker))
    g.output(g.call_function(torch.relu, (x,)))
    with pytest.raises(ValueError, match="cannot generate code for node '.*': its placeholder target"):
        fxcpp.GraphModule(torch.nn.Module(), g)
    with pytest.raises(ValueError, match='placeholder target'):
        pickle.dumps(g)  # a graph pickles as its generated code
    with pytest.raises(ValueError, match="to_torch_fx: cannot convert node '.*': torch.fx would write its placeholder target"):
        fxcpp.to_torch_fx(g)

    # The same from a file: the loader refuses the name, or the Python runtime's
    # code generation does; the C++ runtime never generates Python.
    path, doc, records = small_file
    doc = copy.deepcopy(doc)
    doc['nodes'][0]['target'] = _touch(marker)
    crafted = tmp_path / 'crafted.fxpt'
    _write(crafted, doc, records)
    with pytest.raises(ValueError):
        aten.load(crafted)
    try:
        m = aten.load(crafted, runtime='cpp')
    except ValueError:
        pass
    else:
        m(torch.randn(2, 3))
    assert not marker.exists()


def test_attribute_name_with_quote_and_newline(tmp_path):
    """A get_attr name with a quote and a newline is an escaped literal in the
    generated code: the module constructs, runs, pickles and unpickles;
    to_torch_fx refuses it (torch.fx would write it unescaped)."""
    marker = tmp_path / 'MARKER'
    name = f'w"); __import__("os").system("touch {marker}"); ("\nx'.replace('.', '_')
    root = torch.nn.Module()
    root.register_buffer(name, torch.full((2,), 3.0))
    g = fxcpp.Graph()
    x = g.placeholder('x')
    g.output(g.call_function(torch.add, (x, g.get_attr(name))))
    gm = fxcpp.GraphModule(root, g)
    assert f'getattr(self, {json.dumps(name)})' in gm.code
    assert torch.equal(gm(torch.ones(2)), torch.full((2,), 4.0))
    gm2 = pickle.loads(pickle.dumps(gm))
    assert torch.equal(gm2(torch.ones(2)), torch.full((2,), 4.0))
    with pytest.raises(ValueError, match="to_torch_fx: cannot convert node"):
        fxcpp.to_torch_fx(gm)
    assert not marker.exists()


def test_to_torch_fx_keeps_ordinary_names():
    gm = fxcpp.symbolic_trace(Small())
    ref = torch.fx.symbolic_trace(Small())
    assert fxcpp.to_torch_fx(gm).code == ref.code


# ---- Note [Python load path] ---------------------------------------------------------

def test_load_reads_the_file_once(tmp_path, small_file):
    """A fifo can be read once: loading from one works in both runtimes. (The
    old path read the file twice, the second time hanging or reading what the
    fifo gave then; here a second read gets an empty file and fails.)"""
    path, _, _ = small_file
    data = path.read_bytes()
    x = torch.randn(2, 3)
    want = aten.load(path)(x)
    for runtime in ('python', 'cpp'):
        fifo = tmp_path / f'model_{runtime}.fxpt'
        os.mkfifo(fifo)
        done = threading.Event()

        def feed():
            with open(fifo, 'wb') as f:
                f.write(data)
            while not done.is_set():  # a second reader gets an empty file, not a hang
                try:
                    os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
                except OSError:
                    pass
                time.sleep(0.05)

        t = threading.Thread(target=feed, daemon=True)
        t.start()
        try:
            m = aten.load(fifo, runtime=runtime)
        finally:
            done.set()
            t.join()
        assert torch.allclose(m(x), want)


def test_trusted_is_accepted(small_file):
    path, _, _ = small_file
    x = torch.randn(2, 3)
    for runtime in ('python', 'cpp'):
        assert torch.allclose(aten.load(path, runtime=runtime, trusted=True)(x), aten.load(path, runtime=runtime)(x))


def _json_values():
    strings = st.sampled_from(['', 'x', 'a.b', 'forward', 'training', '_runtime', '__class__', 'lin', 'lin.weight',
                               'a"b\nc', "x=__import__('os')", 'aten::relu', 'aten::add.Tensor', 'operator.add',
                               'getattr', 'placeholder', 'call_function', 'get_attr', 'output', 'call_module',
                               'float32', 'parameter', 'buffer', 'data/0', 'node', 'tuple', 'float', 'dtype',
                               'device', 'cpu', 'meta', 'tensor_meta', '\u00e9', 'x' * 300]) | st.text(max_size=8)
    leaves = st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | strings
    return st.recursive(leaves, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(strings, inner, max_size=3),
                        max_leaves=8)


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, prefix + (i,))


def _rename_tensor(doc, old, new):
    for t in doc['tensors']:
        if t['name'] == old:
            t['name'] = new
    for n in doc['nodes']:
        if n['op'] == 'get_attr' and n['target'] == old:
            n['target'] = new


_NAMES = ['forward', 'training', 'graph', 'code', '_runtime', '__class__', '__dict__', 'state_dict', 'shift.sub',
          'lin', 'lin.weight.x', 'a..b', '', 'class', 'x y', 'a"b', 'sub.forward', 'T_destination', '_modules']


@settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.data())
def test_bad_graph_json_raises_value_error(tmp_path, small_file, data):
    """graph.json fields replaced, removed or duplicated, tensors renamed (the
    get_attr nodes with them): loading either works or raises ValueError with
    a message, in both runtimes (never KeyError, TypeError, SyntaxError, ...)."""
    _, doc, records = small_file
    doc = copy.deepcopy(doc)
    for _ in range(data.draw(st.integers(1, 3))):
        action = data.draw(st.sampled_from(['replace', 'replace', 'delete', 'duplicate', 'rename']))
        if action == 'rename':
            old = data.draw(st.sampled_from([t['name'] for t in doc['tensors'] if isinstance(t, dict)
                                             and isinstance(t.get('name'), str)] or ['shift']))
            _rename_tensor(doc, old, data.draw(st.sampled_from(_NAMES) | st.text(max_size=6)))
            continue
        paths = [p for p in _paths(doc) if p]
        where = data.draw(st.sampled_from(paths))
        parent = doc
        for k in where[:-1]:
            parent = parent[k]
        if action == 'replace':
            parent[where[-1]] = data.draw(_json_values())
        elif action == 'delete':
            del parent[where[-1]]
        elif isinstance(parent, list):
            parent.insert(where[-1], copy.deepcopy(parent[where[-1]]))
    path = tmp_path / 'fuzz.fxpt'
    _write(path, doc, records)
    for runtime in ('python', 'cpp'):
        try:
            m = aten.load(path, runtime=runtime)
        except ValueError as e:
            assert str(e).strip(), 'a ValueError without a message'
            continue
        if runtime == 'python':
            assert isinstance(m.code, str)
        m.state_dict()


def test_bad_files_found_by_the_fuzzer(tmp_path, small_file):
    """What the fuzzer above found raising KeyError or TypeError before: tensor
    names that clash with the module's own attributes, a tensor used as a
    submodule, a class name that is not a string."""
    _, doc, records = small_file
    cases = {}
    for name in ('forward', 'training', 'graph', '__class__', 'shift.sub'):
        d = copy.deepcopy(doc)
        _rename_tensor(d, 'lin.weight', name)
        cases[name] = (d, ('python', 'cpp') if name != 'graph' else ('python',))
    d = copy.deepcopy(doc)
    d['class_name'] = 5
    cases['class_name'] = (d, ('python', 'cpp'))
    for name, (d, runtimes) in cases.items():
        path = tmp_path / 'case.fxpt'
        _write(path, d, records)
        for runtime in runtimes:
            # Refused by the C++ loader's checks (Note [Names a file may use]) or the Python side's.
            with pytest.raises(ValueError, match=r'(fxcpp.aten.load|fxcpp::torch): (the tensor name|malformed graph.json'
                                                 r'|tensors\[\d+\]: name)'):
                aten.load(path, runtime=runtime)


# ---- Note [Atomic saving] ------------------------------------------------------------

def test_save_to_dev_full_raises(tmp_path):
    gm = _lowered()
    with pytest.raises(OSError, match='No space left on device'):
        aten.save(gm, '/dev/full')
    # A graph without tensors too: it used to report success having written nothing.
    g = fxcpp.Graph()
    x = g.placeholder('x')
    g.output(g.call_function(torch.ops.aten.relu.default, (x,)))
    with pytest.raises(OSError, match='/dev/full'):
        aten.save(fxcpp.GraphModule(torch.nn.Module(), g), '/dev/full')
    aten.save(gm, '/dev/null')  # a device is written directly
    assert stat.S_ISCHR(os.stat('/dev/null').st_mode)


def test_save_to_an_unwritable_place_raises(tmp_path):
    gm = _lowered()
    with pytest.raises(OSError):
        aten.save(gm, tmp_path / 'missing' / 'dir' / 'm.fxpt')
    not_a_dir = tmp_path / 'file'
    not_a_dir.write_text('x')
    with pytest.raises(OSError):
        aten.save(gm, not_a_dir / 'm.fxpt')
    with pytest.raises(IsADirectoryError):
        aten.save(gm, tmp_path)
    assert sorted(os.listdir(tmp_path)) == ['file']


def test_failed_save_leaves_the_old_file(tmp_path):
    """write() fails part-way (a file size limit): OSError, the old content
    stays, no temporary file is left; then the save replaces the file and
    keeps its mode."""
    gm = _lowered()
    gm.register_buffer('big', torch.zeros(1 << 16))
    g = gm.graph
    out = next(n for n in g.nodes if n.op == 'output')
    with g.inserting_before(out):
        big = g.get_attr('big')
        s = g.call_function(torch.ops.aten.sum.default, (big,))
        out.args = ((out.args[0], s),)
    gm.recompile()
    target = tmp_path / 'm.fxpt'
    target.write_bytes(b'the old content')
    os.chmod(target, 0o640)
    old_limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, old_limit[1]))
    try:
        with pytest.raises(OSError, match='File too large'):
            aten.save(gm, target)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, old_limit)
        signal.signal(signal.SIGXFSZ, old_handler)
    assert target.read_bytes() == b'the old content'
    assert os.listdir(tmp_path) == ['m.fxpt']
    aten.save(gm, target)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    x = torch.randn(2, 3)
    got, want = aten.load(target, runtime='cpp')(x), gm(x)
    assert torch.allclose(got[0], want[0]) and torch.equal(got[1], want[1])


def test_graph_without_tensors_round_trips(tmp_path):
    g = fxcpp.Graph()
    x = g.placeholder('x')
    g.output(g.call_function(torch.ops.aten.relu.default, (x,)))
    gm = fxcpp.GraphModule(torch.nn.Module(), g)
    path = tmp_path / 'no_tensors.fxpt'
    aten.save(gm, path)
    x = torch.randn(5)
    for runtime in ('python', 'cpp'):
        assert torch.equal(aten.load(path, runtime=runtime)(x), x.relu())


def test_save_follows_a_symlink(tmp_path):
    real = tmp_path / 'real.fxpt'
    real.write_bytes(b'old')
    link = tmp_path / 'link.fxpt'
    link.symlink_to(real)
    aten.save(_lowered(), link)
    assert link.is_symlink() and zipfile.is_zipfile(real)


# ---- CppModule conversions --------------------------------------------------------------

def test_cpp_module_refuses_conversions_that_change_its_tensors(small_file):
    """.double() / .to(dtype) / .half() would replace the buffers state_dict
    shows while the runtime kept the old ones: refused. Conversions that change
    nothing keep working."""
    path, _, _ = small_file
    m = aten.load(path, runtime='cpp')
    before = {k: v.clone() for k, v in m.state_dict().items()}
    x = torch.randn(2, 3)
    want = m(x)
    for convert in (lambda m: m.double(), lambda m: m.to(torch.float64), lambda m: m.half(),
                    lambda m: m.to(dtype=torch.bfloat16)):
        with pytest.raises(RuntimeError, match='CppModule: this conversion would change'):
            convert(m)
    for same in (lambda m: m.float(), lambda m: m.to('cpu'), lambda m: m.cpu(), lambda m: m.to(torch.float32),
                 lambda m: m.eval(), lambda m: m.train(False)):
        assert same(m) is m
    sd = m.state_dict()
    assert sd.keys() == before.keys() and all(torch.equal(sd[k], before[k]) for k in sd)
    assert all(v.dtype == torch.float32 for v in sd.values())
    assert torch.equal(m(x), want)
