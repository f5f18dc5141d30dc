"""Lowering a dy2stat program to an ONNX model: one rule per op type, in one table.

``RULES`` maps an op type to its rule, ``rule(ctx)``: it reads the op's inputs
(ONNX value names, cast to the dtype it asks for) and attrs from ``ctx``, emits
ONNX nodes with ``ctx.g`` (a ``graph.Graph``) and binds each output of the op
with ``ctx.output`` to a value of exactly the dtype the program declares for it.
Rules register with ``@rule("op", ...)``; the op types that have no ONNX form
are in ``REFUSED`` with the reason, and ``unsupported`` says why for any other.
A rule that meets a case it cannot express raises ``Unsupported``; either way the
export fails with an ``ExportError`` naming the op and the line of the user's
code that built it.

Control-flow ops lower their sub-blocks into ONNX sub-graphs (``If`` branches,
``Loop`` bodies) through ``ctx.lower_block``; a sub-block reads the values of the
blocks around it by name, as ONNX sub-graphs read the graphs around them.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from dy2stat.onnx.errors import ExportError
from dy2stat.onnx.graph import Graph
from dy2stat.runtime.ir import Block, Operator, Program, Var
from dy2stat.runtime.ops.control_flow import attr_names
from dy2stat.runtime.registry import OPS

RULES: dict[str, Callable] = {}
REFUSED: dict[str, str] = {}


def rule(*op_types: str):
    """Register the decorated function as the ONNX rule of ``op_types``."""
    def register(fn):
        for op_type in op_types:
            if op_type in RULES or op_type in REFUSED:
                raise ValueError(f"op {op_type!r} has two ONNX rules")
            RULES[op_type] = fn
        return fn

    return register


def refuse(reason: str, *op_types: str) -> None:
    """Record that ``op_types`` have no ONNX form, and why."""
    for op_type in op_types:
        if op_type in RULES or op_type in REFUSED:
            raise ValueError(f"op {op_type!r} has two ONNX rules")
        REFUSED[op_type] = reason


def unsupported(op_type: str) -> str:
    """Why ``op_type`` cannot be exported (for an op without a rule)."""
    if op_type in REFUSED:
        return REFUSED[op_type]
    if op_type in OPS:
        return "has no ONNX mapping"
    return "is not an op of the registry"


class Unsupported(Exception):
    """Raised by a rule for a case of its op that ONNX cannot express (the reason)."""


_ORIGIN = re.compile(r'\s*File "(.*)", line (\d+)\n\s*(.*)', re.DOTALL)


def _error(block: Block, index: int, op: Operator, reason: str) -> ExportError:
    match = _ORIGIN.fullmatch(op.origin or "")
    if match is None:
        where = (f"(block {block.idx}, op {index}; the program does not record the line "
                 "that built it)")
        return ExportError(op.type, where, reason)
    filename, lineno, source = match[1], int(match[2]), match[3].strip()
    return ExportError(op.type, f"at {filename}:{lineno} (`{source}`)", reason,
                       filename, lineno, source)


class Scope:
    """dy2stat variable names -> ONNX value names; a sub-block's scope sees its parent's."""

    def __init__(self, parent: Scope | None = None):
        self.parent = parent
        self.values: dict[str, str] = {}

    def __getitem__(self, name: str) -> str:
        scope = self
        while scope is not None:
            if name in scope.values:
                return scope.values[name]
            scope = scope.parent
        raise KeyError(f"the program reads {name!r}, which no op computes")

    def bind(self, name: str, value: str) -> None:
        self.values[name] = value

    def child(self) -> Scope:
        return Scope(self)


def read_names(program: Program) -> set:
    """Every variable name some op of ``program`` reads (control-flow attrs included)."""
    names = set()
    for op in program.all_ops():
        names.update(op.input_names())
        names.update(attr_names(op))
    return names


class Lowering:
    """Lowers the blocks of one program; ``read`` are the names something reads."""

    def __init__(self, program: Program, read: set):
        self.program = program
        self.read = read

    def block(self, graph: Graph, idx: int, scope: Scope) -> None:
        block = self.program.blocks[idx]
        for index, op in enumerate(block.ops):
            fn = RULES.get(op.type)
            if fn is None:
                raise _error(block, index, op, unsupported(op.type))
            outs = op.output_names()
            graph.label = outs[0] if outs else op.type
            match = _ORIGIN.fullmatch(op.origin or "")
            graph.doc = f"{match[1]}:{match[2]}: {match[3].strip()}" if match else ""
            try:
                fn(OpContext(self, graph, block, op, scope))
            except Unsupported as exc:
                raise _error(block, index, op, str(exc)) from None


class OpContext:
    """What a rule sees of the op it lowers."""

    def __init__(self, lowering: Lowering, graph: Graph, block: Block, op: Operator,
                 scope: Scope):
        self.lowering, self.g, self.block, self.op, self.scope = (
            lowering, graph, block, op, scope)
        self.attrs = {**OPS[op.type].attrs, **op.attrs} if op.type in OPS else dict(op.attrs)

    @property
    def type(self) -> str:
        return self.op.type

    # ----------------------------------------------------------------- inputs

    def has(self, slot: str) -> bool:
        return bool(self.op.inputs.get(slot))

    def count(self, slot: str) -> int:
        return len(self.op.inputs.get(slot, []))

    def meta(self, slot: str = "X", i: int = 0) -> Var:
        """The program's description (shape, dtype) of an input."""
        return self.block.var(self.op.inputs[slot][i])

    def metas(self, slot: str) -> list[Var]:
        return [self.block.var(n) for n in self.op.inputs.get(slot, [])]

    def input(self, slot: str = "X", i: int = 0, dtype=None) -> str:
        """The ONNX value of an input, cast to ``dtype`` when given."""
        name = self.op.inputs[slot][i]
        value = self.scope[name]
        return value if dtype is None else self.g.cast(value, self.block.var(name).dtype, dtype)

    def inputs(self, slot: str, dtype=None) -> list[str]:
        return [self.input(slot, i, dtype) for i in range(self.count(slot))]

    # ---------------------------------------------------------------- outputs

    def out_meta(self, slot: str = "Out", i: int = 0) -> Var:
        return self.block.var(self.op.outputs[slot][i])

    @property
    def dtype(self) -> np.dtype:
        """The dtype of the op's first output."""
        return self.block.var(self.op.output_names()[0]).dtype

    def wanted(self, slot: str, i: int = 0) -> bool:
        """Whether anything reads this output (an unread one need not be computed)."""
        names = self.op.outputs.get(slot, [])
        return i < len(names) and names[i] in self.lowering.read

    def output(self, value: str, slot: str = "Out", i: int = 0, have=None) -> None:
        """Bind an output to ``value``, which has the declared dtype (or ``have``,
        and is cast)."""
        name = self.op.outputs[slot][i]
        if have is not None:
            value = self.g.cast(value, have, self.block.var(name).dtype)
        self.scope.bind(name, value)

    # ----------------------------------------------------------- sub-blocks

    def lower_block(self, idx: int, graph: Graph, scope: Scope) -> None:
        self.lowering.block(graph, idx, scope)

    def sub_block(self, idx: int) -> Block:
        return self.lowering.program.blocks[idx]
