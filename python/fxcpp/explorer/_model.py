"""The explorer's data: a graph's nodes grouped into a module tree, one layered
layout per group (from the C++ core, fxcpp._C._layout), and the JSON the page
embeds. See docs/design.md, "The graph explorer".

Nothing here runs a graph's code: targets and arguments are only turned into
text (str/repr of the objects already in the graph).
"""
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

#: Most direct children one group shows; larger groups are split into
#: consecutive chunks (nested as needed), so every fold level stays small
#: enough to draw and re-compose at once, whatever the graph's size.
MAX_CHILDREN = 120

NODE_H = 34
GROUP_H = 40
PORT_W, PORT_H = 12, 6
CHAR_W = 7.0  # px per character of the page's 12px monospace labels
MAX_LABEL = 34
MAX_TEXT = 2000  # longest repr kept for one argument list / stack trace

_SUBSCRIPT = re.compile(r"\[(\d+)\]|\[['\"]([^'\"]*)['\"]\]")


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "\u2026"


def _safe_str(f, v) -> str:
    try:
        return f(v)
    except Exception as e:  # noqa: BLE001 -- user objects' __repr__
        return f"<{type(v).__name__}: repr failed: {type(e).__name__}>"


def target_str(node) -> str:
    t = node.target
    if isinstance(t, str):
        return t
    mod = getattr(t, "__module__", None)
    name = getattr(t, "__qualname__", None) or getattr(t, "__name__", None)
    if name is None:
        return _safe_str(str, t)
    if mod in (None, "builtins", "_operator", "operator"):
        return ("operator." if mod in ("_operator", "operator") else "") + name
    if mod.startswith("torch._ops"):
        return _safe_str(str, t)
    return f"{mod}.{name}"


def _short_target(node) -> str:
    s = target_str(node)
    if node.op in ("call_function", "call_method"):
        s = s.rsplit(".", 1)[-1] if not s.startswith("aten.") else s[5:]
    return s


def _normalize_path(p: str) -> str:
    """nn_module_stack paths in torch's spellings -> 'layer1.0.conv1'."""
    p = _SUBSCRIPT.sub(lambda m: "." + (m.group(1) if m.group(1) is not None else m.group(2)), str(p))
    for prefix in ("L.self.", "L__self__.", "self.", "L.self"):
        if p.startswith(prefix):
            p = p[len(prefix):]
    if p.startswith("L__self___"):
        p = p[len("L__self___"):].replace("_", ".")
    return p.strip(".")


def _value_meta(v) -> Tuple[str, str]:
    """(shape, dtype) text of a tensor_meta / val / fxcpp_shape value."""
    if v is None:
        return "", ""
    shape = getattr(v, "shape", None)
    dtype = getattr(v, "dtype", None)
    if shape is not None and (dtype is not None or not isinstance(v, (tuple, list))):
        try:
            dims = "[" + ", ".join(str(d) for d in shape) + "]"
        except TypeError:
            dims = str(shape)
        return dims, str(dtype).replace("torch.", "") if dtype is not None else ""
    if isinstance(v, (tuple, list)):
        if v and all(isinstance(d, int) for d in v):
            return "[" + ", ".join(map(str, v)) + "]", ""
        parts = [_value_meta(x) for x in v]
        if any(s for s, _ in parts):
            return "(" + ", ".join(s or "?" for s, _ in parts) + ")", ", ".join(sorted({d for _, d in parts if d}))
    if isinstance(v, (int, float, bool)):
        return "", type(v).__name__
    return "", ""


def node_meta(node) -> Tuple[str, str]:
    meta = getattr(node, "meta", None) or {}
    for key in ("tensor_meta", "val", "fxcpp_shape"):
        if key in meta:
            s, d = _value_meta(meta[key])
            if s or d:
                return s, d
    return "", ""


def _text_with_links(value, index: Dict[Any, int], budget: List[int]) -> List[Any]:
    """An argument structure as segments: str text, or an int (a node index)
    for each Node (a link in the page). Erased or foreign nodes are text."""
    out: List[Any] = []

    def emit(s: str) -> None:
        if budget[0] <= 0:
            return
        s = s[: budget[0]]
        budget[0] -= len(s)
        if out and isinstance(out[-1], str):
            out[-1] += s
        else:
            out.append(s)

    def walk(v) -> None:
        if budget[0] <= 0:
            return
        if hasattr(v, "op") and hasattr(v, "name") and hasattr(v, "users"):  # a Node
            i = index.get(id(v))
            if i is None:
                emit(f"%{v.name} (not in this graph)")
            else:
                out.append(i)
            return
        if isinstance(v, (list, tuple)):
            emit("[" if isinstance(v, list) else "(")
            for k, x in enumerate(v):
                if k:
                    emit(", ")
                walk(x)
            emit("]" if isinstance(v, list) else ("," if len(v) == 1 else "") + ")")
            return
        if isinstance(v, dict):
            emit("{")
            for k, (a, b) in enumerate(v.items()):
                if k:
                    emit(", ")
                emit(f"{a}: " if isinstance(a, str) else _safe_str(repr, a) + ": ")
                walk(b)
            emit("}")
            return
        emit(_clip(_safe_str(repr, v), 300))

    walk(value)
    if budget[0] <= 0:
        emit("\u2026")
        out.append("\u2026")
    return out


def _template(segs: List[Any]) -> str:
    """Argument text with node links as '%' (for the diff's detail)."""
    return "".join(s if isinstance(s, str) else "%" for s in segs)


def _plain_module():
    try:
        import torch
        return torch.nn.Module
    except ImportError:  # pragma: no cover
        return None


class _Group:
    __slots__ = ("gid", "path", "label", "type", "parent", "items", "first", "synthetic")

    def __init__(self, gid: int, path: str, label: str, parent: int, first: int, synthetic: bool = False):
        self.gid, self.path, self.label, self.parent = gid, path, label, parent
        self.items: List[int] = []  # refs: node i >= 0, group g as -(g + 1)
        self.type = ""
        self.first = first
        self.synthetic = synthetic


def _graph_and_root(obj):
    """(graph, root module or None, ExportedProgram signature or None)."""
    gm = None
    graph = obj
    sig = None
    if hasattr(obj, "graph_signature") and hasattr(obj, "graph_module"):  # ExportedProgram
        sig = obj.graph_signature
        gm = obj.graph_module
        graph = gm.graph
    elif hasattr(obj, "graph") and hasattr(obj, "named_modules"):  # a GraphModule
        gm, graph = obj, obj.graph
    elif hasattr(obj, "nodes") and hasattr(obj, "owning_module"):
        gm = obj.owning_module
    else:
        raise TypeError(f"fxcpp.explore: expected a GraphModule, Graph or ExportedProgram, got {type(obj).__name__}"
                        " (for a model spec or a file, use fxcpp.explorer.load)")
    return graph, gm, sig


def _signature_params(sig) -> Dict[str, str]:
    """ExportedProgram placeholder name -> parameter/buffer qualified name."""
    out: Dict[str, str] = {}
    for attr in ("inputs_to_parameters", "inputs_to_buffers", "inputs_to_lifted_tensor_constants"):
        try:
            out.update(dict(getattr(sig, attr, {}) or {}))
        except Exception:  # noqa: BLE001
            pass
    return out


class GraphData:
    """The explorer's model of one graph: nodes, the group tree, per-group
    layouts (computed by layout()), and to_json()."""

    def __init__(self, obj, max_children: int = MAX_CHILDREN):
        graph, gm, sig = _graph_and_root(obj)
        self.max_children = max(2, int(max_children))
        nodes = list(graph.nodes)
        self.nodes = nodes
        self.index: Dict[int, int] = {id(n): i for i, n in enumerate(nodes)}
        modules: Dict[str, Any] = {}
        if gm is not None:
            try:
                modules = dict(gm.named_modules())
            except Exception:  # noqa: BLE001
                modules = {}
        self.modules = modules
        params = _signature_params(sig) if sig is not None else {}
        n = len(nodes)
        # Per node: its group path (None: infer from neighbours).
        paths: List[Optional[str]] = [None] * n
        self.inputs: List[List[int]] = [[] for _ in range(n)]
        self.users: List[List[int]] = [[] for _ in range(n)]
        for i, node in enumerate(nodes):
            seen = set()
            for a in node.all_input_nodes:
                j = self.index.get(id(a))
                if j is not None and j not in seen:
                    seen.add(j)
                    self.inputs[i].append(j)
                    self.users[j].append(i)
        has_stack = False
        for i, node in enumerate(nodes):
            op = node.op
            meta = getattr(node, "meta", None) or {}
            stack = meta.get("nn_module_stack")
            if op == "call_module":
                paths[i] = str(node.target).rpartition(".")[0]
            elif op == "get_attr":
                paths[i] = str(node.target).rpartition(".")[0]
            elif op == "placeholder":
                q = params.get(node.name)
                paths[i] = q.rpartition(".")[0] if q else ""
            elif op == "output":
                paths[i] = ""
            elif stack:
                has_stack = True
                try:
                    last = list(stack.values())[-1]
                    paths[i] = _normalize_path(last[0] if isinstance(last, (tuple, list)) else last)
                except Exception:  # noqa: BLE001 -- odd metadata: infer instead
                    paths[i] = None
        if not has_stack:
            self._infer_paths(paths)
        for i in range(n):
            if paths[i] is None:
                paths[i] = ""
        self.paths = paths
        self._build_groups()

    # -- grouping -----------------------------------------------------------------

    def _infer_paths(self, paths: List[Optional[str]]) -> None:
        """Nodes without module information (no nn_module_stack: fxcpp's and
        torch.fx 1.13's tracers, lowered .fxpt graphs). An op reading
        parameters belongs to the module owning them (a lowered graph's
        aten.conv2d beside its get_attr weight); any other op to the module
        that called its latest producer (a residual add or a relu after a
        block's last batch norm joins that block; the flatten after avgpool
        stays at the top): the producer's group, or, for a producer that is a
        module's own op (a parameter reader), that module's parent; when
        another producer's module (not the top) encloses that one, the
        enclosing module (a block's add of its main path and its downsample
        branch)."""
        n = len(paths)
        known = [p is not None for p in paths]
        owned = [self.nodes[i].op == "call_module" for i in range(n)]
        for i in range(n):
            if known[i]:
                continue
            owners = sorted({paths[j] or "" for j in self.inputs[i] if self.nodes[j].op == "get_attr"})
            if owners:
                common = owners[0].split(".")
                for o in owners[1:]:
                    b = o.split(".")
                    k = 0
                    while k < len(common) and k < len(b) and common[k] == b[k]:
                        k += 1
                    common = common[:k]
                paths[i] = ".".join(common)
                owned[i] = bool(paths[i])
                continue
            prods = [j for j in self.inputs[i] if self.nodes[j].op not in ("get_attr", "placeholder")
                     and paths[j] is not None]
            if not prods:
                paths[i] = ""
                continue
            def scope(j):
                p = paths[j] or ""
                return p.rpartition(".")[0] if owned[j] and self.nodes[j].op != "call_module" else p

            latest = scope(max(prods))
            # A producer in an enclosing module (not the top) wins: the add of
            # a block's main path and its downsample branch is the block's.
            outer = [q for q in (scope(j) for j in prods) if q and latest.startswith(q + ".")]
            paths[i] = min(outer, key=len) if outer else latest

    def _build_groups(self) -> None:
        groups: List[_Group] = [_Group(0, "", "", -1, 0)]
        by_path: Dict[str, int] = {"": 0}
        node_group = [0] * len(self.nodes)

        def group_of(path: str, first: int) -> int:
            g = by_path.get(path)
            if g is not None:
                return g
            parent, _, atom = path.rpartition(".")
            pg = group_of(parent, first)
            g = len(groups)
            grp = _Group(g, path, atom, pg, first)
            m = self.modules.get(path)
            if m is not None and type(m) is not _plain_module():
                grp.type = type(m).__name__
            groups.append(grp)
            groups[pg].items.append(-(g + 1))
            by_path[path] = g
            return g

        for i in getattr(self, "order", None) or range(len(self.paths)):
            p = self.paths[i]
            g = group_of(p, i)
            node_group[i] = g
            groups[g].items.append(i)
        # Groups with one item are replaced by it (a module whose only node is
        # its weight, an exported conv's single op). An op that is a module's
        # only node stands for the module (exported relu / maxpool / avgpool).
        self.module_of: Dict[int, str] = {}
        for g in range(len(groups) - 1, 0, -1):
            grp = groups[g]
            if len(grp.items) == 1:
                only = grp.items[0]
                par = groups[grp.parent]
                par.items[par.items.index(-(g + 1))] = only
                if only < 0:
                    groups[-only - 1].parent = grp.parent
                else:
                    node_group[only] = grp.parent
                    if self.nodes[only].op in ("call_function", "call_method") and not grp.synthetic:
                        self.module_of[only] = grp.path
                grp.items = []
                grp.parent = -2  # dropped
        # Chunks for groups with too many items.
        for g in range(len(groups)):
            grp = groups[g]
            while len(grp.items) > self.max_children:
                k = self.max_children
                items = grp.items
                chunks = [items[s:s + k] for s in range(0, len(items), k)]
                new_items = []
                for c in chunks:
                    cg = len(groups)
                    first, last = self._first_node(groups, c[0]), self._last_node(groups, c[-1])
                    label = f"{self.nodes[first].name} \u2026 {self.nodes[last].name}"
                    chunk = _Group(cg, (grp.path + "." if grp.path else "") + f"[{first}:{last + 1}]", label,
                                   g, first, synthetic=True)
                    chunk.items = c
                    for r in c:
                        if r < 0:
                            groups[-r - 1].parent = cg
                        else:
                            node_group[r] = cg
                    groups.append(chunk)
                    new_items.append(-(cg + 1))
                grp.items = new_items
        # Renumber the surviving groups (root first, then depth-first order).
        order: List[int] = []
        stack = [0]
        while stack:
            g = stack.pop()
            order.append(g)
            stack.extend(-r - 1 for r in reversed(groups[g].items) if r < 0)
        new_id = {g: k for k, g in enumerate(order)}
        self.groups = [groups[g] for g in order]
        for k, grp in enumerate(self.groups):
            grp.gid = k
            grp.parent = new_id.get(grp.parent, -1)
            grp.items = [r if r >= 0 else -(new_id[-r - 1] + 1) for r in grp.items]
        self.node_group = [new_id[g] for g in node_group]
        # Per group: its chain of ancestors (root first), for edge routing.
        self.depth = [0] * len(self.groups)
        for grp in self.groups[1:]:
            self.depth[grp.gid] = self.depth[grp.parent] + 1

    def _first_node(self, groups, ref: int) -> int:
        while ref < 0:
            ref = groups[-ref - 1].items[0]
        return ref

    def _last_node(self, groups, ref: int) -> int:
        while ref < 0:
            ref = groups[-ref - 1].items[-1]
        return ref

    def chain(self, i: int) -> List[int]:
        """Groups containing node i, root first."""
        out = []
        g = self.node_group[i]
        while g >= 0:
            out.append(g)
            g = self.groups[g].parent
        out.reverse()
        return out

    def union_with(self, before: "GraphData", b2a: Sequence[Optional[int]]) -> "GraphData":
        """This graph plus the nodes of `before` that no node matches (b2a:
        per before-node, its index here or None), each in its old group and
        wired to the matched images of its old inputs. Both must be collect()ed."""
        u = GraphData.__new__(GraphData)
        u.max_children = self.max_children
        na = len(self.nodes)
        removed = [i for i in range(len(before.nodes)) if b2a[i] is None]
        bmap: Dict[int, int] = {i: j for i, j in enumerate(b2a) if j is not None}
        for k, i in enumerate(removed):
            bmap[i] = na + k
        u.nodes = self.nodes + [before.nodes[i] for i in removed]
        u.index = dict(self.index)
        for i, nd in enumerate(before.nodes):
            u.index.setdefault(id(nd), bmap[i])
        u.modules = dict(before.modules)
        u.modules.update(self.modules)
        u.paths = self.paths + [before.paths[i] for i in removed]
        u.inputs = [list(x) for x in self.inputs] + [[bmap[j] for j in before.inputs[i]] for i in removed]
        # A removed node keeps its old users too, so it is drawn where it was
        # (between a convolution and the relu that read the folded batch norm).
        # Edges only one side has: 1 added (after only), 2 removed (before only).
        old_edges = {(bmap[j], bmap[w]) for w in range(len(before.nodes)) for j in before.inputs[w]}
        u.edge_status = {}
        for v in range(na):
            for j in self.inputs[v]:
                if (j, v) not in old_edges:
                    u.edge_status[(j, v)] = 1
        for (j, v) in old_edges:
            if j not in u.inputs[v]:
                u.inputs[v].append(j)
            if j >= na or v >= na or (j, v) not in u.edge_status and j not in self.inputs[v]:
                u.edge_status[(j, v)] = 2
        # Display order: each removed node right after the image of the last
        # matched node before it in the old graph.
        after_anchor: Dict[int, List[int]] = {}
        anchor = -1
        for i in range(len(before.nodes)):
            if b2a[i] is not None:
                anchor = b2a[i]
            else:
                after_anchor.setdefault(anchor, []).append(bmap[i])
        order = list(after_anchor.get(-1, []))
        for i in range(na):
            order.append(i)
            order.extend(after_anchor.get(i, []))
        u.order = order
        u.users = [[] for _ in u.nodes]
        for v, ins in enumerate(u.inputs):
            for j in ins:
                u.users[j].append(v)

        def remap(segs):
            return [bmap[x] if isinstance(x, int) else x for x in segs]

        u.meta = self.meta + [before.meta[i] for i in removed]
        u.args = self.args + [remap(before.args[i]) for i in removed]
        u.kwargs = self.kwargs + [remap(before.kwargs[i]) for i in removed]
        u.target = self.target + [before.target[i] for i in removed]
        u.stack = self.stack + [before.stack[i] for i in removed]
        u._build_groups()
        return u

    # -- sizes, edges and layouts --------------------------------------------------

    def module_path(self, i: int) -> str:
        """The module node i stands for: a call_module node's target, or the
        module whose only node it is; '' for none. Such nodes are drawn as
        module boxes, like folded groups."""
        node = self.nodes[i]
        if node.op == "call_module":
            return str(node.target)
        return getattr(self, "module_of", {}).get(i, "")

    def node_label(self, i: int) -> Tuple[str, str]:
        node = self.nodes[i]
        name = node.name
        sub = _short_target(node) if node.op not in ("placeholder", "output") else node.op
        mod = self.module_path(i)
        if mod:
            m = self.modules.get(mod)
            if node.op != "call_module":
                name = mod.rpartition(".")[2]  # the module's name; the op below it
            elif m is not None:
                sub = type(m).__name__
        return _clip(name, MAX_LABEL), _clip(sub, MAX_LABEL)

    def layout(self) -> None:
        """One C++ layout per group (its items folded, plus its IN/OUT ports)."""
        from fxcpp import _C

        n = len(self.nodes)
        groups = self.groups
        self.count = [0] * len(groups)
        # Per group: the display rank of its first op (not a parameter read),
        # for the outline's order.
        order = getattr(self, "order", None) or range(n)
        rank = [0] * n
        for k, i in enumerate(order):
            rank[i] = k
        self.rank = rank
        self.firstop = [n + g for g in range(len(groups))]
        for i in range(n):
            g = self.node_group[i]
            isop = self.nodes[i].op not in ("placeholder", "get_attr", "output")
            while g >= 0:
                self.count[g] += 1
                if isop and rank[i] < self.firstop[g]:
                    self.firstop[g] = rank[i]
                g = groups[g].parent
        labels = [self.node_label(i) for i in range(n)]
        self.labels = labels
        size: Dict[int, Tuple[float, float]] = {}
        for i in range(n):
            a, b = labels[i]
            if self.module_path(i):  # drawn as a module box, like a folded group
                size[i] = (max(64.0, CHAR_W * max(len(a), len(b)) + 20), float(GROUP_H))
            else:
                size[i] = (max(48.0, CHAR_W * max(len(a), len(b)) + 16), float(NODE_H))
        for grp in groups:
            sub = grp.type or ("" if grp.synthetic else "")
            text2 = f"{sub} \u00b7 {self.count[grp.gid]} nodes" if sub else f"{self.count[grp.gid]} nodes"
            size[-(grp.gid + 1)] = (max(64.0, CHAR_W * max(len(_clip(grp.label, MAX_LABEL)), len(text2)) + 28),
                                    float(GROUP_H))
        self.size = size
        # Bundled edges per level: (group, a, b) -> [count, producers]; a/b are
        # item refs, or 'IN'/'OUT' for the group's ports.
        bundles: Dict[Tuple[int, Any, Any], List[Any]] = {}
        chains = [self.chain(i) for i in range(n)]

        est = getattr(self, "edge_status", None) or {}
        cur = [0]  # the diff status of the graph edge being added

        def add(g, a, b, u):
            e = bundles.get((g, a, b))
            if e is None:
                bundles[(g, a, b)] = [1, {u}, cur[0]]
            else:
                e[0] += 1
                if len(e[1]) < 4:
                    e[1].add(u)
                if e[2] != cur[0]:
                    e[2] = 0  # a bundle is marked only when all its edges are

        for v in range(n):
            cv = chains[v]
            for u in self.inputs[v]:
                if u == v:
                    continue
                cu = chains[u]
                cur[0] = est.get((u, v), 0)
                k = 0
                while k < len(cu) and k < len(cv) and cu[k] == cv[k]:
                    k += 1
                lvl = cu[k - 1]
                a = -(cu[k] + 1) if k < len(cu) else u
                b = -(cv[k] + 1) if k < len(cv) else v
                add(lvl, a, b, u)
                for d in range(k, len(cu)):
                    add(cu[d], -(cu[d + 1] + 1) if d + 1 < len(cu) else u, "OUT", u)
                for d in range(k, len(cv)):
                    add(cv[d], "IN", -(cv[d + 1] + 1) if d + 1 < len(cv) else v, u)
        per_group: Dict[int, List[Tuple[Any, Any, int, Any]]] = {}
        for (g, a, b), (cnt, prods, est_) in bundles.items():
            per_group.setdefault(g, []).append((a, b, cnt, prods, est_))
        self.layouts = []
        self.crossings = 0
        for grp in groups:
            items = grp.items
            local = {r: k for k, r in enumerate(items)}
            local["IN"], local["OUT"] = len(items), len(items) + 1
            ws = [size[r][0] for r in items] + [PORT_W, PORT_W]
            hs = [size[r][1] for r in items] + [PORT_H, PORT_H]
            es = sorted(per_group.get(grp.gid, []), key=lambda e: (local[e[0]], local[e[1]]))
            res = _C._layout(ws, hs, [local[e[0]] for e in es], [local[e[1]] for e in es])
            self.crossings += res["crossings"]
            edges = []
            pts, eb = res["points"], res["edge_begin"]
            for k, (a, b, cnt, prods, est_) in enumerate(es):
                flat = [round(x, 1) for x in pts[2 * eb[k]:2 * eb[k + 1]]]
                edges.append([local[a], local[b], cnt, self._edge_label(prods, cnt), flat,
                              res["edge_reversed"][k], est_])
            self.layouts.append({
                "w": round(res["width"], 1), "h": round(res["height"], 1),
                "bx": [round(x, 1) for x in res["boxes"]], "layer": res["box_layer"],
                "lt": [round(x, 1) for x in res["layer_top"]], "lh": [round(x, 1) for x in res["layer_height"]],
                "edges": edges,
            })

    def _outline(self, grp) -> List[int]:
        """The group's entries in the page's module outline: its subgroups and
        module nodes (once per module), in the order of their first op."""
        out, seen = [], set()
        for r in grp.items:
            if r >= 0:
                m = self.module_path(r)
                if not m or m in seen:
                    continue
                seen.add(m)
            out.append(r)
        out.sort(key=lambda r: self.rank[r] if r >= 0 else self.firstop[-r - 1])
        return out

    def _edge_label(self, prods, cnt) -> str:
        if len(prods) != 1:
            return f"{cnt} values" if cnt > 1 else ""
        (u,) = prods
        s, d = self.meta[u]
        return (s + (" " + d if d else "")).strip()

    # -- the page's data ---------------------------------------------------------------

    def collect(self) -> None:
        """Per-node text for the details panel (and the diff)."""
        self.meta = [node_meta(node) for node in self.nodes]
        self.args: List[List[Any]] = []
        self.kwargs: List[List[Any]] = []
        self.target: List[str] = []
        self.stack: List[str] = []
        for node in self.nodes:
            self.args.append(_text_with_links(tuple(node.args), self.index, [MAX_TEXT]))
            self.kwargs.append(_text_with_links(dict(node.kwargs), self.index, [MAX_TEXT]))
            self.target.append(_safe_str(target_str, node))
            st = (getattr(node, "meta", None) or {}).get("stack_trace") or getattr(node, "stack_trace", None) or ""
            self.stack.append(_clip(str(st), 4 * MAX_TEXT))

    def node_kind(self, i: int) -> str:
        return f"{self.nodes[i].op} {self.target[i]}"

    def node_detail(self, i: int) -> str:
        node = self.nodes[i]
        detail = _template(self.args[i]) + "|" + _template(self.kwargs[i])
        if node.op in ("call_module", "get_attr"):
            detail += "|" + _fingerprint(self._resolve(str(node.target)))
        return detail

    def _resolve(self, qualname: str):
        gm = self.modules.get("")
        obj = gm
        try:
            for atom in qualname.split("."):
                obj = getattr(obj, atom)
        except Exception:  # noqa: BLE001
            return None
        return obj

    def to_json(self, name: str, diff: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        n = len(self.nodes)
        groups = []
        for grp, lay in zip(self.groups, self.layouts):
            w, h = self.size[-(grp.gid + 1)]
            groups.append({"label": grp.label, "path": grp.path, "type": grp.type, "parent": grp.parent,
                           "items": grp.items, "w": w, "h": h, "count": self.count[grp.gid],
                           "synthetic": grp.synthetic, "lay": lay, "outline": self._outline(grp)})
        nodes = {
            "name": [nd.name for nd in self.nodes], "op": [nd.op for nd in self.nodes],
            "target": self.target, "label": [lb[0] for lb in self.labels], "sub": [lb[1] for lb in self.labels],
            "module": [self.module_path(i) for i in range(n)],
            "group": self.node_group, "shape": [m[0] for m in self.meta], "dtype": [m[1] for m in self.meta],
            "args": self.args, "kwargs": self.kwargs, "users": self.users, "stack": self.stack,
            "w": [self.size[i][0] for i in range(n)], "h": [self.size[i][1] for i in range(n)],
        }
        out = {"name": name, "nodes": nodes, "groups": groups, "crossings": self.crossings}
        if diff is not None:
            out["diff"] = diff
        return out


def _fingerprint(obj) -> str:
    """What a module or attribute holds, cheaply: its repr (a module's
    configuration) and each tensor's shape, dtype and two sums."""
    if obj is None:
        return ""
    try:
        import torch
    except ImportError:  # pragma: no cover
        torch = None
    parts = [_safe_str(repr, obj)[:500]] if not (torch is not None and isinstance(obj, torch.Tensor)) else []
    tensors = []
    if torch is not None:
        if isinstance(obj, torch.Tensor):
            tensors = [("", obj)]
        elif isinstance(obj, torch.nn.Module):
            tensors = list(obj.state_dict().items())
    for k, t in tensors:
        try:
            with torch.no_grad():
                d = t.detach().double()
                parts.append(f"{k}:{tuple(t.shape)}:{t.dtype}:{float(d.sum()):.6g}:{float(d.abs().sum()):.6g}")
        except Exception:  # noqa: BLE001 -- meta/fake tensors
            parts.append(f"{k}:{tuple(getattr(t, 'shape', ()))}")
    return "|".join(parts)
