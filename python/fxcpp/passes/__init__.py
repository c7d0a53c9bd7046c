"""fxcpp.passes: analysis and transformation passes (mirrors torch.fx.passes).

Each module has torch.fx's module path and public names, works on fxcpp GraphModules/Graphs and
returns fxcpp objects where torch.fx returns torch.fx ones:

* ``shape_prop`` (ShapeProp, TensorMetadata) and ``split_module`` (its graph work in C++);
* ``graph_drawer`` (FxGraphDrawer: torch.fx's DOT output, fxcpp submodules drawn too; needs pydot);
* ``operator_support`` (OperatorSupport, OpSupports, create_op_support, chain; reads both
  libraries' TensorMetadata), ``tools_common`` (get_node_target, legalize_graph, ...),
  ``param_fetch`` (lift_lowering_attrs_to_nodes), ``graph_manipulation``
  (get_size_of_all_nodes, replace_target_nodes_with, ...), ``split_utils`` (split_by_tags);
* ``pass_manager`` (the legacy PassManager) and ``infra``: ``pass_base`` (PassBase, PassResult),
  ``pass_manager`` (PassManager, recompiling fxcpp modules after each pass) and ``partitioner``
  (CapabilityBasedPartitioner, fusing into fxcpp submodules);
* ``utils``: ``matcher_utils`` (SubgraphMatcher, InternalMatch, backed by the C++ matcher),
  ``common`` (lift_subgraph_as_module, HolderModule, compare_graphs), ``fuser_utils``
  (fuse_by_partitions, fuse_as_graphmodule, validate_partition without recursion);
* ``dialect.common.cse_pass`` (torch.fx's CSEPass returning fxcpp GraphModules);
* ``graph_transform_observer`` (torch 2.x: GraphTransformObserver, recording provenance on the
  nodes of either library).

Where torch.fx's code works on fxcpp objects as it is, the module re-exports it (the same
function or class); otherwise it subclasses torch.fx's class or adapts its function, or has
its own implementation with torch.fx's results. Each module's docstring says which.
"""
from . import shape_prop
