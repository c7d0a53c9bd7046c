"""One core in the process, and graphs handed between the extensions without files (issue 21).

Note [One core in the process] (CMakeLists.txt): fxcpp._C and fxcpp._C_torch load one copy of
libfxcpp_core; aten.compile and aten.from_torchscript hand the file to the loader in memory.
"""
import os
import sys
import tempfile

import pytest
import torch

import fxcpp
import fxcpp._C
import fxcpp._C_torch
from fxcpp import aten


def _mapped(name):
    with open('/proc/self/maps') as f:
        return {line.split()[-1] for line in f if line.rstrip().endswith(name) or f'/{name}' in line}


def test_both_extensions_map_one_core_library():
    cores = {p for p in _mapped('libfxcpp_core.so') if p.endswith('libfxcpp_core.so')}
    assert len(cores) == 1, cores
    # ... and it is the one beside the package's extensions (its lib/ folder in a wheel, the
    # build tree otherwise), not a second copy linked into each extension.
    assert not any('libfxcpp_core' in p for p in _mapped(os.path.basename(fxcpp._C.__file__)))


class _Opens:
    """Records every file Python opens (sys.audit 'open'), minus imports of code."""

    _active = None

    def __init__(self):
        self.paths = []

    def __enter__(self):
        _Opens._active = self
        return self

    def __exit__(self, *exc):
        _Opens._active = None


def _audit(event, args, _opens=_Opens):
    # The class is bound as a default: the hook outlives this module's globals at exit.
    rec = _opens._active
    if rec is None or event != 'open' or not args or not isinstance(args[0], (str, bytes, os.PathLike)):
        return
    path = os.fsdecode(args[0])
    if path.endswith(('.py', '.pyc', '.so')) or '__pycache__' in path or path.startswith('/proc/'):
        return
    rec.paths.append(path)


sys.addaudithook(_audit)


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.lin(x)) * 2


def _tmp_entries():
    return set(os.listdir(tempfile.gettempdir()))


def test_compile_opens_no_file():
    m, x = Small().eval(), torch.randn(2, 4)
    before = _tmp_entries()
    with _Opens() as rec:
        c = aten.compile(m, x)
    assert [p for p in rec.paths if p.endswith('.fxpt') or p.startswith(tempfile.gettempdir())] == []
    assert _tmp_entries() - before == set()
    torch.testing.assert_close(c(x), m(x))


def test_from_torchscript_without_path_opens_no_file():
    m, x = Small().eval(), torch.randn(2, 4)
    ts = torch.jit.trace(m, (x,))
    before = _tmp_entries()
    with _Opens() as rec:
        gm = aten.from_torchscript(ts, x)
        cm = aten.from_torchscript(ts, x, runtime='cpp')
    assert [p for p in rec.paths if p.endswith('.fxpt') or p.startswith(tempfile.gettempdir())] == []
    assert _tmp_entries() - before == set()
    torch.testing.assert_close(gm(x), m(x))
    torch.testing.assert_close(cm(x), m(x))


@pytest.mark.parametrize('runtime', ['python', 'cpp'])
def test_load_opens_only_the_file_once(tmp_path, runtime):
    m, x = Small().eval(), torch.randn(2, 4)
    path = str(tmp_path / 'small.fxpt')
    aten.save(aten.lower(m, x), path)
    with _Opens() as rec:
        loaded = aten.load(path, runtime=runtime)
    assert rec.paths == [path]
    torch.testing.assert_close(loaded(x), m(x))


def _refuse(what):
    def fail(*args, **kwargs):
        raise AssertionError(f'{what} was called')
    return fail


def test_python_load_parses_once_in_cpp(tmp_path, monkeypatch):
    """aten.load(..., runtime='python') has the C++ reader parse the file once and hand the
    graph over in memory (Note [Graph handover]): no JSON parsing in Python, no second C++
    parse of graph.json, no runtime plan compiled only to get the tensors."""
    import json
    m, x = Small().eval(), torch.randn(2, 4)
    path = str(tmp_path / 'small.fxpt')
    gm = aten.lower(m, x)
    aten.save(gm, path)
    monkeypatch.setattr(json, 'loads', _refuse('json.loads'))
    monkeypatch.setattr(json.JSONDecoder, 'decode', _refuse('json.JSONDecoder.decode'))
    monkeypatch.setattr(fxcpp._C_torch, 'graph_json', _refuse('_C_torch.graph_json'))
    monkeypatch.setattr(fxcpp._C_torch, 'load', _refuse('_C_torch.load'))
    loaded = aten.load(path)
    assert loaded.code == gm.code
    assert str(loaded.graph) == str(gm.graph)
    assert [n.meta.get('tensor_meta') for n in loaded.graph.nodes] == [n.meta.get('tensor_meta') for n in gm.graph.nodes]
    torch.testing.assert_close(loaded(x), m(x))


def test_save_encodes_in_cpp(tmp_path, monkeypatch):
    """aten.save hands the graph to the C++ writer in memory: Python encodes no JSON, and the
    bytes are the C++ writer's (the loaded graph is the saved one)."""
    import json
    m, x = Small().eval(), torch.randn(2, 4)
    gm = aten.lower(m, x)
    monkeypatch.setattr(json, 'dumps', _refuse('json.dumps'))
    monkeypatch.setattr(json.JSONEncoder, 'encode', _refuse('json.JSONEncoder.encode'))
    path = str(tmp_path / 'small.fxpt')
    aten.save(gm, path)
    monkeypatch.undo()
    doc = json.loads(fxcpp._C_torch.graph_json(path))
    assert [n['name'] for n in doc['nodes']] == [n.name for n in gm.graph.nodes]
    assert doc['class_name'] == 'GraphModule' or doc['class_name'] == type(gm).__name__
    torch.testing.assert_close(aten.load(path, runtime='cpp')(x), m(x))
