"""Randomized API sequences run in lockstep on torch.fx and fxcpp.

After every step both graphs must print identically, generate identical code,
lint, and (periodically) compute the same values.
"""
import copy
import operator
import random

import pytest
import torch
import torch.fx as tfx

import fxcpp as fx

FUNCS = [operator.add, operator.mul, operator.sub, torch.relu, torch.neg, torch.sigmoid]
ARITY = {operator.add: 2, operator.mul: 2, operator.sub: 2, torch.relu: 1, torch.neg: 1, torch.sigmoid: 1}


def make(lib):
    g = lib.Graph()
    x = g.placeholder('x')
    y = g.placeholder('y')
    a = g.call_function(operator.add, (x, y))
    g.output(a)
    return g


def body(g):
    return [n for n in g.nodes if n.op not in ('placeholder', 'output')]


def values(g):
    return [n for n in g.nodes if n.op != 'output']


def step(rng, graphs):
    """Apply one random edit to every graph in `graphs` (same choices)."""
    kind = rng.choice(['add', 'add', 'add', 'insert', 'rauw', 'erase', 'dce', 'args', 'copy', 'move', 'kwargs'])
    state = rng.getstate()
    out = []
    for g in graphs:
        rng.setstate(state)
        vals = values(g)
        n_vals = len(vals)
        if kind in ('add', 'insert'):
            fn = rng.choice(FUNCS)
            if kind == 'insert' and body(g):
                anchor = rng.choice(body(g))
                # inputs must come before the anchor
                pos = vals.index(anchor)
                cands = vals[:pos] or vals[:1]
                with g.inserting_before(anchor):
                    args = tuple(rng.choice(cands) for _ in range(ARITY[fn]))
                    g.call_function(fn, args)
            else:
                out_node = list(g.nodes)[-1]
                with g.inserting_before(out_node):
                    args = tuple(rng.choice(vals) for _ in range(ARITY[fn]))
                    n = g.call_function(fn, args)
                if rng.random() < 0.5:
                    out_node.args = ((n, out_node.args[0]),) if rng.random() < 0.3 else (n,)
        elif kind == 'rauw' and n_vals >= 3:
            i = rng.randrange(2, n_vals)
            j = rng.randrange(0, i)
            old, new = vals[i], vals[j]
            old.replace_all_uses_with(new, delete_user_cb=lambda u: rng.random() < 0.8)
        elif kind == 'erase':
            dead = [n for n in body(g) if not n.users]
            if dead:
                g.erase_node(rng.choice(dead))
        elif kind == 'dce':
            g.eliminate_dead_code()
        elif kind == 'args' and body(g):
            n = rng.choice(body(g))
            pos = vals.index(n)
            n.args = tuple(rng.choice(vals[:pos]) for _ in n.args)
        elif kind == 'kwargs':
            # move a unary torch function's input between args and kwargs
            # (torch.relu(x) <-> torch.relu(input = x)): both print, generate and run
            unary = [n for n in body(g) if ARITY[n.target] == 1]
            if unary:
                n = rng.choice(unary)
                if n.args:
                    n.kwargs = {'input': n.args[0]}
                    n.args = ()
                else:
                    n.args = (n.kwargs['input'],)
                    n.kwargs = {}
        elif kind == 'move' and len(body(g)) >= 2:
            # move a node right after its last input (always legal)
            n = rng.choice(body(g))
            ins = n.all_input_nodes
            if ins:
                last = max(ins, key=lambda m: vals.index(m))
                last.append(n)
        elif kind == 'copy':
            g = copy.deepcopy(g)
        out.append(g)
    return kind, out


@pytest.mark.parametrize('seed', range(6))
def test_random_sequences(seed):
    rng = random.Random(seed)
    graphs = [make(tfx), make(fx)]
    inputs = (torch.randn(3), torch.randn(3))
    for i in range(120):
        kind, graphs = step(rng, graphs)
        ref, ours = graphs
        ref.lint()
        ours.lint()
        assert str(ours) == str(ref), (seed, i, kind)
        assert ours.python_code('self').src == ref.python_code('self').src, (seed, i, kind)
        for a, b in zip(ref.nodes, ours.nodes):
            assert [u.name for u in a.users] == [u.name for u in b.users], (seed, i, kind, a.name)
        if i % 15 == 0:
            r = tfx.GraphModule(torch.nn.Module(), ref)(*inputs)
            o = fx.GraphModule(torch.nn.Module(), ours)(*inputs)
            torch.testing.assert_close(o, r)
