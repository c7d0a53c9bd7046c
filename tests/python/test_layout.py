"""Module layout parity: a public name reachable as torch.fx.X.Y is reachable as fxcpp.X.Y."""
import importlib

import pytest
import torch.fx

import fxcpp

MODULES = ['', '.graph', '.node', '.graph_module', '.proxy', '._symbolic_trace', '.immutable_collections',
           '.interpreter', '.subgraph_rewriter', '.passes.shape_prop', '._pytree', '._compatibility', '.annotate']


@pytest.mark.parametrize('suffix', MODULES)
def test_public_names_reachable(suffix):
    ref = importlib.import_module('torch.fx' + suffix)
    ours = importlib.import_module('fxcpp' + suffix)
    names = getattr(ref, '__all__', None) or [n for n in vars(ref) if not n.startswith('_')]
    missing = [n for n in names
               if not n.startswith('_') and not isinstance(getattr(ref, n, None), type(importlib))
               and not hasattr(ours, n)]
    assert not missing, f'fxcpp{suffix} lacks {missing}'


def test_top_level_api():
    for name in ['symbolic_trace', 'Tracer', 'wrap', 'PH', 'ProxyableClassMeta', 'Graph', 'CodeGen', 'Node',
                 'map_arg', 'Proxy', 'GraphModule', 'Interpreter', 'Transformer', 'replace_pattern']:
        assert hasattr(fxcpp, name), name
    assert fxcpp.Node is fxcpp.node.Node and fxcpp.Graph is fxcpp.graph.Graph
