"""fxcpp.passes.infra.partitioner: ``CapabilityBasedPartitioner`` (mirrors
torch.fx.passes.infra.partitioner 1.13).

``Partition`` is torch.fx's. ``CapabilityBasedPartitioner`` subclasses torch.fx's: proposing
partitions (dependency map, reverse-topological assignment, getitem re-assignment, single-node
filtering) is torch.fx's own code and works on fxcpp graphs as it is; ``fuse_partitions`` calls
fxcpp's ``fuse_by_partitions`` so that the fused submodules (``fused_<i>``) of an fxcpp module
are fxcpp GraphModules (torch.fx's would insert ``torch.fx.GraphModule``s).

Like torch.fx's, a ``Partition`` holds a ``set`` of nodes, so the order in which a partition's
nodes are handed to ``fuse_by_partitions`` (and thus the order of independent nodes in a fused
submodule) follows set iteration order, in both libraries.
"""
from typing import List

from torch.fx.passes.infra import partitioner as _torch_partitioner
from torch.fx.passes.infra.partitioner import Partition, logger  # noqa: F401  (re-exported)

from ..utils.fuser_utils import fuse_by_partitions

__all__ = ['Partition', 'CapabilityBasedPartitioner']


class CapabilityBasedPartitioner(_torch_partitioner.CapabilityBasedPartitioner):
    """Groups the nodes ``operator_support`` accepts into partitions without cyclic dependencies
    and fuses each into a submodule (see torch.fx's class)."""

    def fuse_partitions(self, partitions: List[Partition]):
        logger.debug("Fusing partitions...")
        return fuse_by_partitions(self.graph_module, [list(p.nodes) for p in partitions])
