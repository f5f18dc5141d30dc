"""A placed scene as SVG: one ``<g>`` per node and group, nested as the groups are.

Each node and group carries a ``<title>`` (its details: a browser shows them as a
tooltip), its kind in ``class`` (``node op``, ``group layer``, ...) and a Layer
group its scope path in ``data-scope``; each edge is a ``<path class="edge ...">``
with ``data-from``/``data-to`` naming the ids of its ends, drawn inside the group
where it was laid out. Text from the scene is escaped for XML; nothing from the
program becomes an element, an attribute name, a link or a style.
"""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from dy2stat.picture.layout import LINE_HEIGHT
from dy2stat.picture.scene import Group, Node, Scene

FILL = {"feed": "#d8ecff", "fetch": "#dff5d8", "param": "#eeeeee", "": "#ffffff"}
GROUP_FILL = {"layer": "#4a7bd0", "control": "#fff6d5", "block": "#fafafa", "program": "#ffffff"}
STYLE = """
text { font-family: monospace; font-size: 12px; fill: #222; }
.group > text { font-weight: bold; fill: #444; }
.node.op > rect { fill: #ffffff; stroke: #333; }
.node.value > rect { stroke: #777; }
.node.pass > rect, .node.empty > rect { fill: #ffffff; stroke: #999; stroke-dasharray: 4 3; }
.node.empty > text { font-style: italic; fill: #777; }
.node.layer > rect { fill: #dce6f7; stroke: #4a7bd0; }
.group.layer > rect { fill-opacity: 0.08; stroke: #4a7bd0; }
.group.control > rect { stroke: #b08900; }
.group.block > rect { stroke: #999; stroke-dasharray: 5 3; }
.edge { fill: none; stroke: #666; stroke-width: 1.2; }
.edge.result { stroke: #2a8a2a; }
.edge.carry { stroke: #b08900; }
.edge.back { stroke-dasharray: 5 4; }
"""


def render(scene: Scene) -> str:
    """The SVG document of ``scene`` (placed by ``layout.place``)."""
    root = scene.root
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<svg xmlns="http://www.w3.org/2000/svg" width="{root.w:.0f}" '
           f'height="{root.h:.0f}" viewBox="0 0 {root.w:.0f} {root.h:.0f}">',
           f"<style>{STYLE}</style>",
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" '
           'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
           '<path d="M0,0 L10,5 L0,10 z" fill="#666"/></marker></defs>',
           f'<rect width="{root.w:.0f}" height="{root.h:.0f}" fill="#ffffff"/>']
    _group(root, out, "")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _group(group: Group, out: list, indent: str) -> None:
    scope = f" data-scope={quoteattr(group.scope)}" if group.scope else ""
    out.append(f'{indent}<g id="{group.id}" class="group {group.kind}"{scope}>')
    inner = indent + "  "
    if group.details:
        out.append(f"{inner}<title>{escape(group.details)}</title>")
    if group.kind != "program":
        out.append(f'{inner}<rect x="{group.x:.1f}" y="{group.y:.1f}" width="{group.w:.1f}" '
                   f'height="{group.h:.1f}" rx="6" fill="{GROUP_FILL[group.kind]}"/>')
    if group.title:
        out.append(f'{inner}<text x="{group.x + 8:.1f}" y="{group.y + 13:.1f}">'
                   f"{escape(group.title)}</text>")
    # inner groups, then the edges over them, then this group's own nodes over the edges
    for child in group.children:
        if isinstance(child, Group):
            _group(child, out, inner)
    for edge in group.edges:
        kind = edge.kind + (" back" if edge.back else "")
        path = " L".join(f"{x:.1f},{y:.1f}" for x, y in edge.points)
        title = f"<title>{escape(edge.details)}</title>" if edge.details else ""
        out.append(f'{inner}<path class="edge {kind}" data-from="{edge.source.id}" '
                   f'data-to="{edge.target.id}" d="M{path}" marker-end="url(#arrow)">'
                   f"{title}</path>")
    for child in group.children:
        if isinstance(child, Node):
            _node(child, out, inner)
    out.append(f"{indent}</g>")


def _node(node: Node, out: list, indent: str) -> None:
    style = f" {node.style}" if node.style else ""
    out.append(f'{indent}<g id="{node.id}" class="node {node.kind}{style}">'
               f"<title>{escape(node.details)}</title>")
    radius = node.h / 2 if node.kind in ("value", "pass") else 4
    fill = f' fill="{FILL[node.style]}"' if node.kind == "value" else ""
    out.append(f'{indent}  <rect x="{node.x:.1f}" y="{node.y:.1f}" width="{node.w:.1f}" '
               f'height="{node.h:.1f}" rx="{radius:.1f}"{fill}/>')
    cx = node.x + node.w / 2
    top = node.y + (node.h - len(node.lines) * LINE_HEIGHT) / 2
    for k, line in enumerate(node.lines):
        size = "" if k == 0 else ' style="font-size: 10px; fill: #666"'
        out.append(f'{indent}  <text x="{cx:.1f}" y="{top + (k + 0.75) * LINE_HEIGHT:.1f}" '
                   f'text-anchor="middle"{size}>{escape(line)}</text>')
    out.append(f"{indent}</g>")
