"""The graph explorer (issue 22): one self-contained HTML page per graph,
folded by module, with shapes on the edges, details, search, and a
before/after diff. Layouts and the diff's matching run in the C++ core.

    page = fxcpp.explore(gm)          # GraphModule, Graph or ExportedProgram
    page.save("graph.html")            # or display it in Jupyter
    fxcpp.explore_diff(before, after).save("diff.html")

Not part of torch.fx's surface, so it lives in its own package beside the
torch.fx mirror (python/fxcpp/explorer), not under fxcpp.passes.
"""
import html
import json
import os
from typing import Any, Dict, List, Optional, Sequence

from .._spec import is_file, pt2_shapes, resolve
from ._model import GraphData

__all__ = ["Explorer", "explore", "explore_diff", "load"]

_HERE = os.path.dirname(os.path.abspath(__file__))

#: Nodes above which explore() refuses (the page would be too large to open).
MAX_NODES = 400_000


def _asset(name: str) -> str:
    with open(os.path.join(_HERE, name), encoding="utf-8") as f:
        return f.read()


def _embed_json(data: Dict[str, Any]) -> str:
    """JSON safe inside a <script> element: no '<', '>' or '&' survives
    (each becomes a \\u escape inside its string), so no text from the graph
    can close the element or start markup."""
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _page(data: Dict[str, Any]) -> str:
    out = _asset("template.html")
    # Replace the data last: its text never passes through another replace.
    out = out.replace("/*CSS*/", _asset("explorer.css")).replace("/*JS*/", _asset("explorer.js"))
    return out.replace("/*DATA*/", _embed_json(data))


class Explorer:
    """An explorer page for one graph (or a diff of two). `html` is the whole
    self-contained page; `save(path)` writes it; in Jupyter the object shows
    itself (an iframe whose srcdoc is the page, so its script runs)."""

    def __init__(self, data: GraphData, name: str, diff: Optional[Dict[str, Any]] = None):
        self.data = data
        self.name = name
        self.diff = diff
        self._html: Optional[str] = None

    @property
    def html(self) -> str:
        if self._html is None:
            self._html = _page(self.data.to_json(self.name, self.diff))
        return self._html

    @property
    def summary(self) -> Optional[Dict[str, int]]:
        """The diff's counts (added, removed, changed, ...), or None."""
        return None if self.diff is None else dict(self.diff["summary"])

    def save(self, path: str) -> str:
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.html)
        return path

    def svg(self, expand: int = 0) -> str:
        """The same drawing as an SVG picture (no browser): the top-level groups,
        or `expand` levels of groups opened."""
        from ._svg import to_svg
        return to_svg(self.data, self.name, self.diff, expand)

    def png(self, path: str, expand: int = 0, scale: float = 1.0) -> str:
        """Writes the same drawing as svg(expand) to `path` as a PNG, painted
        with Pillow (no browser, no SVG renderer), `scale` times the SVG's
        size (a drawing over _png.MAX_PIXELS is scaled down to fit)."""
        from ._png import to_png
        from ._svg import scene
        return to_png(scene(self.data, self.diff, expand), path, scale)

    def show(self) -> None:
        """Displays the page in Jupyter (IPython.display); elsewhere raises
        RuntimeError saying to save() it and open the file."""
        try:
            from IPython.display import HTML, display
        except ImportError:
            raise RuntimeError("Explorer.show() needs IPython (Jupyter); outside it, save(path) and open the file "
                               "in a browser") from None
        display(HTML(self._repr_html_()))

    def _repr_html_(self) -> str:
        return ('<iframe style="width:100%;height:640px;border:1px solid #ccc" sandbox="allow-scripts" '
                f'srcdoc="{html.escape(self.html, quote=True)}"></iframe>')

    def __repr__(self) -> str:
        return f"<fxcpp Explorer {self.name!r}: {len(self.data.nodes)} nodes, {len(self.data.groups)} groups>"


def _name_of(obj, default: str) -> str:
    for o in (obj, getattr(obj, "owning_module", None)):
        if o is not None and hasattr(o, "named_modules"):
            return type(o).__name__
    return default


def load(spec, input_shape=None, *, trusted: bool = False, concrete_args: Optional[Dict[str, Any]] = None,
         leaf_modules: Sequence[str] = ()):
    """The graph a spec names, resolved as the command line's ``fxcpp show``
    resolves it (fxcpp._spec.resolve, the one resolver of both):

    * a ``.fxpt`` or ``.pt2`` file (a str or os.PathLike), read by fxcpp's own
      reader as ``fxcpp.aten.load(path, runtime='python', trusted=trusted)``
      reads it: no pickle, nothing from the file runs while it is read (a
      ``.pt2`` is never opened with ``torch.export.load``, which unpickles;
      docs/untrusted_files.md), and the GraphModule has the Python runtime's
      protections should it be run. ``trusted=True`` lifts the operator policy
      for a file you made yourself. A ``.pt2`` value's serialized shape is kept
      as ``node.meta['fxcpp_shape']``;
    * ``MODULE:CALLABLE``, imported and traced by fxcpp (``concrete_args`` and
      ``leaf_modules`` as the command line's --concrete-args and
      --leaf-module), with ShapeProp-like shapes when ``input_shape`` (a tuple,
      or text such as ``'1,3,224,224'``) is given.

    A spec that cannot be read or traced raises ValueError (fxcpp._spec.SpecError)
    saying why, with a hint in its ``hint`` attribute."""
    return _load(spec, input_shape, trusted, concrete_args, leaf_modules, "python")


def _load(spec, input_shape=None, trusted: bool = False, concrete_args=None, leaf_modules=(), runtime="show"):
    """load(); runtime='show' reads a file only to draw it (explore, explore_diff), never to run it."""
    path = os.fsdecode(os.fspath(spec))
    if is_file(path):
        gm = resolve(path, trusted=trusted, opt_in="trusted=True", runtime=runtime)
        pt2_shapes(gm)
        return gm
    return resolve(path, input_shape=input_shape, concrete_args=concrete_args, leaf_modules=leaf_modules,
                   opt_in="trusted=True")


def _check_size(obj) -> None:
    graph = getattr(obj, "graph", obj)
    graph = getattr(getattr(obj, "graph_module", None), "graph", graph)
    try:
        n = len(graph.nodes)
    except TypeError:
        n = sum(1 for _ in graph.nodes)
    if n > MAX_NODES:
        raise ValueError(f"fxcpp.explore: the graph has {n} nodes, more than the explorer draws ({MAX_NODES}); "
                         "explore a submodule, or split the graph (fxcpp.passes.split_module)")


def explore(obj, name: Optional[str] = None, max_children: Optional[int] = None, *,
            trusted: bool = False) -> Explorer:
    """An Explorer page for a GraphModule, a Graph (fxcpp or torch.fx), an
    ExportedProgram, or a spec load() reads (a .fxpt or .pt2 file, read by
    fxcpp's reader only to be drawn: nothing from it runs; MODULE:CALLABLE).
    ``trusted`` is load()'s, for a file you made yourself. Nodes are grouped by module;
    each group's layout comes from the C++ core."""
    if isinstance(obj, (str, os.PathLike)):
        spec = os.fspath(obj)
        obj = _load(spec, trusted=trusted)
        name = name or os.path.basename(spec)
    _check_size(obj)
    data = GraphData(obj, **({"max_children": max_children} if max_children else {}))
    data.collect()
    data.layout()
    return Explorer(data, name or _name_of(obj, "graph"))


def explore_diff(before, after, name: Optional[str] = None, *, trusted: bool = False) -> Explorer:
    """One drawing of `after` with the nodes of `before` it lost: nodes
    matched by name and structure (the C++ core's graph_diff), added,
    removed and changed nodes marked, groups containing changes flagged.
    Either side may be a spec load() reads (``trusted`` is load()'s)."""
    from fxcpp import _C
    before = _load(before, trusted=trusted) if isinstance(before, (str, os.PathLike)) else before
    after = _load(after, trusted=trusted) if isinstance(after, (str, os.PathLike)) else after
    _check_size(before)
    _check_size(after)
    b = GraphData(before)
    a = GraphData(after)
    b.collect()
    a.collect()

    def side(d: GraphData):
        return [(d.nodes[i].name, d.node_kind(i), d.node_detail(i), list(d.inputs_all[i])) for i in range(len(d.nodes))]

    for d in (a, b):
        d.inputs_all = [[d.index[id(x)] for x in nd.all_input_nodes if id(x) in d.index] for nd in d.nodes]
    b2a, a2b, changed, counts = _C._graph_diff(side(b), side(a))
    u = a.union_with(b, b2a)
    na = len(a.nodes)
    status: List[int] = []
    for i in range(len(u.nodes)):
        if i >= na:
            status.append(2)
        elif a2b[i] is None:
            status.append(1)
        else:
            status.append(3 if changed[i] else 0)
    why: List[str] = [""] * len(u.nodes)
    for i in range(na):
        if status[i] == 3:
            why[i] = _why_changed(b, a2b[i], a, i, b2a)
    u.layout()
    gchanges = [0] * len(u.groups)
    for i, s in enumerate(status):
        if s:
            g = u.node_group[i]
            while g >= 0:
                gchanges[g] += 1
                g = u.groups[g].parent
    summary = {"added": counts["added"], "removed": counts["removed"], "changed": counts["changed"],
               "matched_by_name": counts["matched_by_name"], "matched_by_structure": counts["matched_by_structure"]}
    diff = {"status": status, "summary": summary, "gchanges": gchanges, "why": why}
    return Explorer(u, name or f"{_name_of(before, 'before')} \u2192 {_name_of(after, 'after')}", diff)


def _why_changed(b: GraphData, u: int, a: GraphData, v: int, b2a) -> str:
    """What differs between before-node u and after-node v, in words."""
    from ._model import _template
    out = []
    if b.node_kind(u) != a.node_kind(v):
        out.append(f"was {b.node_kind(u)}")
    if _template(b.args[u]) != _template(a.args[v]) or _template(b.kwargs[u]) != _template(a.kwargs[v]):
        out.append("constant arguments differ")
    if a.nodes[v].op in ("call_module", "get_attr") and b.node_detail(u) != a.node_detail(v) and \
            not out:
        out.append("module configuration or parameters differ")
    ins_b = [b2a[j] for j in b.inputs_all[u]]
    ins_a = a.inputs_all[v]
    if any(x is not None and (k >= len(ins_a) or ins_a[k] != x) for k, x in enumerate(ins_b)):
        out.append("reads other nodes")
    return "; ".join(out) or "changed"
