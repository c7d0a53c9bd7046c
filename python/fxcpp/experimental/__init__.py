"""fxcpp.experimental: fxcpp versions of the torch.fx.experimental modules fxcpp users reach for.

Provided: ``rewriter`` (RewritingTracer on fxcpp's Tracer), ``const_fold``
(split_const_subgraphs / FoldedGraphModule over fxcpp GraphModules), ``optimization``
(fuse, remove_dropout, extract_subgraph), ``normalize`` (NormalizeArgs, NormalizeOperators:
fxcpp Transformers), ``schema_type_annotation`` (AnnotateTypesWithSchema, an fxcpp Transformer)
and ``merge_matmul`` (merge_matmul, traced with fxcpp), and the gradual type checker
(``graph_gradual_typechecker``, ``refinement_types``, ``unify_refinements``; with
``fxcpp.tensor_type``): torch.fx's own modules, re-exported, since they work on fxcpp graphs as
they are (fxcpp.Node and fxcpp.Graph subclass torch.fx's), and ``proxy_tensor.make_fx`` (torch's
ATen-level recording, returning fxcpp GraphModules), and ``accelerator_partitioner`` with
``partitioner_utils`` (torch.fx's, run with a ``map_arg`` that sees fxcpp nodes: ``_rebound.py``).
The rest of ``torch.fx.experimental``
(symbolic_shapes, ...) is used from torch directly.
"""
