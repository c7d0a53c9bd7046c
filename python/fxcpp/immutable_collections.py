"""Immutable list/dict containers used for ``Node.args`` / ``Node.kwargs``.

Behaviour mirrors ``torch.fx.immutable_collections`` (1.13): the mutating
methods raise ``NotImplementedError`` with the same message, the containers
pickle/copy to themselves and are registered as pytree nodes.
"""
from typing import Any, Dict, List, Tuple

from torch.utils._pytree import Context

from ._compatibility import compatibility
from ._torch_compat import register_pytree_node as _register_pytree_node

__all__ = ["immutable_list", "immutable_dict"]

_help_mutation = """\
If you are attempting to modify the kwargs or args of a torch.fx.Node object,
instead create a new copy of it and assign the copy to the node:
    new_args = ... # copy and mutate args
    node.args = new_args
"""


def _no_mutation(self, *args, **kwargs):
    raise NotImplementedError(
        f"'{type(self).__name__}' object does not support mutation. {_help_mutation}")


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

    def __reduce__(self):
        return (immutable_list, (tuple(self),))


class immutable_dict(dict):
    __delitem__ = _no_mutation
    __setitem__ = _no_mutation
    clear = _no_mutation
    pop = _no_mutation
    popitem = _no_mutation
    update = _no_mutation

    def __reduce__(self):
        return (immutable_dict, (iter(self.items()),))


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
