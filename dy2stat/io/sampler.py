"""Samplers: the order of sample indices, and their grouping into batches."""

from __future__ import annotations

from collections.abc import Iterator, Sized

import numpy as np

from dy2stat.io.dataset import IterableDataset, local_generator, permutation

__all__ = ["BatchSampler", "RandomSampler", "Sampler", "SequenceSampler"]


class Sampler:
    """Yields sample indices of ``data_source``."""

    def __init__(self, data_source: Sized | None = None):
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def __len__(self) -> int:
        return len(self.data_source)


class SequenceSampler(Sampler):
    """0, 1, 2, ... in order."""

    def __iter__(self):
        return iter(range(len(self.data_source)))


class RandomSampler(Sampler):
    """A fresh random order on every pass (drawn from ``generator`` or the global seed).

    With ``replacement=True``, ``num_samples`` indices drawn independently.
    """

    def __init__(self, data_source: Sized, replacement: bool = False,
                 num_samples: int | None = None, generator: np.random.Generator | None = None):
        super().__init__(data_source)
        if num_samples is not None and not replacement:
            raise ValueError("RandomSampler: num_samples is only allowed with replacement=True")
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator

    @property
    def num_samples(self) -> int:
        """How many indices an epoch yields (the data set's length unless given)."""
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        if self.replacement:
            draws = local_generator(self.generator).integers(0, n, self.num_samples)
            return iter(draws.tolist())
        return iter(permutation(n, self.generator).tolist())

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Groups the indices of ``sampler`` (or of ``dataset``, shuffled or in order) into
    lists of ``batch_size``; ``drop_last`` drops a final short batch."""

    def __init__(self, dataset: Sized | None = None, sampler: Sampler | None = None,
                 shuffle: bool = False, batch_size: int = 1, drop_last: bool = False,
                 generator: np.random.Generator | None = None):
        if (dataset is None) == (sampler is None):
            raise ValueError("BatchSampler: give exactly one of dataset and sampler")
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"BatchSampler: batch_size must be a positive int, got {batch_size!r}")
        if isinstance(dataset, IterableDataset):
            raise TypeError("BatchSampler: an IterableDataset has no indices to sample")
        if sampler is None:
            sampler = (RandomSampler(dataset, generator=generator) if shuffle
                       else SequenceSampler(dataset))
        elif shuffle:
            raise ValueError("BatchSampler: shuffle is decided by the sampler when one is given")
        super().__init__(dataset)
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
