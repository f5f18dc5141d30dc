"""The default float dtype (``d2s.set_default_dtype``): what layers make their
parameters in, and what Python floats and the creation functions give when no dtype
is named. float32 unless set."""

from __future__ import annotations

import numpy as np

from dy2stat.runtime import dtypes


class _Default:
    dtype = dtypes.float32


_default = _Default()


def set_default_dtype(d) -> None:
    """Make ``d`` (float16, float32 or float64) the default float dtype."""
    dtype = dtypes.as_dtype(d, where="set_default_dtype")
    if dtype not in dtypes.FLOATS:
        raise TypeError(f"set_default_dtype: the default dtype must be float16, float32 or "
                        f"float64, got {dtype}")
    _default.dtype = dtype


def get_default_dtype() -> str:
    """The default float dtype's name ('float32' unless set)."""
    return str(_default.dtype)


def default_float() -> np.dtype:
    return _default.dtype
