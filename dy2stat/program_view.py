"""Views of a saved program for people: readable text, JSON and Graphviz DOT.

A program file may name its variables anything: every name and attr taken
from it is escaped for the view it goes into -- non-printable characters
(terminal escapes, right-to-left overrides, newlines) are shown as escapes
in every view, quotes and backslashes are escaped in DOT strings, so a name
stays one label and cannot add attributes (a ``URL`` in the rendered SVG).
"""

from __future__ import annotations

import itertools
import json

from dy2stat.runtime import serialize, shapes
from dy2stat.runtime.ir import Block, Program
from dy2stat.runtime.quoting import printable
from dy2stat.runtime.registry import get_op


def text(program: Program, feed_names, fetch_names, params: dict) -> str:
    """Ops with shapes, sub-blocks indented under the op that owns them."""
    lines = [f"feeds:   {', '.join(_typed(program, n) for n in feed_names)}",
             f"fetches: {', '.join(_typed(program, n) for n in fetch_names)}"]
    total = sum(int(v.size) for v in params.values())
    lines.append(f"parameters: {len(params)} tensors, {total:,} values")
    for name, value in params.items():
        lines.append(f"  {printable(name)}: {value.dtype}{shapes.fmt(value.shape)}")
    lines.append("")
    lines += _block_text(program, program.global_block(), "")
    return "\n".join(lines)


def json_text(program: Program, feed_names, fetch_names) -> str:
    """The program file's JSON, with non-printable characters in strings escaped
    (``\\u202e``; JSON itself already escapes control characters below U+0020)."""
    text = serialize.program_to_json(program, feed_names, fetch_names)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == "\n" else json.dumps(c)[1:-1] for c in text)


def _typed(program, name) -> str:
    return _typed_in(program.global_block(), name)


def _block_text(program: Program, block: Block, indent: str) -> list:
    lines = []
    for op in block.ops:
        outs = ", ".join(_typed_in(block, n) for n in op.output_names())
        ins = ", ".join(printable(n) for n in op.input_names())
        attrs = _shown_attrs(op)
        lines.append(f"{indent}{outs} = {op.type}({ins}){attrs}")
        for key in op.sub_blocks():
            sub = program.blocks[key]
            label = next(k for k, v in op.attrs.items() if k.endswith("_block") and v == key)
            lines.append(f"{indent}  {label} (block {sub.idx}):")
            lines += _block_text(program, sub, indent + "    ")
    return lines


def _typed_in(block: Block, name: str) -> str:
    var = block.find_var(name)
    shown = printable(name)
    return f"{shown}: {var.dtype}{shapes.fmt(var.shape)}" if var else shown


def _shown_attrs(op) -> str:
    """Attrs that differ from the op's defaults (sub-block indices left out)."""
    try:
        defaults = get_op(op.type).attrs
    except ValueError:
        defaults = {}
    shown = {k: v for k, v in op.attrs.items()
             if not k.endswith("_block") and defaults.get(k, object()) != v}
    return "  " + ", ".join(f"{k}={printable(repr(v))}" for k, v in shown.items()) if shown else ""


def dot(program: Program, feed_names, fetch_names) -> str:
    """A Graphviz digraph: ops as boxes, values as ellipses, sub-blocks as clusters.

    Node ids are made here (``v0``, ``op0``); names from the program appear only
    in escaped labels."""
    out = ["digraph program {", "  rankdir=TB;", '  node [fontname="Helvetica"];']
    view = _DotView(program, set(feed_names), set(fetch_names), out)
    view.block(program.global_block(), "  ")
    out.append("}")
    return "\n".join(out)


def _escape(text: str) -> str:
    """``text`` for inside a DOT string: printable, with its backslashes (DOT's own
    escapes such as ``\\N`` and ``\\l``) and quotes escaped."""
    return printable(text).replace("\\", "\\\\").replace('"', '\\"')


def _label(*lines: str) -> str:
    """Lines as one DOT string, joined by DOT's line break."""
    return '"' + "\\n".join(map(_escape, lines)) + '"'


class _DotView:
    def __init__(self, program, feeds, fetches, out):
        self.program, self.feeds, self.fetches, self.out = program, feeds, fetches, out
        self.ids: dict[str, str] = {}  # variable name -> node id (one node per name)
        self.ops = itertools.count()

    def var(self, name: str) -> str:
        return self.ids.setdefault(name, f"v{len(self.ids)}")

    def block(self, block: Block, indent: str) -> None:
        out = self.out
        for name, var in block.vars.items():
            style = ""
            if name in self.feeds:
                style = ', style=filled, fillcolor="#d8ecff"'
            elif name in self.fetches:
                style = ', style=filled, fillcolor="#dff5d8"'
            elif var.persistable:
                style = ', style=filled, fillcolor="#f0f0f0"'
            label = _label(name, f"{var.dtype}{shapes.fmt(var.shape)}")
            out.append(f"{indent}{self.var(name)} [shape=ellipse, label={label}{style}];")
        for op in block.ops:
            op_id = f"op{next(self.ops)}"
            out.append(f"{indent}{op_id} [shape=box, label={_label(op.type)}];")
            for name in op.input_names():
                out.append(f"{indent}{self.var(name)} -> {op_id};")
            for name in op.output_names():
                out.append(f"{indent}{op_id} -> {self.var(name)};")
            for key in op.sub_blocks():
                sub = self.program.blocks[key]
                label = next(k for k, v in op.attrs.items() if k.endswith("_block") and v == key)
                out.append(f"{indent}subgraph cluster_{op_id}_{sub.idx} {{")
                out.append(f"{indent}  label={_label(f'{op.type} {label} (block {sub.idx})')};")
                out.append(f"{indent}  style=rounded;")
                self.block(sub, indent + "  ")
                out.append(f"{indent}}}")
