"""Batch splitting: one program run on two halves of its batch at once.

When every op of a program treats the rows of its batch independently, rows
``[:h]`` and ``[h:]`` can go through the same plan on two threads and the
results be put together. NumPy releases the GIL inside its kernels, so on
two cores the halves' convolutions and products run side by side — the
data parallelism of a static-graph executor, which eager mode (one op at a
time) cannot plan.

``infer_kinds`` proves a program separable by giving each value a kind:

- ``ROWS``: axis 0 is the batch, and row i depends only on the inputs' row i.
  The halves' values are concatenated.
- ``SHARED``: computed from parameters and constants only: equal in both
  halves, either one is the whole's value.
- ``PARTIAL``: a sum over the batch rows (a weight gradient): the whole's
  value is the halves' sum.

An op outside the rules below, or used in a way they do not prove (a reshape
that names the batch size, a softmax over the batch axis, a mean over it,
random numbers, a write to the scope, control flow), leaves the program to
run whole. Outputs and input gradients are computed row by row as in the
whole run (but a product of half the rows, on one BLAS thread, may round
differently in the last bit); a weight gradient adds two partial sums, which
rounds differently. So splitting is opt-in: the flag ``batch_parallelism``
is off by default, and then a converted Layer computes eager mode's numbers
(docs/performance.md says what exactness cost when tried).
"""

from __future__ import annotations

import copy
from concurrent import futures

import numpy

from dy2stat.runtime import codegen, shapes
from dy2stat.runtime.ir import Block, Operator, Program

ROWS, SHARED, PARTIAL = "rows", "shared", "partial"

# A call splits when its batch has at least this many rows and its ops at
# least this much work (multiply-adds, see ``work_per_row``). Below that the
# two threads' hand-offs cost more than the second core gives: on two cores,
# LeNet training (1.0M per row; batch-minor layout) breaks even at ~64 rows
# and gains 1.3x at 128; a 784-256-10 MLP (0.41M per row) breaks even at ~120
# rows and gains 1.3x at 256. At break-even a whole run is the better choice:
# its overlap needs the second core less (with another process busy on that
# core, LeNet training at 64 rows ran 1.1x faster than eager split, 1.2x whole).
MIN_ROWS = 8
MIN_WORK = 8e7

# Ops whose output row i is a function of their inputs' row i (broadcasting
# SHARED operands along the rows).
_ELEMENTWISE = frozenset({
    "abs", "add", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "cast", "ceil",
    "clip", "cos", "divide", "equal", "exp", "floor", "floor_divide", "gelu", "gelu_grad",
    "greater_equal", "greater_than", "less_equal", "less_than", "log", "logical_and",
    "logical_not", "logical_or", "logical_xor", "maximum", "minimum", "multiply", "neg",
    "not_equal", "pow", "relu", "remainder", "round", "scale", "sigmoid", "sign", "sin",
    "sqrt", "subtract", "tanh", "where", "assign", "full_like",
})
# Ops that run per image: ROWS in (SHARED filters), ROWS out.
_PER_IMAGE = frozenset({"conv2d", "conv2d_grad_input", "max_pool2d", "max_pool2d_grad",
                        "avg_pool2d", "avg_pool2d_grad"})


def infer_kinds(block: Block, ops: list[Operator], kinds: dict) -> bool:
    """Add the kind of every value ``ops`` write to ``kinds`` (name -> kind, holding
    the fed values' kinds); False when some op is not proven row-separable."""
    if any(k == ROWS and not block.var(n).shape for n, k in kinds.items()):
        return False  # a fed value without a batch axis
    for op in ops:
        if op.sub_blocks():
            return False  # a sub-block may read any outer value
        for name in op.input_names():
            if name not in kinds:
                var = block.find_var(name)
                if var is None or not var.persistable:
                    return False
                kinds[name] = SHARED
        names = op.output_names()
        if len(names) != 1 or _writes_scope(block, names[0]):
            return False
        kind = _kind(block, op, [kinds[n] for n in op.input_names()])
        if kind is None:
            return False
        if kind == ROWS and not block.var(names[0]).shape:
            return False
        kinds[names[0]] = kind
    return True


def _writes_scope(block: Block, name: str) -> bool:
    var = block.find_var(name)
    return var is None or var.persistable


def _kind(block: Block, op: Operator, ins: list) -> str | None:
    """The output's kind from the inputs' kinds, or None when not proven."""
    t, attrs = op.type, op.attrs
    if not ins:
        return SHARED if t in ("full", "arange", "eye", "linspace") else None
    if all(k == SHARED for k in ins):
        return SHARED if t not in _RANDOM else None
    if ins[0] == PARTIAL and all(k == SHARED for k in ins[1:]):
        # Linear in one partial sum: the halves' results add up to the whole's.
        if (t in _LINEAR_IN_FIRST or (t == "scale" and not attrs.get("bias", 0.0))
                or (t == "cast" and numpy.dtype(attrs["dtype"]).kind == "f")):
            return PARTIAL  # (a cast between floats only rounds, as the sum does)
        if t == "full_like":
            return SHARED
    shape = block.var(op.output_names()[0]).shape
    names = op.input_names()
    if t in _ELEMENTWISE:
        return _elementwise(block, t, names, ins, len(shape))
    if t in _PER_IMAGE:
        rows = dict(zip(names, ins))
        filt = op.inputs.get("Filter", [])
        ok = all(rows[n] == (SHARED if n in filt else ROWS) for n in names)
        return ROWS if ok else None
    if t == "conv2d_grad_filter":
        ok = ins == [ROWS, ROWS, SHARED] or ins == [ROWS, ROWS]
        return PARTIAL if ok else None
    if t == "matmul":
        return _matmul(block, attrs, names, ins)
    if t == "embedding":
        return ROWS if ins == [ROWS, SHARED] else None
    if t == "embedding_grad":
        return PARTIAL if ins == [ROWS, SHARED, ROWS] else None
    if t == "sum_to_like":
        return _sum_to_like(block, names, ins)
    if t in ("reshape", "flatten", "transpose"):
        return ROWS if _keeps_rows(block, t, attrs, names[0]) else None
    if t == "reshape_like":
        return ROWS if ins == [ROWS, ROWS] else None
    if t in ("softmax", "log_softmax"):
        ndim = len(shape)
        return ROWS if ins == [ROWS] and shapes.normalize_axis(attrs["axis"], ndim, t) else None
    if t in ("sum", "sum_grad"):
        return _sum(block, t, attrs, names, ins)
    return None


_RANDOM = frozenset({"bernoulli_mask", "dropout", "normal", "randint", "uniform"})
# Ops linear in their first input (the others fixed): gradient routing and regrouping.
_LINEAR_IN_FIRST = frozenset({
    "assign", "expand", "expand_as", "flatten", "gather", "gather_grad", "getitem",
    "getitem_grad", "mean_grad", "neg", "reshape", "reshape_like", "squeeze", "sum",
    "sum_grad", "sum_to_like", "tile", "tile_grad", "transpose", "unsqueeze",
})


def _ndim(block: Block, name: str) -> int:
    return len(block.var(name).shape)


def _elementwise(block, t, names, ins, out_ndim) -> str | None:
    if PARTIAL in ins:
        if t in ("add", "subtract") and all(k == PARTIAL for k in ins):
            return PARTIAL  # gradients accumulated
        if t == "multiply" and sorted(ins) == [PARTIAL, SHARED]:
            return PARTIAL
        return None
    for name, kind in zip(names, ins):
        var = block.var(name)
        if kind == ROWS and len(var.shape) != out_ndim:
            return None  # its axis 0 is not the output's
        if kind == SHARED and len(var.shape) == out_ndim and var.shape[0] != 1:
            return None  # it would pair its own rows with the batch rows
    return ROWS


def _matmul(block, attrs, names, ins) -> str | None:
    (x, y), (kx, ky) = names, ins
    nx, ny = _ndim(block, x), _ndim(block, y)
    tx, ty = attrs.get("transpose_x", False), attrs.get("transpose_y", False)
    if kx == ROWS and ky == SHARED and nx >= 2 and ny <= 2 and not tx:
        return ROWS  # [N, ..., K] @ [K, M]
    if kx == SHARED and ky == ROWS and ny >= 3 and nx <= 2:
        return ROWS  # a matrix times a batch of matrices
    if kx == ky == ROWS and nx == ny >= 3:
        return ROWS  # batched products, batch axes aligned
    if kx == ky == ROWS and nx == ny == 2 and tx and not ty:
        return PARTIAL  # X^T @ Y sums over the rows
    return None


def _sum_to_like(block, names, ins) -> str | None:
    (g, like), (kg, kl) = names, ins
    if kg != ROWS:
        return None
    like_shape, g_ndim = block.var(like).shape, _ndim(block, g)
    if kl == ROWS:
        return ROWS if len(like_shape) == g_ndim else None
    # A SHARED target shape: the batch axis is summed away.
    return PARTIAL if len(like_shape) < g_ndim or like_shape[0] == 1 else None


def _keeps_rows(block, t, attrs, name) -> bool:
    """Whether a reshape/flatten/transpose of a ROWS value keeps row i at row i."""
    shape = block.var(name).shape
    if t == "transpose":
        return bool(attrs["perm"]) and attrs["perm"][0] % len(shape) == 0
    if t == "flatten":
        return bool(shape) and shapes.normalize_axis(attrs["start_axis"], len(shape), t) >= 1
    target = list(attrs["shape"])
    if not target or target[0] not in (0, -1) or any(d < 0 for d in target[1:]):
        return False
    per_row = shapes.numel(shape[1:])
    rest = [shape[i] if d == 0 and i < len(shape) else d for i, d in enumerate(target)][1:]
    return per_row >= 0 and -1 not in rest and shapes.numel(rest) == per_row


def _sum(block, t, attrs, names, ins) -> str | None:
    """sum (and its gradient sum_grad) over axes that include the batch or not."""
    x = names[0] if t == "sum" else names[1]
    ndim = _ndim(block, x)
    axes = shapes.axes_tuple(attrs.get("axis"), ndim, t)
    over_rows = 0 in axes or not axes
    if t == "sum":
        return (PARTIAL if over_rows else ROWS) if ins == [ROWS] else None
    # sum_grad(Grad, X): Grad spread back over X's shape.
    if ins == [SHARED, ROWS] and over_rows:
        return ROWS
    if ins == [ROWS, ROWS] and not over_rows:
        return ROWS
    return None


def work_per_row(block: Block, ops: list[Operator]) -> float:
    """Multiply-adds per batch row of the products and convolutions in ``ops``, and
    one per element of every other result (unknown dims count as 1): what decides
    whether splitting pays."""

    def size(shape):
        return float(numpy.prod([max(d, 1) for d in shape]))

    work = 0.0
    for op in ops:
        if not op.output_names():
            continue
        out = block.var(op.output_names()[0]).shape
        if op.type in ("conv2d", "conv2d_grad_input", "conv2d_grad_filter"):
            rows = block.var(op.inputs["DOut"][0]).shape if "DOut" in op.inputs else out
            work += size(rows[1:]) * size(block.var(op.inputs["Filter"][0]).shape[1:])
        elif op.type == "matmul":
            x, y = (block.var(n).shape for n in op.input_names())
            if op.attrs.get("transpose_x"):  # X^T @ Y: every row adds an outer product
                work += size(x[1:]) * size(y[1:])
            else:
                work += size(out[1:]) * size(x[-1:])
        else:
            work += size(out[1:])
    return work


def relaxed(program: Program, kinds: dict) -> Program:
    """A copy of ``program`` whose ROWS variables take any batch size (dim 0 -1),
    so its plans accept a half batch."""
    result = copy.deepcopy(program)
    for name, var in result.global_block().vars.items():
        if kinds.get(name) == ROWS and var.shape:
            var.shape = (-1, *var.shape[1:])
    result.bump()
    return result


def combine(kinds: list, first: list, second: list) -> list:
    """The whole run's values from the two halves' (in ``kinds`` order)."""
    out = []
    for kind, a, b in zip(kinds, first, second):
        if kind == ROWS:
            out.append(numpy.concatenate([a, b]))
        elif kind == PARTIAL:
            out.append(a + b)
        else:
            out.append(a)
    return out


class _Settings:
    """Whether converted Layers split batches (the flag ``batch_parallelism``).
    Off by default: a split step rounds its weight gradients differently from
    eager mode's (see the module doc); only worth it with a second core."""

    def __init__(self):
        self.enabled = False


settings = _Settings()


def split_point(arrays: list, work: float) -> int | None:
    """Where to split a call fed ``arrays`` (their common batch size // 2), or None
    when it should run whole: splitting is off, a fed value has no batch axis or
    another batch size, the batch or its work is too small, or this is the
    worker thread itself."""
    if not settings.enabled or never_splits(arrays, work):
        return None
    n = arrays[0].shape[0]
    if any(a.ndim == 0 or a.shape[0] != n for a in arrays) or codegen.on_worker():
        return None
    return n // 2


def never_splits(arrays: list, work: float) -> bool:
    """Whether a call fed arrays of these shapes runs whole whatever the flags: its
    batch or its work is too small."""
    if not arrays:
        return True
    n = arrays[0].shape[0] if arrays[0].ndim else 0
    return n < MIN_ROWS or n * work < MIN_WORK


def halves(feeds: dict, kinds: dict, at: int) -> tuple[dict, dict]:
    """The feeds of each half: ROWS values cut at row ``at``, the others whole."""
    first, second = {}, {}
    for name, value in feeds.items():
        rows = kinds[name] == ROWS
        first[name] = value[:at] if rows else value
        second[name] = value[at:] if rows else value
    return first, second


def run_split(plan, feeds: dict, kinds: dict, at: int, scope) -> tuple[list, list]:
    """``plan`` run on rows ``[:at]`` and ``[at:]`` of ``feeds`` at once (``halves``)."""
    return run_halves(plan, *halves(feeds, kinds, at), scope)


def run_halves(plan, first: dict, second: dict, scope) -> tuple[list, list]:
    """``plan`` run on the first half's feeds on the worker thread and on the
    second's here, at once."""
    with codegen.sharing_cores:
        future = codegen.run_on_worker(plan.run, first, scope)
        try:
            values = plan.run(second, scope)
        except BaseException:
            futures.wait([future])
            raise
        return future.result(), values
