"""``DataLoader``: batches from a dataset, optionally prefetched by worker threads.

With ``num_workers > 0`` worker threads read samples and collate batches
while the model runs (NumPy releases the GIL for the heavy parts); at most
``prefetch_factor * num_workers`` batches are in flight, and batches come
out in the same order as without workers. A worker's exception is raised in
the caller with its original type and traceback. Abandoning an iteration
(``break``) stops the workers: they are daemon threads that watch a stop
event, so nothing hangs.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator

import numpy as np

from dy2stat.io.collate import default_collate_fn, default_convert_fn
from dy2stat.io.dataset import Dataset, IterableDataset
from dy2stat.io.sampler import BatchSampler

__all__ = ["DataLoader", "WorkerInfo", "get_worker_info"]

_POLL = 0.05  # seconds between checks of the stop event while waiting
_worker_state = threading.local()


class WorkerInfo:
    """What ``get_worker_info()`` tells code running in a loader thread."""

    def __init__(self, id: int, num_workers: int, dataset):  # noqa: A002
        self.id, self.num_workers, self.dataset = id, num_workers, dataset

    def __repr__(self) -> str:
        return f"WorkerInfo(id={self.id}, num_workers={self.num_workers})"


def get_worker_info() -> WorkerInfo | None:
    """The current loader worker, or None outside one."""
    return getattr(_worker_state, "info", None)


class DataLoader:
    """Iterate over batches of ``dataset``.

    ``batch_size`` samples per batch (``None``: samples one by one, not
    batched), ``shuffle`` with the global seeded generator (or a private one
    seeded with ``seed``), ``drop_last`` drops a final short batch, or pass a
    ``batch_sampler``. ``collate_fn`` builds a batch from a list of samples;
    arrays in its result become Tensors. ``num_workers`` threads prefetch.

    ``feed_list``, ``places``, ``return_list``, ``use_buffer_reader``,
    ``use_shared_memory`` and ``persistent_workers`` are accepted for Paddle
    compatibility and change nothing (workers are threads of this process).
    """

    def __init__(self, dataset, feed_list=None, places=None, return_list: bool = True,
                 batch_sampler=None, batch_size: int | None = 1, shuffle: bool = False,
                 drop_last: bool = False, collate_fn: Callable | None = None,
                 num_workers: int = 0, use_buffer_reader: bool = True,
                 prefetch_factor: int = 2, use_shared_memory: bool = True, timeout: float = 0,
                 worker_init_fn: Callable | None = None, persistent_workers: bool = False,
                 seed: int | None = None):
        if not isinstance(dataset, Dataset) and not hasattr(dataset, "__getitem__") \
                and not hasattr(dataset, "__iter__"):
            raise TypeError(f"DataLoader: {type(dataset).__name__} is not a dataset")
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"DataLoader: num_workers must be an int >= 0, got {num_workers!r}")
        if not isinstance(prefetch_factor, int) or prefetch_factor < 1:
            raise ValueError(f"DataLoader: prefetch_factor must be >= 1, got {prefetch_factor!r}")
        if timeout < 0:
            raise ValueError(f"DataLoader: timeout must be >= 0, got {timeout}")
        self.dataset = dataset
        self.return_list = return_list
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.collate_fn = collate_fn
        self._iterable = isinstance(dataset, IterableDataset)
        self._generator = np.random.default_rng(seed) if seed is not None else None
        self._batched = batch_size is not None or batch_sampler is not None
        if self._iterable:
            if shuffle:
                raise ValueError("DataLoader: an IterableDataset cannot be shuffled")
            if batch_sampler is not None:
                raise ValueError("DataLoader: an IterableDataset takes no batch_sampler")
            self.batch_size, self.drop_last, self.batch_sampler = batch_size, drop_last, None
        elif batch_sampler is not None:
            if batch_size != 1 or shuffle or drop_last:
                raise ValueError("DataLoader: batch_sampler excludes batch_size, shuffle and "
                                 "drop_last")
            self.batch_sampler = batch_sampler
            self.batch_size, self.drop_last = getattr(batch_sampler, "batch_size", None), False
        elif batch_size is None:
            if drop_last:
                raise ValueError("DataLoader: drop_last needs a batch_size")
            self.batch_size, self.drop_last = None, False
            self.batch_sampler = BatchSampler(dataset, shuffle=shuffle, batch_size=1,
                                              generator=self._generator)
        else:
            self.batch_size, self.drop_last = batch_size, drop_last
            self.batch_sampler = BatchSampler(dataset, shuffle=shuffle, batch_size=batch_size,
                                              drop_last=drop_last, generator=self._generator)

    def __len__(self) -> int:
        if self._iterable:
            raise TypeError("DataLoader over an IterableDataset has no len()")
        return len(self.batch_sampler)

    def __iter__(self) -> Iterator:
        if self.num_workers > 0:
            return _StreamIterator(self) if self._iterable else _WorkerIterator(self)
        batches = self._iterable_batches() if self._iterable else (
            self._fetch(indices) for indices in self.batch_sampler)
        return (default_convert_fn(batch) for batch in batches)

    # ------------------------------------------------------------ batches
    def _fetch(self, indices: list):
        """One batch: the samples at ``indices``, collated."""
        if not self._batched:
            sample = self.dataset[indices[0]]
            return self.collate_fn(sample) if self.collate_fn is not None else sample
        samples = [self.dataset[i] for i in indices]
        return (self.collate_fn or default_collate_fn)(samples)

    def _iterable_batches(self):
        collate = self.collate_fn or default_collate_fn
        if not self._batched:
            for sample in self.dataset:
                yield self.collate_fn(sample) if self.collate_fn is not None else sample
            return
        batch = []
        for sample in self.dataset:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield collate(batch)
                batch = []
        if batch and not self.drop_last:
            yield collate(batch)


def _annotate(error: BaseException, where: str) -> BaseException:
    if hasattr(error, "add_note"):
        error.add_note(f"(raised in {where})")
    return error


class _Workers:
    """What the worker threads share with the iterator that feeds them.

    The threads hold this, never the iterator, so an abandoned iterator is
    collected and its ``__del__`` stops them.
    """

    def __init__(self, loader: DataLoader):
        self.loader = loader
        self.tasks: queue.Queue = queue.Queue()
        self.results: queue.Queue = queue.Queue()
        self.stop = threading.Event()

    def put(self, q: queue.Queue, item) -> bool:
        """Put ``item`` unless stopped first (False then)."""
        while not self.stop.is_set():
            try:
                q.put(item, timeout=_POLL)
                return True
            except queue.Full:
                continue
        return False

    def start(self, target, count: int, name: str) -> list[threading.Thread]:
        threads = [threading.Thread(target=target, args=(self, i), daemon=True,
                                    name=f"{name}-{i}") for i in range(count)]
        for t in threads:
            t.start()
        return threads


def _init_worker(shared: _Workers, worker_id: int):
    """Set up a thread as worker ``worker_id``; return the error of worker_init_fn, if any."""
    loader = shared.loader
    _worker_state.info = WorkerInfo(worker_id, max(loader.num_workers, 1), loader.dataset)
    try:
        if loader.worker_init_fn is not None:
            loader.worker_init_fn(worker_id)
    except Exception as error:
        return _annotate(error, f"worker_init_fn of DataLoader worker {worker_id}")
    return None


def _map_worker(shared: _Workers, worker_id: int) -> None:
    """Take ``(position, indices)`` tasks; put ``(position, batch, error)`` results."""
    init_error = _init_worker(shared, worker_id)
    while not shared.stop.is_set():
        try:
            task = shared.tasks.get(timeout=_POLL)
        except queue.Empty:
            continue
        if task is None:
            return
        position, indices = task
        if init_error is not None:
            shared.results.put((position, None, init_error))
            continue
        try:
            batch = shared.loader._fetch(indices)
        except Exception as error:
            shared.results.put((position, None, _annotate(error, f"DataLoader worker {worker_id}")))
        else:
            shared.results.put((position, batch, None))


def _stream_worker(shared: _Workers, worker_id: int) -> None:
    """Read the IterableDataset's batches into the bounded results queue."""
    init_error = _init_worker(shared, worker_id)
    try:
        if init_error is not None:
            raise init_error
        for batch in shared.loader._iterable_batches():
            if not shared.put(shared.results, ("batch", batch)):
                return
    except Exception as error:
        shared.put(shared.results, ("error", _annotate(error, "the DataLoader reader thread")))
    else:
        shared.put(shared.results, ("end", None))


class _WorkerIterator:
    """Map-style batches built by ``num_workers`` threads, handed out in order."""

    def __init__(self, loader: DataLoader):
        self._shared = _Workers(loader)
        self._timeout = loader.timeout
        self._indices = iter(loader.batch_sampler)
        self._limit = loader.prefetch_factor * loader.num_workers
        self._sent = self._received = 0
        self._ready: dict = {}
        self._threads = self._shared.start(_map_worker, loader.num_workers, "DataLoader-worker")
        self._send()

    def _send(self) -> None:
        """Keep ``limit`` batches in flight."""
        while self._sent - self._received < self._limit:
            indices = next(self._indices, None)
            if indices is None:
                return
            self._shared.tasks.put((self._sent, indices))
            self._sent += 1

    def __iter__(self):
        return self

    def __next__(self):
        if self._received == self._sent:
            self.close()
            raise StopIteration
        started = time.monotonic()
        while self._received not in self._ready:
            try:
                position, batch, error = self._shared.results.get(timeout=_POLL)
            except queue.Empty:
                self._check_waiting(started)
                continue
            self._ready[position] = (batch, error)
        batch, error = self._ready.pop(self._received)
        self._received += 1
        if error is not None:
            self.close()
            raise error
        self._send()
        return default_convert_fn(batch)

    def _check_waiting(self, started: float) -> None:
        if self._timeout and time.monotonic() - started > self._timeout:
            self.close()
            raise RuntimeError(f"DataLoader: no batch from the workers within {self._timeout} s")
        if not any(t.is_alive() for t in self._threads):
            self.close()
            raise RuntimeError("DataLoader: every worker thread exited before the batch was made")

    def close(self) -> None:
        """Stop the workers (each finishes the batch it is reading, then exits)."""
        self._received = self._sent
        self._shared.stop.set()

    def __del__(self):
        self.close()


class _StreamIterator:
    """An IterableDataset read by one thread that prefetches into a bounded queue.

    One thread, because the dataset's iterator is one stream; the prefetching
    still overlaps reading with the model.
    """

    def __init__(self, loader: DataLoader):
        self._shared = _Workers(loader)
        self._shared.results = queue.Queue(maxsize=loader.prefetch_factor * loader.num_workers)
        self._timeout = loader.timeout
        self._done = False
        (self._thread,) = self._shared.start(_stream_worker, 1, "DataLoader-reader")

    def __iter__(self):
        return self

    def __next__(self):
        if self._done:
            raise StopIteration
        started = time.monotonic()
        while True:
            try:
                kind, value = self._shared.results.get(timeout=_POLL)
                break
            except queue.Empty:
                if self._timeout and time.monotonic() - started > self._timeout:
                    self.close()
                    raise RuntimeError(
                        f"DataLoader: no batch from the reader within {self._timeout} s") from None
                if not self._thread.is_alive() and self._shared.results.empty():
                    self.close()
                    raise RuntimeError("DataLoader: the reader thread exited") from None
        if kind == "batch":
            return default_convert_fn(value)
        self.close()
        if kind == "error":
            raise value
        raise StopIteration

    def close(self) -> None:
        self._done = True
        self._shared.stop.set()

    def __del__(self):
        self.close()
