"""The explorer's drawing as a picture, without a browser: the same per-group
C++ layouts, composed as the page composes them (explorer.js compose()),
with a fixed fold state. scene() turns that into a list of boxes and edge
polylines with their colours and texts; to_svg() writes it as SVG and
_png.py paints the same list with Pillow, so both pictures are one drawing."""
from bisect import bisect_left
from typing import Any, Dict, List, NamedTuple, Optional, Tuple
from xml.sax.saxutils import escape

PAD, HDR = 10, 22
MARGIN = 10      # around the drawing
LABEL_ROOM = 200  # right of the drawing, for the edge labels of its rightmost edges
BACKGROUND = "#fafbfc"
EDGE = "#8a94a6"
# Fills and strokes: the page's (explorer.css) for each kind of box.
_FILL = {"placeholder": "#e8f1fb", "output": "#eef7ee", "get_attr": "#f6f0fb"}
NODE_FILL, NODE_STROKE = "#ffffff", "#6b7a90"
GROUP_FILL, GROUP_STROKE, OPEN_FILL, OPEN_STROKE = "#eef1f5", "#8a94a6", "#f4f6f9", "#9aa5b8"
CHANGES_STROKE = "#b45309"
# Diff status -> (fill, stroke); 1 added, 2 removed, 3 changed.
_DIFF = {1: ("#dcfce7", "#15803d"), 2: ("#fee2e2", "#b91c1c"), 3: ("#fef3c7", "#b45309")}
_EDGE_DIFF = {1: "#15803d", 2: "#b91c1c"}
# Text styles: (weight 600?, px, colour).
TEXT = {"n": (True, 12, "#1d2330"), "g": (True, 12, "#23324a"), "s": (False, 11, "#5b6474"),
        "l": (False, 10, "#4b5563"), "b": (True, 11, "#b45309")}


class Text(NamedTuple):
    x: float  # baseline start (anchor "end": baseline end)
    y: float
    text: str
    style: str  # a key of TEXT
    anchor: str = "start"


class Box(NamedTuple):
    x: float
    y: float
    w: float
    h: float
    rx: float
    fill: str
    stroke: str
    stroke_width: float
    dash: Optional[Tuple[float, float]]
    texts: Tuple[Text, ...]
    kind: str  # "node", "module" (a call_module node), "group", "open"
    ref: int   # node index, or group id for groups


class Edge(NamedTuple):
    pts: Tuple[float, ...]  # x0, y0, x1, y1, ...; the arrow at the end
    color: str
    width: float
    dash: Optional[Tuple[float, float]]
    label: Optional[Text]


class Scene(NamedTuple):
    width: float
    height: float
    items: List[Any]  # Edge and Box, in painting order


class _Composer:
    def __init__(self, data, expanded):
        self.d = data
        self.expanded = expanded
        self.cache: Dict[int, Any] = {}

    def folded(self, ref):
        return self.d.size[ref]

    def size(self, ref):
        if ref >= 0 or (-ref - 1) not in self.expanded:
            return self.folded(ref)
        c = self.compose(-ref - 1)
        f = self.folded(ref)
        return max(f[0], c["w"] + 2 * PAD), max(f[1], c["h"] + HDR + 2 * PAD)

    def compose(self, g):
        if g in self.cache:
            return self.cache[g]
        L = self.d.layouts[g]
        items = self.d.groups[g].items
        bx = L["bx"]
        nb = len(items) + 2
        sw, sh, grow = [], [], []
        for i in range(nb):
            s = self.size(items[i]) if i < len(items) else (bx[4 * i + 2], bx[4 * i + 3])
            sw.append(s[0])
            sh.append(s[1])
            if s[0] > bx[4 * i + 2]:
                grow.append((bx[4 * i] + bx[4 * i + 2], s[0] - bx[4 * i + 2]))
        grow.sort()
        gx = [x for x, _ in grow]
        gsum = [0.0]
        for _, dw in grow:
            gsum.append(gsum[-1] + dw)

        def mapx(x):
            return x + gsum[bisect_left(gx, x)]

        lt, lh = L["lt"], L["lh"]
        nl = len(lt)
        H = list(lh)
        for i in range(nb):
            H[L["layer"][i]] = max(H[L["layer"][i]], sh[i])
        top = [0.0] * nl
        for ly in range(1, nl):
            top[ly] = top[ly - 1] + H[ly - 1] + (lt[ly] - lt[ly - 1] - lh[ly - 1])
        rect = []
        W = 0.0
        for i in range(nb):
            ly = L["layer"][i]
            x = mapx(bx[4 * i])
            rect.append((x, top[ly] + (H[ly] - sh[i]) / 2, sw[i], sh[i]))
            if i < len(items):
                W = max(W, x + sw[i])
        centres = [t + h / 2 for t, h in zip(lt, lh)]
        edges = []
        for E in L["edges"]:
            p, rev = E[4], E[5]
            if not p:
                continue
            a, b = rect[E[0]], rect[E[1]]
            pts = [a[0] + a[2] / 2, a[1] if rev else a[1] + a[3]]
            for k in range(2, len(p) - 2, 2):
                li = min(nl - 1, bisect_left(centres, p[k + 1] - 0.5))
                X = mapx(p[k])
                pts += [X, top[li] + H[li], X, top[li]] if rev else [X, top[li], X, top[li] + H[li]]
            pts += [b[0] + b[2] / 2, b[1] + b[3] if rev else b[1]]
            edges.append((E, pts))
        out = {"w": W, "h": top[-1] + H[-1] if nl else 0.0, "rect": rect, "edges": edges}
        self.cache[g] = out
        return out


def scene(data, diff: Optional[Dict[str, Any]] = None, expand: int = 0) -> Scene:
    """The drawing of `data` (a laid-out GraphData) with groups down to depth
    `expand` open (0: the top-level groups folded), in picture coordinates."""
    expanded = {g.gid for g in data.groups if 0 < data.depth[g.gid] <= expand}
    c = _Composer(data, expanded)
    root = c.compose(0)
    status = diff["status"] if diff else None
    gch = diff["gchanges"] if diff else None
    out: List[Any] = []

    def level(g, ox, oy):
        comp = c.compose(g)
        items = data.groups[g].items
        for E, pts in comp["edges"]:
            port = E[0] >= len(items) or E[1] >= len(items)
            dash = (4.0, 3.0) if E[6] == 2 else (3.0, 2.0) if port else None
            label = None
            if E[3] and not port:
                label = Text(pts[-2] + ox + 4, pts[-1] + oy - 6, E[3], "l")
            out.append(Edge(tuple(v + (oy if k % 2 else ox) for k, v in enumerate(pts)),
                            _EDGE_DIFF.get(E[6], EDGE), 2.0 if E[6] == 1 else 1.2, dash, label))
        nested = []
        for i, ref in enumerate(items):
            x, y, w, h = comp["rect"][i]
            x += ox
            y += oy
            if ref >= 0:
                op = data.nodes[ref].op
                module = bool(data.module_path(ref))
                fill, stroke, sw, dash = (GROUP_FILL, GROUP_STROKE, 1.0, None) if module else \
                    (_FILL.get(op, NODE_FILL), NODE_STROKE, 1.0, None)
                st = status[ref] if status else 0
                if st:
                    fill, stroke = _DIFF[st]
                    sw, dash = 2.0, ((4.0, 2.0) if st == 2 else None)
                name_, sub = data.labels[ref]
                tx, ty = (10, 16) if module else (8, 14)
                texts = (Text(x + tx, y + ty, name_, "g" if module else "n"),
                         Text(x + tx, y + ty + (15 if module else 14), sub, "s"))
                out.append(Box(x, y, w, h, 6.0 if module else 4.0, fill, stroke, sw, dash, texts,
                               "module" if module else "node", ref))
            else:
                sg = -ref - 1
                grp = data.groups[sg]
                open_ = sg in expanded
                ch = gch[sg] if gch else 0
                texts = [Text(x + 10, y + (15 if open_ else 16), ("\u25be " if open_ else "\u25b8 ") + grp.label, "g")]
                if not open_:
                    texts.append(Text(x + 10, y + 31, (grp.type + " \u00b7 " if grp.type else "") +
                                      f"{data.count[sg]} nodes", "s"))
                if ch:
                    texts.append(Text(x + w - 6, y + 14, f"\u0394{ch}", "b", "end"))
                out.append(Box(x, y, w, h, 6.0, OPEN_FILL if open_ else GROUP_FILL,
                               CHANGES_STROKE if ch else (OPEN_STROKE if open_ else GROUP_STROKE),
                               2.0 if ch else 1.0, (5.0, 3.0) if open_ and not ch else None, tuple(texts),
                               "open" if open_ else "group", sg))
                if open_:
                    nested.append((sg, x + PAD, y + HDR + PAD))
        # An open group's contents paint over its box, as on the page.
        for sg, x, y in nested:
            level(sg, x, y)

    level(0, MARGIN, MARGIN)
    return Scene(root["w"] + 2 * MARGIN + LABEL_ROOM, root["h"] + 2 * MARGIN, out)


_SVG_CLASS = {"n": "n", "g": "g", "s": "s", "l": "l", "b": "b"}


def _dash(d) -> str:
    return f' stroke-dasharray="{d[0]:g} {d[1]:g}"' if d else ""


def _text(t: Text) -> str:
    anchor = ' text-anchor="end"' if t.anchor == "end" else ""
    return f'<text x="{t.x:.1f}" y="{t.y:.1f}" class="{_SVG_CLASS[t.style]}"{anchor}>{escape(t.text)}</text>'


def to_svg(data, name: str, diff: Optional[Dict[str, Any]] = None, expand: int = 0) -> str:
    """SVG text of `data` (a laid-out GraphData) with groups down to depth
    `expand` open (0: the top-level groups folded)."""
    sc = scene(data, diff, expand)
    body: List[str] = []
    for it in sc.items:
        if isinstance(it, Edge):
            p = it.pts
            d = "M" + " L".join(f"{p[k]:.1f} {p[k + 1]:.1f}" for k in range(0, len(p), 2))
            body.append(f'<path d="{d}" fill="none" stroke="{it.color}" stroke-width="{it.width:g}"{_dash(it.dash)} '
                        f'marker-end="url(#a)"/>')
            if it.label:
                body.append(_text(it.label))
        else:
            body.append(f'<rect x="{it.x:.1f}" y="{it.y:.1f}" width="{it.w:.1f}" height="{it.h:.1f}" rx="{it.rx:g}" '
                        f'fill="{it.fill}" stroke="{it.stroke}" stroke-width="{it.stroke_width:g}"{_dash(it.dash)}/>')
            body.extend(_text(t) for t in it.texts)
    W, H = sc.width, sc.height
    style = "".join(f".{k}{{font:{'600 ' if b else ''}{px}px monospace;fill:{col}}}"
                    for k, (b, px, col) in TEXT.items())
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W:.0f}" height="{H:.0f}" viewBox="0 0 {W:.0f} {H:.0f}">'
            f'<title>{escape(name)}</title><style>{style}</style>'
            '<defs><marker id="a" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
            f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{EDGE}"/></marker></defs>'
            f'<rect width="100%" height="100%" fill="{BACKGROUND}"/>' + "".join(body) + "</svg>\n")
