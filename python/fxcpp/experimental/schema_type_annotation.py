"""fxcpp.experimental.schema_type_annotation: ``AnnotateTypesWithSchema`` on fxcpp's
``Transformer`` (mirrors torch.fx.experimental.schema_type_annotation 1.13).

torch.fx's class is a ``torch.fx.Transformer``, whose ``Interpreter`` accepts only a
``torch.fx.GraphModule``. This one is an fxcpp ``Transformer`` with the same rules, so it takes an
fxcpp GraphModule and returns one with the same code and node types as torch.fx's: the result type
of a ``torch.nn.functional`` call (when both branches of a boolean-dispatched function agree) and
of a call to a ``torch.nn`` module is read from its Python return annotation, and a ``get_attr``
gets the Python type TorchScript infers for the attribute. A type already set is kept.
"""
import inspect
from typing import Any, Dict, Optional, Tuple

import torch
from torch._jit_internal import boolean_dispatched
from torch.fx.operator_schemas import _torchscript_type_to_python_type

from ..interpreter import Transformer
from ..node import Argument, Target

__all__ = ['AnnotateTypesWithSchema']


class AnnotateTypesWithSchema(Transformer):
    """Annotate ``node.type`` from Python signatures (``torch.nn`` module calls,
    ``torch.nn.functional`` calls, ``get_attr``s)::

        gm = AnnotateTypesWithSchema(fxcpp.symbolic_trace(resnet18)).transform()
    """

    def __init__(self, module: torch.nn.Module, annotate_functionals: bool = True,
                 annotate_modules: bool = True, annotate_get_attrs: bool = True):
        super().__init__(module)
        self.annotate_functionals = annotate_functionals
        self.annotate_modules = annotate_modules
        self.annotate_get_attrs = annotate_get_attrs

    def call_function(self, target: Target, args: Tuple[Argument, ...], kwargs: Dict[str, Any]):
        result_type = None
        if self.annotate_functionals and target.__module__ == 'torch.nn.functional':
            analysed = target
            if target in boolean_dispatched:
                branches = boolean_dispatched[target]
                if_true, if_false = branches['if_true'], branches['if_false']
                if inspect.signature(if_true).return_annotation != inspect.signature(if_false).return_annotation:
                    return super().call_function(target, args, kwargs)
                analysed = if_true
            result_type = self._extract_python_return_type(analysed)
        proxy = super().call_function(target, args, kwargs)
        proxy.node.type = proxy.node.type or result_type
        return proxy

    def call_module(self, target: Target, args: Tuple[Argument, ...], kwargs: Dict[str, Any]):
        assert isinstance(target, str)
        result_type = None
        module = self.fetch_attr(target)
        cls = module.__class__
        if self.annotate_modules and hasattr(cls, '__name__') and getattr(torch.nn, cls.__name__, None) == cls:
            result_type = self._extract_python_return_type(module.forward)
        proxy = super().call_module(target, args, kwargs)
        proxy.node.type = proxy.node.type or result_type
        return proxy

    def get_attr(self, target: Target, args: Tuple[Argument, ...], kwargs: Dict[str, Any]):
        proxy = super().get_attr(target, args, kwargs)
        if self.annotate_get_attrs:
            assert isinstance(target, str)
            value = self.module
            atoms = target.split('.')
            for i, atom in enumerate(atoms):
                if not hasattr(value, atom):
                    raise RuntimeError(f'Node referenced nonextent target {".".join(atoms[:i])}!')
                value = getattr(value, atom)
            inferred = torch._C._jit_try_infer_type(value)
            if inferred.success():
                proxy.node.type = proxy.node.type or _torchscript_type_to_python_type(inferred.type())
        return proxy

    def _extract_python_return_type(self, target: Target) -> Optional[Any]:
        """The return annotation of the callable ``target``, or None when it has none (or no
        signature can be had)."""
        assert callable(target)
        try:
            annotation = inspect.signature(target).return_annotation
        except (ValueError, TypeError):
            return None
        return None if annotation is inspect.Signature.empty else annotation
