"""The text that changes with the torch.fx release (Note [Dialect]), against the installed torch.fx.

fxcpp writes what the installed torch.fx writes: torch.fx 1.13.1's text on Debian's torch, 2.14.1's
on torch 2.14 (names de-duplicated by a per-base counter, dead values freed in generated code,
verbose-code comments summarizing a stack trace's innermost frame). Each test runs the same steps on
torch.fx and on fxcpp and compares.
"""
import operator

import torch
import torch.fx as tfx
from hypothesis import given, settings
from hypothesis import strategies as st

import fxcpp as fx
from fxcpp import _C, _torch_compat

# Candidates that exercise the suffix rules: bases, suffixes with leading zeros, digits first,
# illegal characters, keywords, builtins, the empty name and a dunder-only target.
_CANDIDATES = ['x', 'x_1', 'x_2', 'x_01', 'x_0', 'x_00', 'x_9', 'x_10', 'add', 'add_1', 'add_3', '_', '_1', '__',
               '9', '9_1', 'a-b', 'a_b', 'in', 'for', 'list', 'print_1', 'x_1_1', 'é', 'Σx']
if _torch_compat.FX_DIALECT == '2':
    # A suffix past 18 digits: fxcpp's 1.13 rules do not split it (Note [Linear-time naming]), 2.x's counter does.
    _CANDIDATES.append('x_99999999999999999999')


def test_dialect_is_the_installed_torch_fx():
    assert _C._dialect() == _torch_compat.FX_DIALECT == ('2' if torch.__version__.split('.')[0] >= '2' else '1.13')


def _names(lib, candidates):
    g = lib.Graph()
    out = []
    for c in candidates:
        try:
            out.append(g.placeholder(c).name)
        except Exception as e:  # noqa: BLE001 -- torch.fx 1.13 raises IndexError for ''
            out.append(type(e).__name__)
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_CANDIDATES + ['']), max_size=12))
def test_names_match_torch_fx(candidates):
    assert _names(fx, candidates) == _names(tfx, candidates)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(_CANDIDATES), min_size=1, max_size=8), st.sets(st.integers(0, 7)))
def test_generated_code_matches_torch_fx(names, dead):
    """Codegen re-names every node in a fresh namespace and frees values after their last use
    (torch.fx 2.x: dead values too, right after they are computed)."""
    def build(lib):
        g = lib.Graph()
        x = g.placeholder('x')
        prev = x
        for i, n in enumerate(names):
            node = g.create_node('call_function', operator.add, (prev, i), name=n)
            if i not in dead:
                prev = node
        g.output(prev)
        return g
    ours, ref = build(fx), build(tfx)
    assert str(ours) == str(ref)
    assert ours.python_code('self').src == ref.python_code('self').src


_TRACES = [
    None, '', '\n\n', 'just text',
    '  File "/tmp/a.py", line 3, in f\n    y = x + 1\n',
    'ctx\n  File "/tmp/a.py", line 5, in g\n    return z * 2\n  File "/tmp/b.py", line 7, in h\n    q()\n',
    'ctx\n  File "/tmp/a.py", line 3, in f\n',
    '  File "/tmp/a.py", line 3, in f\n  File "/tmp/b.py", line 4, in g\n    code',
    'File "/tmp/a.py", line 3, in f\nFile "/tmp/b.py", line 4, in g',
    '  File "bad format"\n    code\n',
    '  File "/tmp/a.py", line 3, in f\n    y = x + 1\nFile "/tmp/b.py", line x4, in g\n  cc',
]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(range(len(_TRACES))), min_size=4, max_size=4), st.booleans())
def test_verbose_code_matches_torch_fx(traces, rename_input):
    def build(lib):
        g = lib.Graph()
        x = g.placeholder('x')
        if rename_input:
            x.name = 'zz'  # the placeholder then writes `zz = x` before the first comment
        a = g.call_function(operator.add, (x, 1))
        r = g.call_method('relu', (a,))
        s = g.call_method('sum', (r,))
        m = g.call_function(operator.mul, (r, 2))
        g.output(m)
        for node, t in zip([a, r, s, m], traces):
            node.stack_trace = _TRACES[t]
        return g
    ours, ref = build(fx), build(tfx)
    assert ours.python_code('self', verbose=True).src == ref.python_code('self', verbose=True).src


def test_print_readable_returns_like_torch_fx(capsys):
    class M(torch.nn.Module):
        def forward(self, x):
            return x.relu().abs()
    results = []
    for lib in (tfx, fx):
        gm = lib.symbolic_trace(M())
        ret = gm.print_readable()
        results.append((ret, capsys.readouterr().out))
    assert results[0] == results[1]  # the text is returned on 2.x, None on 1.13
