"""Multi-tensor Adam: a run of ``adam`` (or ``adamw``) updates becomes one op.

An optimizer's step updates its parameters one after another, each with a dozen
elementwise calls; for a model of many small parameters (biases) the calls cost more
than the arithmetic. Consecutive updates of one kind, with the same attrs and
learning rate and one dtype, become one ``multi_tensor_adam`` op that runs the same
elementwise operations once over flat arrays -- the same operations on the same
values, so the same bits -- and returns each result as views of one flat array, so
that the next step reads those flat arrays without copying them (only the gradients
are copied in). Updates are left alone when one reads what an earlier one writes (a
parameter updated twice).

``multi_tensor_adam(program, keep=())`` returns a new program.
"""

from __future__ import annotations

from dy2stat.runtime.ir import Block, Operator, Program
from dy2stat.runtime.prune import copy_for_pass
from dy2stat.runtime.registry import get_op

__all__ = ["multi_tensor_adam"]

_SLOTS = {"Param": "ParamOut", "Grad": None, "Moment1": "Moment1Out",
          "Moment2": "Moment2Out", "Beta1Pow": "Beta1PowOut", "Beta2Pow": "Beta2PowOut"}


def multi_tensor_adam(program: Program, keep=()) -> Program:
    """``program`` with each run of two or more compatible updates merged."""
    result, _ = copy_for_pass(program, keep, "multi_tensor_adam")
    for block in result.blocks:
        _merge_in_block(block)
    result.bump()
    return result


def _merge_in_block(block: Block) -> None:
    ops, run = [], []
    for op in block.ops:
        if run and not _joins(block, run, op):
            ops += _merged(run)
            run = []
        if _key(block, op) is not None:
            run.append(op)
        else:
            ops.append(op)
    ops += _merged(run)
    block.ops = ops


def _key(block: Block, op: Operator):
    """What updates merged together share (None: not an update this pass merges)."""
    if op.type not in ("adam", "adamw"):
        return None
    param = block.find_var(op.inputs["Param"][0])
    metas = [block.find_var(op.inputs[slot][0]) for slot in _SLOTS]
    if param is None or any(m is None or m.dtype != param.dtype or -1 in m.shape
                            for m in metas):
        return None
    attrs = get_op(op.type).full_attrs(op.attrs)
    return (op.type, tuple(sorted((k, repr(v)) for k, v in attrs.items())),
            op.inputs["LearningRate"][0], str(param.dtype))


def _joins(block: Block, run: list, op: Operator) -> bool:
    written = {n for member in run for n in member.output_names()}
    return (_key(block, op) == _key(block, run[0])
            and not written & set(op.input_names()))


def _merged(run: list) -> list:
    if len(run) < 2:
        return run
    first = run[0]
    attrs = get_op(first.type).full_attrs(first.attrs)
    if first.type == "adamw":
        attrs["coeff"] = float(attrs["coeff"])
    else:
        attrs.pop("coeff", None)
    inputs = {slot: [op.inputs[slot][0] for op in run] for slot in _SLOTS}
    inputs["LearningRate"] = list(first.inputs["LearningRate"])
    outputs = {out: [op.outputs[out][0] for op in run] for out in _SLOTS.values() if out}
    return [Operator("multi_tensor_adam", inputs, outputs, attrs, origin=first.origin)]
