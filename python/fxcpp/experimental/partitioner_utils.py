"""fxcpp.experimental.partitioner_utils: partitions, sizes and latencies of the accelerator
partitioner (mirrors torch.fx.experimental.partitioner_utils).

On torch 2.x this is torch.fx's module run with a ``map_arg`` that sees fxcpp's nodes (Note
[torch.fx code with a map_arg for both libraries], ``_rebound.py``): ``Partition`` and the
functions that follow a node's inputs (``get_extra_size_of``, ``get_latency_of_one_partition``,
``get_comm_latency_between``, ...) are that instance's, and work on nodes of fxcpp and torch.fx
alike; the value types (``Device``, ``NodeLatency``, ``PartitionLatency``, ``PartitionMode``,
``PartitionerConfig``) are torch.fx's own classes, so either module's can be handed to either
partitioner. On torch 1.13 the names are torch.fx's.
"""
import torch.fx
import torch.fx.experimental.partitioner_utils as _torch_partitioner_utils

from . import _rebound
from .._reexport import public_names

_VALUE_TYPES = ('Device', 'NodeLatency', 'PartitionLatency', 'PartitionMode', 'PartitionerConfig')

__all__ = public_names(_torch_partitioner_utils)

if _rebound.NEEDED:
    _impl = _rebound.instance(_torch_partitioner_utils.__name__, __name__,
                              {id(torch.fx.node.map_arg): _rebound.map_any_arg})
    for _name in _VALUE_TYPES:
        if hasattr(_torch_partitioner_utils, _name):
            setattr(_impl, _name, getattr(_torch_partitioner_utils, _name))
else:
    _impl = _torch_partitioner_utils

globals().update({_n: getattr(_impl, _n) for _n in __all__})
