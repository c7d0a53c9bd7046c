"""fxcpp.passes.graph_drawer: ``FxGraphDrawer`` (mirrors the installed torch.fx.passes.graph_drawer).

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
  take fxcpp's named tuple for a plain tuple and fail with "Unsupported tensor meta type";
* on torch.fx 2.x (whose Node has a C base, so fxcpp's nodes are no torch.fx nodes) the label
  helper gets a view of each node whose argument nodes torch.fx writes as ``%name``, so
  ``skip_node_names_in_args`` leaves them out as for torch.fx nodes. 2.x's options
  (``parse_stack_trace``, ``dot_graph_shape``, ``normalize_args``) and ``buf_meta`` clusters are
  taken there (``_torch_compat.FX_DRAWER_OPTIONS_2X``); 1.13's signature elsewhere.

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
from ..node import Node, map_arg
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

        if _torch_compat.FX_DRAWER_OPTIONS_2X:
            def __init__(self, graph_module, name: str, ignore_getattr: bool = False,
                         ignore_parameters_and_buffers: bool = False, skip_node_names_in_args: bool = True,
                         parse_stack_trace: bool = False, dot_graph_shape=None, normalize_args: bool = False):
                self._init(graph_module, name, ignore_getattr, ignore_parameters_and_buffers, skip_node_names_in_args,
                           parse_stack_trace, dot_graph_shape, normalize_args)
        else:
            def __init__(self, graph_module, name: str, ignore_getattr: bool = False,
                         ignore_parameters_and_buffers: bool = False, skip_node_names_in_args: bool = True):
                self._init(graph_module, name, ignore_getattr, ignore_parameters_and_buffers, skip_node_names_in_args,
                           False, None, False)

        def _init(self, graph_module, name, ignore_getattr, ignore_parameters_and_buffers, skip_node_names_in_args,
                  parse_stack_trace, dot_graph_shape, normalize_args):
            options = (ignore_getattr, ignore_parameters_and_buffers, skip_node_names_in_args, parse_stack_trace)
            self._name = name
            # read by torch.fx 2.x's label and style helpers (1.13's ignore them)
            self.dot_graph_shape = dot_graph_shape if dot_graph_shape is not None else 'record'
            self.normalize_args = normalize_args
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

        def _to_dot(self, graph_module, name: str, ignore_getattr: bool, ignore_parameters_and_buffers: bool,
                    skip_node_names_in_args: bool, parse_stack_trace: bool = False) -> pydot.Dot:
            """One ``pydot.Dot`` for ``graph_module.graph``: its nodes in graph order, each
            call_module node of an ordinary module followed by one node per parameter and
            buffer of that module (unless ``ignore_parameters_and_buffers``), then the
            def-use edges. ``get_attr`` nodes are left out with ``ignore_getattr``. With torch.fx
            2.x, nodes whose ``meta['buf_meta']`` has ``n_origin > 1`` are drawn in one cluster
            per buffer name, the clusters added after the weight nodes."""
            dot = pydot.Dot(name, rankdir="TB")
            clusters: Dict[str, pydot.Cluster] = {}
            weight_style = dict(_torch_graph_drawer._WEIGHT_TEMPLATE, shape=self.dot_graph_shape)
            drawn = [n for n in graph_module.graph.nodes if not (ignore_getattr and n.op == 'get_attr')]
            for node in drawn:
                label = _torch_compat.fx_drawer_node_label(self, graph_module, _LabelNode.of(node),
                                                           skip_node_names_in_args, parse_stack_trace)
                where = dot
                buf_meta = node.meta.get('buf_meta') if _torch_compat.FX_DRAWER_OPTIONS_2X else None
                if buf_meta is not None and buf_meta.n_origin > 1:
                    where = clusters.setdefault(buf_meta.name, pydot.Cluster(buf_meta.name, label=buf_meta.name))
                where.add_node(pydot.Node(node.name, label=label, **self._get_node_style(node)))
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
                    dot.add_node(pydot.Node(weight_name, label=label, **weight_style))
                    dot.add_edge(pydot.Edge(weight_name, node.name))
            for cluster in clusters.values():
                cluster.set('color', 'royalblue')
                cluster.set('penwidth', '2')
                dot.add_subgraph(cluster)
            for node in drawn:
                for user in node.users:
                    dot.add_edge(pydot.Edge(node.name, user.name))
            return dot

    class _Named:
        """Stands for a node inside another node's arguments: torch.fx's ``_format_arg`` writes
        it as ``%name`` (what it writes for one of its own nodes) and ``repr`` as the name."""
        __slots__ = ('name',)

        def __init__(self, name):
            self.name = name

        def _custom_fx_repr_fn(self):
            return '%' + self.name

        def __repr__(self):
            return self.name

    class _LabelNode:
        """What torch.fx's label helper reads of a node, with the nodes among its arguments
        replaced by ``_Named``. Needed where fxcpp's nodes are not torch.fx nodes (torch.fx
        2.x, whose Node has a C base): torch.fx's ``_format_arg`` would write them as plain
        names, which ``skip_node_names_in_args`` cannot tell from constants."""

        def __init__(self, node):
            self._node = node
            self.args = map_arg(node.args, lambda n: _Named(n.name))
            self.kwargs = map_arg(node.kwargs, lambda n: _Named(n.name))

        def __getattr__(self, name):
            return getattr(self._node, name)

        @classmethod
        def of(cls, node):
            return cls(node) if isinstance(node, Node) and not isinstance(node, torch.fx.Node) else node

else:
    @compatibility(is_backward_compatible=False)
    class FxGraphDrawer:  # type: ignore[no-redef]
        def __init__(self, graph_module, name: str, ignore_getattr: bool = False):
            raise RuntimeError('FXGraphDrawer requires the pydot package to be installed. Please install '
                               'pydot through your favorite Python package manager.')
