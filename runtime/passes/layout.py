"""Batch-minor layout: a program's image ops work on [C, H, W, N] arrays.

``batch_minor_layout(program, keep=())`` returns a new program in which every
convolution and max-pooling op of the global block (forward and gradients)
is replaced by its ``*_chwn`` form (``runtime/ops/conv.py``: images laid out
[C, H, W, N], the batch innermost). An elementwise op or a ``sum_to_like``
that reads such an op's result follows it into that layout when its other
operands allow (4-D, or a single value). A ``transpose`` gives each value the
layout its reader needs, so every name keeps its meaning: feeds, fetches (the
names in ``keep``) and values read by other ops stay NCHW.

Why: the NumPy convolution kernels work batch-minor anyway (their columns put
the batch innermost), so an NCHW chain transposes its images at every layer
and back; and on a small map, pooling and elementwise ops run along the batch
(64 values for LeNet) rather than along the map's rows (5 to 14). A NumPy
transpose is a view, so the layout changes at the chain's ends copy nothing
until a kernel reads them. Results equal the NCHW kernels' up to the
rounding of sums taken in another order: convolutions and filter gradients
on maps 16 or more wide multiply in other shapes, bias gradients sum with
the batch innermost, and a reduction (batch norm, a global mean) of a
transposed view runs over its memory in another order than over eager
mode's NCHW array. Converted
Layers therefore use it only when asked (the flag, off by default;
docs/performance.md says why it stays so).

For NumPy (cuDNN wants NCHW). Programs with sub-blocks come back unchanged.
The pass runs on programs whose backward is built: asking for the gradient
of a ``*_chwn`` form is an error.
"""

from __future__ import annotations

from dy2stat.runtime.ir import Block, Operator, Program
from dy2stat.runtime.ops.conv import CHWN_FORMS, TO_CHWN, TO_NCHW
from dy2stat.runtime.prune import copy_for_pass
from dy2stat.runtime.registry import get_op

__all__ = ["batch_minor_layout", "settings"]


class _Settings:
    """Whether converted Layers run their NumPy plans through this pass (the flag
    ``batch_minor_layout``; plans compiled from then on). Off by default: its
    sums run in another order than eager mode's kernels (see the module doc)."""

    def __init__(self):
        self.enabled = False


settings = _Settings()


def batch_minor_layout(program: Program, keep=()) -> Program:
    """``program`` with its image ops in the [C, H, W, N] layout (see the module doc)."""
    result, keep = copy_for_pass(program, keep, "batch_minor_layout")
    block = result.global_block()
    if len(result.blocks) == 1 and any(op.type in CHWN_FORMS for op in block.ops):
        _Rewrite(result, block, keep).run()
        result.bump()
    return result


class _Rewrite:
    def __init__(self, program: Program, block: Block, keep: set):
        self.program, self.block, self.keep = program, block, keep
        self.chwn: dict[str, str] = {}  # name -> the name of its [C, H, W, N] value
        self.made_chwn: set[str] = set()  # names an op computes as [C, H, W, N]
        self.missing: set[str] = set()  # of those, names whose NCHW value is not made yet
        self.ops: list[Operator] = []
        self.wanted = self._wanted()

    def run(self) -> None:
        for op in self.block.ops:
            images = self._images(op)
            if images is None:
                for name in op.input_names():
                    self._as_nchw(name, op)
                self.ops.append(op)
                continue
            inputs = {slot: [self._as_chwn(n, op) if n in images else n for n in names]
                      for slot, names in op.inputs.items()}
            image_out = CHWN_FORMS[op.type][1] if op.type in CHWN_FORMS else True
            outputs = {slot: [self._chwn_out(n) if image_out else n for n in names]
                       for slot, names in op.outputs.items()}
            kind = f"{op.type}_chwn" if op.type in CHWN_FORMS else op.type
            self.ops.append(Operator(kind, inputs, outputs, dict(op.attrs),
                                     origin=op.origin, scope=op.scope))
            for name in op.output_names():  # a fetched value is made NCHW at once:
                if name in self.keep:  # its view keeps later ops from writing over it
                    self._as_nchw(name, op)
        self.block.ops = self.ops

    def _images(self, op: Operator) -> set | None:
        """The inputs ``op`` reads as [C, H, W, N] images if it changes layout, else None."""
        if op.type in CHWN_FORMS:
            names = self._image_inputs(op)
            return names if all(self._ndim(n) == 4 for n in names) else None
        if not self._can_follow(op):
            return None
        ins = op.input_names()
        if not (op.output_names()[0] in self.wanted or any(n in self.made_chwn for n in ins)):
            return None
        return {n for n in ins if self._ndim(n) == 4}

    def _wanted(self) -> set:
        """Names some ``*_chwn`` op reads as an image, directly or through ops that
        can follow the layout: making those ops follow it reads their inputs once
        in NCHW order instead of the image op reading them strided several times."""
        wanted: set[str] = set()
        for op in reversed(self.block.ops):
            if op.type in CHWN_FORMS:
                wanted |= self._image_inputs(op)
            elif self._can_follow(op) and op.output_names()[0] in wanted:
                wanted |= {n for n in op.input_names() if self._ndim(n) == 4}
        return wanted

    @staticmethod
    def _image_inputs(op: Operator) -> set:
        return {n for slot in CHWN_FORMS[op.type][0] for n in op.inputs.get(slot, ())}

    def _can_follow(self, op: Operator) -> bool:
        """An elementwise op or sum_to_like with one 4-D result whose operands are
        4-D or single values (a lower-rank operand would broadcast along other axes)."""
        if op.type != "sum_to_like" and not get_op(op.type).elementwise:
            return False
        outs = op.output_names()
        return (len(outs) == 1 and self._ndim(outs[0]) == 4
                and all(self._ndim(n) == 4 or self._single(n) for n in op.input_names()))

    def _ndim(self, name: str) -> int:
        var = self.block.find_var(name)
        return -1 if var is None else len(var.shape)

    def _single(self, name: str) -> bool:
        var = self.block.find_var(name)
        return var is not None and all(d == 1 for d in var.shape)

    def _as_chwn(self, name: str, reader: Operator) -> str:
        """The [C, H, W, N] value of ``name``, transposed from NCHW on first need."""
        if name not in self.chwn:
            self.chwn[name] = self._permuted_var(name, TO_CHWN)
            self._emit_transpose(name, self.chwn[name], TO_CHWN, reader)
        return self.chwn[name]

    def _chwn_out(self, name: str) -> str:
        self.chwn[name] = self._permuted_var(name, TO_CHWN)
        self.made_chwn.add(name)
        self.missing.add(name)
        return self.chwn[name]

    def _as_nchw(self, name: str, reader: Operator) -> None:
        """Make ``name`` itself (NCHW) from its [C, H, W, N] value when not made yet."""
        if name in self.missing:
            self.missing.discard(name)
            self._emit_transpose(self.chwn[name], name, TO_NCHW, reader)

    def _permuted_var(self, name: str, perm) -> str:
        """A new variable holding ``name`` with its axes in ``perm`` order."""
        var = self.block.find_var(name)
        base = f"{name}@chwn"
        if any(base in b.vars for b in self.program.blocks):
            base = self.program.unique_name(base)
        return self.block.create_var([var.shape[p] for p in perm], var.dtype, name=base,
                                     stop_gradient=var.stop_gradient).name

    def _emit_transpose(self, source: str, target: str, perm, reader: Operator) -> None:
        self.ops.append(Operator("transpose", {"X": [source]}, {"Out": [target]},
                                 {"perm": list(perm)}, origin=reader.origin,
                                 scope=reader.scope))
