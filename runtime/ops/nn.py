"""Neural-network ops: softmax, cross entropy, dropout, embedding, gelu.

Kernels come from ``dy2stat.kernels.nn``; this file adds the op records:
slots, attrs, shape inference and gradient rules. Rules that must support
double grad (softmax, log_softmax) are written with primitive ops; the others
emit a ``*_grad`` op, and the linear ``*_grad`` ops have rules of their own.
Convolution and pooling are in ``conv.py``, layer_norm and batch_norm in
``norm.py``.
"""

from __future__ import annotations

import math

from dy2stat.kernels import nn as nnk
from dy2stat.runtime import dtypes, shapes
from dy2stat.runtime.registry import INT, NONE, Meta, defop, number_in, one_of

fmt = shapes.fmt


def _check_float(meta, what, op):
    if meta.dtype not in dtypes.FLOATS:
        raise TypeError(f"{op}: {what} must be a float tensor, got {meta.dtype}")


# ------------------------------------------------------------------- softmax


def _softmax_infer(op):
    def infer(x, axis=-1):
        shapes.normalize_axis(axis, len(x.shape), op)
        return Meta(x.shape, x.dtype)

    return infer


def _softmax_grad(e, ins, outs, douts, attrs, need):
    """y * (g - sum(g * y)): primitive ops only, so it differentiates again."""
    y, g, axis = outs[0], douts[0], attrs["axis"]
    dot = e("sum", e("multiply", g, y), axis=axis, keepdim=True)
    return [e("multiply", y, e("subtract", g, dot))]


def _log_softmax_grad(e, ins, outs, douts, attrs, need):
    """g - exp(y) * sum(g)."""
    y, g, axis = outs[0], douts[0], attrs["axis"]
    total = e("sum", g, axis=axis, keepdim=True)
    return [e("subtract", g, e("multiply", e("exp", y), total))]


defop(
    "softmax",
    attrs={"axis": -1},
    kernel=lambda xp, x, axis=-1: nnk.softmax(xp, x, axis),
    infer=_softmax_infer("softmax"),
    grad=_softmax_grad,
    dtypes=dtypes.FLOATS,
)
defop(
    "log_softmax",
    attrs={"axis": -1},
    kernel=lambda xp, x, axis=-1: nnk.log_softmax(xp, x, axis),
    infer=_softmax_infer("log_softmax"),
    grad=_log_softmax_grad,
    dtypes=dtypes.FLOATS,
)

# ------------------------------------------------------------- cross entropy

_REDUCTIONS = ("mean", "sum", "none")


def _ce_infer(op):
    def infer(logits, label, *rest, soft_label=False, ignore_index=-100, reduction="mean",
              axis=-1):
        shape = logits.shape
        if not shape:
            raise ValueError(f"{op}: logits must be at least 1-D, got shape {fmt(shape)}")
        ax = shapes.normalize_axis(axis, len(shape), op)
        if reduction not in _REDUCTIONS:
            raise ValueError(f"{op}: unknown reduction {reduction!r} (use mean, sum or none)")
        rows = tuple(d for i, d in enumerate(shape) if i != ax)
        if soft_label:
            _check_float(label, "a soft label", op)
            if not shapes.same(label.shape, shape):
                raise ValueError(
                    f"{op}: soft label shape {fmt(label.shape)} must equal logits shape "
                    f"{fmt(shape)}"
                )
        else:
            if label.dtype not in dtypes.INTS:
                raise TypeError(f"{op}: hard labels must be integers, got {label.dtype} "
                                "(pass soft_label=True for probabilities)")
            trimmed = label.shape
            if len(label.shape) == len(shape) and label.shape[ax] in (1, -1):
                trimmed = tuple(d for i, d in enumerate(label.shape) if i != ax)
            if not shapes.same(trimmed, rows):
                raise ValueError(
                    f"{op}: label shape {fmt(label.shape)} does not fit logits shape "
                    f"{fmt(shape)} (class axis {ax})"
                )
        if rest:  # the gradient op: DLoss in, a logits-shaped gradient out
            return Meta(shape, logits.dtype)
        return Meta(rows if reduction == "none" else (), logits.dtype)

    return infer


def _ce_grad(e, ins, outs, douts, attrs, need):
    logits, label = ins
    return [e("cross_entropy_grad", logits, label, douts[0], **attrs), None]


_CE_ATTRS = {"soft_label": False, "ignore_index": -100, "reduction": "mean", "axis": -1}
_CE_TYPES = {"reduction": one_of(*_REDUCTIONS)}

defop(
    "cross_entropy",
    inputs=("Logits", "Label"),
    outputs=("Loss",),
    attrs=_CE_ATTRS,
    attr_types=_CE_TYPES,
    kernel=nnk.cross_entropy,
    infer=_ce_infer("cross_entropy"),
    eager_infer=True,  # which labels it takes depends on soft_label
    grad=_ce_grad,
    no_grad=("Label",),
    dtypes=dtypes.FLOATS,
    doc="Softmax cross entropy of Logits against integer (or soft) labels.",
)
defop(
    "cross_entropy_grad",
    inputs=("Logits", "Label", "DLoss"),
    outputs=("DLogits",),
    attrs=_CE_ATTRS,
    attr_types=_CE_TYPES,
    kernel=nnk.cross_entropy_grad,
    infer=_ce_infer("cross_entropy_grad"),
    eager_infer=True,
    no_grad=("Label",),
    dtypes={"Logits": dtypes.FLOATS, "DLoss": dtypes.FLOATS},
    doc="The gradient of cross_entropy with respect to Logits.",
)

# -------------------------------------------------------------------- dropout

_DROPOUT_MODES = ("upscale_in_train", "downscale_in_infer")


def _dropout_infer(x, mask, p=0.5, mode="upscale_in_train"):
    if mode not in _DROPOUT_MODES:
        raise ValueError(f"dropout: unknown mode {mode!r} (use {' or '.join(_DROPOUT_MODES)})")
    if not 0 <= p <= 1:
        raise ValueError(f"dropout: p must be in [0, 1], got {p}")
    if not shapes.same(x.shape, mask.shape):
        raise ValueError(f"dropout: mask shape {fmt(mask.shape)} must equal input shape "
                         f"{fmt(x.shape)}")
    return Meta(x.shape, x.dtype)


def _dropout_kernel(xp, x, mask, p=0.5, mode="upscale_in_train"):
    if x.shape != mask.shape:
        raise ValueError("mask shape differs")  # infer explains it
    return nnk.dropout(xp, x, mask, p, mode)


def _dropout_grad(e, ins, outs, douts, attrs, need):
    return [e("dropout", douts[0], ins[1], **attrs), None]


defop(
    "dropout",
    inputs=("X", "Mask"),
    attrs={"p": 0.5, "mode": "upscale_in_train"},
    attr_types={"p": number_in(0, 1), "mode": one_of(*_DROPOUT_MODES)},
    kernel=_dropout_kernel,
    infer=_dropout_infer,
    grad=_dropout_grad,
    no_grad=("Mask",),
    dtypes={"X": dtypes.FLOATS, "Mask": dtypes.FLOATS},
    doc="X * Mask (Mask from bernoulli_mask), scaled by 1/(1-p) in upscale_in_train mode.",
)

# ------------------------------------------------------------------ embedding


def _embedding_check(op, ids, w, padding_idx):
    if ids.dtype not in dtypes.INTS:
        raise TypeError(f"{op}: ids must be integers, got {ids.dtype}")
    if len(w.shape) != 2:
        raise ValueError(f"{op}: weight must be 2-D [vocab, dim], got shape {fmt(w.shape)}")
    vocab = w.shape[0]
    if padding_idx is not None and vocab != -1 and not -vocab <= padding_idx < vocab:
        raise ValueError(f"{op}: padding_idx {padding_idx} is out of range for a vocabulary "
                         f"of {vocab} (weight {fmt(w.shape)})")


def _embedding_infer(ids, w, padding_idx=None):
    _embedding_check("embedding", ids, w, padding_idx)
    return Meta(tuple(ids.shape) + (w.shape[1],), w.dtype)


def _embedding_grad_infer(ids, w, dout, padding_idx=None):
    _embedding_check("embedding_grad", ids, w, padding_idx)
    want = tuple(ids.shape) + (w.shape[1],)
    if not shapes.same(want, dout.shape):
        raise ValueError(f"embedding_grad: output gradient shape {fmt(dout.shape)} must be "
                         f"{fmt(want)} (ids {fmt(ids.shape)}, weight {fmt(w.shape)})")
    return Meta(w.shape, dout.dtype)


def _embedding_grad(e, ins, outs, douts, attrs, need):
    ids, w = ins
    return [None, e("embedding_grad", ids, w, douts[0], **attrs)]


def _embedding_grad_grad(e, ins, outs, douts, attrs, need):
    """embedding_grad is linear in DOut, the adjoint of embedding."""
    return [None, None, e("embedding", ins[0], douts[0], **attrs)]


defop(
    "embedding",
    inputs=("Ids", "W"),
    attrs={"padding_idx": None},
    attr_types={"padding_idx": NONE | INT},
    kernel=lambda xp, ids, w, padding_idx=None: nnk.embedding(xp, ids, w, padding_idx),
    infer=_embedding_infer,
    grad=_embedding_grad,
    no_grad=("Ids",),
    dtypes=dtypes.INTS,
    doc="Rows of W picked by integer Ids; ids equal to padding_idx give zeros.",
)
defop(
    "embedding_grad",
    inputs=("Ids", "W", "DOut"),
    attrs={"padding_idx": None},
    attr_types={"padding_idx": NONE | INT},
    kernel=lambda xp, ids, w, dout, padding_idx=None: nnk.embedding_grad(
        xp, ids, w, dout, padding_idx),
    infer=_embedding_grad_infer,
    grad=_embedding_grad_grad,
    no_grad=("Ids", "W"),
    dtypes={"Ids": dtypes.INTS, "DOut": dtypes.FLOATS},
    doc="The gradient of embedding with respect to W (W is only a shape reference).",
)

# ----------------------------------------------------------------------- gelu

_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
_GELU_A = 0.044715


def _gelu_grad(e, ins, outs, douts, attrs, need):
    return [e("gelu_grad", ins[0], douts[0], **attrs)]


def _gelu_second(e, x, approximate):
    """gelu''(x) with primitive ops."""
    x2 = e("multiply", x, x)
    if not approximate:
        # d/dx [Phi(x) + x phi(x)] = phi(x) (2 - x^2)
        phi = e("scale", e("exp", e("scale", x2, scale=-0.5)), scale=_INV_SQRT_2PI)
        return e("multiply", phi, e("scale", x2, scale=-1.0, bias=2.0))
    # t = tanh(u), u = c (x + a x^3), u' = c (1 + 3 a x^2):
    # f'' = (1 - t^2) (c + 6 a c x^2 - x t u'^2)
    c, a = _SQRT_2_OVER_PI, _GELU_A
    t = e("tanh", e("scale", e("multiply", x, e("scale", x2, scale=a, bias=1.0)), scale=c))
    du = e("scale", x2, scale=3 * a * c, bias=c)
    sech2 = e("scale", e("multiply", t, t), scale=-1.0, bias=1.0)
    inner = e("subtract", e("scale", x2, scale=6 * a * c, bias=c),
              e("multiply", e("multiply", x, t), e("multiply", du, du)))
    return e("multiply", sech2, inner)


def _gelu_grad_grad(e, ins, outs, douts, attrs, need):
    x, dy = ins
    gg = douts[0]
    gx = gdy = None
    if need[0]:
        gx = e("multiply", e("multiply", gg, dy), _gelu_second(e, x, attrs["approximate"]))
    if need[1]:
        gdy = e("gelu_grad", x, gg, **attrs)
    return [gx, gdy]


defop(
    "gelu",
    attrs={"approximate": False},
    kernel=lambda xp, x, approximate=False: nnk.gelu(xp, x, approximate),
    infer=lambda x, approximate=False: Meta(x.shape, x.dtype),
    grad=_gelu_grad,
    dtypes=dtypes.FLOATS,
    doc="x * Phi(x); approximate uses the tanh form.",
)
defop(
    "gelu_grad",
    inputs=("X", "DOut"),
    attrs={"approximate": False},
    kernel=lambda xp, x, dy, approximate=False: nnk.gelu_grad(xp, x, dy, approximate),
    infer=lambda x, dy, approximate=False: Meta(shapes.broadcast(x.shape, dy.shape, "gelu_grad"),
                                                dtypes.promote(x.dtype, dy.dtype)),
    grad=_gelu_grad_grad,
    dtypes=dtypes.FLOATS,
    promote=(0, 1),
    doc="The gradient of gelu: DOut * gelu'(X).",
)
