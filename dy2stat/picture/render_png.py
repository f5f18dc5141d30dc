"""A placed scene as PNG, drawn with Pillow: the SVG's picture, without its tooltips.

Pillow is optional (``pip install 'dy2stat[png]'``): its wheels carry their own
font renderer and font, so nothing else needs installing. Without it,
``render`` raises :class:`PngUnavailable` saying how to get it.
"""

from __future__ import annotations

import io
import math

from dy2stat.picture.layout import LINE_HEIGHT
from dy2stat.picture.scene import Group, Node, Scene

try:
    from PIL import Image, ImageDraw, ImageFont
except ImportError:  # the optional dependency is not installed
    Image = ImageDraw = ImageFont = None

FILL = {"feed": "#d8ecff", "fetch": "#dff5d8", "param": "#eeeeee", "": "#ffffff"}
EDGE = {"data": "#666666", "result": "#2a8a2a", "carry": "#b08900"}
# Layer groups nested deeper are drawn a little darker.
LAYER_FILLS = ["#f4f7fc", "#e9eff9", "#dee7f6", "#d3dff3"]
SCALE = 2  # pixels per layout unit: sharp text
MAX_PIXELS = 60_000_000  # a larger picture is drawn smaller (at most ~180 MB while drawn)


class PngUnavailable(RuntimeError):
    """PNG output was asked for but Pillow is not installed."""


def render(scene: Scene) -> bytes:
    """The PNG file of ``scene`` (placed by ``layout.place``)."""
    if Image is None:
        raise PngUnavailable("PNG pictures need Pillow, which is not installed: "
                             "pip install 'dy2stat[png]' (or pip install pillow); "
                             "--svg needs nothing more")
    root = scene.root
    scale = min(SCALE, math.sqrt(MAX_PIXELS / max(root.w * root.h, 1.0)))
    image = Image.new("RGB", (math.ceil(root.w * scale), math.ceil(root.h * scale)), "white")
    painter = _Painter(ImageDraw.Draw(image), scale)
    painter.group(root, 0)
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


class _Painter:
    def __init__(self, draw, scale: float):
        self.draw, self.scale = draw, scale
        self.line_width = max(1, round(scale))
        self.font = ImageFont.load_default(size=12 * scale)
        self.small = ImageFont.load_default(size=10 * scale)

    def at(self, x: float, y: float) -> tuple:
        return x * self.scale, y * self.scale

    def box(self, x, y, w, h, radius, fill, outline):
        self.draw.rounded_rectangle([self.at(x, y), self.at(x + w, y + h)],
                                    radius=radius * self.scale, fill=fill, outline=outline,
                                    width=self.line_width)

    def group(self, group: Group, level: int) -> None:
        if group.kind == "layer":
            self.box(group.x, group.y, group.w, group.h, 6,
                     LAYER_FILLS[min(level, len(LAYER_FILLS) - 1)], "#4a7bd0")
            level += 1
        elif group.kind == "control":
            self.box(group.x, group.y, group.w, group.h, 6, "#fff6d5", "#b08900")
        elif group.kind == "block":
            self.box(group.x, group.y, group.w, group.h, 6, "#fafafa", "#999999")
        if group.title:
            self.draw.text(self.at(group.x + 8, group.y + 3), group.title, font=self.font,
                           fill="#444444")
        for child in group.children:  # as in the SVG: groups, edges, then nodes
            if isinstance(child, Group):
                self.group(child, level)
        for edge in group.edges:
            self.edge(edge)
        for child in group.children:
            if isinstance(child, Node):
                self.node(child)

    def node(self, node: Node) -> None:
        dashed = node.kind in ("pass", "empty")
        fill = {"value": FILL[node.style], "layer": "#dce6f7"}.get(node.kind, "#ffffff")
        outline = {"op": "#333333", "layer": "#4a7bd0"}.get(
            node.kind, "#999999" if dashed else "#777777")
        radius = node.h / 2 if node.kind in ("value", "pass") else 4
        self.box(node.x, node.y, node.w, node.h, radius, fill, outline)
        top = node.y + (node.h - len(node.lines) * LINE_HEIGHT) / 2
        for k, line in enumerate(node.lines):
            self.draw.text(self.at(node.x + node.w / 2, top + (k + 0.5) * LINE_HEIGHT), line,
                           font=self.font if k == 0 else self.small, anchor="mm",
                           fill="#222222" if k == 0 else "#666666")

    def edge(self, edge) -> None:
        points = [self.at(x, y) for x, y in edge.points]
        color = EDGE.get(edge.kind, "#666666")
        for (x0, y0), (x1, y1) in zip(points, points[1:]):
            if not edge.back:
                self.draw.line([(x0, y0), (x1, y1)], fill=color, width=self.line_width)
                continue
            steps = int(math.hypot(x1 - x0, y1 - y0) // (9 * self.scale)) + 1  # dashed
            for k in range(steps):
                a, b = k / steps, min((k + 0.55) / steps, 1.0)
                self.draw.line([(x0 + (x1 - x0) * a, y0 + (y1 - y0) * a),
                                (x0 + (x1 - x0) * b, y0 + (y1 - y0) * b)],
                               fill=color, width=self.line_width)
        (x0, y0), (x1, y1) = points[-2], points[-1]
        angle, size = math.atan2(y1 - y0, x1 - x0), 7 * self.scale
        self.draw.polygon([(x1, y1),
                           (x1 - size * math.cos(angle - 0.4), y1 - size * math.sin(angle - 0.4)),
                           (x1 - size * math.cos(angle + 0.4), y1 - size * math.sin(angle + 0.4))],
                          fill=color)
