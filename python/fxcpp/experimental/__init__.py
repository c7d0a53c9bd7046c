"""fxcpp.experimental: fxcpp versions of the torch.fx.experimental modules fxcpp users reach for.

Provided: ``rewriter`` (RewritingTracer on fxcpp's Tracer), ``const_fold``
(split_const_subgraphs / FoldedGraphModule over fxcpp GraphModules), ``optimization``
(fuse, remove_dropout, extract_subgraph), ``normalize`` (NormalizeArgs, NormalizeOperators:
fxcpp Transformers), ``schema_type_annotation`` (AnnotateTypesWithSchema, an fxcpp Transformer)
and ``merge_matmul`` (merge_matmul, traced with fxcpp). The rest of ``torch.fx.experimental``
(proxy_tensor, the gradual type checker, ...) is used from torch directly; the gradual type
checker works on fxcpp graphs as they are (fxcpp.Node and fxcpp.Graph subclass torch.fx's).
"""
