"""fxcpp.passes: analysis and transformation passes (mirrors torch.fx.passes).

Provided: ``shape_prop`` (ShapeProp, TensorMetadata) and
``utils.matcher_utils`` (SubgraphMatcher, InternalMatch, backed by the C++
matcher) and ``dialect.common.cse_pass`` (torch.fx's CSEPass returning fxcpp
GraphModules) and ``split_module`` (torch.fx's split_module, its graph work
in C++).
"""
from . import shape_prop
