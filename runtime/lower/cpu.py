"""The CPU target's lowering rules: each op as loop code that Numba compiles.

Elementwise rules give the expression of one element (``loops`` places it
in a loop and fuses chains); the others write statements through the code
generator (``loops.Emitter``). Exact rules reproduce NumPy bit for bit:

- ``+ - * /``, comparisons, logical and bitwise ops, ``neg``, ``abs``,
  ``sqrt``, ``floor``, ``ceil`` are IEEE operations, rounded to the dtype
  after every step (no fused multiply-add);
- ``maximum``/``minimum``/``relu``/``clip`` select as NumPy's loops do: the
  first operand when it is NaN or strictly larger (smaller), else the
  second -- so NaN propagates and ``maximum(-0.0, 0.0)`` is ``0.0``;
- ``sum`` and ``mean`` of a whole array, or along its last axis, add in
  NumPy's pairwise order (blocks of 8 partial sums, halves above 128
  elements) from 0; ``mean`` divides in float64 and rounds, as ``np.mean``
  does; integer sums add in int64.

Rules that add in another order (``rounding="order"``, off with the flag
``native_exact``): sums along leading axes in index order, and small
products (``matmul`` of 1-D and 2-D operands with few rows, where loops beat
a BLAS call) as loops.

Relaxed rules (the flag ``native_relaxed``): ``exp``, ``log``, ``tanh``,
``sin``, ``cos``, ``sigmoid``, ``pow`` from LLVM's math library: each
rounds within a few units in the last place of NumPy's.
"""

from __future__ import annotations

import math

from dy2stat.runtime.lower.cpu_helpers import PAIRWISE, REDUCERS
from dy2stat.runtime.lower.loops import TYPES, LoweringError, Val, literal
from dy2stat.runtime.lower.rules import allows, register_lowering
from dy2stat.runtime.passes.constant_folding import evaluate

__all__ = []

TARGET = "cpu"


def _var(var_of, op, slot: str, k: int = 0):
    return var_of(op.inputs[slot][k])


def _floats_only(op, var_of, rounding) -> bool:
    return all(var_of(n).dtype.kind == "f" for n in op.input_names() + op.output_names())


def _not_bool(op, var_of, rounding) -> bool:
    return all(var_of(n).dtype.kind != "b" for n in op.input_names())


def elementwise(op: str, rounding: str = "exact", accepts=None):
    return register_lowering(op, TARGET, "elementwise", rounding, accepts)


# ------------------------------------------------------------ elementwise

for _op, _sign in {"add": "+", "subtract": "-", "multiply": "*"}.items():
    elementwise(_op, accepts=_not_bool if _op != "multiply" else None)(
        (lambda sign: lambda a, step: f"{a[0]} {sign} {a[1]}")(_sign))

elementwise("divide", accepts=_floats_only)(lambda a, step: f"{a[0]} / {a[1]}")

for _op, _sign in {"equal": "==", "not_equal": "!=", "less_than": "<", "less_equal": "<=",
                   "greater_than": ">", "greater_equal": ">="}.items():
    elementwise(_op)((lambda sign: lambda a, step: f"{a[0]} {sign} {a[1]}")(_sign))


@elementwise("maximum")
def _maximum(a, step):
    x, y = a
    return f"{x} if ({x} > {y} or {x} != {x}) else {y}"


@elementwise("minimum")
def _minimum(a, step):
    x, y = a
    return f"{x} if ({x} < {y} or {x} != {x}) else {y}"


def _truth(x: str, dtype) -> str:
    return x if dtype.kind == "b" else f"({x} != 0)"


for _op, _sign in {"logical_and": "&", "logical_or": "|", "logical_xor": "!="}.items():
    elementwise(_op)((lambda sign: lambda a, step: (
        f"{_truth(a[0], step.in_dtypes[0])} {sign} {_truth(a[1], step.in_dtypes[1])}"))(_sign))

elementwise("logical_not")(lambda a, step: f"not {_truth(a[0], step.in_dtypes[0])}")

for _op, _sign in {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^"}.items():
    elementwise(_op)((lambda sign: lambda a, step: f"{a[0]} {sign} {a[1]}")(_sign))


@elementwise("bitwise_not")
def _bitwise_not(a, step):
    return f"not {a[0]}" if step.dtype.kind == "b" else f"~{a[0]}"


elementwise("neg", accepts=_not_bool)(lambda a, step: f"-{a[0]}")
elementwise("abs", accepts=_not_bool)(lambda a, step: f"abs({a[0]})")
elementwise("sqrt", accepts=_floats_only)(lambda a, step: f"np.sqrt({a[0]})")
elementwise("floor", accepts=_floats_only)(lambda a, step: f"np.floor({a[0]})")
elementwise("ceil", accepts=_floats_only)(lambda a, step: f"np.ceil({a[0]})")


@elementwise("relu", accepts=_not_bool)
def _relu(a, step):
    (x,) = a
    return f"{x} if ({x} > 0 or {x} != {x}) else {literal(0, step.dtype)}"


@elementwise("scale", accepts=_not_bool)
def _scale(a, step):
    """``x * scale + bias`` as the kernel: the attrs in x's dtype, rounded after each."""
    t = step.dtype.type
    scaled = f"{TYPES[step.dtype.name]}({a[0]} * {literal(t(step.attrs['scale']), step.dtype)})"
    bias = step.attrs["bias"]
    return f"{scaled} + {literal(t(bias), step.dtype)}" if bias else scaled


@elementwise("clip", accepts=_floats_only)
def _clip(a, step):
    """NumPy's clip: max with the lower bound, then min with the upper (NaN kept)."""
    x = a[0]
    lo, hi = step.attrs["min"], step.attrs["max"]
    if lo is not None:
        low = literal(step.dtype.type(lo), step.dtype)
        x = f"({x} if ({x} > {low} or {x} != {x}) else {low})"
    if hi is not None:
        high = literal(step.dtype.type(hi), step.dtype)
        x = f"({x} if ({x} < {high} or {x} != {x}) else {high})"
    return x


def _cast_accepts(op, var_of, rounding) -> bool:
    """Casts whose conversion is defined for every value: to a float or bool, or
    between integers (float to int is undefined for NaN and out-of-range values)."""
    src, dst = _var(var_of, op, "X").dtype, var_of(op.outputs["Out"][0]).dtype
    return dst.kind in "fb" or src.kind in "iub"


@elementwise("cast", accepts=_cast_accepts)
def _cast(a, step):
    return f"{a[0]} != 0" if step.dtype.kind == "b" and step.in_dtypes[0].kind != "b" else a[0]


@elementwise("where")
def _where(a, step):
    c, x, y = a
    return f"{x} if {_truth(c, step.in_dtypes[0])} else {y}"


# Relaxed: LLVM's math library rounds these differently from NumPy's loops.
for _op, _fn in {"exp": "np.exp", "log": "np.log", "tanh": "np.tanh", "sin": "np.sin",
                 "cos": "np.cos"}.items():
    elementwise(_op, rounding="library", accepts=_floats_only)(
        (lambda fn: lambda a, step: f"{fn}({a[0]})")(_fn))


@elementwise("sigmoid", rounding="library", accepts=_floats_only)
def _sigmoid(a, step):
    one = literal(1, step.dtype)
    return f"{one} / ({one} + np.exp(-{a[0]}))"


elementwise("pow", rounding="library", accepts=_floats_only)(
    lambda a, step: f"{a[0]} ** {a[1]}")


# -------------------------------------------------------------- constants


def _constant(ctx, node):
    """An input-less op (``full``, ``arange``, ...): its value, computed now."""
    op = node.op
    values = evaluate(op, lambda n: dict(zip(op.output_names(), node.out_vars)).get(n),
                      lambda n: None)
    if values is None:
        raise LoweringError(f"{node.where}: not a constant")
    return [ctx.constant(n, values[n]) for n in op.output_names()]


for _op in ("full", "arange", "linspace", "eye"):
    register_lowering(_op, TARGET, "op")(_constant)


@register_lowering("assign", TARGET, "op")
def _assign(ctx, node):
    (x,) = node.ins
    (var,) = node.out_vars
    if x.scalar:
        return [Val("", var.dtype, (), ref=x.ref)]
    ref = ctx.fresh("a")
    ctx.line(f"{ref} = {ctx.array(x)}.copy()")
    ctx.owned.add(ref)
    return [Val("", var.dtype, x.shape, ref=ref)]


# ------------------------------------------------------------- reductions

def _axes(op, var_of) -> tuple | None:
    return normalized_axes(op.attrs.get("axis"), len(_var(var_of, op, "X").shape))


def normalized_axes(axis, ndim: int) -> tuple | None:
    """The reduced axes in order, or None when ``axis`` does not name axes of ``ndim``."""
    if axis is None:
        return tuple(range(ndim))
    axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
    if not all(isinstance(a, int) and -ndim <= a < ndim for a in axes):
        return None
    return tuple(sorted({a % ndim for a in axes}))


# The most elements a reduction's loop takes: past them NumPy's vectorized loops win
# (measured on float32: a maximum's loop costs ~1.1 ns an element against NumPy's call
# of ~0.9 us plus 0.05 ns an element, a pairwise sum ~0.5 against 0.15). A larger
# reduction stays a NumPy call between regions; one whose size is not known before it
# runs gives way to the interpreted code then (TypeError, as for an argument the code
# was not compiled for).
MOST_REDUCED = {"max": 1024, "min": 1024, "sum": 8192, "mean": 8192, "any": 8192,
                "all": 8192}


def _reduce_accepts(kind):
    def accepts(op, var_of, rounding) -> bool:
        x = _var(var_of, op, "X")
        axes = _axes(op, var_of)
        if axes is None or (kind == "mean" and x.dtype.kind != "f"):
            return False
        if kind in ("any", "all") and x.dtype.kind != "b":
            return False
        if all(d >= 0 for d in x.shape) and math.prod(x.shape) > MOST_REDUCED[kind]:
            return False
        ndim = len(x.shape)
        if axes in (tuple(range(ndim)), (ndim - 1,)):
            return True  # NumPy's order
        # along leading axes: sums add in index order, and a max or min picks between
        # equal signed zeros unlike NumPy
        return allows(rounding, "library" if kind in ("max", "min") else "order")

    return accepts


def _reduce_rule(kind):
    def emit(ctx, node):
        (var,) = node.out_vars
        x = node.ins[0]
        t = TYPES[var.dtype.name]
        if x.scalar:  # a reduction of a 0-d value is the value
            value = f"{x.ref} != 0" if kind in ("any", "all") else x.ref
            ref = ctx.fresh("s")
            ctx.line(f"{ref} = {t}({value})")
            return [Val("", var.dtype, (), ref=ref)]
        ndim = len(x.shape)
        axes = normalized_axes(node.attrs["axis"], ndim)
        keepdim = node.attrs["keepdim"]
        if any(isinstance(d, str) for d in x.shape):  # dims known only as it runs
            ctx.line(f"if {' * '.join(str(d) for d in x.shape)} > {MOST_REDUCED[kind]}:")
            with ctx.indented():
                ctx.line(f"raise TypeError({node.where + ': larger than loops pay for'!r})")
        src = ctx.array(x)  # after the check: a chain computed for nothing costs most
        if axes in (tuple(range(ndim)), (ndim - 1,)):
            return [_reduce_rows(ctx, kind, x, src, var, t, axes, keepdim)]
        return [_reduce_in_order(ctx, kind, x, src, var, t, axes, keepdim)]

    return emit


def _row_value(ctx, kind, row: str, x_dtype, t: str) -> str:
    """The expression reducing the 1-D contiguous array ``row``."""
    if kind in ("sum", "mean") and x_dtype.kind == "f":
        ctx.helper("pairwise_sum", PAIRWISE)
        zero = literal(0, x_dtype)
        total = f"{zero} + pairwise_sum({row}, 0, {row}.shape[0], {zero})"
        if kind == "sum":
            return f"{t}({total})"
        return f"{t}(np.float64({total}) / np.float64({row}.shape[0]))"
    name = {"sum": "int_sum", "max": "max_of", "min": "min_of", "any": "any_of",
            "all": "all_of"}[kind]
    ctx.helper(name, REDUCERS[name])
    return f"{t}({name}({row}))"


def _reduce_rows(ctx, kind, x, src, var, t, axes, keepdim):
    """A whole array (one row) or its last axis (one value per row)."""
    ndim = len(x.shape)
    if len(axes) == ndim:
        flat = ctx.fresh("a")
        ctx.line(f"{flat} = {src}.reshape(({src}.size,))")
        s = ctx.fresh("s")
        ctx.line(f"{s} = {_row_value(ctx, kind, flat, x.dtype, t)}")
        if not keepdim:
            return Val("", var.dtype, (), ref=s)
        out = ctx.new_array((1,) * ndim, var.dtype)
        ctx.line(f"{out}[{', '.join(['0'] * ndim)}] = {s}")
        return Val("", var.dtype, (1,) * ndim, ref=out)
    lead = x.shape[:-1]
    rows = ctx.fresh("n")
    ctx.line(f"{rows} = {' * '.join(str(d) for d in lead)}")
    x2 = ctx.fresh("a")
    ctx.line(f"{x2} = {src}.reshape(({rows}, {x.shape[-1]}))")
    shape = lead + ((1,) if keepdim else ())
    out = ctx.new_array(shape, var.dtype)
    o2 = ctx.fresh("a")
    ctx.line(f"{o2} = {out}.reshape(({rows},))")
    r = ctx.fresh("r")
    ctx.line(f"for {r} in range({rows}):")
    with ctx.indented():
        ctx.line(f"{o2}[{r}] = {_row_value(ctx, kind, f'{x2}[{r}]', x.dtype, t)}")
    return Val("", var.dtype, shape, ref=out)


def _reduce_in_order(ctx, kind, x, src, var, t, axes, keepdim):
    """Leading axes: each result accumulated over its elements in index order -- the
    order in which one pass over ``x`` in memory order meets them, so the pass reads
    ``x`` contiguously and updates the results as it goes."""
    ndim = len(x.shape)
    kept = [j for j in range(ndim) if j not in axes]
    shape = tuple(1 if j in axes else x.shape[j] for j in range(ndim)) if keepdim else \
        tuple(x.shape[j] for j in kept)
    count = " * ".join(str(x.shape[j]) for j in axes) or "1"
    if kind in ("max", "min"):
        ctx.check(f"{count} == 0", f"zero-size array to reduction operation "
                                   f"{'maximum' if kind == 'max' else 'minimum'} which has no "
                                   "identity")
    acc = ctx.fresh("a")  # sums and means accumulate in the result's dtype
    start = "np.empty" if kind in ("max", "min") else "np.ones" if kind == "all" else "np.zeros"
    ctx.line(f"{acc} = {start}(({', '.join(map(str, shape))},), {t})")
    ctx.owned.add(acc)
    index = [ctx.fresh("i") for _ in range(ndim)]
    at = ", ".join(index[j] if j in kept else "0" for j in range(ndim)) if keepdim else \
        ", ".join(index[j] for j in kept)
    at = f"{acc}[{at or '()'}]"
    for j in range(ndim):
        ctx.line(f"for {index[j]} in range({x.shape[j]}):")
        ctx.depth += 1
    item = f"{src}[{', '.join(index)}]"
    if kind in ("sum", "mean"):
        ctx.line(f"{at} += {item}")
    elif kind in ("any", "all"):
        ctx.line(f"{at} = {at} {'or' if kind == 'any' else 'and'} {item}")
    else:  # the first element along the reduced axes starts the result
        first = " and ".join(f"{index[j]} == 0" for j in axes)
        sign = ">" if kind == "max" else "<"
        ctx.line(f"{at} = {item} if {first} else ({at} if ({at} {sign} {item} or "
                 f"{at} != {at}) else {item})")
    ctx.depth -= ndim
    if kind == "mean":
        flat = ctx.fresh("a")
        q = ctx.fresh("i")
        ctx.line(f"{flat} = {acc}.reshape(({acc}.size,))")
        ctx.line(f"for {q} in range({flat}.shape[0]):")
        with ctx.indented():
            ctx.line(f"{flat}[{q}] = {t}(np.float64({flat}[{q}]) / np.float64({count}))")
    return Val("", var.dtype, shape, ref=acc)


for _kind in ("sum", "mean", "max", "min", "any", "all"):
    register_lowering(_kind, TARGET, "op", accepts=_reduce_accepts(_kind))(_reduce_rule(_kind))


# ---------------------------------------------------------------- matmul


# Loops beat a BLAS call on products of few rows (a vector times a matrix: the
# loop along a row of y vectorizes) and on tiny ones; BLAS wins on the rest. A
# transposed y is read across its rows by such a loop (tens of times slower than
# BLAS once it leaves the caches): only tiny products of it lower.
FEW_ROWS, MOST_MACS, TINY_MACS = 8, 1 << 20, 4096


def _matmul_accepts(op, var_of, rounding) -> bool:
    x, y = _var(var_of, op, "X"), _var(var_of, op, "Y")
    if not (x.dtype == y.dtype and x.dtype.kind == "f" and len(x.shape) in (1, 2)
            and len(y.shape) in (1, 2)) or any(d < 0 for d in x.shape + y.shape):
        return False
    ty = op.attrs.get("transpose_y", False) and len(y.shape) == 2
    m, k, n = _product_dims(x.shape, y.shape, op.attrs.get("transpose_x", False), ty)
    macs = m * k * n
    return macs <= TINY_MACS or (not ty and m <= FEW_ROWS and n >= 16 and macs <= MOST_MACS)


def _product_dims(xs, ys, tx, ty) -> tuple:
    """(rows of x, the summed length, columns of y) of a product of 1-D and 2-D operands."""
    m, k = (1, xs[0]) if len(xs) == 1 else (xs[1], xs[0]) if tx else (xs[0], xs[1])
    n = 1 if len(ys) == 1 else ys[0] if ty else ys[1]
    return m, k, n


@register_lowering("matmul", TARGET, "op", rounding="order", accepts=_matmul_accepts)
def _matmul(ctx, node):
    """Rows of x times y, each sum accumulated over k in index order.

    The loop over y's columns is innermost (it vectorizes), and each pass of it
    adds several consecutive k (``UNROLL``) to the sums: ``((s + x0*y0) + x1*y1)``
    is the order of one k at a time, with a fraction of the loads and stores of
    the sums. One row of x keeps its k values in locals; several rows take each
    element of y once for all of them."""
    x, y = node.ins
    (var,) = node.out_vars
    a, b = ctx.array(x), ctx.array(y)
    tx, ty = node.attrs["transpose_x"], node.attrs["transpose_y"]
    xs, ys = x.shape, y.shape
    m, k, n = _product_dims(xs, ys, tx, ty)
    x_at = "{p}" if len(xs) == 1 else "{p}, {i}" if tx else "{i}, {p}"  # x's element (i, p)
    y_at = "{p}" if len(ys) == 1 else "{j}, {p}" if ty else "{p}, {j}"  # y's element (p, j)
    acc = ctx.fresh("a")
    ctx.line(f"{acc} = np.zeros(({m}, {n}), {TYPES[var.dtype.name]})")
    unroll = UNROLL[m == 1]
    whole = k - k % unroll
    i, p, j = ctx.fresh("i"), ctx.fresh("i"), ctx.fresh("i")
    if whole:
        _product_steps(ctx, acc, (a, x_at), (b, y_at), (m, n), (i, p, j), range(0, whole, unroll),
                       unroll)
    if whole < k:
        _product_steps(ctx, acc, (a, x_at), (b, y_at), (m, n), (i, p, j), range(whole, k), 1)
    shape = tuple(d for d, keep in ((m, len(xs) > 1), (n, len(ys) > 1)) if keep)
    if not shape:
        s = ctx.fresh("s")
        ctx.line(f"{s} = {acc}[0, 0]")
        return [Val("", var.dtype, (), ref=s)]
    out = ctx.fresh("a")
    ctx.line(f"{out} = {acc}.reshape(({', '.join(str(d) for d in shape)},))")
    ctx.owned.add(out)  # the only reference to the sums
    return [Val("", var.dtype, shape, ref=out)]


# k values added per pass over the sums: (several rows of x, one row). Measured on
# products of 1-8 rows by 64x64 to 784x128 matrices: 8 for one row reads y near the
# speed of the caches; with more rows each y element is read once for every row, and
# 4 k per pass keeps a row's sums and x values in registers.
UNROLL = {False: 4, True: 8}


def _product_steps(ctx, acc, x, y, dims, names, ks: range, unroll: int) -> None:
    """Add x[:, p:p+unroll] @ y[p:p+unroll, :] to ``acc`` for each p of ``ks``."""
    (a, x_at), (b, y_at), (m, n), (i, p, j) = x, y, dims, names
    row = "0" if m == 1 else i
    at = [f"{p} + {u}" if u else p for u in range(unroll)]
    x_of = [f"{a}[{x_at.format(i=row, p=q)}]" for q in at]
    y_of = [f"{b}[{y_at.format(p=q, j=j)}]" for q in at]
    ctx.line(f"for {p} in range({ks.start}, {ks.stop}, {ks.step}):")
    with ctx.indented():
        if m == 1:  # the row's k values in locals, then one pass along y's rows
            x_of = _locals(ctx, x_of)
        ctx.line(f"for {j} in range({n}):")
        with ctx.indented():
            if m > 1:  # y's elements in locals, then each row
                y_of = _locals(ctx, y_of)
                ctx.line(f"for {i} in range({m}):")
                ctx.depth += 1
            total = f"{acc}[{row}, {j}]"
            for xu, yu in zip(x_of, y_of):
                total = f"({total} + {xu} * {yu})"
            ctx.line(f"{acc}[{row}, {j}] = {total[1:-1]}")
            if m > 1:
                ctx.depth -= 1


def _locals(ctx, values: list) -> list:
    """Each of ``values`` (source text) read once into a new local; their names."""
    names = [ctx.fresh("t") for _ in values]
    for name, value in zip(names, values):
        ctx.line(f"{name} = {value}")
    return names


# ------------------------------------------------------------ control flow


def _scalar_predicate(var_of, name) -> bool:
    var = var_of(name)
    return var is not None and var.shape == () and var.dtype.kind == "b"


def _cond_accepts(op, var_of, rounding) -> bool:
    return _scalar_predicate(var_of, op.inputs["Cond"][0])


def _assigned(ctx, target: str, val: Val) -> None:
    ctx.line(f"{target} = {val.ref if val.scalar else ctx.array(val)}")


def _results(ctx, refs, out_vars) -> list[Val]:
    return [Val("", var.dtype, ctx.dims_of(var, ref) if var.shape else (), ref=ref)
            for ref, var in zip(refs, out_vars)]


@register_lowering("cond", TARGET, "control", accepts=_cond_accepts)
def _cond(ctx, node):
    a = node.attrs
    for key, outs in (("true_block", "true_outs"), ("false_block", "false_outs")):
        ctx.ready_for_block(ctx.program, a[key], a[outs])
    refs = [ctx.fresh("o") for _ in node.out_vars]
    ctx.line(f"if {node.ins[0].ref}:")
    for key, outs in (("true_block", "true_outs"), ("false_block", "false_outs")):
        if key == "false_block":
            ctx.line("else:")
        with ctx.indented():
            vals = ctx.lower_block(ctx.program.blocks[a[key]], {}, a[outs])
            for ref, val in zip(refs, vals):
                _assigned(ctx, ref, val)
            if not vals:
                ctx.line("pass")
    return _results(ctx, refs, node.out_vars)


def _while_accepts(op, var_of, rounding) -> bool:
    if op.outputs.get("Carries"):
        return False  # a training loop's saved iterations: a Python list
    return _scalar_predicate(var_of, op.attrs["cond_out"])


@register_lowering("while", TARGET, "control", accepts=_while_accepts)
def _while(ctx, node):
    a = node.attrs
    program = ctx.program
    cond_block, body = program.blocks[a["cond_block"]], program.blocks[a["body_block"]]
    if not _scalar_predicate(cond_block.find_var, a["cond_out"]):
        raise LoweringError(f"{node.where}: the loop's predicate is not a 0-d bool")
    ctx.ready_for_block(program, a["cond_block"], [a["cond_out"]])
    ctx.ready_for_block(program, a["body_block"], a["body_outs"])
    carried = [ctx.fresh("c") for _ in node.ins[0]]
    for ref, val in zip(carried, node.ins[0]):
        _assigned(ctx, ref, val)
    ctx.line("while True:")
    with ctx.indented():
        cond_vars = [cond_block.find_var(n) for n in a["cond_args"]]
        shapes = [ctx.dims_of(var, ref) if var.shape else () for var, ref in
                  zip(cond_vars, carried)]

        def bindings(names, block):
            return {n: Val(n, block.find_var(n).dtype, shape, ref=ref)
                    for n, shape, ref in zip(names, shapes, carried)}

        (pred,) = ctx.lower_block(cond_block, bindings(a["cond_args"], cond_block),
                                  [a["cond_out"]])
        ctx.line(f"if not {pred.ref}:")
        with ctx.indented():
            ctx.line("break")
        vals = ctx.lower_block(body, bindings(a["body_args"], body), a["body_outs"])
        nexts = []
        for val in vals:
            nexts.append(val.ref if val.scalar else ctx.array(val))
        if carried:  # all at once: a next value may read another's current one
            ctx.line(f"{', '.join(carried)} = {', '.join(nexts)}")
    return _results(ctx, carried, node.out_vars)

