"""The program IR: Program -> Blocks -> Operators, with Variable descriptions.

Pure data: names, shapes (-1 for unknown dims), dtypes and attrs. Block 0 is
the global block; control-flow ops own sub-blocks (attrs holding a block
index). ``str(program)`` prints readable text.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from dy2stat.runtime import shapes


@dataclass
class Var:
    """A variable description: what inference knows about one value."""

    name: str
    shape: tuple
    dtype: np.dtype
    persistable: bool = False  # parameters and buffers: live across runs
    is_data: bool = False  # fed by the caller
    stop_gradient: bool = False

    def __str__(self) -> str:
        flags = "".join([" persistable" if self.persistable else "",
                         " data" if self.is_data else ""])
        return f"{self.name}: {self.dtype}{shapes.fmt(self.shape)}{flags}"


@dataclass
class Operator:
    """One op: its type, named slots holding variable names, and attrs."""

    type: str
    inputs: dict[str, list[str]]
    outputs: dict[str, list[str]]
    attrs: dict = field(default_factory=dict)
    # Where the op was built in the user's code (for run-time errors).
    origin: str = field(default="", compare=False, repr=False)
    # The Layers whose forward built it, outermost first (``LeNet/conv1``): for pictures.
    scope: str = field(default="", compare=False, repr=False)

    def input_names(self) -> list[str]:
        return [n for names in self.inputs.values() for n in names]

    def output_names(self) -> list[str]:
        return [n for names in self.outputs.values() for n in names]

    def sub_blocks(self) -> list[int]:
        return [v for k, v in self.attrs.items() if k.endswith("_block")]

    def __str__(self) -> str:
        def slots(d):
            return ", ".join(f"{k}=[{', '.join(v)}]" for k, v in d.items())

        attrs = {k: v for k, v in self.attrs.items() if not k.endswith("_block")}
        text = f"{slots(self.outputs)} = {self.type}({slots(self.inputs)})"
        return text + (f" {attrs}" if attrs else "")


class Block:
    """A list of ops and the variables they define; may read its parent's."""

    def __init__(self, program: Program, idx: int, parent_idx: int = -1):
        self.program = program
        self.idx = idx
        self.parent_idx = parent_idx
        self.vars: dict[str, Var] = {}
        self.ops: list[Operator] = []

    @property
    def parent(self) -> Block | None:
        return self.program.blocks[self.parent_idx] if self.parent_idx >= 0 else None

    def find_var(self, name: str) -> Var | None:
        """The variable visible here under ``name`` (this block, then its parents)."""
        block = self
        while block is not None:
            var = block.vars.get(name)
            if var is not None:
                return var
            block = block.parent
        return None

    def var(self, name: str) -> Var:
        var = self.find_var(name)
        if var is None:
            raise ValueError(f"block {self.idx}: no variable named {name!r}")
        return var

    def create_var(self, shape, dtype, name: str | None = None, **flags) -> Var:
        name = name or self.program.unique_name("tmp")
        if name in self.vars:
            raise ValueError(f"block {self.idx}: variable {name!r} is defined twice")
        return self.add_var(Var(name, tuple(int(d) for d in shape), np.dtype(dtype), **flags))

    def add_var(self, var: Var) -> Var:
        """Put ``var`` in this block under its name (the program learns the name)."""
        self.vars[var.name] = var
        if self.program._taken is not None:
            self.program._taken.add(var.name)
        self.program.bump()
        return var

    def append_op(self, op: Operator) -> Operator:
        self.ops.append(op)
        self.program.bump()
        return op

    def __str__(self) -> str:
        return "\n".join(self.program._block_lines(self, ""))


class Program:
    """A static program: blocks of ops over described variables."""

    def __init__(self):
        self.blocks: list[Block] = [Block(self, 0)]
        self._names = itertools.count()
        self._taken: set | None = None  # see _taken_names
        self.version = 0  # bumped on every change: executors re-plan when it moves
        self.random_seed = 0

    def bump(self) -> None:
        """Mark the program changed (executors plan it again)."""
        self.version += 1

    def unique_name(self, prefix: str) -> str:
        """A variable name starting with ``prefix`` that no block uses yet."""
        taken = self._taken_names()
        while True:
            name = f"{prefix}_{next(self._names)}"
            if name not in taken:
                taken.add(name)
                return name

    def _taken_names(self) -> set:
        """Every name a block of the program has used (made once, then kept up to date
        by ``Block.create_var``, ``Block.add_var`` and ``unique_name``): checking a new
        name against each block took time growing with the blocks of large programs."""
        if self._taken is None:
            self._taken = {n for b in self.blocks for n in b.vars}
        return self._taken

    def _forget_names(self) -> None:
        """Drop the set of used names (after replacing a block's table of variables)."""
        self._taken = None

    def global_block(self) -> Block:
        """Block 0, the program's top level."""
        return self.blocks[0]

    def create_block(self, parent_idx: int) -> Block:
        """A new sub-block whose parent is block ``parent_idx``."""
        block = Block(self, len(self.blocks), parent_idx)
        self.blocks.append(block)
        self.bump()
        return block

    def all_ops(self):
        """Every op of every block, outer ops before the ops of their sub-blocks."""
        def walk(block):
            for op in block.ops:
                yield op
                for idx in op.sub_blocks():
                    yield from walk(self.blocks[idx])

        yield from walk(self.global_block())

    def writes(self, op: Operator) -> set:
        """Names ``op`` writes, counting the ops of its sub-blocks."""
        names = set(op.output_names())
        for idx in op.sub_blocks():
            for inner in self.blocks[idx].ops:
                names |= self.writes(inner)
        return names

    def list_vars(self):
        """Every variable of every block."""
        for block in self.blocks:
            yield from block.vars.values()

    def persistables(self) -> list[Var]:
        """The persistable variables (parameters, buffers) of the global block."""
        return [v for v in self.global_block().vars.values() if v.persistable]

    def _block_lines(self, block: Block, indent: str) -> list[str]:
        lines = [f"{indent}block {block.idx}" + (f" (parent {block.parent_idx})"
                                                if block.parent_idx >= 0 else "") + ":"]
        for var in block.vars.values():
            lines.append(f"{indent}  var {var}")
        for op in block.ops:
            lines.append(f"{indent}  {op}")
            for key, idx in op.attrs.items():
                if key.endswith("_block"):
                    lines.append(f"{indent}    {key}:")
                    lines += self._block_lines(self.blocks[idx], indent + "      ")
        return lines

    def __str__(self) -> str:
        return "\n".join(self._block_lines(self.global_block(), ""))
