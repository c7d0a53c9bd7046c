"""Running a torch.fx 2.x analysis that annotates ``node.type`` on an fxcpp graph.

Note [Type annotations through a torch.fx copy]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
torch.fx 2.x's gradual type checker, refinement and unification read and write
``node.type`` and test ``isinstance(x, torch.fx.Node)`` in C helpers (``_fx_map_arg``);
fxcpp's nodes are no torch.fx Nodes there (docs/design.md, interop on torch 2.x). So on
2.x fxcpp's counterparts run torch.fx's own implementation on ``to_torch_fx`` of the
fxcpp module (names, targets, ``type`` and submodules kept), and after every call copy
each node's ``type`` back to the fxcpp node of the same name, also when the call raises,
so the fxcpp graph ends as torch.fx's would (a failed check leaves the types it had set).
Methods that take a node take the fxcpp node and hand torch.fx its copy. A torch.fx pass that
traces with a given Tracer class (optimize_for_inference) gets one that traces with fxcpp's and
returns the torch.fx copy of the graph (tracer_for_torch_fx). On 1.13,
fxcpp's nodes are torch.fx's by ``isinstance`` and the modules are re-exported as they are.
"""
import functools

from .. import _torch_compat

#: Whether fxcpp's counterparts must go through a torch.fx copy (torch.fx 2.x's C Node base).
NEEDED = _torch_compat.FX_NODE_HAS_C_BASE


def _is_fxcpp(obj):
    from ..graph import Graph
    from ..graph_module import GraphModule
    return isinstance(obj, (Graph, GraphModule))


class Mirror:
    """A torch.fx copy of an fxcpp GraphModule or Graph, and the way back for node types."""

    def __init__(self, ours):
        from ..interop import to_torch_fx
        self.ours = ours
        self.theirs = to_torch_fx(ours)
        ours_graph = getattr(ours, 'graph', ours)
        theirs_graph = getattr(self.theirs, 'graph', self.theirs)
        self._by_name = {n.name: n for n in theirs_graph.nodes}
        self._ours_graph = ours_graph

    def node(self, n):
        """torch.fx's copy of fxcpp node `n` (any other object is returned as it is)."""
        from ..node import Node
        return self._by_name.get(n.name, n) if isinstance(n, Node) else n

    def copy_types_back(self):
        by_name = self._by_name
        for n in self._ours_graph.nodes:
            theirs = by_name.get(n.name)
            if theirs is not None and n.type is not theirs.type:
                n.type = theirs.type


def on_copy(method):
    """Wraps a method of a subclass of a torch.fx analysis class whose instance has a
    ``_fxcpp_mirror`` (or None): node arguments are mapped to the copy, types copied back."""
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        mirror = self._fxcpp_mirror
        if mirror is None:
            return method(self, *args, **kwargs)
        try:
            return method(self, *(mirror.node(a) for a in args), **{k: mirror.node(v) for k, v in kwargs.items()})
        finally:
            mirror.copy_types_back()
    return run


def analysis_class(torch_cls, methods, traced_arg, module):
    """A subclass of torch.fx's analysis class `torch_cls` whose constructor takes fxcpp
    modules (argument number `traced_arg`) through a Mirror and whose `methods` copy types back;
    defined in fxcpp module `module`."""
    def __init__(self, *args, **kwargs):
        args = list(args)
        traced = args[traced_arg]
        self._fxcpp_mirror = Mirror(traced) if _is_fxcpp(traced) else None
        if self._fxcpp_mirror is not None:
            args[traced_arg] = self._fxcpp_mirror.theirs
        torch_cls.__init__(self, *args, **kwargs)

    body = {'__init__': __init__, '__doc__': torch_cls.__doc__, '__module__': module}
    for name in methods:
        body[name] = on_copy(getattr(torch_cls, name))
    cls = type(torch_cls.__name__, (torch_cls,), body)
    cls.__qualname__ = torch_cls.__qualname__
    return cls


def graph_function(fn, graph_args):
    """torch.fx function `fn` whose arguments `graph_args` (positions) may be fxcpp modules or
    graphs: each such argument goes through a Mirror, and types are copied back afterwards."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        args = list(args)
        mirrors = []
        for i in graph_args:
            if i < len(args) and _is_fxcpp(args[i]):
                mirrors.append(Mirror(args[i]))
                args[i] = mirrors[-1].theirs
        try:
            return fn(*args, **kwargs)
        finally:
            for m in mirrors:
                m.copy_types_back()
    return run


def tracer_for_torch_fx(tracer):
    """`tracer` (a Tracer class) for a torch.fx 2.x pass that traces with it and then edits the
    graph as torch.fx's: an fxcpp Tracer class becomes a torch.fx Tracer class whose trace()
    traces with it and returns the torch.fx copy of the graph (its root is the fxcpp tracer's).
    Any other class, and every class on 1.13, is returned as it is."""
    import torch.fx
    from .._symbolic_trace import Tracer
    if not NEEDED or not (isinstance(tracer, type) and issubclass(tracer, Tracer)):
        return tracer

    class ThroughFxcpp(torch.fx.Tracer):
        def trace(self, root, concrete_args=None):
            from ..interop import to_torch_fx
            ours = tracer()
            graph = ours.trace(root, concrete_args)
            self.root = ours.root
            return to_torch_fx(graph)
    ThroughFxcpp.__name__ = ThroughFxcpp.__qualname__ = tracer.__name__
    return ThroughFxcpp
