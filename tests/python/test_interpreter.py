"""Interpreter / Transformer: differential tests against torch.fx 1.13.

Every overridable method is overridden (alone) in a recording subclass built
for both libraries; the recorded calls, the results and the final state
(env, user_to_last_uses) must be the same.
"""
import operator

import pytest
import torch
import torch.fx as tfx
import torch.nn as nn
import torch.nn.functional as F

import fxcpp as fx
from torch2 import TORCH2

LIBS = [tfx, fx]


class Sub(nn.Module):
    def forward(self, x):
        return torch.neg(x)


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.sub = Sub()
        self.p = nn.Parameter(torch.randn(4))
        self.register_buffer('buf', torch.ones(4))

    def forward(self, x, y, scale=2):
        a = self.lin(x) + self.p
        b = a.relu().sum(dim=-1, keepdim=True)
        c = torch.cat([a, b * self.buf[0]], dim=1)
        d = self.sub(c[:, 1:3]).clamp(min=-1.0, max=scale)
        return {'d': d, 'pair': (c, y + 1)}


def inputs():
    torch.manual_seed(0)
    return (torch.randn(2, 4), 3)


def canon(v):
    """A comparable rendering of values: tensors by their contents."""
    if isinstance(v, torch.Tensor):
        return ('T', tuple(v.shape), v.dtype, v.detach().flatten().tolist())
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(canon(x) for x in v))
    if isinstance(v, dict):
        return ('dict', tuple((k, canon(x)) for k, x in v.items()))
    if isinstance(v, slice):
        return ('slice', canon(v.start), canon(v.stop), canon(v.step))
    if isinstance(v, (nn.Module,)):
        return ('mod', type(v).__name__)
    if hasattr(v, 'name') and hasattr(v, 'op'):
        return ('node', v.name)
    return v


def traced(lib, mod=None):
    torch.manual_seed(0)
    m = mod if mod is not None else M()
    return lib.symbolic_trace(m)


METHODS = ['placeholder', 'get_attr', 'call_function', 'call_method', 'call_module', 'output']


def recording_interpreter(lib, override, log):
    base = lib.Interpreter

    if override in METHODS:
        def method(self, target, args, kwargs):
            log.append((override, canon(target) if isinstance(target, str) else getattr(target, '__name__', target),
                        canon(args), canon(dict(kwargs)), type(args).__name__, type(kwargs).__name__))
            return getattr(base, override)(self, target, args, kwargs)
    elif override == 'fetch_attr':
        def method(self, target):
            log.append(('fetch_attr', target))
            return base.fetch_attr(self, target)
    elif override == 'fetch_args_kwargs_from_env':
        def method(self, n):
            args, kwargs = base.fetch_args_kwargs_from_env(self, n)
            log.append(('fetch', n.name, canon(args), canon(dict(kwargs)), type(kwargs).__name__))
            return args, kwargs
    elif override == 'map_nodes_to_values':
        def method(self, args, n):
            r = base.map_nodes_to_values(self, args, n)
            log.append(('map', n.name, canon(args), canon(r), type(r).__name__))
            return r
    elif override == 'run_node':
        def method(self, n):
            r = base.run_node(self, n)
            log.append(('run_node', n.name, n.op, canon(r), sorted(x.name for x in self.env)))
            return r
    else:
        raise AssertionError(override)
    return type('Rec', (base,), {override: method})


@pytest.mark.parametrize('override', METHODS + ['fetch_attr', 'fetch_args_kwargs_from_env',
                                                'map_nodes_to_values', 'run_node'])
@pytest.mark.parametrize('gc', [True, False])
def test_overridable_methods(override, gc):
    results = []
    for lib in LIBS:
        log = []
        gm = traced(lib)
        interp = recording_interpreter(lib, override, log)(gm, garbage_collect_values=gc)
        out = interp.run(*inputs())
        env = sorted((n.name, canon(v)) for n, v in interp.env.items())
        last = (sorted((u.name, [n.name for n in ns]) for u, ns in interp.user_to_last_uses.items())
                if gc else None)
        results.append((log, canon(out), env, last))
    assert results[0] == results[1]
    assert results[0][0], "the override was never called"


def test_instance_attribute_override():
    results = []
    for lib in LIBS:
        gm = traced(lib)
        interp = lib.Interpreter(gm)
        seen = []

        def call_function(target, args, kwargs, _seen=seen):
            _seen.append(getattr(target, '__name__', str(target)))
            return target(*args, **kwargs)
        interp.call_function = call_function
        out = interp.run(*inputs())
        results.append((seen, canon(out)))
    assert results[0] == results[1]


def test_run_node_directly_and_initial_env():
    results = []
    for lib in LIBS:
        gm = traced(lib)
        interp = lib.Interpreter(gm)
        nodes = list(gm.graph.nodes)
        x, y = inputs()
        # Partial evaluation: pre-populate the linear layer's result.
        lin = next(n for n in nodes if n.op == 'call_module' and n.target == 'lin')
        env = {lin: torch.zeros(2, 4)}
        out = interp.run(x, y, initial_env=env)
        interp.env = {nodes[0]: x, nodes[1]: y}
        interp.args_iter = iter(())
        single = interp.run_node(lin)
        results.append((canon(out), canon(single)))
    assert results[0] == results[1]


def test_io_processing_and_placeholders():
    def g(a, b):
        return {'s': a[0] + b['k']}

    results = []
    for lib in LIBS:
        gr = lib.Graph()
        x = gr.placeholder('x')
        rest = gr.placeholder('*args')
        gr.output(gr.call_function(operator.add, (x, gr.call_function(len, (rest,)))))
        gm = lib.GraphModule(nn.Module(), gr)
        r1 = lib.Interpreter(gm).run(1, 2, 3)
        gm2 = lib.symbolic_trace(g)
        r2 = lib.Interpreter(gm2).run((1, 2), {'k': 4})
        r3 = lib.Interpreter(gm2).run((1, 2), {'k': 4}, enable_io_processing=False)
        results.append((r1, r2, r3))
    assert results[0] == results[1]


def test_default_placeholder_value():
    results = []
    for lib in LIBS:
        g = lib.Graph()
        x = g.placeholder('x')
        y = g.placeholder('y', default_value=10)
        g.output(g.call_function(operator.add, (x, y)))
        gm = lib.GraphModule(nn.Module(), g)
        results.append((lib.Interpreter(gm).run(1), lib.Interpreter(gm).run(1, 2)))
    assert results[0] == results[1] == (11, 3)


def error_of(fn):
    try:
        fn()
    except BaseException as e:  # noqa: B902
        return type(e).__name__, e.args, type(e.__context__).__name__ if e.__context__ else None
    return None


@pytest.mark.parametrize('case', ['op_error', 'missing_input', 'keyerror', 'missing_value', 'bad_target'])
def test_exception_annotation(case):
    results = []
    for lib in LIBS:
        if case == 'op_error':
            gm = lib.symbolic_trace(lambda x: x + torch.zeros(5))
            results.append(error_of(lambda: lib.Interpreter(gm).run(torch.zeros(3))))
        elif case == 'missing_input':
            gm = lib.symbolic_trace(lambda x: x + 1)
            results.append(error_of(lambda: lib.Interpreter(gm).run()))
        elif case == 'keyerror':
            gm = lib.symbolic_trace(lambda d: d['missing'])
            results.append(error_of(lambda: lib.Interpreter(gm).run({'k': 1})))
        elif case == 'missing_value':
            g = lib.Graph()
            x = g.placeholder('x')
            a = g.call_function(operator.neg, (x,))
            g.output(a)
            gm = lib.GraphModule(nn.Module(), g)
            interp = lib.Interpreter(gm)
            results.append(error_of(lambda: interp.run_node(a)))
        elif case == 'bad_target':
            g = lib.Graph()
            x = g.placeholder('x')
            g.output(g.get_attr('nope.deeper'))
            root = nn.Module()
            root.nope = nn.Module()
            root.nope.deeper = nn.Parameter(torch.ones(1))
            gm = lib.GraphModule(root, g)
            del gm.nope.deeper
            results.append(error_of(lambda: lib.Interpreter(gm).run(1)))
    assert results[0] is not None
    assert results[0] == results[1]


def test_tiny_tensor_and_int_graph():
    for args in [(1, 2), (torch.ones(2), torch.ones(2))]:
        results = []
        for lib in LIBS:
            g = lib.Graph()
            x = g.placeholder('x')
            y = g.placeholder('y')
            cur = x
            for _ in range(50):
                cur = g.call_function(operator.add, (cur, y))
            g.output(cur)
            gm = lib.GraphModule(nn.Module(), g)
            interp = lib.Interpreter(gm)
            results.append((canon(interp.run(*args)), len(interp.env)))
        assert results[0] == results[1]


# ---------------------------------------------------------------------------
# Transformer

def transformer_code(lib, cls_body, fn_or_mod):
    gm = lib.symbolic_trace(fn_or_mod)
    cls = type('X', (lib.Transformer,), cls_body(lib))
    out = cls(gm).transform()
    meta = [(n.name, dict(n.meta)) for n in out.graph.nodes]
    return out.code, meta, out


def _comparable_meta(node, graph, seq_nr_base):
    """``node.meta`` with 2.x's from_node provenance as dicts whose graph_id says whether the source
    node is of ``graph`` (the ids of two libraries' graphs differ), and seq_nr relative to
    ``seq_nr_base`` (autograd's sequence number when the transform started: a process-wide count)."""
    def source(d):
        return dict(d, graph_id=d['graph_id'] == id(graph), from_node=[source(s) for s in d['from_node']])
    meta = dict(node.meta)
    if 'from_node' in meta:
        meta['from_node'] = [source(s.to_dict()) for s in meta['from_node']]
    if 'seq_nr' in meta:
        meta['seq_nr'] -= seq_nr_base
    return meta


def test_transformer_identity_and_overrides():
    def bodies(lib):
        return {}

    def add_to_mul(lib):
        def call_function(self, target, args, kwargs):
            if target in (torch.add, operator.add):
                target = torch.mul
            return super(cls_holder[lib], self).call_function(target, args, kwargs)
        return {'call_function': call_function}

    cls_holder = {}

    for body in (bodies, add_to_mul):
        res = []
        for lib in LIBS:
            gm = traced(lib)
            cls = type('X', (lib.Transformer,), body(lib))
            cls_holder[lib] = cls
            base = torch.autograd._get_sequence_nr() if TORCH2 else 0
            out = cls(gm).transform()
            res.append((out.code, [(n.name, n.op, _comparable_meta(n, gm.graph, base)) for n in out.graph.nodes],
                        canon(out(*inputs()))))
        assert res[0] == res[1]
        # torch.fx 2.x: provenance of the nodes made from nodes that had meta
        assert ('from_node' in str(res[0][1])) == TORCH2


def test_transformer_call_module_and_method_overrides():
    def make(lib):
        class X(lib.Transformer):
            def call_module(self, target, args, kwargs):
                if target == 'lin':
                    return torch.relu(args[0])
                return super().call_module(target, args, kwargs)

            def call_method(self, target, args, kwargs):
                if target == 'relu':
                    return args[0].sigmoid()
                return super().call_method(target, args, kwargs)

            def get_attr(self, target, args, kwargs):
                return super().get_attr(target, args, kwargs)

            def placeholder(self, target, args, kwargs):
                return super().placeholder(target, args, kwargs)
        return X

    res = []
    for lib in LIBS:
        gm = traced(lib)
        out = make(lib)(gm).transform()
        res.append((out.code, canon(out(*inputs()))))
    assert res[0] == res[1]


def test_transformer_replace_add_with_mul_seed():
    class Mod(nn.Module):
        def forward(self, x, y):
            return torch.add(x, y)

    res = []
    for lib in LIBS:
        class AddToMul(lib.Transformer):
            def call_function(self, target, args, kwargs):
                if target == torch.add:
                    return torch.mul(*args, **kwargs)
                return super().call_function(target, args, kwargs)
        out = AddToMul(lib.symbolic_trace(Mod())).transform()
        x, y = torch.randn(3), torch.randn(3)
        torch.testing.assert_close(out(x, y), x * y)
        res.append(out.code)
    assert res[0] == res[1]


def test_neg_sigm_swap_seeds():
    def fn(x):
        return torch.sigmoid(x).neg()

    for lib in LIBS:
        class NegSigmSwapInterpreter(lib.Interpreter):
            def call_function(self, target, args, kwargs):
                if target == torch.sigmoid:
                    return torch.neg(*args, **kwargs)
                return super().call_function(target, args, kwargs)

            def call_method(self, target, args, kwargs):
                if target == 'neg':
                    call_self, *args_tail = args
                    return call_self.sigmoid(*args_tail, **kwargs)
                return super().call_method(target, args, kwargs)

        class NegSigmSwapXformer(lib.Transformer):
            def call_function(self, target, args, kwargs):
                if target == torch.sigmoid:
                    return torch.neg(*args, **kwargs)
                return super().call_function(target, args, kwargs)

            def call_method(self, target, args, kwargs):
                if target == 'neg':
                    call_self, *args_tail = args
                    return call_self.sigmoid(*args_tail, **kwargs)
                return super().call_method(target, args, kwargs)

        gm = lib.symbolic_trace(fn)
        inp = torch.randn(3, 4)
        torch.testing.assert_close(NegSigmSwapInterpreter(gm).run(inp), torch.neg(inp).sigmoid())
        transformed = NegSigmSwapXformer(gm).transform()
        torch.testing.assert_close(transformed(inp), torch.neg(inp).sigmoid())


def test_handwritten_shapeprop_seed():
    """The seed's hand-written ShapeProp class, run on fxcpp."""
    from typing import Dict

    class ShapeProp:
        def __init__(self, mod):
            self.mod = mod
            self.graph = mod.graph
            self.modules = dict(self.mod.named_modules())

        def propagate(self, *args):
            args_iter = iter(args)
            env: Dict[str, fx.Node] = {}

            def load_arg(a):
                return fx.graph.map_arg(a, lambda n: env[n.name])

            def fetch_attr(target: str):
                target_atoms = target.split('.')
                attr_itr = self.mod
                for i, atom in enumerate(target_atoms):
                    if not hasattr(attr_itr, atom):
                        raise RuntimeError(f"Node referenced nonexistant target {'.'.join(target_atoms[:i])}")
                    attr_itr = getattr(attr_itr, atom)
                return attr_itr

            for node in self.graph.nodes:
                if node.op == 'placeholder':
                    result = next(args_iter)
                elif node.op == 'get_attr':
                    result = fetch_attr(node.target)
                elif node.op == 'call_function':
                    result = node.target(*load_arg(node.args), **load_arg(node.kwargs))
                elif node.op == 'call_method':
                    self_obj, *args = load_arg(node.args)
                    kwargs = load_arg(node.kwargs)
                    result = getattr(self_obj, node.target)(*args, **kwargs)
                elif node.op == 'call_module':
                    result = self.modules[node.target](*load_arg(node.args), **load_arg(node.kwargs))
                elif node.op == 'output':
                    return load_arg(node.args[0])
                if isinstance(result, torch.Tensor):
                    node.shape = result.shape
                    node.dtype = result.dtype
                env[node.name] = result

    class Mod(nn.Module):
        def __init__(self):
            super().__init__()
            self.param = nn.Parameter(torch.rand(3, 4))
            self.linear = nn.Linear(4, 5)

        def forward(self, x):
            return torch.topk(torch.sum(self.linear(x + self.linear.weight).relu(), dim=-1), 3)

    gm = fx.symbolic_trace(Mod())
    out = ShapeProp(gm).propagate(torch.randn(5, 4))
    assert out[0].shape == (3,)
    shapes = {n.name: tuple(n.shape) for n in gm.graph.nodes if hasattr(n, 'shape')}
    assert shapes == {'x': (5, 4), 'linear_weight': (5, 4), 'add': (5, 4), 'linear': (5, 5),
                      'relu': (5, 5), 'sum_1': (5,)}


def test_relu_decomposition_seed():
    def relu_decomposition(x):
        return (x > 0) * x

    decomposition_rules = {F.relu: relu_decomposition}

    class Mod(nn.Module):
        def forward(self, x):
            return F.relu(x) + 1

    codes = []
    for lib in LIBS:
        def decompose(model, tracer_class=lib.Tracer):
            graph = tracer_class().trace(model)
            new_graph = lib.Graph()
            env = {}
            tracer = lib.proxy.GraphAppendingTracer(new_graph)
            for node in graph.nodes:
                if node.op == 'call_function' and node.target in decomposition_rules:
                    proxy_args = [lib.Proxy(env[x.name], tracer) if isinstance(x, lib.Node) else x
                                  for x in node.args]
                    output_proxy = decomposition_rules[node.target](*proxy_args)
                    env[node.name] = output_proxy.node
                else:
                    env[node.name] = new_graph.node_copy(node, lambda x: env[x.name])
            return lib.GraphModule(model, new_graph)

        out = decompose(Mod())
        x = torch.randn(5)
        torch.testing.assert_close(out(x), F.relu(x) + 1)
        codes.append(out.code)
    assert codes[0] == codes[1]


def test_transformer_on_torchvision_model():
    torchvision = pytest.importorskip('torchvision')
    res = []
    for lib in LIBS:
        torch.manual_seed(0)
        m = torchvision.models.resnet18().eval()
        out = lib.Transformer(lib.symbolic_trace(m)).transform()
        torch.manual_seed(1)
        x = torch.randn(1, 3, 32, 32)
        with torch.no_grad():
            res.append((out.code, canon(out(x)[0, :5])))
    assert res[0][0] == res[1][0]
    torch.testing.assert_close(torch.tensor(res[0][1][3]), torch.tensor(res[1][1][3]))


class Block(nn.Module):
    """Residual block: fan-out of the input, a value used twice by one user."""
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3, padding=1)
        self.bn = nn.BatchNorm2d(3)

    def forward(self, x, unused):
        y = self.bn(self.conv(x))
        z = y * y
        return F.relu(z + x), torch.add(y, other=x, alpha=2)


def _containers(x, y, z):
    a = torch.cat([x, (y, [x])[0]], dim=0)
    b = torch.stack(tensors=(a, z))
    c = b[:, 1:2]
    return {'c': c, 'pair': [a, (z, y)]}


def _chain(x):
    for _ in range(5):
        x = x.relu() + 1
    return x


def _unused_values(x, y):
    x.neg()  # a dead node: nobody frees it, and it frees nothing of its own
    return x * 2


@pytest.mark.parametrize('name', ['M', 'Block', 'containers', 'chain', 'unused', 'resnet18'])
def test_user_to_last_uses_matches_torch_fx(name):
    def make():
        if name == 'resnet18':
            return pytest.importorskip('torchvision').models.resnet18()
        return {'M': M, 'Block': Block}[name]() if name in ('M', 'Block') else \
            {'containers': _containers, 'chain': _chain, 'unused': _unused_values}[name]

    results = []
    for lib in LIBS:
        torch.manual_seed(0)
        gm = lib.symbolic_trace(make())
        interp = lib.Interpreter(gm)
        # Dict order (users in reverse graph order) and list order both matter.
        results.append([(u.name, [n.name for n in ns]) for u, ns in interp.user_to_last_uses.items()])
        assert all(isinstance(ns, list) for ns in interp.user_to_last_uses.values())
        assert not hasattr(lib.Interpreter(gm, garbage_collect_values=False), 'user_to_last_uses')
    assert results[0] == results[1]
    assert results[0], "a graph with no uses tests nothing"


def _many(*args, **kwargs):
    return (args, sorted(kwargs.items()))


@pytest.mark.parametrize('nargs', [0, 7, 8, 9, 40])
def test_call_with_many_arguments(nargs):
    # The default path puts arguments on a C stack (inline up to a few, then on
    # the heap); results and env bookkeeping must not depend on the count.
    results = []
    for lib in LIBS:
        g = lib.Graph()
        xs = [g.placeholder(f'x{i}') for i in range(3)]
        args = tuple(xs[i % 3] for i in range(nargs))
        kwargs = {f'k{i}': xs[(i + 1) % 3] for i in range(nargs // 2)}
        r = g.call_function(_many, args, kwargs)
        m = g.call_method('count', (g.call_function(list, (args,)), xs[0]))
        g.output((r, m))
        gm = lib.GraphModule(nn.Module(), g)
        interp = lib.Interpreter(gm)
        out = interp.run(1, 2, 3)
        results.append((out, sorted(n.name for n in interp.env)))
    assert results[0] == results[1]
