"""The public functional API: each function emits one op through the dispatcher."""

from __future__ import annotations

import builtins as _builtins
import math as _math

import numpy as _np

from dy2stat import default_dtype as _default_dtype
from dy2stat.dispatch import apply, binary, unary
from dy2stat.runtime import dtypes
from dy2stat.runtime.ops.linalg import normalize_equation as _normalize_equation
from dy2stat.runtime.registry import OPS as _OPS


def _axis(axis):
    return list(axis) if isinstance(axis, tuple) else axis


# ------------------------------------------------------------ elementwise
add = binary("add")
add.__doc__ = "``x + y``, elementwise, broadcasting."


subtract = binary("subtract")
subtract.__doc__ = "``x - y``, elementwise, broadcasting."


multiply = binary("multiply")
multiply.__doc__ = "``x * y``, elementwise, broadcasting."


_true_divide = binary("divide")


def divide(x, y):
    """``x / y``, elementwise, broadcasting: true division, so integer (and bool) tensors
    divide as the default float dtype (``7 / 2`` is 3.5), as in Paddle."""
    if _integral(x) and _integral(y):
        dtype = _default_dtype.get_default_dtype()
        if type(x) in (int, bool):
            y = apply("cast", y, dtype=dtype)
        else:
            x = apply("cast", x, dtype=dtype)
    return _true_divide(x, y)


def _integral(value) -> bool:
    if type(value) in (int, bool):
        return True
    dtype = getattr(value, "dtype", None)
    return dtype is not None and _np.dtype(dtype).kind in "iub"



floor_divide = binary("floor_divide")
floor_divide.__doc__ = "``x // y``, elementwise, broadcasting."


remainder = binary("remainder")
remainder.__doc__ = "``x % y`` (the sign of ``y``, as Python), elementwise, broadcasting."


mod = remainder


pow = binary("pow")
pow.__doc__ = "``x ** y``, elementwise, broadcasting."


maximum = binary("maximum")
maximum.__doc__ = "The larger of ``x`` and ``y``, elementwise, broadcasting."


minimum = binary("minimum")
minimum.__doc__ = "The smaller of ``x`` and ``y``, elementwise, broadcasting."


def scale(x, scale=1.0, bias=0.0, bias_after_scale=True, act=None):
    """``scale * x + bias`` (``bias_after_scale=False``: ``scale * (x + bias)``), then the
    activation ``act`` (an op name such as ``"relu"``) when given. ``scale`` may be a
    tensor."""
    if hasattr(scale, "dtype"):  # a tensor: multiply by it
        out = multiply(x, scale) if bias_after_scale else multiply(add(x, bias), scale)
        out = add(out, bias) if bias_after_scale and bias else out
    else:
        shift = bias if bias_after_scale else bias * scale
        out = apply("scale", x, scale=float(scale), bias=float(shift))
    if act is None:
        return out
    if act not in _OPS or len(_OPS[act].inputs) != 1:
        raise ValueError(f"scale: unknown activation {act!r} (an op name such as 'relu')")
    return apply(act, out)


neg = unary("neg")
neg.__doc__ = "``-x``, elementwise."


exp = unary("exp")
exp.__doc__ = "``e ** x``, elementwise."


log = unary("log")
log.__doc__ = "The natural logarithm, elementwise."


sqrt = unary("sqrt")
sqrt.__doc__ = "The square root, elementwise."


def square(x):
    """``x * x``, elementwise."""
    return apply("multiply", x, x)


tanh = unary("tanh")
tanh.__doc__ = "The hyperbolic tangent, elementwise."


sigmoid = unary("sigmoid")
sigmoid.__doc__ = "``1 / (1 + exp(-x))``, elementwise."


abs = unary("abs")
abs.__doc__ = "``|x|``, elementwise."


sign = unary("sign")
sign.__doc__ = "-1, 0 or 1 by the sign of each element."


sin = unary("sin")
sin.__doc__ = "The sine, elementwise."


cos = unary("cos")
cos.__doc__ = "The cosine, elementwise."


floor = unary("floor")
floor.__doc__ = "The largest integer not above each element."


ceil = unary("ceil")
ceil.__doc__ = "The smallest integer not below each element."


round = unary("round")
round.__doc__ = "Each element rounded to the nearest integer (halves to even, as NumPy)."


relu = unary("relu")
relu.__doc__ = "``max(x, 0)``, elementwise."


def clip(x, min=None, max=None):
    """``x`` limited to ``[min, max]`` (None: no limit on that side)."""
    attrs = {}
    if min is not None:
        attrs["min"] = float(min)
    if max is not None:
        attrs["max"] = float(max)
    return apply("clip", x, **attrs)


def softmax(x, axis=-1):
    """``exp(x) / sum(exp(x))`` along ``axis`` (computed without overflow)."""
    return apply("softmax", x, axis=int(axis))


def log_softmax(x, axis=-1):
    """``log(softmax(x))`` along ``axis``, computed stably."""
    return apply("log_softmax", x, axis=int(axis))


def cast(x, dtype):
    """``x`` converted to ``dtype`` (a name such as 'float32', a NumPy dtype, or float, int,
    bool)."""
    return apply("cast", x, dtype=_dtype_name(dtype))


def _dtype_name(dtype) -> str:
    """The name of a dtype argument; one dy2stat has no ops for is refused here, as a
    program refuses it (eager NumPy would compute with it)."""
    return dtypes.as_dtype(dtype, where="dtype").name


# ------------------------------------------------------------- comparison
equal = binary("equal")
equal.__doc__ = "``x == y``, elementwise: a bool tensor of the broadcast shape."


not_equal = binary("not_equal")
not_equal.__doc__ = "``x != y``, elementwise: a bool tensor of the broadcast shape."


less_than = binary("less_than")
less_than.__doc__ = "``x < y``, elementwise: a bool tensor of the broadcast shape."


less_equal = binary("less_equal")
less_equal.__doc__ = "``x <= y``, elementwise: a bool tensor of the broadcast shape."


greater_than = binary("greater_than")
greater_than.__doc__ = "``x > y``, elementwise: a bool tensor of the broadcast shape."


greater_equal = binary("greater_equal")
greater_equal.__doc__ = "``x >= y``, elementwise: a bool tensor of the broadcast shape."


logical_and = binary("logical_and")
logical_and.__doc__ = "``x and y`` of bool tensors, elementwise."


logical_or = binary("logical_or")
logical_or.__doc__ = "``x or y`` of bool tensors, elementwise."


logical_xor = binary("logical_xor")
logical_xor.__doc__ = "``x != y`` of bool tensors, elementwise."


logical_not = unary("logical_not")
logical_not.__doc__ = "``not x`` of a bool tensor, elementwise."


# ------------------------------------------------------------- reductions
def sum(x, axis=None, keepdim=False):
    """The sum over ``axis`` (an int, a list, or None for all; a full reduction is 0-D);
    ``keepdim`` keeps the reduced axes as size 1."""
    return apply("sum", x, axis=_axis(axis), keepdim=keepdim)


def mean(x, axis=None, keepdim=False):
    """The mean over ``axis`` (an int, a list, or None for all); ``keepdim`` keeps the
    reduced axes."""
    return apply("mean", x, axis=_axis(axis), keepdim=keepdim)


def max(x, axis=None, keepdim=False):
    """The maximum over ``axis`` (an int, a list, or None for all); ``keepdim`` keeps the
    reduced axes."""
    return apply("max", x, axis=_axis(axis), keepdim=keepdim)


def min(x, axis=None, keepdim=False):
    """The minimum over ``axis`` (an int, a list, or None for all); ``keepdim`` keeps the
    reduced axes."""
    return apply("min", x, axis=_axis(axis), keepdim=keepdim)


def prod(x, axis=None, keepdim=False):
    """The product over ``axis`` (an int, a list, or None for all); ``keepdim`` keeps the
    reduced axes."""
    return apply("prod", x, axis=_axis(axis), keepdim=keepdim)


def any(x, axis=None, keepdim=False):
    """Whether any element over ``axis`` is true (None: all elements): a bool tensor."""
    return apply("any", x, axis=_axis(axis), keepdim=keepdim)


def all(x, axis=None, keepdim=False):
    """Whether every element over ``axis`` is true (None: all elements): a bool tensor."""
    return apply("all", x, axis=_axis(axis), keepdim=keepdim)


def argmax(x, axis=None, keepdim=False):
    """The index of the largest element along ``axis`` (None: of the flattened input),
    int64; the first of equal ones."""
    return apply("argmax", x, axis=axis, keepdim=keepdim)


def argmin(x, axis=None, keepdim=False):
    """The index of the smallest element along ``axis`` (None: of the flattened input),
    int64; the first of equal ones."""
    return apply("argmin", x, axis=axis, keepdim=keepdim)


def cumsum(x, axis=None, dtype=None):
    """The cumulative sum along ``axis`` (None: over the flattened input)."""
    return apply("cumsum", x if dtype is None else cast(x, dtype), axis=axis)


def cumprod(x, dim=None, dtype=None):
    """The cumulative product along ``dim`` (None: over the flattened input)."""
    return apply("cumprod", x if dtype is None else cast(x, dtype), dim=dim)


_matmul = binary("matmul")


def matmul(x, y, transpose_x=False, transpose_y=False):
    """The matrix product ``x @ y`` (batched over leading dims, broadcasting), ``x`` or
    ``y`` transposed in its last two dims first when asked; 1-D operands are vectors."""
    if transpose_x or transpose_y:
        return apply("matmul", x, y, transpose_x=transpose_x, transpose_y=transpose_y)
    return _matmul(x, y)


mm = matmul


# ----------------------------------------------------------- manipulation
def _shape_list(shape):
    if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
        shape = shape[0]
    return list(shape)


def reshape(x, shape):
    """``x`` with the elements in a new ``shape``: -1 takes the size that fits, 0 keeps that
    dim of ``x``; dims may be tensors (sizes known only when the program runs)."""
    dims = _static_dims(shape)
    if dims.count(-1) > 1 and _builtins.any(getattr(d, "is_static", False) for d in shape):
        # Several sizes known only when the program runs: the shape becomes a tensor.
        parts = [cast(d, "int64").reshape([1]) if getattr(d, "is_static", False)
                 else apply("full", shape=[1], value=float(d), dtype="int64") for d in shape]
        return apply("reshape_shaped", x, concat(parts), static_shape=dims)
    return apply("reshape", x, shape=dims)


def _static_dims(shape) -> list:
    """Dims as ints; a dim given as a tensor (an unknown size, as ``x.shape[0]`` is
    in converted code) becomes -1, which reshape infers from the element count
    when it is the only one."""
    return [-1 if getattr(d, "is_static", False) else int(d) for d in shape]


def transpose(x, perm):
    """``x`` with its dims permuted: dim ``i`` of the result is dim ``perm[i]`` of ``x``."""
    return apply("transpose", x, perm=[int(p) for p in perm])


def concat(x, axis=0):
    """The tensors of ``x`` joined along ``axis``."""
    return apply("concat", list(x), axis=int(axis))


def stack(x, axis=0):
    """The tensors of ``x`` (of one shape) stacked along a new ``axis``."""
    return apply("stack", list(x), axis=int(axis))


def split(x, num_or_sections, axis=0):
    """``x`` cut along ``axis`` into ``num_or_sections`` equal parts (an int) or parts of
    the listed sizes (one may be -1): a list."""
    sections = num_or_sections if isinstance(num_or_sections, int) else list(num_or_sections)
    return apply("split", x, num_or_sections=sections, axis=int(axis))


def squeeze(x, axis=None):
    """``x`` without its size-1 dims (all of them, or those of ``axis``)."""
    return apply("squeeze", x, axis=_axis(axis))


def unsqueeze(x, axis):
    """``x`` with size-1 dims inserted at ``axis`` (an int or a list)."""
    return apply("unsqueeze", x, axis=_axis(axis))


def flatten(x, start_axis=0, stop_axis=-1):
    """``x`` with dims ``start_axis`` to ``stop_axis`` merged into one."""
    return apply("flatten", x, start_axis=start_axis, stop_axis=stop_axis)


def expand(x, shape):
    """``x`` broadcast to ``shape`` (-1 keeps a dim)."""
    return apply("expand", x, shape=[int(d) for d in shape])


broadcast_to = expand


def expand_as(x, y):
    """``x`` broadcast to the shape of ``y``."""
    return apply("expand_as", x, y)


def tile(x, repeat_times):
    """``x`` repeated ``repeat_times[i]`` times along each dim ``i``."""
    return apply("tile", x, repeat_times=[int(r) for r in repeat_times])


def flip(x, axis):
    """``x`` reversed along ``axis`` (an int or a list)."""
    return apply("flip", x, axis=[axis] if isinstance(axis, int) else list(axis))


def gather(x, index, axis=0):
    """The slices of ``x`` at ``index`` (ints) along ``axis``."""
    return apply("gather", x, index, axis=int(axis))


def where(condition, x, y):
    """``x`` where ``condition`` holds, ``y`` elsewhere (broadcasting)."""
    return apply("where", condition, x, y)


def one_hot(x, num_classes):
    """One-hot float vectors of ``num_classes`` for the integer ``x`` (a new last dim)."""
    return apply("one_hot", x, num_classes=int(num_classes))


def shape(x):
    """The shape as a 1-D int64 tensor (works for unknown static dims too)."""
    return apply("shape", x)


def numel(x):
    """The number of elements, a 0-D int64 tensor."""
    return apply("numel", x)


def clone(x):
    """A copy of ``x`` that gradients flow through (``assign``)."""
    return apply("assign", x)


assign = clone


# ----------------------------------------------------- math and statistics
rsqrt = unary("rsqrt")
rsqrt.__doc__ = "``1 / sqrt(x)``, elementwise."


isnan = unary("isnan")
isnan.__doc__ = "Where ``x`` is NaN: a bool tensor."


isinf = unary("isinf")
isinf.__doc__ = "Where ``x`` is +inf or -inf: a bool tensor."


isfinite = unary("isfinite")
isfinite.__doc__ = "Where ``x`` is neither infinite nor NaN: a bool tensor."


def masked_fill(x, mask, value):
    """``x`` with ``value`` (a number or a tensor, cast to x's dtype) where ``mask`` is true."""
    return apply("masked_fill", x, mask, value)


def add_n(inputs):
    """The sum of a list of tensors of one shape and dtype."""
    if not isinstance(inputs, (list, tuple)):
        return inputs
    return apply("add_n", list(inputs))


def allclose(x, y, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether ``|x - y| <= atol + rtol * |y|`` everywhere: a 0-D bool tensor."""
    return apply("allclose", x, y, rtol=float(rtol), atol=float(atol), equal_nan=bool(equal_nan))


def var(x, axis=None, unbiased=True, keepdim=False):
    """The variance over ``axis`` (None: all elements); ``unbiased`` divides by ``n - 1``."""
    return apply("var", x, axis=_axis(axis), unbiased=bool(unbiased), keepdim=keepdim)


def std(x, axis=None, unbiased=True, keepdim=False):
    """The standard deviation over ``axis`` (None: all elements); ``unbiased`` divides by
    ``n - 1``."""
    return sqrt(var(x, axis, unbiased, keepdim))


def logsumexp(x, axis=None, keepdim=False):
    """``log(sum(exp(x)))`` over ``axis`` (None: all elements), without overflow."""
    return apply("logsumexp", x, axis=_axis(axis), keepdim=keepdim)


def norm(x, p="fro", axis=None, keepdim=False):
    """The vector p-norm of ``x`` over ``axis`` (None: all elements; two axes: the
    matrix flattened, as Paddle 2.x computes it). ``p``: "fro" (2 over the axes),
    0, 1, 2, inf, -inf or any positive number."""
    axis = _axis(axis)
    if isinstance(axis, list) and len(axis) == 1:
        axis = axis[0]
    if p == "fro":
        p = 2
    if isinstance(p, str) or (p < 0 and p != -_math.inf):
        raise ValueError(f"norm: p={p!r} is not supported (use 'fro', 0, 1, 2, inf, -inf "
                         "or a positive number)")
    magnitude = abs(x)
    if p == _math.inf:
        return max(magnitude, axis, keepdim)
    if p == -_math.inf:
        return min(magnitude, axis, keepdim)
    if p == 0:
        return sum(cast(not_equal(x, 0), x.dtype), axis, keepdim)
    if p == 1:
        return sum(magnitude, axis, keepdim)
    if p == 2:
        return sqrt(sum(multiply(x, x), axis, keepdim))
    return pow(sum(pow(magnitude, float(p)), axis, keepdim), 1.0 / p)


# -------------------------------------------------------- sorting and order
def argsort(x, axis=-1, descending=False, stable=False):
    """Indices that sort ``x`` along ``axis`` (always stable: ties keep their order)."""
    return apply("argsort", x, axis=int(axis), descending=bool(descending))


def sort(x, axis=-1, descending=False, stable=False):
    """``x`` sorted along ``axis`` (always stable)."""
    order = argsort(x, axis, descending)
    return apply("take_along_axis", x, order, axis=int(axis))


def topk(x, k, axis=None, largest=True, sorted=True):
    """``(values, indices)``: the ``k`` largest (``largest=False``: smallest) along
    ``axis`` (None: the last), in order."""
    if getattr(k, "is_static", False):
        raise TypeError("topk: k must be a Python int in converted code (the output's "
                        "shape depends on it)")
    return apply("topk", x, k=int(k), axis=-1 if axis is None else int(axis),
                 largest=bool(largest))


# ------------------------------------------------------------ linear algebra
def einsum(equation, *operands):
    """Einstein summation, as ``numpy.einsum`` (``...`` and implicit outputs included)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = operands[0]
    explicit = _normalize_equation(equation, [len(x.shape) for x in operands])
    return apply("einsum", list(operands), equation=explicit)


def bmm(x, y):
    """Batched matrix product of ``[b, n, m]`` and ``[b, m, k]`` tensors."""
    xs, ys = list(x.shape), list(y.shape)
    if len(xs) != 3 or len(ys) != 3:
        raise ValueError(f"bmm: both inputs must be 3-D, got shapes {xs} and {ys}")
    if xs[0] != ys[0] and -1 not in (xs[0], ys[0]):
        raise ValueError(f"bmm: the batch sizes differ: shapes {xs} and {ys}")
    return matmul(x, y)


def outer(x, y):
    """The outer product of the flattened ``x`` and ``y``."""
    return multiply(reshape(x, [-1, 1]), reshape(y, [1, -1]))


def tril(x, diagonal=0):
    """``x`` with the elements above diagonal ``diagonal`` of its last two dims set to 0."""
    return apply("tril", x, diagonal=int(diagonal))


def triu(x, diagonal=0):
    """``x`` with the elements below diagonal ``diagonal`` of its last two dims set to 0."""
    return apply("triu", x, diagonal=int(diagonal))


def diag(x, offset=0, padding_value=0):
    """A 1-D ``x`` on diagonal ``offset`` of a square matrix, or a 2-D ``x``'s diagonal."""
    return apply("diag", x, offset=int(offset), padding_value=float(padding_value))


# ---------------------------------------------------- splitting and joining
def chunk(x, chunks, axis=0):
    """``x`` split into ``chunks`` equal parts along ``axis``."""
    return split(x, int(chunks), axis)


def unbind(input, axis=0):
    """The slices of ``input`` along ``axis``, that axis removed."""
    return apply("unstack", input, axis=int(axis))


def meshgrid(*args):
    """Coordinate grids of 1-D tensors ('ij' indexing)."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = args[0]
    return apply("meshgrid", list(args))


def roll(x, shifts, axis=None):
    """``x`` shifted circularly along ``axis`` (None: over the flattened input)."""
    if axis is not None and not isinstance(axis, int):
        axis = [int(a) for a in axis]
    if not isinstance(shifts, int):
        shifts = [int(s) for s in shifts]
        if axis is None or isinstance(axis, int):
            shifts = shifts[0] if len(shifts) == 1 else shifts
    return apply("roll", x, shifts=shifts, axis=axis)


def repeat_interleave(x, repeats, axis=None):
    """Each element repeated ``repeats`` times (an int, or one count per element) along
    ``axis`` (None: over the flattened input)."""
    if isinstance(repeats, int):
        return apply("repeat_interleave", x, None, times=repeats, axis=axis)
    if isinstance(repeats, (list, tuple)):
        repeats = _np.asarray(repeats, dtype=_np.int64)
    return apply("repeat_interleave", x, repeats, axis=axis)


# --------------------------------------------------------------- selection
def gather_nd(x, index):
    """The elements (or slices) of ``x`` at the coordinates in the last dim of ``index``."""
    return apply("gather_nd", x, index)


def index_select(x, index, axis=0):
    """The slices of ``x`` at the 1-D ``index`` along ``axis``."""
    if len(index.shape) != 1:
        raise ValueError(f"index_select: the index must be 1-D, got shape {list(index.shape)}")
    return gather(x, index, axis)


def scatter(x, index, updates, overwrite=True):
    """``x`` with rows ``index`` replaced by ``updates`` (``overwrite=False``: by the sum
    of the updates for each row)."""
    return apply("scatter", x, index, updates, overwrite=bool(overwrite))


def masked_select(x, mask):
    """The elements of ``x`` where ``mask`` holds, as a 1-D tensor."""
    return apply("masked_select", x, mask)


def nonzero(x, as_tuple=False):
    """The coordinates of the non-zero elements (``[count, ndim]``; ``as_tuple``: one
    ``[count, 1]`` tensor per dim)."""
    out = apply("nonzero", x)
    if not as_tuple:
        return out
    return tuple(out[:, i:i + 1] for i in range(len(x.shape)))


def strided_slice(x, axes, starts, ends, strides):
    """``x[starts:ends:strides]`` on each of ``axes`` (bounds may be tensors)."""
    index = [_builtins.slice(None)] * len(x.shape)
    n = len(axes)
    for a, start, end, step in zip(axes, _items(starts, n), _items(ends, n), _items(strides, n)):
        index[a] = _builtins.slice(start, end, step)
    return x[tuple(index)]


def slice(input, axes, starts, ends):
    """``input[starts:ends]`` on each of ``axes`` (bounds may be tensors; out-of-range
    bounds are clamped)."""
    return strided_slice(input, axes, starts, ends, [1] * len(axes))


def _items(values, n):
    """A list of bounds: a list as it is, a 1-D tensor element by element."""
    if isinstance(values, (list, tuple)):
        return list(values)
    return [values[i] for i in range(n)]


def increment(x, value=1.0):
    """Add ``value`` to the one-element ``x`` in place; returns ``x``."""
    if not hasattr(x, "_assign"):
        raise TypeError(f"increment: x must be a tensor, got {type(x).__name__}")
    if -1 not in x.shape and _math.prod(x.shape) != 1:
        raise ValueError(f"increment: x must have one element, got shape {list(x.shape)}")
    x._assign(lambda old: apply("scale", old, bias=float(value)))
    return x


__all__ = [
    name
    for name, value in list(globals().items())
    if callable(value)
    and not name.startswith("_")
    and name not in {"apply", "binary", "unary", "annotations"}
]
