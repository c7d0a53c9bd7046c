"""fxcpp.experimental.normalize: ``NormalizeArgs`` and ``NormalizeOperators`` on fxcpp's
``Transformer`` (mirrors torch.fx.experimental.normalize 1.13).

torch.fx's classes are ``torch.fx.Transformer``s, which accept only a ``torch.fx.GraphModule``.
These are fxcpp ``Transformer``s with the same rules: given an fxcpp GraphModule they return one,
with the code torch.fx gives for the torch.fx-traced model. The signature matching itself is
torch.fx's (``torch.fx.operator_schemas.normalize_function`` / ``normalize_module``).

* ``NormalizeArgs(gm, normalize_to_only_use_kwargs=True)``: calls of Python functions and
  ``torch.nn`` modules get their arguments matched to the signature (keyword-only when the flag is
  set), defaults filled in. Each new node shares ``meta`` (by reference) and ``type`` with the
  node it replaces, and ``node_map`` maps each produced Proxy to its original node. As in
  torch.fx, the type offered for a positional node argument when disambiguating overloads is
  the *called* node's ``meta['type']`` (not the argument's), and a keyword argument's is the
  Proxy class.
* ``NormalizeOperators(gm)``: ``torch.add(a, b)`` and the other binary ``torch`` functions with a
  Python operator become that operator (``a + b``); also an ``AnnotateTypesWithSchema``.
"""
from typing import Any, Callable, Dict, Optional, Tuple

import torch
from torch.fx.experimental.normalize import NormalizeOperators as _TorchNormalizeOperators
from torch.fx.operator_schemas import create_type_hint, normalize_function, normalize_module

from ..interpreter import Transformer
from ..node import Argument, Node, Target, map_aggregate
from ..proxy import Proxy
from .schema_type_annotation import AnnotateTypesWithSchema

__all__ = ['NormalizeArgs', 'NormalizeOperators']

# fxcpp's nodes are torch.fx nodes on 1.13 only (torch.fx 2.x's Node has a C base): both count.
_NODES = (Node, torch.fx.Node)


class NormalizeArgs(Transformer):
    """Rewrite each call's arguments to match its target's signature (see the module docstring)::

        gm = NormalizeArgs(fxcpp.symbolic_trace(resnet18)).transform()
    """

    def __init__(self, module, normalize_to_only_use_kwargs: bool = True):
        super().__init__(module)
        self.node_map: Dict[Proxy, Node] = {}
        self.normalize_to_only_use_kwargs = normalize_to_only_use_kwargs

    def run_node(self, n: Node) -> Any:
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        own_type = n.meta.get("type")  # torch.fx offers this for every node argument

        def type_of(a):
            return own_type if isinstance(a, _NODES) else type(a)

        arg_types = tuple(create_type_hint(t) for t in map_aggregate(n.args, type_of))
        kwarg_types = {k: type_of(v) for k, v in kwargs.items()}
        if n.op == "call_function":
            out = self.call_function(n.target, args, kwargs, arg_types, kwarg_types)
        else:
            out = super().run_node(n)
        if n.op != "output":
            self.node_map[out] = n
            out.node.meta = n.meta
            out.node.type = n.type
        return out

    def call_function(self, target: Target, args: Tuple[Argument, ...], kwargs: Dict[str, Any],
                      arg_types: Optional[Tuple[Any, ...]] = None, kwarg_types: Optional[Dict[str, Any]] = None):
        assert callable(target)
        normalized = normalize_function(target, args, kwargs, arg_types, kwarg_types,  # type: ignore[arg-type]
                                        self.normalize_to_only_use_kwargs)
        if not normalized:
            return super().call_function(target, args, kwargs)
        new_args, new_kwargs = normalized
        return self.tracer.create_proxy("call_function", target, new_args, new_kwargs)

    def call_module(self, target: Target, args: Tuple[Argument, ...], kwargs: Dict[str, Any]):
        assert isinstance(target, str)
        normalized = normalize_module(self.module, target, args, kwargs,  # type: ignore[arg-type]
                                      self.normalize_to_only_use_kwargs)
        if normalized:
            args, kwargs = normalized
        return super().call_module(target, args, kwargs)


class NormalizeOperators(AnnotateTypesWithSchema):
    """Canonicalise different spellings of one call: the binary ``torch`` functions that a
    Python operator invokes (``torch.add``, ``torch.mul``, ``torch.eq``, ...) become that operator
    when called with exactly two positional arguments::

        gm = NormalizeOperators(fxcpp.symbolic_trace(resnet18)).transform()
    """

    # torch.fx's own table (the same dict object)
    binary_magic_method_remap: Dict[Callable[[Any, Any], Any], Callable[[Any, Any], Any]] = \
        _TorchNormalizeOperators.binary_magic_method_remap

    def call_function(self, target: Target, args: Tuple[Argument, ...], kwargs: Dict[str, Any]):
        assert callable(target)
        operator_fn = self.binary_magic_method_remap.get(target)
        if operator_fn is not None and len(args) == 2:
            lhs, rhs = args
            return super().call_function(target=operator_fn, args=(lhs, rhs), kwargs={})
        return super().call_function(target, args, kwargs)
