"""Note [Direct bytecode]: GraphModule.forward built without compile().

The C++ core assembles the code object CPython 3.11's compiler would produce
for the generated source.  These tests compare it with compile() (the whole
suite also does, through conftest's _VERIFY_BYTECODE), check that refusals
fall back cleanly, and that the functions behave like torch.fx's: defaults,
annotations, tracebacks, inspect, TorchScript, wrapped functions.
"""
import inspect
import linecache
import operator
import os
import sys
import traceback
import types
import warnings

import pytest
import torch
import torch.fx as tfx

import fxcpp as fx
import fxcpp.graph_module as fx_gm
from fxcpp import _C

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'cpp', 'core', 'golden'))
from make_bytecode_golden import ACCEPTED, REFUSED  # noqa: E402

py311 = pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason='direct bytecode targets CPython 3.11')


def compiled_function_code(src, key='<k>'):
    module = compile(src, key, 'exec')
    return next(c for c in module.co_consts if isinstance(c, types.CodeType))


@py311
@pytest.mark.parametrize('name', sorted(ACCEPTED))
def test_assembled_equals_compiled(name):
    src = ACCEPTED[name]
    code, params, ret, prologue = _C._assemble_function(src, '<k>')
    ref = compiled_function_code(src)
    assert code == ref
    for field in ('co_code', 'co_consts', 'co_names', 'co_varnames', 'co_linetable', 'co_stacksize',
                  'co_firstlineno', 'co_flags', 'co_argcount', 'co_nlocals', 'co_qualname', 'co_filename',
                  'co_exceptiontable'):
        assert getattr(code, field) == getattr(ref, field), field
    assert list(code.co_positions()) == list(ref.co_positions())
    assert [p[0] for p in params] == list(ref.co_varnames[:ref.co_argcount])


@py311
@pytest.mark.parametrize('name', sorted(REFUSED))
def test_refused_sources_say_why(name):
    src, reason = REFUSED[name]
    result = _C._assemble_function(src, '<k>')
    assert isinstance(result, str) and reason in result


def test_bad_arguments_raise_type_error():
    with pytest.raises(TypeError):
        _C._assemble_function(b'def f(): return 1', '<k>')
    with pytest.raises(TypeError):
        _C._assemble_function('def f():\n    return 1\n', 3)


# ---------------------------------------------------------------------------
# through GraphModule
# ---------------------------------------------------------------------------

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.seq = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(4, 2))

    def forward(self, x: torch.Tensor, scale: float = 2.0) -> torch.Tensor:
        y = self.lin(x).relu() * scale
        z = torch.cat([y, x], dim=-1)[:, :4]
        return self.seq(z + y.sum(dim=1, keepdim=True)) - 1


def trace_both(root, **kw):
    return tfx.symbolic_trace(root, **kw), fx.symbolic_trace(root, **kw)


@py311
def test_graph_module_uses_assembled_forward():
    theirs, ours = trace_both(Net())
    assert ours.code == theirs.code
    x = torch.randn(3, 4)
    torch.testing.assert_close(ours(x), theirs(x))
    assert ours.code in fx_gm._loader._assembled
    fn = type(ours).forward
    assert fn.__code__ == compiled_function_code(ours.code, fn.__code__.co_filename)
    # what executing the def would give, as with torch.fx
    ref = type(theirs).forward
    assert fn.__defaults__ == ref.__defaults__ == (2.0,)
    assert fn.__annotations__ == ref.__annotations__
    assert fn.__name__ == ref.__name__ and fn.__qualname__ == ref.__qualname__
    assert fn.__module__ == ref.__module__
    assert inspect.getsource(fn) == inspect.getsource(ref)
    assert inspect.signature(fn) == inspect.signature(ref)


def test_switch_off_uses_compile(monkeypatch):
    monkeypatch.setattr(fx_gm, '_DIRECT_BYTECODE', False)
    net = Net()
    gm = fx.symbolic_trace(net)
    x = torch.randn(3, 4)
    torch.testing.assert_close(gm(x), net(x))
    assert gm.code in fx_gm._loader._compiled


@py311
def test_runtime_error_points_at_the_same_generated_line():
    def f(x):
        return torch.mm(x, x) + 1

    def failing_trace(lib):
        gm = lib.symbolic_trace(f)
        try:   # the forward itself: both libraries' call wrappers drop the traceback
            type(gm).forward(gm, torch.randn(2, 3))
        except RuntimeError as e:
            frames = traceback.extract_tb(e.__traceback__)
            frame = next(fr for fr in frames if fr.filename.startswith('<eval_with_key>'))
            return gm.code, frame.lineno, (frame.colno, frame.end_colno), frame.line, str(e)
        raise AssertionError('no error')

    code, *ours = failing_trace(fx)
    # Both libraries name their sources <eval_with_key>.N in the one linecache,
    # so torch.fx's line text may come from an fxcpp source: compare the rest.
    _, *theirs = failing_trace(tfx)
    assert ours[0] == theirs[0] and ours[1] == theirs[1] and ours[3] == theirs[3]
    assert ours[2] == code.splitlines()[ours[0] - 1].strip() == 'mm = torch.mm(x, x);  x = None'
    assert ours[1] == (9, 23)   # the carets under torch.mm(x, x)


@py311
def test_wrapped_function_prologue_runs():
    theirs, ours = trace_both(_UsesWrapped())
    assert ours.code == theirs.code
    assert ours.code.lstrip().startswith('torch.fx._symbolic_trace.wrap(')
    x = torch.randn(2, 2)
    torch.testing.assert_close(ours(x), theirs(x))
    assert ours.code in fx_gm._loader._assembled


def _wrapped_helper(x):
    return x * 3


fx.wrap('_wrapped_helper')
tfx.wrap('_wrapped_helper')


class _UsesWrapped(torch.nn.Module):
    def forward(self, x):
        return _wrapped_helper(x) + 1


def test_torchscript_and_pickle_still_work():
    gm = fx.symbolic_trace(Net())
    x = torch.randn(3, 4)
    scripted = torch.jit.script(gm)
    torch.testing.assert_close(scripted(x), gm(x))
    import pickle
    again = pickle.loads(pickle.dumps(gm))   # the import block goes through compile()
    torch.testing.assert_close(again(x), gm(x))


@py311
def test_linecache_cleared_is_restored():
    gm = fx.symbolic_trace(Net())
    gm(torch.randn(3, 4))
    gm2 = fx.GraphModule(gm, gm.graph)       # same source: served from the cache
    linecache.clearcache()
    gm2(torch.randn(3, 4))
    key = type(gm2).forward.__code__.co_filename
    lines = linecache.getlines(key)
    assert len(lines) == gm2.code.count('\n') + 1 and ''.join(lines).rstrip() == gm2.code.rstrip()


def test_probe_mismatch_disables_fast_path(monkeypatch):
    real = _C._assemble_function

    def wrong(src, key):
        result = real(src, key)
        if isinstance(result, str):
            return result
        code = result[0].replace(co_stacksize=result[0].co_stacksize + 1)
        return (code,) + result[1:]

    monkeypatch.setattr(fx_gm._C, '_assemble_function', wrong)
    monkeypatch.setattr(fx_gm, '_direct_bytecode_state', None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        assert not fx_gm._direct_bytecode_enabled()
    if sys.version_info[:2] == (3, 11):
        assert any('direct bytecode disabled' in str(w.message) for w in caught)
    gm = fx.symbolic_trace(Net())             # falls back to compile()
    x = torch.randn(3, 4)
    gm(x)
    assert gm.code in fx_gm._loader._compiled


@py311
def test_verification_catches_a_wrong_code_object(monkeypatch):
    src = ACCEPTED['binary_chain']
    code = _C._assemble_function(src, '<k>')[0]
    with pytest.raises(AssertionError, match='differs from compile'):
        fx_gm._check_assembled(src, '<k>', code.replace(co_stacksize=code.co_stacksize + 1))
    with pytest.raises(AssertionError, match='differs from compile'):
        fx_gm._check_assembled(src, '<k>', code.replace(co_linetable=code.co_linetable[:-2] + b'\x80\x00'))
    fx_gm._check_assembled(src, '<k>', code)


@py311
def test_big_graph_assembles_and_runs():
    g = fx.Graph()
    x = g.placeholder('x')
    cur = x
    for i in range(3000):                       # > 256 locals: EXTENDED_ARG
        cur = g.call_function(operator.add, (cur, i))
        cur = g.call_method('__mul__', (cur, 1))
    g.output(cur)
    gm = fx.GraphModule(torch.nn.Module(), g)
    assert gm(0) == sum(range(3000))
    assert gm.code in fx_gm._loader._assembled
