"""Tests for the fxcpp symbolic tracing front end (proxy.py / _symbolic_trace.py / _pytree.py).

Most tests trace the same program with ``torch.fx`` (torch 1.13.1, the behavioural
reference) and with ``fxcpp`` and compare ``gm.code``, ``str(gm.graph)``, outputs and
error types/messages.  Where torch.fx 1.13 is broken on Python 3.11 (Proxy
unpacking, root functions with ``*args``/``**kwargs``/keyword-only arguments,
``trace_asserts``) the tests check fxcpp against eager execution instead and say so.
"""
import collections
import copy
import math
import operator
import sys
import textwrap
import types
import warnings
from math import sqrt
from typing import NamedTuple

import pytest
import torch
import torch.fx

import fxcpp as fx
from torch2 import TORCH2
import fxcpp._pytree as fx_pytree
import fxcpp._symbolic_trace as fx_st
import fxcpp.proxy as fx_proxy

PY311 = sys.version_info >= (3, 11)
# torch.fx 1.13's tracer breaks on CPython 3.11 bytecode in the ways the tests below note;
# torch.fx 2.x traces those cases.
FX_BROKEN_ON_PY311 = PY311 and not TORCH2

torch.manual_seed(0)


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

def _fresh(root):
    """Independent copy of a root for each library (tracing may add attributes)."""
    if isinstance(root, torch.nn.Module):
        return copy.deepcopy(root)
    return root


def trace_both(root, concrete_args=None):
    ref = torch.fx.symbolic_trace(_fresh(root), concrete_args=concrete_args)
    ours = fx.symbolic_trace(_fresh(root), concrete_args=concrete_args)
    return ref, ours


def assert_same_outputs(a, b):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor)
        assert a.shape == b.shape
        assert torch.allclose(a, b, atol=1e-5, equal_nan=True)
    elif isinstance(a, (tuple, list)):
        assert type(a) == type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            assert_same_outputs(x, y)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            assert_same_outputs(a[k], b[k])
    else:
        assert a == b


def check_same(root, inputs=(), concrete_args=None, kwargs=None):
    kwargs = kwargs or {}
    ref, ours = trace_both(root, concrete_args)
    assert ours.code == ref.code
    assert str(ours.graph) == str(ref.graph)
    assert type(ours).__name__ == type(ref).__name__
    if inputs is not None:
        assert_same_outputs(ref(*inputs, **kwargs), ours(*inputs, **kwargs))
    return ref, ours


def error_of(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return type(e).__name__, str(e)
    return None


def make_module(name, source):
    """Create an importable module from source (for wrap(), which must be called
    at module scope and patches that module's globals)."""
    mod = types.ModuleType(name)
    mod.__file__ = f"<{name}>"
    sys.modules[name] = mod
    exec(compile(textwrap.dedent(source), mod.__file__, "exec"), mod.__dict__)
    return mod


# ---------------------------------------------------------------------------
# public API / layout
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("ref_mod, our_mod", [
    (torch.fx.proxy, fx_proxy),
    (torch.fx._symbolic_trace, fx_st),
    (torch.fx._pytree, fx_pytree),
])
def test_module_names_mirror_torch_fx(ref_mod, our_mod):
    missing = [n for n in dir(ref_mod) if not n.startswith("__") and not hasattr(our_mod, n)]
    assert missing == []


def test_top_level_names():
    for n in ["symbolic_trace", "Tracer", "wrap", "PH", "ProxyableClassMeta", "Proxy", "Graph", "GraphModule"]:
        assert hasattr(fx, n)
    assert fx.Proxy is fx_proxy.Proxy
    assert fx.Tracer is fx_st.Tracer
    assert issubclass(fx_proxy.TraceError, ValueError)
    assert issubclass(fx_proxy.Attribute, fx_proxy.Proxy)
    assert issubclass(fx_proxy.ParameterProxy, fx_proxy.Proxy)
    assert issubclass(fx_proxy.GraphAppendingTracer, fx_proxy.TracerBase)
    assert issubclass(fx.Tracer, fx_proxy.TracerBase)
    assert repr(fx.PH) == "PH"


# ---------------------------------------------------------------------------
# examples from the documentation (seeds)
# ---------------------------------------------------------------------------

class ActivationModule(torch.nn.Module):
    def __init__(self, do_activation: bool = False):
        super().__init__()
        self.do_activation = do_activation
        self.linear = torch.nn.Linear(32, 32)

    def forward(self, x):
        x = self.linear(x)
        # static control flow
        if self.do_activation:
            x = torch.relu(x)
        return x


class TopkModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.param = torch.nn.Parameter(torch.rand(3, 4))
        self.linear = torch.nn.Linear(4, 5)

    def forward(self, x):
        return torch.topk(torch.sum(self.linear(x + self.linear.weight).relu(), dim=-1), 3)


class MySpecialSubmodule(torch.nn.Module):
    def forward(self, x):
        return torch.neg(x)


class LeafExample(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 4)
        self.submod = MySpecialSubmodule()

    def forward(self, x):
        return self.submod(self.linear(x))


class ReluOnes(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) + torch.ones(3, 4)


class AddModule(torch.nn.Module):
    def forward(self, x, y):
        return torch.add(x, y)


class SampleM(torch.nn.Module):
    def forward(self, x, y):
        return x + y


def flag_fn(x, flag):
    if flag:
        return x
    else:
        return x * 2


@pytest.mark.parametrize("root, inputs", [
    (ActivationModule(False), (torch.randn(2, 32),)),
    (ActivationModule(True), (torch.randn(2, 32),)),
    (TopkModule(), (torch.randn(5, 4),)),
    (LeafExample(), (torch.randn(2, 3),)),
    (ReluOnes(), (torch.randn(3, 4),)),
    (AddModule(), (torch.randn(3), torch.randn(3))),
    (SampleM(), (torch.randn(3), torch.randn(3))),
], ids=["no_act", "act", "topk", "leaf", "relu_ones", "add", "sample"])
def test_seed_examples(root, inputs):
    check_same(root, inputs)


def test_seed_activation_code():
    ours = fx.symbolic_trace(ActivationModule(True))
    assert "relu = torch.relu(linear)" in ours.code
    ours = fx.symbolic_trace(ActivationModule(False))
    assert "relu" not in ours.code


def test_seed_concrete_flag():
    ref, ours = check_same(flag_fn, (torch.randn(3), True), concrete_args={"flag": True})
    ref, ours = check_same(flag_fn, (torch.randn(3), False), concrete_args={"flag": False})


def test_seed_lambda_closure():
    def g(flag):
        return lambda x: flag_fn(x, flag)
    check_same(g(flag=True), (torch.randn(3),))
    check_same(g(flag=False), (torch.randn(3),))


def test_seed_custom_tracer_tensor_constant():
    class MyCustomTracer(fx.Tracer):
        pass

    class RefCustomTracer(torch.fx.Tracer):
        pass

    mod = ReluOnes()
    g_ours = MyCustomTracer().trace(mod)
    gm_ours = fx.GraphModule(mod, g_ours)
    mod2 = ReluOnes()
    g_ref = RefCustomTracer().trace(mod2)
    gm_ref = torch.fx.GraphModule(mod2, g_ref)
    assert gm_ours.code == gm_ref.code
    assert "_tensor_constant0" in gm_ours.code
    x = torch.randn(3, 4)
    assert torch.equal(gm_ours(x), gm_ref(x))


def test_seed_transform_replace_add():
    def transform(m, tracer_class):
        graph = tracer_class().trace(m)
        for node in graph.nodes:
            if node.op == 'call_function' and node.target == torch.add:
                node.target = torch.mul
        graph.lint()
        return graph

    x, y = torch.randn(3), torch.randn(3)
    g_ours = transform(AddModule(), fx.Tracer)
    g_ref = transform(AddModule(), torch.fx.Tracer)
    gm_ours = fx.GraphModule(AddModule(), g_ours)
    gm_ref = torch.fx.GraphModule(AddModule(), g_ref)
    assert gm_ours.code == gm_ref.code
    assert torch.equal(gm_ours(x, y), x * y)


# ---------------------------------------------------------------------------
# dynamic control flow / error paths
# ---------------------------------------------------------------------------

def dyn_sum(x):
    if x.sum() > 0:
        return torch.relu(x)
    else:
        return torch.neg(x)


def dyn_size(x):
    dim0 = x.size()[0]
    if dim0 == 3:
        return torch.relu(x)
    return torch.neg(x)


def uses_len(x):
    return x / sqrt(len(x))


def loops_over(x):
    out = 0
    for t in x:
        out = out + t
    return out


def loops_over_split(x):
    out = 0
    for t in x.split(2):
        out = out + t
    return out


def star_call(x):
    return torch.stack([*x])


def star_args_call(x):
    return torch.add(*x)


def double_star_call(x):
    return dict(**x)


ITER_MSG = (
    "Proxy object cannot be iterated. This can be attempted when the Proxy is used in a loop or as a "
    "*args or **kwargs function argument. See the torch.fx docs on pytorch.org for a more detailed "
    "explanation of what types of control flow can be traced, and check out the Proxy docstring for "
    "help troubleshooting Proxy iteration errors")


@pytest.mark.parametrize("fn", [dyn_sum, dyn_size, uses_len, loops_over, flag_fn])
def test_error_paths_match_torch_fx(fn):
    ref = error_of(lambda: torch.fx.symbolic_trace(fn))
    ours = error_of(lambda: fx.symbolic_trace(fn))
    assert ref is not None
    assert ours == ref


@pytest.mark.parametrize("fn", [loops_over_split, star_call, star_args_call, double_star_call])
def test_iteration_errors(fn):
    # On Python 3.11 torch.fx 1.13 crashes with IndexError here (it indexes the
    # instruction list with f_lasti // 2); fxcpp raises torch.fx's intended error.
    ours = error_of(lambda: fx.symbolic_trace(fn))
    assert ours == ("TraceError", ITER_MSG)
    ref = error_of(lambda: torch.fx.symbolic_trace(fn))
    if not PY311:
        assert ours == ref


def test_trace_error_message():
    with pytest.raises(fx_proxy.TraceError) as ei:
        fx.symbolic_trace(dyn_sum)
    assert str(ei.value) == 'symbolically traced variables cannot be used as inputs to control flow'


def test_len_message():
    with pytest.raises(RuntimeError) as ei:
        fx.symbolic_trace(uses_len)
    assert str(ei.value) == ("'len' is not supported in symbolic tracing by default. If you want "
                             "this call to be recorded, please call torch.fx.wrap('len') at module scope")


def test_iteration_message():
    with pytest.raises(fx_proxy.TraceError) as ei:
        fx.symbolic_trace(loops_over)
    assert str(ei.value) == ITER_MSG


# ---------------------------------------------------------------------------
# Proxy unpacking on Python 3.11 (torch.fx 1.13 is broken there)
# ---------------------------------------------------------------------------

def unpack_chunk(x):
    a, b = x.chunk(2)
    return a * 2 + b


def unpack_split3(x):
    q, k, v = x.split(2, dim=-1)
    return q + k * v


def unpack_nested(x):
    (a, b), c = (x.chunk(2), x)
    a2, b2 = c.chunk(2, dim=0)
    return a + b + a2 - b2


def unpack_in_loop(x):
    outs = []
    for i in range(2):
        a, b = x.chunk(2)
        outs.append(a + b + i)
    return torch.cat(outs)


def unpack_topk(x):
    values, indices = torch.topk(x, 2)
    return values, indices


def unpack_shape(x):
    n, c, h, w = x.shape
    return x.reshape(n, c * h * w) * w


def unpack_swap(x, y):
    (a, b) = torch.broadcast_tensors(x, y)
    return b - a


class KwargsCall(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(4, 2, batch_first=True)

    def forward(self, x):
        out, w = self.attn(x, x, x, need_weights=False)
        return out


class UnpackModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(6, 6)

    def forward(self, x):
        h = self.lin(x)
        a, b, c = h.chunk(3, dim=-1)
        return torch.cat([c, b, a], dim=-1)


@pytest.mark.parametrize("root, inputs, n_getitem", [
    (unpack_chunk, (torch.randn(4, 3),), 2),
    (unpack_split3, (torch.randn(2, 6),), 3),
    (unpack_nested, (torch.randn(4, 3),), 4),
    (unpack_in_loop, (torch.randn(4, 3),), 4),
    (unpack_topk, (torch.randn(5),), 2),
    (unpack_swap, (torch.randn(3, 1), torch.randn(1, 3)), 2),
    (UnpackModule(), (torch.randn(2, 6),), 3),
    (KwargsCall().eval(), (torch.randn(1, 3, 4),), 2),
    (unpack_shape, (torch.randn(2, 3, 4, 5),), 4),
], ids=["chunk", "split3", "nested", "loop", "topk", "broadcast", "module", "mha_leaf", "shape"])
def test_unpacking_py311(root, inputs, n_getitem):
    # torch.fx 1.13 fails on these under Python 3.11 (it indexes the instruction
    # list with f_lasti // 2); compare against eager execution instead.
    gm = fx.symbolic_trace(root)
    getitems = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is operator.getitem]
    assert len(getitems) == n_getitem
    assert_same_outputs(root(*inputs), gm(*inputs))
    if FX_BROKEN_ON_PY311:
        assert error_of(lambda: torch.fx.symbolic_trace(_fresh(root))) is not None


def test_unpacking_code():
    gm = fx.symbolic_trace(unpack_chunk)
    assert gm.code.strip().splitlines()[1:] == [
        "    chunk = x.chunk(2);  x = None",
        "    getitem = chunk[0]",
        "    getitem_1 = chunk[1];  chunk = None",
        "    mul = getitem * 2;  getitem = None",
        "    add = mul + getitem_1;  mul = getitem_1 = None",
        "    return add",
    ]


def test_unpack_star_is_error():
    def f(x):
        a, *b = x.chunk(3)
        return a
    ours = error_of(lambda: fx.symbolic_trace(f))
    assert ours[0] == "TraceError" and ours[1].startswith("Proxy object cannot be iterated")


def test_trace_asserts_as_the_installed_torch_fx():
    # Note [Bytecode sniffing]: on torch 2.x the same outcome as torch.fx on this interpreter
    # (on 3.11+ its pattern no longer matches, so both raise TraceError); torch.fx 1.13's
    # assert detection uses pre-3.11 bytecode offsets, ours works: compared with eager.
    class AssertTracer(fx.Tracer):
        trace_asserts = True

    class TorchAssertTracer(torch.fx.Tracer):
        trace_asserts = True

    # defined outside this file: pytest rewrites ``assert`` statements in tests
    f = make_module("_fxcpp_test_asserts", """
def f(x):
    assert x.sum() > 0
    return x + 1
""").f
    if TORCH2:
        theirs = error_of(lambda: TorchAssertTracer().trace(f))
        assert error_of(lambda: AssertTracer().trace(f)) == theirs
        if theirs is not None:
            return

    g = AssertTracer().trace(f)
    targets = [n.target for n in g.nodes if n.op == "call_function"]
    assert fx_proxy.assert_fn in targets
    gm = fx.GraphModule(torch.nn.Module(), g)
    x = torch.ones(3)
    assert torch.equal(gm(x), x + 1)
    with pytest.raises(AssertionError):
        gm(-x)
    # a plain ``if`` is still an error even with trace_asserts
    with pytest.raises(fx_proxy.TraceError):
        AssertTracer().trace(dyn_sum)


# ---------------------------------------------------------------------------
# *args / **kwargs / keyword-only roots (torch.fx 1.13 breaks on 3.11)
# ---------------------------------------------------------------------------

def varargs_fn(x, *args, **kwargs):
    return x + args[0] * kwargs["k"]


def kwonly_fn(x, *, scale: float = 2.0):
    return x * scale


def mixed_fn(a, b, *args, c, d=4, **kw):
    return a + b + c + d + args[0] + kw["e"]


class VarargsModule(torch.nn.Module):
    def forward(self, x, *args, **kwargs):
        return x + args[0] + kwargs["y"]


class VarargsSumModule(torch.nn.Module):
    def forward(self, x, *args):
        return x + sum(args)


def test_varargs_root():
    # torch.fx 1.13 raises "TypeError: code() argument 13 must be str, not int" here
    # on Python 3.11 (_patch_function uses the pre-3.11 CodeType signature).
    if FX_BROKEN_ON_PY311:
        assert error_of(lambda: torch.fx.symbolic_trace(varargs_fn))[0] == "TypeError"
    gm = fx.symbolic_trace(varargs_fn)
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    assert [p.target for p in phs] == ["x", "*args", "**kwargs"]
    assert "def forward(self, x, *args, **kwargs):" in gm.code
    x, y, k = torch.randn(3), torch.randn(3), torch.randn(3)
    assert torch.allclose(gm(x, y, k=k), varargs_fn(x, y, k=k))


def test_kwonly_root():
    gm = fx.symbolic_trace(kwonly_fn)
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    assert [p.target for p in phs] == ["x", "scale"]
    assert phs[1].args == (2.0,)
    assert phs[1].type is float
    assert "def forward(self, x, scale : float = 2.0):" in gm.code
    x = torch.randn(3)
    assert torch.allclose(gm(x), kwonly_fn(x))
    assert torch.allclose(gm(x, 3.0), kwonly_fn(x, scale=3.0))


def test_mixed_signature_root():
    gm = fx.symbolic_trace(mixed_fn)
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    assert [p.target for p in phs] == ["a", "b", "c", "d", "*args", "**kw"]
    assert [p.args for p in phs] == [(), (), (), (4,), (), ()]
    assert "def forward(self, a, b, c, d = 4, *args, **kw):" in gm.code
    x = torch.randn(2)
    assert torch.allclose(gm(x, 1, 2, 3, 5, e=6), mixed_fn(x, 1, 5, c=2, d=3, e=6))


def test_varargs_module():
    m = VarargsModule()
    gm = fx.symbolic_trace(m)
    assert "def forward(self, x, *args, **kwargs):" in gm.code
    x, a, y = torch.randn(3), torch.randn(3), torch.randn(3)
    assert torch.allclose(gm(x, a, y=y), m(x, a, y=y))


def test_varargs_sum_is_iteration_error():
    # sum(args) iterates the ``*args`` Proxy: same error as torch.fx would give
    with pytest.raises(fx_proxy.TraceError, match="Proxy object cannot be iterated"):
        fx.symbolic_trace(VarargsSumModule())


# ---------------------------------------------------------------------------
# operators, methods, attributes
# ---------------------------------------------------------------------------

def ops_arith(x, y):
    a = x + y
    b = x - y
    c = x * y
    d = x / (y + 3)
    e = x // 2
    f = x % 3
    g = x ** 2
    h = x @ y.t()
    return a, b, c, d, e, f, g, h


def ops_reflected(x):
    return 1 + x, 2 - x, 3 * x, 4 / (x + 5), 5 // (x + 7), 7 % (x + 11), 2 ** x


def ops_compare(x, y):
    return x == y, x != y, x < y, x > y, x <= y, x >= y


def ops_unary(x):
    return -x, +x, ~(x > 0), abs(x) if False else x


def ops_bitwise(x, y):
    return x & y, x | y, x ^ y, x << 1, x >> 1, 1 & x, 2 | x, 3 ^ x, 1 << x, 64 >> x


def ops_getitem(x):
    return (x[0], x[1:3], x[..., 0], x[None], x[:, None, 1], x[0, 1], x[::2, ...],
            x[-1], x[1:], x[(0, slice(None, 2))])


def ops_inplace(x):
    y = x.clone()
    y += 1
    y *= 2
    y -= x
    return y


def ops_methods(x):
    y = x.relu().sigmoid().view(-1)
    z = x.reshape(x.shape[0], -1).sum(dim=1, keepdim=True)
    return y.size(0), z, x.transpose(0, 1).contiguous(), x.t()


def ops_functional(x):
    y = torch.nn.functional.relu(x)
    y = torch.nn.functional.softmax(y, dim=-1)
    y = torch.nn.functional.gelu(y)
    return torch.nn.functional.dropout(y, p=0.0, training=False)


def ops_torch_fns(x, y):
    return torch.cat([x, y], dim=0), torch.stack((x, y)), torch.where(x > y, x, y), torch.flatten(x, 1)


def ops_attrs_lazy(x):
    s = x.shape  # never used -> no node
    d = x.dtype  # never used -> no node
    return x.shape[0] * x + x.ndim


def ops_attr_used(x):
    return x.T, x.shape, x.size()


def ops_kwargs(x):
    return torch.sum(x, dim=0, keepdim=True), x.mean(dim=-1), torch.clamp(x, min=0.0, max=1.0)


def ops_containers(x, y):
    return {"a": x, "b": [y, (x, y)], "c": {"d": x + y}}


def ops_dtype_device(x):
    return x.to(torch.float64), x.to(device=torch.device("cpu"), dtype=torch.float32), \
        torch.zeros_like(x, memory_format=torch.contiguous_format)


def ops_call_proxy(x):
    return x.new_zeros(3), x.new_tensor([1.0, 2.0])


def ops_camel(x):
    return torch.nn.functional.logsigmoid(x), torch.addmm(x, x, x), torch.bitwise_not(x > 0)


@pytest.mark.parametrize("fn, inputs", [
    (ops_arith, (torch.randn(3, 3), torch.randn(3, 3))),
    (ops_reflected, (torch.rand(3) + 1,)),
    (ops_compare, (torch.randn(3), torch.randn(3))),
    (ops_unary, (torch.randn(3),)),
    (ops_bitwise, (torch.randint(0, 8, (3,)), torch.randint(0, 8, (3,)))),
    (ops_getitem, (torch.randn(4, 4),)),
    (ops_inplace, (torch.randn(3),)),
    (ops_methods, (torch.randn(3, 4),)),
    (ops_functional, (torch.randn(3, 4),)),
    (ops_torch_fns, (torch.randn(3, 4), torch.randn(3, 4))),
    (ops_attrs_lazy, (torch.randn(3, 4),)),
    (ops_attr_used, (torch.randn(3, 4),)),
    (ops_kwargs, (torch.randn(3, 4),)),
    (ops_containers, (torch.randn(3), torch.randn(3))),
    (ops_dtype_device, (torch.randn(3),)),
    (ops_call_proxy, (torch.randn(3),)),
    (ops_camel, (torch.randn(3, 3),)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_operators_match(fn, inputs):
    check_same(fn, inputs)


def test_attribute_laziness():
    gm = fx.symbolic_trace(ops_attrs_lazy)
    getattrs = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is getattr]
    assert [n.args[1] for n in getattrs] == ["shape", "ndim"]
    methods = [n.target for n in gm.graph.nodes if n.op == "call_method"]
    assert methods == []


def test_attribute_method_call_is_call_method():
    gm = fx.symbolic_trace(lambda x: x.relu())
    assert [n.op for n in gm.graph.nodes] == ["placeholder", "call_method", "output"]


def test_proxy_call():
    def f(x):
        return x(1, k=2)
    g = fx.Tracer().trace(f)
    node = [n for n in g.nodes if n.op == "call_method"][0]
    assert node.target == "__call__" and node.kwargs == {"k": 2}


def test_proxy_repr():
    seen = []

    def f(x):
        seen.append(repr(x))
        return x
    fx.symbolic_trace(f)
    assert seen == ["Proxy(x)"]


def test_torch_function_name_and_kind():
    gm = fx.symbolic_trace(ops_camel)
    ref = torch.fx.symbolic_trace(ops_camel)
    assert [(n.op, n.name, n.target) for n in gm.graph.nodes] == \
        [(n.op, n.name, n.target) for n in ref.graph.nodes]


# ---------------------------------------------------------------------------
# modules: leaves, containers, parameters, buffers, constants
# ---------------------------------------------------------------------------

class Containers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.seq = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(),
                                       torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh()))
        self.mlist = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(3)])
        self.mdict = torch.nn.ModuleDict({"a": torch.nn.Linear(4, 4), "b": torch.nn.GELU()})
        self.plist = torch.nn.ParameterList([torch.nn.Parameter(torch.randn(4)) for _ in range(2)])

    def forward(self, x):
        x = self.seq(x)
        for m in self.mlist:
            x = m(x) + self.plist[0]
        for k in ["a", "b"]:
            x = self.mdict[k](x)
        return x * self.plist[1]


class ParamsBuffers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 4))
        self.register_buffer("buf", torch.randn(4))
        self.plain = torch.randn(4)  # plain tensor attribute
        self.sub = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = x @ self.w + self.w.sum()  # param used twice -> one get_attr
        y = y + self.buf + self.plain + self.sub.bias
        y = torch.addmm(self.sub.bias, y, self.sub.weight)
        return y + torch.tensor([1.0, 2.0, 3.0, 4.0]) + torch.ones(4)


class SharedParam(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(3, 3)
        self.b = torch.nn.Linear(3, 3)
        self.b.weight = self.a.weight

    def forward(self, x):
        return x @ self.b.weight + x @ self.a.weight


class CustomSub(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.bn = torch.nn.BatchNorm1d(4)

    def forward(self, x):
        return self.bn(self.lin(x)).relu()


class Nested(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block1 = CustomSub()
        self.block2 = CustomSub()
        self.conv = torch.nn.Conv1d(1, 1, 1)

    def forward(self, x):
        y = self.block2(self.block1(x))
        return self.conv(y.unsqueeze(1)).squeeze(1)


class ModuleAsArg(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        return torch.nn.functional.linear(x, self.lin.weight, self.lin.bias), \
            torch.nn.utils.parametrize.is_parametrized(self.lin)


class NamedTupleArg(NamedTuple):
    a: torch.Tensor
    b: int


class NamedTupleModule(torch.nn.Module):
    def forward(self, x):
        nt = NamedTupleArg(x, 3)
        return nt.a * nt.b, NamedTupleArg(x + 1, 2)


class AnnotatedModule(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: int = 3, z: float = 1.5, w: str = "a") -> torch.Tensor:
        return x * y + z


@pytest.mark.parametrize("root, inputs", [
    (Containers(), (torch.randn(2, 4),)),
    (ParamsBuffers(), (torch.randn(4, 4),)),
    (SharedParam(), (torch.randn(3, 3),)),
    (Nested().eval(), (torch.randn(2, 4),)),
    (ModuleAsArg(), (torch.randn(2, 3),)),
    (NamedTupleModule(), (torch.randn(3),)),
    (AnnotatedModule(), (torch.randn(3),)),
], ids=["containers", "params_buffers", "shared_param", "nested", "module_as_arg",
        "namedtuple", "annotated"])
def test_modules_match(root, inputs):
    check_same(root, inputs)


def test_param_get_attr_cached_and_named():
    gm = fx.symbolic_trace(ParamsBuffers())
    get_attrs = [n.target for n in gm.graph.nodes if n.op == "get_attr"]
    assert get_attrs.count("w") == 1
    assert "buf" in get_attrs and "plain" in get_attrs
    assert "_tensor_constant0" in get_attrs and "_tensor_constant1" in get_attrs
    assert isinstance(gm._tensor_constant0, torch.Tensor)


def test_sequential_is_traced_through():
    gm = fx.symbolic_trace(Containers())
    mods = [n.target for n in gm.graph.nodes if n.op == "call_module"]
    assert mods[:4] == ["seq.0", "seq.1", "seq.2.0", "seq.2.1"]
    assert "mlist.0" in mods and "mdict.a" in mods
    gm = fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU()))
    assert [n.target for n in gm.graph.nodes if n.op == "call_module"] == ["0", "1"]


def test_top_level_leaf_modules():
    for m in [torch.nn.Linear(3, 3), torch.nn.ReLU()]:
        ref, ours = check_same(m, (torch.randn(2, 3),))


def test_param_shapes_constant():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(3, 4))

        def forward(self, x):
            if self.w.shape[0] == 3 and self.w.dim() == 2 and self.w.ndim == 2:
                return x + self.w.size()[1] + self.w.numel() + self.w.nelement()
            return x

    ours = fx.GraphModule(M(), fx.Tracer(param_shapes_constant=True).trace(M()))
    ref = torch.fx.GraphModule(M(), torch.fx.Tracer(param_shapes_constant=True).trace(M()))
    assert ours.code == ref.code
    with pytest.raises(fx_proxy.TraceError):
        fx.symbolic_trace(M())

    seen = {}

    class Probe(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(3, 4))

        def forward(self, x):
            seen["repr"] = repr(self.w)
            return x

    fx.Tracer(param_shapes_constant=True).trace(Probe())
    assert seen["repr"] == "ParameterProxy(w)"


def test_proxy_buffer_attributes():
    class BufTracer(fx.Tracer):
        proxy_buffer_attributes = True

    class RefBufTracer(torch.fx.Tracer):
        proxy_buffer_attributes = True

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("b", torch.randn(3))

        def forward(self, x):
            return x + self.b + self.b

    assert fx.GraphModule(M(), BufTracer().trace(M())).code == \
        torch.fx.GraphModule(M(), RefBufTracer().trace(M())).code


def test_tensor_constant_naming_with_existing_attr():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self._tensor_constant0 = 5  # occupies the first name

        def forward(self, x):
            return x + torch.ones(2) + torch.zeros(2) + torch.ones(2)

    # torch.fx 2.x numbers constants through Tracer.get_fresh_qualname, whose counters are
    # shared by all tracers (class-wide): start both libraries' from scratch.
    for lib in (torch.fx, fx):
        getattr(lib.Tracer, '_qualname_counter', {}).clear()
    check_same(M(), (torch.randn(2),))


def test_proxyable_class_meta():
    class TensorPair(metaclass=fx.ProxyableClassMeta):
        def __init__(self, left, right):
            self.left, self.right = left, right

        def add(self, other):
            return TensorPair(self.left + other.left, self.right + other.right)

        def mul(self, other):
            return TensorPair(self.left * other.left, self.right * other.right)

    def use_tensor_pair_ctor(x: TensorPair, y: torch.Tensor):
        s = x.add(TensorPair(y, y))
        return s.mul(x)

    gm = fx.symbolic_trace(use_tensor_pair_ctor)
    nodes = [(n.op, n.target) for n in gm.graph.nodes]
    assert nodes == [("placeholder", "x"), ("placeholder", "y"), ("call_function", TensorPair),
                     ("call_method", "add"), ("call_method", "mul"), ("output", "output")]
    x = TensorPair(torch.randn(5, 3), torch.randn(5, 3))
    y = torch.randn(5, 3)
    ref_out = use_tensor_pair_ctor(x, y)
    out = gm(x, y)
    assert torch.equal(out.left, ref_out.left) and torch.equal(out.right, ref_out.right)

    # instance constructed outside tracing becomes a constant attribute
    const = TensorPair(torch.ones(2), torch.ones(2))

    def use_const(x):
        return const.add(TensorPair(x, x))

    gm = fx.symbolic_trace(use_const)
    assert "_TensorPair_constant_0" in [n.target for n in gm.graph.nodes if n.op == "get_attr"] or \
        any(n.op == "call_function" for n in gm.graph.nodes)


# ---------------------------------------------------------------------------
# concrete_args
# ---------------------------------------------------------------------------

def ca_bool_int(x, flag: bool, n: int = 2):
    if flag:
        return x * n
    return x - n


def ca_none(x, y=None):
    if y is None:
        return x + 1
    return x + y


def ca_dict(x):
    out = 0
    for v in x.values():
        out += v
    return out


def ca_nested(x, y):
    return x["a"][0] + x["a"][1] * x["b"], y


def ca_tuple_and_list(x, y):
    return x[0] - x[1], y[0] * y[2]


def test_concrete_bool_int():
    check_same(ca_bool_int, (torch.randn(3), True, 3), concrete_args={"flag": True, "n": 3})
    check_same(ca_bool_int, (torch.randn(3), False), concrete_args={"flag": False})


def test_concrete_tuple_form():
    # tuple concrete_args with PH: compare with torch.fx using its own PH
    ref = torch.fx.symbolic_trace(ca_bool_int, concrete_args=(torch.fx.PH, True, 3))
    ours = fx.symbolic_trace(ca_bool_int, concrete_args=(fx.PH, True, 3))
    assert ours.code == ref.code
    assert error_of(lambda: fx.symbolic_trace(ca_bool_int, concrete_args=(True,))) == \
        error_of(lambda: torch.fx.symbolic_trace(ca_bool_int, concrete_args=(True,)))


def test_concrete_none():
    ours = fx.symbolic_trace(ca_none, concrete_args={"y": None})
    ref = torch.fx.symbolic_trace(ca_none, concrete_args={"y": None})
    # The helper is torch.fx's own, so the code is identical (issue 13).
    assert ours.code == ref.code
    ops = [(n.op, n.name) for n in ours.graph.nodes]
    assert ops == [(n.op, n.name) for n in ref.graph.nodes]
    assert_node = [n for n in ours.graph.nodes if n.op == "call_function" and "assert" in n.name][0]
    assert assert_node.target is fx_st._assert_is_none
    assert assert_node.target is torch.fx._symbolic_trace._assert_is_none
    assert assert_node.meta.get("is_wrapped", False) is False
    assert "_assert_is_none" in ours.code
    x = torch.randn(3)
    assert torch.equal(ours(x, None), x + 1)
    with pytest.raises(AssertionError, match="y has been specialized to have value None"):
        ours(x, torch.ones(3))


def test_concrete_dict_ph():
    ca = {"x": {"a": fx.PH, "b": fx.PH, "c": fx.PH}}
    ref = torch.fx.symbolic_trace(ca_dict, concrete_args={"x": {"a": torch.fx.PH, "b": torch.fx.PH,
                                                                 "c": torch.fx.PH}})
    ours = fx.symbolic_trace(ca_dict, concrete_args=ca)
    assert ours.code == ref.code
    assert str(ours.graph) == str(ref.graph)
    assert ours({"a": 1, "b": 2, "c": 4}) == 7
    t = {"a": torch.randn(2), "b": torch.randn(2), "c": torch.randn(2)}
    assert torch.allclose(ours(t), ref(t))


def test_concrete_nested_ph():
    ca = {"x": {"a": (fx.PH, fx.PH), "b": fx.PH}}
    ref_ca = {"x": {"a": (torch.fx.PH, torch.fx.PH), "b": torch.fx.PH}}
    ref = torch.fx.symbolic_trace(ca_nested, concrete_args=ref_ca)
    ours = fx.symbolic_trace(ca_nested, concrete_args=ca)
    assert ours.code == ref.code
    x = {"a": (torch.randn(2), torch.randn(2)), "b": torch.randn(2)}
    y = torch.randn(2)
    assert_same_outputs(ref(x, y), ours(x, y))


def test_concrete_tuple_list_values():
    ca = {"x": (fx.PH, fx.PH), "y": [fx.PH, 2, fx.PH]}
    ref_ca = {"x": (torch.fx.PH, torch.fx.PH), "y": [torch.fx.PH, 2, torch.fx.PH]}
    ref = torch.fx.symbolic_trace(ca_tuple_and_list, concrete_args=ref_ca)
    ours = fx.symbolic_trace(ca_tuple_and_list, concrete_args=ca)
    assert ours.code == ref.code
    x = (torch.randn(2), torch.randn(2))
    y = [torch.randn(2), 2, torch.randn(2)]
    assert_same_outputs(ref(x, y), ours(x, y))


def test_concrete_torch_fx_ph_accepted():
    # torch.fx.PH is accepted by fxcpp too (drop-in convenience)
    ours = fx.symbolic_trace(ca_dict, concrete_args={"x": {"a": torch.fx.PH, "b": fx.PH}})
    assert ours({"a": 1, "b": 2}) == 3


def test_concrete_unassertable_warns():
    def f(x, s):
        return x + s[0]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        gm = fx.symbolic_trace(f, concrete_args={"s": torch.ones(1)})
    assert any("Was not able to add assertion" in str(i.message) for i in w)


def test_concrete_module_forward():
    class M(torch.nn.Module):
        def forward(self, x, use_relu=True):
            return torch.relu(x) if use_relu else x
    check_same(M(), (torch.randn(3), False), concrete_args={"use_relu": False})


# ---------------------------------------------------------------------------
# wrap / autowrap
# ---------------------------------------------------------------------------

NORMALIZE_SRC = """
import torch
import torch.fx
import fxcpp
from math import sqrt

def normalize(x):
    return x / sqrt(len(x))
"""

_wrap_both = make_module("_fxcpp_test_wrap_both", NORMALIZE_SRC + """
torch.fx.wrap('len')
torch.fx.wrap('sqrt')
fxcpp.wrap('len')
fxcpp.wrap('sqrt')
""")

_wrap_ours = make_module("_fxcpp_test_wrap_ours", NORMALIZE_SRC + """
fxcpp.wrap('len')
fxcpp.wrap('sqrt')
""")

_wrap_torch_only = make_module("_fxcpp_test_wrap_torch_only", NORMALIZE_SRC + """
torch.fx.wrap('len')
torch.fx.wrap('sqrt')
""")

_wrap_len_autowrap_sqrt = make_module("_fxcpp_test_wrap_len", NORMALIZE_SRC + """
torch.fx.wrap('len')
fxcpp.wrap('len')
""")

_wrap_variants = make_module("_fxcpp_test_wrap_variants", """
import torch
import torch.fx
import fxcpp

def my_custom_function(x, y):
    return x * x + y * y

fxcpp.wrap('my_custom_function')
torch.fx.wrap('my_custom_function')

@fxcpp.wrap
@torch.fx.wrap
def decorated(x, y):
    return x - y

def by_callable(x):
    return x.relu()

fxcpp.wrap(by_callable)
torch.fx.wrap(by_callable)

def fn_to_be_traced(x, y):
    return decorated(my_custom_function(x, y), by_callable(y))

def not_traced(x):
    return my_custom_function(2, 3) + x
""")


def test_wrap_normalize_both_registries():
    ref, ours = check_same(_wrap_both.normalize, (torch.rand(3, 4),))
    # same call targets: the real builtins, not wrapper objects
    targets = [n.target for n in ours.graph.nodes if n.op == "call_function"]
    assert targets[0] is len and targets[1] is math.sqrt and targets[2] is operator.truediv
    assert [n.meta.get("is_wrapped", False) for n in ours.graph.nodes if n.op == "call_function"] == \
        [True, True, False]
    assert 'wrap("len")' in ours.code
    # patches are reverted after tracing
    assert "len" not in _wrap_both.__dict__
    assert _wrap_both.sqrt is math.sqrt


def test_wrap_normalize_same_code_in_all_variants():
    ref = torch.fx.symbolic_trace(_wrap_both.normalize)
    for mod in (_wrap_ours, _wrap_torch_only, _wrap_len_autowrap_sqrt):
        ours = fx.symbolic_trace(mod.normalize)
        assert ours.code == ref.code
        x = torch.rand(3, 4)
        assert torch.allclose(ours(x), mod.normalize(x))


def test_wrap_fxcpp_only_not_seen_by_torch_fx():
    # torch.fx does not know about fxcpp's registry (it raises the len error) ...
    assert error_of(lambda: torch.fx.symbolic_trace(_wrap_ours.normalize))[0] == "RuntimeError"
    # ... while fxcpp also honours torch.fx's registry (see test above).


def test_wrap_variants():
    ref, ours = check_same(_wrap_variants.fn_to_be_traced, (torch.randn(3), torch.randn(3)))
    targets = [n.target for n in ours.graph.nodes if n.op == "call_function"]
    assert targets == [_wrap_variants.my_custom_function, _wrap_variants.by_callable,
                       _wrap_variants.decorated]
    check_same(_wrap_variants.not_traced, (torch.randn(3),))


def test_wrap_errors():
    assert error_of(lambda: fx.wrap(3)) == error_of(lambda: torch.fx.wrap(3))

    def inner():
        fx.wrap("len")

    def inner_ref():
        torch.fx.wrap("len")
    assert error_of(inner) == error_of(inner_ref) == \
        ("NotImplementedError", "wrap must be called at the top level of a module")


def math_autowrap(x):
    return x * math.sqrt(x.shape[0]) + math.log(x.size(1)) + sqrt(x.dim())


def math_autowrap_const(x):
    return x * math.sqrt(4) + math.pi


def test_math_autowrap():
    ref, ours = check_same(math_autowrap, (torch.randn(4, 3),))
    assert [n.target for n in ours.graph.nodes if n.op == "call_function" and n.meta.get("is_wrapped")] == \
        [math.sqrt, math.log, math.sqrt]
    check_same(math_autowrap_const, (torch.randn(3),))


def custom_leaf_fn(x):
    return x + 1


def uses_custom_leaf(x):
    return custom_leaf_fn(x) * 2


def test_autowrap_functions_and_modules():
    ours = fx.GraphModule(torch.nn.Module(), fx.Tracer(autowrap_functions=(custom_leaf_fn,)).trace(uses_custom_leaf))
    ref = torch.fx.GraphModule(torch.nn.Module(),
                               torch.fx.Tracer(autowrap_functions=(custom_leaf_fn,)).trace(uses_custom_leaf))
    assert ours.code == ref.code
    assert any(n.target is custom_leaf_fn for n in ours.graph.nodes)
    # no autowrap modules: math.sqrt on a Proxy fails like in torch.fx
    assert error_of(lambda: fx.Tracer(autowrap_modules=()).trace(math_autowrap)) == \
        error_of(lambda: torch.fx.Tracer(autowrap_modules=()).trace(math_autowrap))


# ---------------------------------------------------------------------------
# Tracer subclass overrides
# ---------------------------------------------------------------------------

def make_tracers(kind):
    """Build the same Tracer subclass on top of torch.fx.Tracer and fx.Tracer."""
    out = []
    for base in (torch.fx.Tracer, fx.Tracer):
        if kind == "leaf_all_custom":
            class T(base):
                def is_leaf_module(self, m, qualname):
                    return isinstance(m, CustomSub) or super().is_leaf_module(m, qualname)
        elif kind == "no_leaves":
            class T(base):
                def is_leaf_module(self, m, qualname):
                    return False
        elif kind == "create_node":
            class T(base):
                def create_node(self, kind, target, args, kwargs, name=None, type_expr=None):
                    n = super().create_node(kind, target, args, kwargs, name, type_expr)
                    n.meta["tag"] = kind
                    return n
        elif kind == "create_proxy":
            class T(base):
                def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None,
                                 proxy_factory_fn=None):
                    if kind == "call_function" and target is torch.relu:
                        target = torch.sigmoid
                    return super().create_proxy(kind, target, args, kwargs, name, type_expr, proxy_factory_fn)
        elif kind == "create_proxy_no_factory":
            class T(base):
                def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None):
                    return super().create_proxy(kind, target, args, kwargs, name, type_expr)
        elif kind == "create_arg":
            class T(base):
                def create_arg(self, a):
                    if isinstance(a, float):
                        return a * 2
                    return super().create_arg(a)
        elif kind == "call_module":
            class T(base):
                def call_module(self, m, forward, args, kwargs):
                    if isinstance(m, torch.nn.BatchNorm1d):
                        return args[0]  # drop batchnorms
                    return super().call_module(m, forward, args, kwargs)
        elif kind == "getattr":
            class T(base):
                def getattr(self, attr, attr_val, parameter_proxy_cache):
                    return attr_val  # parameters become constants
        elif kind == "path_of_module":
            class T(base):
                def path_of_module(self, mod):
                    return super().path_of_module(mod)
        elif kind == "trace":
            class T(base):
                def trace(self, root, concrete_args=None):
                    g = super().trace(root, concrete_args)
                    for n in g.nodes:
                        if n.op == "call_module":
                            n.meta["leaf"] = True
                    return g
        elif kind == "record_stack_traces":
            class T(base):
                record_stack_traces = True
        out.append(T)
    return out


class OverrideTarget(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = CustomSub()
        self.b = CustomSub()
        self.w = torch.nn.Parameter(torch.randn(4))

    def forward(self, x):
        y = torch.relu(self.a(x)) * 0.5 + self.w
        return self.b(y) + self.w.sum() * 1.5


_OVERRIDE_KINDS = ["leaf_all_custom", "no_leaves", "create_node", "create_proxy", "create_proxy_no_factory",
                   "create_arg", "call_module", "getattr", "path_of_module", "trace", "record_stack_traces"]


@pytest.mark.parametrize("kind", _OVERRIDE_KINDS)
def test_tracer_overrides(kind):
    RefT, OurT = make_tracers(kind)
    m = OverrideTarget().eval()
    m_ref, m_ours = copy.deepcopy(m), copy.deepcopy(m)
    ref_err = error_of(lambda: RefT().trace(copy.deepcopy(m)))
    if ref_err is not None:  # e.g. tracing into BatchNorm hits dynamic control flow
        assert error_of(lambda: OurT().trace(copy.deepcopy(m))) == ref_err
        return
    g_ref = RefT().trace(m_ref)
    g_ours = OurT().trace(m_ours)
    assert str(g_ours) == str(g_ref)
    gm_ref = torch.fx.GraphModule(m_ref, g_ref)
    gm_ours = fx.GraphModule(m_ours, g_ours)
    assert gm_ours.code == gm_ref.code
    x = torch.randn(2, 4)
    assert torch.allclose(gm_ref(x), gm_ours(x))
    assert [dict(n.meta) for n in g_ours.nodes if "tag" in n.meta or "leaf" in n.meta] == \
        [dict(n.meta) for n in g_ref.nodes if "tag" in n.meta or "leaf" in n.meta]
    if kind == "record_stack_traces":
        st = [n.stack_trace for n in g_ours.nodes if n.op == "call_function"]
        assert all(s and "test_tracer.py" in s for s in st)
        assert all("fxcpp/proxy.py" not in s for s in st)


def test_custom_tracer_flags_cached_per_class():
    class A(fx.Tracer):
        pass

    class B(fx.Tracer):
        def create_arg(self, a):
            return super().create_arg(a)

    A().trace(ops_arith)
    B().trace(ops_arith)
    assert fx_proxy._fast_flags[A] & fx_proxy._FAST_ARG
    assert not fx_proxy._fast_flags[B] & fx_proxy._FAST_ARG


def test_instance_monkeypatched_hooks_are_used():
    calls = []
    t = fx.Tracer()
    orig_create_node = t.create_node

    def create_node(*args, **kwargs):
        calls.append(args[0])
        return orig_create_node(*args, **kwargs)
    t.create_node = create_node
    t.trace(ops_arith)
    assert calls.count("call_function") == 9 and "placeholder" in calls


def test_nested_trace():
    # A Tracer override that traces leaf submodules separately while tracing the root.
    inner = {}

    class T(fx.Tracer):
        def call_module(self, m, forward, args, kwargs):
            if isinstance(m, CustomSub):
                inner[self.path_of_module(m)] = fx.symbolic_trace(m).code
            return super().call_module(m, forward, args, kwargs)

    g = T().trace(OverrideTarget().eval())
    assert set(inner) == {"a", "b"}
    assert inner["a"] == torch.fx.symbolic_trace(CustomSub().eval()).code
    assert torch.nn.Module.__call__ is fx_st._orig_module_call
    assert len([n for n in g.nodes if n.op == "call_module"]) == 4


def test_check_mutable_operations():
    class T(fx.Tracer):
        check_mutable_operations = True

    class RT(torch.fx.Tracer):
        check_mutable_operations = True

    def f(x):
        return torch.add(x, 1), torch.relu(x)

    assert str(T().trace(f)) == str(RT().trace(f))


def test_tracer_deepcopy_and_reuse():
    t = fx.Tracer()
    g1 = t.trace(ParamsBuffers())
    t2 = copy.deepcopy(t)
    assert t2._autowrap_search == t._autowrap_search
    g2 = t.trace(ParamsBuffers())
    assert str(g1) == str(g2)


def test_is_fx_tracing():
    seen = []

    def f(x):
        seen.append((fx_st.is_fx_tracing(), torch.fx._symbolic_trace.is_fx_tracing()))
        return x
    assert not fx_st.is_fx_tracing()
    fx.symbolic_trace(f)
    assert seen == [(True, True)]
    assert not fx_st.is_fx_tracing() and not torch.fx._symbolic_trace.is_fx_tracing()


def test_patches_reverted_after_error():
    with pytest.raises(fx_proxy.TraceError):
        fx.symbolic_trace(dyn_sum)
    assert torch.nn.Module.__call__ is fx_st._orig_module_call
    assert torch.nn.Module.__getattr__ is fx_st._orig_module_getattr
    assert "len" not in _wrap_both.__dict__


# ---------------------------------------------------------------------------
# Proxy over raw nodes (GraphAppendingTracer) and retracing
# ---------------------------------------------------------------------------

def test_proxy_on_raw_node():
    def build(lib):
        graph = lib.Graph()
        x = graph.placeholder("x")
        p = lib.Proxy(x)
        assert isinstance(p.tracer, (fx_proxy.GraphAppendingTracer, torch.fx.proxy.GraphAppendingTracer))
        out = torch.relu(p) + 1
        out = out.sum(dim=0)[0] * p.shape[0]
        graph.output(out.node)
        return graph
    g_ours, g_ref = build(fx), build(torch.fx)
    assert str(g_ours) == str(g_ref)


def test_retrace_graph_module():
    gm = fx.symbolic_trace(TopkModule())
    ref = torch.fx.symbolic_trace(torch.fx.symbolic_trace(TopkModule()))
    gm2 = fx.symbolic_trace(gm)
    assert gm2.code == ref.code


def test_multiple_tracers_error():
    g1, g2 = fx.Graph(), fx.Graph()
    p1, p2 = fx.Proxy(g1.placeholder("a")), fx.Proxy(g2.placeholder("b"))
    with pytest.raises(RuntimeError, match="Found multiple different tracers"):
        torch.add(p1, p2)


# ---------------------------------------------------------------------------
# fx_pytree
# ---------------------------------------------------------------------------

def test_tree_flatten_spec():
    import torch.utils._pytree as pytree
    Point = collections.namedtuple("Point", ["x", "y"])
    tree = {"a": [1, (2, 3)], "b": Point(4, 5), "c": 6}
    _, spec = pytree.tree_flatten(tree)
    assert fx_pytree.tree_flatten_spec(tree, spec) == torch.fx._pytree.tree_flatten_spec(tree, spec)
    # extra keys in the input dict are ignored (spec-driven)
    tree2 = dict(tree, extra=7)
    assert fx_pytree.tree_flatten_spec(tree2, spec) == [1, 2, 3, 4, 5, 6]

    class Custom:
        def __init__(self, a, b):
            self.a, self.b = a, b

    pytree._register_pytree_node(Custom, lambda c: ([c.a, c.b], None), lambda v, ctx: Custom(*v))
    _, cspec = pytree.tree_flatten(Custom(1, 2))
    # Without a flatten_fn_spec: torch.fx 1.13 raises RuntimeError, 2.x flattens through pytree.
    outcomes = []
    for lib_pytree in (torch.fx._pytree, fx_pytree):
        try:
            outcomes.append(('ok', lib_pytree.tree_flatten_spec(Custom(1, 2), cspec)))
        except RuntimeError as e:
            outcomes.append(('RuntimeError', str(e)))
    assert outcomes[1] == outcomes[0]
    assert outcomes[0][0] == ('ok' if TORCH2 else 'RuntimeError')
    fx_pytree.register_pytree_flatten_spec(Custom, lambda c, spec: [c.a, c.b])
    assert fx_pytree.tree_flatten_spec(Custom(1, 2), cspec) == [1, 2]


# ---------------------------------------------------------------------------
# torchvision models
# ---------------------------------------------------------------------------

torchvision = pytest.importorskip("torchvision")


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "efficientnet_b0", "convnext_tiny"])
def test_torchvision_models(name):
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None).eval()
    ref = torch.fx.symbolic_trace(model)
    ours = fx.symbolic_trace(model)
    assert ours.code == ref.code
    assert str(ours.graph) == str(ref.graph)
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        expected = model(x)
        assert torch.allclose(ours(x), expected, atol=1e-5)
        assert torch.allclose(ref(x), expected, atol=1e-5)
    if name == "efficientnet_b0":
        # torchvision registers stochastic_depth with torch.fx.wrap: honoured by fxcpp
        sd = [n for n in ours.graph.nodes if n.op == "call_function" and n.meta.get("is_wrapped")]
        assert sd and all(n.target.__name__ == "stochastic_depth" for n in sd)


def test_torchvision_shufflenet_unpacking_py311():
    # ShuffleNetV2 does ``batchsize, num_channels, height, width = x.size()``:
    # torch.fx 1.13 fails on Python 3.11, fxcpp traces it; compare with eager.
    torch.manual_seed(0)
    model = torchvision.models.shufflenet_v2_x0_5(weights=None).eval()
    ours = fx.symbolic_trace(model)
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        assert torch.allclose(ours(x), model(x), atol=1e-5)
    if FX_BROKEN_ON_PY311:
        assert error_of(lambda: torch.fx.symbolic_trace(model))[0] == "TraceError"


# ---------------------------------------------------------------------------
# arguments torch.fx 2.x records (Note [Arguments torch.fx 2.x records])
# ---------------------------------------------------------------------------

class _Colour(__import__('enum').Enum):
    RED = 1
    BLUE = 2


@__import__('dataclasses').dataclass
class _Box:
    value: object
    scale: int


def _unbox(box):
    return box.value * box.scale


def _rows(x, r):
    return x[list(r)]


torch.fx.wrap('_unbox')
fx.wrap('_unbox')
torch.fx.wrap('_rows')
fx.wrap('_rows')


def _enum_arg(x):
    return torch.relu(x), _Colour.BLUE


def _dataclass_arg(x):
    return _unbox(_Box(x + 1, 3))


def _op_overload_arg(x):
    return torch.ops.aten.relu.default(x), torch.ops.aten.relu.default


def _range_arg(x):
    return _rows(x, range(0, 3, 2))


def _node_in_dict_key(x):
    return {(x, 1): 2}


def _outcome(lib, fn, x):
    try:
        gm = lib.symbolic_trace(fn)
    except Exception as e:  # noqa: BLE001 -- the error is what is compared
        return ('error', type(e).__name__, str(e)), None
    return ('code', gm.code, str(gm.graph)), gm(x)


@pytest.mark.parametrize('fn', [_enum_arg, _dataclass_arg, _op_overload_arg, _range_arg, _node_in_dict_key])
def test_argument_kinds_are_recorded_as_torch_fx_records_them(fn):
    # torch.fx 2.x keeps enum members, OpOverloads and ranges in arguments and records a dataclass
    # as a call of its class; 1.13 refuses them (NotImplementedError). A Node in a dict key is an
    # error on both, 2.x naming the node. fxcpp follows the installed torch.fx, text included.
    x = torch.randn(3, 4)
    ref, ref_out = _outcome(torch.fx, fn, x)
    ours, our_out = _outcome(fx, fn, x)
    assert ours == ref
    if ref[0] == 'code':
        assert_same_outputs(ref_out, our_out)
    if TORCH2 and fn is not _node_in_dict_key:
        assert ref[0] == 'code'  # the kinds 2.x accepts: the comparison covered a real trace


_SPEC = __import__('torch.utils._pytree').utils._pytree.tree_flatten((1, {'a': 2}))[1]


def _unflatten(x, spec):
    return __import__('torch.utils._pytree').utils._pytree.tree_unflatten([x, x + 1], spec)


torch.fx.wrap('_unflatten')
fx.wrap('_unflatten')


def _tree_spec_arg(x):
    return _unflatten(x, _SPEC)


def test_tree_spec_constant_is_stored_as_torch_fx_stores_it():
    # torch.fx 2.x keeps a pytree TreeSpec met as an argument on the root as
    # `_tree_spec_constant<i>` and reads it with get_attr (Note [Constant attributes]);
    # 1.13 refuses it. Same code, graph and outputs as the installed torch.fx.
    x = torch.randn(2)
    ref, ref_out = _outcome(torch.fx, _tree_spec_arg, x)
    ours, our_out = _outcome(fx, _tree_spec_arg, x)
    assert ours == ref
    if TORCH2:
        assert ref[0] == 'code' and '_tree_spec_constant0' in ref[1]
        assert repr(our_out) == repr(ref_out)


def test_is_fx_tracing_is_one_flag_per_thread_as_in_torch_fx():
    # torch.fx 2.x's flag is thread-local: another thread does not see a trace running here
    # (1.13: a module global, seen everywhere). fxcpp's is_fx_tracing() and torch.fx's agree
    # with each other and with torch.fx's own behaviour (Note [One tracing flag]).
    import threading

    def probe(lib):
        seen = {}

        def f(x):
            seen['here'] = (lib._symbolic_trace.is_fx_tracing(), torch.fx._symbolic_trace.is_fx_tracing())
            t = threading.Thread(target=lambda: seen.__setitem__(
                'other', (lib._symbolic_trace.is_fx_tracing(), torch.fx._symbolic_trace.is_fx_tracing())))
            t.start()
            t.join()
            return x + 1
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            lib.symbolic_trace(f)
        seen['after'] = (lib._symbolic_trace.is_fx_tracing(), torch.fx._symbolic_trace.is_fx_tracing())
        return seen

    ref, ours = probe(torch.fx), probe(fx)
    assert ours == ref
    assert ours['here'] == (True, True) and ours['after'] == (False, False)
    assert ours['other'] == ((False, False) if fx_st._torch_compat.FX_TRACING_THREAD_LOCAL else (True, True))
