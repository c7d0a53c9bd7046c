"""Spec-driven pytree flattening used by code generated for pytree-flattened
inputs: ``torch.fx._pytree`` itself, re-exported.

Generated code imports ``torch.fx._pytree as fx_pytree`` exactly as torch.fx's
does, so fxcpp and torch.fx share one registry: a ``register_pytree_flatten_spec``
made through either module is honoured by both.
"""
from ._reexport import reexport

reexport(globals(), 'torch.fx._pytree')
