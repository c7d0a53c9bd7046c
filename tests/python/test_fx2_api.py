"""torch.fx 2.x's API surface (issue 23, item 2), differential against the installed torch.fx.

On torch 2.x fxcpp takes torch.fx 2.x's signatures and behaviour (find_nodes, output_node,
Node.insert_arg, replace_all_uses_with(propagate_meta=), node ordering, call_function(name=),
eliminate_dead_code(is_impure_node=) with 2.x's impurity, Interpreter(graph=), boxed_run,
replace_pattern_with_filters); on 1.13 it keeps torch.fx 1.13.1's signatures (checked here too).
Each case runs on both libraries and compares results, or exception types and messages.
"""
import inspect
import operator

import pytest
import torch
import torch.fx as tfx
import torch.fx.subgraph_rewriter as t_sr
from hypothesis import given, settings, strategies as st

import fxcpp
import fxcpp.subgraph_rewriter as f_sr
from torch2 import TORCH2

needs2 = pytest.mark.skipif(not TORCH2, reason='torch.fx 1.13 has no such API (torch.fx 2.x only)')
LIBS = [tfx, fxcpp]


def outcome(fn):
    try:
        return ('ok', fn())
    except Exception as e:  # noqa: B902
        return ('error', type(e).__name__, str(e))


def names(v):
    """Nodes as their names, recursively (results of the two libraries compare by name)."""
    if isinstance(v, (list, tuple)):
        return type(v)(names(x) for x in v) if not hasattr(v, '_fields') else tuple(names(x) for x in v)
    if isinstance(v, dict):
        return {names(k): names(x) for k, x in v.items()}
    if hasattr(v, 'op') and hasattr(v, 'graph'):
        return ('node', v.name)
    return v


def same(fn):
    """fn(lib) on both libraries; the outcomes (values by node name, or errors) must agree."""
    a, b = (outcome(lambda: names(fn(lib))) for lib in LIBS)
    assert a == b, f'\ntorch.fx: {a}\nfxcpp:    {b}'
    return a


def small_graph(lib):
    g = lib.Graph()
    x = g.placeholder('x')
    y = g.call_function(torch.relu, (x,))
    z = g.call_method('neg', (y,))
    w = g.get_attr('w')
    with g.inserting_before(y):
        g.call_function(torch.relu, (x,))
    g.output((z, w))
    return g


def test_signatures_follow_the_installed_torch_fx():
    for cls, names_ in [('Graph', ['eliminate_dead_code', 'call_function', 'find_nodes', 'output_node']),
                        ('Node', ['is_impure', 'replace_all_uses_with', 'insert_arg']),
                        ('Interpreter', ['__init__', 'boxed_run'])]:
        for name in names_:
            ref = getattr(getattr(tfx, cls), name, None)
            got = getattr(getattr(fxcpp, cls), name, None)
            if ref is None:  # 1.13: no such method
                continue
            assert got is not None, (cls, name)
            rp, gp = inspect.signature(ref).parameters, inspect.signature(got).parameters
            assert [(p.name, p.kind, p.default) for p in rp.values() if p.name != 'self' and
                    not inspect.isfunction(p.default)] == \
                [(p.name, p.kind, p.default) for p in gp.values() if p.name != 'self' and
                 not inspect.isfunction(p.default)], (cls, name)


_OPS = ['placeholder', 'call_function', 'call_method', 'get_attr', 'output', 'call_module', 'foo', 1, None]
_TARGETS = [None, torch.relu, torch.neg, 'neg', 'w', 'relu', 'x', operator.add, 3]


@needs2
@settings(max_examples=60, deadline=None)
@given(op=st.sampled_from(_OPS), target=st.sampled_from(_TARGETS + [[1]]), sort=st.booleans())
def test_find_nodes(op, target, sort):
    # sort=False: in the order the nodes entered torch.fx's lookup table (Note [find_nodes order])
    same(lambda lib: small_graph(lib).find_nodes(op=op, target=target, sort=sort))


# Edits a pass makes, each on both libraries' graphs at once (nodes picked by position among
# the live ones): find_nodes(sort=False) must list every (op, target) in the same order.
_EDITS = ['call_function', 'call_method', 'placeholder', 'get_attr', 'insert_before', 'args=', 'kwargs=',
          'name=', 'meta=', 'meta[k]=', 'type=', 'target=', 'attr=', 'attr=twice', 'update_arg', 'update_kwarg',
          'replace_input_with', 'rauw', 'append', 'prepend', 'erase', 'stack_trace=', 'insert_arg']


def _apply_edit(lib, g, edit, i, j, live):
    nodes = [n for n in g.nodes if n.op != 'output']
    a, b = nodes[i % len(nodes)], nodes[j % len(nodes)]
    fns = [torch.relu, torch.neg]
    if edit in ('call_function', 'call_method', 'placeholder', 'get_attr', 'insert_before'):
        where = g.inserting_before(a) if edit == 'insert_before' else g.inserting_before(g.output_node())
        with where:
            if edit in ('call_function', 'insert_before'):
                g.call_function(fns[j % 2], (b,))
            elif edit == 'call_method':
                g.call_method(['neg', 'relu'][j % 2], (b,))
            elif edit == 'placeholder':
                with g.inserting_before(next(iter(g.nodes))):
                    g.placeholder(f'p{len(nodes)}')
            else:
                g.get_attr(['w', 'v'][j % 2])
        return
    if a.op == 'placeholder' and edit in ('args=', 'update_arg', 'insert_arg', 'replace_input_with', 'rauw'):
        return  # keeps the graph's users well formed
    users_ok = b.op != 'output' and b not in a.users and a is not b and \
        [n for n in g.nodes].index(b) < [n for n in g.nodes].index(a)
    if edit == 'args=':
        a.args = (b,) if users_ok else a.args
    elif edit == 'kwargs=':
        a.kwargs = dict(a.kwargs)
    elif edit == 'name=':
        a.name = f'renamed_{i}_{j}'
    elif edit == 'meta=':
        a.meta = {'k': j}
    elif edit == 'meta[k]=':
        a.meta['k'] = j
    elif edit == 'type=':
        a.type = int
    elif edit == 'target=':
        a.target = fns[j % 2] if a.op == 'call_function' else ['neg', 'relu', 'w'][j % 3]
    elif edit == 'attr=':
        a.custom = j
    elif edit == 'attr=twice':
        a.custom = j
        a.custom = j + 1
    elif edit == 'update_arg' and a.args and users_ok:
        a.update_arg(0, b)
    elif edit == 'update_kwarg':
        a.update_kwarg('k', j)
    elif edit == 'replace_input_with' and a.args and users_ok and a.all_input_nodes:
        a.replace_input_with(a.all_input_nodes[0], b)
    elif edit == 'rauw' and users_ok and a.op != 'placeholder':
        a.replace_all_uses_with(b)
    elif edit == 'append' and a.op not in ('placeholder',) and b.op not in ('placeholder',) and not a.users \
            and not a.all_input_nodes:
        b.append(a)
    elif edit == 'prepend' and a.op != 'placeholder' and not a.users and not a.all_input_nodes:
        g.output_node().prepend(a)
    elif edit == 'erase' and not a.users:
        g.erase_node(a)
    elif edit == 'stack_trace=':
        a.stack_trace = f'trace {j}'
    elif edit == 'insert_arg' and a.op in ('call_function', 'call_method'):
        a.insert_arg(0, j)


def _lookup_orders(g):
    keys = [('call_function', torch.relu), ('call_function', torch.neg)] + \
        [(op, None) for op in ('placeholder', 'call_method', 'get_attr', 'output')] + \
        [('call_method', 'neg'), ('get_attr', 'w')]
    return {f'{op} {getattr(t, "__name__", t)}': [n.name for n in g.find_nodes(op=op, target=t, sort=False)]
            for op, t in keys}


@needs2
@settings(max_examples=int(__import__('os').environ.get('FXCPP_HYPOTHESIS_MAX_EXAMPLES', 100)), deadline=None,
          derandomize=True)
@given(st.lists(st.tuples(st.sampled_from(_EDITS), st.integers(0, 30), st.integers(0, 30)), max_size=25))
def test_find_nodes_unsorted_follows_torch_fx_through_edits(edits):
    """find_nodes(sort=False) after any sequence of edits lists each (op, target) in the order
    torch.fx does: creation order, a node moving to the end when its target changes or any of
    its attributes is assigned (torch.fx's Node.__setattr__), not when it moves in the list."""
    graphs = {}
    for lib in LIBS:
        g = small_graph(lib)
        history = []
        for edit, i, j in edits:
            _apply_edit(lib, g, edit, i, j, history)
            history.append(_lookup_orders(g))
        graphs[lib.__name__] = history
    assert graphs['torch.fx'] == graphs['fxcpp']


@needs2
def test_find_nodes_needs_op_keyword():
    same(lambda lib: small_graph(lib).find_nodes('placeholder'))
    same(lambda lib: small_graph(lib).find_nodes())


@needs2
def test_output_node():
    same(lambda lib: small_graph(lib).output_node())
    same(lambda lib: lib.Graph().output_node())

    def no_output(lib):
        g = small_graph(lib)
        g.erase_node(g.output_node())
        return g.output_node()
    same(no_output)


@needs2
@settings(max_examples=40, deadline=None)
@given(perm=st.permutations(range(5)))
def test_nodes_order_by_position(perm):
    def run(lib):
        nodes = list(small_graph(lib).nodes)
        picked = [nodes[i] for i in perm]
        return (sorted(picked), [a < b for a, b in zip(picked, picked[1:])],
                [a >= b for a, b in zip(picked, picked[1:])], max(picked), min(picked))
    same(run)
    same(lambda lib: next(iter(small_graph(lib).nodes)) < 3)


@needs2
@settings(max_examples=60, deadline=None)
@given(idx=st.integers(-2, 5), which=st.sampled_from(['node', 'int', 'list', 'none', 'tuple']))
def test_insert_arg(idx, which):
    def run(lib):
        g = small_graph(lib)
        nodes = list(g.nodes)
        x, neg = nodes[0], nodes[3]
        arg = {'node': x, 'int': 7, 'list': [x, 2], 'none': None, 'tuple': (x, (x, 1))}[which]
        neg.insert_arg(idx, arg)
        # all_input_nodes: the same set; torch.fx lists an inserted input after the earlier
        # ones, fxcpp in argument order (its input list is derived from the arguments)
        return (tuple(neg.args), sorted(n.name for n in neg.all_input_nodes), list(x.users),
                [list(n.users) for n in g.nodes])
    same(run)


@needs2
@pytest.mark.parametrize('meta', [{}, {'a': 1}])
@pytest.mark.parametrize('target_meta', [{}, {'b': 2}])
@pytest.mark.parametrize('cb', [None, lambda u: u.op != 'output'])
def test_replace_all_uses_with_propagate_meta(meta, target_meta, cb):
    def run(lib):
        g = small_graph(lib)
        relu = list(g.nodes)[2]
        relu.meta.update(meta)
        new = g.call_function(torch.sin, (list(g.nodes)[0],))
        new.meta.update(target_meta)
        changed = relu.replace_all_uses_with(new, cb, propagate_meta=True)
        return changed, dict(new.meta), [n.args for n in g.nodes]
    same(run)


@needs2
@pytest.mark.parametrize('name', [None, 'foo', 'x', 'relu', 'sin', 'foo_1'])
def test_call_function_name(name):
    def run(lib):
        g = small_graph(lib)
        a = g.call_function(torch.sin, (list(g.nodes)[0],), name=name)
        b = g.call_function(torch.sin, (a,), name=name)
        return a.name, b.name, g.python_code('self').src
    same(run)


class _DCE(torch.nn.Module):
    def forward(self, a):
        b = a + 1
        torch.ops.aten.add_.Tensor(a, 1)
        c = torch.ops.aten.add(b, b)
        d = torch.ops.aten.add.out(b, b, out=a, alpha=2)  # noqa: F841
        e = torch.ops.aten.relu(c)  # noqa: F841
        operator.setitem(a, 0, 1.0)
        f = torch.ops.aten.bernoulli(a)  # noqa: F841
        torch._assert(True, 'x')
        return a * 2


@pytest.mark.parametrize('custom', [None, 'placeholders_only', 'adds'])
def test_eliminate_dead_code_impurity(custom):
    if custom is not None and not TORCH2:
        pytest.skip('is_impure_node is torch.fx 2.x API')
    preds = {'placeholders_only': lambda n: n.op in ('placeholder', 'output'),
             'adds': lambda n: n.is_impure() or n.target == torch.ops.aten.add}

    def run(lib):
        gm = lib.symbolic_trace(_DCE())
        impure = [(n.name, n.is_impure()) for n in gm.graph.nodes]
        kw = {} if custom is None else {'is_impure_node': preds[custom]}
        changed = gm.graph.eliminate_dead_code(**kw)
        gm.recompile()
        return impure, changed, [n.name for n in gm.graph.nodes], gm.code
    same(run)


@needs2
def test_is_impure_random():
    def run(lib):
        gm = lib.symbolic_trace(lambda a: torch.ops.aten.bernoulli(a) + torch.rand_like(a))
        return [(n.name, n.is_impure(), n.is_impure(False), n.is_impure(impure_random=True)) for n in gm.graph.nodes]
    same(run)


@needs2
@pytest.mark.parametrize('register', ['torch.fx', 'fxcpp'])
def test_has_side_effect_after_first_use(register):
    # the core caches each target's impurity: a target registered later (through torch.fx's or
    # fxcpp's has_side_effect, one set on 2.x) is impure from then on, as in torch.fx
    def run(lib, reg):
        def late_fn(x):
            return x
        g = lib.Graph()
        x = g.placeholder('x')
        g.call_function(late_fn, (x,))
        out = g.output(x)
        first = g.eliminate_dead_code()
        with g.inserting_before(out):
            g.call_function(late_fn, (x,))
        reg(late_fn)
        second = g.eliminate_dead_code()
        return first, second, [n.name for n in g.nodes]
    reg = tfx.node.has_side_effect if register == 'torch.fx' else fxcpp.has_side_effect
    assert run(fxcpp, reg) == run(tfx, tfx.node.has_side_effect) == (True, False, ['x', 'late_fn_1', 'output'])


@needs2
def test_eliminate_dead_code_in_get_attr_subgraphs():
    def run(lib):
        inner = lib.symbolic_trace(lambda x: (x + 1, x * 2)[0])
        g = lib.Graph()
        x = g.placeholder('x')
        sub = g.get_attr('sub')
        g.call_function(torch.neg, (x,))
        g.output((x, sub))
        root = torch.nn.Module()
        root.sub = inner
        gm = lib.GraphModule(root, g)
        changed = gm.graph.eliminate_dead_code()
        return changed, [n.name for n in gm.graph.nodes], [n.name for n in gm.sub.graph.nodes]
    same(run)


class _Two(torch.nn.Module):
    def forward(self, x, y):
        return torch.relu(x) + y


@needs2
@pytest.mark.parametrize('graph_of', ['own', 'other', 'none'])
def test_interpreter_graph_argument(graph_of):
    def run(lib):
        gm = lib.symbolic_trace(_Two())
        other = lib.symbolic_trace(lambda x, y: x * y).graph
        graph = {'own': gm.graph, 'other': other, 'none': None}[graph_of]
        interp = lib.Interpreter(gm, graph=graph)
        out = interp.run(torch.full((2,), 3.0), torch.full((2,), 2.0))
        return out.tolist(), interp.name, interp.extra_traceback, interp.graph is (graph or gm.graph)
    same(run)
    # any module with a graph to run
    same(lambda lib: lib.Interpreter(torch.nn.Linear(2, 2),
                                     graph=lib.symbolic_trace(lambda x: x - 1).graph).run(torch.ones(2)).tolist())


@needs2
@settings(max_examples=30, deadline=None)
@given(n=st.integers(0, 4))
def test_boxed_run(n):
    def run(lib):
        interp = lib.Interpreter(lib.symbolic_trace(_Two()))
        args = [torch.full((2,), float(i)) for i in range(n)]
        out = interp.boxed_run(args)
        return out.tolist(), args
    same(run)


@needs2
def test_interpreter_runs_a_torch_fx_graph():
    gm = tfx.symbolic_trace(_Two())
    a = tfx.Interpreter(gm).run(torch.ones(2), torch.ones(2))
    b = fxcpp.Interpreter(gm).run(torch.ones(2), torch.ones(2))
    assert torch.equal(a, b)


# ------------------------------------------------------------- subgraph rewriting (2.x)

def _rewrite(lib, sr, make, pattern, replacement, **kw):
    gm = lib.symbolic_trace(make())
    if kw or replacement is None:
        res = sr.replace_pattern_with_filters(gm, pattern, replacement, **kw)
        res = [(r.anchor, r.nodes_map, r.replacements) for r in res]
    else:
        res = [(m.anchor, m.nodes_map) for m in sr.replace_pattern(gm, pattern, replacement)]
    gm.graph.lint()
    return res, gm.code


def _same_rewrite(make, pattern, replacement, **kw):
    a, b = (outcome(lambda: names(_rewrite(lib, sr, make, pattern, replacement, **kw)))
            for lib, sr in [(tfx, t_sr), (fxcpp, f_sr)])
    assert a == b, f'\ntorch.fx: {a}\nfxcpp:    {b}'
    return a


class _Chain(torch.nn.Module):
    def forward(self, x, w):
        a = torch.relu(x + w)
        b = torch.relu(a + w)
        c = torch.ops.aten._reshape_alias_copy.default(b, [1, 2], [3, 4])
        return torch.relu(c + 2), a.sum(dim=0, keepdim=True)


def _add_relu(x, w):
    return torch.relu(x + w)


def _sub_sigmoid(x, w):
    return torch.sigmoid(x - w)


def _reshape(x, a, b):
    return torch.ops.aten._reshape_alias_copy.default(x, a, b)


def _reshape_swapped(x, a, b):
    return torch.ops.aten._reshape_alias_copy.default(x, b, a)


def _add2_relu(x):
    return torch.relu(x + 2)


def _add3_relu(x):
    return torch.relu(x + 3)


@needs2
@pytest.mark.parametrize('pattern,replacement', [
    (_add_relu, _sub_sigmoid), (_reshape, _reshape_swapped), (_add2_relu, _sub_sigmoid),
    (_add3_relu, _add2_relu)])
@pytest.mark.parametrize('mode', ['plain', 'graph_modules', 'filters', 'ignore_literals', 'name_match'])
def test_replace_pattern_2x(pattern, replacement, mode):
    if mode == 'plain':
        _same_rewrite(_Chain, pattern, replacement)
        return
    if mode == 'graph_modules':
        a, b = (outcome(lambda: names(_rewrite(lib, sr, _Chain, lib.symbolic_trace(pattern),
                                                lib.symbolic_trace(replacement))))
                for lib, sr in [(tfx, t_sr), (fxcpp, f_sr)])
        assert a == b
        return
    kw = {'filters': {'match_filters': [lambda m, g, p: all(n.name != 'add' for n in m.nodes_map.values()
                                                           if hasattr(n, 'name'))]},
          'ignore_literals': {'ignore_literals': True},
          'name_match': {'node_name_match': 'relu'}}[mode]
    _same_rewrite(_Chain, pattern, replacement, **kw)


@needs2
def test_replace_pattern_with_callback():
    def callback(match, graph, pattern_graph):
        return fxcpp.symbolic_trace(_sub_sigmoid).graph if isinstance(graph, fxcpp.Graph) else \
            tfx.symbolic_trace(_sub_sigmoid).graph
    _same_rewrite(_Chain, _add_relu, None, replacement_callback=callback)
    _same_rewrite(_Chain, _add_relu, None)  # neither replacement nor callback


@needs2
def test_replacement_with_tensor_attributes():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.tensor([1.0])

        def forward(self, x):
            return x + self.a

    class P(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.b = torch.tensor([5.0])

        def forward(self, x):
            return x + self.b

    class R(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c = torch.tensor([3.0])

        def forward(self, x):
            return x - self.c
    _same_rewrite(M, P(), R())
    for lib, sr in [(tfx, t_sr), (fxcpp, f_sr)]:
        gm = lib.symbolic_trace(M())
        sr.replace_pattern(gm, P(), R())
        assert torch.equal(gm(torch.ones(1)), torch.tensor([-2.0]))


@needs2
def test_long_chain_pattern_has_no_recursion_limit():
    depth = 1500

    def chain(x):
        for _ in range(depth):
            x = torch.neg(x)
        return x
    gm = fxcpp.symbolic_trace(chain)
    matches = f_sr.replace_pattern_with_filters(gm, chain, lambda x: torch.abs(x))
    assert len(matches) == 1 and len(matches[0].nodes_map) == depth + 1


# ---------------------------------------------------------------------------- tracing helpers

@needs2
def test_ph_with_meta_attributes_reach_the_placeholder():
    def f(x, y):
        return x + y

    def trace(lib):
        ph = lib._symbolic_trace.PHWithMeta(ph_key='the_x')
        ph.note = 'user data'
        gm = lib.symbolic_trace(f, concrete_args={'x': ph, 'y': lib.PH})
        return gm.code, [(n.name, getattr(n, 'ph_key', None), getattr(n, 'note', None))
                         for n in gm.graph.nodes if n.op == 'placeholder']
    assert trace(fxcpp) == trace(tfx)
    assert trace(fxcpp)[1][0][1:] == ('the_x', 'user data')


@needs2
def test_current_patcher_is_shared_with_torch_fx():
    """While fxcpp traces, torch.fx's CURRENT_PATCHER is fxcpp's patcher, so torch code that steps
    out of tracing (Dynamo: _maybe_revert_all_patches) undoes fxcpp's patches as torch.fx's."""
    import torch.fx._symbolic_trace as tst
    import fxcpp._symbolic_trace as fst
    seen = {}

    def leaf(lib, st):
        def f(x):
            seen[lib.__name__] = (st.CURRENT_PATCHER is not None, tst.CURRENT_PATCHER is st.CURRENT_PATCHER)
            patched = torch.nn.Module.__call__
            with tst._maybe_revert_all_patches():
                seen[lib.__name__] += (torch.nn.Module.__call__ is not patched,)
            seen[lib.__name__] += (torch.nn.Module.__call__ is patched,)
            return x.relu()
        return f

    original_call = torch.nn.Module.__call__
    for lib, st in ((tfx, tst), (fxcpp, fst)):
        lib.symbolic_trace(leaf(lib, st))
        assert st.CURRENT_PATCHER is None and tst.CURRENT_PATCHER is None
        assert torch.nn.Module.__call__ is original_call
    assert seen['fxcpp'] == seen['torch.fx'] == (True, True, True, True)


@needs2
def test_is_fx_symbolic_tracing_and_its_warning(caplog):
    import fxcpp._symbolic_trace as fst
    states = []

    def f(x):
        states.append((fst.is_fx_symbolic_tracing(), tfx._symbolic_trace.is_fx_symbolic_tracing()))
        return x + 1
    fxcpp.symbolic_trace(f)
    tfx.symbolic_trace(f)
    # One thread-local flag for both tracers (Note [One tracing flag]): each sees the other's trace.
    assert states == [(True, True), (True, True)]
    assert fst.is_fx_symbolic_tracing() is False
    fst.is_fx_tracing_warning.cache_clear()
    with caplog.at_level('WARNING'):
        fst.is_fx_tracing()
        fst.is_fx_tracing()
    warnings = [r.getMessage() for r in caplog.records if r.name == 'fxcpp._symbolic_trace']
    assert len(warnings) == 1 and warnings[0].startswith('is_fx_tracing will return true for both')


@needs2
def test_meta_proxy_records_fake_values():
    from torch._subclasses.fake_tensor import FakeTensorMode

    def run(lib):
        mode = FakeTensorMode()
        graph = lib.Graph()
        tracer = lib.proxy.GraphAppendingTracer(graph)
        x = graph.placeholder('x')
        with mode:
            x.meta['val'] = torch.empty(2, 3)
        p = lib.proxy.MetaProxy(x, tracer, fake_mode=mode)
        out = torch.relu(p).sum(0)
        graph.output(out.node)
        return repr(out), type(out).__name__, [(n.name, tuple(n.meta['val'].shape)) for n in graph.nodes
                                              if 'val' in n.meta]
    assert run(fxcpp) == run(tfx)
    with pytest.raises(AssertionError, match='No MetaProxy found'):
        fxcpp.proxy.MetaProxy.__torch_function__(torch.relu, (), (torch.randn(2),))


# ---- found by PyTorch's own test_fx.py (the 2.x stand-in suite, scripts/upstream) --------------

class _OptionalArg(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
        return x if y is None else x + y


class _AddTwice(torch.nn.Module):
    def forward(self, x):
        return x + x


def test_pep604_union_annotation_code_and_pickling_match_torch_fx():
    # 2.x writes `X | None` as typing_Union[X,NoneType] (a global per part, so the module
    # pickles); 1.13 names the union as one global. EmbeddingBag's forward is annotated so.
    import pickle
    for root in (_OptionalArg(), torch.nn.EmbeddingBag(10, 3, mode='sum')):
        ref, ours = tfx.symbolic_trace(root), fxcpp.symbolic_trace(root)
        assert ours.code == ref.code
        if TORCH2:
            assert 'typing_Union[' in ours.code
            loaded = pickle.loads(pickle.dumps(ours))
            loaded.graph.lint()
            assert loaded.code == ours.code


@needs2
def test_generated_code_is_named_after_the_traced_file_as_in_torch_fx():
    # torch.fx 2.x: the tracer records the traced function's code object fields, and the
    # generated forward's co_filename says "<eval_with_key>.N from <file>:<line> in <name>".
    ref, ours = tfx.symbolic_trace(_AddTwice()), fxcpp.symbolic_trace(_AddTwice())
    want = ref.forward.__code__.co_filename
    got = ours.forward.__code__.co_filename
    assert got.split(' from ', 1)[1] == want.split(' from ', 1)[1]
    assert __file__ in got and got.endswith(' in forward')
    import linecache
    assert ''.join(linecache.getlines(got)).rstrip('\n') == ours.code  # tracebacks still find the source


def test_deepcopy_of_a_module_whose_meta_refers_to_it_matches_torch_fx():
    import copy

    def run(lib):
        m = lib.symbolic_trace(_AddTwice())
        if not hasattr(m, 'meta'):
            return 'no meta'
        m.meta['self'] = m
        try:
            c = copy.deepcopy(m)
        except RecursionError:
            return 'RecursionError'
        return (c is not m, c.meta['self'] is c, type(c).__bases__ == type(m).__bases__)
    assert run(fxcpp) == run(tfx)


@needs2
def test_proxy_deepcopy_matches_torch_fx():
    import copy
    for lib in (tfx, fxcpp):
        gm = lib.symbolic_trace(_AddTwice())
        node = list(gm.graph.nodes)[-2]
        p = lib.Proxy(node, None)
        node.proxy = p
        p2 = copy.deepcopy(p)
        assert type(p2) is lib.Proxy
        assert p2.node is not node and p2.node.name == node.name and p2.node.target == node.target


@needs2
def test_flat_concrete_args_for_a_varargs_root_match_torch_fx():
    class T(torch.nn.Module):
        def forward(self, *args, **kwargs):
            return args[0] + args[1]
    args = (torch.rand(1), torch.rand(1))
    ref = tfx.symbolic_trace(T(), concrete_args=(tfx.PH, tfx.PH))
    ours = fxcpp.symbolic_trace(T(), concrete_args=(fxcpp.PH, fxcpp.PH))
    ours.graph.lint()
    assert ours.code == ref.code and str(ours.graph) == str(ref.graph)
    assert torch.equal(ours(*args), ref(*args))


def test_torch_save_keeps_unused_submodules_buffers_and_parameters_as_torch_fx():
    import io

    def run(lib):
        gm = lib.symbolic_trace(_AddTwice())
        gm.add_submodule('foo', _AddTwice())
        gm.register_buffer('dummy_buffer', torch.empty(1))
        gm.register_parameter('dummy_parameter', torch.nn.Parameter(torch.empty(1)))
        b = io.BytesIO()
        torch.save(gm, b)
        b.seek(0)
        r = torch.load(b, weights_only=False) if TORCH2 else torch.load(b)
        return tuple(hasattr(r, a) for a in ('foo', 'dummy_buffer', 'dummy_parameter'))
    assert run(fxcpp) == run(tfx)


def test_config_is_torch_fx_config():
    """fxcpp.config is torch.fx.config where the installed torch has one (issue 38 item 5):
    one set of process-wide switches, whichever name sets them; absent where torch.fx has none."""
    import importlib
    import importlib.util
    has = importlib.util.find_spec('torch.fx.config') is not None
    assert hasattr(fxcpp, 'config') == hasattr(tfx, 'config') == has
    if not has:
        with pytest.raises(ModuleNotFoundError, match="No module named 'fxcpp.config'"):
            importlib.import_module('fxcpp.config')
        return
    ours, theirs = importlib.import_module('fxcpp.config'), importlib.import_module('torch.fx.config')
    assert ours is theirs is fxcpp.config
    for name in ('disable_progress', 'verbose_progress'):
        before = getattr(theirs, name)
        try:
            setattr(ours, name, not before)
            assert getattr(theirs, name) is (not before)
        finally:
            setattr(theirs, name, before)


@needs2
@pytest.mark.parametrize('kwargs_only', [False, True])
def test_normalized_arguments_passes_normalize_to_only_use_kwargs_on(kwargs_only):
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(1, 1, 1)

        def forward(self, x):
            return torch.nn.functional.relu(self.conv(x))

    def norm(lib):
        gm = lib.symbolic_trace(M())
        return [n.normalized_arguments(gm, normalize_to_only_use_kwargs=kwargs_only) for n in gm.graph.nodes
                if n.op in ('call_function', 'call_module')]
    out = same(norm)
    assert out[0] == 'ok'


def _signature_shape(fn):
    """A signature's parameters as (name, kind, default), annotations left out and a function
    default as its kind (the two libraries' lambdas differ)."""
    out = []
    for p in inspect.signature(fn).parameters.values():
        d = p.default
        d = '<function>' if inspect.isfunction(d) else '-' if d is inspect.Parameter.empty else repr(d)
        out.append((p.name, p.kind.name, d))
    return out


@pytest.mark.parametrize('cls', ['Graph', 'Node', 'GraphModule', 'Tracer', 'Interpreter', 'Transformer', 'Proxy'])
def test_every_public_method_has_torch_fx_signature(cls):
    """inspect.signature of each public method of torch.fx's class, on fxcpp's: the same
    parameters, kinds and defaults (C methods included: Note [Method signatures])."""
    ref, got = getattr(tfx, cls), getattr(fxcpp, cls)
    wrong = []
    for name in sorted(dir(ref)):
        if name.startswith('_') and name != '__init__':
            continue
        member = inspect.getattr_static(ref, name, None)
        if not callable(member) and not isinstance(member, (staticmethod, classmethod)):
            continue
        try:
            want = _signature_shape(getattr(ref, name))
        except (TypeError, ValueError):
            continue  # torch.fx's own has none (a C slot)
        if not hasattr(got, name):
            wrong.append(f'{name}: missing')
            continue
        have = _signature_shape(getattr(got, name))
        # The one allowance: trailing options torch.fx 2.x added, kept on 1.13 (print_readable's,
        # which change nothing there): torch.fx's parameters first, each extra one defaulted.
        superset = not TORCH2 and have[:len(want)] == want and all(d != '-' for _, _, d in have[len(want):])
        if have != want and not superset:
            wrong.append(f'{name}: {have} != {want}')
    assert not wrong, '\n'.join(wrong)
