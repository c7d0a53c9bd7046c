"""Conversion between fxcpp and torch.fx objects (Graph, GraphModule).

``from_torch_fx(obj)`` turns a ``torch.fx.Graph``/``GraphModule`` into the
fxcpp equivalent; ``to_torch_fx(obj)`` goes the other way.  Objects already of
the wanted library are returned unchanged.

What is preserved (see "Interop with torch.fx" in docs/design.md):

* node order, names (exactly, even names the namespace would not generate,
  such as ``input`` or ``x_01``), opcodes, targets, ``type`` annotations.
  The new graph's namespace holds the node names, as after torch.fx's
  ``deepcopy``: names only erased nodes had may be handed out again;
* ``args``/``kwargs`` structure: tuples (named tuples keep their class),
  lists, dicts, slices; the source library's ``immutable_list`` /
  ``immutable_dict`` become the target library's;
* ``node.meta`` *by reference*: the converted node holds the same dict
  object (``stack_trace`` and ``tensor_meta`` included), so a pass writing
  ``meta`` on one side is seen on the other.  ``copy.copy`` it if the two
  graphs must diverge.  (torch.fx's own ``node_copy`` shallow-copies ``meta``;
  a conversion is a change of representation, not a copy.)
* the graph's codegen: the default ``CodeGen`` and the pytree codegen
  (``_PyTreeCodeGen``, from ``concrete_args``/pytree inputs) map to the target
  library's; a custom ``CodeGen`` subclass cannot be carried across
  (``TypeError``);
* for a GraphModule: the class name, ``training``, the submodules,
  parameters and buffers (tensor constants included) *by reference* -- the
  very same ``nn.Module``/``Tensor`` objects, as ``GraphModule(root, graph)``
  itself does -- other instance attributes, and ``meta``.  The generated
  ``code`` is the same text.

Cost: linear in the number of nodes plus the size of their arguments.

Both libraries' objects also mix directly: ``fxcpp.GraphModule(root, g)``
converts a torch.fx ``g``, and ``fxcpp.Graph``/``fxcpp.Node`` subclass
``torch.fx.Graph``/``torch.fx.Node`` so that torch.fx code accepts them
(``torch.fx.GraphModule(root, fxcpp_graph)``, ``split_module``, ``map_arg``).
"""
from typing import Any, Callable, Dict

import torch
import torch.fx

# interop sits above graph_module: graph_module imports from_torch_fx lazily.
from . import graph as fg, immutable_collections as fic
from ._symbolic_trace import Tracer
from .graph_module import GraphModule
from .node import Node

__all__ = ["from_torch_fx", "to_torch_fx"]


class _Lib:
    """The classes of one library (torch.fx or fxcpp) the converter needs."""

    def __init__(self, name, graph, node, graph_module, tracer, codegen, pytree_codegen, pytree_info,
                 immutable_list, immutable_dict, lazy_graph_module=None):
        self.name = name
        self.Graph = graph
        self.Node = node
        self.GraphModule = graph_module
        self.Tracer = tracer
        self.CodeGen = codegen
        self.PyTreeCodeGen = pytree_codegen
        self.PyTreeInfo = pytree_info
        self.immutable_list = immutable_list
        self.immutable_dict = immutable_dict
        #: the library's _LazyGraphModule (torch 2.x), None where it has none
        self.LazyGraphModule = lazy_graph_module
        self._gm_internal = None

    def gm_internal_keys(self):
        """``__dict__`` keys every GraphModule of this library has (not user state)."""
        if self._gm_internal is None:
            g = self.Graph()
            g.output(None)
            self._gm_internal = frozenset(self.GraphModule(torch.nn.Module(), g).__dict__)
        return self._gm_internal


_libs: Dict[str, _Lib] = {}


def _torch_lib() -> _Lib:
    lib = _libs.get('torch')
    if lib is None:
        import torch.fx.graph as tg
        import torch.fx.immutable_collections as tic
        try:
            from torch.fx._lazy_graph_module import _LazyGraphModule as lazy
        except ImportError:  # torch 1.13
            lazy = None
        lib = _libs['torch'] = _Lib('torch.fx', torch.fx.Graph, torch.fx.Node, torch.fx.GraphModule,
                                    torch.fx.Tracer, tg.CodeGen, tg._PyTreeCodeGen, tg._PyTreeInfo,
                                    tic.immutable_list, tic.immutable_dict, lazy)
    return lib


def _fxcpp_lib() -> _Lib:
    lib = _libs.get('fxcpp')
    if lib is None:
        from ._lazy_graph_module import _LazyGraphModule
        lib = _libs['fxcpp'] = _Lib('fxcpp', fg.Graph, Node, GraphModule, Tracer, fg.CodeGen,
                                    fg._PyTreeCodeGen, fg._PyTreeInfo,
                                    fic.immutable_list, fic.immutable_dict,
                                    _LazyGraphModule)
    return lib


# ---------------------------------------------------------------------------
# arguments
# ---------------------------------------------------------------------------

def _arg_mapper(src: _Lib, dst: _Lib, env: Dict[Any, Any]) -> Callable[[Any], Any]:
    """A function mapping a source argument structure to the target library:
    source nodes through ``env``, containers rebuilt, everything else as is."""
    src_node, src_ilist, src_idict = src.Node, src.immutable_list, src.immutable_dict
    dst_ilist, dst_idict = dst.immutable_list, dst.immutable_dict

    def m(a):
        t = type(a)
        if t is src_node:
            return env[a]
        if t is tuple:
            return tuple([m(x) for x in a])
        if t is src_ilist:
            return dst_ilist([m(x) for x in a])
        if t is src_idict:
            return dst_idict([(k, m(v)) for k, v in a.items()])
        if t is list:
            return [m(x) for x in a]
        if t is dict:
            return {k: m(v) for k, v in a.items()}
        if t is slice:
            return slice(m(a.start), m(a.stop), m(a.step))
        if isinstance(a, src_node):  # a Node subclass
            return env[a]
        if isinstance(a, tuple):
            if hasattr(a, '_fields'):  # named tuple: keep its class
                return t(*[m(x) for x in a])
            return tuple([m(x) for x in a])
        if isinstance(a, src_ilist):
            return dst_ilist([m(x) for x in a])
        if isinstance(a, src_idict):
            return dst_idict([(k, m(v)) for k, v in a.items()])
        if isinstance(a, list):
            return [m(x) for x in a]
        if isinstance(a, dict):
            return {k: m(v) for k, v in a.items()}
        return a
    return m


# ---------------------------------------------------------------------------
# graphs
# ---------------------------------------------------------------------------

def _convert_codegen(codegen, src: _Lib, dst: _Lib):
    t = type(codegen)
    if t is src.CodeGen or t is dst.CodeGen:
        out = dst.CodeGen()
    elif t is src.PyTreeCodeGen or t is dst.PyTreeCodeGen:
        info = codegen.pytree_info
        out = dst.PyTreeCodeGen(dst.PyTreeInfo(info.orig_args, info.in_spec, info.out_spec))
    else:
        raise TypeError(f"cannot convert a graph with the custom codegen {t.__module__}.{t.__qualname__} "
                        f"to {dst.name}: only CodeGen and _PyTreeCodeGen are supported")
    transformer = getattr(codegen, '_body_transformer', None)
    if transformer is not None:
        out._body_transformer = transformer
    return out


def _convert_tracer_cls(cls, src: _Lib, dst: _Lib):
    if cls is None or cls is src.Tracer:
        return dst.Tracer if cls is not None else None
    if isinstance(cls, type) and issubclass(cls, dst.Tracer):
        return cls
    return None  # a tracer of the other library cannot re-trace for this one


def _convert_graph(g, src: _Lib, dst: _Lib, env=None):
    out = dst.Graph(tracer_cls=_convert_tracer_cls(g._tracer_cls, src, dst),
                    tracer_extras=g._tracer_extras)
    out._codegen = _convert_codegen(g._codegen, src, dst)
    env = {} if env is None else env
    m = _arg_mapper(src, dst, env)
    create = out.create_node
    for n in g.nodes:
        name = n.name
        new = create(n.op, n.target, m(n.args), m(n.kwargs), name, n.type)
        if new.name != name:
            # a name create_name never hands out (builtin, keyword, illegal
            # characters, zero-padded counter: set through ``node.name``); it
            # cannot collide with a later generated name either
            new.name = name
        new.meta = n.meta
        env[n] = new
    return out


def _convert_gm(gm, src: _Lib, dst: _Lib):
    graph = _convert_graph(gm.graph, src, dst)
    cls_name = type(gm).__name__
    # A lazy module (torch 2.x: make_fx's, Dynamo's) stays lazy: its code is generated on first
    # use on the other side too.
    lazy = (src.LazyGraphModule is not None and dst.LazyGraphModule is not None
            and isinstance(gm, src.LazyGraphModule))
    # Share the module tree itself: every top-level submodule / parameter /
    # buffer object is the source's (as GraphModule(root, graph) does).
    out = (dst.LazyGraphModule if lazy else dst.GraphModule)(gm, graph, class_name=cls_name)
    for table in ('_modules', '_parameters', '_buffers'):
        d = getattr(out, table)
        d.clear()
        d.update(getattr(gm, table))
    out._non_persistent_buffers_set = set(gm._non_persistent_buffers_set)
    out.training = gm.training
    internal = src.gm_internal_keys() | dst.gm_internal_keys()
    for k, v in gm.__dict__.items():
        if k not in internal:
            out.__dict__[k] = v
    out.meta = gm.meta
    return out


def _kind(obj):
    # fxcpp first: fxcpp.Graph subclasses torch.fx.Graph
    f = _fxcpp_lib()
    if isinstance(obj, f.GraphModule):
        return 'fxcpp', 'gm'
    if isinstance(obj, f.Graph):
        return 'fxcpp', 'graph'
    if isinstance(obj, torch.fx.GraphModule):
        return 'torch', 'gm'
    if isinstance(obj, torch.fx.Graph):
        return 'torch', 'graph'
    raise TypeError(f"expected a Graph or GraphModule of torch.fx or fxcpp, got {type(obj).__name__}")


def from_torch_fx(obj):
    """The fxcpp ``Graph``/``GraphModule`` equivalent to a torch.fx one (an fxcpp
    object is returned unchanged). See the module docstring for what is kept."""
    lib, what = _kind(obj)
    if lib == 'fxcpp':
        return obj
    convert = _convert_gm if what == 'gm' else _convert_graph
    return convert(obj, _torch_lib(), _fxcpp_lib())


def _check_strings_for_torch_fx(graph) -> None:
    """Note [Strings in generated code] (src/core/codegen.cpp), for torch.fx's
    code generator, which writes a placeholder target, attribute names and
    keyword argument names into the code verbatim: refuse (ValueError naming
    the node) any that would not stay what it is there, so that converting a
    graph (from a file, say) to torch.fx never makes code that runs its text."""
    import keyword

    def plain(s):
        return isinstance(s, str) and s.isidentifier() and not keyword.iskeyword(s)

    def quotable(s):  # torch.fx writes getattr(base, "s") with no escaping
        return plain(s) or (s.isprintable() and '"' not in s and '\\' not in s)

    for n in graph.nodes:
        what = None
        if n.op == 'placeholder':
            t = n.target
            name = t[2:] if t.startswith('**') else t[1:] if t.startswith('*') else t
            if not plain(name):
                what = f'placeholder target {t!r}'
        elif n.op in ('get_attr', 'call_module', 'call_method') and isinstance(n.target, str):
            if not all(quotable(c) for c in n.target.split('.')):
                what = f'target {n.target!r}'
        if what is None:
            bad = [k for k in n.kwargs if not plain(k)]
            if bad:
                what = f'keyword argument name {bad[0]!r}'
        if what is not None:
            raise ValueError(f"to_torch_fx: cannot convert node '{n.name}': torch.fx would write its {what} "
                             'into generated code as it is, and it is not a plain Python name')


def to_torch_fx(obj):
    """The ``torch.fx`` ``Graph``/``GraphModule`` equivalent to an fxcpp one (a
    torch.fx object is returned unchanged). See the module docstring. Raises
    ValueError for a graph whose names torch.fx's code generator would write
    into code unchecked (Note [Strings in generated code])."""
    lib, what = _kind(obj)
    if lib == 'torch':
        return obj
    _check_strings_for_torch_fx(obj.graph if what == 'gm' else obj)
    convert = _convert_gm if what == 'gm' else _convert_graph
    return convert(obj, _fxcpp_lib(), _torch_lib())
