"""Immutable list/dict containers used for ``Node.args`` / ``Node.kwargs``.

Behaviour mirrors the installed ``torch.fx.immutable_collections`` (Note [Immutable
containers on two torches]): the mutating methods raise torch.fx's error with the same
message, the containers pickle/copy to themselves and are registered as pytree nodes.
"""
from typing import Any, Dict, List, Tuple

from torch.utils._pytree import Context

from ._compatibility import compatibility
from . import _torch_compat
from ._torch_compat import register_pytree_node as _register_pytree_node

__all__ = ["immutable_list", "immutable_dict"]

# Note [Immutable containers on two torches]
# torch.fx 1.13 raises NotImplementedError from the mutating methods; 2.x raises TypeError,
# with a reworded hint, also blocks sort/reverse (list) and setdefault/|= (dict), makes the
# containers hashable (a tuple's / a frozenset's hash of the items) and gives the classes
# docstrings. fxcpp follows the installed torch.fx (_torch_compat.FX_API_2).
if _torch_compat.FX_API_2:
    _help_mutation = """\
If you are attempting to modify the kwargs or args of a torch.fx.Node object,
instead create a new copy of it and assign the copy to the node:

    new_args = ...  # copy and mutate args
    node.args = new_args"""
    _MutationError = TypeError
else:
    _help_mutation = """\
If you are attempting to modify the kwargs or args of a torch.fx.Node object,
instead create a new copy of it and assign the copy to the node:
    new_args = ... # copy and mutate args
    node.args = new_args
"""
    _MutationError = NotImplementedError


def _no_mutation(self, *args, **kwargs):
    raise _MutationError(f"'{type(self).__name__}' object does not support mutation. {_help_mutation}")


class immutable_list(list):
    __delitem__ = _no_mutation
    __iadd__ = _no_mutation
    __imul__ = _no_mutation
    __setitem__ = _no_mutation
    append = _no_mutation
    clear = _no_mutation
    extend = _no_mutation
    insert = _no_mutation
    pop = _no_mutation
    remove = _no_mutation
    if _torch_compat.FX_API_2:
        reverse = _no_mutation
        sort = _no_mutation

        def __hash__(self) -> int:
            return hash(tuple(self))

    def __reduce__(self):
        return (immutable_list, (tuple(self),))


class immutable_dict(dict):
    __delitem__ = _no_mutation
    __setitem__ = _no_mutation
    clear = _no_mutation
    pop = _no_mutation
    popitem = _no_mutation
    update = _no_mutation
    if _torch_compat.FX_API_2:
        __ior__ = _no_mutation
        setdefault = _no_mutation

        def __hash__(self) -> int:
            return hash(frozenset(self.items()))

    def __reduce__(self):
        return (immutable_dict, (iter(self.items()),))


if _torch_compat.FX_API_2:
    immutable_list.__doc__ = "An immutable version of :class:`list`."
    immutable_dict.__doc__ = "An immutable version of :class:`dict`."

compatibility(is_backward_compatible=True)(immutable_list)
compatibility(is_backward_compatible=True)(immutable_dict)


# pytree registration

def _immutable_dict_flatten(d: Dict[Any, Any]) -> Tuple[List[Any], Context]:
    return list(d.values()), list(d.keys())


def _immutable_dict_unflatten(values: List[Any], context: Context) -> Dict[Any, Any]:
    return immutable_dict(zip(context, values))


def _immutable_list_flatten(d: List[Any]) -> Tuple[List[Any], Context]:
    return d, None


def _immutable_list_unflatten(values: List[Any], context: Context) -> List[Any]:
    return immutable_list(values)


_register_pytree_node(immutable_dict, _immutable_dict_flatten, _immutable_dict_unflatten)
_register_pytree_node(immutable_list, _immutable_list_flatten, _immutable_list_unflatten)
