"""fxcpp <-> torch.fx interop: from_torch_fx / to_torch_fx, GraphModule built
from the other library's graph, torch.fx passes on fxcpp objects, and fxcpp
tracing seen as FX tracing by torch.fx-aware code.

torch.fx (1.13.1) is the oracle: a converted object must print, generate code
and compute exactly like its source, node by node."""
import copy
import operator
import pickle
from typing import List, NamedTuple, Tuple

import pytest
import torch
import torch.fx as tfx
import torch.fx.graph as tfx_graph
import torch.fx.immutable_collections as tic
from torch.fx.passes.shape_prop import ShapeProp as TShapeProp
from torch.fx.passes.split_module import split_module
from torch.fx.tensor_type import TensorType

import fxcpp as fx
from fxcpp import _torch_compat
import fxcpp.graph as fx_graph
import fxcpp.immutable_collections as fic
from torch2 import FX_NODE_NOT_A_BASE, TORCH2, xfail2
from fxcpp.annotate import annotate  # noqa: F401  (RewritingTracer turns `x: T = v` into a call)
from fxcpp.passes.shape_prop import ShapeProp as FShapeProp

LIBS = {'torch': tfx, 'fxcpp': fx}
IMMUTABLE = {'torch': (tic.immutable_list, tic.immutable_dict), 'fxcpp': (fic.immutable_list, fic.immutable_dict)}


class Pair(NamedTuple):
    a: torch.Tensor
    b: int


def combine(d, pair, seq):
    return d['a'] * pair.a + seq[0] + seq[1][1]['s'] * pair.b


class Root(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.sub = torch.nn.Module()
        self.sub.lin = torch.nn.Linear(4, 4)
        self.unused = torch.nn.ReLU()  # referenced by no node: must still be kept
        self.p = torch.nn.Parameter(torch.randn(4))
        self.register_buffer('buf', torch.randn(4))
        self.register_buffer('nonpersistent', torch.randn(2), persistent=False)
        self._tensor_constant0 = torch.randn(2, 4)


def build(lib):
    """A graph with all six opcodes, kwargs, nested containers (tuple, list,
    dict, slice, named tuple), type annotations and non-canonical names."""
    g = lib.Graph()
    x = g.placeholder('x', type_expr=torch.Tensor)
    k = g.placeholder('k', type_expr=int, default_value=2)
    p = g.get_attr('p')
    c = g.get_attr('_tensor_constant0')
    lin = g.call_module('sub.lin', (x,))
    add = g.call_function(operator.add, (lin, p), type_expr=torch.Tensor)
    cat = g.call_function(torch.cat, ([add, c, x],), {'dim': -1})
    sl = g.call_function(operator.getitem, (cat, (slice(None, None, k), slice(0, 4))))
    view = g.call_method('view', (sl, -1), type_expr=torch.Tensor)
    size = g.call_method('size', (x,), {'dim': 0})
    comb = g.call_function(combine, ({'a': view, 'unused': (1, 2.5, None)},
                                     Pair(add, k),
                                     [x, (size, {'s': view})]))
    g.output((comb, [size, {'k': k}]), type_expr=Tuple[torch.Tensor, List[int]])
    # names that create_name would not hand out: a builtin, a keyword-like
    # non-canonical suffix, a name with a leading-zero counter
    add.name = 'input'
    cat.name = 'cat_01'
    comb.name = 'x_1'
    return g


def norm(a, node_names=True):
    """Library-independent structure of an argument (containers tagged)."""
    t = type(a)
    if isinstance(a, (tfx.Node, fx.Node)):
        return ('Node', a.name)
    if t in (tic.immutable_list, fic.immutable_list):
        return ('ilist', [norm(x) for x in a])
    if t in (tic.immutable_dict, fic.immutable_dict):
        return ('idict', [(k, norm(v)) for k, v in a.items()])
    if isinstance(a, tuple):
        return (t.__name__, [norm(x) for x in a])
    if isinstance(a, list):
        return ('list', [norm(x) for x in a])
    if isinstance(a, dict):
        return ('dict', [(k, norm(v)) for k, v in a.items()])
    if isinstance(a, slice):
        return ('slice', [norm(a.start), norm(a.stop), norm(a.step)])
    return ('leaf', a)


def foreign_containers(a, lib):
    """Immutable containers of the library other than ``lib`` inside ``a``."""
    other = IMMUTABLE['fxcpp' if lib == 'torch' else 'torch']
    if isinstance(a, other):
        return True
    if isinstance(a, (tuple, list)):
        return any(foreign_containers(x, lib) for x in a)
    if isinstance(a, dict):
        return any(foreign_containers(x, lib) for x in a.values())
    return False


def lib_of(obj):
    return 'fxcpp' if isinstance(obj, (fx.Graph, fx.GraphModule, fx.Node)) else 'torch'


def assert_same_graph(src, dst, dst_lib, meta_shared=True):
    assert lib_of(dst) == dst_lib
    assert str(dst) == str(src)
    assert dst.python_code('self').src == src.python_code('self').src
    s_nodes, d_nodes = list(src.nodes), list(dst.nodes)
    assert len(s_nodes) == len(d_nodes)
    for s, d in zip(s_nodes, d_nodes):
        assert lib_of(d) == dst_lib and d.graph is dst
        assert (d.name, d.op, d.target, d.type) == (s.name, s.op, s.target, s.type)
        assert norm(d.args) == norm(s.args) and norm(d.kwargs) == norm(s.kwargs)
        assert not foreign_containers(d.args, dst_lib) and not foreign_containers(d.kwargs, dst_lib)
        assert [u.name for u in d.users] == [u.name for u in s.users]
        if meta_shared:
            assert d.meta is s.meta
    d.graph.lint()


def make_gm(lib):
    return lib.GraphModule(Root(), build(lib))


def inputs():
    torch.manual_seed(0)
    return torch.randn(2, 4), 2


@pytest.mark.parametrize('src_lib', ['torch', 'fxcpp'])
def test_crafted_graph(src_lib):
    dst_lib = 'fxcpp' if src_lib == 'torch' else 'torch'
    conv = fx.from_torch_fx if dst_lib == 'fxcpp' else fx.to_torch_fx
    back = fx.to_torch_fx if dst_lib == 'fxcpp' else fx.from_torch_fx
    g = build(LIBS[src_lib])
    assert [n.name for n in g.nodes][6] == 'cat_01'  # the source library kept the odd names
    h = conv(g)
    assert_same_graph(g, h, dst_lib)
    assert_same_graph(g, back(h), src_lib)
    assert conv(h) is h  # already of the target library


@pytest.mark.parametrize('src_lib', ['torch', 'fxcpp'])
def test_crafted_graph_module(src_lib):
    dst_lib = 'fxcpp' if src_lib == 'torch' else 'torch'
    conv = fx.from_torch_fx if dst_lib == 'fxcpp' else fx.to_torch_fx
    back = fx.to_torch_fx if dst_lib == 'fxcpp' else fx.from_torch_fx
    gm = make_gm(LIBS[src_lib])
    gm.meta['note'] = 'kept'
    gm.user_attr = [1, 2]
    gm.unused = torch.nn.ReLU()
    gm.eval()
    out = gm(*inputs())
    for h, lib in ((conv(gm), dst_lib), (back(conv(gm)), src_lib)):
        assert_same_graph(gm.graph, h.graph, lib)
        assert h.code == gm.code
        assert type(h).__name__ == type(gm).__name__
        assert h.training is False
        assert h.meta is gm.meta and h.user_attr is gm.user_attr
        # submodules, parameters, buffers and tensor constants: the same objects
        for table in ('_modules', '_parameters', '_buffers'):
            assert getattr(h, table) == getattr(gm, table)
            assert all(getattr(h, table)[k] is v for k, v in getattr(gm, table).items())
        assert h._non_persistent_buffers_set == gm._non_persistent_buffers_set
        assert h.state_dict().keys() == gm.state_dict().keys()
        res = h(*inputs())
        assert torch.equal(res[0], out[0]) and res[1] == out[1]
    assert conv(gm).graph.owning_module is not None


def test_same_graph_as_other_library_built():
    # built natively by each library, the two graphs agree: the oracle for the
    # conversions above is sound
    assert str(build(tfx)) == str(build(fx))
    assert make_gm(tfx).code == make_gm(fx).code


@pytest.mark.parametrize('src_lib', ['torch', 'fxcpp'])
def test_names_are_exact(src_lib):
    # names create_name never hands out (a builtin, a keyword, illegal
    # characters, a leading digit, a zero-padded counter) survive both ways
    odd = ['input', 'for', 'a.b', '1st', 'x_01']
    g = LIBS[src_lib].Graph()
    x = g.placeholder('x')
    prev = x
    for name in odd:
        prev = g.call_function(torch.relu, (prev,))
        prev.name = name
    g.output(prev)
    names = [n.name for n in g.nodes]
    assert names == ['x'] + odd + ['output']
    h = (fx.from_torch_fx if src_lib == 'torch' else fx.to_torch_fx)(g)
    assert [n.name for n in h.nodes] == names
    assert str(h) == str(g) and h.python_code('self').src == g.python_code('self').src
    # The converted graph's namespace holds the node names (as after
    # torch.fx's deepcopy): 'relu' .. 'relu_4', taken in g by the nodes before
    # their renaming, are free in h; the odd names are taken.
    with h.inserting_before(list(h.nodes)[-1]):
        new = h.call_function(torch.relu, (list(h.nodes)[0],))
    assert new.name == 'relu'
    assert len({n.name for n in h.nodes}) == len(h.nodes)


def test_immutable_containers_are_mapped():
    g = tfx.Graph()
    x = g.placeholder('x')
    n = g.call_function(torch.cat, ([x, x],), {'dim': 0})
    n.args = (tic.immutable_list([x, x]),)
    n.kwargs = tic.immutable_dict({'dim': 0})
    g.output(n)
    f = fx.from_torch_fx(g)
    fn = list(f.nodes)[1]
    assert type(fn.args[0]) is fic.immutable_list and type(fn.kwargs) in (dict, fic.immutable_dict)
    t = fx.to_torch_fx(f)
    assert type(list(t.nodes)[1].args[0]) is tic.immutable_list


@pytest.mark.parametrize('src_lib', ['torch', 'fxcpp'])
def test_shape_prop_meta_by_reference(src_lib):
    lib = LIBS[src_lib]
    SP = TShapeProp if src_lib == 'torch' else FShapeProp
    m = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU())
    gm = lib.symbolic_trace(m)
    SP(gm).propagate(torch.randn(2, 3))
    h = (fx.from_torch_fx if src_lib == 'torch' else fx.to_torch_fx)(gm)
    for s, d in zip(gm.graph.nodes, h.graph.nodes):
        assert d.meta is s.meta
        assert d.meta['tensor_meta'] == s.meta['tensor_meta']
    # a pass writing meta on one side is seen on the other
    next(iter(h.graph.nodes)).meta['seen'] = True
    assert next(iter(gm.graph.nodes)).meta['seen'] is True


def _resnet18():
    torchvision = pytest.importorskip('torchvision')
    return torchvision.models.resnet18().eval()


@pytest.mark.parametrize('src_lib', ['torch', 'fxcpp'])
def test_resnet18(src_lib):
    m = _resnet18()
    gm = LIBS[src_lib].symbolic_trace(m)
    conv = fx.from_torch_fx if src_lib == 'torch' else fx.to_torch_fx
    back = fx.to_torch_fx if src_lib == 'torch' else fx.from_torch_fx
    h = conv(gm)
    r = back(h)
    x = torch.randn(1, 3, 64, 64)
    expected = gm(x)
    for out in (h, r):
        assert_same_graph(gm.graph, out.graph, lib_of(out))
        assert out.code == gm.code
        assert torch.equal(out(x), expected)
    assert h.code == tfx.symbolic_trace(m).code


def _pytree_fn(d):
    return d['a'] + d['b'] * 2


@pytest.mark.parametrize('src_lib', ['torch', 'fxcpp'])
def test_pytree_codegen(src_lib):
    lib = LIBS[src_lib]
    gm = lib.symbolic_trace(_pytree_fn, concrete_args={'d': {'a': lib.PH, 'b': lib.PH}})
    src_cg = (tfx_graph if src_lib == 'torch' else fx_graph)._PyTreeCodeGen
    assert type(gm.graph._codegen) is src_cg
    h = (fx.from_torch_fx if src_lib == 'torch' else fx.to_torch_fx)(gm)
    dst_cg = (fx_graph if src_lib == 'torch' else tfx_graph)._PyTreeCodeGen
    assert type(h.graph._codegen) is dst_cg
    assert h.code == gm.code
    d = {'a': torch.randn(3), 'b': torch.randn(3)}
    assert torch.equal(h(d), gm(d))


@pytest.mark.parametrize('src_lib', ['torch', 'fxcpp'])
def test_on_generate_code_transform_kept(src_lib):
    lib = LIBS[src_lib]
    gm = lib.symbolic_trace(torch.nn.ReLU())

    def insert_comment(body):
        return ['# transformed\n'] + body
    gm.graph.on_generate_code(lambda _: insert_comment)
    gm.recompile()
    assert '# transformed' in gm.code
    h = (fx.from_torch_fx if src_lib == 'torch' else fx.to_torch_fx)(gm)
    assert h.code == gm.code


def test_custom_codegen_is_refused():
    class MyCodeGen(tfx_graph.CodeGen):
        pass
    g = tfx.Graph()
    g.output(g.placeholder('x'))
    g.set_codegen(MyCodeGen())
    with pytest.raises(TypeError, match='custom codegen'):
        fx.from_torch_fx(g)


def test_wrong_type():
    with pytest.raises(TypeError, match='Graph or GraphModule'):
        fx.to_torch_fx(torch.nn.ReLU())
    with pytest.raises(TypeError, match='Graph or GraphModule'):
        fx.from_torch_fx(object())


def test_tracer_cls_mapped_and_pickle():
    gm = fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU()))
    t = fx.to_torch_fx(gm)
    assert t.graph._tracer_cls is tfx.Tracer
    assert fx.from_torch_fx(t).graph._tracer_cls is fx.Tracer
    # the torch.fx GraphModule pickles and re-traces with torch.fx's tracer
    t2 = pickle.loads(pickle.dumps(t))
    x = torch.randn(3, 2)
    assert t2.code == gm.code and torch.equal(t2(x), gm(x))


def test_graph_module_from_torch_fx_graph():
    m = _resnet18()
    tgm = tfx.symbolic_trace(m)
    gm = fx.GraphModule(m, tgm.graph)
    assert isinstance(gm.graph, fx.Graph)
    assert gm.code == tgm.code
    x = torch.randn(1, 3, 64, 64)
    assert torch.equal(gm(x), tgm(x))
    # the graph setter converts too
    g2 = tfx.symbolic_trace(torch.nn.ReLU()).graph
    small = fx.GraphModule(torch.nn.Module(), fx.Graph())
    small.graph = g2
    assert isinstance(small.graph, fx.Graph) and small.code == tfx.GraphModule(torch.nn.Module(), g2).code


def test_torch_graph_module_from_fxcpp_graph():
    # torch.fx.GraphModule compiles the fxcpp graph through its 2.x API on 2.x (python_code's
    # record_func, PythonCode._lineno_map/_prologue_start); fxcpp's nodes are torch.fx Nodes
    # by isinstance on 1.13 only (tests/python/torch2.py, FX_NODE_NOT_A_BASE).
    m = _resnet18()
    fgm = fx.symbolic_trace(m)
    assert isinstance(fgm.graph, tfx.Graph)
    assert isinstance(next(iter(fgm.graph.nodes)), tfx.Node) == (not _torch_compat.FX_NODE_HAS_C_BASE)
    t = tfx.GraphModule(m, fgm.graph)
    x = torch.randn(1, 3, 64, 64)
    assert t.code == fgm.code and torch.equal(t(x), fgm(x))


class Split(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 4)
        self.register_buffer('c', torch.randn(4))

    def forward(self, x, y):
        z = torch.relu(self.a(x)) + y
        return self.b(z) * self.c, z.sum()


@FX_NODE_NOT_A_BASE  # torch.fx 2.14 split_module drops the fxcpp nodes it meets in args (not torch.fx Nodes)
def test_split_module_on_fxcpp():
    m = Split()
    part = {'x': 0, 'y': 0, 'a': 0, 'relu': 0, 'add': 1, 'b': 1, 'c': 1, 'mul': 1, 'sum_1': 2}
    expected = split_module(tfx.symbolic_trace(m), m, lambda n: part[n.name])
    got = split_module(fx.symbolic_trace(m), m, lambda n: part[n.name])
    assert got.code == expected.code
    for name in ('submod_0', 'submod_1', 'submod_2'):
        assert getattr(got, name).code == getattr(expected, name).code
    x, y = torch.randn(2, 4), torch.randn(2, 4)
    for a, b in zip(got(x, y), expected(x, y)):
        assert torch.equal(a, b)
    f = fx.from_torch_fx(got)
    assert f.code == expected.code and torch.equal(f(x, y)[0], expected(x, y)[0])


# ---------------------------------------------------------------------------
# fxcpp tracing seen as FX tracing
# ---------------------------------------------------------------------------

def test_tracing_identity():
    from torch.fx.annotate import annotate as torch_annotate
    seen = {}

    class M(torch.nn.Module):
        def forward(self, x, n):
            seen['proxy'] = isinstance(x, tfx.Proxy)
            seen['tracing'] = tfx._symbolic_trace.is_fx_tracing()
            n = torch_annotate(n, int)
            return x * n

    ref = tfx.symbolic_trace(M())
    seen.clear()
    gm = fx.symbolic_trace(M())
    assert seen == {'proxy': True, 'tracing': True}
    assert not tfx._symbolic_trace.is_fx_tracing()
    assert [n.type for n in gm.graph.nodes] == [n.type for n in ref.graph.nodes]
    assert list(gm.graph.nodes)[1].type is int
    assert gm.code == ref.code
    # twice is an error, as in torch.fx
    with pytest.raises(RuntimeError, match='already had a type'):
        fx.symbolic_trace(type('N', (torch.nn.Module,), {
            'forward': lambda self, x: torch_annotate(torch_annotate(x, int), int)})())


def test_is_fx_tracing_reset_on_error():
    class Bad(torch.nn.Module):
        def forward(self, x):
            raise ValueError('boom')
    with pytest.raises(ValueError):
        fx.symbolic_trace(Bad())
    assert not tfx._symbolic_trace.is_fx_tracing()
    assert not fx._symbolic_trace.is_fx_tracing()


def test_deepcopy_of_converted():
    gm = fx.from_torch_fx(make_gm(tfx))
    c = copy.deepcopy(gm)
    assert c.code == gm.code
    out, ref = c(*inputs()), gm(*inputs())
    assert torch.equal(out[0], ref[0])


def test_fxcpp_annotate_under_torch_fx_tracing():
    from fxcpp.annotate import annotate

    class M(torch.nn.Module):
        def forward(self, x):
            return annotate(x + 1, torch.Tensor) * 2

    t = tfx.symbolic_trace(M())
    f = fx.symbolic_trace(M())
    assert [n.type for n in t.graph.nodes] == [n.type for n in f.graph.nodes]
    assert list(t.graph.nodes)[1].type is torch.Tensor
    assert t.code == f.code


class _Unhashable:
    __hash__ = None  # type: ignore[assignment]


@pytest.mark.parametrize('make_type', [lambda: __import__('torch.fx.tensor_type').fx.tensor_type.Dyn,
                                       lambda: __import__('torch.fx.tensor_type').fx.tensor_type.TensorType(
                                           (2, __import__('torch.fx.tensor_type').fx.tensor_type.Dyn)),
                                       _Unhashable],
                         ids=['Dyn', 'TensorType_Dyn', 'unhashable'])
def test_unhashable_annotation_like_torch_fx(make_type):
    # torch objects (the gradual type checker's Dyn, annotated through
    # torch.fx.annotate) are named by qualified name without being hashed;
    # other unhashable annotations raise TypeError in both libraries
    results = []
    for lib in (tfx, fx):
        g = lib.Graph()
        g.output(g.placeholder('x', type_expr=make_type()))
        try:
            results.append(g.python_code('self').src)
        except TypeError as e:
            results.append(('TypeError', str(e)))
    assert results[0] == results[1]


# ---------------------------------------------------------------------------
# fxcpp.experimental.rewriter, fxcpp.experimental.const_fold,
# fxcpp.passes.dialect.common.cse_pass: torch.fx's passes handing back fxcpp
# ---------------------------------------------------------------------------

def _interop_leaf(a, b):
    return a * 10 + b


fx.wrap('_interop_leaf')


class _Asserting(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        assert x.dim() == 2, "rank"
        y: torch.Tensor = self.lin(x)
        return _interop_leaf(y, 1)


def test_rewriting_tracer_is_fxcpp_and_honours_fxcpp_wrap():
    from torch.fx.experimental.rewriter import RewritingTracer as TRewritingTracer
    from fxcpp.experimental.rewriter import RewritingTracer

    m = _Asserting()
    tracer = RewritingTracer()
    graph = tracer.trace(m)
    assert type(graph) is fx.Graph and tracer.root is not m
    gm = fx.GraphModule(tracer.root, graph)
    assert gm.graph is graph
    # the leaf registered with fxcpp.wrap stays a call; the assert became torch._assert
    targets = [n.target for n in graph.nodes if n.op == 'call_function']
    assert _interop_leaf in targets and torch._assert in targets
    assert [n.type for n in graph.nodes if n.op == 'call_module'] == [torch.Tensor]
    x = torch.randn(2, 3)
    assert torch.equal(gm(x), m(x))
    with pytest.raises(AssertionError, match='rank'):
        gm(torch.randn(3))
    # torch.fx's RewritingTracer does not know fxcpp.wrap: it inlines the leaf
    tgraph = TRewritingTracer().trace(m)
    assert _interop_leaf not in [n.target for n in tgraph.nodes]
    assert _interop_leaf is globals()['_interop_leaf']  # the global was restored


@FX_NODE_NOT_A_BASE
def test_gradual_type_checker_on_rewriting_tracer_graph():
    from torch.fx.experimental.graph_gradual_typechecker import GraphTypeChecker
    from fxcpp.experimental.rewriter import RewritingTracer

    class M(torch.nn.Module):
        def forward(self, x: TensorType((1, 2, 3, 5))):
            return torch.flatten(x, 1, 2)

    tracer = RewritingTracer()
    graph = tracer.trace(M())
    gm = fx.GraphModule(tracer.root, graph, 'gm')
    GraphTypeChecker({}, gm).type_check()
    # the checker annotates the nodes of the graph the caller holds
    assert [n.type for n in graph.nodes] == [TensorType((1, 2, 3, 5)), TensorType((1, 6, 5)),
                                             TensorType((1, 6, 5))]


class _Foldable(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(2, 3))
        self.v = torch.nn.Parameter(torch.randn(2, 3))

    def forward(self, x):
        a = self.w + self.w
        b = torch.relu(self.v) * 2
        return x - a + b


def test_const_fold_keeps_meta_and_returns_fxcpp():
    from torch.fx.experimental import const_fold as tconst_fold
    from fxcpp.experimental import const_fold

    m = _Foldable()
    gm = fx.symbolic_trace(m)
    for i, n in enumerate(gm.graph.nodes):
        n.meta['idx'] = i
    x = torch.randn(2, 3)
    FShapeProp(gm).propagate(x)
    folded = const_fold.split_const_subgraphs(gm)
    assert isinstance(folded, const_fold.FoldedGraphModule) and isinstance(folded, fx.GraphModule)
    assert isinstance(folded.graph, fx.Graph)
    assert isinstance(folded.const_subgraph_module, fx.GraphModule)
    expected = tconst_fold.split_const_subgraphs(tfx.symbolic_trace(m))
    assert folded.code == expected.code
    assert folded.const_subgraph_module.code == expected.const_subgraph_module.code
    # node meta survives, as with torch.fx (torch.fx's function re-traces an fxcpp module)
    by_name = {n.name: n.meta for n in gm.graph.nodes}
    for n in folded.graph.nodes:
        if n.name in by_name and n.op != 'output':
            assert n.meta['idx'] == by_name[n.name]['idx']
    assert not folded.has_folding_been_run
    assert torch.allclose(folded(x), m(x))
    assert folded.has_folding_been_run
    attr = getattr(folded, folded.fx_const_folded_attrs_name)
    assert isinstance(attr, torch.nn.ParameterList) and len(attr) == 2
    # the same meta keys as torch.fx's fold of a torch.fx trace
    tgm = tfx.symbolic_trace(m)
    TShapeProp(tgm).propagate(x)
    tfolded = tconst_fold.split_const_subgraphs(tgm)
    assert ([sorted(set(n.meta) - {'idx'}) for n in folded.graph.nodes]
            == [sorted(n.meta) for n in tfolded.graph.nodes])
    assert any('tensor_meta' in n.meta for n in folded.graph.nodes if n.op == 'call_function')


def test_const_fold_skip_fn_sees_callers_nodes_and_plain_modules():
    from fxcpp.experimental import const_fold

    m = _Foldable()
    gm = fx.symbolic_trace(m)
    ours = set(gm.graph.nodes)
    seen = []

    def skip(n):
        seen.append(n)
        return n.target is torch.relu

    folded = const_fold.split_const_subgraphs(gm, skip)
    assert seen and all(n in ours for n in seen)
    assert torch.relu in [n.target for n in folded.graph.nodes]
    x = torch.randn(2, 3)
    assert torch.allclose(folded(x), m(x))
    # an nn.Module is traced with fxcpp; nothing to fold gives a FoldedGraphModule without a
    # constant subgraph
    plain = const_fold.split_const_subgraphs(m)
    assert isinstance(plain, const_fold.FoldedGraphModule) and torch.allclose(plain(x), m(x))
    nothing = const_fold.split_const_subgraphs(torch.nn.ReLU())
    assert nothing.const_subgraph_module is None and torch.equal(nothing(x), torch.relu(x))


@pytest.mark.parametrize('src_lib', ['torch', 'fxcpp'])
def test_cse_pass_returns_fxcpp(src_lib):
    from torch.fx.passes.dialect.common.cse_pass import CSEPass as TCSEPass
    from fxcpp.passes.dialect.common.cse_pass import CSEPass

    def f(x):
        a = x.sin() + x.sin()
        return a * x.sin()

    lib = LIBS[src_lib]
    gm = lib.symbolic_trace(f)
    for n in gm.graph.nodes:
        n.meta['tag'] = n.name
    res = CSEPass()(gm)
    assert res.modified and isinstance(res.graph_module, fx.GraphModule)
    expected = TCSEPass()(tfx.symbolic_trace(f)).graph_module
    assert res.graph_module.code == expected.code
    assert [n.name for n in res.graph_module.graph.nodes] == ['x', 'sin', 'add', 'mul', 'output']
    assert all(n.meta['tag'] == n.name for n in res.graph_module.graph.nodes)  # meta carried
    x = torch.randn(4)
    assert torch.equal(res.graph_module(x), f(x))
    assert isinstance(CSEPass(), type(TCSEPass()))  # still a torch.fx PassBase


@pytest.mark.parametrize('suffix', ['.experimental.rewriter', '.experimental.const_fold',
                                    '.passes.dialect.common.cse_pass'])
def test_counterpart_modules_have_torch_fx_names(suffix):
    import importlib
    ref = importlib.import_module('torch.fx' + suffix)
    ours = importlib.import_module('fxcpp' + suffix)
    own = [n for n, v in vars(ref).items()
           if not n.startswith('_') and getattr(v, '__module__', None) == ref.__name__]
    assert own and not [n for n in own if not hasattr(ours, n)]


# ---------------------------------------------------------------------------
# make_fx into fxcpp graphs; lazy modules stay lazy across the conversion
# ---------------------------------------------------------------------------

class _MakeFx(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 4)

    def forward(self, x):
        return torch.relu(self.lin(x)).sum(1)


@pytest.mark.parametrize('mode', ['real', 'symbolic'])
def test_make_fx_gives_fxcpp_graph_modules(mode):
    from torch.fx.experimental.proxy_tensor import make_fx as torch_make_fx
    from fxcpp.experimental.proxy_tensor import make_fx
    if mode == 'symbolic' and not TORCH2:
        pytest.skip("torch 1.13's make_fx takes no _allow_non_fake_inputs")
    m = _MakeFx()
    kw = {} if mode == 'real' else {'tracing_mode': mode, '_allow_non_fake_inputs': True}
    x = torch.randn(2, 3)
    ours, theirs = make_fx(m, **kw)(x), torch_make_fx(m, **kw)(x)
    assert isinstance(ours, fx.GraphModule) and isinstance(ours.graph, fx.Graph)
    assert ours.code == theirs.code and str(ours.graph) == str(theirs.graph)
    assert [n.name for n in ours.graph.nodes] == [n.name for n in theirs.graph.nodes]
    assert torch.equal(ours(x), theirs(x))
    if mode == 'symbolic':  # the FakeTensors and SymInts are make_fx's own objects
        vals = [n.meta.get('val') for n in ours.graph.nodes]
        assert all(v is not None for v in vals[:-1])
        assert isinstance(vals[0].shape[0], torch.SymInt)
    # f may be an fxcpp GraphModule
    again = make_fx(fx.symbolic_trace(m))(x)
    assert isinstance(again, fx.GraphModule) and torch.equal(again(x), m(x))


@pytest.mark.skipif(not TORCH2, reason='lazy graph modules are torch.fx 2.x API')
def test_lazy_modules_stay_lazy_across_conversion():
    from torch.fx._lazy_graph_module import _LazyGraphModule as TLazy
    from torch.fx.experimental.proxy_tensor import make_fx as torch_make_fx
    from fxcpp._lazy_graph_module import _LazyGraphModule, _use_lazy_graph_module
    from fxcpp.experimental.proxy_tensor import make_fx

    def f(x):
        return x.sin()
    x = torch.randn(2, 3)
    with _use_lazy_graph_module(True):
        gm = fx.symbolic_trace(f)
        assert isinstance(gm, _LazyGraphModule) and gm._needs_recompile()
        ours, theirs = make_fx(gm)(x), torch_make_fx(gm)(x)
        # as torch.fx's: lazy, code still to be generated; tracing ran gm's forward
        assert isinstance(ours, _LazyGraphModule) and isinstance(theirs, TLazy)
        assert ours._needs_recompile() and theirs._needs_recompile()
        assert not gm._needs_recompile()
        back = fx.to_torch_fx(ours)
        assert isinstance(back, TLazy) and back._needs_recompile()
    assert ours.code == theirs.code == back.code
    # out of the block a plain module converts to a plain module
    plain = fx.from_torch_fx(tfx.symbolic_trace(f))
    assert not isinstance(plain, _LazyGraphModule)
