"""fxcpp.aten.lower: lowering models to graphs of ATen overloads.

Every lowered graph must pass check_lowered (only ATen overloads and the
closed primitive set), match eager exactly (or within 1e-4), and keep shape
arithmetic symbolic: a model lowered with a batch-1 example runs at batch 3.
"""
import builtins
import operator
import os
import tempfile

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

import fxcpp as fx
import fxcpp.aten as A
from fxcpp.aten._lower import PRIMITIVES, check_lowered
from fxcpp.passes.shape_prop import TensorMetadata

set_hypothesis_home_dir(os.path.join(tempfile.gettempdir(), 'fxcpp-hypothesis'))
torch.set_num_threads(1)


def _flat(v):
    return torch.utils._pytree.tree_flatten(v)[0]


def assert_same(a, b, tol=1e-4):
    fa, fb = _flat(a), _flat(b)
    assert len(fa) == len(fb)
    for p, q in zip(fa, fb):
        if isinstance(p, torch.Tensor):
            assert p.shape == q.shape and p.dtype == q.dtype
            assert torch.allclose(p, q, rtol=tol, atol=tol, equal_nan=True), (p - q).abs().max()
        else:
            assert p == q


def assert_lowered(gm):
    check_lowered(gm)
    for n in gm.graph.nodes:
        assert n.op in ('placeholder', 'get_attr', 'call_function', 'output')
        if n.op == 'call_function':
            assert isinstance(n.target, torch._ops.OpOverload) or any(n.target is p for p in PRIMITIVES)


def lower_and_compare(model, *examples, others=(), tol=1e-4):
    """Lower with ``examples``; compare with eager on them and on each tuple in ``others``."""
    gm = A.lower(model, *examples)
    assert_lowered(gm)
    with torch.no_grad():
        for inputs in (examples,) + tuple(others):
            assert_same(gm(*[t.clone() for t in inputs]), model(*[t.clone() for t in inputs]), tol)
    return gm


class Fn(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.f = f

    def forward(self, x, y):
        return self.f(x, y)


# --- a tiny model: golden structure ---------------------------------------

class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        x = F.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
        x = x.view(x.size(0), -1)
        return self.fc(x) + 1


def test_tiny_golden_code():
    torch.manual_seed(0)
    m = Tiny().eval()
    gm = lower_and_compare(m, torch.randn(1, 3, 8, 8), others=[(torch.randn(3, 3, 8, 8),)])
    code = gm.code
    lines = [ln.strip() for ln in code.strip().splitlines()]
    assert lines[0] == 'def forward(self, x):'
    expected_in_order = [
        'conv_weight = self.conv.weight',
        'torch.ops.aten.conv2d.default(x, conv_weight, conv_bias, [1, 1], [1, 1])',
        'torch.ops.aten.batch_norm.default(conv2d_default, bn_weight, bn_bias, bn_running_mean, '
        'bn_running_var, False, 0.1, 1e-05, True)',
        'torch.ops.aten.relu.default(batch_norm_default)',
        'torch.ops.aten.max_pool2d.default(relu_default, [2, 2])',
        '= max_pool2d_default.shape',
        'torch.ops.aten.view.default(max_pool2d_default, [getitem, -1])',
        'torch.ops.aten.linear.default(view_default, fc_weight, fc_bias)',
        'torch.ops.aten.add.Scalar(linear_default, 1)',
    ]
    pos = 0
    for frag in expected_in_order:
        found = code.find(frag, pos)
        assert found >= 0, (frag, code)
        pos = found
    # parameters keep their names and are owned by the result
    assert dict(gm.named_parameters()).keys() == dict(m.named_parameters()).keys()
    assert {'bn.running_mean', 'bn.running_var'} <= dict(gm.named_buffers()).keys()
    # tensor_meta as ShapeProp records it
    metas = {n.name: n.meta.get('tensor_meta') for n in gm.graph.nodes}
    assert isinstance(metas['conv2d_default'], TensorMetadata)
    assert metas['conv2d_default'].shape == torch.Size([1, 8, 8, 8])
    assert metas['linear_default'].shape == torch.Size([1, 10])
    # printable and editable like any GraphModule
    assert 'call_function' in str(gm.graph)
    for n in gm.graph.nodes:
        if n.target is torch.ops.aten.relu.default:
            n.target = torch.ops.aten.sigmoid.default
    gm.recompile()
    assert 'torch.ops.aten.sigmoid.default' in gm.code


def test_torch_fx_graph_module_input():
    torch.manual_seed(0)
    m = Tiny().eval()
    tgm = torch.fx.symbolic_trace(m)
    lower_and_compare(tgm, torch.randn(2, 3, 8, 8), others=[(torch.randn(1, 3, 8, 8),)])
    lower_and_compare(fx.symbolic_trace(m), torch.randn(2, 3, 8, 8))


# --- small functions --------------------------------------------------------

def _setitem(x, y):
    z = x.clone()
    z[:, 0] = 5.0
    z[..., 1] = y[..., 0]
    z[z > 1] = 0.0
    return z


CASES = {
    'inplace': lambda x, y: (x.relu_(), x.add_(y), x.__iadd__(y)),
    'imul': lambda x, y: x.clone().__imul__(2),
    'index': lambda x, y: (x[:, 1], x[..., ::2], x[None, 0, 1:3], x[:, [0, 2]], x[x > 0], x[:, :, -1]),
    'setitem': _setitem,
    'split': lambda x, y: (torch.cat(x.split(2, dim=2), 1), x.chunk(2, 1)[1], torch.stack(x.unbind(1)),
                           torch.split(x, [1, 3], 1)[0]),
    'sizes': lambda x, y: x.view(x.size(0) * x.shape[1], -1).reshape(-1, x.size(-1) // 2, 2) + x.shape[0],
    'factories': lambda x, y: torch.zeros(x.shape[0], 3) + torch.ones((x.size(0), 1)) * torch.arange(
        x.shape[0]).view(-1, 1),
    'scalars': lambda x, y: (1 / (x.abs() + 1), 2 - x, x ** 2, 2 ** x, -x, x / 3, x // 2, x % 2, abs(x),
                             ~(x > 0)),
    'dtypes': lambda x, y: (x.float(), x.long(), x.to(torch.float64), x.to(y), x.type_as(y), x.int().float()),
    'reductions': lambda x, y: (x.max(1)[0], x.max(dim=-1).values, torch.max(x, y), x.max(), x.sum(),
                                x.mean((1, 2), keepdim=True), x.argmax(-1)),
    'functional': lambda x, y: (F.softmax(x, -1), F.gelu(x), F.layer_norm(x, (6,)), F.interpolate(x, scale_factor=2.0),
                                F.pad(x, (1, 1)), F.normalize(x, dim=-1), F.hardswish(x), F.silu(x)),
    'interpolate': lambda x, y: F.interpolate(x[None], size=(x.shape[1] * 2, 8), mode='bilinear', align_corners=False),
    'layout': lambda x, y: (x.permute(0, 2, 1), x.transpose(1, 2).contiguous(), x.flatten(1), torch.flatten(x),
                            x.mT, x.expand(2, -1, -1, -1), x.repeat(1, 2, 1), x.unsqueeze(1).squeeze(1)),
    'matmul': lambda x, y: (x @ y.transpose(-1, -2), torch.einsum('bij,bkj->bik', x, y), torch.bmm(x, y.mT)),
    'where': lambda x, y: (torch.where(x > 0, x, y), torch.where(x > 0, x, 0.0), x.masked_fill(x > 0, -1.0),
                           x.clamp(min=0), x.clamp(-0.5, 0.5)),
    'new': lambda x, y: x.new_zeros((x.shape[0], 2)) + x.new_ones(x.shape[0], 2) + x.new_full((x.size(0), 2), 3.0),
    'multi_output': lambda x, y: (F.max_pool1d(x, 2, return_indices=True), torch.var_mean(x, 1), x.topk(2),
                                  F.adaptive_max_pool1d(x, 2, return_indices=True)[1], x.sort(-1).values),
    'cat_sizes': lambda x, y: torch.cat([x, y], 0).view(2, x.size(0), -1).sum(0),
}


@pytest.mark.parametrize('name', sorted(CASES))
def test_small_functions(name):
    torch.manual_seed(0)
    x, y = torch.randn(2, 4, 6), torch.randn(2, 4, 6)
    lower_and_compare(Fn(CASES[name]), x, y, others=[(torch.randn(3, 4, 6), torch.randn(3, 4, 6))])


def test_aten_argument_conventions():
    """Positional per schema, int[2] expanded, no tensors inline, kwarg-only as kwargs."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3, stride=2), nn.GELU(approximate='tanh'), nn.AdaptiveAvgPool2d(1))
    gm = lower_and_compare(m, torch.randn(1, 3, 9, 9), others=[(torch.randn(2, 3, 9, 9),)])
    nodes = {n.target: n for n in gm.graph.nodes if n.op == 'call_function'}
    conv = nodes[torch.ops.aten.conv2d.default]
    assert conv.args[3] == [2, 2] and not conv.kwargs
    gelu = nodes[torch.ops.aten.gelu.default]
    assert gelu.kwargs == {'approximate': 'tanh'}
    assert nodes[torch.ops.aten.adaptive_avg_pool2d.default].args[1] == [1, 1]


def test_tensor_constants_become_attributes():
    const = torch.tensor([1.0, 2.0, 3.0])

    class M(nn.Module):
        def forward(self, x):
            return x * const + torch.ones(3)

    gm = lower_and_compare(M(), torch.randn(2, 3))
    attrs = [n.target for n in gm.graph.nodes if n.op == 'get_attr']
    assert attrs and all(isinstance(getattr(gm, a), torch.Tensor) for a in attrs)


def test_multihead_attention_and_layernorm():
    torch.manual_seed(0)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(16)
            self.mha = nn.MultiheadAttention(16, 4, batch_first=True)
            self.up = nn.Upsample(scale_factor=2, mode='nearest')

        def forward(self, x):
            h = self.ln(x)
            a, _ = self.mha(h, h, h, need_weights=False)
            return self.up(a.transpose(1, 2))

    lower_and_compare(M().eval(), torch.randn(1, 5, 16), others=[(torch.randn(3, 5, 16),)])


def test_untraceable_model_runs_directly():
    class M(nn.Module):
        def forward(self, *xs):  # *args: symbolic tracing refuses it
            return torch.cat(xs, 1).view(xs[0].shape[0], -1)

    gm = lower_and_compare(M(), torch.randn(1, 2), torch.randn(1, 3), others=[(torch.randn(4, 2), torch.randn(4, 3))])
    assert [n.op for n in gm.graph.nodes].count('placeholder') == 2


# --- lowering errors ------------------------------------------------------

class MySwish(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(x)


class SwishNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.act = MySwish()

    def forward(self, x):
        return self.act(self.lin(x))


class LeafTracer(fx.Tracer):
    def is_leaf_module(self, m, qualname):
        return isinstance(m, MySwish) or super().is_leaf_module(m, qualname)


def _leaf_gm():
    torch.manual_seed(0)
    net = SwishNet().eval()
    return net, fx.GraphModule(net, LeafTracer().trace(net))


def test_custom_leaf_module_error_and_registered_lowering():
    net, gm = _leaf_gm()
    x = torch.randn(2, 4)
    with pytest.raises(A.LoweringError) as info:
        A.lower(gm, x)
    msg = str(info.value)
    assert 'node `act`' in msg and 'MySwish' in msg
    assert 'register_lowering' in msg and 'keep this part of the model in Python' in msg
    assert info.value.node is not None and info.value.node.name == 'act'

    def lower_swish(ctx, module, x):
        return ctx.call(torch.ops.aten.mul.Tensor, x, torch.sigmoid(x))

    gm2 = A.lower(gm, x, lowerings={MySwish: lower_swish})
    assert_lowered(gm2)
    assert_same(gm2(x), net(x))

    A.register_lowering(MySwish)(lower_swish)
    try:
        assert_same(A.lower(gm, x)(x), net(x))
    finally:
        A.register_lowering(MySwish, None)
    with pytest.raises(A.LoweringError):
        A.lower(gm, x)


@fx.wrap
def _numpy_double(x):
    return torch.from_numpy(x.numpy() * 2)


def _aten_double(x):
    return x * 2


@fx.wrap
def _wrapped_pad(x):
    h, w = x.shape[-2:]
    return F.pad(x, (0, w % 3, 0, h % 3))


def test_python_function_errors_and_registration():
    class M(nn.Module):
        def forward(self, x):
            return _numpy_double(x) + 1

    x = torch.randn(2, 3)
    with pytest.raises(A.LoweringError) as info:
        A.lower(M(), x)
    msg = str(info.value)
    assert 'node `_numpy_double`' in msg and 'numpy' in msg and 'register_lowering' in msg
    gm = A.lower(M(), x, lowerings={_numpy_double: lambda ctx, x: x * 2})
    assert_same(gm(x), M()(x))


def test_wrapped_functions_are_traced_through():
    class M(nn.Module):
        def forward(self, x):
            return _wrapped_pad(x) * 2

    lower_and_compare(M(), torch.randn(1, 2, 4, 5), others=[(torch.randn(2, 2, 4, 5),)])


def test_data_dependent_control_flow_errors():
    class M(nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x
            return -x

    with pytest.raises(A.LoweringError, match='data-dependent'):
        A.lower(M(), torch.randn(3))

    class N(nn.Module):
        def forward(self, x):
            return x.view(int(x.sum().item()) * 0 + 3)

    with pytest.raises(A.LoweringError, match='tensor data'):
        A.lower(N(), torch.randn(3))


def test_check_lowered_rejects_bad_graphs():
    def graph_with(build):
        g = fx.Graph()
        x = g.placeholder('x')
        g.output(build(g, x))
        return fx.GraphModule(nn.Module(), g)

    bad = [
        (lambda g, x: g.call_function(torch.relu, (x,)), 'relu'),
        (lambda g, x: g.call_method('relu', (x,)), "op 'call_method'"),
        (lambda g, x: g.call_function(torch.ops.aten.add.Tensor, (x, torch.ones(2))), 'Tensor'),
        (lambda g, x: g.call_function(builtins.getattr, (x, 'T')), 'getattr'),
        (lambda g, x: g.call_function(torch.ops.aten.add.Tensor, (x, object())), 'object'),
    ]
    for build, word in bad:
        gm = graph_with(build)
        with pytest.raises(A.LoweringError, match='is not allowed') as info:
            check_lowered(gm)
        assert word in str(info.value)
        assert info.value.node is not None and info.value.node.op != 'placeholder'
    # arithmetic primitives on a tensor node (known from tensor_meta)
    g = fx.Graph()
    x = g.placeholder('x')
    g.output(g.call_function(operator.add, (x, 1)))
    gm = fx.GraphModule(nn.Module(), g)
    from fxcpp.passes.shape_prop import ShapeProp
    ShapeProp(gm).propagate(torch.ones(2))
    with pytest.raises(A.LoweringError, match='on a tensor'):
        check_lowered(gm)
    # and a good one passes
    check_lowered(graph_with(lambda g, x: g.call_function(operator.getitem, (
        g.call_function(builtins.getattr, (x, 'shape')), 0))))


# --- hypothesis: random chains of ops ----------------------------------------

_OPS = ['add_scalar', 'mul_tensor', 'relu', 'view_flat', 'cat', 'size_add', 'transpose', 'sub_rev', 'inplace',
        'slice', 'sum_keep', 'batch_arith']


def _apply(op, x, y):
    c = x.shape[1]
    if op == 'add_scalar':
        return x + 0.5
    if op == 'mul_tensor':
        return x * y
    if op == 'relu':
        return torch.relu(x)
    if op == 'view_flat':
        return x.contiguous().view(x.size(0), -1).view(x.shape[0], c, -1)
    if op == 'cat':
        return torch.cat([x, y], dim=2)[:, :, :y.shape[2]]
    if op == 'size_add':
        return x + x.size(2) * 2 - x.shape[1] // 2
    if op == 'transpose':
        return x.transpose(1, 2).contiguous().transpose(1, 2)
    if op == 'sub_rev':
        return 1.5 - x
    if op == 'inplace':
        x = x.clone()
        x.mul_(2).add_(y)
        return x
    if op == 'slice':
        return torch.cat([x[:, :, 1:], x[:, :, :1]], 2)
    if op == 'sum_keep':
        return x - x.sum(dim=2, keepdim=True) / x.shape[2]
    if op == 'batch_arith':
        return x.reshape(x.shape[0] * c, -1).reshape(x.size(0), c, -1) * (x.shape[0] / (x.shape[0] + 1))
    raise AssertionError(op)


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(ops=st.lists(st.sampled_from(_OPS), min_size=1, max_size=6),
       b1=st.integers(1, 3), b2=st.integers(1, 4), c=st.integers(1, 3), n=st.integers(2, 5))
def test_random_chains_match_eager(ops, b1, b2, c, n):
    def f(x, y):
        for op in ops:
            x = _apply(op, x, y)
        return x

    g = torch.Generator().manual_seed(0)
    ex = (torch.randn(b1, c, n, generator=g), torch.randn(b1, c, n, generator=g))
    other = (torch.randn(b2, c, n, generator=g), torch.randn(b2, c, n, generator=g))
    gm = A.lower(Fn(f), *ex)
    assert_lowered(gm)
    for inputs in (ex, other):
        assert_same(gm(*[t.clone() for t in inputs]), f(*[t.clone() for t in inputs]), tol=1e-5)


# --- torchvision ------------------------------------------------------------

def _tv(name):
    tv = pytest.importorskip('torchvision')
    torch.manual_seed(0)
    if name == 'vit_small':
        from torchvision.models.vision_transformer import VisionTransformer
        return VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32,
                                 mlp_dim=64, num_classes=10).eval(), 32
    if name == 'swin_small':
        from torchvision.models.swin_transformer import SwinTransformer
        return SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 2], window_size=[4, 4],
                               num_classes=10).eval(), 40
    if name in ('fcn_resnet50', 'deeplabv3_resnet50', 'lraspp_mobilenet_v3_large', 'deeplabv3_mobilenet_v3_large'):
        return getattr(tv.models.segmentation, name)(weights=None, weights_backbone=None).eval(), 64
    return getattr(tv.models, name)().eval(), 64


TV_FAST = ['resnet18', 'mobilenet_v3_small', 'squeezenet1_0', 'shufflenet_v2_x0_5', 'efficientnet_b0',
           'regnet_y_400mf', 'convnext_tiny', 'vit_small', 'swin_small', 'lraspp_mobilenet_v3_large',
           'fcn_resnet50']
# measured once (all pass, max abs diff 0.0 at batch 1 and 3): vgg11, deeplabv3_resnet50, vit_b_16 (224),
# swin_t (224); slow on a 2-core machine, so only run with FXCPP_SLOW_TESTS=1.
TV_SLOW = ['vgg11', 'deeplabv3_resnet50', 'vit_b_16', 'swin_t', 'densenet121', 'mnasnet0_5', 'googlenet',
           'inception_v3', 'resnext50_32x4d', 'wide_resnet50_2', 'efficientnet_v2_s', 'mobilenet_v2',
           'alexnet', 'deeplabv3_mobilenet_v3_large']


def _check_tv(name):
    model, size = _tv(name)
    if name in ('vit_b_16', 'swin_t'):
        size = 224
    if name == 'inception_v3':
        size = 96
    torch.manual_seed(1)
    x1, x3 = torch.randn(1, 3, size, size), torch.randn(3, 3, size, size)
    gm = A.lower(model, x1)
    assert_lowered(gm)
    with torch.no_grad():
        for x in (x1, x3):
            a, b = gm(x), model(x)
            if isinstance(b, dict):
                assert isinstance(a, dict) and a.keys() == b.keys()
            assert_same(a, b)


@pytest.mark.parametrize('name', TV_FAST)
def test_torchvision(name):
    _check_tv(name)


@pytest.mark.skipif(not os.environ.get('FXCPP_SLOW_TESTS'), reason='slow; set FXCPP_SLOW_TESTS=1')
@pytest.mark.parametrize('name', TV_SLOW)
def test_torchvision_slow(name):
    _check_tv(name)


def test_numel_stays_symbolic_and_runs_in_cpp(tmp_path):
    # aten::numel is a TorchScript builtin the dispatcher (and so the C++
    # runtime) does not have: numel() lowers to the product of the sizes.
    class M(torch.nn.Module):
        def forward(self, x):
            return x.reshape(-1) * x.numel() + x[0].numel()

    gm = A.lower(M(), torch.randn(2, 3))
    assert 'numel' not in gm.code
    path = tmp_path / 'numel.fxpt'
    A.save(gm, path)
    cpp = A.load(path, runtime='cpp')
    for rows in (2, 5):
        x = torch.randn(rows, 3)
        torch.testing.assert_close(cpp(x), M()(x))


def test_check_lowered_refuses_torchscript_builtins():
    g = fx.Graph()
    x = g.placeholder('x')
    # aten::len.Tensor has a schema but no kernel (aten::numel has one on torch 2.x).
    g.output(g.call_function(torch.ops.aten.len.Tensor, (x,)))
    with pytest.raises(A.LoweringError, match='aten::len.Tensor is a TorchScript builtin, not a dispatcher operator'):
        A.check_lowered(g)


# ---- number inputs (issue 24, item 7) -------------------------------------------------

class _NumberInputs(torch.nn.Module):
    def forward(self, x, s, n):
        return x * s + torch.full((6,), s) + n - x.view(-1, n).sum(0).sum() * s


def test_number_inputs_stay_inputs(tmp_path):
    """A float and an int example input are inputs of the lowered graph (not
    2.5 and 3 baked into the ops): the lowered module, the saved file in both
    runtimes and eager agree for other values."""
    import fxcpp.aten as aten
    m = _NumberInputs()
    x = torch.randn(2, 6)
    gm = aten.lower(m, x, 2.5, 3)
    path = tmp_path / 'numbers.fxpt'
    aten.save(gm, path)
    runs = [gm, aten.load(path), aten.load(path, runtime='cpp')]
    for s, n in ((2.5, 3), (-1.25, 2), (0.5, 6)):
        want = m(x, s, n)
        for r in runs:
            assert torch.allclose(r(x, s, n), want), (type(r).__name__, s, n)


@pytest.mark.parametrize('body, name', [
    ('return x + 1 if flag else x - 1', 'flag'),
    ('return sum(x for _ in range(flag))', 'flag'),
    ('return x * math.sqrt(flag)', 'flag'),
    ('return x * (flag * 2 > 3)', 'flag'),
])
def test_control_flow_on_a_number_input_is_refused(body, name):
    import fxcpp.aten as aten
    ns = {'torch': torch, 'math': __import__('math')}
    exec(f'class M(torch.nn.Module):\n    def forward(self, x, flag):\n        {body}\n', ns)
    with pytest.raises(aten.LoweringError, match=f'of the number input `{name}` would specialize'):
        aten.lower(ns['M'](), torch.randn(3), 2)
