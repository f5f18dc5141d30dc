"""Appending ops to a block: promotion, scalar constants, inference, outputs.

The one place where a static op is built. The frontend's static dispatcher
and the backward pass's block emitter both call ``append``; values are
``Var`` descriptions (a Python scalar may stand for a constant input).
"""

from __future__ import annotations

from dy2stat.runtime import dtypes
from dy2stat.runtime.ir import Block, Operator, Var
from dy2stat.runtime.registry import Meta, OpDef, get_op

_SCALARS = (int, float, bool)


def append(block: Block, op_type: str | OpDef, inputs, attrs: dict):
    """Append one op; return its output Var (or a tuple/list of Vars, by slot)."""
    op = get_op(op_type) if isinstance(op_type, str) else op_type
    if len(inputs) > len(op.inputs):
        raise TypeError(f"{op.type}: takes {len(op.inputs)} inputs, got {len(inputs)}")
    inputs = list(inputs) + [None] * (len(op.inputs) - len(inputs))
    full = op.full_attrs(attrs)
    inputs = _promote(block, op, inputs)
    metas = []
    for slot, value in zip(op.inputs, inputs):
        if slot.variadic:
            metas.append([_meta(v) for v in value])
        else:
            if value is None and not slot.optional:
                raise TypeError(f"{op.type}: input {slot.name} is required")
            metas.append(_meta(value) if value is not None else None)
    inferred = op.infer(*metas, **full)  # checks the input dtypes first
    out_vars, out_slots = _outputs(block, op, inferred)
    block.append_op(Operator(
        op.type,
        {slot.name: _names(value) for slot, value in zip(op.inputs, inputs)},
        out_slots,
        full,
    ))
    return out_vars


def constant(block: Block, value, dtype) -> Var:
    """A 0-d constant of ``dtype`` (how Python scalars enter a program)."""
    return append(block, "full", [], {"shape": [], "value": float(value), "dtype": str(dtype)})


def _meta(value) -> Meta:
    return Meta(value.shape, value.dtype)


def _names(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [v.name for v in value]
    return [value.name]


def _promote(block, op, inputs):
    """Scalars become constants and promoted slots get one dtype (DESIGN.md rules)."""
    if not op.promote:
        return [_constant_or_value(block, v) for v in inputs]
    target = dtypes.common_dtype([inputs[i] for i in op.promote])
    result = list(inputs)
    for i in op.promote:
        v = result[i]
        if v is None:
            continue
        if type(v) in _SCALARS:
            result[i] = constant(block, v, target)
        elif v.dtype != target:
            result[i] = append(block, "cast", [v], {"dtype": str(target)})
    return [_constant_or_value(block, v) for v in result]


def _constant_or_value(block, value):
    if type(value) in _SCALARS:
        return constant(block, value, dtypes.scalar_dtype(value))
    return value


def _outputs(block, op, inferred):
    """Create the output vars; return (what to hand back, the slot -> names map)."""
    if len(op.outputs) == 1:
        inferred = (inferred,)
    slots, results = {}, []
    for slot, meta in zip(op.outputs, inferred):
        if slot.variadic:
            made = [_new_var(block, op, m) for m in meta]
            slots[slot.name] = [v.name for v in made]
            results.append(made)
        elif meta is None:
            slots[slot.name] = []
            results.append(None)
        else:
            var = _new_var(block, op, meta)
            slots[slot.name] = [var.name]
            results.append(var)
    return (results[0] if len(results) == 1 else tuple(results)), slots


def _new_var(block, op, meta) -> Var:
    return block.create_var(meta.shape, meta.dtype, name=block.program.unique_name(op.type))
