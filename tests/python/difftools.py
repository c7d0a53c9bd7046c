"""Helpers for differential tests against torch.fx."""
import contextlib
import io
import keyword
import re

import torch
import torch.fx as tfx

import fxcpp as fx

LIBS = [tfx, fx]

_ADDR = re.compile(r' at 0x[0-9a-f]+')


def norm(text: str) -> str:
    """Normalize object addresses and module names so outputs compare across libraries."""
    return _ADDR.sub(' at 0xADDR', text)


def tabular(graph) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        graph.print_tabular()
    return norm(buf.getvalue())


def readable(gm) -> str:
    """gm.print_readable()'s text: returned by torch.fx 2.x (print_output=False), printed by 1.13."""
    import inspect
    if 'print_output' in inspect.signature(tfx.GraphModule.print_readable).parameters:
        return gm.print_readable(print_output=False)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        gm.print_readable()
    return buf.getvalue()


def tensor_leaves(v):
    """Every tensor in a (nested) output, flattened to float32 vectors in order: outputs of any
    structure compare as one torch.cat(...)."""
    if isinstance(v, torch.Tensor):
        return [v.float().reshape(-1)]
    if isinstance(v, (tuple, list)):
        return [t for x in v for t in tensor_leaves(x)]
    if isinstance(v, dict):
        return [t for x in v.values() for t in tensor_leaves(x)]
    return []


def same_values(a, b):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor)
        assert a.shape == b.shape and a.dtype == b.dtype
        assert torch.allclose(a, b, equal_nan=True)
    elif isinstance(a, (list, tuple)):
        assert type(a) == type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            same_values(x, y)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            same_values(a[k], b[k])
    else:
        assert a == b


def raises_same(fn_ref, fn_ours):
    """Both raise the same exception type with the same (normalized) message."""
    err = []
    for fn in (fn_ref, fn_ours):
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            err.append(e)
        else:
            err.append(None)
    a, b = err
    assert a is not None, "torch.fx did not raise"
    assert b is not None, f"fxcpp did not raise (torch.fx raised {type(a).__name__}: {a})"
    assert type(a) is type(b), (type(a), type(b), str(a), str(b))
    assert norm(str(a)) == norm(str(b))
    return b


# Note [Strings in generated code] (src/core/codegen.cpp): torch.fx writes a
# placeholder target, an attribute name (get_attr/call_module/call_method
# targets, getattr's name) and a keyword argument name into the code verbatim;
# where that makes code that does not compile (``def forward(self, a.b)``,
# ``self.def``), and that could run text of the graph, fxcpp escapes the name
# (``getattr(self, "def")``) or refuses (ValueError "cannot generate code").
# The fuzzer's names include such strings: a code difference is allowed only
# when the graph holds one, torch.fx's code does not compile, and fxcpp's
# either compiles or is that refusal. Where torch.fx quotes such a string
# itself (``getattr(self, "<name>")``) it writes its characters raw, control
# characters included; fxcpp writes an escaped literal (``"\x1f"``) with the
# same value: a line may differ from torch.fx's only by that spelling.
_KEYWORDS = set(keyword.kwlist)
_STRING_LITERAL = re.compile(r'"(?:[^"\\]|\\.)*"')


def _same_string_spelled_escaped(ref_line, our_line, unsafe):
    """``our_line`` is ``ref_line`` with a raw-quoted unsafe string written as an escaped literal."""
    import ast
    for lit in _STRING_LITERAL.findall(our_line):
        try:
            value = ast.literal_eval(lit)
        except (SyntaxError, ValueError):
            continue
        if value in unsafe and our_line.replace(lit, f'"{value}"') == ref_line:
            return True
    return False


def _plain(name):
    return isinstance(name, str) and name.isidentifier() and name not in _KEYWORDS


def _unsafe_strings(graph):
    """The strings of ``graph`` that codegen must not write verbatim."""
    out = set()
    for n in graph.nodes:
        if n.op == 'placeholder' and not _plain(str(n.target).lstrip('*')):
            out.add(str(n.target))
        if n.op in ('get_attr', 'call_module', 'call_method'):
            out.update(c for c in str(n.target).split('.') if not _plain(c))
        if n.op == 'call_function' and len(n.args) == 2 and isinstance(n.args[1], str) and \
                n.args[1] in _KEYWORDS:
            out.add(n.args[1])
        out.update(k for k in n.kwargs if not _plain(k))
    return out


def _compiles(src):
    try:
        compile(src, '<generated>', 'exec')
        return True
    except (SyntaxError, ValueError):
        return False


def code_divergence_by_design(ref_graph, our_graph, verbose=False):
    """Whether torch.fx's and fxcpp's code for these graphs may differ (the Note above)."""
    unsafe = _unsafe_strings(our_graph)
    if not unsafe:
        return False
    try:
        ref_src = ref_graph.python_code('self', verbose=verbose).src
    except Exception:  # noqa: BLE001 -- then fxcpp must raise the same
        return False
    if _compiles(ref_src):
        try:
            our_src = our_graph.python_code('self', verbose=verbose).src
        except ValueError:
            return False
        ref_lines, our_lines = ref_src.split('\n'), our_src.split('\n')
        return len(ref_lines) == len(our_lines) and all(
            a == b or _same_string_spelled_escaped(a, b, unsafe) for a, b in zip(ref_lines, our_lines))
    try:
        our_src = our_graph.python_code('self', verbose=verbose).src
    except ValueError as e:
        return 'cannot generate code' in str(e)
    # Escaped: the code differs only on lines that now quote one of the strings.
    ref_lines, our_lines = ref_src.split('\n'), our_src.split('\n')
    return len(ref_lines) == len(our_lines) and all(
        a == b or any(f'"{u}"' in b or f"'{u}'" in b for u in unsafe) or _same_string_spelled_escaped(a, b, unsafe)
        for a, b in zip(ref_lines, our_lines))
