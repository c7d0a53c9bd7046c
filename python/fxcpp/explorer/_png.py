"""The explorer's drawing as a PNG, painted with Pillow (no browser, no SVG
renderer): the boxes, edge polylines, arrows, labels and diff colours of
_svg.scene(), the list to_svg() writes, at the same size (times `scale`).

Fonts: DejaVu Sans Mono (Debian's fonts-dejavu-core, or the copy matplotlib
ships); without either, Pillow's built-in font."""
import importlib.util
import math
import os
from typing import Dict, Optional, Tuple

from ._svg import BACKGROUND, TEXT, Box, Edge, Scene

#: Most pixels a PNG gets; a larger drawing is scaled down to fit.
MAX_PIXELS = 40_000_000
_SUPERSAMPLE_MAX = 8_000_000  # below this, paint at 2x and downsample (smooth lines)

_FONT_DIRS = ["/usr/share/fonts/truetype/dejavu", "/usr/share/fonts/dejavu", "/usr/share/fonts/TTF"]


def _font_files() -> Tuple[Optional[str], Optional[str]]:
    dirs = list(_FONT_DIRS)
    spec = importlib.util.find_spec("matplotlib")
    if spec is not None and spec.origin:
        dirs.append(os.path.join(os.path.dirname(spec.origin), "mpl-data", "fonts", "ttf"))
    for d in dirs:
        regular = os.path.join(d, "DejaVuSansMono.ttf")
        bold = os.path.join(d, "DejaVuSansMono-Bold.ttf")
        if os.path.isfile(regular):
            return regular, bold if os.path.isfile(bold) else regular
    return None, None


class _Fonts:
    def __init__(self, scale: float):
        from PIL import ImageFont
        self.scale = scale
        self.files = _font_files()
        self.cache: Dict[str, object] = {}
        self.ImageFont = ImageFont

    def get(self, style: str):
        f = self.cache.get(style)
        if f is None:
            bold, px, _ = TEXT[style]
            path = self.files[1 if bold else 0]
            if path:
                f = self.ImageFont.truetype(path, max(1, round(px * self.scale)))
            else:
                try:  # Pillow >= 10.1 sizes its built-in font
                    f = self.ImageFont.load_default(size=max(1, round(px * self.scale)))
                except TypeError:
                    f = self.ImageFont.load_default()
            self.cache[style] = f
        return f


def _rgb(c: str) -> Tuple[int, int, int]:
    return int(c[1:3], 16), int(c[3:5], 16), int(c[5:7], 16)


def _dashed(draw, pts, color, width, dash):
    """A polyline with a dash pattern (Pillow draws only solid lines)."""
    on, off = dash
    phase, drawing = 0.0, True
    for k in range(0, len(pts) - 2, 2):
        x0, y0, x1, y1 = pts[k], pts[k + 1], pts[k + 2], pts[k + 3]
        seg = math.hypot(x1 - x0, y1 - y0)
        t = 0.0
        while t < seg:
            left = (on if drawing else off) - phase
            step = min(left, seg - t)
            if drawing:
                a, b = t / seg, (t + step) / seg
                draw.line([(x0 + (x1 - x0) * a, y0 + (y1 - y0) * a), (x0 + (x1 - x0) * b, y0 + (y1 - y0) * b)],
                          fill=color, width=width)
            t += step
            phase += step
            if phase >= (on if drawing else off) - 1e-9:
                phase, drawing = 0.0, not drawing


def paint(sc: Scene, scale: float = 1.0):
    """A Pillow RGB image of the scene at `scale` (reduced to fit MAX_PIXELS)."""
    from PIL import Image, ImageDraw
    if sc.width * sc.height * scale * scale > MAX_PIXELS:
        scale = math.sqrt(MAX_PIXELS / (sc.width * sc.height))
        W, H = max(1, math.floor(sc.width * scale)), max(1, math.floor(sc.height * scale))
    else:
        W, H = max(1, math.ceil(sc.width * scale)), max(1, math.ceil(sc.height * scale))
    ss = 2 if W * H <= _SUPERSAMPLE_MAX else 1
    k = scale * ss
    img = Image.new("RGB", (W * ss, H * ss), _rgb(BACKGROUND))
    draw = ImageDraw.Draw(img)
    fonts = _Fonts(k)

    def text(t):
        f = fonts.get(t.style)
        col = _rgb(TEXT[t.style][2])
        try:
            draw.text((t.x * k, t.y * k), t.text, font=f, fill=col, anchor="rs" if t.anchor == "end" else "ls")
        except (ValueError, TypeError):  # the built-in bitmap font has no anchors
            w = draw.textlength(t.text, font=f) if t.anchor == "end" else 0
            draw.text((t.x * k - w, t.y * k - TEXT[t.style][1] * k), t.text, font=f, fill=col)

    for it in sc.items:
        if isinstance(it, Edge):
            pts = [v * k for v in it.pts]
            col = _rgb(it.color)
            w = max(1, round(it.width * k))
            # The arrow (the SVG marker: 7 stroke widths long, pointing along the last segment).
            x1, y1, x0, y0 = pts[-2], pts[-1], pts[-4], pts[-3]
            seg = math.hypot(x1 - x0, y1 - y0) or 1.0
            ux, uy = (x1 - x0) / seg, (y1 - y0) / seg
            L = 7 * 1.2 * k
            bx, by = x1 - ux * L, y1 - uy * L
            line = pts[:-2] + [x1 - ux * L * 0.5, y1 - uy * L * 0.5]
            if it.dash:
                _dashed(draw, line, col, w, (it.dash[0] * k, it.dash[1] * k))
            else:
                draw.line(list(zip(line[::2], line[1::2])), fill=col, width=w, joint="curve")
            draw.polygon([(x1, y1), (bx - uy * L / 2, by + ux * L / 2), (bx + uy * L / 2, by - ux * L / 2)],
                         fill=_rgb("#8a94a6"))
            if it.label:
                text(it.label)
        elif isinstance(it, Box):
            x0, y0, x1, y1 = it.x * k, it.y * k, (it.x + it.w) * k, (it.y + it.h) * k
            w = max(1, round(it.stroke_width * k))
            r = it.rx * k
            if it.dash:
                draw.rounded_rectangle([x0, y0, x1, y1], radius=r, fill=_rgb(it.fill))
                _dashed(draw, [x0 + r, y0, x1 - r, y0], _rgb(it.stroke), w, (it.dash[0] * k, it.dash[1] * k))
                _dashed(draw, [x1, y0 + r, x1, y1 - r], _rgb(it.stroke), w, (it.dash[0] * k, it.dash[1] * k))
                _dashed(draw, [x1 - r, y1, x0 + r, y1], _rgb(it.stroke), w, (it.dash[0] * k, it.dash[1] * k))
                _dashed(draw, [x0, y1 - r, x0, y0 + r], _rgb(it.stroke), w, (it.dash[0] * k, it.dash[1] * k))
            else:
                draw.rounded_rectangle([x0, y0, x1, y1], radius=r, fill=_rgb(it.fill), outline=_rgb(it.stroke),
                                       width=w)
            for t in it.texts:
                text(t)
    if ss != 1:
        img = img.resize((W, H), getattr(Image, "Resampling", Image).LANCZOS)
    return img


def to_png(sc: Scene, path: str, scale: float = 1.0) -> str:
    """Writes the scene as a PNG file; returns the path."""
    paint(sc, scale).save(path, format="PNG", optimize=False)
    return path
