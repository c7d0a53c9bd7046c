"""The API surface of Graph and Node, against torch.fx 1.13 as the oracle.

* inspect.signature: every public method torch.fx defines on Graph and Node
  has the same parameter names, kinds and defaults in fxcpp; properties exist
  and are settable exactly when torch.fx's are.
* pickle: graphs (and lone nodes) round-trip as torch.fx's do.
* Graph.lint: each torch.fx check, on crafted graphs, raises the same error.
* Node(...) direct construction.
"""
import inspect
import pickle
import re
import warnings

import pytest
import torch
import torch.fx as tfx

import fxcpp
from torch2 import TORCH2, xfail2

LIBS = [tfx, fxcpp]


# --------------------------------------------------------------- signatures

def _public_members(cls):
    """Public names torch.fx's class defines itself (plus __init__)."""
    out = {}
    for name, obj in vars(cls).items():
        if name.startswith('_') and name != '__init__':
            continue
        out[name] = obj
    return out


def _small_graph(lib):
    g = lib.Graph()
    x = g.placeholder('x')
    y = g.call_function(torch.relu, (x,))
    g.output(y)
    return g, x, y


def _same_default(a, b):
    if a is inspect.Parameter.empty or b is inspect.Parameter.empty:
        return a is b
    if inspect.isfunction(a) or inspect.isfunction(b):
        # torch.fx's defaults here are lambdas: same qualified name and the
        # same answer on a probe value.
        if not (inspect.isfunction(a) and inspect.isfunction(b)):
            return False
        probe = object()
        return a.__qualname__ == b.__qualname__ and a(probe) is b(probe)
    return type(a) is type(b) and (a == b or repr(a) == repr(b))


def _compare_signatures(ref, got, *, unbound):
    rp = list(ref.parameters.values())
    gp = list(got.parameters.values())
    assert [p.name for p in gp] == [p.name for p in rp]
    for i, (r, g) in enumerate(zip(rp, gp)):
        if unbound and i == 0:
            # `self` of a C method is positional-only (a text signature's
            # $self); torch.fx's is positional-or-keyword. Nobody passes
            # self by keyword; bound signatures are compared exactly.
            continue
        assert g.kind == r.kind, (r.name, r.kind, g.kind)
        assert _same_default(r.default, g.default), (r.name, r.default, g.default)


@pytest.mark.parametrize('cls_name', ['Graph', 'Node'])
def test_every_public_method_has_torch_fx_signature(cls_name):
    ref_cls = getattr(tfx, cls_name)
    got_cls = getattr(fxcpp, cls_name)
    g_ref, _, n_ref = _small_graph(tfx)
    g_got, _, n_got = _small_graph(fxcpp)
    inst_ref, inst_got = (g_ref, g_got) if cls_name == 'Graph' else (n_ref, n_got)
    methods = [name for name, obj in _public_members(ref_cls).items() if inspect.isfunction(obj)]
    assert len(methods) > 8
    for name in methods:
        assert hasattr(got_cls, name), name
        ref = inspect.signature(getattr(ref_cls, name))
        got = inspect.signature(getattr(got_cls, name))  # raises ValueError without a signature
        _compare_signatures(ref, got, unbound=True)
        if name != '__init__':
            try:
                ref_b = inspect.signature(getattr(inst_ref, name))
            except ValueError as e:
                # placeholder's `default_value=inspect.Signature.empty` makes
                # inspect refuse the bound signature; fxcpp's must fail alike.
                with pytest.raises(ValueError, match=str(e)):
                    inspect.signature(getattr(inst_got, name))
                continue
            got_b = inspect.signature(getattr(inst_got, name))
            _compare_signatures(ref_b, got_b, unbound=False)


@pytest.mark.skipif(not TORCH2, reason='format_node(include_tensor_metadata=) is torch.fx 2.x API')
def test_format_node_include_tensor_metadata():
    """Each node's line with and without tensor metadata, as torch.fx 2.x writes it (meta "val",
    "tensor_meta" or "example_value"; strided tensors only; the type otherwise)."""
    lines = []
    for lib in (tfx, fxcpp):
        g = lib.Graph()
        x = g.placeholder('x', type_expr=torch.Tensor)
        a = g.call_function(torch.relu, (x,), type_expr=torch.Tensor)
        b = g.call_method('t', (a,))
        c = g.call_module('m', (b,))
        d = g.call_function(torch.add, (c, 1))
        e = g.call_function(torch.neg, (d,))
        f = g.get_attr('w')
        g.output((e, f))
        x.meta['val'] = a.meta['val'] = torch.zeros(2, 3)
        b.meta['tensor_meta'] = torch.zeros(3, 2, dtype=torch.int64).t()
        c.meta['example_value'] = torch.zeros(4, dtype=torch.bfloat16)
        d.meta['val'] = torch.zeros(2, 2).to_sparse_csr()
        e.meta['val'] = 3
        f.meta['val'] = torch.zeros(1)
        lines.append([(n.format_node(), n.format_node(include_tensor_metadata=True)) for n in g.nodes])
    assert lines[1] == lines[0]
    assert 'Tensor "f32[2, 3][3, 1]cpu"[num_users=1]' in lines[0][1][1]


def _settable(obj, name):
    try:
        setattr(obj, name, getattr(obj, name))
    except AttributeError:
        return False
    return True


@pytest.mark.parametrize('cls_name', ['Graph', 'Node'])
def test_every_property_exists_and_is_settable_like_torch_fx(cls_name):
    ref_cls = getattr(tfx, cls_name)
    got_cls = getattr(fxcpp, cls_name)
    props = [name for name, obj in _public_members(ref_cls).items() if isinstance(obj, property)]
    assert props
    for name in props:
        desc = inspect.getattr_static(got_cls, name)
        assert inspect.isdatadescriptor(desc), name
        g_ref, _, n_ref = _small_graph(tfx)
        g_got, _, n_got = _small_graph(fxcpp)
        ref_obj, got_obj = (g_ref, g_got) if cls_name == 'Graph' else (n_ref, n_got)
        assert _settable(got_obj, name) == _settable(ref_obj, name), name


@pytest.mark.parametrize('call', [
    lambda g, n, y: g.create_node(op='call_function', target=torch.neg, args=(n,), kwargs=None, name='neg_kw',
                                  type_expr=None),
    lambda g, n, y: y.update_arg(idx=0, arg=n),
    lambda g, n, y: y.update_kwarg(key='k', arg=n),
    lambda g, n, y: y.replace_input_with(old_input=n, new_input=n),
    lambda g, n, y: y.prepend(x=g.call_function(torch.neg, (n,))),
    lambda g, n, y: y.append(x=g.call_function(torch.neg, (n,))),
    lambda g, n, y: y.replace_all_uses_with(replace_with=n, delete_user_cb=lambda u: False),
    lambda g, n, y: g.node_copy(node=y, arg_transform=lambda a: a),
    lambda g, n, y: g.erase_node(to_erase=g.call_function(torch.neg, (n,))),
    lambda g, n, y: y.format_node(placeholder_names=None, maybe_return_typename=None),
])
def test_keyword_calls_match_torch_fx(call):
    out = []
    for lib in LIBS:
        g, x, y = _small_graph(lib)
        r = call(g, x, y)
        out.append((str(g), r if isinstance(r, (str, type(None))) else str(r)))
    assert out[0] == out[1]


# ----------------------------------------------------------------- pickling

class _Kitchen(torch.nn.Module):
    """kwargs, get_attr, call_method, call_module, slices, nested containers."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer('buf', torch.ones(4))
        self.param = torch.nn.Parameter(torch.zeros(4))

    def forward(self, x, y=None):
        z = self.lin(x).relu() + self.buf * self.param
        t = torch.cat([z, x], dim=1).view(-1)
        s = z[0:2, ::2]
        return {'a': (t, [s, x.size(0)]), 'b': torch.nn.functional.relu(x, inplace=False), 'c': ((z,), {'k': z})}


def _models():
    import torchvision
    return [('kitchen', _Kitchen()), ('resnet18', torchvision.models.resnet18())]


def _state_summary(lib, g):
    return (str(g), g.python_code('self').src, [(n.name, n.op, str(n.target), n.type) for n in g.nodes],
            [dict(n.meta) for n in g.nodes], g.owning_module is not None, type(g._codegen).__name__,
            g._tracer_cls is not None)


@pytest.mark.parametrize('name', ['kitchen', 'resnet18'])
@pytest.mark.parametrize('protocol', [0, 2, pickle.HIGHEST_PROTOCOL])
def test_traced_graph_pickles_like_torch_fx(name, protocol):
    model = dict(_models())[name]
    summaries = []
    for lib in LIBS:
        gm = lib.symbolic_trace(model)
        g = gm.graph
        for n in g.nodes:
            n.meta['tag'] = ('meta', n.name)
        before = _state_summary(lib, g)
        # torch.fx 2.x's Node has a C base (torch._C._NodeBase) that copyreg's protocol 0/1
        # reduction cannot rebuild (TypeError: function takes exactly 5 arguments): torch.fx
        # pickles at the highest protocol there, fxcpp still at `protocol`.
        ref_protocol = pickle.HIGHEST_PROTOCOL if TORCH2 and lib is tfx and protocol < 2 else protocol
        g2 = pickle.loads(pickle.dumps(g, protocol=ref_protocol if lib is tfx else protocol))
        after = _state_summary(lib, g2)
        assert after == before
        g2.lint()
        # The unpickled graph keeps building with the same names.
        out = next(iter(reversed(g2.nodes)))
        with g2.inserting_before(out):
            extra = g2.call_function(torch.relu, (out.args[0] if name == 'resnet18' else next(iter(g2.nodes)),))
        summaries.append((after, extra.name, str(g2)))
    assert summaries[0] == summaries[1]


def test_graph_with_types_and_default_pickles():
    out = []
    for lib in LIBS:
        g = lib.Graph()
        x = g.placeholder('x', type_expr=torch.Tensor)
        k = g.placeholder('k', default_value=3)
        r = g.call_method('add', (x, k), {'alpha': 2}, type_expr=torch.Tensor)
        g.output((r, [x, {'z': slice(x, None, 2)}]), type_expr=tuple)
        g2 = pickle.loads(pickle.dumps(g))
        out.append((str(g2), g2.python_code('self').src, [n.type for n in g2.nodes]))
        assert out[-1][0] == str(g)
    assert out[0] == out[1]


def test_empty_graph_pickles():
    assert [str(pickle.loads(pickle.dumps(lib.Graph()))) for lib in LIBS] == [str(tfx.Graph())] * 2


def test_lone_node_pickles_with_its_graph():
    out = []
    for lib in LIBS:
        gm = lib.symbolic_trace(_Kitchen())
        node = list(gm.graph.nodes)[3]
        node.meta['m'] = 1
        n2 = pickle.loads(pickle.dumps(node))
        assert n2 is not node
        assert any(n is n2 for n in n2.graph.nodes)
        out.append((n2.name, n2.op, str(n2.target), dict(n2.meta), str(n2.graph)))
    assert out[0] == out[1]


def test_unpickled_graph_keeps_node_attributes():
    for lib in LIBS:
        g, x, y = _small_graph(lib)
        y.custom = [1, 2]
        g2 = pickle.loads(pickle.dumps(g))
        assert list(g2.nodes)[1].custom == [1, 2]


def test_long_graph_pickles():
    # torch.fx follows node links recursively (RecursionError at a few
    # thousand nodes); fxcpp's flat records have no such limit.
    g = fxcpp.Graph()
    x = g.placeholder('x')
    for _ in range(5000):
        x = g.call_function(torch.relu, (x,))
    g.output(x)
    g2 = pickle.loads(pickle.dumps(g))
    assert str(g2) == str(g)


# --------------------------------------------------------------------- lint

class _LintModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(2, 2)
        self.register_buffer('b', torch.ones(1))

    def forward(self, x):
        return self.l(x) + self.b


def _traced(lib):
    gm = lib.symbolic_trace(_LintModule())
    return gm, gm.graph


def _first(g, op):
    return next(n for n in g.nodes if n.op == op)


def _use_before_def(lib):
    g = lib.Graph()
    x = g.placeholder('x')
    y = g.call_function(torch.relu, (x,))
    x.prepend(y)
    g.output(y)
    return g


def _other_graph_arg(lib):
    g, g2 = lib.Graph(), lib.Graph()
    x2 = g2.placeholder('x')
    g.placeholder('x')
    g.output(g.call_function(torch.relu, (x2,)))
    return g


def _redefined_name(lib):
    g = lib.Graph()
    x = g.placeholder('x')
    g.call_function(torch.relu, (x,))
    z = g.call_function(torch.relu, (x,))
    z.name = 'relu'
    g.output(z)
    return g


def _retarget(op, target):
    def build(lib):
        gm, g = _traced(lib)
        _first(g, op).target = target
        return g
    return build


def _plain_tensor_get_attr(lib):
    gm, g = _traced(lib)
    gm.t = torch.zeros(1)
    _first(g, 'get_attr').target = 't'
    return g


def _no_longer_callable(owned):
    # A callable target stops being callable: the one way to reach torch.fx's
    # call_function target check in fxcpp (Node.target is validated when set).
    def build(lib):
        class Fn:
            __name__ = 'fn'

            def __call__(self, x):
                return x
        fn = Fn()
        if owned:
            gm, g = _traced(lib)
            _first(g, 'call_function').target = fn
        else:
            g = lib.Graph()
            g.output(g.call_function(fn, (g.placeholder('x'),)))
        del Fn.__call__
        return g
    return build


def _two_problems(lib):
    # A missing get_attr before a non-callable call_function: which is reported first.
    gm, g = _traced(lib)

    class Fn:
        __name__ = 'fn'

        def __call__(self, x):
            return x
    _first(g, 'call_function').target = Fn()
    _first(g, 'get_attr').target = 'nope'
    del Fn.__call__
    return g


def _lint_outcome(lib, build):
    g = build(lib)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        try:
            g.lint()
        except Exception as e:  # noqa: BLE001 - the outcome is compared
            msg = re.sub(r' at 0x[0-9a-f]+', '', str(e))
            return type(e), msg.split('\n')[0], ('\n' + str(g)) in str(e)
    return None, [str(w.message) for w in caught]


@pytest.mark.parametrize('build', [
    _use_before_def, _other_graph_arg, _redefined_name,
    _retarget('get_attr', 'nope'), _retarget('call_module', 'b'), _retarget('call_module', 'l.weight.foo'),
    _retarget('call_module', 'l.nope'), _retarget('get_attr', 'l.weight'),
    _plain_tensor_get_attr,
    _no_longer_callable(True), _no_longer_callable(False), _two_problems,
], ids=lambda f: getattr(f, '__name__', 'case'))
def test_lint_matches_torch_fx(build):
    ref = _lint_outcome(tfx, build)
    got = _lint_outcome(fxcpp, build)
    assert got == ref


@pytest.mark.parametrize('op, target, wanted', [
    ('call_function', 'add', 'a Callable'),
    ('call_function', 5, 'a Callable'),
    ('get_attr', torch.relu, 'a str'),
    ('call_module', torch.relu, 'a str'),
    ('placeholder', torch.relu, 'a str'),
    ('output', 5, 'a str'),
])
def test_lint_target_checks_cannot_be_bypassed(op, target, wanted):
    # torch.fx stores any target and its lint (with an owning module) raises
    # ValueError; fxcpp raises the same error type when the target is set, so
    # no fxcpp graph holds such a node for lint to find.
    gm, g = _traced(tfx)
    _first(g, op).target = target
    with pytest.raises(ValueError, match=f'but {wanted} is expected'):
        g.lint()
    gm, g = _traced(fxcpp)
    node = _first(g, op)
    with pytest.raises(ValueError, match=f'but {wanted} is expected'):
        node.target = target
    assert node.target is not target
    g.lint()


def test_call_method_target_must_be_str_everywhere():
    for lib in LIBS:
        g = lib.Graph()
        x = g.placeholder('x')
        with pytest.raises(ValueError, match='but a str is expected'):
            g.call_method(torch.relu, (x,))
    g = fxcpp.Graph()
    n = g.call_method('relu', (g.placeholder('x'),))
    with pytest.raises(ValueError, match='but a str is expected'):
        n.target = torch.relu


def test_op_is_read_only():
    # torch.fx lets node.op be assigned anything (its lint then reports
    # "unknown opcode"); fxcpp's op is fixed at creation.
    g = fxcpp.Graph()
    x = g.placeholder('x')
    with pytest.raises(AttributeError):
        x.op = 'bogus'
    g.lint()


# ---------------------------------------------------------- Node(...) ctor

def _ctor_outcome(lib, *args, **kwargs):
    g = lib.Graph()
    x = g.placeholder('x')
    args = tuple(x if a is _X else g if a is _G else a for a in args)
    try:
        lib.Node(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - the outcome is compared
        return type(e), re.sub(r' at 0x[0-9a-f]+', '', str(e)), str(g)
    return None, None, str(g)


_X, _G = object(), object()


@pytest.mark.parametrize('args', [
    (_G, 'foo', 'bogus', torch.relu, (_X,), {}),
    (_G, 'foo', 'call_function', 'relu', (_X,), {}),
    (_G, 'foo', 'call_function', 5, (_X,), {}),
    (_G, 'foo', 'call_method', torch.relu, (_X,), {}),
    (_G, 'foo', 'get_attr', 3, (), {}),
    (None, 'foo', 'output', torch.relu, (), {}),
])
def test_node_constructor_rejects_like_torch_fx(args):
    assert _ctor_outcome(fxcpp, *args) == _ctor_outcome(tfx, *args)


def test_node_constructor_missing_arguments():
    for lib in LIBS:
        with pytest.raises(TypeError, match="missing 2 required positional arguments: 'args' and 'kwargs'"):
            lib.Node(lib.Graph(), 'foo', 'call_function', torch.relu)


def test_node_constructor_valid_input_is_refused_clearly():
    # torch.fx builds a node outside the node list that still counts as a
    # user of its inputs; fxcpp has no such half-linked node and says so.
    g = fxcpp.Graph()
    x = g.placeholder('x')
    before = str(g)
    with pytest.raises(TypeError, match='use graph.create_node'):
        fxcpp.Node(g, 'foo', 'call_function', torch.relu, (x,), {})
    assert str(g) == before and len(x.users) == 0 and len(g.nodes) == 1


def test_node_signature_is_torch_fx_constructor():
    ref = inspect.signature(tfx.Node)
    got = inspect.signature(fxcpp.Node)
    assert [(p.name, p.kind, p.default) for p in got.parameters.values()] == \
        [(p.name, p.kind, p.default) for p in ref.parameters.values()]


def test_node_constructor_by_keyword_bad_target():
    # PyTorch's test_wrong_target_type.
    for lib in LIBS:
        with pytest.raises(ValueError):
            lib.Node(graph=lib.Graph(), name='foo', op='call_function', target='foo', args=(), kwargs={})


# --------------------------------------------------------------- star import

def test_star_import_binds_torch_fx_public_api():
    """`from fxcpp import *` works (it raised AttributeError: __all__ named PythonCode, which the
    package does not bind) and binds every public, non-module name `from torch.fx import *` binds,
    and no other: fxcpp's __all__ is torch.fx's (on 1.13, which has none, the names its star
    import binds); its own names (the two bridges) are imported by name."""
    import types
    ours, ref = {}, {}
    exec('from fxcpp import *', ours)
    exec('from torch.fx import *', ref)
    want = {k for k, v in ref.items() if not k.startswith('_') and not isinstance(v, types.ModuleType)}
    assert want <= ours.keys(), sorted(want - ours.keys())
    for name in want:
        assert ours[name] is getattr(fxcpp, name)
    assert not {'from_torch_fx', 'to_torch_fx'} & ours.keys()
    from fxcpp import from_torch_fx, to_torch_fx  # noqa: F401 -- still importable by name
    ref_all = getattr(torch.fx, '__all__', None)
    if ref_all is not None:
        assert fxcpp.__all__ == list(ref_all)
    else:
        assert sorted(fxcpp.__all__) == sorted(want)
    extra = {k for k in ours if not k.startswith('_')} - {k for k in ref if not k.startswith('_')}
    assert not extra, sorted(extra)


def test_has_side_effect_keeps_calls_through_dce():
    """has_side_effect (torch.fx 2.x) marks a function impure for dead code elimination, on both
    libraries where torch.fx has it."""
    def noisy(x):
        return x

    def run(lib):
        lib.has_side_effect(noisy)
        g = lib.Graph()
        x = g.placeholder('x')
        g.call_function(noisy, (x,))
        g.output(x)
        g.eliminate_dead_code()
        return [n.op for n in g.nodes]
    libs = [fxcpp] + ([torch.fx] if hasattr(torch.fx, 'has_side_effect') else [])
    results = [run(lib) for lib in libs]
    assert results[0] == ['placeholder', 'call_function', 'output']
    assert all(r == results[0] for r in results)


# fxcpp modules whose __all__ still differs from torch.fx's (module -> why); strict: a module
# that comes to match, or a new difference, fails the test below.
_ALL_DIFFERS = {
    'fxcpp.passes.split_module': "torch.fx's Partition (and 2.x's split_module_simple) are not mirrored yet",
    'fxcpp.passes.split_utils': "torch.fx 2.x's move_non_tensor_nodes_on_boundary is not mirrored yet",
    'fxcpp.experimental.proxy_tensor': "fxcpp lists the names it wraps, not all of torch.fx's proxy_tensor",
}
_ALL_DIFFERS_113 = {
    'fxcpp.passes.split_module': _ALL_DIFFERS['fxcpp.passes.split_module'],
    'fxcpp.experimental.proxy_tensor': _ALL_DIFFERS['fxcpp.experimental.proxy_tensor'],
    'fxcpp.proxy': "lists torch.fx 2.x's MetaProxy, Scope and ScopeContextManager on 1.13 too",
}


def test_modules_list_torch_fx_names_in_all():
    """Every fxcpp module mirroring a torch.fx module whose __all__ torch.fx defines has the
    same __all__ (as a set), so `from fxcpp.x import *` binds what torch.fx's does; where
    torch.fx defines none, fxcpp's lists no name torch.fx's module lacks."""
    import importlib
    import pkgutil
    import warnings
    differ = {}
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        for info in pkgutil.walk_packages(torch.fx.__path__, 'torch.fx.'):
            try:
                ref = importlib.import_module(info.name)
                ours = importlib.import_module('fxcpp' + info.name[len('torch.fx'):])
            except Exception:  # noqa: BLE001 -- a module one side does not have (or cannot import here)
                continue
            want, got = getattr(ref, '__all__', None), getattr(ours, '__all__', None)
            if want is not None and set(got or ()) != set(want):
                differ[ours.__name__] = sorted(set(got or ()) ^ set(want))
            elif want is None and got is not None and not set(got) <= set(vars(ref)):
                differ[ours.__name__] = sorted(set(got) - set(vars(ref)))
    known = set(_ALL_DIFFERS if TORCH2 else _ALL_DIFFERS_113)
    assert set(differ) == known, {m: differ.get(m, 'now matches: take it off _ALL_DIFFERS') for m in
                                  set(differ) ^ known}
