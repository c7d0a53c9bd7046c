"""Note [Direct bytecode]: GraphModule.forward built without compile().

The CPython 3.11 backend (src/backends/cpython311) assembles the code object
CPython 3.11's compiler would produce for the generated source, and
fxcpp._forward_builder uses it.  These tests compare it with compile() (the
whole suite also does, through conftest's _VERIFY_BYTECODE), check that
refusals carry their code and fall back cleanly, that the first-use probe
covers what it must, and that the functions behave like torch.fx's:
defaults, annotations, tracebacks, inspect, TorchScript, wrapped functions.
"""
import dis
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
import fxcpp._forward_builder as fb
import fxcpp.graph_module as fx_gm
from fxcpp import _C
from fxcpp._forward_builder import Refusal

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'cpp', 'cpython311',
                                'golden'))
from make_bytecode_golden import ACCEPTED, REFUSED  # noqa: E402

py311 = pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason='direct bytecode targets CPython 3.11')



def _sources(memo):
    """The sources a loader memo holds (its keys: a source, or (source, co_filename, co_firstlineno,
    co_name) for code named after the traced file: Note [Code object file names])."""
    return {k if isinstance(k, str) else k[0] for k in memo}

def compiled_function_code(src, key='<k>'):
    module = compile(src, key, 'exec')
    return next(c for c in module.co_consts if isinstance(c, types.CodeType))


@py311
@pytest.mark.parametrize('name', sorted(ACCEPTED))
def test_assembled_equals_compiled(name):
    src = ACCEPTED[name]
    refusal, (code, params, ret, prologue) = _C._assemble_function(src, '<k>')
    assert refusal == Refusal.NONE
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
    refusal, detail = _C._assemble_function(src, '<k>')
    assert Refusal(refusal) is Refusal[reason.upper()], detail
    assert isinstance(detail, str) and detail
    assert fb._assemble(src, '<k>') == (Refusal[reason.upper()], detail)


def test_refusal_codes_match_the_backend():
    names = _C._assembler_refusals()
    assert names[0] == 'none' and len(set(names)) == len(names)
    assert [m.name.lower() for m in Refusal] == list(names)
    assert [int(m) for m in Refusal] == list(range(len(names)))


def test_bad_arguments_raise_type_error():
    with pytest.raises(TypeError):
        _C._assemble_function(b'def f(): return 1', '<k>')
    with pytest.raises(TypeError):
        _C._assemble_function('def f():\n    return 1\n', 3)
    with pytest.raises(UnicodeEncodeError, match='src'):
        _C._assemble_function('def f():\n    return "\ud800"\n', '<k>')


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
    assert ours.code in _sources(fb._loader._assembled)
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
    assert fb._DIRECT_BYTECODE is False         # graph_module's name writes through
    net = Net()
    gm = fx.symbolic_trace(net)
    x = torch.randn(3, 4)
    torch.testing.assert_close(gm(x), net(x))
    assert gm.code in _sources(fb._loader._compiled)


def test_graph_module_switches_are_the_builders():
    assert fx_gm._loader is fb._loader and fx_gm._forward_from_src is fb._forward_from_src
    for name in ('_DIRECT_BYTECODE', '_VERIFY_BYTECODE'):
        old = getattr(fb, name)
        try:
            setattr(fx_gm, name, 'x')
            assert getattr(fb, name) == 'x' and getattr(fx_gm, name) == 'x'
            setattr(fb, name, 'y')
            assert getattr(fx_gm, name) == 'y'
        finally:
            setattr(fb, name, old)
        assert name in dir(fx_gm) and name not in vars(fx_gm)
    with pytest.raises(AttributeError, match='no attribute'):
        fx_gm._NO_SUCH_SWITCH
    fx_gm._some_other_name = 1                  # other names stay the module's own
    assert vars(fx_gm)['_some_other_name'] == 1 and not hasattr(fb, '_some_other_name')
    del fx_gm._some_other_name


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
    assert ours.code in _sources(fb._loader._assembled)


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
        refusal, result = real(src, key)
        if refusal:
            return refusal, result
        code = result[0].replace(co_stacksize=result[0].co_stacksize + 1)
        return refusal, (code,) + result[1:]

    monkeypatch.setattr(fb._C, '_assemble_function', wrong)
    monkeypatch.setattr(fb, '_direct_bytecode_state', None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        assert not fb._direct_bytecode_enabled()
    if sys.version_info[:2] == (3, 11):
        assert any('direct bytecode disabled' in str(w.message) for w in caught)
    gm = fx.symbolic_trace(Net())             # falls back to compile()
    x = torch.randn(3, 4)
    gm(x)
    assert gm.code in _sources(fb._loader._compiled)


@pytest.mark.parametrize('refusal', [Refusal.UNSUPPORTED_INTERPRETER, Refusal.SYNTAX])
def test_probe_refusal(monkeypatch, refusal):
    # another interpreter: quietly off; the probe itself refused: off, with a warning
    monkeypatch.setattr(fb._C, '_assemble_function', lambda src, key: (int(refusal), 'some text'))
    monkeypatch.setattr(fb, '_direct_bytecode_state', None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        assert not fb._direct_bytecode_enabled()
        assert not fb._direct_bytecode_enabled()   # decided once
    messages = [str(w.message) for w in caught]
    if refusal is Refusal.UNSUPPORTED_INTERPRETER:
        assert messages == []
    else:
        assert len(messages) == 1 and 'probe was refused (syntax: some text)' in messages[0]


def _location_codes(code):
    """The entry codes of a CPython 3.11 co_linetable (Objects/locations.md)."""
    table, codes, i = code.co_linetable, [], 0
    while i < len(table):
        codes.append((table[i] >> 3) & 15)
        i += 1
        while i < len(table) and not table[i] & 0x80:
            i += 1
    return codes


@py311
def test_probe_covers_what_the_assembler_emits():
    refusal, (code, *_) = _C._assemble_function(fb._PROBE_SRC, '<probe>')
    assert refusal == Refusal.NONE
    fb._check_assembled(fb._PROBE_SRC, '<probe>', code)
    ops = {i.opname for i in dis.get_instructions(code)}
    for op in ('EXTENDED_ARG', 'LIST_APPEND', 'LIST_TO_TUPLE', 'LIST_EXTEND', 'COPY', 'IS_OP', 'CONTAINS_OP',
               'COMPARE_OP', 'BUILD_CONST_KEY_MAP', 'BUILD_MAP', 'KW_NAMES', 'LOAD_METHOD', 'LOAD_ATTR',
               'PUSH_NULL', 'BINARY_SUBSCR', 'UNARY_NEGATIVE', 'UNARY_POSITIVE', 'UNARY_INVERT'):
        assert op in ops, op
    # every instruction the golden cases produce is in the probe
    golden_ops = set()
    for src in ACCEPTED.values():
        golden_ops |= {i.opname for i in dis.get_instructions(compiled_function_code(src))}
    assert golden_ops <= ops, golden_ops - ops
    codes = set(_location_codes(code))
    assert set(range(13)) <= codes and 14 in codes     # short 0-9, one-line 10-12, long


@py311
def test_verification_catches_a_wrong_code_object(monkeypatch):
    src = ACCEPTED['binary_chain']
    code = _C._assemble_function(src, '<k>')[1][0]
    with pytest.raises(AssertionError, match='differs from compile'):
        fb._check_assembled(src, '<k>', code.replace(co_stacksize=code.co_stacksize + 1))
    with pytest.raises(AssertionError, match='differs from compile'):
        fb._check_assembled(src, '<k>', code.replace(co_linetable=code.co_linetable[:-2] + b'\x80\x00'))
    fb._check_assembled(src, '<k>', code)


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
    assert gm.code in _sources(fb._loader._assembled)


@py311
def test_mutated_sources_are_refused_or_equal_compile():
    # Differential fuzzing with a fixed seed: small random edits of the golden
    # and probe sources must either be refused or assemble to exactly what
    # compile() gives, with no SyntaxError or SyntaxWarning compile() would
    # raise for the function (a prologue goes through compile() itself).
    import random
    rng = random.Random(1311)
    alphabet = list(" ()[]{},.:;=+-*/%@&|^~<>!'\"\\#\n\tabcxyz019_eEjJ") + [
        ' is ', ' in ', ' not ', ' is not ', ' not in ', '\u00e9', 'for', '1(', '[0]']
    seeds = list(ACCEPTED.values()) + [fb._PROBE_SRC]
    accepted = 0
    for _ in range(3000):
        src = rng.choice(seeds)
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(src))
            kind = rng.randrange(3)
            if kind == 0:
                src = src[:i] + src[i + rng.randint(1, 3):]
            else:
                src = src[:i] + rng.choice(alphabet) + src[i + (kind == 2):]
        refusal, result = _C._assemble_function(src, '<k>')
        if refusal:
            assert Refusal(refusal) is not Refusal.NONE and result
            continue
        accepted += 1
        prologue = result[3]
        with warnings.catch_warnings():
            warnings.simplefilter('error')
            try:
                fb._check_assembled(src, '<k>', result[0])
            except SyntaxError:
                assert prologue is not None, src
                with pytest.raises(SyntaxError):
                    compile(prologue, '<k>', 'exec')
    assert accepted > 100
