"""DataLoader: batching, shuffling, drop_last, worker threads, errors, early exit."""

import threading
import time

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat.io import (
    BatchSampler,
    DataLoader,
    Dataset,
    IterableDataset,
    Subset,
    TensorDataset,
    get_worker_info,
    random_split,
)

X = np.arange(40, dtype="float32").reshape(10, 4)
Y = np.arange(10, dtype="int64")


class Squares(Dataset):
    """Sample i: (image-like array, Python int label, Python float)."""

    def __init__(self, n=10, fail_at=None, delay=0.0):
        self.n, self.fail_at, self.delay = n, fail_at, delay

    def __getitem__(self, i):
        if i == self.fail_at:
            raise KeyError(f"sample {i} is broken")
        time.sleep(self.delay)
        return np.full((2, 2), i, "uint8"), i, i / 2

    def __len__(self):
        return self.n


def _labels(loader, field=1):
    return [b[field].numpy().tolist() for b in loader]


def test_batches_are_stacked_tensors_with_the_sample_structure():
    batches = list(DataLoader(Squares(5), batch_size=2))
    assert len(batches) == 3
    image, label, half = batches[0]
    assert isinstance(image, d2s.Tensor) and image.shape == [2, 2, 2] and image.dtype == np.uint8
    assert label.dtype == np.int64 and label.numpy().tolist() == [0, 1]
    assert half.dtype == np.float32
    assert batches[-1][1].numpy().tolist() == [4]


def test_tensor_dataset():
    ds = TensorDataset([d2s.to_tensor(X), Y])
    assert len(ds) == 10
    x, y = ds[3]
    np.testing.assert_array_equal(x, X[3])
    assert y == 3
    xb, yb = next(iter(DataLoader(ds, batch_size=4)))
    np.testing.assert_array_equal(xb.numpy(), X[:4])
    with pytest.raises(ValueError, match="first dimension"):
        TensorDataset([X, Y[:5]])


def test_dict_and_nested_samples_keep_their_structure():
    class Dicts(Dataset):
        def __getitem__(self, i):
            return {"x": np.ones(3) * i, "meta": (i, "name")}

        def __len__(self):
            return 4

    batch = next(iter(DataLoader(Dicts(), batch_size=4)))
    assert batch["x"].shape == [4, 3]
    ids, names = batch["meta"]
    assert ids.numpy().tolist() == [0, 1, 2, 3] and names == ["name"] * 4


def test_drop_last_and_len():
    assert len(DataLoader(Squares(10), batch_size=3)) == 4
    loader = DataLoader(Squares(10), batch_size=3, drop_last=True)
    assert len(loader) == 3
    assert _labels(loader) == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]


def test_shuffle_is_reproducible_under_seed_and_covers_everything():
    loader = DataLoader(Squares(10), batch_size=4, shuffle=True)
    d2s.seed(7)
    first = _labels(loader)
    second_epoch = _labels(loader)
    d2s.seed(7)
    assert _labels(loader) == first
    assert first != second_epoch  # a new order each epoch
    flat = sorted(v for batch in first for v in batch)
    assert flat == list(range(10)) and first != [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_loader_seed_gives_its_own_reproducible_order():
    a = _labels(DataLoader(Squares(10), batch_size=5, shuffle=True, seed=3))
    b = _labels(DataLoader(Squares(10), batch_size=5, shuffle=True, seed=3))
    assert a == b


@pytest.mark.parametrize("shuffle", [False, True])
def test_workers_give_the_same_batches_as_no_workers(shuffle):
    ds = Squares(23, delay=0.001)
    d2s.seed(11)
    plain = [[t.numpy() for t in b] for b in DataLoader(ds, batch_size=4, shuffle=shuffle)]
    d2s.seed(11)
    threaded = [[t.numpy() for t in b]
                for b in DataLoader(ds, batch_size=4, shuffle=shuffle, num_workers=2)]
    assert len(plain) == len(threaded) == 6
    for p, t in zip(plain, threaded):
        for a, b in zip(p, t):
            np.testing.assert_array_equal(a, b)


def test_workers_run_in_threads_that_know_their_id():
    seen = set()

    class Recorder(Dataset):
        def __getitem__(self, i):
            info = get_worker_info()
            seen.add((info.id, info.num_workers, threading.current_thread().name))
            time.sleep(0.002)
            return np.zeros(1)

        def __len__(self):
            return 16

    list(DataLoader(Recorder(), batch_size=2, num_workers=2))
    assert {s[0] for s in seen} <= {0, 1} and all(s[1] == 2 for s in seen)
    assert get_worker_info() is None


@pytest.mark.parametrize("num_workers", [0, 2])
def test_worker_exception_propagates_with_its_type(num_workers):
    loader = DataLoader(Squares(10, fail_at=5), batch_size=2, num_workers=num_workers)
    got = []
    with pytest.raises(KeyError, match="sample 5 is broken"):
        for batch in loader:
            got.append(batch[1].numpy().tolist())
    assert got == [[0, 1], [2, 3]]  # the batches before the broken one arrive in order


def _loader_threads():
    return [t for t in threading.enumerate() if t.name.startswith("DataLoader")]


def test_early_break_does_not_hang_and_stops_workers():
    loader = DataLoader(Squares(200, delay=0.001), batch_size=2, num_workers=3)
    start = time.monotonic()
    for i, _ in enumerate(loader):
        if i == 2:
            break
    deadline = time.monotonic() + 5
    while _loader_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _loader_threads()
    assert time.monotonic() - start < 5


def test_prefetch_is_bounded():
    fetched = []

    class Counting(Dataset):
        def __getitem__(self, i):
            fetched.append(i)
            return np.zeros(1)

        def __len__(self):
            return 100

    it = iter(DataLoader(Counting(), batch_size=1, num_workers=2, prefetch_factor=2))
    next(it)
    time.sleep(0.2)
    assert len(fetched) <= 1 + 2 * 2
    it.close()


class Stream(IterableDataset):
    def __init__(self, n, fail_at=None):
        self.n, self.fail_at = n, fail_at

    def __iter__(self):
        for i in range(self.n):
            if i == self.fail_at:
                raise ValueError("stream broke")
            yield np.array([i, i], "float32"), i


@pytest.mark.parametrize("num_workers", [0, 2])
def test_iterable_dataset(num_workers):
    loader = DataLoader(Stream(7), batch_size=3, num_workers=num_workers)
    assert _labels(loader) == [[0, 1, 2], [3, 4, 5], [6]]
    loader = DataLoader(Stream(7), batch_size=3, drop_last=True, num_workers=num_workers)
    assert _labels(loader) == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(TypeError, match="no len"):
        len(loader)
    with pytest.raises(ValueError, match="stream broke"):
        list(DataLoader(Stream(7, fail_at=4), batch_size=2, num_workers=num_workers))


def test_batch_size_none_and_custom_collate():
    samples = list(DataLoader(Squares(3), batch_size=None))
    assert samples[1][1] == 1
    sums = [b for b in DataLoader(Squares(4), batch_size=2,
                                  collate_fn=lambda batch: np.array([s[1] for s in batch]).sum())]
    assert [int(s) for s in sums] == [1, 5]


def test_batch_sampler_and_subsets():
    sampler = BatchSampler(Squares(6), batch_size=4, drop_last=True)
    assert _labels(DataLoader(Squares(6), batch_sampler=sampler)) == [[0, 1, 2, 3]]
    d2s.seed(0)
    a, b = random_split(Squares(10), [7, 3])
    assert sorted(a.indices + b.indices) == list(range(10)) and len(b) == 3
    assert Subset(Squares(10), [4, 2])[1][1] == 2


@pytest.mark.parametrize("kwargs, error, match", [
    ({"num_workers": -1}, ValueError, "num_workers"),
    ({"batch_size": 0}, ValueError, "batch_size"),
    ({"batch_sampler": BatchSampler(Squares(2)), "shuffle": True}, ValueError, "batch_sampler"),
])
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        DataLoader(Squares(4), **kwargs)


def test_unbatchable_samples_are_a_clear_error():
    class Ragged(Dataset):
        def __getitem__(self, i):
            return np.zeros(i + 1)

        def __len__(self):
            return 2

    with pytest.raises(ValueError, match="different shapes"):
        next(iter(DataLoader(Ragged(), batch_size=2)))


def test_batches_are_tensors_in_static_mode_too():
    d2s.enable_static()
    try:
        batch = next(iter(DataLoader(TensorDataset([X, Y]), batch_size=4)))
    finally:
        d2s.disable_static()
    assert isinstance(batch[0], d2s.Tensor) and batch[0].shape == [4, 4]
