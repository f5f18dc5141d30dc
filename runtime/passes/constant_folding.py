"""Constant folding: ops that compute only from constants are run at compile time.

``fold_constants(program, keep=())`` returns a new program (the input is not
changed). Constants are the outputs of ops without inputs that are not
random (``full``, ``arange``, ``linspace``, ``eye``) and of ops folded
before. In every block, in op order, an op whose inputs are all constants is
evaluated with the NumPy kernel when it is not random, owns no sub-block, has
outputs (``print`` and ``assert`` have none: they are effects), writes no
persistable or data variable and its outputs are small (``MAX_ELEMENTS``).
A sub-block sees the constants of the blocks around it.

A folded op whose every output is uniform (all elements equal, bit for bit)
becomes ``full`` ops writing the same names, so every name stays as it was:
fetched values, names read by sub-blocks and control-flow attrs included.
An output that is not uniform keeps its op (there is no array-constant op),
but its value still feeds the folding of the ops that read it. Constants
that were read before the pass and are read by nothing afterwards are
dropped, unless they are in ``keep`` (pass the fetch names) or named by a
control-flow op.
"""

from __future__ import annotations

import numpy as np

from dy2stat.runtime import shapes
from dy2stat.runtime.ir import Block, Operator, Program
from dy2stat.runtime.ops.control_flow import CONTROL_FLOW, attr_names
from dy2stat.runtime.prune import copy_for_pass
from dy2stat.runtime.registry import OPS

__all__ = ["MAX_ELEMENTS", "evaluate", "fold_constants"]

# Values larger than this (elements) are not computed at compile time.
MAX_ELEMENTS = 1 << 20


def fold_constants(program: Program, keep=()) -> Program:
    """``program`` with its constant computations folded (see the module doc)."""
    result, keep = copy_for_pass(program, keep, "fold_constants")
    read_before = _read_names(result)
    constants: set[str] = set()
    _fold_block(result, result.global_block(), {}, constants, set())
    _drop_unread(result, constants, read_before, keep)
    result.bump()
    return result




def _fold_block(program: Program, block: Block, outer: dict, constants: set, done: set):
    """Fold ``block``'s ops in order; ``outer`` holds the enclosing blocks' constants."""
    done.add(block.idx)
    # A name this block (or a block between) declares again is not the outer value.
    known = {n: (v, var) for n, (v, var) in outer.items() if block.find_var(n) is var}
    ops = []
    for op in block.ops:
        for idx in op.sub_blocks():
            if idx not in done:
                _fold_block(program, program.blocks[idx], known, constants, done)
        values = _evaluate(block, op, known)
        if values is None:
            ops.append(op)
            continue
        constants.update(values)
        known.update((n, (v, block.vars[n])) for n, v in values.items())
        ops.extend(_as_constants(op, values))
    block.ops = ops


def _evaluate(block: Block, op: Operator, known: dict) -> dict | None:
    """name -> array of ``op``'s outputs when it can be folded, else None."""
    return evaluate(op, block.vars.get, lambda n: known[n][0] if n in known else None)


def evaluate(op: Operator, var_of, value_of) -> dict | None:
    """name -> array of ``op``'s outputs when it can be computed now, else None.

    ``var_of(name)`` gives an output's variable (None: unknown), ``value_of(name)``
    an input's constant value (None: not a constant). The rules are the module
    doc's: not random, no sub-block, outputs that are small and neither
    persistable nor data, every input a constant, a kernel that succeeds and
    gives the inferred dtypes and shapes."""
    opdef = OPS.get(op.type)
    if opdef is None or opdef.random or op.type in CONTROL_FLOW or op.sub_blocks():
        return None
    outs = op.output_names()
    out_vars = [var_of(n) for n in outs]
    if not outs or any(v is None or v.persistable or v.is_data for v in out_vars):
        return None
    if any(not 0 <= shapes.numel(v.shape) <= MAX_ELEMENTS for v in out_vars):
        return None
    inputs = {n: value_of(n) for n in op.input_names()}
    if any(v is None for v in inputs.values()):
        return None
    args = []
    for slot in opdef.inputs:
        names = op.inputs.get(slot.name, [])
        if slot.variadic:
            args.append([inputs[n] for n in names])
        else:
            args.append(inputs[names[0]] if names else None)
    try:
        with np.errstate(all="ignore"):  # the program warns when it runs, not when built
            result = opdef.kernel(np, *args, **opdef.full_attrs(op.attrs))
    except Exception:  # noqa: BLE001 - an op that fails now fails when the program runs
        return None
    if len(opdef.outputs) == 1:
        result = (result,)
    if not isinstance(result, (tuple, list)) or len(result) != len(opdef.outputs):
        return None
    values = {}
    for slot, value in zip(opdef.outputs, result):
        names = op.outputs.get(slot.name, [])
        arrays = list(value) if slot.variadic else ([] if value is None else [value])
        if len(arrays) != len(names):
            return None
        for n, a in zip(names, arrays):
            if not isinstance(a, (np.ndarray, np.generic)):
                return None
            values[n] = np.asarray(a)
    for n, var in zip(outs, out_vars):
        a = values[n]
        if a.dtype != var.dtype or not shapes.same(a.shape, var.shape):
            return None  # the executor would run the kernel as is: leave it to it
    return values


def _as_constants(op: Operator, values: dict) -> list[Operator]:
    """``full`` ops for ``op``'s outputs when all are uniform, else ``[op]``."""
    if not op.input_names():
        return [op]  # already a constant op
    fulls = []
    for name in op.output_names():
        value = _uniform_value(values[name])
        if value is None:
            return [op]
        a = values[name]
        fulls.append(Operator("full", {}, {"Out": [name]},
                              {"shape": list(a.shape), "value": value, "dtype": str(a.dtype)},
                              origin=op.origin, scope=op.scope))
    return fulls


def _uniform_value(a: np.ndarray):
    """The Python scalar every element of ``a`` holds (bit for bit), else None."""
    if a.dtype.kind not in "biuf":
        return None
    if a.size == 0:
        value = a.dtype.type(0).item()
    else:
        value = a.reshape(-1)[0].item()
    rebuilt = np.full(a.shape, value, dtype=a.dtype)
    return value if rebuilt.tobytes() == np.ascontiguousarray(a).tobytes() else None


def _read_names(program: Program) -> set:
    """Names some op reads: inputs, and names control-flow ops yield from sub-blocks."""
    names = set()
    for block in program.blocks:
        for op in block.ops:
            names.update(op.input_names())
            names |= attr_names(op)
    return names


def _drop_unread(program: Program, constants: set, read_before: set, keep: set) -> None:
    """Drop constant ops whose outputs were read before the pass and are not any more."""
    while True:
        reads = _read_names(program)
        dropped = False
        for block in program.blocks:
            ops = []
            for op in block.ops:
                outs = op.output_names()
                if outs and all(n in constants and n in read_before and n not in reads
                                and n not in keep for n in outs):
                    for n in outs:
                        block.vars.pop(n, None)
                    dropped = True
                else:
                    ops.append(op)
            block.ops = ops
        if not dropped:
            return
