"""Dtypes and the promotion rules shared by eager and static code.

Rules (DESIGN.md): float32 by default; Python ints become int64. A tensor
combined with a Python scalar keeps the tensor's dtype, except an int/bool
tensor with a Python float gives float32 (and a bool tensor with a Python int
gives int64). A float tensor with an int tensor gives the float dtype.
Otherwise NumPy's promotion.
"""

import numpy as np

float16 = np.dtype("float16")
float32 = np.dtype("float32")
float64 = np.dtype("float64")
int8 = np.dtype("int8")
int16 = np.dtype("int16")
int32 = np.dtype("int32")
int64 = np.dtype("int64")
uint8 = np.dtype("uint8")
bool_ = np.dtype("bool")

FLOATS = frozenset({float16, float32, float64})
INTS = frozenset({int8, int16, int32, int64, uint8})
BOOLS = frozenset({bool_})
NUMERIC = FLOATS | INTS
ALL = NUMERIC | BOOLS

DEFAULT_FLOAT = float32


def as_dtype(dtype, *, where: str = "dtype") -> np.dtype:
    """A numpy dtype from a name, numpy dtype or Python type; clear error otherwise."""
    if dtype is float:
        return float32
    if dtype is int:
        return int64
    if dtype is bool:
        return bool_
    try:
        result = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{where}: unknown dtype {dtype!r}") from None
    if result not in ALL:
        raise TypeError(f"{where}: unsupported dtype {result} (supported: {names(ALL)})")
    return result


def names(dtypes) -> str:
    return ", ".join(sorted(str(d) for d in dtypes))


_KINDS = {FLOATS: "a float tensor", INTS: "an integer tensor", BOOLS: "a bool tensor",
          INTS | BOOLS: "an integer or bool tensor", NUMERIC: "a number tensor (not bool)"}


def describe(dtypes) -> str:
    """A set of dtypes in words, for errors ("a float tensor (float16, ...)")."""
    dtypes = frozenset(dtypes)
    kind = _KINDS.get(dtypes)
    if kind is None:
        return f"a tensor of dtype {names(dtypes)}"
    return kind if len(dtypes) == 1 else f"{kind} ({names(dtypes)})"


def is_float(dtype) -> bool:
    return dtype in FLOATS


def accumulated(dtype: np.dtype) -> np.dtype:
    """The dtype sums and products are computed and returned in: int64 for bool and
    integer inputs (PyTorch's rule; NumPy would give uint64 for unsigned ones), the
    input's own dtype for floats."""
    return dtype if dtype in FLOATS else int64


def promote(a: np.dtype, b: np.dtype) -> np.dtype:
    """Result dtype of a binary op on two tensors."""
    if a is b or a == b:
        return a
    a_float, b_float = a in FLOATS, b in FLOATS
    if a_float and not b_float:
        return a
    if b_float and not a_float:
        return b
    return np.promote_types(a, b)


def scalar_dtype(value) -> np.dtype:
    """The dtype a lone Python scalar becomes as a tensor."""
    if isinstance(value, bool):
        return bool_
    if isinstance(value, int):
        return int64
    return float32


def promote_scalar(tensor_dtype: np.dtype, value) -> np.dtype:
    """Result dtype of a tensor combined with a Python scalar."""
    if isinstance(value, bool):
        return tensor_dtype
    if isinstance(value, int):
        return int64 if tensor_dtype is bool_ or tensor_dtype == bool_ else tensor_dtype
    if tensor_dtype in FLOATS:
        return tensor_dtype
    return float32


_PYTHON_SCALARS = (int, float, bool)


def common_dtype(operands):
    """The dtype that promoted operands (tensors, or anything with ``.dtype``, and
    Python scalars) take together; None when there are none."""
    tensor_dtype, scalar = None, None
    for v in operands:
        if v is None:
            continue
        if type(v) in _PYTHON_SCALARS:
            if scalar is None or isinstance(v, float):
                scalar = v
        else:
            tensor_dtype = v.dtype if tensor_dtype is None else promote(tensor_dtype, v.dtype)
    if tensor_dtype is None:
        return None if scalar is None else scalar_dtype(scalar)
    return tensor_dtype if scalar is None else promote_scalar(tensor_dtype, scalar)
