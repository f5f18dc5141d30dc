"""Picks the array module (numpy or cupy) an array belongs to."""

import numpy

try:  # CuPy is optional: the GPU extra installs it.
    import cupy
except Exception:  # pragma: no cover - depends on the machine
    cupy = None


def has_cupy() -> bool:
    return cupy is not None


def array_module(array):
    """numpy for host arrays, cupy for device arrays."""
    if cupy is not None and isinstance(array, cupy.ndarray):
        return cupy
    return numpy


def to_host(array):
    """A numpy copy of a numpy or cupy array (numpy arrays pass through); lists and tuples
    of them, and scalars, become one numpy array. ``numpy.asarray`` of a cupy array is an
    error on CuPy 14: values reach the host through here."""
    if cupy is not None:
        if isinstance(array, cupy.ndarray):
            return cupy.asnumpy(array)
        if isinstance(array, (list, tuple)):
            return numpy.asarray([to_host(a) for a in array])
    return numpy.asarray(array)
