"""The explorer's drawing as a static SVG (and PNG through cairosvg when it is
installed): the same per-group C++ layouts, composed as the page composes
them (explorer.js compose()), with a fixed fold state."""
from bisect import bisect_left
from typing import Any, Dict, List, Optional
from xml.sax.saxutils import escape

PAD, HDR = 10, 22
_STATUS = ["", "added", "removed", "changed"]
_FILL = {"placeholder": "#e8f1fb", "output": "#eef7ee", "get_attr": "#f6f0fb", "call_module": "#fff8e8"}
_DIFF = {1: ("#dcfce7", "#15803d"), 2: ("#fee2e2", "#b91c1c"), 3: ("#fef3c7", "#b45309")}


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


def to_svg(data, name: str, diff: Optional[Dict[str, Any]] = None, expand: int = 0) -> str:
    """SVG text of `data` (a laid-out GraphData) with groups down to depth
    `expand` open (0: the top-level groups folded)."""
    expanded = {g.gid for g in data.groups if 0 < data.depth[g.gid] <= expand}
    c = _Composer(data, expanded)
    root = c.compose(0)
    status = diff["status"] if diff else None
    gch = diff["gchanges"] if diff else None
    out: List[str] = []

    def level(g, ox, oy):
        edges: List[str] = []
        boxes: List[str] = []
        comp = c.compose(g)
        items = data.groups[g].items
        for E, pts in comp["edges"]:
            d = "M" + " L".join(f"{pts[k] + ox:.1f} {pts[k + 1] + oy:.1f}" for k in range(0, len(pts), 2))
            dash = ' stroke-dasharray="3 2"' if E[0] >= len(items) or E[1] >= len(items) or E[6] == 2 else ""
            color = {1: "#15803d", 2: "#b91c1c"}.get(E[6], "#8a94a6")
            edges.append(f'<path d="{d}" fill="none" stroke="{color}" stroke-width="1.2"{dash} marker-end="url(#a)"/>')
            if E[3] and E[0] < len(items) and E[1] < len(items):
                edges.append(f'<text x="{pts[-2] + ox + 4:.1f}" y="{pts[-1] + oy - 6:.1f}" class="l">'
                             f'{escape(E[3])}</text>')
        for i, ref in enumerate(items):
            x, y, w, h = comp["rect"][i]
            x += ox
            y += oy
            if ref >= 0:
                fill, stroke = _FILL.get(data.nodes[ref].op, "#fff"), "#6b7a90"
                if status and status[ref]:
                    fill, stroke = _DIFF[status[ref]]
                name_, sub = data.labels[ref]
                boxes.append(f'<g transform="translate({x:.1f},{y:.1f})"><rect width="{w:.1f}" height="{h:.1f}" rx="4" '
                             f'fill="{fill}" stroke="{stroke}"/><text x="8" y="14" class="n">{escape(name_)}</text>'
                             f'<text x="8" y="28" class="s">{escape(sub)}</text></g>')
            else:
                sg = -ref - 1
                grp = data.groups[sg]
                open_ = sg in expanded
                stroke = "#b45309" if gch and gch[sg] else "#8a94a6"
                fill = "#f7f9fb" if open_ else "#eef1f5"
                badge = (f'<text x="{w - 6:.1f}" y="14" text-anchor="end" class="b">\u0394{gch[sg]}</text>'
                         if gch and gch[sg] else "")
                sub = "" if open_ else (f'<text x="10" y="31" class="s">'
                                        f'{escape((grp.type + " · " if grp.type else "") + str(data.count[sg]))} nodes</text>')
                boxes.append(f'<g transform="translate({x:.1f},{y:.1f})"><rect width="{w:.1f}" height="{h:.1f}" rx="6" '
                             f'fill="{fill}" stroke="{stroke}"/><text x="10" y="16" class="n">'
                             f'{escape(("▾ " if open_ else "▸ ") + grp.label)}</text>{sub}{badge}</g>')
                if open_:
                    boxes.append(level(sg, x + PAD, y + HDR + PAD))
        return "".join(edges) + "".join(boxes)

    body = level(0, 10, 10)
    W, H = root["w"] + 20 + 200, root["h"] + 20  # room for the edge labels on the right
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W:.0f}" height="{H:.0f}" viewBox="0 0 {W:.0f} {H:.0f}">'
            f'<title>{escape(name)}</title>'
            '<style>.n{font:600 12px monospace;fill:#1d2330}.s{font:11px monospace;fill:#5b6474}'
            '.l{font:10px monospace;fill:#4b5563}.b{font:600 11px monospace;fill:#b45309}</style>'
            '<defs><marker id="a" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
            'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#8a94a6"/></marker></defs>'
            '<rect width="100%" height="100%" fill="#fafbfc"/>' + body + "</svg>\n")


def to_png(svg_text: str, path: str) -> None:
    """Writes `svg_text` as a PNG through cairosvg; ImportError when it is missing."""
    import cairosvg  # noqa: F401 -- optional
    cairosvg.svg2png(bytestring=svg_text.encode("utf-8"), write_to=path)
