"""Spec-driven pytree flattening used by code generated for pytree-flattened
inputs: ``torch.fx._pytree`` itself, re-exported.

Generated code imports ``torch.fx._pytree as fx_pytree`` exactly as torch.fx's
does, so fxcpp and torch.fx share one registry: a ``register_pytree_flatten_spec``
made through either module is honoured by both.
"""
import torch.fx._pytree as _impl

globals().update({k: v for k, v in vars(_impl).items() if not k.startswith('__')})
del _impl
