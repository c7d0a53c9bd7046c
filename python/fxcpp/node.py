"""fxcpp.node: Node and argument utilities (mirrors torch.fx.node).

``Node`` objects are backed by the C++ core (``fxcpp._C.NodeBase``); this
module adds the Python-only parts: purity checks that need modules, argument
normalization, and torch.fx's helper functions used by printing and codegen.
"""
import builtins
import inspect
import types
import warnings
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Set, Tuple, Union

import torch
import torch.fx

from . import _C, _torch_compat
from ._compatibility import compatibility
from .immutable_collections import immutable_dict, immutable_list

if TYPE_CHECKING:
    from .graph import Graph


BaseArgumentTypes = Union[str, int, float, bool, complex, torch.dtype,
                          torch.Tensor, torch.device, torch.memory_format, torch.layout]
base_types = BaseArgumentTypes.__args__  # type: ignore[attr-defined]

Target = Union[Callable[..., Any], str]

Argument = Optional[Union[
    Tuple[Any, ...],  # elements are Arguments themselves
    List[Any],  # elements are Arguments themselves
    Dict[str, Any],  # values are Arguments themselves
    slice,
    'Node',
    BaseArgumentTypes
]]

# The side-effectful call_function targets (on 2.x torch.fx's own set: _torch_compat).
_side_effectful_functions: Set[Callable] = _torch_compat.SIDE_EFFECTFUL_FUNCTIONS


def has_side_effect(fn):
    """Registers `fn` as side-effectful: call_function nodes of it are impure
    (dead code elimination keeps them), as torch.fx 2.x's ``has_side_effect``.
    Returns `fn`, so it works as a decorator."""
    _side_effectful_functions.add(fn)
    _C._clear_caches()  # the core caches each target's impurity (_target_info)
    return fn

def _find_module_of_method(orig_method: Callable[..., Any]) -> str:
    name = orig_method.__name__
    module = orig_method.__module__
    if module is not None:
        return module
    for guess in [torch, torch.nn.functional]:
        if getattr(guess, name, None) is orig_method:
            return guess.__name__
    raise RuntimeError(f'cannot find module for {orig_method}')


def _type_repr(obj):
    """Printable form of a type annotation (torch.fx semantics)."""
    if isinstance(obj, type):
        if obj.__module__ == 'builtins':
            return obj.__qualname__
        return f'{obj.__module__}.{obj.__qualname__}'
    if obj is ...:
        return '...'
    if isinstance(obj, types.FunctionType):
        return obj.__name__
    return repr(obj)


def _get_qualified_name(func: Callable[..., Any]) -> str:
    # builtins are referred to by their bare name
    if getattr(builtins, func.__name__, None) is func:
        return func.__name__
    name = func.__name__
    module = _find_module_of_method(func)
    # torch.ops modules report themselves as torch._ops
    module = module.replace('torch._ops', 'torch.ops')
    return f'{module}.{name}'


def _format_arg(arg, max_list_len=float('inf')) -> str:
    """Graph-printing form of an argument: ``%name`` for nodes, str() for leaves."""
    custom = getattr(arg, '_custom_fx_repr_fn', None)
    if custom is not None:
        return custom()
    if isinstance(arg, (list, tuple)):
        shown = [_format_arg(item) for i, item in enumerate(arg) if i < max_list_len]
        text = ', '.join(shown)
        if len(arg) >= max_list_len + 1:
            text += f', ...[total_len={len(arg)}]'
        if isinstance(arg, list):
            return '[' + text + ']'
        return '(' + text + (',' if len(arg) == 1 else '') + ')'
    if isinstance(arg, dict):
        return '{' + ', '.join(f'{key}: {_format_arg(value)}' for key, value in arg.items()) + '}'
    return '%' + str(arg) if isinstance(arg, Node) else str(arg)


def _pretty_print_target(target) -> str:
    if isinstance(target, str):
        return target
    if hasattr(target, '__module__'):
        if not hasattr(target, '__name__'):
            return _get_qualified_name(target)
        if target.__module__ == 'builtins':
            return f'builtins.{target.__name__}'
        elif target.__module__ == '_operator':
            return f'operator.{target.__name__}'
    return _get_qualified_name(target)


def _module_is_impure(node: 'Node') -> bool:
    """call_module impurity, asked by the core's Node::is_impure: the submodule's ``_is_impure``."""
    owner = node.graph.owning_module
    assert owner is not None, "self.graph.owning_module not set for purity check"
    submodule = owner.get_submodule(node.target)
    assert submodule is not None, f"Did not find expected submodule target {node.target}"
    return getattr(submodule, "_is_impure", False)


def _bad_target(graph, name, target, wanted_callable):
    """Raise torch.fx's ValueError for a target of the wrong kind (the core's create_node and setter call it)."""
    kind = 'a Callable' if wanted_callable else 'a str'
    raise ValueError(f'Node [graph = {graph}, name = \'{name}\'] target {target} has type '
                     f'{torch.typename(target)} but {kind} is expected')


_OPCODES = ('placeholder', 'call_method', 'call_module', 'call_function', 'get_attr', 'output', 'root')


# torch.fx.Node as a (layout-free) second base where it has no C base of its own
# (torch 1.13; _torch_compat.node_bases): torch.fx code's isinstance checks
# (map_arg, split_module, ...) accept fxcpp nodes; every member is fxcpp's own.
@compatibility(is_backward_compatible=True)
class Node(*_torch_compat.node_bases(_C.NodeBase)):
    """A node of an fxcpp :class:`Graph` (see torch.fx.Node).

    Instances are created by :meth:`Graph.create_node`; each core node has
    exactly one ``Node`` object, which keeps its graph alive. ``op``, ``name``,
    ``target``, ``args``, ``kwargs``, ``users``, ``next``, ``prev`` and ``meta``
    are read from C++ at attribute speed. Arbitrary attributes may be set.
    """

    def __new__(cls, graph: 'Graph', name: str, op: str, target: 'Target', args: Tuple['Argument', ...],
                kwargs: Dict[str, 'Argument'], return_type: Optional[Any] = None):
        # torch.fx's constructor makes a node outside the graph's node list
        # that is nonetheless registered as a user of its inputs; the core has
        # no such half-linked state. Inputs torch.fx rejects fail as there
        # (AssertionError for an unknown opcode, ValueError for a target of the
        # wrong kind); valid ones are refused with a pointer to create_node.
        if op not in _OPCODES:
            raise AssertionError(*filter(None, [_torch_compat.fx_assertion_message('op', op)]))
        if op == 'call_function':
            if not callable(target):
                _bad_target(graph, name, target, True)
        elif not isinstance(target, str):
            _bad_target(graph, name, target, False)
        raise TypeError("fxcpp Nodes cannot be constructed directly: use graph.create_node(op, target, args, "
                        "kwargs, name, type_expr), which also links the node into the graph")

    def __init__(self, graph: 'Graph', name: str, op: str, target: 'Target', args: Tuple['Argument', ...],
                 kwargs: Dict[str, 'Argument'], return_type: Optional[Any] = None) -> None:
        # Not reached (__new__ refuses); kept for torch.fx's signature.
        raise TypeError("fxcpp Nodes cannot be constructed directly")

    @property
    def stack_trace(self) -> Optional[str]:
        return self.meta.get("stack_trace", None)

    @stack_trace.setter
    def stack_trace(self, trace: Optional[str]):
        self.meta["stack_trace"] = trace

    def _pretty_print_target(self, target):
        return _pretty_print_target(target)

    def _remove_from_list(self):
        raise RuntimeError("fxcpp nodes are unlinked by Graph.erase_node or moved with prepend/append")

    if _torch_compat.FX_API_2:
        @compatibility(is_backward_compatible=False)
        def is_impure(self, impure_random: bool = True) -> bool:
            """True for nodes dead-code elimination must keep: placeholders, outputs, impure
            modules (the C++ core's Node::is_impure) and call_function nodes torch.fx 2.x calls
            impure (mutating, effectful, side-effectful and, with ``impure_random``, random)."""
            if self.op == 'call_function':
                return _torch_compat.call_function_is_impure(self.target, self.args, self.kwargs, impure_random)
            return self._is_impure()
    else:
        @compatibility(is_backward_compatible=False)
        def is_impure(self):
            """True for nodes dead-code elimination must keep (decided by the C++ core's Node::is_impure)."""
            return self._is_impure()

    @compatibility(is_backward_compatible=False)
    def normalized_arguments(self, root, arg_types=None, kwarg_types=None,
                             normalize_to_only_use_kwargs=False):
        from torch.fx.operator_schemas import normalize_function, normalize_module
        if not _torch_compat.FX_API_2:  # torch.fx 1.13 drops normalize_to_only_use_kwargs
            if self.op == 'call_function':
                assert callable(self.target)
                return normalize_function(self.target, self.args, self.kwargs, arg_types, kwarg_types)
            elif self.op == 'call_module':
                assert isinstance(self.target, str)
                return normalize_module(root, self.target, self.args, self.kwargs)
            return None
        if self.op == 'call_function':
            if not callable(self.target):
                raise AssertionError(f'Expected callable target, got {type(self.target)}')
            return normalize_function(self.target, self.args, self.kwargs, arg_types, kwarg_types,
                                      normalize_to_only_use_kwargs=normalize_to_only_use_kwargs)
        elif self.op == 'call_module':
            if not isinstance(self.target, str):
                raise AssertionError(f'Expected str target for call_module, got {type(self.target)}')
            return normalize_module(root, self.target, self.args, self.kwargs,
                                    normalize_to_only_use_kwargs=normalize_to_only_use_kwargs)
        return None

    if _torch_compat.FX_API_2:
        @compatibility(is_backward_compatible=True)
        def replace_all_uses_with(self, replace_with: 'Node', delete_user_cb: Optional[Callable[['Node'], bool]] = None,
                                  *, propagate_meta: bool = False) -> List['Node']:
            """Replace every use of this node by ``replace_with`` (users for which ``delete_user_cb``
            is true, all when it is None); ``propagate_meta`` first copies this node's meta entries
            onto ``replace_with``, whose meta must be empty."""
            if propagate_meta:
                if len(replace_with.meta) != 0:
                    raise AssertionError('Called node.replace_all_uses_with(replace_with, propagate_meta=True), '
                                         'but replace_with already has .meta keys')
                for k, v in self.meta.items():
                    replace_with.meta[k] = v
            if delete_user_cb is None:
                changed = self._replace_all_uses_with_plain(replace_with)  # None: hooks, a non-node, ...
                if changed is not None:
                    return changed
            m = self.graph._owning_module
            hooks = None if m is None else getattr(m, '_replace_hooks', None)
            if hooks or not isinstance(replace_with, _C.NodeBase) or replace_with is self:
                # Per user, as torch.fx 2.x: the filter, then the replace hooks (Note [GraphModule node
                # hooks] in graph.py), then the rewiring. A replacement that still uses this node
                # (itself, or a container holding it) is accepted there: each chosen user re-registers
                # its inputs (1.13, and the core's loop, assert that no user is left).
                result = []
                for user in [*self.users]:
                    if delete_user_cb is not None and not delete_user_cb(user):
                        continue
                    result.append(user)
                    if hooks:
                        for f in hooks:
                            f(old=self, new=replace_with.name, user=user)
                    if not user._erased:  # a callback may have erased it
                        _C.NodeBase.replace_input_with(user, self, replace_with)
                return result
            if delete_user_cb is None:
                return self._replace_all_uses_with(replace_with)
            return self._replace_all_uses_with(replace_with, delete_user_cb)

        @compatibility(is_backward_compatible=True)
        def format_node(self, placeholder_names: Optional[List[str]] = None,
                        maybe_return_typename: Optional[List[str]] = None, *,
                        include_tensor_metadata: bool = False) -> Optional[str]:
            """This node's line of ``str(graph)`` (None for a placeholder when collecting
            ``placeholder_names``). ``include_tensor_metadata`` (torch.fx 2.x): a call or module
            node whose meta holds a (strided) tensor under "val", "tensor_meta" or "example_value"
            is annotated with its dtype, shape, stride and device instead of its type."""
            text = _C.NodeBase.format_node(self, placeholder_names, maybe_return_typename)
            if not include_tensor_metadata or self.op in ('placeholder', 'get_attr', 'output'):
                return text
            meta = self.meta
            val = meta.get('val', meta.get('tensor_meta', meta.get('example_value', None)))
            if not isinstance(val, torch.Tensor) or val.layout in (torch.sparse_csc, torch.sparse_csr):
                return text
            shape = '[' + ', '.join(str(d) for d in val.shape) + ']'
            stride = '[' + ', '.join(str(d) for d in val.stride()) + ']'
            annotation = (f'Tensor "{_torch_compat.FX_DTYPE_ABBRS[val.dtype]}{shape}{stride}'
                          f'{_torch_compat.fx_device_annotation(val.device)}"')
            # as torch.fx writes it: the annotation replaces the type, with no space before [num_users=
            head = f'%{self.name} : '
            return head + annotation + text[text.index('[num_users=', len(head)):]

        @compatibility(is_backward_compatible=True)
        def replace_input_with(self, old_input: 'Node', new_input: 'Node') -> None:
            """Replace every use of ``old_input`` among this node's arguments by ``new_input``
            (the owning module's replace hooks see it first, Note [GraphModule node hooks])."""
            m = self.graph._owning_module
            if m is not None and getattr(m, '_replace_hooks', None):
                for f in m._replace_hooks:
                    f(old=old_input, new=new_input.name, user=self)
            _C.NodeBase.replace_input_with(self, old_input, new_input)

        @compatibility(is_backward_compatible=True)
        def insert_arg(self, idx: int, arg: 'Argument') -> None:
            """Insert ``arg`` into ``self.args`` before index ``idx`` (0 <= idx <= len(args))."""
            if not (0 <= idx <= len(self.args)):
                raise AssertionError(f'insert_args index must be between 0 and len(self.args), got {idx}')
            self.args = self.args[:idx] + (arg,) + self.args[idx:]

        # Nodes order by their position in the graph (torch.fx 2.x's _NodeBase compares _sort_key).
        def __lt__(self, other):
            if not isinstance(other, _C.NodeBase):
                return NotImplemented
            return self._sort_key < other._sort_key

        def __gt__(self, other):
            if not isinstance(other, _C.NodeBase):
                return NotImplemented
            return self._sort_key > other._sort_key

        def __le__(self, other):
            if not isinstance(other, _C.NodeBase):
                return NotImplemented
            return self._sort_key <= other._sort_key

        def __ge__(self, other):
            if not isinstance(other, _C.NodeBase):
                return NotImplemented
            return self._sort_key >= other._sort_key
    else:
        @compatibility(is_backward_compatible=True)
        def replace_all_uses_with(self, replace_with: 'Node',
                                  delete_user_cb: Callable[['Node'], bool] = lambda user: True) -> List['Node']:
            """Replace every use of this node by ``replace_with`` (users for which ``delete_user_cb`` is true)."""
            if delete_user_cb is _EVERY_USER:
                changed = self._replace_all_uses_with_plain(replace_with)  # None: a non-node, itself
                return self._replace_all_uses_with(replace_with) if changed is None else changed
            return self._replace_all_uses_with(replace_with, delete_user_cb)

    def __reduce__(self):
        # torch.fx pickles a lone node with its whole graph (through
        # node.graph); so does fxcpp: the graph, and the node's position in it.
        if self._erased:
            raise RuntimeError(f"cannot pickle Node '{self.name}': it was erased from its graph")
        for i, n in enumerate(self.graph.nodes):
            if n is self:
                return (_node_at, (self.graph, i))
        raise RuntimeError(f"cannot pickle Node '{self.name}': it is not in its graph's node list")


# replace_all_uses_with's default (1.13: a lambda), recognized to skip calling it per user.
_EVERY_USER = (Node.replace_all_uses_with.__defaults__ or (None,))[0]


def _node_at(graph, index):
    """The node at ``index`` of an unpickled graph (a pickled lone Node)."""
    for i, n in enumerate(graph.nodes):
        if i == index:
            return n
    raise ValueError(f"corrupt pickled Node: its graph has no node {index}")


@compatibility(is_backward_compatible=True)
def map_arg(a: Argument, fn: Callable[[Node], Argument]) -> Argument:
    """Call ``fn`` on every Node inside ``a`` (looking into tuples, lists, dicts and slices); return the rebuilt value."""
    assert callable(fn), "torch.fx.map_arg(a, fn): fn must be a callable"
    return map_aggregate(a, lambda x: fn(x) if isinstance(x, Node) else x)


@compatibility(is_backward_compatible=True)
def map_aggregate(a: Argument, fn: Callable[[Argument], Argument]) -> Argument:
    """Apply fn to each leaf of an argument tree, rebuilding its containers.

    Lists become ``immutable_list``, dicts ``immutable_dict`` (keys untouched),
    NamedTuples are rebuilt as their own type, other tuples as plain tuples.
    """
    if isinstance(a, tuple):
        items = [map_aggregate(item, fn) for item in a]
        return type(a)(*items) if hasattr(a, '_fields') else tuple(items)
    if isinstance(a, list):
        return immutable_list([map_aggregate(item, fn) for item in a])
    if isinstance(a, dict):
        return immutable_dict([(key, map_aggregate(value, fn)) for key, value in a.items()])
    if isinstance(a, slice):
        return slice(*(map_aggregate(part, fn) for part in (a.start, a.stop, a.step)))
    return fn(a)


def _python_signatures(cls, ref):
    """Shows each public C method of `cls` that torch.fx's class `ref` writes in Python with
    `self` positional-or-keyword, as torch.fx shows it (Note [Method signatures] in
    src/bindings/signed_method.cpp); the calls themselves go straight to the C methods."""
    for name in dir(ref):
        method = getattr(cls, name, None)
        if name.startswith('_') or not isinstance(method, types.MethodDescriptorType) or \
                not inspect.isfunction(inspect.getattr_static(ref, name, None)):
            continue
        sig = inspect.signature(method)
        params = list(sig.parameters.values())
        params[0] = params[0].replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD)
        setattr(cls, name, _C.SignedMethod(method, sig.replace(parameters=params)))


_python_signatures(Node, torch.fx.Node)

# torch.fx.node's __all__ on the installed torch (has_side_effect from 2.x on).
__all__ = [n for n in getattr(torch.fx.node, '__all__', ('Node', 'map_arg', 'map_aggregate')) if n in globals()]
