"""fxcpp's own const_fold and optimization (fuse, remove_dropout, extract_subgraph) against
torch.fx 1.13's on the same models: same code / str(graph), same outputs, node.meta kept."""
import operator

import pytest
import torch
import torch.fx as tfx
from torch.fx.experimental import const_fold as tconst_fold
from torch.fx.experimental import optimization as toptimization
from torch.fx.passes.shape_prop import ShapeProp as TShapeProp

import fxcpp as fx
from fxcpp.experimental import const_fold, optimization
from fxcpp.passes.shape_prop import ShapeProp as FShapeProp
from torch2 import TORCH2



# ---------------------------------------------------------------------------
# const_fold
# ---------------------------------------------------------------------------

class _Sub(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.p = torch.nn.Parameter(torch.randn(3))
        self.lin = torch.nn.Linear(3, 3)


class Multi(torch.nn.Module):  # several folded values, several outputs, a nested attr
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3))
        self.sub = _Sub()

    def forward(self, x):
        a = self.w * 2
        b = self.sub.p + self.w
        return x + a, x * 3, b, self.sub.lin(x) + b


class OneConst(torch.nn.Module):  # one folded value, a const module call, a dead node
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3, 3))
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        c = self.lin(self.w).relu()
        unused = x - 1  # noqa: F841  (dead: removed by the fold)
        return x @ c


class Nothing(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3))

    def forward(self, x):
        return x + self.w


class Chain(torch.nn.Module):  # constants interleaved with live ops, an impure op
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3))
        self.v = torch.nn.Parameter(torch.randn(3))

    def forward(self, x):
        y = x.relu()
        a = self.w.sin()
        z = y + a
        b = a * self.v
        torch._assert(True, "ok")
        c = b.cos() + self.v
        return z * c + y


MODELS = [Multi, OneConst, Nothing, Chain]


def _both(model_cls, skip=None):
    torch.manual_seed(0)
    m = model_cls()
    gm = fx.symbolic_trace(m)
    tgm = tfx.symbolic_trace(m)
    ours = const_fold.split_const_subgraphs(gm, skip)
    theirs = tconst_fold.split_const_subgraphs(tgm, skip)
    return m, ours, theirs


@pytest.mark.parametrize('model_cls', MODELS, ids=[m.__name__ for m in MODELS])
def test_const_fold_same_as_torch_fx(model_cls):
    m, ours, theirs = _both(model_cls)
    assert type(ours) is not None and isinstance(ours, const_fold.FoldedGraphModule)
    assert isinstance(ours.graph, fx.Graph)
    assert ours.code == theirs.code
    assert str(ours.graph) == str(theirs.graph)
    assert ours.fx_const_folded_attrs_name == theirs.fx_const_folded_attrs_name
    assert ours.training == theirs.training
    if theirs.const_subgraph_module is None:
        assert ours.const_subgraph_module is None
    else:
        assert isinstance(ours.const_subgraph_module, fx.GraphModule)
        assert ours.const_subgraph_module.code == theirs.const_subgraph_module.code
    x = torch.randn(3, 3)
    expected = m(x)
    got, ref = ours(x), theirs(x)
    for a, b, c in zip(torch.utils._pytree.tree_flatten(got)[0], torch.utils._pytree.tree_flatten(ref)[0],
                       torch.utils._pytree.tree_flatten(expected)[0]):
        assert torch.allclose(a, b) and torch.allclose(a, c)
    assert ours.has_folding_been_run == theirs.has_folding_been_run
    assert sorted(dict(ours.named_parameters())) == sorted(dict(theirs.named_parameters()))


def test_const_fold_skip_fn_calls_match_torch_fx():
    seen = {'fxcpp': [], 'torch': []}

    def make(lib):
        def skip(n):
            seen[lib].append((n.name, n.op))
            return n.target == 'cos'
        return skip

    torch.manual_seed(0)
    m = Chain()
    ours = const_fold.split_const_subgraphs(fx.symbolic_trace(m), make('fxcpp'))
    theirs = tconst_fold.split_const_subgraphs(tfx.symbolic_trace(m), make('torch'))
    assert seen['fxcpp'] == seen['torch'] and seen['fxcpp']
    assert ours.code == theirs.code
    x = torch.randn(3)
    assert torch.allclose(ours(x), theirs(x))


@pytest.mark.parametrize('model_cls', [
    Multi,
    OneConst,
    Chain], ids=['Multi', 'OneConst', 'Chain'])
def test_const_fold_meta_as_torch_fx(model_cls):
    torch.manual_seed(0)
    m = model_cls()
    x = torch.randn(3, 3)
    gm, tgm = fx.symbolic_trace(m), tfx.symbolic_trace(m)
    FShapeProp(gm).propagate(x)
    TShapeProp(tgm).propagate(x)
    for lib_gm in (gm, tgm):
        for n in lib_gm.graph.nodes:
            n.meta['tag'] = n.name
    ours = const_fold.split_const_subgraphs(gm)
    theirs = tconst_fold.split_const_subgraphs(tgm)

    def metas(g):
        return [(n.name, sorted(n.meta), n.meta.get('tag')) for n in g.nodes]
    assert metas(ours.graph) == metas(theirs.graph)
    assert metas(ours.const_subgraph_module.graph) == metas(theirs.const_subgraph_module.graph)
    # copies, not the caller's dicts
    by_id = {id(n.meta) for n in gm.graph.nodes}
    assert not [n for n in ours.graph.nodes if id(n.meta) in by_id]


def test_const_fold_torch_fx_module_input_and_everything_constant():
    torch.manual_seed(0)
    m = Multi()
    tgm = tfx.symbolic_trace(m)
    ours = const_fold.split_const_subgraphs(tgm)
    assert isinstance(ours, fx.GraphModule)
    assert ours.code == tconst_fold.split_const_subgraphs(tfx.symbolic_trace(m)).code

    class AllConst(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(3))

        def forward(self, x):
            return self.w + 1

    if not TORCH2:  # torch.fx 1.13 looks for the non-constant submodule, which is not there
        with pytest.raises(AttributeError):
            tconst_fold.split_const_subgraphs(tfx.symbolic_trace(AllConst()))
        with pytest.raises(AttributeError):
            const_fold.split_const_subgraphs(fx.symbolic_trace(AllConst()))
        return
    # torch.fx 2.x folds it all: forward returns the folded attribute
    m = AllConst()
    ours = const_fold.split_const_subgraphs(fx.symbolic_trace(m))
    theirs = tconst_fold.split_const_subgraphs(tfx.symbolic_trace(m))
    assert ours.code == theirs.code and str(ours.graph) == str(theirs.graph)
    assert ours.const_subgraph_module.code == theirs.const_subgraph_module.code
    x = torch.randn(3)
    assert torch.equal(ours(x), theirs(x)) and torch.allclose(ours(x), m(x))


def test_const_fold_large_chain():
    root = torch.nn.Module()
    root.w = torch.nn.Parameter(torch.ones(2))
    g = fx.Graph()
    x = g.placeholder('x')
    c = g.get_attr('w')
    for i in range(300):
        c = g.call_function(operator.add if i % 2 else operator.mul, (c, 1.5))
    cur = x
    for i in range(300):
        cur = g.call_function(operator.add if i % 2 else operator.mul, (cur, 2))
    g.output(g.call_function(operator.add, (cur, c)))
    gm = fx.GraphModule(root, g)
    ours = const_fold.split_const_subgraphs(gm)
    theirs = tconst_fold.split_const_subgraphs(fx.to_torch_fx(gm))
    assert ours.code == theirs.code
    assert ours.const_subgraph_module.code == theirs.const_subgraph_module.code
    xv = torch.randn(2)
    assert torch.allclose(ours(xv), theirs(xv))


# ---------------------------------------------------------------------------
# optimization: fuse, remove_dropout, extract_subgraph
# ---------------------------------------------------------------------------

class ConvBN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv1d(2, 3, 1)
        self.b1 = torch.nn.BatchNorm1d(3)
        self.c2 = torch.nn.Conv2d(2, 3, 3, padding=1)
        self.b2 = torch.nn.BatchNorm2d(3)
        self.c2b = torch.nn.Conv2d(3, 3, 1)
        self.b2b = torch.nn.BatchNorm2d(3)  # conv output also used elsewhere: not fused
        self.c3 = torch.nn.Conv3d(2, 2, 1)
        self.b3 = torch.nn.BatchNorm3d(2, track_running_stats=False)  # not fused
        self.block = torch.nn.Sequential(torch.nn.Conv2d(3, 3, 1), torch.nn.BatchNorm2d(3), torch.nn.ReLU())
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x1, x2, x3):
        a = self.b1(self.c1(x1))
        b = self.b2(self.c2(x2))
        c = self.c2b(b)
        d = self.b2b(c) + c
        e = self.b3(self.c3(x3))
        f = self.drop(self.block(d))
        return a, f * self.block[0].weight.sum(), e


def _inputs():
    return torch.randn(2, 2, 5), torch.randn(2, 2, 4, 4), torch.randn(2, 2, 2, 2, 2)


def _randomize_bn(m):
    for mod in m.modules():
        if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm) and mod.track_running_stats:
            mod.running_mean.uniform_(-1, 1)
            mod.running_var.uniform_(0.5, 2)


@pytest.mark.parametrize('inplace', [False, True])
@pytest.mark.parametrize('src', ['module', 'fxcpp', 'torch'])
def test_fuse_same_as_torch_fx(src, inplace):
    torch.manual_seed(0)
    m = ConvBN()
    _randomize_bn(m)
    m.eval()
    before = {k: v.clone() for k, v in m.state_dict().items()}
    model = {'module': m, 'fxcpp': fx.symbolic_trace(m), 'torch': tfx.symbolic_trace(m)}[src]
    ours = optimization.fuse(model, inplace=inplace)
    theirs = toptimization.fuse(model, inplace=inplace)
    assert isinstance(ours, fx.GraphModule) and isinstance(ours.graph, fx.Graph)
    assert ours.code == theirs.code
    assert str(ours.graph) == str(theirs.graph)
    assert ours.training == theirs.training is False
    assert sorted(dict(ours.named_modules())) == sorted(dict(theirs.named_modules()))
    assert [type(v) for _, v in sorted(ours.named_modules())][1:] == \
        [type(v) for _, v in sorted(theirs.named_modules())][1:]
    xs = _inputs()
    got, ref, orig = ours(*xs), theirs(*xs), m(*xs)
    for a, b in zip(got, ref):
        assert torch.allclose(a, b, atol=1e-5)
    # (the second output reads block.0.weight, which both replace by the fused conv's)
    assert torch.allclose(got[0], orig[0], atol=1e-5) and torch.allclose(got[2], orig[2], atol=1e-5)
    # the caller's model is untouched
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())
    assert isinstance(m.b2, torch.nn.BatchNorm2d)
    if not inplace:  # nothing of the result is shared with the model
        params = {id(p) for p in m.parameters()}
        assert not [p for p in ours.parameters() if id(p) in params]


def test_fuse_chained_bn_and_shared_conv():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(2, 2, 1)
            self.bn1 = torch.nn.BatchNorm2d(2)
            self.bn2 = torch.nn.BatchNorm2d(2)

        def forward(self, x):
            return self.bn2(self.bn1(self.conv(x))) + self.conv(x)

    torch.manual_seed(0)
    m = M()
    _randomize_bn(m)
    m.eval()
    ours, theirs = optimization.fuse(m), toptimization.fuse(m)
    assert ours.code == theirs.code
    x = torch.randn(1, 2, 3, 3)
    assert torch.allclose(ours(x), theirs(x), atol=1e-5)


def test_remove_dropout_and_extract_subgraph():
    torch.manual_seed(0)
    m = ConvBN().eval()
    ours, theirs = optimization.remove_dropout(m), toptimization.remove_dropout(m)
    assert isinstance(ours, fx.GraphModule)
    assert ours.code == theirs.code
    xs = _inputs()
    for a, b in zip(ours(*xs), theirs(*xs)):
        assert torch.allclose(a, b)

    gm, tgm = fx.symbolic_trace(m), tfx.symbolic_trace(m)

    def pick(g):
        nodes = list(g.nodes)
        by = {n.name: n for n in nodes}
        return ([by['c2'], by['b2'], by['c2b']], [by['x2']], [by['c2b'], by['b2']])
    sub = optimization.extract_subgraph(gm, *pick(gm.graph))
    tsub = toptimization.extract_subgraph(tgm, *pick(tgm.graph))
    assert isinstance(sub, fx.GraphModule)
    assert sub.code == tsub.code
    x2 = xs[1]
    for a, b in zip(sub(x2), tsub(x2)):
        assert torch.allclose(a, b)
