"""fxcpp.passes.infra.partitioner: ``CapabilityBasedPartitioner`` (mirrors
torch.fx.passes.infra.partitioner: 1.13's proposals on torch 1.13, 2.x's on torch 2.x).

``Partition`` is torch.fx's class, and ``CapabilityBasedPartitioner`` subclasses torch.fx's, so
both pass ``isinstance`` checks against torch.fx. ``propose_partitions`` calls
``operator_support.is_node_supported(dict(named_modules), node)`` once per node, in graph order
on 1.13 and in reverse graph order on 2.x, as torch.fx does, and hands the answers to the C++
core (``fxcpp::propose_partitions``, ``src/passes/partition.cpp``), which proposes the same
partitions as the installed torch.fx -- same members, same ``id``s, same order, the same getitem
re-assignment and single-node filtering.

On 1.13 (``PartitionerAlgorithm::Torch113``) it does so without torch.fx's per-node ancestor
sets (quadratic in time and memory: about 3 GB for a 1e4-node chain). One exception: when two
groups of a node's users depend on each other both ways, torch.fx's choice of which to keep
follows set iteration order (memory addresses: it changes from run to run); fxcpp always drops
the later group in ``node.users`` order, one of torch.fx's possible answers (Note [Which user
groups are dropped] in ``src/passes/partition.cpp``).

On 2.x (``PartitionerAlgorithm::Torch2``, Note [propose_partitions on torch.fx 2.x]) the core
follows 2.x's merging of every partition pair without a cycle, its ids and order, its iterated
getitem re-assignment and 2.x's options (``non_compute_ops``, ``allowed_single_node_partition_ops``,
``skip_horizontal_fusion``), without 2.x's per-node downstream sets; each partition's ``nodes``
is a dict in torch.fx 2.x's order with its node orders as values. Where torch.fx 2.x's getitem
re-assignment would loop forever (a getitem of two tuple producers in different partitions)
fxcpp raises RuntimeError. The partitioner offers 2.x's lazily built ``dependency_viewer``
instead of ``dependency_map``.

``fuse_partitions`` calls fxcpp's ``fuse_by_partitions``, so the fused submodules (``fused_<i>``)
of an fxcpp module are fxcpp GraphModules.

Differences: the partitioner does not build torch.fx's ``dependency_map`` / ``dependency_viewer``
when it is created; reading it builds it then (torch.fx's value). ``is_node_supported``
receives a fresh copy of one ``dict(graph_module.named_modules())`` taken when proposing starts
(torch.fx walks the modules again for every node). A torch.fx GraphModule is partitioned by
torch.fx's code, and so is a graph that is not in topological order, and on 2.x one with a
call_function target that is not callable or unhashable ``non_compute_ops`` (with the support
answers already collected, so ``is_node_supported`` is still called once per node).

On 1.13 a ``Partition`` holds a ``set`` of nodes, so the order in which a partition's nodes are
handed to ``fuse_by_partitions`` (and thus the order of independent nodes in a fused submodule)
follows set iteration order, in both libraries.
"""
import logging
from collections import defaultdict
from typing import Dict, List, Optional, Sequence, Set

import torch.fx
from torch.fx.node import _get_qualified_name
from torch.fx.passes.infra import partitioner as _torch_partitioner
from torch.fx.passes.infra.partitioner import Partition, logger  # noqa: F401  (re-exported)
from torch.fx.passes.operator_support import OperatorSupportBase

from ... import _C, _torch_compat
from ..utils.fuser_utils import fuse_by_partitions

__all__ = ['Partition', 'CapabilityBasedPartitioner']

# fxcpp::PartitionOpKind of a call_function target, by torch.fx's qualified name.
_COMPUTE, _VIEW, _GETITEM, _UNNAMED = 0, 1, 2, 3
_KIND_OF_NAME = {'torch.ops.aten.view': _VIEW, '_operator.getitem': _GETITEM}


def _target_kind(target, cache) -> int:
    try:
        return cache[target]
    except KeyError:
        pass
    except TypeError:  # unhashable target
        cache = None
    try:
        kind = _KIND_OF_NAME.get(_get_qualified_name(target), _COMPUTE)
    except Exception:  # torch.fx raises when (and only if) it asks: see _propose
        kind = _UNNAMED
    if cache is not None:
        cache[target] = kind
    return kind


class _Replay(OperatorSupportBase):
    """is_node_supported answers already given, handed back in the same order."""

    def __init__(self, answers) -> None:
        self._answers = iter(answers)

    def is_node_supported(self, submodules, node) -> bool:
        return bool(next(self._answers))


class CapabilityBasedPartitioner(_torch_partitioner.CapabilityBasedPartitioner):
    """Groups the nodes ``operator_support`` accepts into partitions without cyclic dependencies
    and fuses each into a submodule (see torch.fx's class)."""

    if _torch_compat.PARTITIONER_2X:
        def __init__(self, graph_module, operator_support, allows_single_node_partition: bool = False,
                     non_compute_ops: Optional[Sequence[str]] = None,
                     allowed_single_node_partition_ops: Optional[Sequence[str]] = None,
                     skip_horizontal_fusion: bool = False) -> None:
            self.graph_module = graph_module
            self.operator_support = operator_support
            self.allows_single_node_partition = allows_single_node_partition
            self.non_compute_ops = non_compute_ops if non_compute_ops is not None else []
            self.allowed_single_node_partition_ops = (
                allowed_single_node_partition_ops if allowed_single_node_partition_ops is not None else [])
            self.skip_horizontal_fusion = skip_horizontal_fusion

        @property
        def dependency_viewer(self):
            """torch.fx 2.x's map from each node to all nodes downstream of it (its
            ``_DependencyViewer``), built on first use (quadratic)."""
            viewer = self.__dict__.get('_dependency_viewer')
            if viewer is None:
                viewer = self.__dict__['_dependency_viewer'] = _torch_partitioner._DependencyViewer(self.graph_module)
            return viewer

        @dependency_viewer.setter
        def dependency_viewer(self, value) -> None:
            self.__dict__['_dependency_viewer'] = value
    else:
        def __init__(self, graph_module, operator_support, allows_single_node_partition: bool = False) -> None:
            self.graph_module = graph_module
            self.operator_support = operator_support
            self.allows_single_node_partition = allows_single_node_partition

        @property
        def dependency_map(self) -> Dict[torch.fx.Node, Set[torch.fx.Node]]:
            """torch.fx's map from each node to all its ancestors, built on first use (quadratic)."""
            dep = self.__dict__.get('_dependency_map')
            if dep is None:
                dep = defaultdict(set)
                for node in self.graph_module.graph.nodes:
                    for input_node in node.all_input_nodes:
                        dep[node].add(input_node)
                        dep[node].update(dep[input_node])
                self.__dict__['_dependency_map'] = dep
            return dep

        @dependency_map.setter
        def dependency_map(self, value) -> None:
            self.__dict__['_dependency_map'] = value

    def propose_partitions(self) -> List[Partition]:
        gm = self.graph_module
        if isinstance(gm, torch.fx.GraphModule):
            return super().propose_partitions()
        torch2 = _torch_compat.PARTITIONER_2X
        nodes = list(gm.graph.nodes)
        if not torch2:
            logging.debug("Collecting supported nodes...")  # the root logger, as torch.fx 1.13
        modules = dict(gm.named_modules())
        is_node_supported = self.operator_support.is_node_supported
        n = len(nodes)
        supported = bytearray(n)
        # torch.fx 1.13 asks in graph order, 2.x in reverse graph order
        asked = range(n - 1, -1, -1) if torch2 else range(n)
        for i in asked:
            supported[i] = 1 if is_node_supported(modules.copy(), nodes[i]) else 0
        kinds = bytearray(n)
        non_compute = allowed_single = b''
        options_2x = None
        if torch2:
            options_2x = self._options_2x(nodes, kinds)
            if options_2x is not None:
                non_compute, allowed_single = options_2x
        else:
            self._kinds(nodes, kinds)
        if torch2 and options_2x is None:
            parts = None  # options the core cannot follow: torch.fx's code decides
        elif torch2:
            parts, unnamed = _C._propose_partitions(gm.graph, supported, kinds, bool(self.allows_single_node_partition),
                                                    True, bool(self.skip_horizontal_fusion), non_compute,
                                                    allowed_single)
        else:
            parts, unnamed = _C._propose_partitions(gm.graph, supported, kinds, bool(self.allows_single_node_partition))
        if parts is None:  # not in topological order: torch.fx's code, replaying the answers
            kwargs = {}
            if torch2:
                kwargs = dict(non_compute_ops=self.non_compute_ops,
                              allowed_single_node_partition_ops=self.allowed_single_node_partition_ops,
                              skip_horizontal_fusion=self.skip_horizontal_fusion)
            replay = _torch_partitioner.CapabilityBasedPartitioner(
                gm, _Replay(supported[i] for i in asked), self.allows_single_node_partition, **kwargs)
            return replay.propose_partitions()
        logger.debug("Proposing partitions...")
        logger.debug("Reassigning getitem nodes to its producer node's partition...")
        if unnamed is None and not self.allows_single_node_partition:
            logger.debug("Filtering out single node partitions...")
        if unnamed is not None:
            _get_qualified_name(unnamed.target)  # raises torch.fx's error
            raise RuntimeError(f"no qualified name for the target of {unnamed}")  # pragma: no cover
        if torch2:
            partitions = [Partition(id=pid, nodes=members, node_orders=orders) for pid, members, orders in parts]
        else:
            partitions = [Partition(id=pid, nodes=members) for pid, members in parts]
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("Partitions proposed:")
            for partition in partitions:
                if torch2:
                    logger.debug("partition #%s: %s", partition.id, [node.name for node in partition.nodes])
                else:
                    logger.debug(f"partition #{partition.id}", [node.name for node in partition.nodes])
        return partitions

    @staticmethod
    def _kinds(nodes, kinds, names=None) -> None:
        """Fills kinds (fxcpp::PartitionOpKind per call_function node) and, when given, names
        (the qualified name of each call_function node's target, or None)."""
        cache: dict = {}
        for i, node in enumerate(nodes):
            if node.op != 'call_function':
                continue
            target = node.target
            try:
                kinds[i] = cache[target]
            except (KeyError, TypeError):
                kinds[i] = _target_kind(target, cache)
            if names is not None and kinds[i] != _UNNAMED:
                names[i] = _get_qualified_name(target)

    def _options_2x(self, nodes, kinds):
        """torch.fx 2.x's non_compute_ops and allowed_single_node_partition_ops as one flag per
        node for the core (empty when unused), or None when the core cannot follow torch.fx (a
        target that is not callable, or a non_compute_ops entry that is not hashable)."""
        names = [None] * len(nodes) if (self.non_compute_ops or self.allowed_single_node_partition_ops) else None
        self._kinds(nodes, kinds, names)
        if any(node.op == 'call_function' and not callable(node.target) for node in nodes):
            return None  # torch.fx raises its AssertionError where it counts
        if names is None:
            return b'', b''
        try:
            extra = set(self.non_compute_ops)
        except TypeError:
            return None
        allowed = self.allowed_single_node_partition_ops
        non_compute = bytes(1 if name is not None and name in extra else 0 for name in names)
        allowed_single = bytes(1 if name is not None and name in allowed else 0 for name in names)
        return non_compute, allowed_single

    if _torch_compat.PARTITIONER_2X:
        def fuse_partitions(self, partitions: List[Partition], prefix: str = "fused_"):
            logger.debug("Fusing partitions...")
            return fuse_by_partitions(self.graph_module, [list(p.nodes) for p in partitions], prefix=prefix)
    else:
        def fuse_partitions(self, partitions: List[Partition]):
            logger.debug("Fusing partitions...")
            return fuse_by_partitions(self.graph_module, [list(p.nodes) for p in partitions])
