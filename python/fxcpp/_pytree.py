"""Spec-driven pytree flattening used by code generated for pytree-flattened
inputs (mirrors ``torch.fx._pytree``).

``tree_flatten_spec(pytree, spec)`` flattens ``pytree`` following an existing
``TreeSpec`` (rather than discovering the structure), so that generated code
can accept the original nested arguments.
"""
from collections import namedtuple
from typing import Any, Callable, Dict, List, NamedTuple, Tuple, Type

from torch.utils._pytree import LeafSpec, PyTree, TreeSpec

FlattenFuncSpec = Callable[[PyTree, TreeSpec], List]

SUPPORTED_NODES: Dict[Type[Any], Any] = {}


def register_pytree_flatten_spec(typ: Any, flatten_fn_spec: FlattenFuncSpec) -> None:
    SUPPORTED_NODES[typ] = flatten_fn_spec


def _lookup_flatten_fn_spec(typ):
    fn = SUPPORTED_NODES.get(typ)
    if fn is None:
        # Honour registrations made with torch.fx._pytree by other libraries.
        try:
            import torch.fx._pytree as _torch_fx_pytree
        except ImportError:  # pragma: no cover
            return None
        fn = _torch_fx_pytree.SUPPORTED_NODES.get(typ)
    return fn


def tree_flatten_spec(pytree: PyTree, spec: TreeSpec) -> List[Any]:
    if isinstance(spec, LeafSpec):
        return [pytree]
    flatten_fn_spec = _lookup_flatten_fn_spec(spec.type)
    if flatten_fn_spec is None:
        raise RuntimeError(
            f"{type(pytree)} does not have a flatten_fn_spec associated with it. Please register one with"
            "torch.fx._pytree.register_pytree_flatten_spec.  If you have serialized your model, make"
            "sure that any custom pytrees have been registered before loading it.")
    child_pytrees = flatten_fn_spec(pytree, spec)
    result: List[Any] = []
    for child, child_spec in zip(child_pytrees, spec.children_specs):
        result += tree_flatten_spec(child, child_spec)
    return result


def _dict_flatten_spec(d: Dict[Any, Any], spec: TreeSpec) -> List[Any]:
    return [d[k] for k in spec.context]


def _list_flatten_spec(d: List[Any], spec: TreeSpec) -> List[Any]:
    return [d[i] for i in range(len(spec.children_specs))]


def _tuple_flatten_spec(d: Tuple[Any], spec: TreeSpec) -> List[Any]:
    return [d[i] for i in range(len(spec.children_specs))]


def _namedtuple_flatten_spec(d: NamedTuple, spec: TreeSpec) -> List[Any]:
    return [d[i] for i in range(len(spec.children_specs))]


register_pytree_flatten_spec(dict, _dict_flatten_spec)
register_pytree_flatten_spec(list, _list_flatten_spec)
register_pytree_flatten_spec(tuple, _tuple_flatten_spec)
register_pytree_flatten_spec(namedtuple, _tuple_flatten_spec)
