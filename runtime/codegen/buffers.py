"""Buffer reuse: which op of a generated function may write its result into an input.

An elementwise op writes into its first input (``v3 = add(v3, v2, out=v3)``)
when that input was allocated by an op known to allocate (``ALLOCATING``), is
dead after the op, shares its buffer with no live value nor another operand,
is not in the scope, and provably has the output's shape and dtype. Values
that may be views (``reshape``, ``getitem``, ``cast``, control-flow outputs,
...) are taken to share every input's buffer.
"""

from __future__ import annotations

from dy2stat.runtime.codegen.calls import BINARY, UNARY
from dy2stat.runtime.codegen.worker import OVERLAPPABLE

__all__ = ["ALLOCATING", "IN_PLACE", "REGION", "in_place_target", "keeps_shape",
           "track_buffers"]

# Ops that may write their result into their first input (``out=``).
IN_PLACE = frozenset(BINARY) | frozenset(UNARY) | {"relu"}
# The step of a native region (``runtime.lower``): its outputs are new arrays.
REGION = "native_region"
# Ops whose output is always a new buffer that nothing else references (a
# whitelist: reshape, transpose, getitem, expand, cast, sum_to_like, ... may
# return views of their input or the input itself). multi_tensor_adam's outputs
# are disjoint views of flat arrays it made, which only they reference.
ALLOCATING = (IN_PLACE | OVERLAPPABLE
              | {"matmul", "full", "full_like", "assign", "fused_elementwise", "multi_tensor_adam",
                 REGION})


def in_place_target(mod, step, holders):
    """The first input when ``step``'s op may write its result into it, else None.

    ``holders`` maps each buffer to the values that may hold it."""
    if step.op.type not in IN_PLACE or len(step.outs) != 1 or len(step.outs[0]) != 1:
        return None
    a, out = step.ins[0][0], step.outs[0][0]
    if not a.fresh or a.last_use != step.index or a.var is None or out.var is None:
        return None
    (buffer,) = a.buffers
    if buffer in mod.scope_buffers:
        return None
    if any(h is not a and h.last_use > step.index for h in holders[buffer]):
        return None  # a live view of the same buffer
    if any(v is not a and buffer in v.buffers for v in step.reads):
        return None  # another operand overlaps it
    others = [v.var.shape if v.var is not None else None for v in step.reads if v is not a]
    if a.var.dtype != out.var.dtype or not keeps_shape(a.var.shape, others, out.var.shape):
        return None
    return a


def track_buffers(mod, step, target, holders) -> None:
    """Give ``step``'s outputs their buffers: new ones (or the in-place
    ``target``'s) for allocating ops, every input's otherwise."""
    outs = [v for group in step.outs for v in group]
    if step.op.type in ALLOCATING:
        for v in outs:
            v.fresh = True
            v.buffers = target.buffers if target is not None else frozenset([mod.buffer()])
    else:  # may be a view of (or hold) any input, or a constant a sub-function returns
        union = frozenset().union(*(v.buffers for v in step.reads))
        for fn, _ in step.subs:
            union |= fn.result_buffers & mod.const_buffers
        for v in outs:
            v.buffers = union
    for v in outs:
        for b in v.buffers:
            holders[b].append(v)


def keeps_shape(shape, others, out_shape) -> bool:
    """Whether broadcasting ``others`` against ``shape`` provably gives ``shape``."""
    if not shape or tuple(shape) != tuple(out_shape):
        return False
    for other in others:
        if other is None or len(other) > len(shape):
            return False
        for d, o in zip(reversed(shape), reversed(other)):
            if o != 1 and (d == -1 or o != d):
                return False
    return True
