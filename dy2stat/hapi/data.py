"""How ``Model`` reads data: a DataLoader from a Dataset, a batch's fields split
into the network's inputs and the labels, and values as lists and NumPy arrays."""

from __future__ import annotations

import inspect

import numpy as np

from dy2stat.io import DataLoader
from dy2stat.kernels.backend import to_host
from dy2stat.nn import Layer
from dy2stat.tensor import Tensor


def _to_list(value) -> list:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _numpy(value) -> np.ndarray:
    if isinstance(value, Tensor):
        return value.numpy()
    return np.asarray(to_host(value) if hasattr(value, "__cuda_array_interface__") else value)


def _batch_size(value) -> int:
    shape = getattr(value, "shape", None)
    if shape is None:
        return len(value) if hasattr(value, "__len__") else 1
    return int(shape[0]) if len(shape) else 1


def _num_forward_inputs(network: Layer) -> int:
    """How many positional inputs ``forward`` takes without defaults (at least 1)."""
    try:
        sig = inspect.signature(type(network).forward)
    except (TypeError, ValueError):
        return 1
    params = list(sig.parameters.values())[1:]  # without self
    count = 0
    for p in params:
        if p.kind == p.VAR_POSITIONAL:
            return max(count, 1)
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty:
            count += 1
    return max(count, 1)


def _loader(data, batch_size, shuffle, drop_last, num_workers, what):
    if data is None:
        raise ValueError(f"Model.{what}: no data")
    if isinstance(data, DataLoader):
        return data
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ValueError(f"Model.{what}: batch_size must be a positive int, "
                         f"got {batch_size!r}")
    if hasattr(data, "__getitem__") or hasattr(data, "__iter__"):
        return DataLoader(data, batch_size=batch_size, shuffle=shuffle,
                          drop_last=drop_last, num_workers=num_workers)
    raise TypeError(f"Model.{what}: expected a Dataset or a DataLoader, "
                    f"got {type(data).__name__}")


def _steps(loader):
    try:
        return len(loader)
    except TypeError:
        return None
