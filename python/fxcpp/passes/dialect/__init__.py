"""fxcpp.passes.dialect: fxcpp-returning versions of torch.fx.passes.dialect (``common.cse_pass``)."""
