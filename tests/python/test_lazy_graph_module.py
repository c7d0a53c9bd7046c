"""fxcpp._lazy_graph_module against torch.fx._lazy_graph_module (torch 2.x; issue 23): under
_use_lazy_graph_module(True) symbolic_trace returns lazy modules whose code is generated on first
use; each step's _needs_recompile(), the results, the code and the number of real recompiles are
torch.fx's. On torch 1.13, which has no lazy modules, _make_graph_module builds GraphModules."""
import pickle
from unittest.mock import patch

import pytest
import torch
import torch.fx as tfx

import fxcpp as fx
from fxcpp import _lazy_graph_module as ours_lazy
from torch2 import TORCH2

tlazy = pytest.importorskip('torch.fx._lazy_graph_module') if TORCH2 else None
LIBS = [(tfx, tlazy), (fx, ours_lazy)]
needs2 = pytest.mark.skipif(not TORCH2, reason='lazy graph modules are torch.fx 2.x API')


def f(x):
    return x.sin() + 1


def _sin_to_cos(gm):
    for n in gm.graph.nodes:
        if n.target == 'sin':
            n.target = 'cos'


def _story(lib, lazy):
    """What a user sees, step by step, with one library's lazy modules."""
    x = torch.arange(6.0).reshape(2, 3)
    seen = []
    with lazy._use_lazy_graph_module(True):
        gm = lib.symbolic_trace(f)
        seen.append(('lazy', isinstance(gm, lazy._LazyGraphModule), type(gm).__name__))
        seen.append(('needs after trace', gm._needs_recompile()))
        seen.append(('first call', gm(x).tolist(), gm._needs_recompile()))
        _sin_to_cos(gm)
        seen.append(('edited', gm._needs_recompile()))
        gm.recompile()
        seen.append(('recompile defers', gm._needs_recompile()))
        seen.append(('code', gm.code, gm._needs_recompile()))
        gm.recompile()
        seen.append(('str', 'cos' in str(gm), gm._needs_recompile()))
        gm.recompile()
        seen.append(('call again', gm(x).tolist(), gm._needs_recompile()))
        gm2 = lib.symbolic_trace(gm)  # tracing a lazy module realizes it first
        seen.append(('retrace', gm2.code, gm._needs_recompile(), gm2._needs_recompile()))
        plain = lazy._make_graph_module(gm, gm.graph, class_name='Mine', graph_module_cls=lib.GraphModule)
        seen.append(('explicit class', isinstance(plain, lazy._LazyGraphModule), type(plain).__name__))
    outside = lib.symbolic_trace(f)
    seen.append(('outside the block', isinstance(outside, lazy._LazyGraphModule)))
    return seen


@needs2
def test_lazy_story_as_torch_fx():
    ref, ours = (_story(lib, lazy) for lib, lazy in LIBS)
    assert ours == ref


@needs2
@pytest.mark.parametrize('lib, lazy', LIBS, ids=['torch.fx', 'fxcpp'])
def test_saved_lazy_forward_recompiles_once(lib, lazy):
    calls = []
    orig = lib.GraphModule.recompile

    def counting(self):
        calls.append(1)
        return orig(self)

    x = torch.randn(2, 3)
    with lazy._use_lazy_graph_module(True), patch.object(lib.GraphModule, 'recompile', counting):
        gm = lib.symbolic_trace(f)
        forward = gm.forward
        for _ in range(5):
            torch.testing.assert_close(forward(x), f(x))
    assert len(calls) == 1


@needs2
def test_pickle_keeps_lazy_module():
    with ours_lazy._use_lazy_graph_module(True):
        gm = fx.symbolic_trace(f)
        assert gm._needs_recompile()
        back = pickle.loads(pickle.dumps(gm))
        assert isinstance(back, ours_lazy._LazyGraphModule)
        ref = tlazy._LazyGraphModule.from_graphmodule(tfx.symbolic_trace(f))
        assert back.code == ref.code == gm.code
    x = torch.randn(4)
    torch.testing.assert_close(back(x), f(x))


@needs2
def test_from_graphmodule_and_force_recompile():
    gm = fx.symbolic_trace(f)
    assert not isinstance(gm, ours_lazy._LazyGraphModule)
    lazy = ours_lazy._LazyGraphModule.from_graphmodule(gm)
    assert ours_lazy._LazyGraphModule.from_graphmodule(lazy) is lazy
    assert lazy._needs_recompile()
    ours_lazy._LazyGraphModule.force_recompile(lazy)
    assert not lazy._needs_recompile() and lazy.code == gm.code
    # a torch.fx module is converted
    lazy_t = ours_lazy._LazyGraphModule.from_graphmodule(tfx.symbolic_trace(f))
    assert isinstance(lazy_t.graph, fx.Graph) and lazy_t.code == gm.code
    # Dynamo unwraps its forward to the bound method
    inner = torch._dynamo.eval_frame.innermost_fn(torch._dynamo.disable(lazy_t.forward))
    assert inner.__self__ is lazy_t


@needs2
def test_torch_flag_is_the_shared_state():
    with tlazy._use_lazy_graph_module(True):
        assert isinstance(fx.symbolic_trace(f), ours_lazy._LazyGraphModule)
        with tlazy._force_skip_lazy_graph_module():
            assert not isinstance(fx.symbolic_trace(f), ours_lazy._LazyGraphModule)


def test_without_the_flag_graph_modules_are_eager():
    gm = ours_lazy._make_graph_module(torch.nn.Module(), fx.symbolic_trace(f).graph)
    assert type(gm).__mro__[1] is fx.GraphModule
    with ours_lazy._force_skip_lazy_graph_module(), ours_lazy._use_lazy_graph_module(True):
        assert not isinstance(fx.symbolic_trace(f), ours_lazy._LazyGraphModule)
