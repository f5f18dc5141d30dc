"""``DistributedBatchSampler``: each rank's share of every batch.

The data set's indices (shuffled with a seed every rank shares) are padded by
repeating the first ones until every rank gets as many, then cut into steps of
``batch_size * num_replicas`` indices, each step into one run of
``batch_size`` per rank, rank 0 first. So at every step the ranks' batches
together are the batch of ``batch_size * num_replicas`` a single process reads
with ``BatchSampler`` over the same (padded) order, and every rank has the
same batch size (the last step's too), which keeps the mean of the ranks'
gradients the combined batch's.
"""

from __future__ import annotations

from collections.abc import Sized

import numpy as np

from dy2stat.distributed import env
from dy2stat.io.sampler import BatchSampler, Sampler

__all__ = ["DistributedBatchSampler"]


class DistributedBatchSampler(BatchSampler):
    """Batches of ``batch_size`` indices of ``dataset`` for this rank (``rank`` of
    ``num_replicas``; default: this process's). ``shuffle`` draws a new order each
    epoch from the epoch number (call ``set_epoch``), the same on every rank;
    ``drop_last`` drops each rank's final short batch. Pass it to ``DataLoader`` as
    ``batch_sampler``."""

    def __init__(self, dataset: Sized, batch_size: int, num_replicas: int | None = None,
                 rank: int | None = None, shuffle: bool = False, drop_last: bool = False):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError("DistributedBatchSampler: batch_size must be a positive int, "
                             f"got {batch_size!r}")
        num_replicas = env.get_world_size() if num_replicas is None else num_replicas
        rank = env.get_rank() if rank is None else rank
        if not isinstance(num_replicas, int) or num_replicas < 1:
            raise ValueError("DistributedBatchSampler: num_replicas must be an int >= 1, "
                             f"got {num_replicas!r}")
        if not isinstance(rank, int) or not 0 <= rank < num_replicas:
            raise ValueError(f"DistributedBatchSampler: rank must be in [0, {num_replicas}), "
                             f"got {rank!r}")
        Sampler.__init__(self, dataset)
        self.sampler = None  # the order is this class's own
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.nranks, self.local_rank, self.shuffle = num_replicas, rank, shuffle
        self.epoch = 0
        self.num_samples = -(-len(dataset) // num_replicas)  # per rank, after padding
        self.total_size = self.num_samples * num_replicas

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose order ``shuffle`` draws (the same number on every rank)."""
        self.epoch = int(epoch)

    def __iter__(self):
        n = len(self.dataset)
        order = (np.random.RandomState(self.epoch).permutation(n) if self.shuffle
                 else np.arange(n))
        order = np.resize(order, self.total_size)  # padded with its first indices
        mine = []
        step = self.batch_size * self.nranks
        for start in range(0, self.total_size, step):
            share = min(step, self.total_size - start) // self.nranks
            first = start + self.local_rank * share
            mine.extend(order[first:first + share].tolist())
        for start in range(0, len(mine), self.batch_size):
            batch = mine[start:start + self.batch_size]
            if len(batch) == self.batch_size or not self.drop_last:
                yield batch

    def __len__(self) -> int:
        if self.drop_last:
            return self.num_samples // self.batch_size
        return -(-self.num_samples // self.batch_size)
