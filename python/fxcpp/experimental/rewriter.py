"""fxcpp.experimental.rewriter: ``RewritingTracer`` on fxcpp's ``Tracer``.

torch.fx's ``RewritingTracer`` first rewrites the root's source (``assert`` becomes
``torch._assert``, ``x: T = v`` becomes ``x = annotate(v, T)``) and then traces it with
torch.fx's ``Tracer``. This one does the same source rewrite -- torch's own AST pass, reused
rather than reimplemented -- and traces with fxcpp's ``Tracer``, so it yields an fxcpp
``Graph`` and honours what fxcpp's tracer honours: functions registered with ``fxcpp.wrap``,
``fxcpp`` leaf modules, ``fxcpp.Proxy`` dispatch.
"""
from typing import Any, Callable, Dict, Optional, Union

import torch
from torch.fx.experimental.rewriter import AST_Rewriter, _rewrite as _torch_rewrite

from .._symbolic_trace import Tracer
from ..graph import Graph

__all__ = ['AST_Rewriter', 'RewritingTracer']


class RewritingTracer(Tracer):
    """A ``Tracer`` that traces the AST-rewritten root (see the module docstring)."""

    def trace(self, root: Union[torch.nn.Module, Callable[..., Any]],
              concrete_args: Optional[Dict[str, Any]] = None) -> Graph:
        return super().trace(_torch_rewrite(root), concrete_args)
