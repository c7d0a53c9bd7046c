"""What a user names: one resolver for the `fxcpp` command line and the graph explorer.

A *spec* is what a person types to say which model they mean:

* a file, ``FILE.fxpt`` or ``FILE.pt2`` (``fxcpp.aten.load`` tells them apart by content),
  read by fxcpp's own reader and never run to be shown (docs/untrusted_files.md: no pickle,
  no ``torch.export.load``, nothing from the file executes);
* ``MODULE:CALLABLE``: a module path, a colon, and an ``nn.Module``, a class or factory
  (called with no arguments), or a function of tensors in it; traced by fxcpp, with optional
  concrete arguments, leaf modules, and an input shape to record each node's output shape.

``resolve`` is the entry point; ``fxcpp.cli`` (``fxcpp show``, ``fxcpp run``) and
``fxcpp.explorer`` (``fxcpp.explore(spec)``, ``fxcpp.explorer.load``) both use it, so a spec
means the same thing, and is refused with the same message, wherever it is typed. Problems
are ``SpecError`` (a ValueError): a message saying what is wrong, a hint saying what to do,
and the exit status the command line ends with.

This module imports neither ``fxcpp.cli`` nor ``fxcpp.explorer`` (both import it).
"""
import difflib
import importlib
import inspect
import json
import os
import re
import sys
import traceback
from typing import Any, Dict, Optional, Sequence

__all__ = ["SpecError", "resolve", "is_file", "load_file", "load_callable", "instantiate", "trace",
           "parse_shape", "propagate_shapes", "pt2_shapes", "EXIT_ERROR", "EXIT_USAGE"]

EXIT_ERROR = 1   # the command failed (untraceable model, import error, ...)
EXIT_USAGE = 2   # bad command line (argparse uses 2 as well)


class SpecError(ValueError):
    """An expected failure: printed by the command line as `fxcpp: error: <msg>` plus
    optional hint lines (`hint` is a str or a list of str), ending it with status `code`."""

    def __init__(self, msg: str, hint=None, code: int = EXIT_ERROR):
        super().__init__(msg)
        self.hint = hint
        self.code = code


_EXAMPLE = "torchvision.models:resnet18"


def _first_line(e: BaseException) -> str:
    s = str(e).strip()
    return s.splitlines()[0] if s else repr(e)


def _debug_hint() -> str:
    return "set FXCPP_DEBUG=1 for the full traceback"


def _target_str(node) -> str:
    if node.op == "call_function":
        return node._pretty_print_target(node.target)
    return str(node.target)


# ------------------------------------------------------------------------------------
# Files
# ------------------------------------------------------------------------------------

def is_file(target: str) -> bool:
    """Whether `target` names a file (.fxpt or .pt2: fxcpp.aten.load tells them apart by content)
    rather than MODULE:CALLABLE."""
    return target.endswith((".fxpt", ".pt2")) or (os.path.isfile(target) and ":" not in os.path.basename(target))


def load_file(path: str, runtime: str, trusted: bool = False, opt_in: str = "--trusted"):
    """A .fxpt or .pt2 file through fxcpp's reader (the one reader: no pickle, nothing from the
    file runs while it is read). runtime='show': a GraphModule only to be shown, never run;
    'python' or 'cpp': fxcpp.aten.load's runtimes. Problems are SpecError; `opt_in` is how
    the caller spells trusting a file (the hint when the file calls an operator a file from a
    stranger may not)."""
    from fxcpp import aten
    if not os.path.exists(path):
        raise SpecError(f"no such file: {path}", "fxcpp export MODULE:CALLABLE -o FILE.pt2 (or FILE.fxpt) writes one")
    if os.path.isdir(path):
        raise SpecError(f"{path} is a directory, not a .fxpt or .pt2 file")
    try:
        if runtime == "show":  # read to be shown, never run (Note [Argument guards])
            from fxcpp.aten._runtime import _load_bytes
            return _load_bytes(os.fsdecode(path), "show", trusted=trusted)
        return aten.load(path, runtime=runtime, trusted=trusted)
    except ValueError as e:
        hint = None if trusted or "trusted" not in str(e) else (
            f"only if you made this file yourself: {opt_in} lets it call any operator")
        raise SpecError(f"cannot load {path}: {_first_line(e)}", hint)
    except OSError as e:
        raise SpecError(f"cannot read {path}: {e.strerror or e}")


def pt2_shapes(gm) -> None:
    """Records, for showing, each node's output shape from a .pt2 archive's serialized value
    metadata (node.meta['pt2_value'], which fxcpp's reader keeps) as node.meta['fxcpp_shape']:
    a tuple of sizes, a symbolic size as its name. Nodes without it are left as they are."""
    for n in gm.graph.nodes:
        text = n.meta.get("pt2_value")
        if not isinstance(text, str) or "fxcpp_shape" in n.meta:
            continue
        try:
            value = json.loads(text)
            sizes = value["as_tensor"]["sizes"]
            shape = tuple(_sym_size(s) for s in sizes)
        except (ValueError, KeyError, TypeError, AttributeError):
            continue  # not a tensor (a symbolic int), or metadata this reader does not show
        n.meta["fxcpp_shape"] = shape


def _sym_size(s):
    if "as_int" in s and isinstance(s["as_int"], int):
        return s["as_int"]
    expr = s.get("as_expr", {})
    return str(expr.get("expr_str", expr)) if isinstance(expr, dict) else str(expr)


# ------------------------------------------------------------------------------------
# MODULE:CALLABLE
# ------------------------------------------------------------------------------------

def load_callable(spec: str):
    """MODULE:CALLABLE -> the object. Raises SpecError with a precise reason."""
    if spec.count(":") != 1 or not all(spec.split(":")):
        raise SpecError(f"expected MODULE:CALLABLE, got {spec!r}",
                        f"for example `fxcpp show {_EXAMPLE}` (a module path, a colon, then a callable "
                        "or nn.Module in it; dotted attributes such as pkg.mod:Class.factory work too)",
                        EXIT_USAGE)
    mod_name, attr_path = spec.split(":")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # like `python -m`: models in the current directory
    try:
        mod = importlib.import_module(mod_name)
    except ModuleNotFoundError as e:
        if e.name and (mod_name == e.name or mod_name.startswith(e.name + ".")):
            raise SpecError(f"cannot import module {mod_name!r}: no module named {e.name!r}",
                            "check the spelling, and that the module is importable from the current "
                            "directory or PYTHONPATH")
        raise SpecError(f"importing {mod_name!r} failed: {type(e).__name__}: {e}",
                        "the module itself imports something that is not installed")
    except Exception as e:  # noqa: BLE001 -- errors in user code
        raise SpecError(f"importing {mod_name!r} failed: {type(e).__name__}: {_first_line(e)}",
                        _debug_hint())
    obj: Any = mod
    atoms = attr_path.split(".")
    for i, atom in enumerate(atoms):
        where = repr(mod_name) if i == 0 else f"{mod_name}:{'.'.join(atoms[:i])}"
        if not hasattr(obj, atom):
            names = [n for n in dir(obj) if not n.startswith("_")]
            close = difflib.get_close_matches(atom, names, n=3)
            prefix = f"{mod_name}:" + "".join(a + "." for a in atoms[:i])
            hint = ("did you mean " + " or ".join(prefix + c for c in close) + "?") if close else (
                f"list what it provides with: python3 -c 'import {mod_name}; print(dir({mod_name}))'")
            raise SpecError(f"{where} has no attribute {atom!r}", hint)
        obj = getattr(obj, atom)
    return obj


def instantiate(obj, spec: str):
    """The thing to trace: an nn.Module, or a plain function when `obj` is one
    that needs arguments. Classes and factories are called with no arguments
    (weights=None when they accept a `weights` argument)."""
    import torch

    if isinstance(obj, torch.nn.Module):
        return obj
    if not callable(obj):
        raise SpecError(f"{spec} is a {type(obj).__name__}, not a callable or torch.nn.Module",
                        f"point at a model class or factory, e.g. {_EXAMPLE}")
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        sig = None
    if sig is not None and inspect.isfunction(obj):
        required = [p for p in sig.parameters.values()
                    if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if required:  # a function computing on tensors: trace it directly
            return obj
    kwargs = {}
    if sig is not None and "weights" in sig.parameters:
        kwargs["weights"] = None  # never download pretrained weights
    try:
        model = obj(**kwargs)
    except Exception as e:  # noqa: BLE001 -- errors in user code
        call = f"{spec}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"
        raise SpecError(f"calling {call} failed: {type(e).__name__}: {_first_line(e)}",
                        "fxcpp show calls the callable with no arguments: point at a factory or class "
                        "whose arguments all have defaults. " + _debug_hint())
    if not isinstance(model, torch.nn.Module) and not inspect.isfunction(model):
        raise SpecError(f"{spec}() returned a {type(model).__name__}, not a torch.nn.Module",
                        f"point at a model class or factory, e.g. {_EXAMPLE}")
    if isinstance(model, torch.nn.Module):
        model.eval()
    return model


def _user_frame(tb) -> Optional[str]:
    """file:line of the innermost traceback frame outside fxcpp and torch."""
    here = os.path.dirname(os.path.abspath(__file__))
    skip = (here, os.path.dirname(os.path.abspath(importlib.import_module("torch").__file__)))
    found = None
    for fs in traceback.extract_tb(tb):
        path = os.path.abspath(fs.filename)
        if not path.startswith(skip) and not fs.filename.startswith("<"):
            found = f"{fs.filename}:{fs.lineno}" + (f"  ({fs.line.strip()})" if fs.line else "")
    return found


def trace(model, spec: str, concrete_args: Optional[Dict[str, Any]] = None,
          leaf_modules: Sequence[str] = ()):
    """fxcpp.symbolic_trace with friendly errors for untraceable models."""
    import fxcpp
    import torch

    leaf = set(leaf_modules)

    class CliTracer(fxcpp.Tracer):
        def is_leaf_module(self, m: torch.nn.Module, qualname: str) -> bool:
            if qualname in leaf or type(m).__name__ in leaf or torch.typename(m) in leaf:
                return True
            return super().is_leaf_module(m, qualname)

    try:
        tracer = CliTracer()
        graph = tracer.trace(model, concrete_args=concrete_args)
        name = model.__class__.__name__ if isinstance(model, torch.nn.Module) else model.__name__
        return fxcpp.GraphModule(tracer.root, graph, name)
    except Exception as e:  # noqa: BLE001 -- tracing runs user code
        raise _trace_error(e, model, spec, concrete_args) from e


def _trace_error(e: BaseException, model, spec: str, concrete_args) -> SpecError:
    import torch

    msg = _first_line(e)
    where = _user_frame(e.__traceback__)
    # The innermost submodule (other than the root) whose forward was running.
    sub = None
    if isinstance(model, torch.nn.Module):
        names = {id(m): n for n, m in model.named_modules()}
        tb = e.__traceback__
        while tb is not None:
            slf = tb.tb_frame.f_locals.get("self")
            if isinstance(slf, torch.nn.Module) and names.get(id(slf)):
                sub = (names[id(slf)], torch.typename(slf))
            tb = tb.tb_next
    at = ""
    if where:
        at = f"\n  at {where}" + (f"\n  in submodule {sub[0]!r} ({sub[1]})" if sub else "")
    # Forward parameters with defaults: the usual candidates for concrete_args.
    fn = model.forward if isinstance(model, torch.nn.Module) else model
    try:
        params = inspect.signature(fn).parameters.values()
        example = {p.name: p.default for p in params if p.default is not p.empty
                   and isinstance(p.default, (bool, int, float, str, type(None)))}
    except (TypeError, ValueError):
        example = {}
    example_json = json.dumps(example) if example else '{"ARG": VALUE}'
    hints = []
    if sub:
        hints.append(f"call that submodule instead of tracing into it: --leaf-module {sub[0]}")
    hints.append(f"specialize the inputs the control flow depends on: --concrete-args '{example_json}'"
                 if not concrete_args else "specialize further inputs with --concrete-args")
    if not sub:
        hints.append("or keep a submodule opaque: --leaf-module NAME (qualified name or class name)")
    hints.append("in Python: symbolic_trace(model, concrete_args=...) or a Tracer subclass whose "
                 "is_leaf_module returns True for the submodule")
    dynamic = "control flow" in msg or "cannot be iterated" in msg or type(e).__name__ == "TraceError"
    if dynamic:
        return SpecError(f"cannot trace {spec}: dynamic control flow (a branch or loop depends on a traced "
                         f"value): {msg}{at}", hints)
    return SpecError(f"cannot trace {spec}: {type(e).__name__}: {msg}{at}", hints + [_debug_hint()])


# ------------------------------------------------------------------------------------
# Input shapes
# ------------------------------------------------------------------------------------

#: The largest size of one dimension, and of a whole shape's element count: a tensor's sizes
#: and element count are int64 (torch and the C++ runtime alike).
MAX_DIM = 2 ** 63 - 1
#: The most dimensions a shape may have (torch's own limit for most kernels is lower).
MAX_DIMS = 64

_DIM = re.compile(r"[0-9]+")


def parse_shape(text) -> tuple:
    """'1,3,224,224' (or '1x3x224x224') -> (1, 3, 224, 224). Each dimension is a positive
    decimal integer (ASCII digits) of at most MAX_DIM, at most MAX_DIMS of them, whose product
    is at most MAX_DIM; anything else is a SpecError (EXIT_USAGE) naming the bad part. A tuple
    or list of ints is checked the same way."""
    shown = text if isinstance(text, str) else ",".join(map(str, text)) if isinstance(text, (tuple, list)) else text
    example = "for example --input-shape 1,3,224,224"
    if isinstance(text, str):
        fields = [f.strip() for f in text.strip().replace("x", ",").split(",")]
        if not all(_DIM.fullmatch(f) for f in fields):
            raise SpecError(f"bad --input-shape {_clip(shown)!r}: expected comma-separated positive integers",
                            example, EXIT_USAGE)
        # More than 19 significant digits is more than MAX_DIM (and int() of thousands of
        # digits is itself an error): kept as text for the message below.
        dims = [int(f) if len(f.lstrip("0")) <= 19 else f for f in fields]
    elif isinstance(text, (tuple, list)) and all(isinstance(d, int) and not isinstance(d, bool) for d in text):
        dims = list(text)
    else:
        raise SpecError(f"bad input shape {shown!r}: expected a tuple of positive integers or text such as "
                        "'1,3,224,224'", example, EXIT_USAGE)
    if not dims:
        raise SpecError(f"bad --input-shape {shown!r}: expected comma-separated positive integers", example,
                        EXIT_USAGE)
    if len(dims) > MAX_DIMS:
        raise SpecError(f"bad --input-shape {_clip(shown)!r}: {len(dims)} dimensions, more than the {MAX_DIMS} a "
                        "shape may have", example, EXIT_USAGE)
    numel = 1
    for i, d in enumerate(dims):
        if isinstance(d, str) or d <= 0 or d > MAX_DIM:
            raise SpecError(f"bad --input-shape {_clip(shown)!r}: dimension {i} is {_clip(str(d))}; each dimension "
                            f"must be a positive integer of at most 2**63-1 ({MAX_DIM})", example, EXIT_USAGE)
        numel *= d
    if numel > MAX_DIM:
        raise SpecError(f"bad --input-shape {_clip(shown)!r}: {_clip(str(numel))} elements, more than a tensor may "
                        f"have (2**63-1)", "use a smaller --input-shape", EXIT_USAGE)
    return tuple(dims)


def _clip(s: str, width: int = 60) -> str:
    return s if len(s) <= width else s[: width - 3] + "..."


def propagate_shapes(gm, shape) -> None:
    """Runs `gm` node by node on torch.randn(shape), storing each node's output
    shape (a tuple, or a nested list for tuple outputs) in node.meta['fxcpp_shape']."""
    import torch
    from fxcpp.node import map_arg

    env: Dict[str, Any] = {}
    modules = dict(gm.named_modules())
    placeholders = 0
    cur = None
    try:
        with torch.no_grad():
            for n in gm.graph.nodes:
                cur = n
                args = map_arg(n.args, lambda a: env[a.name])
                kwargs = map_arg(n.kwargs, lambda a: env[a.name])
                if n.op == "placeholder":
                    placeholders += 1
                    val = torch.randn(shape) if placeholders == 1 else (args[0] if args else None)
                elif n.op == "get_attr":
                    val = gm
                    for atom in n.target.split("."):
                        val = getattr(val, atom)
                elif n.op == "call_function":
                    val = n.target(*args, **kwargs)
                elif n.op == "call_method":
                    val = getattr(args[0], n.target)(*args[1:], **kwargs)
                elif n.op == "call_module":
                    val = modules[n.target](*args, **kwargs)
                else:
                    val = args[0]
                env[n.name] = val
                n.meta["fxcpp_shape"] = _shape_of(val)
    except Exception as e:  # noqa: BLE001 -- runs the model
        node = f" at node {cur.name} ({cur.op} {_target_str(cur)})" if cur is not None else ""
        raise SpecError(f"running the traced model on an input of shape {tuple(shape)} failed{node}: "
                        f"{type(e).__name__}: {_first_line(e)}",
                        "check --input-shape (for torchvision classifiers: 1,3,224,224)")


def _shape_of(v):
    import torch
    if isinstance(v, torch.Tensor):
        return tuple(v.shape)
    if isinstance(v, (list, tuple)):
        return [_shape_of(x) for x in v]
    return None


# ------------------------------------------------------------------------------------
# The resolver
# ------------------------------------------------------------------------------------

def resolve(spec: str, *, input_shape=None, concrete_args: Optional[Dict[str, Any]] = None,
            leaf_modules: Sequence[str] = (), trusted: bool = False, opt_in: str = "--trusted",
            runtime: str = "show"):
    """The graph a spec names: a GraphModule.

    A file (``.fxpt``, ``.pt2``; see is_file) is read by fxcpp's reader (load_file): with
    runtime='show' (the default) only to be shown, never run; with runtime='python' as
    ``fxcpp.aten.load`` reads it for the Python runtime, with that runtime's protections for a
    file from a stranger. Nothing from the file runs while it is read; ``trusted`` lifts the
    operator policy only (docs/untrusted_files.md); the other options do not apply to it.
    ``MODULE:CALLABLE`` is imported, instantiated and traced by fxcpp (``concrete_args`` and
    ``leaf_modules`` as the command line's --concrete-args and --leaf-module); with
    ``input_shape`` (a tuple, or text for parse_shape) the traced model runs once on
    ``torch.randn(input_shape)`` to record each node's output shape in
    ``node.meta['fxcpp_shape']``. Problems are SpecError."""
    if is_file(spec):
        return load_file(spec, runtime, trusted, opt_in)
    shape = parse_shape(input_shape) if input_shape is not None else None
    model = instantiate(load_callable(spec), spec)
    gm = trace(model, spec, concrete_args, leaf_modules or ())
    if shape is not None:
        propagate_shapes(gm, shape)
    return gm
