"""The public functional API: each function emits one op through the dispatcher."""

from __future__ import annotations

from dy2stat.dispatch import apply, binary, unary


def _axis(axis):
    return list(axis) if isinstance(axis, tuple) else axis


# ------------------------------------------------------------ elementwise
add = binary("add")


subtract = binary("subtract")


multiply = binary("multiply")


divide = binary("divide")


floor_divide = binary("floor_divide")


remainder = binary("remainder")


mod = remainder


pow = binary("pow")


maximum = binary("maximum")


minimum = binary("minimum")


def scale(x, scale=1.0, bias=0.0):
    return apply("scale", x, scale=float(scale), bias=float(bias))


neg = unary("neg")


exp = unary("exp")


log = unary("log")


sqrt = unary("sqrt")


def square(x):
    return apply("multiply", x, x)


tanh = unary("tanh")


sigmoid = unary("sigmoid")


abs = unary("abs")


sign = unary("sign")


sin = unary("sin")


cos = unary("cos")


floor = unary("floor")


ceil = unary("ceil")


round = unary("round")


relu = unary("relu")


def clip(x, min=None, max=None):
    attrs = {}
    if min is not None:
        attrs["min"] = float(min)
    if max is not None:
        attrs["max"] = float(max)
    return apply("clip", x, **attrs)


def softmax(x, axis=-1):
    return apply("softmax", x, axis=int(axis))


def log_softmax(x, axis=-1):
    return apply("log_softmax", x, axis=int(axis))


def cast(x, dtype):
    return apply("cast", x, dtype=_dtype_name(dtype))


def _dtype_name(dtype) -> str:
    from_python = {float: "float32", int: "int64", bool: "bool"}
    return from_python.get(dtype) or str(getattr(dtype, "name", dtype))


# ------------------------------------------------------------- comparison
equal = binary("equal")


not_equal = binary("not_equal")


less_than = binary("less_than")


less_equal = binary("less_equal")


greater_than = binary("greater_than")


greater_equal = binary("greater_equal")


logical_and = binary("logical_and")


logical_or = binary("logical_or")


logical_xor = binary("logical_xor")


logical_not = unary("logical_not")


# ------------------------------------------------------------- reductions
def sum(x, axis=None, keepdim=False):
    return apply("sum", x, axis=_axis(axis), keepdim=keepdim)


def mean(x, axis=None, keepdim=False):
    return apply("mean", x, axis=_axis(axis), keepdim=keepdim)


def max(x, axis=None, keepdim=False):
    return apply("max", x, axis=_axis(axis), keepdim=keepdim)


def min(x, axis=None, keepdim=False):
    return apply("min", x, axis=_axis(axis), keepdim=keepdim)


def prod(x, axis=None, keepdim=False):
    return apply("prod", x, axis=_axis(axis), keepdim=keepdim)


def any(x, axis=None, keepdim=False):
    return apply("any", x, axis=_axis(axis), keepdim=keepdim)


def all(x, axis=None, keepdim=False):
    return apply("all", x, axis=_axis(axis), keepdim=keepdim)


def argmax(x, axis=None, keepdim=False):
    return apply("argmax", x, axis=axis, keepdim=keepdim)


def argmin(x, axis=None, keepdim=False):
    return apply("argmin", x, axis=axis, keepdim=keepdim)


def cumsum(x, axis=None):
    return apply("cumsum", x, axis=axis)


_matmul = binary("matmul")


def matmul(x, y, transpose_x=False, transpose_y=False):
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
    return apply("reshape", x, shape=_static_dims(shape, "reshape"))


def _static_dims(shape, where) -> list:
    """Dims as ints; a dim given as a tensor (an unknown size, as ``x.shape[0]`` is
    in converted code) becomes -1, which reshape infers from the element count."""
    dims, unknown = [], 0
    for d in shape:
        if getattr(d, "is_static", False):
            dims.append(-1)
            unknown += 1
        else:
            dims.append(int(d))
    if unknown and dims.count(-1) > 1:
        raise ValueError(
            f"{where}: {dims.count(-1)} dims of {list(shape)} are unknown until the program "
            "runs; at most one may be (-1)")
    return dims


def transpose(x, perm):
    return apply("transpose", x, perm=[int(p) for p in perm])


def concat(x, axis=0):
    return apply("concat", list(x), axis=int(axis))


def stack(x, axis=0):
    return apply("stack", list(x), axis=int(axis))


def split(x, num_or_sections, axis=0):
    sections = num_or_sections if isinstance(num_or_sections, int) else list(num_or_sections)
    return apply("split", x, num_or_sections=sections, axis=int(axis))


def squeeze(x, axis=None):
    return apply("squeeze", x, axis=_axis(axis))


def unsqueeze(x, axis):
    return apply("unsqueeze", x, axis=_axis(axis))


def flatten(x, start_axis=0, stop_axis=-1):
    return apply("flatten", x, start_axis=start_axis, stop_axis=stop_axis)


def expand(x, shape):
    return apply("expand", x, shape=[int(d) for d in shape])


broadcast_to = expand


def tile(x, repeat_times):
    return apply("tile", x, repeat_times=[int(r) for r in repeat_times])


def flip(x, axis):
    return apply("flip", x, axis=[axis] if isinstance(axis, int) else list(axis))


def gather(x, index, axis=0):
    return apply("gather", x, index, axis=int(axis))


def where(condition, x, y):
    return apply("where", condition, x, y)


def one_hot(x, num_classes):
    return apply("one_hot", x, num_classes=int(num_classes))


def shape(x):
    """The shape as a 1-D int64 tensor (works for unknown static dims too)."""
    return apply("shape", x)


def numel(x):
    return apply("numel", x)


def clone(x):
    return apply("assign", x)


assign = clone


__all__ = [
    name
    for name, value in list(globals().items())
    if callable(value)
    and not name.startswith("_")
    and name not in {"apply", "binary", "unary", "annotations"}
]
