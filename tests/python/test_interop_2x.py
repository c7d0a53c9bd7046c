"""Interop with the graphs torch 2.x's own tools make (issue 23, item 4): the graph a
torch.compile backend receives and torch.export's graph_module convert to fxcpp and back
with identical code, exact names and the same meta objects; torch.fx passes run on the
converted graph and give what they give on the original."""

import pytest
import torch
import torch.fx

import fxcpp
from fxcpp import _torch_compat
from fxcpp.interop import from_torch_fx, to_torch_fx

pytestmark = pytest.mark.skipif(not _torch_compat.HAS_DYNAMO, reason='torch.compile and torch.export need torch 2.x')

class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x, scale: float = 2.0):
        y = torch.relu(self.bn(self.conv(x))) * scale
        return self.fc(y.mean((2, 3))), y.shape[0]

def _dynamo_graphs(model, *args, dynamic=False):
    """The torch.fx GraphModules (with their example inputs) Dynamo hands a backend."""
    import torch._dynamo
    got = []

    def backend(gm, example_inputs):
        got.append((gm, example_inputs))
        return gm.forward
    torch._dynamo.reset()
    torch.compile(model, backend=backend, dynamic=dynamic)(*args)
    torch._dynamo.reset()
    assert got
    return got

def _assert_same_graph(a, b):
    """Same nodes (names, ops, targets), same code, the same meta dict objects."""
    assert [(n.name, n.op, n.target) for n in a.graph.nodes] == [(n.name, n.op, n.target) for n in b.graph.nodes]
    for x, y in zip(a.graph.nodes, b.graph.nodes):
        assert x.meta is y.meta, x.name
    assert a.code == b.code

@pytest.mark.parametrize('dynamic', [False, True])
def test_dynamo_graph_round_trips(dynamic):
    torch.manual_seed(0)
    model = Block().eval()
    x = torch.randn(2, 3, 8, 8)
    for gm, example_inputs in _dynamo_graphs(model, x, dynamic=dynamic):
        fx = from_torch_fx(gm)
        assert isinstance(fx, fxcpp.GraphModule)
        _assert_same_graph(gm, fx)
        # The meta Dynamo wrote (fake values, SymInts, the module stacks, the source of each node) is kept.
        keys = [set(n.meta) for n in gm.graph.nodes]
        assert any('example_value' in k for k in keys) and any('nn_module_stack' in k for k in keys)
        back = to_torch_fx(fx)
        assert type(back) is not type(fx) and isinstance(back, torch.fx.GraphModule)
        _assert_same_graph(gm, back)
        with torch.no_grad():
            want = gm(*example_inputs)
            for got in (fx(*example_inputs), back(*example_inputs)):
                torch.testing.assert_close(got, want)

def test_exported_graph_module_round_trips():
    torch.manual_seed(0)
    model = Block().eval()
    x = torch.randn(2, 3, 8, 8)
    ep = torch.export.export(model, (x,))
    gm = ep.graph_module
    fx = from_torch_fx(gm)
    _assert_same_graph(gm, fx)
    assert any('val' in n.meta for n in fx.graph.nodes)
    assert all(n.meta.get('nn_module_stack') is m.meta.get('nn_module_stack')
               for n, m in zip(fx.graph.nodes, gm.graph.nodes))
    back = to_torch_fx(fx)
    _assert_same_graph(gm, back)
    params = [ep.state_dict[name] for name in ep.graph_signature.parameters] + \
             [ep.state_dict[name] for name in ep.graph_signature.buffers]
    want = gm(*params, x)
    torch.testing.assert_close(fx(*params, x), want)
    torch.testing.assert_close(back(*params, x), want)

def test_torch_fx_passes_run_on_converted_graphs():
    # torch.fx 2.x's passes check isinstance(x, torch.fx.Node) (its map_arg is C code), which
    # fxcpp's nodes are not on 2.x (tests/python/torch2.py, FX_NODE_NOT_A_BASE): they run on
    # to_torch_fx(gm), whose nodes share the fxcpp nodes' meta dicts, so what a pass records
    # is on the fxcpp graph too, and equals what it records on torch.fx's own trace.
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp
    from torch.fx.passes.shape_prop import ShapeProp
    from torch.fx.passes.split_module import split_module
    torch.manual_seed(0)
    model = Block().eval()
    x = torch.randn(2, 3, 8, 8)
    ref = torch.fx.symbolic_trace(model)
    fx = fxcpp.symbolic_trace(model)
    assert ref.code == fx.code

    ShapeProp(ref).propagate(x)
    ShapeProp(to_torch_fx(fx)).propagate(x)
    for a, b in zip(ref.graph.nodes, fx.graph.nodes):
        assert 'tensor_meta' in b.meta or 'tensor_meta' not in a.meta, a.name
        assert a.meta.get('tensor_meta') == b.meta.get('tensor_meta'), a.name

    from torch._subclasses.fake_tensor import FakeTensorMode
    for gm in (ref, to_torch_fx(fx)):
        mode = FakeTensorMode(allow_non_fake_inputs=True)
        FakeTensorProp(gm, mode).propagate(mode.from_tensor(x))
    for a, b in zip(ref.graph.nodes, fx.graph.nodes):
        va, vb = a.meta.get('val'), b.meta.get('val')
        assert type(va) is type(vb), a.name
        if isinstance(va, torch.Tensor):
            assert (va.shape, va.dtype) == (vb.shape, vb.dtype), a.name

    def part(n):
        return 0 if n.op == 'placeholder' or n.name in ('conv', 'bn') else 1
    split_ref = split_module(ref, model, part)
    split_fx = split_module(to_torch_fx(fx), model, part)
    assert split_ref.code == split_fx.code
    torch.testing.assert_close(split_fx(x), split_ref(x))
    assert from_torch_fx(split_fx).code == split_ref.code


def test_make_fx_on_fxcpp_graph_module():
    from torch.fx.experimental.proxy_tensor import make_fx
    torch.manual_seed(0)
    model = Block().eval()
    x = torch.randn(2, 3, 8, 8)
    ref = make_fx(torch.fx.symbolic_trace(model))(x)
    got = make_fx(fxcpp.symbolic_trace(model))(x)
    assert got.code == ref.code
    torch.testing.assert_close(got(x), ref(x))
    assert [n.target for n in got.graph.nodes if n.op == 'call_function'] == \
        [n.target for n in ref.graph.nodes if n.op == 'call_function']


@pytest.mark.skipif(not hasattr(torch.fx.Graph, 'materialize_symints'), reason="torch.fx 2.14's symbolic-size helpers")
def test_symbolic_size_helpers_on_fxcpp_graphs():
    # torch.fx 2.14's backward-compatible Graph.create_size_node / create_stride_node /
    # create_storage_offset_node / materialize_symints are inherited by fxcpp's Graph: on a graph
    # from make_fx (symbolic shapes) they emit the same nodes, names, code and meta as on torch.fx's
    from torch.fx.experimental.proxy_tensor import make_fx
    from fxcpp.experimental.proxy_tensor import make_fx as fx_make_fx

    def f(x, y):
        return (x.t() @ y).relu()
    args = (torch.randn(3, 4), torch.randn(3, 5))
    theirs = make_fx(f, tracing_mode='symbolic')(*args)
    ours = fx_make_fx(f, tracing_mode='symbolic')(*args)
    assert isinstance(ours.graph, fxcpp.Graph)
    seen = []
    for gm in (theirs, ours):
        g = gm.graph
        x = next(iter(g.nodes))
        with g.inserting_before(g.output_node()):
            made = [g.create_size_node(x, 1), g.create_stride_node(x, 0), g.create_storage_offset_node(x)]
            v = x.meta['val']
            made += g.materialize_symints([v.size(0) * v.size(1), 7])
        gm.recompile()
        seen.append(([m if isinstance(m, int) else (m.name, str(m.meta.get('val'))) for m in made], gm.code))
    assert seen[0] == seen[1]
    assert 'sym_size' in seen[1][1] and seen[1][0][-1] == 7
