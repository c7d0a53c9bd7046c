"""fxcpp.passes.infra.pass_manager: ``PassManager`` over GraphModules (mirrors
torch.fx.passes.infra.pass_manager 1.13).

The wrappers and constraint helpers are torch.fx's own, re-exported. ``PassManager`` subclasses
torch.fx's (constraint solving, checks, ``steps``) and redoes ``__call__``: after each pass
torch.fx recompiles the result only if it is a ``torch.fx.GraphModule``, so a pass that edits an
fxcpp module's graph in place would leave its ``code`` and ``forward`` stale. Here GraphModules
of both libraries are recompiled; everything else (order, checks, the error raised when a pass
fails, the fixed point over ``steps``) is torch.fx's.
"""
import inspect

import torch.fx
from torch.fx.passes.infra import pass_manager as _torch_pass_manager
from torch.fx.passes.infra.pass_manager import (  # noqa: F401  (re-exported)
    _topological_sort_passes, _validate_pass_schedule_constraint, pass_result_wrapper,
    this_before_that_pass_constraint)

from ... import _torch_compat

from ..._compatibility import compatibility
from ...graph_module import GraphModule
from .pass_base import PassResult

__all__ = ['pass_result_wrapper', 'this_before_that_pass_constraint', 'PassManager']
if _torch_compat.FX_INPLACE_WRAPPER is not None:  # torch.fx 1.13's; 2.x removed it
    inplace_wrapper = _torch_compat.FX_INPLACE_WRAPPER
    __all__.insert(0, 'inplace_wrapper')

_GRAPH_MODULES = (GraphModule, torch.fx.GraphModule)


@compatibility(is_backward_compatible=False)
class PassManager(_torch_pass_manager.PassManager):
    """torch.fx's ``PassManager`` (passes return a ``PassResult``; run in constraint order,
    repeated up to ``steps`` times while a pass reports a change) that recompiles fxcpp
    GraphModules after each pass as torch.fx recompiles its own."""

    def __call__(self, module) -> PassResult:
        if _torch_compat.FX_API_2:
            return self._call_2(module)
        if not self._validated:
            self.solve_constraints()
        self.check(module)
        changed_at_all = False
        for _ in range(self.steps):
            changed = False
            for index, fn in enumerate(self.passes):
                if getattr(self, "debug", False):  # torch.fx 1.13 has the flag; 2.x logs instead
                    print(f"Running pass '{fn.__name__}'")
                try:
                    result = fn(module)
                except Exception as e:
                    earlier = [p.__name__ for p in self.passes[:index]]
                    msg = (f"An error occurred when running the '{fn.__name__}' pass after the "
                           f"following passes: {earlier}")
                    raise type(e)(msg) from e
                module = result.graph_module
                changed = changed or result.modified
                if isinstance(module, _GRAPH_MODULES):
                    module.recompile()
                if self.run_checks_after_each_pass:
                    self.check(module)
            changed_at_all = changed_at_all or changed
            if not changed:
                break
        return PassResult(module, changed_at_all)

    def _call_2(self, module) -> PassResult:
        """torch.fx 2.x's run: passes named by function or class name, a result that is no
        PassResult refused, and any failure of a pass, its recompile or its checks re-raised as
        an ``Exception`` naming the pass and the passes before it."""
        if not self._validated:
            self.solve_constraints()
        self.check(module)
        changed_at_all = False
        for _ in range(self.steps):
            changed = False
            for index, fn in enumerate(self.passes):
                fn_name = fn.__name__ if inspect.isfunction(fn) else type(fn).__name__
                try:
                    result = fn(module)
                    if not isinstance(result, PassResult) and not hasattr(result, "graph_module"):
                        raise TypeError(f"The result of the pass {fn_name} should be type PassResult."
                                        + "Please wrap it with pass_result_wrapper()")
                    module = result.graph_module
                    changed = changed or result.modified
                    if isinstance(module, _GRAPH_MODULES):
                        module.recompile()
                    if self.run_checks_after_each_pass:
                        self.check(module)
                except Exception as e:
                    earlier = [p.__name__ if inspect.isfunction(p) else type(p).__name__ for p in self.passes[:index]]
                    msg = (f"An error occurred when running the '{fn_name}' pass after the "
                           f"following passes: {earlier}")
                    raise Exception(msg) from e  # noqa: TRY002  (torch.fx 2.x's type)
            changed_at_all = changed_at_all or changed
            if not changed:
                break
        return PassResult(module, changed_at_all)
