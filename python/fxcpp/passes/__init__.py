"""fxcpp.passes: analysis and transformation passes (mirrors torch.fx.passes).

Provided: ``shape_prop`` (ShapeProp, TensorMetadata) and
``utils.matcher_utils`` (SubgraphMatcher, InternalMatch, backed by the C++
matcher).
"""
from . import shape_prop
