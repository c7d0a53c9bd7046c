"""fxcpp.graph: the Graph IR (mirrors torch.fx.graph).

The node list, naming, use lists, printing, lint, dead-code elimination,
copying and code generation run in C++ (``fxcpp._C.GraphBase``). This module
adds the Python-facing API: owning-module checks, insertion-point context
managers, ``print_tabular`` and the ``CodeGen`` customization classes.
"""
import builtins
import contextlib
import copy
import copyreg
import enum
import inspect
import math
import os
import types
import typing
import warnings
from dataclasses import dataclass
from typing import (TYPE_CHECKING, Any, Callable, Dict, FrozenSet, List, NamedTuple, Optional, Set, Tuple,
                    Type)

import torch
import torch.fx
import torch.utils._pytree as pytree

from . import _C, _torch_compat
import torch.fx._pytree as fx_pytree
from ._compatibility import compatibility
from .node import Argument, Node, Target, _get_qualified_name, _type_repr, map_arg, _pretty_print_target
from .node import _side_effectful_functions, _module_is_impure, _bad_target, _python_signatures
from .immutable_collections import immutable_dict, immutable_list

if TYPE_CHECKING:
    from .graph_module import GraphModule  # noqa: F401
    from ._symbolic_trace import Tracer  # noqa: F401

__all__ = ["PythonCode", "CodeGen", "Graph"]

# Builtin containers and their `typing` spelling, used for annotations.
_origin_type_map = {list: List, dict: Dict, set: Set, frozenset: FrozenSet, tuple: Tuple}

TransformCodeFunc = Callable[[List[str]], List[str]]


class _CustomBuiltin(NamedTuple):
    """A name bound in every generated module's globals: how to import it, and the object."""
    import_str: str
    obj: Any


_custom_builtins: Dict[str, _CustomBuiltin] = {}


def _sync_name_rules():
    _C._set_name_rules(list(builtins.__dict__), [(k, v.obj) for k, v in _custom_builtins.items()])


# The core writes printouts, code and names as the installed torch.fx does (Note [Dialect]).
_C._set_dialect(_torch_compat.FX_DIALECT)


def _register_custom_builtin(name: str, import_str: str, obj: Any):
    _custom_builtins[name] = _CustomBuiltin(import_str, obj)
    _sync_name_rules()


_register_custom_builtin('inf', 'from math import inf', math.inf)
_register_custom_builtin('nan', 'from math import nan', math.nan)
_register_custom_builtin('NoneType', 'NoneType = type(None)', type(None))
_register_custom_builtin('torch', 'import torch', torch)
_register_custom_builtin('device', 'from torch import device', torch.device)
_register_custom_builtin('fx_pytree', 'import torch.fx._pytree as fx_pytree', fx_pytree)
_register_custom_builtin('pytree', 'import torch.utils._pytree as pytree', pytree)


def _is_magic(x: str) -> bool:
    return x.startswith('__') and x.endswith('__')


def _snake_case(s: str) -> str:
    """``pascalCase`` -> ``pascal_case``, as the installed torch.fx does it (the core calls this
    for names with non-ASCII characters; ASCII ones it snake-cases itself, alike on every torch):
    torch.fx 1.13 splits at any lower->upper case change and lowers each character; torch.fx 2.x
    splits only between an ASCII lower and an ASCII upper letter and then lowers the text."""
    out = []
    prev_lower = False
    if _torch_compat.FX_DIALECT == '1.13':
        for ch in s:
            if prev_lower and ch.isupper():
                out.append('_')
            out.append(ch.lower())
            prev_lower = ch.islower()
        return ''.join(out)
    for ch in s:
        if prev_lower and 'A' <= ch <= 'Z':
            out.append('_')
        out.append(ch)
        prev_lower = 'a' <= ch <= 'z'
    return ''.join(out).lower()


def _is_from_torch(obj: Any) -> bool:
    module_name = getattr(obj, '__module__', None)
    if module_name is not None:
        return module_name.partition('.')[0] == 'torch'
    name = getattr(obj, '__name__', None)
    # `torch` itself is excluded: torch.torch.torch... resolves
    if name is not None and name != 'torch':
        return any(getattr(home, name, None) is obj for home in (torch, torch.nn.functional))
    return False


@compatibility(is_backward_compatible=True)
@dataclass
class PythonCode:
    """Generated source of a forward function and the globals it runs with."""
    src: str
    globals: Dict[str, Any]

    if _torch_compat.PYTHON_CODE_2X_OPTIONS:
        # torch.fx 2.x's line bookkeeping (Note [Line numbers of generated code] in
        # src/core/codegen.cpp): `_prologue_start`, the line of `def forward(`, and
        # `_lineno_map`, {line after the header: node position or None}, expanded from the
        # core's compact form when first read.
        _prologue_start: int = 0

        @property
        def _lineno_map(self) -> Optional[Dict[int, Optional[int]]]:
            cached = self.__dict__.get('_lineno_map_value', _NO_MAP)
            if cached is _NO_MAP:
                cached = _expand_lineno_map(self.__dict__.pop('_lineno_info', None))
                self.__dict__['_lineno_map_value'] = cached
            return cached

        @_lineno_map.setter
        def _lineno_map(self, value: Optional[Dict[int, Optional[int]]]) -> None:
            self.__dict__['_lineno_map_value'] = value


_NO_MAP = object()


def _expand_lineno_map(info) -> Optional[Dict[int, Optional[int]]]:
    """{prologue_lines + v: the last node whose first body line is <= v (None before the
    first)} for every body line v, from the core's (prologue_lines, body_lines, node lines)."""
    if info is None:
        return None
    if len(info) == 2:  # (prologue_lines, int64 node per body line, -1: None)
        prologue_lines, raw = info
        return {prologue_lines + v: (None if x < 0 else x) for v, x in enumerate(memoryview(raw).cast('q'))}
    prologue_lines, body_lines, raw = info
    starts = memoryview(raw).cast('I')
    out: Dict[int, Optional[int]] = {}
    j, n = -1, len(starts)
    for v in range(body_lines):
        while j + 1 < n and starts[j + 1] <= v:
            j += 1
        out[prologue_lines + v] = j if j >= 0 else None
    return out


class _LinenoMap(dict):
    """A PythonCode's ``_lineno_map`` as a dict filled on first use (a GraphModule keeps one per
    recompile, as torch.fx 2.x's does, without paying O(lines) in Python each time). Python-level
    reads fill it; C code reading it as a plain dict before any Python read sees it empty."""
    def __init__(self, code: 'PythonCode'):
        super().__init__()
        self._code = code

    def _fill(self):
        code = self._code
        if code is not None:
            self._code = None
            dict.update(self, code._lineno_map or {})

    def _filled(name):  # noqa: N805 -- a method factory used in the class body
        method = getattr(dict, name)

        def run(self, *args, **kwargs):
            self._fill()
            return method(self, *args, **kwargs)
        run.__name__ = name
        return run

    for _name in ('__getitem__', '__contains__', '__iter__', '__len__', '__eq__', '__ne__', '__repr__', 'get',
                  'keys', 'values', 'items', 'copy', '__or__', '__ror__'):
        locals()[_name] = _filled(_name)
    del _name, _filled
    __hash__ = None

    def __bool__(self):
        self._fill()
        return dict.__len__(self) > 0

    def __reduce_ex__(self, protocol):
        # pickled and deep-copied as the plain dict it stands for (every protocol)
        self._fill()
        return (dict, (dict.copy(self),))


def _python_code_of(result) -> 'PythonCode':
    """A PythonCode from the core's (src, globals, line info)."""
    src, globals_, (prologue_start, prologue_lines, body_lines, node_lines, line_nodes) = result
    pc = PythonCode(src, globals_)
    if _torch_compat.PYTHON_CODE_2X_OPTIONS:
        pc._prologue_start = prologue_start
        if line_nodes is not None:  # a body_transformer ran: one entry per body line
            pc.__dict__['_lineno_info'] = (prologue_lines, line_nodes)
        else:
            pc.__dict__['_lineno_info'] = None if node_lines is None else (prologue_lines, body_lines, node_lines)
    return pc


class _InsertPoint:
    """Sets the insertion point now; restores the previous one on ``__exit__``."""

    def __init__(self, graph, node, after):
        self.graph = graph
        self.orig = graph._insert_point()
        graph._set_insert_point(node, after)

    def __enter__(self):
        pass

    def __exit__(self, type, value, tb):
        self.graph._set_insert_point(*self.orig)


class _PyTreeInfo(NamedTuple):
    """Pytree structure of a traced function's inputs and outputs."""
    orig_args: List[str]
    in_spec: pytree.TreeSpec
    out_spec: Optional[pytree.TreeSpec]


@compatibility(is_backward_compatible=False)
class CodeGen(object):
    """Customization points of code generation (subclass to change them).

    The default implementations are executed in C++; overriding a method in a
    subclass makes the generator call the Python override instead.
    """

    def __init__(self):
        self._body_transformer: Optional[TransformCodeFunc] = None

    def gen_fn_def(self, free_vars: List[str], maybe_return_annotation: str, *, expanded_def: bool = False) -> str:
        """Header line of the generated function; ``self`` is prepended to ``free_vars`` if missing.
        expanded_def (torch.fx 2.x): one parameter per line, text after a '#' as its comment."""
        if not free_vars or free_vars[0] != 'self':
            free_vars.insert(0, 'self')
        if expanded_def:
            lines = []
            for arg in free_vars:
                if '#' in arg:
                    arg_part, comment = arg.split('#', 1)
                    lines.append(f'    {arg_part.rstrip()},  # {comment.lstrip()}\n')
                else:
                    lines.append(f'    {arg},\n')
            return f"def forward(\n{''.join(lines)}){maybe_return_annotation}:"
        return f"def forward({', '.join(free_vars)}){maybe_return_annotation}:"

    def generate_output(self, output_args: Argument) -> str:
        """Source line returning ``output_args``."""
        return f'return {repr(output_args)}'

    def process_inputs(self, *args: Any) -> Any:
        """Transforms the inputs before they reach the generated function."""
        return args

    def process_outputs(self, outputs: Any) -> Any:
        """Transforms the generated function's outputs."""
        return outputs

    def additional_globals(self) -> List[Tuple[str, Any]]:
        """Extra (name, object) pairs made available to the generated code."""
        return []


class _PyTreeCodeGen(CodeGen):
    """Codegen that flattens pytree inputs and unflattens outputs."""

    def __init__(self, pytree_info: _PyTreeInfo):
        super().__init__()
        self.pytree_info: _PyTreeInfo = pytree_info

    if _torch_compat.PYTREE_CODEGEN_2X:
        # Note [Pytree codegen on 2.x]: torch.fx 2.x flattens inputs as (args, kwargs) when the
        # input spec is one (the keyword arguments by name), writes annotated placeholders on a
        # line of their own before the flattening assignment, and takes a tuple as flat outputs.
        def process_inputs(self, *inputs: Any) -> Any:
            return pytree.arg_tree_leaves(*inputs)

        def process_outputs(self, out: Any) -> Any:
            if self.pytree_info is None or self.pytree_info.out_spec is None:
                return out
            if not isinstance(out, (list, tuple)):
                out = [out]
            return pytree.tree_unflatten(out, self.pytree_info.out_spec)

        def gen_fn_def(self, free_vars, maybe_return_annotation, *, expanded_def: bool = False):
            if self.pytree_info is None:
                return super().gen_fn_def(free_vars, maybe_return_annotation, expanded_def=expanded_def)
            orig_args = self.pytree_info.orig_args
            if orig_args and orig_args[0] == 'self':
                free_vars.insert(0, 'self')
            fn_def = super().gen_fn_def(orig_args[:], maybe_return_annotation, expanded_def=expanded_def)
            if free_vars:
                fn_def += self._flatten_inputs(orig_args, free_vars, expanded_def)
            return fn_def

        def _flatten_inputs(self, orig_args, free_vars, expanded_def):
            """The lines after ``def forward(...)`` binding the placeholders from the inputs."""
            spec = self.pytree_info.in_spec
            source = f"[{', '.join(orig_args)}], self._in_spec"
            if (spec.type is tuple and spec.num_children == 2 and spec.child(0).type is tuple
                    and spec.child(1).type is dict):
                npos = spec.child(0).num_children
                kwargs = ', '.join(f"'{k}':{v}" for k, v in zip(spec.child(1).context, orig_args[npos:]))
                source = f"([{', '.join(orig_args[:npos])}], {{{kwargs}}}), self._in_spec"
            annotated = [v for v in free_vars if ':' in v]
            lines = ''
            if annotated:  # `a: T, b = f()` is no Python: the annotations go first
                lines = '\n    ' + ('\n    '.join(annotated) if expanded_def else '; '.join(annotated) + ';\n')
            names = ', '.join(v.split(':')[0].split('#')[0] for v in free_vars)
            return lines + f"\n    {names}, = fx_pytree.tree_flatten_spec({source})"
    else:
        def process_inputs(self, *inputs: Any) -> Any:
            flat_args, _ = pytree.tree_flatten(inputs)
            return flat_args

        def process_outputs(self, out: Any) -> Any:
            if self.pytree_info is None:
                return out
            if not isinstance(out, list):
                out = [out]
            assert self.pytree_info.out_spec is not None
            return pytree.tree_unflatten(out, self.pytree_info.out_spec)

        def gen_fn_def(self, free_vars, maybe_return_annotation):
            return self._gen_fn_def_1_13(free_vars, maybe_return_annotation)

    def _gen_fn_def_1_13(self, free_vars, maybe_return_annotation):
        if self.pytree_info is None:
            return super().gen_fn_def(free_vars, maybe_return_annotation)
        function_args = self.pytree_info.orig_args
        if function_args[0] == 'self':
            free_vars.insert(0, 'self')
        fn_def = super().gen_fn_def(function_args[:], maybe_return_annotation)
        if free_vars:
            fn_def += (f"\n    {', '.join(free_vars)}, = fx_pytree.tree_flatten_spec("
                       f"[{', '.join(function_args)}], self._in_spec)")
        return fn_def

    def generate_output(self, output_args):
        if self.pytree_info:
            return f'return pytree.tree_unflatten({repr(output_args)}, self._out_spec)'
        return super().generate_output(output_args)


def _get_attr_reference_exists(mod: torch.nn.Module, qualified_name: str) -> bool:
    module_path, _, name = qualified_name.rpartition(".")
    try:
        submod: torch.nn.Module = mod.get_submodule(module_path)
    except AttributeError:
        warnings.warn(f"Failed to fetch module {module_path}!")
        return False
    if not hasattr(submod, name):
        return False
    res = getattr(submod, name)
    return (isinstance(res, (torch.nn.Module, torch.nn.Parameter)) or name in submod._buffers)


# torch.fx.Graph as a (layout-free) second base: torch.fx.GraphModule(root, g)
# and torch.fx passes accept fxcpp graphs; every member is fxcpp's own.
@compatibility(is_backward_compatible=True)
class Graph(*_torch_compat.graph_bases(_C.GraphBase)):
    """The main data structure of the intermediate representation (see torch.fx.Graph).

    Nodes live in a C++ intrusive list; ``graph.nodes`` iterates them (also
    reversed, and safely while nodes are erased or inserted).
    """

    @compatibility(is_backward_compatible=True)
    def __init__(self, owning_module: Optional["GraphModule"] = None, tracer_cls: Optional[Type["Tracer"]] = None,
                 tracer_extras: Optional[Dict[str, Any]] = None):
        self._owners = 0
        self._owning_module = owning_module
        self._tracer_cls = tracer_cls
        self._tracer_extras = tracer_extras
        self._codegen = CodeGen()
        if _torch_compat.FX_API_2:
            self._co_fields: Dict[str, Any] = {}  # where the program came from (Note [Code object file names])

    @property
    def owning_module(self):
        """The GraphModule owning this graph (None if none, or more than one)."""
        return self._owning_module

    @owning_module.setter
    def owning_module(self, mod: Optional["GraphModule"]):
        if mod:
            self._owning_module = mod if not self._owners else None
            self._owners += 1

    # Pickling (Note [Graph pickling] in graph_type.cpp): the Python attributes
    # as torch.fx pickles them (owning module and codegen included), plus flat
    # node records exported and imported by the core in one linear pass.
    def __getstate__(self):
        state = dict(self.__dict__)
        state['_fxcpp_nodes'] = self._export_nodes()
        return state

    def __reduce__(self):
        # Every protocol (0 and 1 included) rebuilds with cls.__new__ and __setstate__.
        return (copyreg.__newobj__, (type(self),), self.__getstate__())

    def __setstate__(self, state):
        state = dict(state)
        records = state.pop('_fxcpp_nodes')
        self.__dict__.update(state)
        self._import_nodes(*records)

    def __deepcopy__(self, memo=None) -> 'Graph':
        memo = memo if memo else {}
        g = Graph(tracer_cls=self._tracer_cls)
        output_vals = g.graph_copy(self, val_map=memo, return_output_node=True)
        g._codegen = copy.deepcopy(self._codegen)
        if _torch_compat.FX_API_2:
            # torch.fx 2.x copies a graph without an output node too, and the output node's meta
            if output_vals is not None:
                output_val, old_output_node = output_vals
                new_output_node = g.output(output_val, type_expr=getattr(old_output_node, 'type', None))
                new_output_node.meta = copy.copy(old_output_node.meta)
            return g
        assert isinstance(output_vals, tuple)
        output_val, old_output_val = output_vals
        g.output(output_val, type_expr=getattr(old_output_val, 'type', None))
        return g

    @compatibility(is_backward_compatible=False)
    def process_inputs(self, *args):
        return self._codegen.process_inputs(*args)

    @compatibility(is_backward_compatible=False)
    def process_outputs(self, out):
        return self._codegen.process_outputs(out)

    @compatibility(is_backward_compatible=True)
    def inserting_before(self, n: Optional[Node] = None):
        """Insert before ``n`` (None: at the beginning) until the ``with`` block ends."""
        if n is None:
            return self.inserting_after(self._root)
        assert n.graph == self, "Node to insert before is not in graph."
        return _InsertPoint(self, n, False)

    @compatibility(is_backward_compatible=True)
    def inserting_after(self, n: Optional[Node] = None):
        """Insert after ``n`` (None: at the end) until the ``with`` block ends."""
        if n is None:
            return self.inserting_before(self._root)
        assert n.graph == self, "Node to insert after is not in graph."
        return _InsertPoint(self, n, True)

    @compatibility(is_backward_compatible=True)
    def node_copy(self, node: Node, arg_transform: Callable[[Node], 'Argument'] = lambda x: x) -> Node:
        """Copy ``node`` into this graph, mapping its Node arguments through ``arg_transform``."""
        if arg_transform is _NODE_COPY_IDENTITY:
            n = self._node_copy(node)
        elif _torch_compat.FX_API_2 and not callable(arg_transform):
            # torch.fx 2.x does not check the transform first (1.13: AssertionError): calling it
            # on a Node argument fails, as there ("'tuple' object is not callable")
            n = self._node_copy(node, lambda a: arg_transform(a))
        else:
            n = self._node_copy(node, arg_transform)
        if self._owning_module is not None and _torch_compat.FX_API_2:
            _fire_create_node_hooks(self, n)  # Note [GraphModule node hooks]
        return n

    if _torch_compat.FX_API_2:
        @compatibility(is_backward_compatible=True)
        def graph_copy(self, g: 'Graph', val_map: Dict[Node, Node], return_output_node=False) -> 'Optional[Argument]':
            """Copy all nodes of ``g`` into this graph (``val_map`` maps ``g``'s nodes to the copies and
            may be pre-seeded); returns the copy of ``g``'s output value (and ``g``'s output node with
            ``return_output_node``). The owning module's create-node hooks see each copy."""
            if not _owner_hooks(self, '_create_node_hooks'):
                return _C.GraphBase.graph_copy(self, g, val_map, return_output_node)
            before = set(self.nodes)
            try:
                return _C.GraphBase.graph_copy(self, g, val_map, return_output_node)
            finally:
                for n in [n for n in self.nodes if n not in before]:
                    _fire_create_node_hooks(self, n)  # Note [GraphModule node hooks]

    @compatibility(is_backward_compatible=True)
    def placeholder(self, name: str, type_expr: Optional[Any] = None,
                    default_value: Any = inspect.Signature.empty) -> Node:
        args = () if default_value is inspect.Signature.empty else (default_value,)
        return self.create_node('placeholder', name, args=args, type_expr=type_expr)

    @compatibility(is_backward_compatible=True)
    def get_attr(self, qualified_name: str, type_expr: Optional[Any] = None) -> Node:
        if self.owning_module and not _get_attr_reference_exists(self.owning_module, qualified_name):
            warnings.warn("Attempted to insert a get_attr Node with no "
                          "underlying reference in the owning "
                          "GraphModule! Call "
                          "GraphModule.add_submodule to add the "
                          "necessary submodule, "
                          "GraphModule.add_parameter to add the "
                          "necessary Parameter, or "
                          "nn.Module.register_buffer to add the "
                          "necessary buffer", stacklevel=2)
        return self.create_node('get_attr', qualified_name, type_expr=type_expr)

    @compatibility(is_backward_compatible=True)
    def call_module(self, module_name: str, args: Optional[Tuple['Argument', ...]] = None,
                    kwargs: Optional[Dict[str, 'Argument']] = None, type_expr: Optional[Any] = None) -> Node:
        if self.owning_module and self.owning_module.get_submodule(module_name) is None:
            warnings.warn("Attempted to insert a call_module Node with "
                          "no underlying reference in the owning "
                          "GraphModule! Call "
                          "GraphModule.add_submodule to add the "
                          "necessary submodule")
        return self.create_node('call_module', module_name, args, kwargs, type_expr=type_expr)

    @compatibility(is_backward_compatible=True)
    def call_method(self, method_name: str, args: Optional[Tuple['Argument', ...]] = None,
                    kwargs: Optional[Dict[str, 'Argument']] = None, type_expr: Optional[Any] = None) -> Node:
        return self.create_node('call_method', method_name, args, kwargs, type_expr=type_expr)

    if _torch_compat.FX_API_2:
        @compatibility(is_backward_compatible=True)
        def call_function(self, the_function: Callable[..., Any], args: Optional[Tuple['Argument', ...]] = None,
                          kwargs: Optional[Dict[str, 'Argument']] = None, type_expr: Optional[Any] = None,
                          name: Optional[str] = None) -> Node:
            return self.create_node('call_function', the_function, args, kwargs, name=name, type_expr=type_expr)

        @compatibility(is_backward_compatible=False)
        def find_nodes(self, *, op: str, target: Optional['Target'] = None, sort: bool = True) -> List[Any]:
            """The nodes with opcode ``op`` (and ``target``), in graph order (the core keeps torch.fx's
            index: Note [find_nodes order] in src/core/graph.cpp); ``sort=False``: in the order they
            entered the index, as torch.fx gives them (creation, then the last assignment of an
            attribute)."""
            if op == 'call_function':
                if target is None:
                    raise AssertionError('target must not be None for call_function op')
                hash(target)  # torch.fx looks call_function targets up in a dict
            elif not isinstance(op, str):
                hash(op)
                return []
            return _C.GraphBase.find_nodes(self, op=op, target=target, sort=sort)

        @compatibility(is_backward_compatible=False)
        def output_node(self) -> Node:
            """The graph's last node, which must be its output node."""
            output_node = next(iter(reversed(self.nodes)))
            if output_node.op != 'output':
                raise AssertionError(f'Expected output node, got op={output_node.op}')
            return output_node
    else:
        @compatibility(is_backward_compatible=True)
        def call_function(self, the_function: Callable[..., Any], args: Optional[Tuple['Argument', ...]] = None,
                          kwargs: Optional[Dict[str, 'Argument']] = None, type_expr: Optional[Any] = None) -> Node:
            return self.create_node('call_function', the_function, args, kwargs, type_expr=type_expr)

    @compatibility(is_backward_compatible=True)
    def output(self, result: 'Argument', type_expr: Optional[Any] = None):
        return self.create_node(op='output', target='output', args=(result,), type_expr=type_expr)

    if _torch_compat.PYTHON_CODE_2X_OPTIONS:
        @compatibility(is_backward_compatible=True)
        def python_code(self, root_module: str, *, verbose: bool = False, include_stride: bool = False,
                        include_device: bool = False, colored: bool = False, expanded_def: bool = False,
                        record_func: bool = False, additional_meta: Optional[List[str]] = None) -> PythonCode:
            """Python source (and globals) of a ``forward`` equivalent to this graph.

            verbose adds a comment per stack trace and annotates values from their metadata
            (``x: "f32[2, 4]"``; with strides and devices when asked, or when the environment sets
            FX_GRAPH_SHOW_STRIDE / FX_GRAPH_SHOW_DEVICE to 1); colored writes ANSI colors,
            expanded_def one parameter per line, record_func profiler markers, additional_meta
            the named meta entries in the comments (Note [Verbose annotations]).
            """
            include_stride = include_stride or os.environ.get("FX_GRAPH_SHOW_STRIDE", "0") == "1"
            include_device = include_device or os.environ.get("FX_GRAPH_SHOW_DEVICE", "0") == "1"
            return _python_code_of(self._python_code(root_module, verbose, self._codegen, include_stride,
                                                     include_device, colored, expanded_def, record_func,
                                                     list(additional_meta) if additional_meta else None))
    else:
        @compatibility(is_backward_compatible=True)
        def python_code(self, root_module: str, *, verbose: bool = False) -> PythonCode:
            """Python source (and globals) of a ``forward`` equivalent to this graph."""
            return _python_code_of(self._python_code(root_module, verbose, self._codegen))

    @compatibility(is_backward_compatible=True)
    def print_tabular(self):
        """Print the nodes as a table (needs ``tabulate``)."""
        try:
            from tabulate import tabulate
        except ImportError:
            print("`print_tabular` relies on the library `tabulate`, "
                  "which could not be found on this machine. Run `pip "
                  "install tabulate` to install the library.")
            raise
        rows = [[n.op, n.name, n.target, n.args, n.kwargs] for n in self.nodes]
        print(tabulate(rows, headers=['opcode', 'name', 'target', 'args', 'kwargs']))

    @compatibility(is_backward_compatible=True)
    def lint(self):
        """Check the graph's invariants (C++), then its references into the owning module."""
        self._lint_core()
        mod = self.owning_module
        if not mod:
            return
        for node in self.nodes:
            op = node.op
            target = node.target
            # Node.target is validated when set; a callable target can still
            # stop being callable (its class's __call__ deleted), as in torch.fx.
            if op == 'call_function':
                if not callable(target):
                    raise ValueError(f'Node {node} target {target} has type {torch.typename(target)} but '
                                     'a Callable is expected')
            elif not isinstance(target, str):
                raise ValueError(f'Node {node} target {target} has type {torch.typename(target)} but '
                                 'a str is expected')
            if op != 'get_attr' and op != 'call_module':
                continue
            atoms = target.split('.')
            itr = mod
            for i, atom in enumerate(atoms):
                nxt = getattr(itr, atom, None)
                seen = '.'.join(atoms[:i])
                if nxt is None:
                    raise RuntimeError(f'Node {node} target {node.target} references nonexistent attribute '
                                       f'{atom} of {seen}')
                if op == "call_module" and not isinstance(nxt, torch.nn.Module):
                    raise RuntimeError(f'Node {node} target {node.target} {atom} of {seen} does '
                                       'not reference an nn.Module')
                if (op == "get_attr" and _torch_compat.LINT_WARNS_ON_PLAIN_GET_ATTR
                        and not isinstance(nxt, (torch.nn.Module, torch.nn.Parameter))
                        and atom not in itr._buffers):
                    warnings.warn(f'Node {node} target {node.target} {atom} of {seen} does '
                                  'not reference an nn.Module, nn.Parameter, or buffer, which is '
                                  'what \'get_attr\' Nodes typically target')
                else:
                    itr = nxt

    if _torch_compat.FX_API_2:
        @compatibility(is_backward_compatible=True)
        def eliminate_dead_code(self, is_impure_node: Optional[Callable[[Node], bool]] = None) -> bool:
            """Remove nodes without users that are not impure, in reverse order (then, as torch.fx 2.x,
            in the GraphModule children that get_attr nodes name); returns whether anything changed.

            ``is_impure_node(node)`` replaces ``Node.is_impure`` as the impurity test."""
            self.lint()
            impure_random = _torch_compat.dce_impure_random()
            if (is_impure_node is None and impure_random and not self._has_args_dependent_impurity()
                    and not _owner_hooks(self, '_erase_node_hooks')):
                changed = self._dce_core()  # the core's per-target impurity is Node.is_impure's here
            else:
                if is_impure_node is None:
                    def is_impure_node(node):
                        return node.is_impure(impure_random)
                changed = False
                for node in reversed(self.nodes):  # erase_node: the erase-node hooks see each node
                    if not is_impure_node(node) and len(node.users) == 0:
                        self.erase_node(node)
                        changed = True
            mod = self.owning_module
            if mod is not None:
                attrs = {n.target for n in self.find_nodes(op='get_attr')}
                from .graph_module import GraphModule as _GraphModule
                for child_name, child in mod.named_children():
                    if child_name in attrs and isinstance(child, (_GraphModule, torch.fx.GraphModule)):
                        changed |= child.graph.eliminate_dead_code()
                        child.recompile()
            return changed

        def _has_args_dependent_impurity(self) -> bool:
            if len(_side_effectful_functions) != _IMPURITY_CACHE_STATE[0]:
                # torch.fx.has_side_effect registered a target since the core cached impurities
                _IMPURITY_CACHE_STATE[0] = len(_side_effectful_functions)
                _C._clear_caches()
            return any(self.find_nodes(op='call_function', target=t)
                       for t in _torch_compat.ARGS_DEPENDENT_IMPURE_TARGETS)
    else:
        @compatibility(is_backward_compatible=True)
        def eliminate_dead_code(self):
            """Remove pure nodes without users, in reverse order; returns whether anything changed."""
            self.lint()
            return self._dce_core()

    @compatibility(is_backward_compatible=False)
    def set_codegen(self, codegen: CodeGen):
        self._codegen = codegen

    @compatibility(is_backward_compatible=False)
    def on_generate_code(self, make_transformer: Callable[[Optional[TransformCodeFunc]], TransformCodeFunc]):
        """Register a transformer of the generated body (restorable with ``with``)."""
        previous = self._codegen._body_transformer
        self._codegen._body_transformer = make_transformer(previous)

        @contextlib.contextmanager
        def restore():
            try:
                yield
            finally:
                self._codegen._body_transformer = previous

        return restore()


# len(_side_effectful_functions) when the core's cached target impurities were last valid.
_IMPURITY_CACHE_STATE = [len(_side_effectful_functions)]

# node_copy's default, recognized to skip calling it per argument.
_NODE_COPY_IDENTITY = Graph.node_copy.__defaults__[0]


# ---------------------------------------------------------------------------
# Helpers the C++ bindings call back into.

class _NodeRef(int):
    """A node's position in a pickled graph's node records (Note [Graph pickling])."""
    __slots__ = ()

    def __reduce__(self):
        return (_NodeRef, (int(self),))


def _target_info(obj):
    """(name, qualified name, printed target, operator name, qualified reference, impure) of a callable."""
    name = getattr(obj, '__name__', None)  # None: naming raises AttributeError, as in torch.fx
    if name is not None and not isinstance(name, str):
        # torch.fx fails on it too (_snake_case iterates it; codegen getattr()s it)
        raise TypeError(f'__name__ of {type(obj).__name__} target must be a str, not {type(name).__name__}')
    try:
        qualified = _get_qualified_name(obj)
    except Exception:
        qualified = name if name is not None else repr(obj)
    try:
        pretty = _pretty_print_target(obj)
    except Exception:
        pretty = qualified
    operator_name = name if name and getattr(obj, '__module__', None) == '_operator' else ''
    reference = ''
    try:
        if _is_from_torch(obj) and obj != torch.device:
            reference = qualified
    except Exception:
        pass
    try:
        impure = _torch_compat.call_function_is_impure(obj)
    except TypeError:  # unhashable: not in any set (Node.is_impure raises as torch.fx's does)
        impure = False
    return (name, qualified, pretty, operator_name, reference, impure)


def _origin_type(origin, annotation=None):
    """The class generated code names for a generic annotation's origin: `typing.List` for `list`
    (and the like), for every generic on torch.fx 1.13, for typing's own (pre-PEP 585) generics
    only on 2.x, which writes `dict[str, int]` as it is."""
    if _torch_compat.TYPING_ORIGINS_FOR_TYPING_GENERICS_ONLY and not isinstance(annotation, typing._GenericAlias):
        return origin
    return _origin_type_map.get(origin, origin)


def _union_origin(annotation):
    """typing.Union for a PEP 604 union (``X | Y``), which torch.fx 2.x's generated code writes
    as ``typing_Union[X,Y]``; None on 1.13, which names the union as one global."""
    if _torch_compat.FX_API_2 and isinstance(annotation, types.UnionType) and '|' in _type_repr(annotation):
        return typing.Union
    return None


_OP_TYPES = tuple(t for t in (getattr(torch._ops, 'OpOverload', None), getattr(torch._ops, 'HigherOrderOperator', None))
                  if t is not None)


def _code_repr(arg):
    """How torch.fx 2.x's generated code writes a constant the core does not represent (Note
    [Constants in generated code], src/core/codegen.cpp): ('global', name hint, object, suffix),
    ('complex', real, imag), ('text', text) or ('plain', repr) (blue in colored code)."""
    if _OP_TYPES and isinstance(arg, _OP_TYPES):
        return ('global', _get_qualified_name(arg), arg, '')
    if isinstance(arg, enum.Enum):
        cls = arg.__class__
        return ('global', cls.__name__, cls, f'.{arg.name}')
    if isinstance(arg, complex):
        if arg.real == 0.0 or arg.imag == 0.0 or not math.isfinite(arg.real) or not math.isfinite(arg.imag):
            return ('complex', repr(arg.real), repr(arg.imag))  # repr(complex) would not read back
        return ('plain', repr(arg))
    if isinstance(arg, torch.Tensor):
        return ('text', f"torch.Tensor(size={list(arg.size())}, dtype={str(arg.dtype).split('.')[-1]})")
    return ('plain', repr(arg))


def _color(code):
    return lambda s: f'{code}{s}\033[0m'


def _no_color(s):
    return s


def _shape_text(shape):
    return f"[{', '.join([str(x) for x in shape])}]"


def _meta_annotation(meta_val, include_stride, include_device, colored):
    """The annotation torch.fx 2.x's verbose code writes for a value described by ``meta_val``
    (node.meta's "val", "tensor_meta" or "example_value"), or None (Note [Verbose annotations])."""
    if colored:
        red, blue, dim_blue, dim_green = (_color('\033[31m'), _color('\033[34m'), _color('\033[2m\033[34m'),
                                          _color('\033[2m\033[32m'))
    else:
        red = blue = dim_blue = dim_green = _no_color
    if isinstance(meta_val, torch.Tensor) and meta_val.layout not in (torch.sparse_csc, torch.sparse_csr):
        stride = _shape_text(meta_val.stride()) if include_stride else ''
        device = _torch_compat.fx_device_annotation(meta_val.device) if include_device else ''
        core = (f'{red(_torch_compat.FX_DTYPE_ABBRS[meta_val.dtype])}{blue(_shape_text(meta_val.shape))}'
                f'{dim_blue(stride)}{dim_green(device)}')
        fake = getattr(getattr(torch, '_subclasses', None), 'FakeTensor', None)
        if type(meta_val) is torch.Tensor or (fake is not None and isinstance(meta_val, fake)):
            return core
        cls = meta_val.__class__.__name__
        spec = getattr(meta_val, '_spec', None)
        if cls == 'DTensor' and spec is not None and type(meta_val).__module__.startswith('torch.distributed'):
            from torch.distributed.tensor._api import DTensorSpec
            return f'{cls}({core}, {dim_green(DTensorSpec.format_shard_order_str(spec.placements, spec.shard_order))})'
        return f'{cls}({core})'
    sym_types = _torch_compat.fx_sym_types()
    if sym_types and isinstance(meta_val, sym_types):
        return f'Sym({_torch_compat.fx_sym_repr(meta_val)})'
    from torch.fx.passes.shape_prop import TensorMetadata
    if isinstance(meta_val, TensorMetadata):
        return f'{_torch_compat.FX_DTYPE_ABBRS[meta_val.dtype]}{_shape_text(meta_val.shape)}'
    return None


def _comment_parts(meta, additional_meta):
    """(prefix, middle) of a verbose-code comment `<prefix>#<middle> <stack trace summary>` in
    torch.fx 2.x: the additional_meta entries the node has, its "custom" annotation (values cut at
    40 characters) and its recompute / activation-checkpoint tags."""
    prefix = ''
    if additional_meta:
        parts = [f'{key}: {meta[key]}' for key in additional_meta if key in meta]
        if parts:
            prefix = f"# {', '.join(parts)} "
    middle = ''
    annotation = meta.get('custom', {})
    if annotation:
        trunc = {}
        for key, value in annotation.items():
            text = str(value)
            trunc[key] = text[:40] + '...' if len(text) > 40 else value
        middle = f' Annotation: {trunc}'
    if meta:
        recompute, ac_graph_id = meta.get('recompute', None), meta.get('ac_graph_id', None)
        if recompute is not None and ac_graph_id is not None:
            middle += f' ac_graph_id: {str(ac_graph_id)} - {str(recompute.name)}'
        elif recompute is not None:
            middle += f' recompute: {str(recompute.name)}'
        elif ac_graph_id is not None:
            middle += f' ac_graph_id: {str(ac_graph_id)}'
    return prefix, middle


def _keyword_params(fn):
    """The parameter names ``fn`` accepts by keyword (torch.fx 2.x passes a codegen override only
    the options its signature names)."""
    try:
        return [name for name, p in inspect.signature(fn).parameters.items()
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    except (TypeError, ValueError):
        return []


# Note [GraphModule node hooks]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# torch.fx 2.x's GraphModule keeps four hook lists (_create_node_hooks, _erase_node_hooks,
# _replace_hooks, _deepcopy_hooks; _register_*_hook / _unregister_*_hook edit them) and its
# Graph and Node call them: each new node of the owning module's graph (create_node, so
# node_copy and graph_copy too) goes to every create-node hook, each node about to be erased
# to every erase-node hook, and every use about to be rewired (replace_all_uses_with,
# replace_input_with, renaming a used node) to every replace hook as
# hook(old=node, new=new_name, user=user); a deep copy of the module goes to its deepcopy hooks.
# fxcpp calls them on the same events: create_node and erase_node are C methods that call up
# into the helpers below (only on 2.x, _torch_compat.FX_API_2; on 1.13 the helpers are None
# and nothing is called, as torch.fx 1.13 has no hooks); node_copy, graph_copy and
# replace_all_uses_with call them from Python, and eliminate_dead_code erases through
# erase_node (not the core's pass) while erase-node hooks are registered. One difference:
# torch.fx calls a create-node hook before it links the node into the list, fxcpp right after.

def _owner_hooks(graph, attr):
    """The owning module's hook list ``attr`` of ``graph`` (None/empty when none)."""
    m = graph._owning_module
    return None if m is None else getattr(m, attr, None)


def _fire_create_node_hooks(graph, node):
    """Calls the create-node hooks of ``graph``'s owning module on the new ``node``."""
    hooks = _owner_hooks(graph, '_create_node_hooks')
    if hooks:
        for f in hooks:
            f(node)


def _erase_node_2x(graph, node):
    """torch.fx 2.x's erase_node checks, in its order, then the erase-node hooks: True when the
    node is to be unlinked, False for an already erased node (a warning, nothing else)."""
    if len(node.users) > 0:
        raise RuntimeError(f'Tried to erase Node {node} but it still had {len(node.users)} '
                           f'users in the graph: {node.users}!')
    if node.graph != graph:
        raise RuntimeError(f'Attempting to remove {node} from wrong graph!')
    if node._erased:
        warnings.warn(f'erase_node({node}) on an already erased node')
        return False
    hooks = _owner_hooks(graph, '_erase_node_hooks')
    if hooks:
        for f in hooks:
            f(node)
    return True


def _fire_replace_hooks(node, new_name, users):
    """Calls the replace hooks of ``node``'s owning module for each of ``users``."""
    hooks = _owner_hooks(node.graph, '_replace_hooks')
    if hooks:
        for user in users:
            for f in hooks:
                f(old=node, new=new_name, user=user)


def _rename_2x(node, value):
    """Node.name = value on 2.x: the replace hooks see each user first (a str is required then)."""
    hooks = _owner_hooks(node.graph, '_replace_hooks')
    if hooks:
        if not isinstance(value, str):
            raise AssertionError(f'Expected value to be str, got {type(value)}')
        for user in node.users:
            for f in hooks:
                f(old=node, new=value, user=user)


def _helper_table():
    """The helpers the bindings call (src/bindings/bindings.h, struct Helpers), by name."""
    # Generated code registers wrapped functions through torch.fx's own `wrap`
    # (text-identical to torch.fx; fxcpp's tracer honours that registry too).
    from torch.fx._symbolic_trace import wrap
    return {
        '_type_repr': _type_repr,
        '_target_info': _target_info,
        '_bad_target': _bad_target,
        '_module_is_impure': _module_is_impure,
        '_origin_type': _origin_type,
        '_snake_case': _snake_case,
        '_assertion_message': _torch_compat.fx_assertion_message,
        '_copy': copy.copy,
        '_NodeRef': _NodeRef,
        'CodeGen': CodeGen,
        'wrap': wrap,
        '_code_repr': _code_repr,
        '_meta_annotation': _meta_annotation,
        '_comment_parts': _comment_parts,
        '_keyword_params': _keyword_params,
        '_union_origin': _union_origin,
        # Note [GraphModule node hooks]: torch.fx 2.x only
        '_create_node_hooks': _fire_create_node_hooks if _torch_compat.FX_API_2 else None,
        '_erase_node_2x': _erase_node_2x if _torch_compat.FX_API_2 else None,
        '_rename_2x': _rename_2x if _torch_compat.FX_API_2 else None,
    }


def _install_helpers():
    _C._set_classes(Node, immutable_list, immutable_dict, _helper_table())


reflectable_magic_methods = {
    'add': '{} + {}', 'sub': '{} - {}', 'mul': '{} * {}', 'floordiv': '{} // {}', 'truediv': '{} / {}',
    'div': '{} / {}', 'mod': '{} % {}', 'pow': '{} ** {}', 'lshift': '{} << {}', 'rshift': '{} >> {}',
    'and_': '{} & {}', 'or_': '{} | {}', 'xor': '{} ^ {}', 'getitem': '{}[{}]', 'matmul': '{} @ {}',
}

magic_methods = dict({
    'eq': '{} == {}', 'ne': '{} != {}', 'lt': '{} < {}', 'gt': '{} > {}', 'le': '{} <= {}', 'ge': '{} >= {}',
    'pos': '+{}', 'neg': '-{}', 'invert': '~{}'}, **reflectable_magic_methods)

inplace_methods = {
    'iadd': '{} += {}', 'iand': '{} &= {}', 'ifloordiv': '{} //= {}', 'ilshift': '{} <<= {}', 'imod': '{} %= {}',
    'imul': '{} *= {}', 'imatmul': '{} @= {}', 'ior': '{} |= {}', 'ipow': '{} **= {}', 'irshift': '{} >>= {}',
    'isub': '{} -= {}', 'itruediv': '{} /= {}', 'ixor': '{} ^= {}', 'setitem': '{}[{}] = {}',
}


_python_signatures(Graph, torch.fx.Graph)  # Note [Method signatures]
