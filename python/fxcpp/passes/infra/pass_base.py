"""fxcpp.passes.infra.pass_base: ``PassBase`` and ``PassResult`` (torch.fx's own, re-exported:
they only call the pass, so they serve fxcpp GraphModules unchanged, and passes written against
either library's name are the same class)."""
from torch.fx.passes.infra.pass_base import PassBase, PassResult

__all__ = ['PassResult', 'PassBase']
