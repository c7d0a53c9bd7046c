"""fxcpp.passes.split_module against torch.fx.passes.split_module (issue 13): the same
str(graph) and code for the top module and every submod_<key>, the same outputs, the
same errors, on fixed cases and on random graphs with random partition assignments."""
import operator

import pytest
import torch
import torch.fx
from hypothesis import HealthCheck, event, given, settings, strategies as st
from torch.fx.passes.split_module import split_module as torch_split_module

import fxcpp
import torch2
from torch2 import TORCH2
from fxcpp.passes.split_module import split_module


def _by_name(assign):
    """A callback giving assign[node.name] (so it can be used on both libraries' nodes)."""
    return lambda node: assign[node.name]


def _compare(gm, callback, inputs, **kw):
    """Splits gm (fxcpp) and its torch.fx conversion; asserts the same graphs and outputs."""
    tgm = fxcpp.to_torch_fx(gm)
    qm_ours, qm_theirs = {}, {}
    ours = split_module(gm, gm, callback, qualname_map=qm_ours, **kw)
    theirs = torch_split_module(tgm, tgm, callback, qualname_map=qm_theirs, **kw)
    assert isinstance(ours, fxcpp.GraphModule)
    assert str(ours.graph) == str(theirs.graph)
    assert ours.code == theirs.code
    assert [n for n, _ in ours.named_children()] == [n for n, _ in theirs.named_children()]
    for (name, sub), (_, tsub) in zip(ours.named_children(), theirs.named_children()):
        assert str(sub.graph) == str(tsub.graph), name
        assert sub.code == tsub.code, name
        assert [n for n, _ in sub.named_children()] == [n for n, _ in tsub.named_children()]
    assert qm_ours == qm_theirs
    for n, tn in zip(ours.graph.nodes, theirs.graph.nodes):
        assert n.meta == tn.meta
    torch.testing.assert_close(ours(*inputs), theirs(*inputs), rtol=0, atol=0)
    torch.testing.assert_close(ours(*inputs), gm(*inputs), rtol=0, atol=0)
    return ours, theirs


class MyModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.param = torch.nn.Parameter(torch.rand(3, 4))
        self.linear = torch.nn.Linear(4, 5)
        self.seq = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(5, 5))

    def forward(self, x, y):
        z = self.linear(x + self.param).clamp(min=0.0, max=1.0)
        w = self.seq(self.linear(y).clamp(min=0.0, max=1.0))
        return z + w, w.sum()


def test_module_example_three_runs():
    torch.manual_seed(0)
    gm = fxcpp.symbolic_trace(MyModule())
    x, y = torch.rand(3, 4), torch.rand(3, 4)
    ops = [n.name for n in gm.graph.nodes if n.op not in ('placeholder', 'get_attr', 'output')]
    _compare(gm, _by_name({name: i * 3 // len(ops) for i, name in enumerate(ops)}), (x, y))


def test_runs_and_original_order():
    torch.manual_seed(0)
    gm = fxcpp.symbolic_trace(MyModule())
    names = [n.name for n in gm.graph.nodes if n.op not in ('placeholder', 'get_attr', 'output')]
    assign = {n: ('b' if i < len(names) // 2 else 'a') for i, n in enumerate(names)}
    x, y = torch.rand(3, 4), torch.rand(3, 4)
    _compare(gm, _by_name(assign), (x, y))
    _compare(gm, _by_name(assign), (x, y), keep_original_order=True)


def _chain(n, with_kwargs=False):
    g = fxcpp.Graph()
    x = g.placeholder('x')
    y = g.placeholder('y', default_value=3)
    cur = x
    for i in range(n):
        if with_kwargs and i % 3 == 0:
            cur = g.call_function(torch.add, (cur,), {'other': y})
        else:
            cur = g.call_function(operator.add if i % 2 else operator.mul, (cur, y))
    g.output(cur)
    return fxcpp.GraphModule(torch.nn.Module(), g)


def test_chain_runs_defaults_kwargs_and_meta():
    gm = _chain(40, with_kwargs=True)
    for i, n in enumerate(gm.graph.nodes):
        n.meta['i'] = i
    ours, _ = _compare(gm, lambda n: 0, (torch.ones(2), torch.ones(2)))
    runs = {n.name: i // 7 for i, n in enumerate(gm.graph.nodes)}
    ours, _ = _compare(gm, _by_name(runs), (torch.ones(2), torch.ones(2)))
    # meta is copied (shallow), not shared
    sub = ours.submod_1
    first = next(n for n in sub.graph.nodes if n.op != 'placeholder')
    orig = next(n for n in gm.graph.nodes if n.meta.get('i') == first.meta['i'])
    assert first.meta == orig.meta and first.meta is not orig.meta


def test_torch_fx_module_is_accepted():
    gm = _chain(10)
    out = split_module(fxcpp.to_torch_fx(gm), None, lambda n: 0)
    assert isinstance(out, fxcpp.GraphModule)
    torch.testing.assert_close(out(torch.ones(2), torch.ones(2)), gm(torch.ones(2), torch.ones(2)))


def test_cycle_raises_like_torch_fx():
    gm = _chain(3)
    assign = {'mul': 0, 'add': 1, 'mul_1': 0}
    with pytest.raises(RuntimeError, match='cycle exists between partitions'):
        torch_split_module(fxcpp.to_torch_fx(gm), None, _by_name(assign))
    with pytest.raises(RuntimeError, match='cycle exists between partitions'):
        split_module(gm, None, _by_name(assign))


@pytest.mark.skipif(TORCH2, reason='torch.fx 2.x accepts a partition without outputs: '
                                   'test_partition_without_outputs_2x')
def test_partition_without_outputs_raises_like_torch_fx():
    g = fxcpp.Graph()
    x = g.placeholder('x')
    g.call_function(torch.relu, (x,))  # dead
    g.output(g.call_function(torch.neg, (x,)))
    gm = fxcpp.GraphModule(torch.nn.Module(), g)
    assign = {'relu': 1, 'neg': 0}
    with pytest.raises(IndexError):
        torch_split_module(fxcpp.to_torch_fx(gm), None, _by_name(assign))
    with pytest.raises(IndexError):
        split_module(gm, None, _by_name(assign))


def test_missing_module_target_raises():
    errors = []
    for lib, split in [(torch.fx, torch_split_module), (fxcpp, split_module)]:
        gm = lib.symbolic_trace(MyModule())
        del gm.seq
        with pytest.raises(Exception) as info:
            split(gm, None, lambda n: 0)
        errors.append((type(info.value), str(info.value)))
    assert errors[0] == errors[1]
    assert 'target seq.0 not found' in errors[1][1]


# ---- random graphs, random assignments -------------------------------------------

_OPS = [(operator.add, 2), (operator.mul, 2), (operator.sub, 2), (torch.relu, 1), (torch.neg, 1), (sum, -1), (torch.add, -2)]


@st.composite
def graphs_and_assignments(draw):
    n_ph = draw(st.integers(1, 3))
    n_ops = draw(st.integers(1, 25))
    g = fxcpp.Graph()
    values = [g.placeholder(f'p{i}') for i in range(n_ph)]
    if draw(st.booleans()):
        values.append(g.get_attr('w'))
    ops = []
    for _ in range(n_ops):
        fn, arity = draw(st.sampled_from(_OPS))
        pick = st.integers(0, len(values) - 1)
        if arity == -1:  # a list argument
            node = g.call_function(fn, ([values[draw(pick)] for _ in range(draw(st.integers(1, 3)))],))
        elif arity == -2:  # a node in kwargs
            node = g.call_function(fn, (values[draw(pick)],), {'other': values[draw(pick)]})
        else:
            node = g.call_function(fn, tuple(values[draw(pick)] for _ in range(arity)))
        values.append(node)
        ops.append(node)
    outs = draw(st.lists(st.integers(0, len(values) - 1), min_size=1, max_size=4))
    g.output(tuple(values[i] for i in outs) if len(outs) > 1 else values[outs[0]])
    root = torch.nn.Module()
    root.w = torch.nn.Parameter(torch.ones(2))
    gm = fxcpp.GraphModule(root, g)
    k = draw(st.integers(1, 4))
    assign = {n.name: draw(st.sampled_from(['0', '1', 'x', 'y'][:k])) for n in ops}
    if draw(st.booleans()):  # runs: monotone partition ids, never a cycle
        names = [n.name for n in ops]
        cuts = sorted(draw(st.lists(st.integers(0, len(names)), max_size=3)))
        assign = {name: sum(i >= c for c in cuts) for i, name in enumerate(names)}
    return gm, n_ph, assign, draw(st.booleans())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs_and_assignments())
def test_random_graphs_match_torch_fx(case):
    gm, n_ph, assign, keep = case
    inputs = tuple(torch.full((2,), float(i + 1)) for i in range(n_ph))
    tgm = fxcpp.to_torch_fx(gm)
    try:
        torch_split_module(tgm, tgm, _by_name(assign), keep_original_order=keep)
    except (RuntimeError, IndexError, KeyError) as e:
        event(f'torch.fx raises {type(e).__name__}')
        with pytest.raises(type(e)):
            split_module(gm, gm, _by_name(assign), keep_original_order=keep)
        return
    event('compared')
    _compare(gm, _by_name(assign), inputs, keep_original_order=keep)


# ---- torch.fx 2.x's semantics and options (Note [split_module on torch.fx 2.x]) ---------

needs2 = pytest.mark.skipif(not torch2.TORCH2, reason="split_module's 2.x options exist on torch 2.x only")


def _describe(out, qm):
    """Everything compared of a split result: code, graphs, submodules, node names, types and
    meta (the top module and each submodule), and the qualname_map."""
    def one(gm):
        return (gm.code, str(gm.graph), [n for n, _ in gm.named_children()],
                [(n.name, n.op, n.type, dict(n.meta)) for n in gm.graph.nodes])
    return (one(out), [(name, one(sub)) for name, sub in out.named_children() if hasattr(sub, 'graph')],
            list(qm.items()))


def _outcome(split, gm, callback, **kw):
    qm = {}
    try:
        out = split(gm, gm, callback, qualname_map=qm, **kw)
    except Exception as e:  # noqa: BLE001 -- compared with torch.fx's
        return ('raises', type(e), str(e)), None
    return _describe(out, qm), out


def _compare2(gm, callback, inputs, drop=(), **kw):
    """fxcpp's split_module against torch.fx 2.x's on gm's conversion: the same result (code,
    graphs, names, types, meta, qualname_map, submodules) or the same error; same outputs.
    ``drop``: attributes deleted from both modules first."""
    tgm = fxcpp.to_torch_fx(gm)
    for name in drop:
        delattr(gm, name)
        delattr(tgm, name)
    theirs, tout = _outcome(torch_split_module, tgm, callback, **kw)
    ours, oout = _outcome(split_module, gm, callback, **kw)
    assert ours == theirs, gm.code
    if oout is not None:
        assert isinstance(oout, fxcpp.GraphModule)
        torch.testing.assert_close(oout(*inputs), tout(*inputs), rtol=0, atol=0)
    return oout


class _Root(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(2))
        self.v = torch.nn.Parameter(torch.full((2,), 2.0))
        self.seq = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Tanh())
        self.act = torch.nn.Sigmoid()
        self.sub = torch.nn.Module()
        self.sub.b = torch.nn.Parameter(torch.full((2,), 3.0))


_MODULES = ['seq.0', 'seq.1', 'act']
_KEYS = [0, 1, 2, '0', 'x', 'y', 1.5]  # str(1.5): a dotted submodule name


@st.composite
def graphs_2x(draw):
    """Random graphs with call_module and get_attr nodes (used, unused, or read by the output
    only), dead ops, type annotations, node.meta and placeholder defaults; random partition
    keys (ints and strings, some equal as str) and random 2.x options."""
    g = fxcpp.Graph()
    n_ph = draw(st.integers(1, 3))
    values = []
    for i in range(n_ph):
        ph = g.placeholder(f'p{i}', type_expr=torch.Tensor if draw(st.booleans()) else None)
        values.append(ph)
    if draw(st.booleans()):
        g.placeholder('flag', default_value=draw(st.sampled_from([None, 3, 'a'])))
    attrs = draw(st.lists(st.sampled_from(['w', 'v', 'sub.b']), max_size=3))
    for a in attrs:
        values.append(g.get_attr(a))
    ops = []
    for _ in range(draw(st.integers(1, 15))):
        pick = st.integers(0, len(values) - 1)
        kind = draw(st.integers(0, 9))
        if kind < 2:
            node = g.call_module(draw(st.sampled_from(_MODULES)), (values[draw(pick)],))
        elif kind == 2:
            node = g.call_method(draw(st.sampled_from(['relu', 'neg'])), (values[draw(pick)],))
        else:
            fn, arity = draw(st.sampled_from(_OPS))
            if arity == -1:
                node = g.call_function(fn, ([values[draw(pick)] for _ in range(draw(st.integers(1, 3)))],))
            elif arity == -2:
                node = g.call_function(fn, (values[draw(pick)],), {'other': values[draw(pick)]})
            else:
                node = g.call_function(fn, tuple(values[draw(pick)] for _ in range(arity)))
        if draw(st.integers(0, 3)) == 0:
            node.type = torch.Tensor
        if draw(st.integers(0, 5)) == 0:  # names the options may reuse or collide with
            name = draw(st.sampled_from(['arg_0', 'arg_1', 'submod_0', 'getitem', 'w']))
            if all(n.name != name for n in g.nodes):
                node.name = name
        values.append(node)
        ops.append(node)
    outs = draw(st.lists(st.integers(0, len(values) - 1), min_size=1, max_size=4))
    g.output(tuple(values[i] for i in outs) if len(outs) > 1 else values[outs[0]])
    for i, node in enumerate(g.nodes):
        if draw(st.integers(0, 2)) == 0:
            node.meta['i'] = [i]
    gm = fxcpp.GraphModule(_Root(), g)
    if draw(st.booleans()):
        assign = {n.name: draw(st.sampled_from(_KEYS[:draw(st.integers(1, len(_KEYS)))])) for n in ops}
    else:  # runs: monotone partition ids, never a cycle
        cuts = sorted(draw(st.lists(st.integers(0, len(ops)), max_size=3)))
        assign = {n.name: sum(i >= c for c in cuts) for i, n in enumerate(ops)}
    options = dict(keep_original_order=draw(st.booleans()), keep_original_node_name=draw(st.booleans()),
                   keep_original_input_name=draw(st.booleans()),
                   partition_affix=draw(st.sampled_from([None, '', 'aff'])), tuple_return=draw(st.booleans()))
    return gm, n_ph, assign, options


@needs2
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs_2x())
def test_random_graphs_and_2x_options_match_torch_fx(case):
    gm, n_ph, assign, options = case
    inputs = tuple(torch.full((2,), float(i + 1)) for i in range(n_ph))
    out = _compare2(gm, _by_name(assign), inputs, **options)
    event('compared' if out is not None else 'both raise')


@needs2
@pytest.mark.parametrize('options', [{}, {'keep_original_order': True}, {'tuple_return': True},
                                     {'keep_original_input_name': False, 'keep_original_node_name': True},
                                     {'partition_affix': 'aff'}])
def test_module_example_with_2x_options(options):
    torch.manual_seed(0)
    gm = fxcpp.symbolic_trace(MyModule())
    x, y = torch.rand(3, 4), torch.rand(3, 4)
    ops = [n.name for n in gm.graph.nodes if n.op not in ('placeholder', 'get_attr', 'output')]
    _compare2(gm, _by_name({name: (i * 7) % 3 for i, name in enumerate(ops)}), (x, y), **options)


@needs2
@pytest.mark.parametrize('options', [{}, {'keep_original_order': True}, {'tuple_return': True}])
def test_partition_without_outputs_2x(options):
    g = fxcpp.Graph()
    x = g.placeholder('x')
    g.call_function(torch.relu, (x,))  # dead
    g.output(g.call_function(torch.neg, (x,)))
    gm = fxcpp.GraphModule(torch.nn.Module(), g)
    _compare2(gm, _by_name({'relu': 1, 'neg': 0}), (torch.ones(2),), **options)


@needs2
@pytest.mark.parametrize('keep', [False, True])
def test_errors_in_torch_fx_2x_order(keep):
    """Callback errors first, then cycles, then missing get_attr targets, then missing modules
    (in graph order), and a get_attr only the output reads under keep_original_order."""
    def build():
        g = fxcpp.Graph()
        x = g.placeholder('x')
        a = g.call_module('act', (x,))
        w = g.get_attr('w')
        b = g.call_function(operator.add, (a, w))
        c = g.call_module('seq.0', (b,))
        g.output((c, g.get_attr('v')))
        return fxcpp.GraphModule(_Root(), g)

    def bad(node):
        raise ValueError(f'callback on {node.name}')
    inputs = (torch.ones(2),)
    for drop in [(), ('w',), ('act',), ('w', 'act'), ('seq',)]:
        _compare2(build(), bad, inputs, drop, keep_original_order=keep)
        _compare2(build(), _by_name({'act': 0, 'add': 1, 'seq_0': 0}), inputs, drop, keep_original_order=keep)
        _compare2(build(), lambda n: 0, inputs, drop, keep_original_order=keep)


@needs2
def test_grad_mode_graphs_take_torch_fx_route():
    g = fxcpp.Graph()
    x = g.placeholder('x')
    g.call_function(torch._C._set_grad_enabled, (False,))
    a = g.call_function(torch.neg, (x,))
    b = g.call_function(torch.relu, (a,))
    g.call_function(torch._C._set_grad_enabled, (True,))
    g.output(b)
    gm = fxcpp.GraphModule(torch.nn.Module(), g)
    out = _compare2(gm, _by_name({'_set_grad_enabled': 0, 'neg': 0, 'relu': 1, '_set_grad_enabled_1': 1}),
                    (torch.ones(2),))
    assert 'torch._C._set_grad_enabled(False)' in out.submod_1.code  # 2.x repeats the state


@needs2
def test_symbolic_example_values_take_torch_fx_route():
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from fxcpp.passes.split_module import _needs_torch_fx
    g = fxcpp.Graph()
    x = g.placeholder('x')
    s = g.placeholder('s')
    a = g.call_function(torch.relu, (x,))
    b = g.call_function(operator.mul, (a, s))
    g.output(b)
    gm = fxcpp.GraphModule(torch.nn.Module(), g)
    assert not _needs_torch_fx(gm.graph)
    s.meta['example_value'] = ShapeEnv().create_unbacked_symint()
    assert _needs_torch_fx(gm.graph)
    _compare2(gm, _by_name({'relu': 0, 'mul': 1}), (torch.ones(2), 3))


@needs2
def test_symbolic_sizes_inside_the_graph_take_torch_fx_route():
    """An unbacked size made inside the graph: 2.x passes its node to the partition whose values
    have that size (here `item` into submod_1)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from fxcpp.passes.split_module import _needs_torch_fx
    env = ShapeEnv()
    u = env.create_unbacked_symint()
    with FakeTensorMode(shape_env=env):
        fake = torch.empty(u)
    g = fxcpp.Graph()
    x = g.placeholder('x')
    i = g.call_method('item', (x,))
    y = g.call_function(torch.zeros, (i,))
    z = g.call_function(torch.relu, (y,))
    g.output(z)
    gm = fxcpp.GraphModule(torch.nn.Module(), g)
    assert not _needs_torch_fx(gm.graph)
    i.meta['example_value'] = u
    y.meta['example_value'] = z.meta['example_value'] = (fake,)
    assert _needs_torch_fx(gm.graph)
    out = _compare2(gm, _by_name({'item': 0, 'zeros': 0, 'relu': 1}), (torch.tensor(3),))
    assert 'item' in out.submod_1.code
