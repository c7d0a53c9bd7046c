"""Models beyond torchvision, traced by fxcpp and by the installed torch.fx (issue 23): a
transformer block written with nn.MultiheadAttention (a leaf module; traced through, both
refuse its control flow alike),
a model whose forward takes *args and **kwargs, and one with pytree inputs (a dict of tensors
and a tuple, flattened through concrete_args). Same gm.code, str(gm.graph) and
print_readable(), and the same outputs as eager."""
import copy

import pytest
import torch
import torch.fx as tfx

import fxcpp as fx
from difftools import readable
from test_node_meta import Block  # a transformer block written with nn.MultiheadAttention
from torch2 import TORCH2


class VarArgs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x, *args, **kwargs):
        return self.lin(x) * args[1] + args[0] - kwargs['bias']


class Pytree(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, d, pair):
        a, b = pair
        return {'sum': self.lin(d['x']) + d['y'] * a, 'diff': (d['x'] - b).relu()}


def _through_mha(lib):
    """A tracer of `lib` that traces into nn.MultiheadAttention instead of keeping it a leaf."""
    class T(lib.Tracer):
        def is_leaf_module(self, m, qualname):
            return not isinstance(m, torch.nn.MultiheadAttention) and super().is_leaf_module(m, qualname)
    return T


def _trace(lib, root, tracer=None, concrete_args=None):
    root = copy.deepcopy(root)
    t = (tracer or lib.Tracer)()
    graph = t.trace(root, concrete_args=concrete_args)
    return lib.GraphModule(t.root, graph, root.__class__.__name__)


def _close(a, b):
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


CASES = {
    'mha_leaf': (Block, None, None),
    'pytree_inputs': (Pytree, None, lambda: {'d': {'x': tfx.PH, 'y': tfx.PH}, 'pair': (tfx.PH, tfx.PH)}),
}


def _inputs(name):
    if name == 'pytree_inputs':
        return ({'x': torch.randn(3, 4), 'y': torch.randn(3, 4)}, (torch.randn(3, 4), torch.randn(3, 4)))
    return (torch.randn(2, 5, 8),)


@pytest.mark.parametrize('name', sorted(CASES))
def test_same_code_printout_and_outputs_as_torch_fx(name):
    make, tracer_of, concrete = CASES[name]
    torch.manual_seed(0)
    model = make().eval()
    ref = _trace(tfx, model, tracer_of(tfx) if tracer_of else None, concrete() if concrete else None)
    ours = _trace(fx, model, tracer_of(fx) if tracer_of else None, concrete() if concrete else None)
    assert ours.code == ref.code
    assert str(ours.graph) == str(ref.graph)
    assert readable(ours) == readable(ref)
    inputs = _inputs(name)
    with torch.no_grad():
        expected = model(*inputs)
        got, got_ref = ours(*inputs), ref(*inputs)
    if isinstance(expected, dict):
        assert got.keys() == expected.keys() == got_ref.keys()
        for k in expected:
            _close(got[k], expected[k])
            _close(got_ref[k], expected[k])
    else:
        _close(got, expected)
        _close(got_ref, expected)


def test_varargs_and_kwargs_root():
    """forward(self, x, *args, **kwargs): *args and **kwargs become placeholders.
    torch.fx 1.13 on Python 3.11 cannot trace a *args root (it reads the code object's
    argument count as 3.10 laid it out); fxcpp traces it there too, and matches torch.fx 2.x."""
    torch.manual_seed(0)
    model = VarArgs().eval()
    ours = fx.symbolic_trace(model)
    x, a1, a2, bias = (torch.randn(3, 4) for _ in range(4))
    phs = [n.target for n in ours.graph.nodes if n.op == 'placeholder']
    assert phs == ['x', '*args', '**kwargs']
    with torch.no_grad():
        _close(ours(x, a1, a2, bias=bias), model(x, a1, a2, bias=bias))
        _close(ours(x, a1, a2, 7, bias=bias, other=1), model(x, a1, a2, 7, bias=bias, other=1))
    try:
        ref = tfx.symbolic_trace(copy.deepcopy(model))
    except Exception as e:  # noqa: BLE001 -- torch.fx 1.13's failure is the outcome under test
        assert not TORCH2, f'torch.fx 2.x traces *args roots: {e!r}'
        return
    assert ours.code == ref.code
    assert str(ours.graph) == str(ref.graph)
    assert readable(ours) == readable(ref)


def test_mha_traced_through_refused_alike():
    """Tracing into nn.MultiheadAttention meets control flow on a traced value
    (multi_head_attention_forward's input checks): both libraries raise the same error."""
    model = Block().eval()
    errors = []
    for lib in (tfx, fx):
        with pytest.raises(Exception) as info:
            _trace(lib, model, _through_mha(lib))
        errors.append(info.value)
    ref, ours = errors
    assert type(ours).__name__ == type(ref).__name__ and isinstance(ours, type(ref))
    assert str(ours) == str(ref)
