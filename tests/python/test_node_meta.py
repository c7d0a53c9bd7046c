"""node.meta after symbolic tracing, against the installed torch.fx (issue 23, item 3).

torch.fx 2.x records node.meta["nn_module_stack"] on every node created while a submodule is
called, keeps Tracer.scope / module_stack / node_name_to_scope, records node.meta["stack_trace"]
with record_stack_traces at node creation, and names constants through
Tracer.get_fresh_qualname; torch.fx 1.13 records none of that but the stack trace (Note
[Tracing metadata], fxcpp/proxy.py). Each test traces the same model with both libraries and
compares every node's meta, keys and values.

Stack traces: fxcpp's text is torch.fx's without the frames of torch.fx's own files (2.14 keeps
torch/fx/proxy.py's create_node/create_proxy/__torch_function__ frames at the end of its text;
fxcpp's equivalents are its own files and are left out); the user's frames, torch.nn's and
the rest are compared character for character.
"""
import collections
import copy
import os
import re

import pytest
import torch
import torch.fx as tfx

import fxcpp
from fxcpp import _torch_compat
from torch2 import TORCH2

FX_DIR = os.path.dirname(os.path.abspath(tfx.__file__)) + os.sep
FXCPP_DIR = os.path.dirname(os.path.abspath(fxcpp.__file__)) + os.sep
_FRAME = re.compile(r'File "(.+)", line \d+, in .+')


def _frames(text):
    """The frames of a formatted stack trace: [(header line, code line or None)]."""
    lines = text.strip().split('\n')
    out = []
    i = 0
    while i < len(lines):
        head = lines[i].strip()
        code = lines[i + 1].strip() if i + 1 < len(lines) and not _FRAME.match(lines[i + 1].strip()) else None
        out.append((head, code))
        i += 2 if code is not None else 1
    return out


def _without_tracer_frames(text):
    """torch.fx 1.13's stack trace (innermost frame first, out to the interpreter's first) from
    the outermost `forward` frame in: without the frames of torch.fx's and fxcpp's own files and
    those of the callers of the trace (this test, pytest), which differ between the libraries."""
    frames = [(h, c) for h, c in _frames(text) if not _FRAME.match(h).group(1).startswith((FX_DIR, FXCPP_DIR))]
    names = [_FRAME.match(h).group(0).rsplit(' in ', 1)[1] for h, _ in frames]
    last_forward = max((i for i, n in enumerate(names) if n == 'forward'), default=-1)
    return frames[:last_forward + 1]


def _meta(lib, root, record_stack_traces=False, tracer_cls=None, concrete_args=None):
    tracer = (tracer_cls or lib.Tracer)()
    tracer.record_stack_traces = record_stack_traces
    graph = tracer.trace(root, concrete_args=concrete_args)
    return graph, tracer


def _compare(root, record_stack_traces=False, tracer_classes=None, concrete_args=None):
    """Traces `root` with both libraries; asserts equal meta per node and returns the graphs."""
    ref_cls, our_cls = tracer_classes or (None, None)
    g_ref, t_ref = _meta(tfx, copy.deepcopy(root), record_stack_traces, ref_cls, concrete_args)
    g_ours, t_ours = _meta(fxcpp, copy.deepcopy(root), record_stack_traces, our_cls, concrete_args)
    ref = [(n.name, n.op, dict(n.meta)) for n in g_ref.nodes]
    ours = [(n.name, n.op, dict(n.meta)) for n in g_ours.nodes]
    assert [r[:2] for r in ours] == [r[:2] for r in ref]
    for (name, _, m_ref), (_, _, m_ours) in zip(ref, ours):
        st_ref, st_ours = m_ref.pop('stack_trace', None), m_ours.pop('stack_trace', None)
        assert m_ours == m_ref, name
        assert [type(v) for v in m_ours.values()] == [type(v) for v in m_ref.values()], name
        assert (st_ours is None) == (st_ref is None), name
        if st_ref is None:
            continue
        if TORCH2:
            # fxcpp's text is torch.fx's without the frames of torch.fx's own files (at its end,
            # but for a user's create_node override, which comes between them).
            ref_frames = _frames(st_ref)
            assert _frames(st_ours) == [f for f in ref_frames if not _FRAME.match(f[0]).group(1).startswith(FX_DIR)]
        else:
            assert _without_tracer_frames(st_ours) == _without_tracer_frames(st_ref), name
        # (torch.fx 1.13's text has its own frames too, and fxcpp's on 1.13 has fxcpp's)
        assert FXCPP_DIR not in st_ours or not TORCH2
    if TORCH2:
        assert t_ours.node_name_to_scope == t_ref.node_name_to_scope
        assert list(t_ours.module_stack.items()) == list(t_ref.module_stack.items()) == []
        assert t_ours.num_calls == t_ref.num_calls
        assert (t_ours.scope.module_path, t_ours.scope.module_type) == ('', None)
    return g_ref, g_ours


# ---------------------------------------------------------------------------- models

class Leafy(torch.nn.Module):
    def forward(self, x):
        return x * 2


class Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.leaf = Leafy()

    def forward(self, x):
        y = torch.relu(self.lin(x)) + torch.nn.functional.dropout(x, 0.0)
        return self.leaf(y).transpose(0, 1).transpose(0, 1)


class Nested(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()
        self.seq = torch.nn.Sequential(Inner(), torch.nn.ReLU(), torch.nn.Sequential(Inner()))
        self.w = torch.nn.Parameter(torch.randn(4))

    def forward(self, x):
        y = self.inner(x)
        y = self.inner(y)  # the same module twice: "inner@1"
        z = self.seq(y) * self.w
        return z.sum(dim=0), torch.nn.functional.gelu(z) + torch.tensor([1.0, 2.0, 3.0, 4.0])


class Block(torch.nn.Module):
    """A transformer block written with nn.MultiheadAttention."""

    def __init__(self, d=8, heads=2):
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(d, heads, batch_first=True)
        self.norm1 = torch.nn.LayerNorm(d)
        self.norm2 = torch.nn.LayerNorm(d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 2 * d), torch.nn.GELU(), torch.nn.Linear(2 * d, d))

    def forward(self, x):
        h = self.norm1(x)
        a = self.attn(h, h, h, need_weights=False)[0]  # (no unpacking: torch.fx 1.13 fails on it on 3.11)
        x = x + a
        return x + self.mlp(self.norm2(x))


class LeafTracer:
    """Tracers that keep Inner as a leaf module (its call_module node carries the stack)."""

    @staticmethod
    def make(base):
        class T(base):
            def is_leaf_module(self, m, qualname):
                return isinstance(m, Inner) or super().is_leaf_module(m, qualname)
        return T


def plain_function(x, y):
    return torch.sin(x) + y.relu() * 3


def _resnet18():
    torchvision = pytest.importorskip('torchvision')
    return torchvision.models.resnet18()


MODELS = {
    'nested': Nested,
    'transformer_block': Block,
    'resnet18': _resnet18,
    'function': lambda: plain_function,
}


@pytest.mark.parametrize('record_stack_traces', [False, True], ids=['plain', 'stack_traces'])
@pytest.mark.parametrize('name', sorted(MODELS))
def test_meta_after_trace_as_torch_fx(name, record_stack_traces):
    torch.manual_seed(0)
    _compare(MODELS[name](), record_stack_traces)


@pytest.mark.parametrize('record_stack_traces', [False, True], ids=['plain', 'stack_traces'])
def test_meta_of_leaf_modules_as_torch_fx(record_stack_traces):
    g_ref, g_ours = _compare(Nested(), record_stack_traces,
                             (LeafTracer.make(tfx.Tracer), LeafTracer.make(fxcpp.Tracer)))
    calls = [n for n in g_ours.nodes if n.op == 'call_module']
    assert calls and all(n.target.endswith(('inner', '0', '2.0', '1')) for n in calls)


def test_symbolic_trace_records_module_stack_where_torch_fx_does():
    m = Nested()
    ref, ours = tfx.symbolic_trace(copy.deepcopy(m)), fxcpp.symbolic_trace(copy.deepcopy(m))
    assert [dict(n.meta) for n in ours.graph.nodes] == [dict(n.meta) for n in ref.graph.nodes]
    stacks = [n.meta.get('nn_module_stack') for n in ours.graph.nodes]
    assert any(stacks) == TORCH2
    if TORCH2:
        # a copy per node, as torch.fx makes: changing one leaves the others alone
        with_stack = [s for s in stacks if s]
        assert all(type(s) is collections.OrderedDict for s in with_stack)
        assert len({id(s) for s in with_stack}) == len(with_stack)
        # the second call of `inner` is keyed "inner@1"
        assert any('inner@1' in s for s in with_stack)


def test_meta_of_an_overridden_create_node_as_torch_fx():
    def make(base):
        class T(base):
            def create_node(self, *args, **kwargs):
                node = super().create_node(*args, **kwargs)
                node.meta['tag'] = node.name
                return node
        return T
    _compare(Nested(), True, (make(tfx.Tracer), make(fxcpp.Tracer)))


@pytest.mark.skipif(not TORCH2, reason='torch.fx 1.13 has no forward-only stack trace option')
def test_forward_only_stack_traces_as_torch_fx():
    def make(base):
        class T(base):
            _record_forward_stack_traces_only = True
        return T
    _compare(Nested(), True, (make(tfx.Tracer), make(fxcpp.Tracer)))


@pytest.mark.skipif(not TORCH2, reason='torch.fx 1.13 has no Scope, module_stack or get_fresh_qualname')
def test_scope_api_as_torch_fx():
    from fxcpp.proxy import Scope, ScopeContextManager
    s = Scope('a', int)
    with ScopeContextManager(s, Scope('b.c', float)) as inner:
        assert inner is s and (s.module_path, s.module_type) == ('b.c', float)
    assert (s.module_path, s.module_type) == ('a', int)
    g = fxcpp.Graph()
    t = fxcpp.proxy.GraphAppendingTracer(g)
    assert (t.scope.module_path, t.scope.module_type, dict(t.module_stack), t.node_name_to_scope) == \
        ('', None, {}, {})


@pytest.mark.skipif(not TORCH2, reason='torch.fx 1.13 names tensor constants by searching from 0')
def test_tensor_constants_named_through_get_fresh_qualname():
    class Consts(torch.nn.Module):
        def forward(self, x):
            return x + torch.tensor([1.0]) + torch.tensor([2.0]) * torch.tensor([3.0])

    names = []
    for lib in (tfx, fxcpp):
        lib.Tracer._qualname_counter.clear()
        root = Consts()
        gm = lib.symbolic_trace(root)
        gm2 = lib.symbolic_trace(root)  # the root keeps _tensor_constant0..2: the counter goes on
        names.append(([n.target for n in gm.graph.nodes if n.op == 'get_attr'],
                      [n.target for n in gm2.graph.nodes if n.op == 'get_attr'], gm2.code))
        tracer = lib.Tracer()
        tracer.root = torch.nn.Module()
        names.append([tracer.get_fresh_qualname('_p') for _ in range(2)])
    assert names[0] == names[2] and names[1] == names[3]
    assert names[0][1] != names[0][0]


@pytest.mark.skipif(not TORCH2, reason='torch.fx 1.13 records innermost-first traces of create_proxy nodes only '
                                       '(compared with torch.fx 1.13 above)')
def test_stack_trace_points_at_user_lines():
    tracer = fxcpp.Tracer()
    tracer.record_stack_traces = True
    g = tracer.trace(Nested())
    here = os.path.abspath(__file__)
    traced = [n for n in g.nodes if n.op not in ('placeholder', 'output')]
    assert traced and all(n.stack_trace and here in n.stack_trace for n in traced)
    # the innermost frame is the user's line that made the node
    gelu = next(n for n in traced if 'gelu' in n.name)
    assert gelu.stack_trace.rstrip().split('\n')[-1].strip().startswith('return z.sum(dim=0), torch.nn.functional.gelu')
    assert _torch_compat.TRACER_RECORDS_META == TORCH2
