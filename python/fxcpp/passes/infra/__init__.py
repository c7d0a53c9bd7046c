"""fxcpp.passes.infra (mirrors torch.fx.passes.infra): ``pass_base`` (PassBase, PassResult),
``pass_manager`` (PassManager) and ``partitioner`` (CapabilityBasedPartitioner)."""
from . import pass_manager  # noqa: F401
