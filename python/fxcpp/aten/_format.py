"""The .fxpt file format: save a lowered GraphModule, load it back.

The format is written down in docs/fxpt_format.md. A file is PyTorch's zip
container (what ``torch.save`` and ``torch.jit.save`` write; ``unzip -l``
lists it) with a ``graph.json`` record and one raw record per tensor storage,
stored uncompressed and 64-byte aligned. The codec is C++'s, one reader and
one writer (src/torch/load.cpp, save.cpp): this module hands them the graph
in memory (Note [Graph handover] in src/bindings/handover.h) and keeps what
only Python can do, the nn.Module around the graph; the C++ writer writes the file.
Loading runs no code from the file: the graph is JSON, operators are looked
up by name among registered schemas, and the C++ reader checks every record
(Note [Loading untrusted files] in src/torch/load.cpp).
"""
import keyword
import os
import re
from typing import Any, Dict, List, Tuple

import torch

from .. import _C_torch
from . import _guards, _input_checks
from ..graph import Graph
from ..graph_module import GraphModule

__all__ = ['save', 'FORMAT_VERSION']

#: The version this build writes; the loader reads every version up to it.
FORMAT_VERSION = _C_torch.FORMAT_VERSION


# ---- saving ---------------------------------------------------------------------------

def _attr(root: torch.nn.Module, qualified: str) -> Any:
    obj = root
    for part in qualified.split('.'):
        obj = getattr(obj, part)
    return obj


def _class_name(gm: GraphModule) -> str:
    """The class name a file records: the module's, when loaders accept it
    (an ASCII identifier, not a keyword: Note [Names a file may use]); a
    module traced from a function or lambda (``'<lambda>'``) is recorded as
    ``'GraphModule'``."""
    name = type(gm).__name__ if type(gm).__name__ != 'GraphModule' else gm._get_name()
    ok = isinstance(name, str) and name.isascii() and name.isidentifier() and not keyword.iskeyword(name)
    return name if ok else 'GraphModule'


def _to_bytes(gm: GraphModule, format: str = 'fxpt') -> bytes:
    """The file :func:`save` writes for ``gm``, in memory, encoded by the C++
    writer (what ``aten.compile`` hands the C++ loader: no temporary file).
    ``format`` is ``'fxpt'`` or ``'pt2'``. Raises ValueError naming the node
    for what the format cannot hold."""
    from ..interop import from_torch_fx
    gm = from_torch_fx(gm)
    params = {id(p) for p in gm.parameters()}
    buffers = {id(b) for b in gm.buffers()}
    tensors: List[Tuple[str, str, torch.Tensor, bool]] = []
    seen = set()
    for node in gm.graph.nodes:
        if node.op != 'get_attr' or node.target in seen:
            continue
        seen.add(node.target)
        t = _attr(gm, node.target)
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"fxcpp.aten.save: cannot save node '{node.name}': get_attr of '{node.target}' is a "
                             f"{type(t).__name__}, not a tensor")
        kind = 'parameter' if id(t) in params else 'buffer' if id(t) in buffers else 'constant'
        tensors.append((node.target, kind, t.detach(), bool(t.requires_grad)))
    return _C_torch.write_graph(gm.graph, tensors, class_name=_class_name(gm), format=format)


def _format_of(path, format) -> str:
    if format is None:
        name = os.fspath(path)
        name = os.fsdecode(name) if isinstance(name, bytes) else name
        return 'pt2' if name.endswith('.pt2') else 'fxpt'
    if format not in ('fxpt', 'pt2'):
        raise ValueError(f"fxcpp.aten.save: format must be 'fxpt', 'pt2' or None (by the file name), not {format!r}")
    return format


def save(gm: GraphModule, path, format=None) -> None:
    """Writes a lowered ``gm`` to ``path``: a ``.fxpt`` file (docs/fxpt_format.md),
    or, for a path ending in ``.pt2`` or ``format='pt2'``, a ``.pt2`` archive
    that ``torch.export.load`` reads back to an ExportedProgram
    (docs/pt2_format.md, "Writing").

    Every call_function node must be an ATen overload or a primitive (see
    ``fxcpp.aten.lower``); get_attr nodes must name tensors. Tensors are moved
    to CPU and stored as PyTorch stores them: one record per storage, shared
    storages written once. A ``.pt2`` archive also needs each value's
    metadata (the graphs of ``from_exported_program`` and of loaded ``.pt2``
    files carry it, symbolic sizes included; otherwise ShapeProp's
    ``tensor_meta`` gives static sizes). What the format cannot hold raises
    ValueError naming the node, before anything is written.
    """
    data = _to_bytes(gm, _format_of(path, format))
    # Note [Atomic saving] (src/torch/save.cpp): fxcpp's one file writer; OSError saying why.
    _C_torch.write_file(path, data)


# ---- loading --------------------------------------------------------------------------

# Attribute names a file's tensor may not take: they would replace what the
# module itself needs (``forward``, ``graph``, ``code``, ``_runtime``, ...).
def _reserved_names(cls) -> frozenset:
    return frozenset(dir(cls)) | {'_runtime', '_parameters', '_buffers', '_modules', 'training'}


_MODULE_NAME = re.compile(r'[A-Za-z0-9_-]+')


def _check_tensor_name(name: Any, reserved: frozenset) -> List[str]:
    if not isinstance(name, str):
        raise ValueError(f'fxcpp.aten.load: a tensor name is a {type(name).__name__}, not a string')
    parts = name.split('.')
    for part in parts:
        # identifiers, or indices (nn.Sequential's submodules are named '0', '1', ...), or, from .pt2
        # archives, module names with '-' (torchvision's regnets: 'block1-0'; code spells them
        # getattr(m, 'block1-0'))
        ok = part.isidentifier() or (part.isascii() and part.isdigit()) or _MODULE_NAME.fullmatch(part) is not None
        if not ok or part in reserved or (part.startswith('__') and part.endswith('__')):
            raise ValueError(f'fxcpp.aten.load: the tensor name {name!r} cannot be an attribute of the loaded '
                             f'module ({part!r} is neither an identifier nor an index, or is a name the module '
                             f'itself uses)')
    return parts


def _set_attr(root: torch.nn.Module, qualified: str, value: torch.Tensor, kind: str,
              reserved: frozenset = frozenset()) -> None:
    *path, leaf = _check_tensor_name(qualified, reserved)
    mod = root
    for part in path:
        sub = mod._modules.get(part)
        if sub is None:
            if hasattr(mod, part):
                raise ValueError(f'fxcpp.aten.load: the tensor name {qualified!r} needs {part!r} to be a '
                                 'submodule, but it is a tensor')
            sub = torch.nn.Module()
            mod.add_module(part, sub)
        mod = sub
    if hasattr(mod, leaf):
        raise ValueError(f'fxcpp.aten.load: the tensor name {qualified!r} clashes with an attribute the loaded '
                         'module already has (a tensor named twice, or also used as a submodule)')
    if kind == 'parameter':
        mod.register_parameter(leaf, torch.nn.Parameter(value, requires_grad=value.requires_grad))
    elif kind == 'buffer':
        mod.register_buffer(leaf, value)
    else:
        setattr(mod, leaf, value)


def _graph_module(data, trusted: bool, to_run: bool = True) -> GraphModule:
    """The GraphModule of a file's bytes, or of a path (str: the file mapped):
    the C++ reader parses and checks the file once and appends its nodes to a
    new Graph (Note [Python load path]). ``to_run``: it will run in Python, so an
    untrusted file's guarded operators get the C++ runtime's argument guards (Note
    [Argument guards in Python] in _guards.py); False only to show the graph."""
    graph = Graph()
    class_name, tensors = _C_torch.read_graph(data, graph, trusted=trusted, check_calls=to_run and not trusted)
    root = torch.nn.Module()
    reserved = _reserved_names(GraphModule)
    for name, kind, tensor, requires_grad in tensors:
        if requires_grad and tensor.is_floating_point():
            tensor.requires_grad_(True)
        _set_attr(root, name, tensor, kind, reserved)
    gm = GraphModule(root, graph, class_name)
    _input_checks.install(gm)  # a .pt2 program's inputs, checked as the C++ runtime checks them
    if to_run and not trusted:
        _guards.install(gm)
    return gm


# Note [Python load path]
# ~~~~~~~~~~~~~~~~~~~~~~~
# The file is opened once (mapped, or read into memory with mmap=False: Note
# [Memory-mapped weights] in src/torch/zip_reader.cpp) and parsed once, by the
# C++ reader: it checks those bytes whole (records, names, operators, tensor extents) and
# gives back either the compiled C++ runtime (``_C_torch.load``) or the graph
# appended to a Python Graph with the tensors (``_C_torch.read_graph``), so
# what is checked is what runs (no second read that a changed file could
# answer differently; a mapped file changed in place while it is used shows
# its new weight bytes, which is why mmap=False exists). Whatever the file holds, load raises ValueError (or
# OSError when the file cannot be read): errors of the Python side that the
# C++ checks let through are turned into ValueError too. An untrusted file that will run
# in Python is also checked as the C++ runtime checks it when it compiles (every call's
# arguments against its schema, get_attr targets: torch::check_compiles), so both runtimes
# refuse the same files, at load; a trusted one, or one loaded only to be shown, is not
# (its calls may be ones the C++ runtime cannot run, which Python runs).
