"""Views of a saved program for people: readable text and JSON (pictures: ``picture``).

A program file may name its variables anything: every name and attr taken
from it is escaped for the view it goes into -- non-printable characters
(terminal escapes, right-to-left overrides, newlines) are shown as escapes.
"""

from __future__ import annotations

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
        lines.append(indent + op_line(block, op))
        for key in op.sub_blocks():
            sub = program.blocks[key]
            label = next(k for k, v in op.attrs.items() if k.endswith("_block") and v == key)
            lines.append(f"{indent}  {label} (block {sub.idx}):")
            lines += _block_text(program, sub, indent + "    ")
    return lines


def op_line(block: Block, op) -> str:
    """``op`` in one line: ``y: float32[2] = relu(x)``, then attrs that are not defaults."""
    outs = ", ".join(_typed_in(block, n) for n in op.output_names())
    ins = ", ".join(printable(n) for n in op.input_names())
    return f"{outs} = {op.type}({ins}){_shown_attrs(op)}"


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
