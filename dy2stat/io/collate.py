"""Turning a list of samples into one batch with the samples' structure.

Collation runs in the loader's worker threads and produces NumPy arrays;
the loader turns them into Tensors on the current device when it hands the
batch over.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from dy2stat import device
from dy2stat.runtime import dtypes
from dy2stat.tensor import Tensor

__all__ = ["default_collate_fn", "default_convert_fn"]


def default_collate_fn(batch: list):
    """Stack samples field by field.

    Arrays and Tensors are stacked; Python ints become int64, floats float32,
    bools bool; NumPy scalars keep their dtype; strings stay a list. Tuples
    and lists give a list of fields, dicts a dict, each collated again.
    """
    if not batch:
        raise ValueError("collate: empty batch")
    sample = batch[0]
    if isinstance(sample, np.ndarray):
        return _stack(batch)
    if isinstance(sample, Tensor):
        return _stack([s.numpy() for s in batch])
    if isinstance(sample, (bool, np.bool_)):
        return np.array(batch, dtype=np.bool_)
    if isinstance(sample, int):
        return np.array(batch, dtype=np.int64)
    if isinstance(sample, float):
        return np.array(batch, dtype=np.float32)
    if isinstance(sample, np.generic):
        return np.array(batch, dtype=sample.dtype)
    if isinstance(sample, (str, bytes)):
        return list(batch)
    if isinstance(sample, Mapping):
        return {key: default_collate_fn([s[key] for s in batch]) for key in sample}
    if isinstance(sample, Sequence):
        lengths = {len(s) for s in batch}
        if len(lengths) != 1:
            raise ValueError(
                f"collate: samples have different numbers of fields: {sorted(lengths)}")
        return [default_collate_fn(list(field)) for field in zip(*batch)]
    raise TypeError(
        f"collate: cannot batch samples of type {type(sample).__name__}; "
        "return arrays, numbers, or tuples/dicts of them, or pass collate_fn"
    )


def _stack(arrays):
    shapes = {a.shape for a in arrays}
    if len(shapes) != 1:
        raise ValueError(
            f"collate: samples have different shapes {sorted(map(list, shapes))}; "
            "resize them in a transform or pass collate_fn"
        )
    return np.stack(arrays)


def default_convert_fn(batch):
    """NumPy arrays (also nested in lists, tuples and dicts) become Tensors on the
    current device (built directly, so this works in static mode too: the
    executor takes Tensors as feeds)."""
    if isinstance(batch, np.ndarray):
        if batch.dtype not in dtypes.ALL:
            raise TypeError(f"DataLoader: cannot make a tensor of {batch.dtype} values; return "
                            "numeric arrays from the dataset or pass collate_fn")
        if not batch.flags.owndata:  # a view into the dataset: do not share its memory
            batch = batch.copy()
        return Tensor(device.current.xp.asarray(batch))
    if isinstance(batch, Mapping):
        return {key: default_convert_fn(value) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)) and not (batch and isinstance(batch[0], (str, bytes))):
        return [default_convert_fn(value) for value in batch]
    return batch
