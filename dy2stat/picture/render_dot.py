"""A scene as Graphviz DOT: groups and sub-blocks as clusters, Graphviz places them.

Node ids are the scene's (``n3``, ``g2``); names from the program appear only in
quoted labels (cut as in the other pictures), with quotes and backslashes (DOT's
own escapes, ``\\N``, ``\\l``) escaped, so a name stays one string and cannot
add an attribute (a ``URL`` that would become a link in the rendered SVG).
"""

from __future__ import annotations

from dy2stat.picture.scene import Group, Node, Scene

FILL = {"feed": "#d8ecff", "fetch": "#dff5d8", "param": "#f0f0f0"}
EDGE = {"result": ' [color="#2a8a2a"]', "carry": ' [color="#b08900"]', "data": ""}


def render(scene: Scene) -> str:
    out = ["digraph program {", "  rankdir=TB;", '  node [fontname="Helvetica"];']
    _children(scene.root, out, "  ")
    for edge in scene.edges:
        out.append(f"  {edge.source.id} -> {edge.target.id}{EDGE.get(edge.kind, '')};")
    out.append("}")
    return "\n".join(out)


def _string(text: str) -> str:
    """``text`` (printable already) as one DOT string; a newline is DOT's line break."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _children(group: Group, out: list, indent: str) -> None:
    for child in group.children:
        if isinstance(child, Node):
            out.append(f"{indent}{child.id} [{_node_attrs(child)}];")
            continue
        out.append(f"{indent}subgraph cluster_{child.id} {{")
        inner = indent + "  "
        out.append(f"{inner}label={_string(child.title)};")
        style = {"control": 'style="rounded,filled"; fillcolor="#fff6d5";',
                 "block": "style=dashed;"}.get(child.kind, "style=rounded;")
        out.append(f"{inner}{style}")
        if child.kind == "control":  # the frame's own node: edges into the op end here
            out.append(f"{inner}{child.id} [shape=box, style=bold, label={_string(child.title)}];")
        _children(child, out, inner)
        out.append(f"{indent}}}")


def _node_attrs(node: Node) -> str:
    attrs = [f"label={_string(chr(10).join(node.lines))}"]
    if node.kind in ("op", "layer"):
        attrs.insert(0, "shape=box")
    else:
        attrs.insert(0, "shape=ellipse")
    if node.kind in ("pass", "empty"):
        attrs.append("style=dashed")
    elif node.style in FILL:
        attrs.append(f'style=filled, fillcolor="{FILL[node.style]}"')
    return ", ".join(attrs)
