#!/usr/bin/env python3
"""Regenerates the golden files used by tests/cpp/core/golden_test.cpp.

Each case builds, with torch.fx, the graph that the C++ test builds with the
native API, and records str(graph) and python_code('self').src. Run it with
torch 1.13.1 (Debian's /usr/bin/python3) for the files in this folder and
with torch 2.x (2.14.1: /work/main/.venv/bin/python, or any venv with it) for
the ones in fx2/ (Dialect::fx_2, Note [Dialect]); the C++ test checks both:
    /usr/bin/python3 tests/cpp/core/golden/make_golden.py
    .venv/bin/python tests/cpp/core/golden/make_golden.py
"""
import math
import operator
import os
import sys

import torch
import torch.fx as fx

HERE = os.path.dirname(os.path.abspath(__file__))


def myFunction(a, b):  # noqa: N802 -- a non-importable global: registered by name
    return a


myFunction.__module__ = 'mymod'


def case_basic():
    g = fx.Graph()
    x = g.placeholder('x')
    y = g.placeholder('y', default_value=3)
    p = g.get_attr('layer1.0.weight')
    a = g.call_function(operator.add, (x, p))
    r = g.call_method('relu', (a,))
    s = g.call_method('sum', (r,), {'dim': -1, 'keepdim': True})
    c = g.call_function(torch.cat, ([a, s, x],), {'dim': 0})
    gi = g.call_function(operator.getitem, (c, (Ellipsis, slice(None, 4, None))))
    m = g.call_module('layer1.0.conv', (gi,))
    mu = g.call_function(operator.mul, (m, 2.5))
    e = g.call_function(torch.add, (mu, 1e-05), {'alpha': 2})
    n = g.call_function(operator.neg, (e,))
    sh = g.call_function(getattr, (x, 'shape'))
    s0 = g.call_function(operator.getitem, (sh, 0))
    g.output({'out': (e, n), 'l': [s0, None, slice(1, 2, None)], 'y': y, 's': 'it\'s'})
    return g


def case_names():
    g = fx.Graph()
    x = g.placeholder('x')
    prev = x
    for i in range(5):
        prev = g.call_function(operator.add, (prev, i))
    kw = g.create_node('call_function', operator.mul, (x, 2), name='for')
    bi = g.create_node('call_function', operator.mul, (x, 3), name='list')
    sn = g.call_function(myFunction, (x, kw))
    mg = g.call_method('__add__', (sn, bi))
    dt = g.call_module('seq.1', (mg,))
    a3 = g.create_node('call_function', operator.add, (dt, 1), name='add_3')
    a3b = g.create_node('call_function', operator.add, (a3, 1), name='add_3')
    nl = g.create_node('call_function', operator.add, (a3b, 1), name='9lives')
    ab = g.create_node('call_function', operator.add, (nl, 1), name='a.b-c')
    tc = g.create_node('call_function', operator.add, (ab, 1), name='torch')
    ln = g.call_function(len, (tc,))
    g.output((prev, ln))
    return g


def case_inplace():
    g = fx.Graph()
    x = g.placeholder('x')
    c = g.call_method('clone', (x,))
    g.call_function(operator.setitem, (c, 0, 5.0))
    i = g.call_function(operator.iadd, (c, 1))
    pw = g.call_function(operator.pow, (i, 2))
    inv = g.call_function(operator.invert, (pw,))
    g.output([inv, g.call_function(getattr, (x, 'dtype', None))])
    return g


def case_edits():
    g = fx.Graph()
    x = g.placeholder('x')
    y = g.placeholder('y')
    a = g.call_function(operator.add, (x, y))
    b = g.call_function(operator.mul, (a, x))
    c = g.call_function(operator.sub, (b, a))
    dead = g.call_function(torch.relu, (c,))
    g.output(c)
    with g.inserting_after(a):
        t1 = g.call_function(torch.tanh, (a,))
        t2 = g.call_function(torch.sigmoid, (a,))
    a.replace_all_uses_with(t1, delete_user_cb=lambda u: u is not t1 and u is not t2)
    c.update_arg(1, t2)
    g.eliminate_dead_code()
    del dead
    return g


def case_empty():
    g = fx.Graph()
    g.placeholder('x')
    return g


def foo(x):  # a non-importable global whose name hint, "m_foo", clashes with a node name
    return x


foo.__module__ = 'm'


def case_global_clash():
    # Codegen re-names every node in a fresh namespace shared with the
    # globals: the global "m.foo" wants "m_foo", which a node already has.
    g = fx.Graph()
    x = g.placeholder('x')
    a = g.create_node('call_function', torch.relu, (x,), name='m_foo')
    b = g.call_function(foo, (a,))
    c = g.create_node('call_function', torch.relu, (b,), name='m_foo_1')
    d = g.call_function(len, (c,))
    g.output(d)
    return g


CASES = [case_basic, case_names, case_inplace, case_edits, case_empty, case_global_clash]

FLOATS = [0.0, -0.0, 1.0, -2.5, 0.1, 1e-05, 1e-4, 123456789012345.0, 1e16, 1.5e20, 3.14159, 2.0 ** 60,
          1 / 3, 5e-324, 1.7976931348623157e308, float('inf'), -float('inf'), float('nan'), 100.0, 0.001]
STRINGS = ['abc', "it's", 'say "hi"', 'both \' and "', 'tab\there', 'nl\n', 'back\\slash', '\x01', 'é']


def main():
    out = HERE
    if int(torch.__version__.split('.')[0]) >= 2:
        out = os.path.join(HERE, 'fx2')  # torch.fx 2.x's text; floats and strings are the same
        os.makedirs(out, exist_ok=True)
    for case in CASES:
        g = case()
        name = case.__name__[len('case_'):]
        with open(os.path.join(out, f'{name}.graph.txt'), 'w') as f:
            f.write(str(g))
        with open(os.path.join(out, f'{name}.code.txt'), 'w') as f:
            f.write(g.python_code('self').src)
    if out != HERE:
        return 0
    with open(os.path.join(HERE, 'floats.txt'), 'w') as f:
        for v in FLOATS:
            f.write(f'{v.hex()} {repr(v)}\n')
    with open(os.path.join(HERE, 'strings.txt'), 'w') as f:
        for s in STRINGS:
            f.write(s.encode('unicode_escape').decode('ascii') + '\t' + repr(s) + '\n')


if __name__ == '__main__':
    sys.exit(main())
