"""fxcpp.passes.operator_support: which nodes a backend supports (mirrors
torch.fx.passes.operator_support 1.13).

``OperatorSupportBase``, ``create_op_support`` and ``chain`` are torch.fx's own (they only call
``is_node_supported``), so support objects of both libraries mix. ``OperatorSupport`` and
``OpSupports`` subclass torch.fx's and redo the one thing that does not work on fxcpp graphs:
reading an argument's dtype. torch.fx reads ``meta['tensor_meta'].dtype`` only when that is
torch.fx's ``TensorMetadata`` and otherwise falls back to ``meta['type']``; after fxcpp's
``ShapeProp`` (whose ``TensorMetadata`` is fxcpp's own class) it would compare ``torch.Tensor``
with the dtypes and reject every dtype-constrained node (``OpSupports.decline_if_input_dtype``
would accept every node). Here both libraries' ``TensorMetadata`` are read, so the answers are
torch.fx's on a torch.fx-traced model.
"""
import typing as t

import torch
from torch.fx.passes import operator_support as _torch_operator_support
from torch.fx.passes.operator_support import (  # noqa: F401  (re-exported)
    IsNodeSupported, OperatorSupportBase, SupportDict, SupportedArgumentDTypes, TargetTypeName,
    chain, create_op_support)
from torch.fx.passes.shape_prop import TensorMetadata as _TorchTensorMetadata

from .._compatibility import compatibility
from ..node import Node
from .shape_prop import TensorMetadata
from .tools_common import CALLABLE_NODE_OPS, get_node_target

if hasattr(_torch_operator_support, 'any_chain'):  # torch.fx 2.x: like chain, torch.fx's own
    any_chain = _torch_operator_support.any_chain

__all__ = [n for n in getattr(_torch_operator_support, '__all__', ('OperatorSupportBase', 'OperatorSupport',
                                                                  'create_op_support', 'chain', 'OpSupports'))
           if n in ('OperatorSupportBase', 'OperatorSupport', 'create_op_support', 'chain', 'OpSupports', 'any_chain')]

_TENSOR_METADATA = (TensorMetadata, _TorchTensorMetadata)
# fxcpp's nodes are torch.fx nodes on 1.13 only (torch.fx 2.x's Node has a C base): both count.
_NODES = (Node, torch.fx.Node)


def _get_arg_dtype(arg: torch.fx.Node) -> t.Any:
    """The dtype ShapeProp recorded for ``arg`` (``meta['type']`` when it recorded no
    TensorMetadata, as torch.fx)."""
    assert isinstance(arg, _NODES)
    tm = arg.meta.get("tensor_meta")
    return tm.dtype if isinstance(tm, _TENSOR_METADATA) else arg.meta["type"]


def _dtypes_ok(value, allowed) -> bool:
    """False only when ``value`` is a node whose dtype is not in ``allowed`` (None: any)."""
    if allowed is None or not isinstance(value, _NODES):
        return True
    return _get_arg_dtype(value) in allowed


@compatibility(is_backward_compatible=False)
class OperatorSupport(_torch_operator_support.OperatorSupport):
    """torch.fx's ``OperatorSupport`` (``support_dict`` maps ``get_node_target`` names to
    ``None`` -- any dtype -- or ``(per-arg dtypes, {kwarg: dtypes})``), for graphs of both
    libraries."""

    def is_node_supported(self, submodules: t.Mapping[str, torch.nn.Module], node: torch.fx.Node) -> bool:
        if node.op not in CALLABLE_NODE_OPS:
            return True
        target = get_node_target(submodules, node)
        if target not in self._support_dict:
            return False
        rule = self._support_dict[target]
        if rule is None:
            return True
        arg_dtypes, kwarg_dtypes = rule  # type: ignore[misc]
        args = node.args
        for i, allowed in enumerate(arg_dtypes):
            if i >= len(args):
                break
            if not _dtypes_ok(args[i], allowed):
                return False
        kwargs = node.kwargs
        for key, allowed in kwarg_dtypes.items():
            if key in kwargs and not _dtypes_ok(kwargs[key], allowed):
                return False
        return True


@compatibility(is_backward_compatible=False)
class OpSupports(_torch_operator_support.OpSupports):
    """torch.fx's ``OpSupports`` (``decline_if_node_in_names`` is its own), with
    ``decline_if_input_dtype`` reading fxcpp's ``TensorMetadata`` too."""

    @classmethod
    def decline_if_input_dtype(cls, dtype: torch.dtype) -> OperatorSupportBase:
        """Report a node as unsupported when an input (other than a ``get_attr``) has ``dtype``."""
        def _decline_if_input_dtype(submodules: t.Mapping[str, torch.nn.Module], node: torch.fx.Node) -> bool:
            return not any(arg.op != "get_attr" and _get_arg_dtype(arg) == dtype
                           for arg in node.all_input_nodes)
        return create_op_support(_decline_if_input_dtype)
