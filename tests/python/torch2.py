"""Where torch.fx 2.x (the reference on the 2.14 leg) differs from fxcpp, in one place.

fxcpp prints graphs, generates code and names values as the installed torch.fx does (the core's
fxcpp::Dialect, set from _torch_compat.FX_DIALECT); what else torch.fx 2.14 does or offers
differently from torch.fx 1.13 is still issue 23's (parity with torch.fx 2.x). A test that compares fxcpp
with torch.fx and meets such a difference is marked with one of the strict xfails below,
so it starts failing (XPASS) once parity lands and the mark must go. A torch.fx 2.x that
crashes or misbehaves on an input is kept away from that input on 2.x (see TORCH2 uses).
"""
import pytest

from fxcpp import _torch_compat

#: The reference torch.fx is 2.x.
TORCH2 = _torch_compat.TORCH_VERSION >= (2, 0)


def xfail2(what):
    """A strict xfail on torch 2.x: torch.fx 2.14 `what` (issue 23)."""
    return pytest.mark.xfail(condition=TORCH2, reason=f'torch.fx 2.14 {what} (issue 23)', strict=True)


#: torch.fx code run on fxcpp objects.
FX_NODE_NOT_A_BASE = pytest.mark.xfail(
    condition=_torch_compat.FX_NODE_HAS_C_BASE,
    reason="torch.fx 2.14's Node derives from a C type (torch._C._NodeBase) whose layout fxcpp's Node cannot "
           "share, so fxcpp's Node is no torch.fx.Node there and torch.fx code that checks "
           "isinstance(x, torch.fx.Node) (the gradual type checker, the subgraph matcher, ...) refuses fxcpp nodes "
           "(interop design for 2.x, issue 23; _torch_compat.node_bases)", strict=True)
