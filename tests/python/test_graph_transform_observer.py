"""fxcpp.passes.graph_transform_observer against torch.fx's (torch 2.x): the same pass, observed on
each library's module, records the same created/erased nodes, the same ``from_node`` provenance and
writes the same DOT files."""
import contextlib
import copy
import os

import pytest
import torch
import torch.fx as tfx

import fxcpp
from torch2 import TORCH2

pytestmark = pytest.mark.skipif(not TORCH2, reason='GraphTransformObserver is torch.fx 2.x API')


class M(torch.nn.Module):
    def forward(self, x):
        val = torch.neg(x)
        return torch.add(val, val) * torch.neg(x + 1)


def pattern(x):
    return torch.neg(x)


def replacement(x):
    return torch.relu(x)


def _observers():
    from torch.fx.passes.graph_transform_observer import GraphTransformObserver as Theirs
    from fxcpp.passes.graph_transform_observer import GraphTransformObserver as Ours
    return [(tfx, Theirs), (fxcpp, Ours)]


def _provenance(gm):
    return {n.name: [(s.name, s.target, s.pass_name, [a.value for a in s.action]) for s in n.meta.get('from_node', [])]
            for n in gm.graph.nodes}


def _observe(lib, observer, tmp_path, log):
    gm = lib.symbolic_trace(M())
    folder = tmp_path / lib.__name__
    folder.mkdir()
    with observer(gm, 'neg_to_relu', log_url=str(folder) if log else None) as ob:
        lib.subgraph_rewriter.replace_pattern(gm, pattern, replacement)
        # a deep copy made inside the block is observed too: what a pass does to it is recorded
        dup = copy.deepcopy(gm)
        lib.subgraph_rewriter.replace_pattern(dup, replacement, pattern)
        copies = len(ob.copied_gms)
    files = sorted(f.split('_', 2)[2] for f in os.listdir(folder))
    return (sorted(ob.created_nodes), sorted(ob.erased_nodes), _provenance(gm), _provenance(dup), files, copies,
            gm.code)


@pytest.mark.parametrize('log', [True, False])
def test_same_records_as_torch_fx(tmp_path, log):
    from torch._inductor import config
    (tlib, theirs), (olib, ours) = _observers()
    # without a log_url the observer is active only for Inductor's provenance tracking
    with contextlib.nullcontext() if log else config.patch({'trace.provenance_tracking_level': 1}):
        a, b = _observe(tlib, theirs, tmp_path, log), _observe(olib, ours, tmp_path, log)
    assert a == b
    created, erased, prov, _, files, copies, _ = b
    assert copies == 1 and {'relu', 'relu_1'} <= set(created) and {'neg', 'neg_1'} <= set(erased)
    assert prov['relu'] == [('neg', str(torch.neg), 'neg_to_relu', ['replace', 'create'])]
    assert files == (['neg_to_relu_input_graph.dot', 'neg_to_relu_output_graph.dot'] if log else [])


def test_refuses_a_non_node_as_torch_fx_does(tmp_path):
    (_, theirs), (_, ours) = _observers()
    errors = []
    for lib, observer in ((tfx, theirs), (fxcpp, ours)):
        gm = lib.symbolic_trace(M())
        with pytest.raises(AssertionError) as e:
            with observer(gm, 'p', log_url=str(tmp_path)) as ob:
                ob.name_to_node['bogus'] = 'not a node'
                ob._node_replace_hook(next(iter(gm.graph.nodes)), 'bogus', None)
        errors.append(str(e.value))
    assert errors[0] == errors[1] == "Expected Node, got <class 'str'>"
