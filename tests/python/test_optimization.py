"""fxcpp.experimental.optimization.fuse against torch.fx 1.13's fuse, differentially: same code and
node names, same module types and attributes, fused weights bitwise equal to torch's, outputs
equal, the caller's model untouched (or touched as torch.fx touches it, with inplace=True).

fxcpp builds a fused conv without torch's deep copy of the conv (``_fuse_conv_bn_eval``); these
tests compare it with ``torch.nn.utils.fusion.fuse_conv_bn_eval`` directly too, including the
convs it hands to torch's function (state that is not plain values)."""
import copy
import copyreg
from collections import OrderedDict

import pytest
import torch
import torch.fx as tfx
import torch.nn as nn
from torch.fx.experimental import optimization as toptimization
from torch.nn.utils.fusion import fuse_conv_bn_eval

import fxcpp as fx
from fxcpp.experimental import optimization

PAIRS = {1: (nn.Conv1d, nn.BatchNorm1d), 2: (nn.Conv2d, nn.BatchNorm2d), 3: (nn.Conv3d, nn.BatchNorm3d)}
_CONTAINERS = (list, set, dict, OrderedDict)


# ---------------------------------------------------------------------------
# comparison helpers
# ---------------------------------------------------------------------------

def _same_tensor(a, b):
    assert type(a) is type(b)
    if a is None:
        return
    assert a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride()
    assert a.requires_grad == b.requires_grad and a.is_leaf == b.is_leaf
    assert a.grad_fn is None and b.grad_fn is None
    assert torch.equal(a, b)  # bitwise, not just close


def _same_module(a, b, orig=None):
    """``a`` (fxcpp's) and ``b`` (torch.fx's) are the same module: type, attribute names in order,
    attribute values, parameters and buffers bitwise. With ``orig`` (the module ``a`` was made
    from), ``a`` shares no mutable attribute or tensor with it."""
    assert type(a) is type(b)
    assert list(vars(a)) == list(vars(b))
    for key, va in vars(a).items():
        vb = vars(b)[key]
        if key in ('_parameters', '_buffers'):
            assert list(va) == list(vb), key
            for name in va:
                _same_tensor(va[name], vb[name])
                if orig is not None and va[name] is not None:
                    assert not any(va[name] is t for t in vars(orig)[key].values() if t is not None)
        elif key == '_modules':
            assert list(va) == list(vb)
        else:
            assert type(va) is type(vb), key
            assert va == vb, key
            if orig is not None and isinstance(va, _CONTAINERS):
                assert va is not vars(orig)[key], key  # a copy, as deepcopy makes


def _same_result(ours, theirs):
    assert isinstance(ours, fx.GraphModule) and isinstance(ours.graph, fx.Graph)
    assert ours.code == theirs.code
    assert [(n.name, n.op, n.target if isinstance(n.target, str) else n.target.__name__)
            for n in ours.graph.nodes] == \
        [(n.name, n.op, n.target if isinstance(n.target, str) else n.target.__name__)
         for n in theirs.graph.nodes]
    assert ours.training == theirs.training
    mods, tmods = dict(ours.named_modules()), dict(theirs.named_modules())
    assert sorted(mods) == sorted(tmods)
    for name in mods:
        if name:
            _same_module(mods[name], tmods[name])
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    for (_, a), (_, b) in zip(ours.named_parameters(), theirs.named_parameters()):
        _same_tensor(a, b)
    for (_, a), (_, b) in zip(ours.named_buffers(), theirs.named_buffers()):
        _same_tensor(a, b)


def _randomize(model):
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            if m.track_running_stats:
                m.running_mean.uniform_(-1, 1)
                m.running_var.uniform_(0.25, 3)
            if m.affine:
                with torch.no_grad():
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.uniform_(-1, 1)
    return model


def _snapshot(model):
    return ({k: v.clone() for k, v in model.state_dict().items()},
            [(n, type(m), id(m)) for n, m in model.named_modules()],
            [(n, id(p), p.requires_grad) for n, p in model.named_parameters()])


def _check_untouched(model, snap):
    state, modules, params = snap
    now = model.state_dict()
    assert list(now) == list(state)
    assert all(torch.equal(state[k], v) for k, v in now.items())
    assert [(n, type(m), id(m)) for n, m in model.named_modules()] == modules
    assert [(n, id(p), p.requires_grad) for n, p in model.named_parameters()] == params


# ---------------------------------------------------------------------------
# the fused conv itself, against torch.nn.utils.fusion.fuse_conv_bn_eval
# ---------------------------------------------------------------------------

CONV_VARIANTS = [
    dict(),
    dict(bias=False),
    dict(stride=2, padding=1),
    dict(dilation=2, padding=2),
    dict(groups=2),
    dict(groups=4, bias=False),
    dict(padding='same'),
    dict(padding='valid', stride=1),
    dict(padding=1, padding_mode='reflect'),
    dict(padding=1, padding_mode='circular'),
    dict(padding=1, padding_mode='replicate', bias=False),
]
BN_VARIANTS = [dict(), dict(affine=False), dict(eps=1e-2, momentum=0.3)]


def _conv_bn(dim, conv_kw, bn_kw, dtype=torch.float32, channels=(4, 8)):
    conv_cls, bn_cls = PAIRS[dim]
    conv = conv_cls(channels[0], channels[1], 3, **conv_kw)
    bn = bn_cls(channels[1], **bn_kw)
    _randomize(bn)
    return conv.to(dtype).eval(), bn.to(dtype).eval()


@pytest.mark.parametrize('dtype', [torch.float32, torch.float64])
@pytest.mark.parametrize('bn_kw', BN_VARIANTS)
@pytest.mark.parametrize('conv_kw', CONV_VARIANTS)
@pytest.mark.parametrize('dim', [1, 2, 3])
def test_fused_conv_same_as_fuse_conv_bn_eval(dim, conv_kw, bn_kw, dtype):
    torch.manual_seed(dim)
    conv, bn = _conv_bn(dim, conv_kw, bn_kw, dtype)
    snap_conv, snap_bn = _snapshot(conv), _snapshot(bn)
    ours = optimization._fuse_conv_bn_eval(conv, bn)
    theirs = fuse_conv_bn_eval(conv, bn)
    _same_module(ours, theirs, orig=conv)
    # torch's fuse_conv_bn_weights decides requires_grad: 1.13 gives a trainable bias always,
    # 2.x only where the conv had a bias
    assert ours.weight.requires_grad and ours.bias is not None
    assert ours.bias.requires_grad == theirs.bias.requires_grad
    assert ours.weight.data_ptr() != conv.weight.data_ptr()
    assert not ours.training
    _check_untouched(conv, snap_conv)
    _check_untouched(bn, snap_bn)
    x = torch.randn(2, 4, *[7] * dim, dtype=dtype)
    assert torch.equal(ours(x), theirs(x))
    torch.testing.assert_close(ours(x), bn(conv(x)))


def test_fused_conv_bitwise_on_larger_weights():
    torch.manual_seed(1)
    for dim in (1, 2, 3):
        conv, bn = _conv_bn(dim, dict(), dict(), channels=(16, 33))
        with torch.no_grad():
            conv.weight.normal_(0, 3)
            conv.bias.normal_(0, 3)
        bn.running_var.uniform_(1e-4, 10)
        ours, theirs = optimization._fuse_conv_bn_eval(conv, bn), fuse_conv_bn_eval(conv, bn)
        _same_tensor(ours.weight, theirs.weight)
        _same_tensor(ours.bias, theirs.bias)


def test_fused_conv_frozen_params_and_mixed_dtypes():
    torch.manual_seed(2)
    conv, bn = _conv_bn(2, dict(), dict())
    conv.weight.requires_grad_(False)
    conv.bias.requires_grad_(False)
    for b in (bn, copy.deepcopy(bn).double()):  # a double bn promotes the fused weights
        ours, theirs = optimization._fuse_conv_bn_eval(conv, b), fuse_conv_bn_eval(conv, b)
        _same_module(ours, theirs, orig=conv)
        # torch's fused Parameters: always trainable on 1.13, as trainable as the conv's on 2.x
        assert ours.weight.requires_grad == theirs.weight.requires_grad
        assert ours.bias.requires_grad == theirs.bias.requires_grad


def test_fused_conv_plain_extra_state_is_copied_like_deepcopy():
    torch.manual_seed(3)
    conv, bn = _conv_bn(2, dict(), dict())
    shared = [1, 2.5, 'a']
    conv.tag = 'x'
    conv.sizes = shared
    conv.sizes_again = shared  # one object twice: deepcopy copies it once
    conv.options = {'k': 1, 'j': None}
    conv.names = {'p', 'q'}
    conv.nested_tuple = (1, [2, 3])  # not plain: torch's function is used (which copies the list)
    ours, theirs = optimization._fuse_conv_bn_eval(conv, bn), fuse_conv_bn_eval(conv, bn)
    _same_module(ours, theirs, orig=conv)
    assert ours.nested_tuple is not conv.nested_tuple and ours.nested_tuple[1] is not conv.nested_tuple[1]
    del conv.nested_tuple
    ours, theirs = optimization._fuse_conv_bn_eval(conv, bn), fuse_conv_bn_eval(conv, bn)
    _same_module(ours, theirs, orig=conv)
    assert ours.sizes is ours.sizes_again and theirs.sizes is theirs.sizes_again
    assert ours.sizes is not shared


def _hook(module, inputs, output):
    return output * 2


@pytest.mark.parametrize('extra', ['forward_hook', 'buffer', 'tensor_attr', 'object_attr', 'third_param',
                                   'nested_list', 'nonpersistent_bias', 'old_checkpoint'])
def test_fused_conv_other_state_same_as_torch(extra):
    torch.manual_seed(4)
    conv, bn = _conv_bn(2, dict(), dict())
    if extra == 'forward_hook':
        conv.register_forward_hook(_hook)
    elif extra == 'buffer':
        conv.register_buffer('scale', torch.randn(3))
    elif extra == 'tensor_attr':
        conv.plain = torch.randn(2)
    elif extra == 'object_attr':
        conv.cfg = object()
    elif extra == 'third_param':
        conv.extra = nn.Parameter(torch.randn(2))
    elif extra == 'nested_list':
        conv.cfg = [[1], [2]]
    elif extra == 'nonpersistent_bias':
        conv._non_persistent_buffers_set.add('bias')
    elif extra == 'old_checkpoint':  # state from before these attributes: __setstate__ adds them
        del conv.padding_mode
        del conv._state_dict_hooks
    ours, theirs = optimization._fuse_conv_bn_eval(conv, bn), fuse_conv_bn_eval(conv, bn)
    assert type(ours) is type(theirs)
    assert list(vars(ours)) == list(vars(theirs))
    assert list(ours._parameters) == list(theirs._parameters)
    assert list(ours._buffers) == list(theirs._buffers)
    for name, t in list(ours._parameters.items()) + list(ours._buffers.items()):
        other = getattr(theirs, name)
        assert torch.equal(t, other) and t.requires_grad == other.requires_grad
    assert list(ours._forward_hooks.values()) == list(theirs._forward_hooks.values())
    assert ours._non_persistent_buffers_set == theirs._non_persistent_buffers_set
    assert ours.padding_mode == theirs.padding_mode == 'zeros'
    for key, value in vars(ours).items():  # copies, as deepcopy makes
        if type(value) not in (type(None), bool, int, float, str, tuple):
            assert value is not vars(conv).get(key), key
    for key, value in list(ours._parameters.items()) + list(ours._buffers.items()):
        assert value is not None and value is not getattr(conv, key)
    x = torch.randn(1, 4, 5, 5)
    assert torch.equal(ours(x), theirs(x))


def test_fused_conv_respects_copyreg():
    conv, bn = _conv_bn(2, dict(), dict())
    calls = []

    def reduce_conv(c):
        calls.append(c)
        return c.__reduce_ex__(4)

    copyreg.pickle(nn.Conv2d, reduce_conv)
    try:
        fused = optimization._fuse_conv_bn_eval(conv, bn)
    finally:
        del copyreg.dispatch_table[nn.Conv2d]
    assert calls == [conv]  # the copy went through deepcopy, which uses the registered reducer
    _same_module(fused, fuse_conv_bn_eval(conv, bn), orig=conv)


def test_fused_conv_training_asserts():
    conv, bn = _conv_bn(2, dict(), dict())
    for c, b in ((conv.train(), bn), (conv.eval(), bn.train())):
        with pytest.raises(AssertionError, match='Fusion only for eval'):
            fuse_conv_bn_eval(c, b)
        with pytest.raises(AssertionError, match='Fusion only for eval'):
            optimization._fuse_conv_bn_eval(c, b)


# ---------------------------------------------------------------------------
# fuse on whole models, against torch.fx's fuse
# ---------------------------------------------------------------------------

class PairNet(nn.Module):
    def __init__(self, dim, conv_kw, bn_kw):
        super().__init__()
        conv_cls, bn_cls = PAIRS[dim]
        self.conv = conv_cls(4, 8, 3, **conv_kw)
        self.bn = bn_cls(8, **bn_kw)
        self.body = nn.Sequential(conv_cls(8, 8, 1, bias=False), bn_cls(8), nn.ReLU(), conv_cls(8, 6, 1), bn_cls(6))

    def forward(self, x):
        return self.body(torch.relu(self.bn(self.conv(x))))


@pytest.mark.parametrize('inplace', [False, True])
@pytest.mark.parametrize('conv_kw', CONV_VARIANTS[:3] + CONV_VARIANTS[6:8] + CONV_VARIANTS[9:])
@pytest.mark.parametrize('dim', [1, 2, 3])
def test_fuse_same_as_torch_fx(dim, conv_kw, inplace):
    torch.manual_seed(dim)
    model = _randomize(PairNet(dim, conv_kw, {})).eval()
    twin = copy.deepcopy(model)
    snap = _snapshot(model)
    ours = optimization.fuse(model, inplace=inplace)
    theirs = toptimization.fuse(twin, inplace=inplace)
    _same_result(ours, theirs)
    assert [n for n, m in ours.named_modules() if type(m) is PAIRS[dim][0]] == ['conv', 'body.0', 'body.3']
    assert not [m for m in ours.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]  # all fused
    x = torch.randn(2, 4, *[7] * dim)
    assert torch.equal(ours(x), theirs(x))
    torch.testing.assert_close(ours(x), model(x))
    _check_untouched(model, snap)
    if not inplace:  # the result shares nothing with the caller's model
        ids = {id(t) for t in model.parameters()} | {id(t) for t in model.buffers()}
        assert not [t for t in list(ours.parameters()) + list(ours.buffers()) if id(t) in ids]
        assert not {id(m) for m in ours.modules()} & {id(m) for m in model.modules()}


@pytest.mark.parametrize('src', ['fxcpp', 'torch.fx'])
def test_fuse_of_a_graph_module(src):
    torch.manual_seed(5)
    model = _randomize(PairNet(2, {}, {})).eval()
    gm = fx.symbolic_trace(model) if src == 'fxcpp' else tfx.symbolic_trace(model)
    snap = _snapshot(gm)
    ours, theirs = optimization.fuse(gm), toptimization.fuse(copy.deepcopy(gm))
    _same_result(ours, theirs)
    x = torch.randn(2, 4, 6, 6)
    assert torch.equal(ours(x), theirs(x))
    _check_untouched(gm, snap)


class Shared(nn.Module):
    """conv1's output feeds bn1 and an add: not fused (torch: only a conv with one user is)."""
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 3, 1)
        self.bn1 = nn.BatchNorm2d(3)
        self.conv2 = nn.Conv2d(3, 3, 1)
        self.bn2 = nn.BatchNorm2d(3)

    def forward(self, x):
        y = self.conv1(x)
        return self.bn1(y) + y, self.bn2(self.conv2(x))


class SameConvTwice(nn.Module):
    """One conv module called twice, each call followed by a bn: both calls have one user, so
    torch fuses the module with bn1 and that again with bn2, and both calls run the result (so
    neither output is the model's: torch.fx's behaviour, which fxcpp keeps)."""
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 1)
        self.bn1 = nn.BatchNorm2d(3)
        self.bn2 = nn.BatchNorm2d(3)

    def forward(self, x):
        return self.bn1(self.conv(x)), self.bn2(self.conv(x))


class NoStats(nn.Module):
    """bn without running stats (batch statistics at eval too): not fused."""
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(3, 3, 1)
        self.bn = nn.BatchNorm1d(3, track_running_stats=False)
        self.conv2 = nn.Conv3d(3, 3, 1)
        self.bn2 = nn.BatchNorm3d(3)

    def forward(self, x, z):
        return self.bn(self.conv(x)), self.bn2(self.conv2(z))


class Mismatch(nn.Module):
    """conv2d + bn1d / conv1d + bn2d, conv + relu + bn, a bn on a non-module input and a conv
    weight read by get_attr: none of those is a pattern (the conv read stays the fused one)."""
    def __init__(self):
        super().__init__()
        self.c2 = nn.Conv2d(3, 3, 1)
        self.b1 = nn.BatchNorm1d(3)
        self.c1 = nn.Conv1d(3, 3, 1)
        self.b2 = nn.BatchNorm2d(3)
        self.c = nn.Conv1d(3, 3, 1)
        self.b = nn.BatchNorm1d(3)
        self.lone = nn.BatchNorm1d(3)
        self.f = nn.Conv1d(3, 3, 1)
        self.fb = nn.BatchNorm1d(3)

    def forward(self, x, y):
        a = self.b1(self.c2(x).flatten(2))
        b = self.b2(self.c1(y).unsqueeze(-1))
        c = self.b(torch.relu(self.c(y)))
        d = self.fb(self.f(y)) * self.f.weight.sum()
        return a, b, c, self.lone(y), d


def _check_model(model, inputs, fused_types, model_outputs=None):
    """fuse(model) against torch.fx's, with and without inplace; ``model_outputs``: the outputs
    (indices) that also equal the model's own (all when None)."""
    model = _randomize(model).eval()
    for inplace in (False, True):
        twin = copy.deepcopy(model)
        snap = _snapshot(model)
        ours = optimization.fuse(model, inplace=inplace)
        theirs = toptimization.fuse(twin, inplace=inplace)
        _same_result(ours, theirs)
        assert {n: type(m).__name__ for n, m in ours.named_children()} == fused_types
        for i, (a, b, c) in enumerate(zip(ours(*inputs), theirs(*inputs), model(*inputs))):
            assert torch.equal(a, b)
            if model_outputs is None or i in model_outputs:
                torch.testing.assert_close(a, c)
        _check_untouched(model, snap)


def test_fuse_conv_with_two_users_is_not_fused():
    torch.manual_seed(6)
    _check_model(Shared(), (torch.randn(2, 3, 4, 4),),
                 {'conv1': 'Conv2d', 'bn1': 'BatchNorm2d', 'conv2': 'Conv2d'})


def test_fuse_same_conv_called_twice():
    torch.manual_seed(7)
    _check_model(SameConvTwice(), (torch.randn(2, 3, 4, 4),), {'conv': 'Conv2d'}, model_outputs=())


def test_fuse_bn_without_running_stats_is_not_fused():
    torch.manual_seed(8)
    _check_model(NoStats(), (torch.randn(2, 3, 5), torch.randn(2, 3, 2, 2, 2)),
                 {'conv': 'Conv1d', 'bn': 'BatchNorm1d', 'conv2': 'Conv3d'})


def test_fuse_non_patterns_are_kept():
    torch.manual_seed(9)
    _check_model(Mismatch(), (torch.randn(2, 3, 4, 4), torch.randn(2, 3, 5)),
                 {'c2': 'Conv2d', 'b1': 'BatchNorm1d', 'c1': 'Conv1d', 'b2': 'BatchNorm2d', 'c': 'Conv1d',
                  'b': 'BatchNorm1d', 'lone': 'BatchNorm1d', 'f': 'Conv1d'},
                 model_outputs=(0, 1, 2, 3))  # (the last reads the fused conv's weight)


def test_fuse_in_training_mode_asserts_like_torch_fx():
    model = PairNet(2, {}, {})  # training
    with pytest.raises(AssertionError, match='Fusion only for eval'):
        toptimization.fuse(copy.deepcopy(model))
    with pytest.raises(AssertionError, match='Fusion only for eval'):
        optimization.fuse(model)


def test_fuse_keeps_training_flags():
    torch.manual_seed(10)
    model = _randomize(PairNet(2, {}, {})).eval()
    model.train()  # the root (and the relu) training, the convs and bns eval: fusable
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.BatchNorm2d)):
            m.eval()
    ours, theirs = optimization.fuse(model), toptimization.fuse(copy.deepcopy(model))
    _same_result(ours, theirs)
    assert ours.training and theirs.training
    assert [m.training for m in ours.modules()] == [m.training for m in theirs.modules()]


def test_fuse_inplace_shares_like_torch_fx():
    """With inplace=True the result holds the caller's unfused modules themselves (as torch.fx's
    does), and the fused convs are new; without it, copies."""
    torch.manual_seed(11)
    model = _randomize(Mismatch()).eval()
    for inplace in (False, True):
        twin = copy.deepcopy(model)
        ours = optimization.fuse(model, inplace=inplace)
        theirs = toptimization.fuse(twin, inplace=inplace)
        ours_shared = [n for n, m in ours.named_modules() if n and m is model.get_submodule(n)]
        theirs_shared = [n for n, m in theirs.named_modules() if n and m is twin.get_submodule(n)]
        assert ours_shared == theirs_shared
        assert bool(ours_shared) == inplace
        assert ours.f is not model.f and theirs.f is not twin.f  # fused
        _same_module(ours.f, theirs.f, orig=model.f)


# ---- optimize_for_inference and the MKL-DNN autotuner ---------------------------------------

def _small_resnet():
    import torchvision
    torch.manual_seed(0)
    return torchvision.models.resnet18().eval()


@pytest.mark.parametrize('config', [
    None,
    {'mkldnn_layout_optimize': False},
    {'remove_dropout': False, 'conv_bn_fuse': False},
    {'mkldnn_layout_optimize': {'heuristic': lambda g: True}},
])
def test_optimize_for_inference_matches_torch_fx(config):
    from torch.fx.experimental import optimization as torch_opt
    from fxcpp.experimental import optimization as opt
    model = _small_resnet()
    x = torch.randn(2, 3, 48, 48)
    with torch.no_grad():
        want = model(x)
    # Without conv_bn_fuse nothing copies the model first, and torch.fx's MKL-DNN pass swaps
    # modules of the caller's model: each side gets its own.
    ref = torch_opt.optimize_for_inference(_small_resnet(), config)
    ours = opt.optimize_for_inference(model, config)
    assert isinstance(ours, fx.GraphModule)
    assert ours.code == ref.code
    with torch.no_grad():
        torch.testing.assert_close(ours(x), ref(x))
        torch.testing.assert_close(ours(x), want, rtol=1e-4, atol=1e-4)


def test_optimize_for_inference_bad_config_errors_like_torch_fx():
    from torch.fx.experimental import optimization as torch_opt
    from fxcpp.experimental import optimization as opt
    for config in ({'mkldnn_layout_optimize': 3}, {'mkldnn_layout_optimize': {}}):
        with pytest.raises(RuntimeError) as ref:
            torch_opt.optimize_for_inference(_small_resnet(), config)
        with pytest.raises(RuntimeError) as ours:
            opt.optimize_for_inference(_small_resnet(), config)
        assert str(ours.value) == str(ref.value)


def test_gen_mkl_autotuner_works_where_torch_fx_breaks():
    from torch.fx.experimental import optimization as torch_opt
    from fxcpp.experimental import optimization as opt
    model = _small_resnet()
    x = torch.randn(2, 3, 48, 48)
    # torch.fx 1.13's autotuner reads node.shape, which its ShapeProp no longer sets.
    with pytest.raises(AttributeError, match="no attribute 'shape'"):
        torch_opt.optimize_for_inference(
            model, {'mkldnn_layout_optimize': {'heuristic': torch_opt.gen_mkl_autotuner(x, iters=1, warmup=0)}})
    tuner = opt.gen_mkl_autotuner(x, iters=1, warmup=0)
    decisions = []

    def recording(graph):
        decisions.append(tuner(graph))
        return decisions[-1]

    ours = opt.optimize_for_inference(model, {'mkldnn_layout_optimize': {'heuristic': recording}})
    assert decisions and all(isinstance(d, bool) for d in decisions)
    # The same decisions replayed through torch.fx's pass give the same module.
    replay = iter(decisions)
    ref = torch_opt.optimize_for_inference(model, {'mkldnn_layout_optimize': {'heuristic': lambda g: next(replay)}})
    assert ours.code == ref.code
    with torch.no_grad():
        torch.testing.assert_close(ours(x), model(x), rtol=1e-4, atol=1e-4)
