"""Views of a saved program for people: readable text and Graphviz DOT."""

from __future__ import annotations

from dy2stat.runtime import shapes
from dy2stat.runtime.ir import Block, Program
from dy2stat.runtime.registry import get_op


def text(program: Program, feed_names, fetch_names, params: dict) -> str:
    """Ops with shapes, sub-blocks indented under the op that owns them."""
    lines = [f"feeds:   {', '.join(_typed(program, n) for n in feed_names)}",
             f"fetches: {', '.join(_typed(program, n) for n in fetch_names)}"]
    total = sum(int(v.size) for v in params.values())
    lines.append(f"parameters: {len(params)} tensors, {total:,} values")
    for name, value in params.items():
        lines.append(f"  {name}: {value.dtype}{shapes.fmt(value.shape)}")
    lines.append("")
    lines += _block_text(program, program.global_block(), "")
    return "\n".join(lines)


def _typed(program, name) -> str:
    var = program.global_block().find_var(name)
    return f"{name}: {var.dtype}{shapes.fmt(var.shape)}" if var else name


def _block_text(program: Program, block: Block, indent: str) -> list:
    lines = []
    for op in block.ops:
        outs = ", ".join(_typed_in(block, n) for n in op.output_names())
        ins = ", ".join(op.input_names())
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
    return f"{name}: {var.dtype}{shapes.fmt(var.shape)}" if var else name


def _shown_attrs(op) -> str:
    """Attrs that differ from the op's defaults (sub-block indices left out)."""
    try:
        defaults = get_op(op.type).attrs
    except ValueError:
        defaults = {}
    shown = {k: v for k, v in op.attrs.items()
             if not k.endswith("_block") and defaults.get(k, object()) != v}
    return "  " + ", ".join(f"{k}={v!r}" for k, v in shown.items()) if shown else ""


def dot(program: Program, feed_names, fetch_names) -> str:
    """A Graphviz digraph: ops as boxes, values as ellipses, sub-blocks as clusters."""
    out = ["digraph program {", "  rankdir=TB;", '  node [fontname="Helvetica"];']
    counter = iter(range(1_000_000))
    _dot_block(program, program.global_block(), out, counter, "  ", set(feed_names),
               set(fetch_names))
    out.append("}")
    return "\n".join(out)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _dot_block(program, block, out, counter, indent, feeds, fetches) -> None:
    for name, var in block.vars.items():
        style = ""
        if name in feeds:
            style = ', style=filled, fillcolor="#d8ecff"'
        elif name in fetches:
            style = ', style=filled, fillcolor="#dff5d8"'
        elif var.persistable:
            style = ', style=filled, fillcolor="#f0f0f0"'
        label = f"{name}\\n{var.dtype}{shapes.fmt(var.shape)}"
        out.append(f'{indent}{_quote("v:" + name)} [shape=ellipse, label="{label}"{style}];')
    for op in block.ops:
        op_id = f"op{next(counter)}"
        out.append(f'{indent}{op_id} [shape=box, label={_quote(op.type)}];')
        for name in op.input_names():
            out.append(f"{indent}{_quote('v:' + name)} -> {op_id};")
        for name in op.output_names():
            out.append(f"{indent}{op_id} -> {_quote('v:' + name)};")
        for key in op.sub_blocks():
            sub = program.blocks[key]
            label = next(k for k, v in op.attrs.items() if k.endswith("_block") and v == key)
            out.append(f"{indent}subgraph cluster_{op_id}_{sub.idx} {{")
            out.append(f'{indent}  label={_quote(f"{op.type} {label} (block {sub.idx})")};')
            out.append(f"{indent}  style=rounded;")
            _dot_block(program, sub, out, counter, indent + "  ", feeds, fetches)
            out.append(f"{indent}}}")
