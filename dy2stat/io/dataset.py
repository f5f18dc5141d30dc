"""Datasets: indexable (``Dataset``) and streaming (``IterableDataset``) sources of samples."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dy2stat.kernels import random as random_kernels
from dy2stat.tensor import Tensor

__all__ = [
    "ComposeDataset", "Dataset", "IterableDataset", "Subset", "TensorDataset", "random_split",
]


class Dataset:
    """A map-style dataset: subclasses define ``__getitem__(index)`` and ``__len__()``."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must define __len__")


class IterableDataset(Dataset):
    """A stream of samples: subclasses define ``__iter__()``; there is no indexing."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def __getitem__(self, index):
        raise TypeError(f"{type(self).__name__} is an IterableDataset: iterate it, do not index")

    def __len__(self) -> int:
        raise TypeError(f"{type(self).__name__} is an IterableDataset and has no len()")


class TensorDataset(Dataset):
    """Rows of several tensors (or arrays) that share their first dimension.

    Sample ``i`` is the tuple of the tensors' rows ``i``, as NumPy arrays
    (the DataLoader stacks them into batch Tensors).
    """

    def __init__(self, tensors: Sequence):
        if isinstance(tensors, (Tensor, np.ndarray)) or not tensors:
            raise TypeError("TensorDataset: pass a non-empty list of tensors")
        arrays = []
        for i, t in enumerate(tensors):
            if isinstance(t, Tensor):
                arrays.append(t.numpy())
            elif isinstance(t, np.ndarray):
                arrays.append(t)
            else:
                raise TypeError(
                    f"TensorDataset: tensors[{i}] is a {type(t).__name__}, not a Tensor or array")
            if arrays[-1].ndim == 0:
                raise ValueError(f"TensorDataset: tensors[{i}] is 0-d; it has no rows")
        lengths = [len(a) for a in arrays]
        if len(set(lengths)) != 1:
            raise ValueError(f"TensorDataset: tensors differ in their first dimension: {lengths}")
        self.tensors = arrays

    def __getitem__(self, index):
        return tuple(a[index] for a in self.tensors)

    def __len__(self) -> int:
        return len(self.tensors[0])


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset: Dataset, indices: Sequence[int]):
        self.dataset = dataset
        self.indices = list(indices)

    def __getitem__(self, index):
        return self.dataset[self.indices[index]]

    def __len__(self) -> int:
        return len(self.indices)


class ComposeDataset(Dataset):
    """Several datasets of one length side by side: sample ``i`` joins their samples ``i``."""

    def __init__(self, datasets: Sequence[Dataset]):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ComposeDataset: needs at least one dataset")
        lengths = [len(d) for d in self.datasets]
        if len(set(lengths)) != 1:
            raise ValueError(f"ComposeDataset: datasets differ in length: {lengths}")

    def __getitem__(self, index):
        sample = []
        for d in self.datasets:
            item = d[index]
            sample.extend(item if isinstance(item, (tuple, list)) else [item])
        return tuple(sample)

    def __len__(self) -> int:
        return len(self.datasets[0])


def random_split(dataset: Dataset, lengths: Sequence[int], generator=None) -> list[Subset]:
    """Split into non-overlapping random subsets of the given lengths (global seed)."""
    if sum(lengths) != len(dataset):
        raise ValueError(
            f"random_split: lengths sum to {sum(lengths)}, but the dataset has {len(dataset)}")
    order = permutation(len(dataset), generator)
    subsets, start = [], 0
    for n in lengths:
        subsets.append(Subset(dataset, order[start:start + n].tolist()))
        start += n
    return subsets


def permutation(n: int, generator: np.random.Generator | None = None) -> np.ndarray:
    """A random order of ``range(n)`` (see ``local_generator``)."""
    return local_generator(generator).permutation(n)


def local_generator(generator: np.random.Generator | None = None) -> np.random.Generator:
    """``generator``, or a NumPy generator seeded by one draw of the global one.

    The global generator is the one ``d2s.seed`` resets, so shuffling is
    reproducible under a seed, whatever the device.
    """
    if generator is not None:
        return generator
    seed = int(random_kernels.randint(np, [], 0, 2**62, "int64"))
    return np.random.default_rng(seed)
