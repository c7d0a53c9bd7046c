"""Backward-compatibility markers (mirrors ``torch.fx._compatibility``).

``compatibility(is_backward_compatible=...)`` returns a decorator that appends a
note (or warning) to the decorated object's docstring and records the object in
module level registries.
"""
from typing import Any, Callable, Dict, TypeVar  # noqa: F401 -- Callable, TypeVar: torch.fx 2.x's names
import textwrap

from . import _torch_compat

__all__ = ['compatibility']

# Registries keyed by the decorated object (dicts used as ordered sets).
# The misspelled name matches torch.fx, which tooling may refer to.
_BACK_COMPAT_OBJECTS: Dict[Any, None] = {}
_MARKED_WITH_COMATIBLITY: Dict[Any, None] = {}
# torch.fx 2.x spells the registry correctly; both names are the one dict.
_MARKED_WITH_COMPATIBILITY = _MARKED_WITH_COMATIBLITY

# torch.fx 2.x puts a blank line between the docstring and the note; 1.13 does not.
_NOTE_PREFIX = "\n" if _torch_compat.FX_API_2 else ""

_BC_NOTE = _NOTE_PREFIX + """
.. note::
    Backwards-compatibility for this API is guaranteed.
"""

_NOT_BC_WARNING = _NOTE_PREFIX + """
.. warning::
    This API is experimental and is *NOT* backward-compatible.
"""


def _amend_doc(obj: Any, suffix: str) -> None:
    doc = getattr(obj, '__doc__', None) or ''
    obj.__doc__ = textwrap.dedent(doc) + suffix


def compatibility(is_backward_compatible: bool):
    if is_backward_compatible:
        def mark_back_compat(fn):
            _amend_doc(fn, _BC_NOTE)
            _BACK_COMPAT_OBJECTS.setdefault(fn)
            _MARKED_WITH_COMATIBLITY.setdefault(fn)
            return fn
        return mark_back_compat

    def mark_not_back_compat(fn):
        _amend_doc(fn, _NOT_BC_WARNING)
        _MARKED_WITH_COMATIBLITY.setdefault(fn)
        return fn
    return mark_not_back_compat
