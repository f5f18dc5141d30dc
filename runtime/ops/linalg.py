"""Linear algebra beyond matmul: ``einsum``, ``tril``/``triu`` and ``diag``.

An ``einsum`` op holds its equation in explicit form (``"ij,jk->ik"``: no
``...``, an output after ``->``); ``normalize_equation`` writes a user's
equation that way for the operands' ranks. Its gradient is one einsum per
operand, so second derivatives come for free.
"""

from __future__ import annotations

import string

from dy2stat.runtime import dtypes, shapes
from dy2stat.runtime.ops.math import unbroadcast
from dy2stat.runtime.registry import Meta, defop

fmt = shapes.fmt
_LETTERS = string.ascii_letters


# ------------------------------------------------------------------ einsum


def normalize_equation(equation: str, ranks) -> str:
    """``equation`` for operands of ``ranks`` with ``...`` spelled out in letters
    and the output made explicit (numpy's implicit rule: the letters seen once,
    in alphabetical order, after the broadcast dims)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ValueError(f"einsum: the equation {equation!r} names {len(terms)} operands, "
                         f"got {len(ranks)}")
    used = set(eq) - set(".,->")
    if not used <= set(_LETTERS):
        raise ValueError(f"einsum: the equation {equation!r} may hold letters, ',', '->' and "
                         "'...' only")
    spare = [c for c in _LETTERS if c not in used]
    broadcast = max((rank - len(t.replace("...", "")) for t, rank in zip(terms, ranks)
                     if "..." in t), default=0)
    dims = spare[:broadcast]  # the letters for the broadcast dims (right-aligned)
    spelled = []
    for t, rank in zip(terms, ranks):
        if "..." in t:
            n = rank - len(t.replace("...", ""))
            t = t.replace("...", "".join(dims[broadcast - n:]) if n > 0 else "")
        if len(t) != rank:
            raise ValueError(f"einsum: the term {t!r} of {equation!r} has {len(t)} subscripts "
                             f"for an operand of rank {rank}")
        spelled.append(t)
    if arrow:
        out = rhs.replace("...", "".join(dims))
    else:
        joined = "".join(spelled)
        out = "".join(dims) + "".join(sorted(c for c in set(joined)
                                             if joined.count(c) == 1 and c not in dims))
    return ",".join(spelled) + "->" + out


def _parse(equation):
    lhs, out = equation.split("->")
    return lhs.split(","), out


def _einsum_infer(xs, equation=""):
    terms, out = _parse(equation)
    if len(terms) != len(xs):
        raise ValueError(f"einsum: {equation!r} names {len(terms)} operands, got {len(xs)}")
    sizes: dict = {}
    for term, x in zip(terms, xs):
        if len(term) != len(x.shape):
            raise ValueError(f"einsum: the term {term!r} does not fit an operand of shape "
                             f"{fmt(x.shape)}")
        for c, d in zip(term, x.shape):
            known = sizes.setdefault(c, d)
            if known == d or d == 1:
                continue
            if known == 1:  # broadcast from size 1
                sizes[c] = d
                continue
            if known == -1 or d == -1:  # the known one decides
                sizes[c] = max(known, d)
                continue
            raise ValueError(f"einsum: subscript {c!r} of {equation!r} is {known} in one "
                             f"operand and {d} in another")
    missing = [c for c in out if c not in sizes]
    if missing:
        raise ValueError(f"einsum: the output subscripts {missing} of {equation!r} appear in "
                         "no operand")
    dtype = xs[0].dtype
    for x in xs[1:]:
        dtype = dtypes.promote(dtype, x.dtype)
    return Meta(tuple(sizes[c] for c in out), dtype)


def _einsum_kernel(xp, xs, equation=""):
    dtype = xs[0].dtype
    for x in xs[1:]:
        dtype = dtypes.promote(dtype, x.dtype)
    return xp.asarray(xp.einsum(equation, *[x.astype(dtype, copy=False) for x in xs]))


def _einsum_grad(e, ins, outs, douts, attrs, need):
    """d/dX_i: the output gradient contracted with the other operands into X_i's
    subscripts. A subscript only X_i has is broadcast back (times a ones vector), a
    repeated one (a diagonal) placed by an identity matrix, and a dim X_i broadcast
    from size 1 summed."""
    (xs,), (g,) = ins, douts
    if not need[0]:
        return [None]
    terms, out = _parse(attrs["equation"])
    spare = iter(c for c in _LETTERS if c not in attrs["equation"])
    grads = []
    for i, (term, x) in enumerate(zip(terms, xs)):
        others = [t for j, t in enumerate(terms) if j != i]
        seen = set(out).union(*others)
        extra_terms, extra, target = [], [], list(term)
        for pos, c in enumerate(term):
            if term.index(c) != pos:  # a repeat: its own letter, tied by an identity
                target[pos] = next(spare)
                extra_terms.append(c + target[pos])
                extra.append(e("diag", _ones_along(e, x, pos)))
            elif c not in seen:
                extra_terms.append(c)
                extra.append(_ones_along(e, x, pos))
        operands = [g] + [xs[j] for j in range(len(xs)) if j != i] + extra
        equation = ",".join([out] + others + extra_terms) + "->" + "".join(target)
        grads.append(unbroadcast(e, e("einsum", operands, equation=equation), x))
    return [grads]


def _ones_along(e, x, axis):
    """A ones vector as long as dim ``axis`` of ``x`` (known at run time)."""
    index = [0] * len(x.shape)
    index[axis] = ["slice", None, None, None]
    return e("getitem", e("full_like", x, value=1.0), [], index=index)


defop(
    "einsum",
    inputs=("Xs*",),
    attrs={"equation": ""},
    kernel=_einsum_kernel,
    infer=_einsum_infer,
    grad=_einsum_grad,
    doc="Einstein summation over Xs; the equation is explicit (no '...', has '->').",
)

# ------------------------------------------------------------ tril, triu


def _triangle_infer(op):
    def infer(x, diagonal=0):
        if len(x.shape) < 2:
            raise ValueError(f"{op}: needs at least 2 dims, got shape {fmt(x.shape)}")
        return Meta(tuple(x.shape), x.dtype)

    return infer


for _name in ("tril", "triu"):
    defop(
        _name,
        attrs={"diagonal": 0},
        kernel=(lambda fn: lambda xp, x, diagonal=0: getattr(xp, fn)(x, diagonal))(_name),
        infer=_triangle_infer(_name),
        grad=(lambda fn: lambda e, ins, outs, douts, attrs, need: [
            e(fn, douts[0], diagonal=attrs["diagonal"])])(_name),
    )

# ------------------------------------------------------------------ diag


def _diag_len(rows, cols, offset):
    if rows < 0 or cols < 0:
        return -1
    return max(0, min(rows, cols - offset) if offset >= 0 else min(rows + offset, cols))


def _diag_infer(x, offset=0, padding_value=0.0):
    if len(x.shape) == 1:
        n = x.shape[0]
        side = n + abs(offset) if n >= 0 else -1
        return Meta((side, side), x.dtype)
    if len(x.shape) == 2:
        return Meta((_diag_len(*x.shape, offset),), x.dtype)
    raise ValueError(f"diag: the input must be 1-D or 2-D, got shape {fmt(x.shape)}")


def _diagonal_place(xp, n, offset):
    """(rows, cols) of the ``n`` elements of diagonal ``offset``."""
    i = xp.arange(n)
    return i + max(-offset, 0), i + max(offset, 0)


def _diag_kernel(xp, x, offset=0, padding_value=0.0):
    if x.ndim == 2:
        return xp.diagonal(x, offset).copy()
    side = x.shape[0] + abs(offset)
    out = xp.full((side, side), padding_value, dtype=x.dtype)
    out[_diagonal_place(xp, x.shape[0], offset)] = x
    return out


def _diag_grad_kernel(xp, g, x, offset=0):
    if x.ndim == 1:
        return xp.diagonal(g, offset).copy()
    out = xp.zeros(x.shape, dtype=g.dtype)
    out[_diagonal_place(xp, g.shape[0], offset)] = g
    return out


defop(
    "diag",
    attrs={"offset": 0, "padding_value": 0.0},
    kernel=_diag_kernel,
    infer=_diag_infer,
    grad=lambda e, ins, outs, douts, attrs, need: [
        e("diag_grad", douts[0], ins[0], offset=attrs["offset"])],
    doc="1-D X: a square matrix with X on diagonal offset (padding_value elsewhere); "
        "2-D X: its diagonal offset.",
)
defop(
    "diag_grad",
    inputs=("G", "X"),
    attrs={"offset": 0},
    kernel=_diag_grad_kernel,
    infer=lambda g, x, offset=0: Meta(tuple(x.shape), g.dtype),
    grad=lambda e, ins, outs, douts, attrs, need: [
        e("diag", douts[0], offset=attrs["offset"]), None],
    no_grad=("X",),
    dtypes={"G": dtypes.FLOATS},
    doc="The gradient of diag: G's diagonal (1-D X), or G on a zero matrix shaped like X.",
)
