"""fxcpp.passes.utils (mirrors torch.fx.passes.utils): ``matcher_utils`` (SubgraphMatcher),
``common`` (HolderModule, lift_subgraph_as_module, compare_graphs) and ``fuser_utils``
(fuse_by_partitions)."""
from .common import HolderModule, compare_graphs, lift_subgraph_as_module  # noqa: F401
