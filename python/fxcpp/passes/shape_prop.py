"""fxcpp.passes.shape_prop: ShapeProp (mirrors torch.fx.passes.shape_prop 1.13).

``ShapeProp(gm).propagate(*args)`` runs ``gm`` through the (C++-looped)
Interpreter and stores, on every node whose value contains tensors,
``node.meta['tensor_meta']`` (a :class:`TensorMetadata`, or the value's
structure with each tensor replaced by one) and ``node.meta['type']``.
"""
import traceback
from typing import Any, Dict

import torch

from .. import _torch_compat
from .._compatibility import compatibility
from ..interpreter import Interpreter
from ..node import Node, map_aggregate

__all__ = ['TensorMetadata', 'ShapeProp']


# torch.fx's own class (the same seven fields), so that torch.fx tools reading
# ``meta['tensor_meta']`` (FxGraphDrawer, operator_support, quantization) accept
# what fxcpp's ShapeProp records, and pickles move between the libraries.
from torch.fx.passes.shape_prop import TensorMetadata  # noqa: E402


# torch.fx probes the memory formats in an order of its own (a set literal's on 1.13, a
# tuple's on 2.x); the first one the tensor is contiguous in wins. Probe in that same order.
_MEMORY_FORMATS = _torch_compat.SHAPE_PROP_MEMORY_FORMATS
_PER_TENSOR = (torch.per_tensor_affine, torch.per_tensor_symmetric)
_PER_CHANNEL = (torch.per_channel_affine, torch.per_channel_affine_float_qparams, torch.per_channel_symmetric)


def _extract_tensor_metadata(result: torch.Tensor) -> TensorMetadata:
    """A TensorMetadata describing ``result``."""
    memory_format = None
    for query_format in _MEMORY_FORMATS:
        if result.is_contiguous(memory_format=query_format):
            memory_format = query_format
            break

    is_quantized = result.is_quantized
    qparams: Dict[str, Any] = {}
    if is_quantized:
        qscheme = result.qscheme()
        qparams["qscheme"] = qscheme
        if qscheme in _PER_TENSOR:
            qparams["scale"] = result.q_scale()
            qparams["zero_point"] = result.q_zero_point()
        elif qscheme in _PER_CHANNEL:
            qparams["scale"] = result.q_per_channel_scales().tolist()
            qparams["zero_point"] = result.q_per_channel_zero_points().tolist()
            qparams["axis"] = result.q_per_channel_axis()

    return TensorMetadata(result.shape, result.dtype, result.requires_grad, result.stride(),
                          memory_format, is_quantized, qparams)


@compatibility(is_backward_compatible=True)
class ShapeProp(Interpreter):
    """Interpreter that records, for every node, the shape, dtype etc. of the
    value it produces (``node.meta['tensor_meta']``) and its type
    (``node.meta['type']``). Use ``ShapeProp(gm).propagate(*inputs)``.

    Args:
         module (GraphModule): the module to run.
    """

    def run_node(self, n: Node) -> Any:
        try:
            result = super().run_node(n)
        except Exception:
            traceback.print_exc()
            raise RuntimeError(f"ShapeProp error for: node={n.format_node()} with meta={n.meta}")

        meta = n.meta
        if type(result) is torch.Tensor or isinstance(result, torch.Tensor):
            meta['tensor_meta'] = _extract_tensor_metadata(result)
        elif isinstance(result, (tuple, list, dict, slice)):
            found_tensor = False

            def extract_tensor_meta(obj):
                nonlocal found_tensor
                if isinstance(obj, torch.Tensor):
                    found_tensor = True
                    return _extract_tensor_metadata(obj)
                return obj

            tensor_meta = map_aggregate(result, extract_tensor_meta)
            if found_tensor:
                meta['tensor_meta'] = tensor_meta
        meta['type'] = type(result)
        return result

    def propagate(self, *args):
        """Run the module on ``args``, recording shapes; returns its result."""
        return super().run(*args)
