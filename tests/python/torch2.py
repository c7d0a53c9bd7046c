"""Where torch.fx 2.x (the reference on the 2.14 leg) differs from torch.fx 1.13.1, in one place.

fxcpp follows torch.fx 1.13's observable behaviour; what torch.fx 2.14 prints, names or
offers differently is issue 23's (parity with torch.fx 2.x). A test that compares fxcpp
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


#: str(graph), str(node), format_node and messages that embed them.
NUM_USERS = xfail2('prints "[num_users=N]" in str(graph)/format_node where torch.fx 1.13 and fxcpp print "[#users=N]"')

#: Public API added in torch.fx 2.x.
NEW_API = xfail2('has public API fxcpp does not have yet (e.g. Node.insert_arg, fx.has_side_effect, '
                 'a `name` parameter on Graph.output/get_attr/..., new methods)')


#: Verbose code (python_code(verbose=True), print_readable).
VERBOSE_CODE = xfail2('writes the "# No stacktrace found for following nodes" comments of verbose code and '
                      'print_readable differently (no blank line before them, no trailing space)')

#: str(graph) and verbose code both (helpers that compare every printout).
PRINTOUTS = xfail2('prints graphs ("[num_users=N]") and verbose code ("# No stacktrace found" comments) '
                   'differently from torch.fx 1.13 and fxcpp')

#: Messages of AssertionErrors.
ASSERT_MESSAGES = xfail2('words the AssertionErrors for a bad op or a non-str target ("op ... is not in '
                         '_legal_ops", "Expected target to be str") where torch.fx 1.13 and fxcpp give no message')

#: Default names.
UNNAMED = xfail2('names a node whose default name comes out empty (target "", "__") "_unnamed" where '
                 'torch.fx 1.13 and fxcpp raise IndexError')

#: torch.fx code run on fxcpp objects.
FX_NODE_NOT_A_BASE = pytest.mark.xfail(
    condition=_torch_compat.FX_NODE_HAS_C_BASE,
    reason="torch.fx 2.14's Node derives from a C type (torch._C._NodeBase) whose layout fxcpp's Node cannot "
           "share, so fxcpp's Node is no torch.fx.Node there and torch.fx code that checks "
           "isinstance(x, torch.fx.Node) (the gradual type checker, the subgraph matcher, ...) refuses fxcpp nodes "
           "(interop design for 2.x, issue 23; _torch_compat.node_bases)", strict=True)

#: torch.fx 2.x's GraphModule over an fxcpp graph.
FX2_GRAPH_API = xfail2("calls 2.x Graph/CodeGen API on the graph it compiles (Graph.python_code(record_func=...), "
                       "CodeGen._gen_python_code, PythonCode._lineno_map/_prologue_start) that fxcpp's Graph "
                       "(torch.fx 1.13's API) lacks, so torch.fx code that wraps an fxcpp graph in a torch.fx "
                       "GraphModule fails")

#: Name rules.
SNAKE_CASE = xfail2('snake-cases non-ASCII names differently ("ÉtéBar" -> "étébar", "aΣb" -> "aσb"; torch.fx 1.13 '
                    'and fxcpp: "été_bar", "a_σb")')

#: Generated code: torch.fx 2.x frees every value after its last use, dead ones included
#: (`abs_1 = abs(x);  x = abs_1 = None`); 1.13 and fxcpp free only values that are used.
CODE_FREES_DEAD_VALUES = xfail2('frees dead values in generated code too ("y = f(x);  x = y = None"), '
                                'torch.fx 1.13 and fxcpp only used ones')

#: str(graph) and generated code both.
GRAPH_AND_CODE = xfail2('prints graphs ("[num_users=N]") and frees dead values in generated code '
                        '("y = f(x);  y = None") unlike torch.fx 1.13 and fxcpp')
