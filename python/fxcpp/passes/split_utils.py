"""fxcpp.passes.split_utils: ``split_by_tags`` (mirrors torch.fx.passes.split_utils 1.13).

``getattr_recursive``, ``setattr_recursive`` and ``Component`` are torch.fx's own, re-exported.
``split_by_tags(gm, tags)`` runs torch.fx's implementation -- it reads the caller's graph through
the ``torch.fx.Node`` interface, which fxcpp nodes have -- and converts what it builds: torch.fx
returns a ``torch.fx.GraphModule`` whose submodules (one per tag) are ``torch.fx.GraphModule``s;
for an fxcpp ``gm`` the top module and each tag's submodule come back as fxcpp GraphModules
(``fxcpp.from_torch_fx``: same code, node names and ``meta`` dicts, parameters shared), and
the ``tag`` attribute torch.fx sets on the submodules' nodes is carried over. A torch.fx ``gm``
gets torch.fx's result unchanged.
"""
from typing import List, Type

import torch.fx
from torch.fx.passes import split_utils as _torch_split_utils
from torch.fx.passes.split_utils import Component, getattr_recursive, setattr_recursive  # noqa: F401

from .. import _torch_compat
from .._compatibility import compatibility
from ..interop import from_torch_fx, to_torch_fx

__all__ = ['getattr_recursive', 'setattr_recursive', 'Component', 'split_by_tags']


def _from_torch_fx_keeping_tags(gm: torch.fx.GraphModule):
    converted = from_torch_fx(gm)
    for theirs, ours in zip(gm.graph.nodes, converted.graph.nodes):
        tag = getattr(theirs, 'tag', None)
        if tag is not None:
            ours.tag = tag
    return converted


def _converted(gm, result):
    if isinstance(gm, torch.fx.GraphModule):
        return result
    top = from_torch_fx(result)
    for node in top.graph.nodes:  # one call_module node per tag, calling that tag's submodule
        if node.op == 'call_module':
            setattr(top, node.target, _from_torch_fx_keeping_tags(getattr(top, node.target)))
    return top


if _torch_compat.FX_API_2:
    @compatibility(is_backward_compatible=False)
    def split_by_tags(gm, tags: List[str], return_fqn_mapping: bool = False, return_tuple: bool = False,
                      GraphModuleCls: Type[torch.fx.GraphModule] = torch.fx.GraphModule):
        """Split ``gm`` into one submodule per tag (in ``tags`` order) holding the nodes whose
        ``node.tag`` is that tag, and a top module calling them (see torch.fx's docstring);
        ``return_fqn_mapping`` also returns {original attribute name: new one}."""
        fx_gm = gm
        if not isinstance(gm, torch.fx.GraphModule):
            # torch.fx 2.x's split_by_tags deep-copies the graph's CodeGen into torch.fx graphs and
            # maps arguments with its C map_arg (torch.fx Nodes only): it runs on a torch.fx copy
            fx_gm = to_torch_fx(gm)
            for ours, theirs in zip(gm.graph.nodes, fx_gm.graph.nodes):
                if hasattr(ours, 'tag'):
                    theirs.tag = ours.tag
        result = _torch_split_utils.split_by_tags(fx_gm, tags, return_fqn_mapping=return_fqn_mapping,
                                                  return_tuple=return_tuple, GraphModuleCls=GraphModuleCls)
        if return_fqn_mapping:
            result, mapping = result
            return _converted(gm, result), mapping
        return _converted(gm, result)
else:
    @compatibility(is_backward_compatible=False)
    def split_by_tags(gm, tags: List[str]):
        """Split ``gm`` into one submodule per tag (in ``tags`` order) holding the nodes whose
        ``node.tag`` is that tag, and a top module calling them (see torch.fx's docstring)."""
        return _converted(gm, _torch_split_utils.split_by_tags(gm, tags))
