"""DistributedBatchSampler: the ranks' batches at each step are, together, the batch a
single process reads with BatchSampler over the same padded order, and every rank's
batch has the same size."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat.distributed import DistributedBatchSampler
from dy2stat.io import BatchSampler, DataLoader, TensorDataset


def _ranks(n, batch, world, **kwargs):
    data = list(range(n))
    return [list(DistributedBatchSampler(data, batch, num_replicas=world, rank=r, **kwargs))
            for r in range(world)]


@pytest.mark.parametrize("n", [0, 1, 7, 12, 13, 40])
@pytest.mark.parametrize("world", [1, 2, 3])
@pytest.mark.parametrize("batch", [1, 4])
def test_the_ranks_together_read_the_single_process_batches(n, world, batch):
    ranks = _ranks(n, batch, world)
    per_rank = -(-n // world)
    padded = [i % n for i in range(per_rank * world)] if n else []
    single = list(BatchSampler(padded, batch_size=batch * world))
    assert all(len(r) == len(ranks[0]) for r in ranks)
    for step, combined in enumerate(single):
        shares = [r[step] for r in ranks]
        assert len({len(s) for s in shares}) == 1  # the same batch size on every rank
        assert [padded[i] for s in shares for i in s] == [padded[i] for i in combined]
    assert sorted(i for r in ranks for b in r for i in b) == sorted(padded)
    for r in range(world):
        assert len(DistributedBatchSampler(list(range(n)), batch, world, r)) == len(ranks[r])


def test_shuffle_draws_one_order_per_epoch_shared_by_the_ranks():
    def epoch(e):
        samplers = [DistributedBatchSampler(list(range(20)), 3, 2, r, shuffle=True)
                    for r in range(2)]
        for s in samplers:
            s.set_epoch(e)
        return [[i for b in s for i in b] for s in samplers]

    first, again, second = epoch(0), epoch(0), epoch(1)
    assert first == again
    assert first != second
    assert sorted(first[0] + first[1]) == list(range(20))
    assert first[0] != list(range(10))


def test_drop_last_drops_each_ranks_short_batch():
    ranks = _ranks(14, 3, 2, drop_last=True)  # 7 per rank: batches of 3, 3 (1 dropped)
    assert [[len(b) for b in r] for r in ranks] == [[3, 3], [3, 3]]
    assert len(DistributedBatchSampler(list(range(14)), 3, 2, 0, drop_last=True)) == 2


def test_a_data_loader_reads_the_ranks_batches():
    x = np.arange(10, dtype="float32").reshape(10, 1)
    dataset = TensorDataset([d2s.to_tensor(x)])
    sampler = DistributedBatchSampler(dataset, 2, num_replicas=2, rank=1)
    batches = [b[0].numpy().ravel().tolist() for b in DataLoader(dataset, batch_sampler=sampler)]
    assert batches == [[2.0, 3.0], [6.0, 7.0], [9.0]]  # the last step: one sample each


def test_by_default_it_is_the_process_share_of_a_job_of_one():
    sampler = DistributedBatchSampler(list(range(5)), 2)
    assert (sampler.nranks, sampler.local_rank) == (1, 0)
    assert list(sampler) == [[0, 1], [2, 3], [4]]


@pytest.mark.parametrize("kwargs, message", [
    ({"batch_size": 0}, "batch_size must be a positive int"),
    ({"batch_size": 2, "num_replicas": 0}, "num_replicas must be an int >= 1"),
    ({"batch_size": 2, "num_replicas": 2, "rank": 2}, r"rank must be in \[0, 2\)"),
])
def test_bad_arguments_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DistributedBatchSampler(list(range(4)), **kwargs)
