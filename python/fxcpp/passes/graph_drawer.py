"""fxcpp.passes.graph_drawer: ``FxGraphDrawer`` (mirrors torch.fx.passes.graph_drawer 1.13).

``FxGraphDrawer(gm, name)`` draws ``gm.graph`` -- and the graph of every GraphModule that a
``call_module`` node of it calls -- as ``pydot.Dot`` graphs (needs the ``pydot`` package). The
DOT source is torch.fx's for the same model: same node names, labels, colours and edges.

It is torch.fx's ``FxGraphDrawer`` (a subclass: labels, styles and type names are its own
methods) with three methods redone in fxcpp's code, because torch.fx's versions check for
``torch.fx.GraphModule`` and torch.fx's ``TensorMetadata`` only:

* a called submodule that is an fxcpp GraphModule (``split_module``'s ``submod_i``) gets its own
  graph and its parameters are not drawn as weight nodes, as for a torch.fx one;
* ``node.meta['tensor_meta']`` written by fxcpp's ``ShapeProp`` (``fxcpp.passes.shape_prop``,
  whose ``TensorMetadata`` is its own class) is shown like torch.fx's. torch.fx's drawer would
  take fxcpp's named tuple for a plain tuple and fail with "Unsupported tensor meta type".

One label differs by nature: a ``call_module`` node calling an fxcpp GraphModule names its type
``fxcpp.graph_module.<class name>`` where torch.fx's says ``torch.fx.graph_module.<class
name>``. fxcpp's C++ core has its own, faster DOT writer (``fxcpp._C._graph_to_dot``, used by
``fxcpp show --format dot``) with a simpler layout; this module is for output identical to
torch.fx's.
"""
from itertools import chain
from typing import Dict

import torch
import torch.fx
from torch.fx.passes import graph_drawer as _torch_graph_drawer
from torch.fx.passes.shape_prop import TensorMetadata as _TorchTensorMetadata

from .. import _torch_compat
from .._compatibility import compatibility
from ..graph_module import GraphModule
from .shape_prop import TensorMetadata

__all__ = ['FxGraphDrawer']

HAS_PYDOT = _torch_graph_drawer.HAS_PYDOT

_GRAPH_MODULES = (GraphModule, torch.fx.GraphModule)
_TENSOR_METADATA = (TensorMetadata, _TorchTensorMetadata)

if HAS_PYDOT:
    import pydot

    @compatibility(is_backward_compatible=False)
    class FxGraphDrawer(_torch_graph_drawer.FxGraphDrawer):
        """Visualize an fxcpp (or torch.fx) GraphModule with graphviz, as torch.fx's
        ``FxGraphDrawer`` does::

            g = FxGraphDrawer(fxcpp.symbolic_trace(resnet18), "resnet18")
            with open("a.svg", "wb") as f:
                f.write(g.get_dot_graph().create_svg())
        """

        def __init__(self, graph_module, name: str, ignore_getattr: bool = False,
                     ignore_parameters_and_buffers: bool = False, skip_node_names_in_args: bool = True):
            options = (ignore_getattr, ignore_parameters_and_buffers, skip_node_names_in_args)
            self._name = name
            # read by torch.fx 2.x's label and style helpers (1.13's ignore them)
            self.dot_graph_shape = 'record'
            self.normalize_args = False
            self._dot_graphs: Dict[str, pydot.Dot] = {name: self._to_dot(graph_module, name, *options)}
            # One more graph per call_module node whose module is itself a GraphModule.
            for node in graph_module.graph.nodes:
                if node.op != 'call_module':
                    continue
                sub = self._get_leaf_node(graph_module, node)
                if isinstance(sub, _GRAPH_MODULES):
                    sub_name = f'{name}_{node.target}'
                    self._dot_graphs[sub_name] = self._to_dot(sub, sub_name, *options)

        def _tensor_meta_to_label(self, tm) -> str:
            if tm is None:
                return ''
            if isinstance(tm, _TENSOR_METADATA):  # before tuple: TensorMetadata is a named tuple
                return self._stringify_tensor_meta(tm)
            if isinstance(tm, dict):
                return ''.join(self._tensor_meta_to_label(v) for v in tm.values())
            if isinstance(tm, (list, tuple)):
                return ''.join(self._tensor_meta_to_label(v) for v in tm)
            raise RuntimeError(f"Unsupported tensor meta type {type(tm)}")

        def _to_dot(self, graph_module, name: str, ignore_getattr: bool,
                    ignore_parameters_and_buffers: bool, skip_node_names_in_args: bool) -> pydot.Dot:
            """One ``pydot.Dot`` for ``graph_module.graph``: its nodes in graph order, each
            call_module node of an ordinary module followed by one node per parameter and
            buffer of that module (unless ``ignore_parameters_and_buffers``), then the
            def-use edges. ``get_attr`` nodes are left out with ``ignore_getattr``."""
            dot = pydot.Dot(name, rankdir="TB")
            drawn = [n for n in graph_module.graph.nodes if not (ignore_getattr and n.op == 'get_attr')]
            for node in drawn:
                label = _torch_compat.fx_drawer_node_label(self, graph_module, node, skip_node_names_in_args)
                dot.add_node(pydot.Node(node.name, label=label, **self._get_node_style(node)))
                if node.op != 'call_module':
                    continue
                module = self._get_leaf_node(graph_module, node)
                if ignore_parameters_and_buffers or isinstance(module, _GRAPH_MODULES):
                    continue
                for pname, tensor in chain(module.named_parameters(), module.named_buffers()):
                    weight_name = f'{node.name}.{pname}'
                    # torch.fx labels a buffer "buffer" only, without its name
                    head = (f'{weight_name}|op_code=get_parameter' if isinstance(tensor, torch.nn.Parameter)
                            else 'buffer\\l')
                    label = '{' + head + self._get_tensor_label(tensor) + '}'
                    dot.add_node(pydot.Node(weight_name, label=label, **_torch_graph_drawer._WEIGHT_TEMPLATE))
                    dot.add_edge(pydot.Edge(weight_name, node.name))
            for node in drawn:
                for user in node.users:
                    dot.add_edge(pydot.Edge(node.name, user.name))
            return dot

else:
    @compatibility(is_backward_compatible=False)
    class FxGraphDrawer:  # type: ignore[no-redef]
        def __init__(self, graph_module, name: str, ignore_getattr: bool = False):
            raise RuntimeError('FXGraphDrawer requires the pydot package to be installed. Please install '
                               'pydot through your favorite Python package manager.')
