"""fxcpp.passes.dialect.common.cse_pass: ``CSEPass`` returning fxcpp GraphModules.

torch.fx's ``CSEPass`` (common subexpression elimination for ATen-level graphs, as made by
``make_fx``) builds a new ``torch.fx.GraphModule``. This subclass runs the very same pass on a
torch.fx view of its input (``fxcpp.to_torch_fx``; a torch.fx GraphModule is used as is) and
returns the result as an fxcpp ``GraphModule`` (``fxcpp.from_torch_fx``: ``node.meta`` and the
module's submodules/parameters are shared, not copied). It is still a torch.fx ``PassBase``, so
torch.fx's ``PassManager`` runs it.
"""
from torch.fx.passes.dialect.common.cse_pass import CSEPass as _TorchCSEPass
from torch.fx.passes.dialect.common.cse_pass import get_CSE_banned_ops
from torch.fx.passes.infra.pass_base import PassResult

from ....interop import from_torch_fx, to_torch_fx

__all__ = ['CSEPass', 'get_CSE_banned_ops']


class CSEPass(_TorchCSEPass):
    """torch.fx's ``CSEPass`` whose ``PassResult.graph_module`` is an fxcpp GraphModule."""

    def call(self, graph_module) -> PassResult:
        result = super().call(to_torch_fx(graph_module))
        return PassResult(from_torch_fx(result.graph_module), result.modified)
