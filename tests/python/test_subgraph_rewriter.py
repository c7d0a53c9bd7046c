"""replace_pattern: differential tests against the installed torch.fx (1.13.1 or 2.x).

For each case the same module is traced with both libraries and rewritten;
the returned matches (anchor, nodes_map: compared by names, in order), the
generated code, the rewritten module's outputs and any exception must agree.
"""
import operator
import sys

import pytest
import torch
import torch.fx as tfx
import torch.fx.subgraph_rewriter as t_sr
import torch.nn as nn
import torch.nn.functional as F

import fxcpp as fx
import fxcpp.subgraph_rewriter as f_sr
from torch2 import TORCH2


LIBS = [(tfx, t_sr), (fx, f_sr)]


def wrapped_silu(x):
    return F.silu(x)


def fused_add_relu(x, y):
    return torch.relu(x + y)


tfx.wrap('wrapped_silu')
tfx.wrap('fused_add_relu')


def match_repr(ms):
    out = []
    for m in ms:
        nm = [(k.name, v.name if hasattr(v, 'op') else repr(v)) for k, v in m.nodes_map.items()]
        out.append((m.anchor.name, nm))
    return out


def canon(v):
    if isinstance(v, torch.Tensor):
        return v.detach()
    if isinstance(v, (list, tuple)):
        return type(v)(canon(x) for x in v)
    return v


def rewrite_both(make_module, pattern, replacement, inputs=None, prepare=None):
    """Run replace_pattern with both libraries; return [(matches, code, outputs) or error]."""
    results = []
    for lib, sr in LIBS:
        torch.manual_seed(0)
        gm = lib.symbolic_trace(make_module())
        if prepare is not None:
            gm = prepare(lib, gm)
        try:
            ms = sr.replace_pattern(gm, pattern, replacement)
        except Exception as e:  # noqa: B902
            results.append(('error', type(e).__name__, str(e)))
            continue
        gm.graph.lint()
        outs = None
        if inputs is not None:
            with torch.no_grad():
                outs = canon(gm(*inputs()))
        results.append((match_repr(ms), gm.code, outs))
    return results


def assert_same(results):
    a, b = results
    assert a[:2] == b[:2], f"\ntorch.fx: {a[:2]}\nfxcpp:    {b[:2]}"
    if a[0] != 'error' and a[2] is not None:
        torch.testing.assert_close(a[2], b[2])


# ---------------------------------------------------------------------------
# Small cases

class CatSum(nn.Module):
    def forward(self, x, w1, w2):
        m1 = torch.cat([w1, w2]).sum()
        m2 = torch.cat([w1, w2]).sum()
        return x + torch.max(m1) + torch.max(m2)


def cat_sum_pattern(w1, w2):
    return torch.cat([w1, w2]).sum()


def cat_sum_replacement(w1, w2):
    return torch.stack([w1, w2])


def fn_module(f):
    class FnMod(nn.Module):
        def forward(self, *args):
            return f(*args)
    return lambda: _Wrap(f)


class _Wrap(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.f = f

    def forward(self, x, y):
        return self.f(x, y)


def two():
    return (torch.randn(3, 4), torch.randn(3, 4))


CASES = {
    'docstring_cat_sum': (CatSum, cat_sum_pattern, cat_sum_replacement,
                          lambda: (torch.randn(2), torch.randn(2), torch.randn(2))),
    'no_candidate_keyerror': (lambda: _Wrap(lambda x, y: torch.relu(x) + y),
                              lambda x: torch.sigmoid(x), lambda x: torch.neg(x), None),
    'placeholder_binds_literal': (lambda: _Wrap(lambda x, y: torch.relu(x) + 1 + y),
                                  lambda a, b: a + b, lambda a, b: a * b, None),
    'same_value_twice_no_match': (lambda: _Wrap(lambda x, y: (x + x) * y),
                                  lambda a, b: a + b, lambda a, b: a - b, None),
    'chained_matches': (lambda: _Wrap(lambda x, y: torch.relu(torch.relu(x + y) + y) + torch.relu(x + y)),
                        lambda a, b: torch.relu(a + b), lambda a, b: torch.sigmoid(a - b), None),
    'overlapping': (lambda: _Wrap(lambda x, y: x.relu().relu().relu().relu().relu() + y),
                    lambda a: a.relu().relu(), lambda a: a.neg(), None),
    'not_contained': (lambda: _Wrap(lambda x, y: (torch.neg(x).relu(), torch.neg(x) * 2)),
                      lambda a: torch.neg(a).relu(), lambda a: a.tanh(), None),
    'leaking_internal': (lambda: _Wrap(lambda x, y: [(t := torch.neg(x)), t.relu()][1] + t),
                         lambda a: torch.neg(a).relu(), lambda a: a.tanh(), None),
    'multi_output': (lambda: _Wrap(lambda x, y: ((x + y).relu(), (x + y).sigmoid())),
                     lambda a, b: ((c := a + b).relu(), c.sigmoid()),
                     lambda a, b: ((c := a * b).neg(), c.tanh()), None),
    'multi_output_shared': (lambda: _Wrap(lambda x, y: ((s := x + y).relu(), s.sigmoid())),
                            lambda a, b: ((c := a + b).relu(), c.sigmoid()),
                            lambda a, b: ((c := a * b).neg(), c.tanh()), None),
    'kwargs_equal': (lambda: _Wrap(lambda x, y: torch.sum(x, dim=1, keepdim=True) + torch.sum(y, dim=0)),
                     lambda a: torch.sum(a, dim=1, keepdim=True),
                     lambda a: torch.mean(a, dim=1, keepdim=True), None),
    'kwargs_differ': (lambda: _Wrap(lambda x, y: torch.sum(x, dim=1, keepdim=True) + torch.sum(y, dim=0)),
                      lambda a: torch.sum(a, dim=1), lambda a: torch.mean(a, dim=1), None),
    # A placeholder bound to a literal compares later literals with Python's ==:
    # 2**53 + 1 != 2.0**53 (exact, not through a rounded float).
    'placeholder_literal_int_float_exact': (
        lambda: _Wrap(lambda x, y: (x + 9007199254740993) + 9007199254740992.0 + y),
        lambda a, c: (a + c) + c, lambda a, c: a - c, two),
    'literal_kind_differs': (lambda: _Wrap(lambda x, y: x.transpose(0, 1) + y.transpose(0.0, 1)),
                             lambda a: a.transpose(0, 1), lambda a: a.t(), None),
    'flattened_args': (lambda: _Wrap(lambda x, y: torch.cat((x, y), 0) + torch.cat([x, y], 0)),
                       lambda a, b: torch.cat([a, b], 0), lambda a, b: torch.stack([a, b], 0), None),
    'method_and_getitem': (lambda: _Wrap(lambda x, y: x.view(-1)[1:3] + y.view(-1)[1:3]),
                           lambda a: a.view(-1)[1:3], lambda a: a.flatten()[1:3], two),
    'silu_small': (lambda: _Wrap(lambda x, y: x * torch.sigmoid(x) + (y + 1) * torch.sigmoid(y + 1)),
                   lambda a: a * torch.sigmoid(a), lambda a: wrapped_silu(a), two),
    'cycle_filtered': (lambda: _Wrap(lambda x, y: (lambda a: (a, a + torch.neg(a)))(torch.relu(x))),
                       lambda a, b: ((c := torch.relu(a)), c + b),
                       lambda a, b: ((c := torch.tanh(a)), c * b), None),
    'replacement_unused_param': (lambda: _Wrap(lambda x, y: torch.neg(x) + torch.relu(y)),
                                 lambda a, b: torch.neg(a) + torch.relu(b), lambda a, b: torch.relu(a), two),
}


@pytest.mark.parametrize('case', sorted(CASES))
def test_small_cases(case):
    make, pat, rep, inputs = CASES[case]
    assert_same(rewrite_both(make, pat, rep, inputs))


def test_dead_code_pattern():
    def pat(a, b):
        return torch.neg(a)
    assert_same(rewrite_both(lambda: _Wrap(lambda x, y: torch.neg(x)), pat, lambda a, b: a))


def test_module_pattern_and_replacement_submodules():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            return self.lin(x).relu()

    class Pat(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            return self.lin(x).relu()

    class Rep(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin2 = nn.Linear(3, 3)

        def forward(self, x):
            return self.lin2(x).sigmoid()

    res = []
    for lib, sr in LIBS:
        torch.manual_seed(0)
        gm = lib.symbolic_trace(M())
        torch.manual_seed(1)
        ms = sr.replace_pattern(gm, Pat(), Rep())
        x = torch.randn(2, 3)
        res.append((match_repr(ms), gm.code, sorted(n for n, _ in gm.named_modules()), gm(x)))
    assert res[0][:3] == res[1][:3]
    torch.testing.assert_close(res[0][3], res[1][3])


# ---------------------------------------------------------------------------
# torchvision models

def relu_modules_to_calls(lib, gm):
    """Transformer: ReLU modules -> torch.relu calls (so relu(add) patterns apply)."""
    class Norm(lib.Transformer):
        def call_module(self, target, args, kwargs):
            if isinstance(self.fetch_attr(target), nn.ReLU):
                return torch.relu(args[0])
            return super().call_module(target, args, kwargs)
    return Norm(gm).transform()


def silu_modules_to_mul(lib, gm):
    class Norm(lib.Transformer):
        def call_module(self, target, args, kwargs):
            if isinstance(self.fetch_attr(target), nn.SiLU):
                return args[0] * torch.sigmoid(args[0])
            return super().call_module(target, args, kwargs)
    return Norm(gm).transform()


def image():
    torch.manual_seed(3)
    return (torch.randn(1, 3, 32, 32),)


def test_resnet_relu_add():
    torchvision = pytest.importorskip('torchvision')
    results = rewrite_both(lambda: torchvision.models.resnet18().eval(),
                           lambda x, y: torch.relu(x + y), lambda x, y: fused_add_relu(x, y),
                           image, prepare=relu_modules_to_calls)
    assert len(results[0][0]) == 8
    assert_same(results)


def test_resnet_conv_bn_collapse():
    torchvision = pytest.importorskip('torchvision')

    class Pat(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)

        def forward(self, x):
            return self.bn1(self.conv1(x))

    class Rep(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)

        def forward(self, x):
            return self.conv1(x)

    results = rewrite_both(lambda: torchvision.models.resnet18().eval(), Pat(), Rep(), image)
    assert len(results[0][0]) == 1
    assert_same(results)


def test_efficientnet_silu():
    torchvision = pytest.importorskip('torchvision')
    results = rewrite_both(lambda: torchvision.models.efficientnet_b0().eval(),
                           lambda x: x * torch.sigmoid(x), lambda x: wrapped_silu(x),
                           image, prepare=silu_modules_to_mul)
    assert len(results[0][0]) > 10
    assert_same(results)


# ---------------------------------------------------------------------------
# Size: no recursion limit

# Many distinct unary ops keep torch.fx's (quadratic) name uniquification cheap.
_UNARY = [getattr(torch, n) for n in (
    'relu', 'neg', 'sigmoid', 'tanh', 'sin', 'cos', 'exp', 'abs', 'ceil', 'floor', 'round', 'trunc', 'sign',
    'sqrt', 'rsqrt', 'reciprocal', 'square', 'erf', 'erfc', 'expm1', 'log1p', 'sinh', 'cosh', 'asin', 'acos',
    'atan', 'asinh', 'frac', 'deg2rad', 'rad2deg', 'exp2', 'log', 'log2', 'log10', 'lgamma', 'digamma', 'i0',
    'sgn', 'fix', 'positive')]


def chain(length):
    def f(x):
        for i in range(length):
            x = _UNARY[i % len(_UNARY)](x)
        return x
    return f


def chain_graph(lib, pattern_fn):
    def g(x):
        return torch.atan2(pattern_fn(torch.mul(x, 2)), x)
    return lib.symbolic_trace(g)


def test_long_chain_pattern_torchfx_recursion_error():
    pat = chain(10000)
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        with pytest.raises(RecursionError):
            t_sr.replace_pattern(chain_graph(tfx, pat), pat, lambda x: torch.sigmoid(x))
    finally:
        sys.setrecursionlimit(old)
    gm = chain_graph(fx, pat)
    ms = f_sr.replace_pattern(gm, pat, lambda x: torch.sigmoid(x))
    assert len(ms) == 1 and len(ms[0].nodes_map) == 10001
    assert [n.op for n in gm.graph.nodes] == ['placeholder'] + ['call_function'] * 3 + ['output']


def test_very_long_chain_pattern():
    pat = chain(100000)
    gm = chain_graph(fx, pat)
    ms = f_sr.replace_pattern(gm, pat, lambda x: torch.sigmoid(x))
    assert len(ms) == 1 and len(ms[0].nodes_map) == 100001
    x = torch.randn(4)
    torch.testing.assert_close(gm(x), torch.atan2(torch.sigmoid(x * 2), x))


def test_subgraph_matcher_api():
    from fxcpp.passes.utils.matcher_utils import SubgraphMatcher as FM
    from torch.fx.passes.utils.matcher_utils import SubgraphMatcher as TM

    def f(x, y):
        return torch.relu(x + y) * torch.relu(y + 1)

    def pat(a, b):
        return torch.relu(a + b)

    res = []
    for (lib, _), M in zip(LIBS, (TM, FM)):
        g = lib.symbolic_trace(f).graph
        p = lib.symbolic_trace(pat).graph
        for kw in ({}, {'match_placeholder': True}, {'remove_overlapping_matches': False}, {'match_output': True}):
            ms = M(p, **kw).match(g)
            res.append([([a.name for a in m.anchors],
                         [(k.name, getattr(v, 'name', v)) for k, v in m.nodes_map.items()],
                         [getattr(v, 'name', v) for v in m.placeholder_nodes],
                         [getattr(v, 'name', v) for v in m.returning_nodes]) for m in ms])
    half = len(res) // 2
    assert res[:half] == res[half:]


@pytest.mark.skipif(not TORCH2, reason='GraphModule node hooks are torch.fx 2.x API')
def test_replace_pattern_calls_node_hooks_as_torch_fx():
    """replace_pattern on a module with node hooks (torch's GraphTransformObserver registers them)
    calls them for the nodes it creates, erases and rewires, as torch.fx 2.x's does (the core's
    one-call rewrite would not: such modules take the Python rewriter)."""
    class M(torch.nn.Module):
        def forward(self, x):
            val = torch.neg(x)
            return torch.add(val, val)

    def pattern(x):
        return torch.neg(x)

    def replacement(x):
        return torch.relu(x)

    seen = []
    for lib in (torch.fx, fx):
        traced = lib.symbolic_trace(M())
        events = []
        traced._register_create_node_hook(lambda n: events.append(('create', n.name)))
        traced._register_erase_node_hook(lambda n: events.append(('erase', n.name)))
        traced._register_replace_node_hook(lambda old, new, user: events.append(('replace', old.name, new, user.name)))
        lib.subgraph_rewriter.replace_pattern(traced, pattern, replacement)
        seen.append((events, traced.code))
    assert seen[1] == seen[0]
    assert ('create', 'relu') in seen[1][0] and ('erase', 'neg') in seen[1][0]
