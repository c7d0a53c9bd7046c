"""fxcpp.passes.utils (mirrors torch.fx.passes.utils): matcher_utils."""
