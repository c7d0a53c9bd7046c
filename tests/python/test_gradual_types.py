"""The gradual type checker on fxcpp graphs (issue 13): fxcpp.experimental.graph_gradual_typechecker,
refinement_types, unify_refinements and fxcpp.tensor_type give torch.fx's node types, refinement
constraints and errors on the same models."""
import pytest
import torch
import torch.fx
import torchvision

import fxcpp
from fxcpp.experimental.graph_gradual_typechecker import GraphTypeChecker, Refine, broadcast_types
from fxcpp.experimental.rewriter import RewritingTracer
from fxcpp.experimental.unify_refinements import infer_symbolic_types
from fxcpp.tensor_type import Dyn, TensorType
from torch.fx.experimental import graph_gradual_typechecker as torch_checker
from torch.fx.experimental import unify_refinements as torch_unify
from torch.fx.experimental.rewriter import RewritingTracer as TorchRewritingTracer


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.relu = torch.nn.ReLU()
        self.pool = torch.nn.AdaptiveAvgPool2d((1, 1))
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x: TensorType((Dyn, 3, 16, 16))):
        y = self.relu(self.bn(self.conv(x)))
        y = torch.flatten(self.pool(y), 1)
        return self.fc(y)


class AddReshape(torch.nn.Module):
    def forward(self, x: TensorType((1, 2, 3, Dyn)), y: TensorType((2, 3, 4))):
        return torch.reshape(torch.add(x, y), [2, -1])


class Bad(torch.nn.Module):
    def forward(self, x: TensorType((1, 2)), y: TensorType((3, 4))):
        return torch.add(x, y)


def _pair(model):
    """(fxcpp GraphModule, torch.fx GraphModule) of the same model, traced by each library's
    RewritingTracer (which keeps the parameter annotations as placeholder types)."""
    ours_graph = RewritingTracer().trace(model)
    theirs_graph = TorchRewritingTracer().trace(model)
    return fxcpp.GraphModule(model, ours_graph), torch.fx.GraphModule(model, theirs_graph)


def _types(gm):
    return [(n.name, n.op, str(n.type)) for n in gm.graph.nodes]


@pytest.mark.parametrize('make', [ConvNet, AddReshape])
def test_type_check_gives_torch_fx_types(make):
    ours, theirs = _pair(make())
    assert isinstance(ours, fxcpp.GraphModule)
    assert GraphTypeChecker({}, ours).type_check() == torch_checker.GraphTypeChecker({}, theirs).type_check()
    got = _types(ours)
    assert got == _types(theirs)
    # The checker did annotate: every call's output has a type.
    assert all(t != 'None' for name, op, t in got if op != 'output')


def test_type_check_errors_like_torch_fx():
    ours, theirs = _pair(Bad())
    with pytest.raises(TypeError) as ref:
        torch_checker.GraphTypeChecker({}, theirs).type_check()
    with pytest.raises(TypeError) as got:
        GraphTypeChecker({}, ours).type_check()
    assert str(got.value) == str(ref.value)


def test_refine_constraints_match_torch_fx():
    ours, theirs = _pair(ConvNet())
    GraphTypeChecker({}, ours).type_check()
    torch_checker.GraphTypeChecker({}, theirs).type_check()
    a, b = Refine(ours), torch_checker.Refine(theirs)
    a.refine()
    b.refine()
    assert [str(c) for c in a.constraints] == [str(c) for c in b.constraints]
    assert len(a.constraints) > 0


def test_infer_symbolic_types_matches_torch_fx():
    class M(torch.nn.Module):
        def forward(self, x: TensorType((Dyn, 2)), y: TensorType((3, Dyn))):
            return torch.add(x, y)

    ours, theirs = _pair(M())
    infer_symbolic_types(ours)
    torch_unify.infer_symbolic_types(theirs)
    assert _types(ours) == _types(theirs)
    assert any(n.type is not None for n in ours.graph.nodes if n.op == 'call_function')


def test_resnet18_types_match_torch_fx():
    model = torchvision.models.resnet18()
    ours = fxcpp.symbolic_trace(model)
    theirs = torch.fx.symbolic_trace(model)
    for gm in (ours, theirs):
        for n in gm.graph.nodes:
            if n.op == 'placeholder':
                n.type = TensorType((1, 3, 224, 224))
    GraphTypeChecker({}, ours).type_check()
    torch_checker.GraphTypeChecker({}, theirs).type_check()
    assert _types(ours) == _types(theirs)
    assert str(list(ours.graph.nodes)[-2].type) == 'TensorType[(1, 1000)]'


def test_broadcast_types_and_modules_are_torch_fx_objects():
    assert TensorType is torch.fx.tensor_type.TensorType and Dyn is torch.fx.tensor_type.Dyn
    t1, t2 = broadcast_types(TensorType((1, 2, 3)), TensorType((2, 1)))
    assert (t1, t2) == torch_checker.broadcast_types(TensorType((1, 2, 3)), TensorType((2, 1)))
