"""fxcpp.passes.pass_manager: the legacy ``PassManager`` (mirrors
torch.fx.passes.pass_manager 1.13).

torch.fx's own implementation, re-exported: a pass here is any callable from an object to an
object and the manager never looks at what it gets, so fxcpp GraphModules go through it as they
are. (For the ``PassResult``-based manager see ``fxcpp.passes.infra.pass_manager``.)
"""
from torch.fx.passes.pass_manager import (  # noqa: F401  (re-exported)
    PassManager, _validate_pass_schedule_constraint, inplace_wrapper, log_hook, logger, loop_pass,
    these_before_those_pass_constraint, this_before_that_pass_constraint)

__all__ = ['PassManager', 'inplace_wrapper', 'log_hook', 'loop_pass', 'this_before_that_pass_constraint',
           'these_before_those_pass_constraint']
