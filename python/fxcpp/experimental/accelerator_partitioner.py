"""fxcpp.experimental.accelerator_partitioner: the (legacy) accelerator Partitioner (mirrors
torch.fx.experimental.accelerator_partitioner).

``Partitioner().partition_graph(gm, root, PartitionerConfig(devices, mode, ...))`` assigns the
nodes of an fxcpp (or torch.fx) GraphModule to partitions and devices by size, cost, KL or
sparse-NN rules, and returns the DAG of partitions and the module split into one submodule per
partition (an fxcpp GraphModule, made by fxcpp's ``split_module``). The partitions hold the
caller's nodes. On torch 2.x this is torch.fx's module run with a ``map_arg`` that sees fxcpp's
nodes, fxcpp's ``partitioner_utils`` and fxcpp's ``split_module``/``get_size_of_all_nodes``
(Note [torch.fx code with a map_arg for both libraries], ``_rebound.py``); on torch 1.13, whose
``map_arg`` sees fxcpp nodes, only the last two are fxcpp's.
"""
import torch.fx
import torch.fx.experimental.accelerator_partitioner as _torch_accelerator_partitioner
import torch.fx.experimental.partitioner_utils as _torch_partitioner_utils
import torch.fx.passes.graph_manipulation as _torch_graph_manipulation
import torch.fx.passes.split_module as _torch_split_module

from . import _rebound, partitioner_utils
from .._reexport import public_names
from ..passes.graph_manipulation import get_size_of_all_nodes as _get_size_of_all_nodes
from ..passes.split_module import split_module as _split_module

__all__ = public_names(_torch_accelerator_partitioner)


# (also on 1.13, where torch.fx's map_arg sees fxcpp nodes: the split module is fxcpp's there too)
_replace = {id(_torch_split_module.split_module): _split_module,
            id(_torch_graph_manipulation.get_size_of_all_nodes): _get_size_of_all_nodes}
if _rebound.NEEDED:
    _replace[id(torch.fx.node.map_arg)] = _rebound.map_any_arg
for _n in partitioner_utils.__all__:
    _replace[id(getattr(_torch_partitioner_utils, _n))] = getattr(partitioner_utils, _n)
_impl = _rebound.instance(_torch_accelerator_partitioner.__name__, __name__, _replace)

globals().update({_n: getattr(_impl, _n) for _n in __all__})
