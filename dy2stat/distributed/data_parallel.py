"""``DataParallel``: each rank trains the same model on its shard of the batch.

At construction rank 0's parameters and buffers are copied to every rank.
During ``backward()`` the parameters' gradients are summed over the ranks in
buckets, each sent as soon as backward has finished every gradient in it
(``gradient_hooks``; a converted program's backward hands its gradients out as
it computes them), so sending overlaps with the rest of the backward. When
backward returns, every bucket has arrived and each ``.grad`` is the mean over
the ranks: with a mean loss and the same batch size on every rank (which
``DistributedBatchSampler`` gives), exactly the gradient of the combined
batch, up to the order of the sums.

Buckets go out in one fixed order on every rank (each after the one before),
so the ranks' collectives always match. A bucket also carries, for each of its
parameters, whether the rank has a gradient for it (one that no rank has stays
None, as in a single process), and the first one carries every rank's batch
size: different sizes are an error, as the mean would not be the combined
batch's.
"""

from __future__ import annotations

import contextlib
import weakref

import numpy as np

from dy2stat import gradient_hooks
from dy2stat.distributed import env
from dy2stat.distributed.errors import DistributedError
from dy2stat.kernels import backend
from dy2stat.nn.layer import Layer
from dy2stat.runtime import dtypes
from dy2stat.tensor import Tensor

__all__ = ["DataParallel"]

_MB = 1 << 20


class DataParallel(Layer):
    """Run ``layers`` data-parallel: calling it calls ``layers``; ``backward()`` leaves
    in every parameter's ``.grad`` the mean of the ranks' gradients.

    Gradients travel in buckets of about ``comm_buffer_size`` MB, the first one
    (the last layers' gradients, ready first) of ``last_comm_buffer_size`` MB.
    ``check_batch_sizes``: the ranks' batch sizes (the first dim of the first
    tensor argument) must agree. ``state_dict`` is the wrapped layer's.
    In a job of one it only calls the layer.
    """

    def __init__(self, layers: Layer, comm_buffer_size: float = 25,
                 last_comm_buffer_size: float = 1, check_batch_sizes: bool = True):
        super().__init__()
        if not isinstance(layers, Layer):
            raise TypeError(f"DataParallel: expected a Layer, got {type(layers).__name__}")
        self._layers = layers
        communicator = env.job.communicator
        if communicator is None and env.get_world_size() > 1:
            raise DistributedError("DataParallel: this process is one of "
                                   f"{env.get_world_size()} ranks; call "
                                   "d2s.distributed.init_parallel_env() first")
        self._reducer = None
        if communicator is not None:
            _broadcast_state(communicator, layers)
            params = [p for p in layers.parameters()
                      if not p.stop_gradient and p.dtype in dtypes.FLOATS]
            self._reducer = _Reducer(communicator, params, comm_buffer_size * _MB,
                                     last_comm_buffer_size * _MB, check_batch_sizes)
            weakref.finalize(self, self._reducer.hooks.remove)  # a dropped wrapper sends nothing

    def __call__(self, *inputs, **kwargs):
        if self._reducer is not None:
            self._reducer.batch_size = _batch_size(inputs, kwargs)
        return super().__call__(*inputs, **kwargs)

    def forward(self, *inputs, **kwargs):
        """The wrapped layer's forward."""
        return self._layers(*inputs, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside only add to each rank's own gradients; the first one
        after it averages the sum (gradient accumulation with less traffic)."""
        reducer = self._reducer
        if reducer is None:
            yield
            return
        reducer.syncing = False
        try:
            yield
        finally:
            reducer.syncing = True

    def state_dict(self, *args, **kwargs):
        """The wrapped layer's state dict (the same keys as without DataParallel)."""
        return self._layers.state_dict(*args, **kwargs)

    def set_state_dict(self, state_dict, strict: bool = True):
        """Load into the wrapped layer."""
        return self._layers.set_state_dict(state_dict, strict)

    load_dict = set_state_dict


def _batch_size(inputs, kwargs) -> int:
    """The first dim of the first tensor argument (0: none to go by)."""
    for value in (*inputs, *kwargs.values()):
        if isinstance(value, Tensor):
            return value.shape[0] if value.ndim else 0
    return 0


def _broadcast_state(communicator, layer: Layer) -> None:
    """Rank 0's parameters and buffers on every rank."""
    for name, tensor in layer.state_dict().items():
        array = communicator.xp.ascontiguousarray(_on(communicator.xp, tensor._data)).copy()
        communicator.broadcast(array, 0, f"broadcasting {name!r} from rank 0")
        tensor.set_value(_on(backend.array_module(tensor._data), array))


def _on(xp, array):
    """``array`` as an array of module ``xp`` (copied across devices)."""
    return backend.to_host(array) if xp is np else xp.asarray(array)


class _Bucket:
    """Parameters whose gradients travel together, and the layout of the message:
    the gradients, one has-a-gradient flag per parameter, then (first bucket only)
    one batch size per rank."""

    def __init__(self, index: int, params: list, world_size: int):
        self.index, self.params = index, params
        self.dtype = params[0].dtype
        self.sizes = [int(np.prod(p.shape)) for p in params]
        self.n_grads = sum(self.sizes)
        self.n_counts = world_size if index == 0 else 0
        self.waiting = len(params)  # parameters whose gradient is not final yet

    def message(self, xp, rank: int, batch_size: int):
        parts = []
        for p in self.params:
            g = p.grad
            parts.append(xp.zeros(int(np.prod(p.shape)), self.dtype) if g is None
                         else _on(xp, g._data).astype(self.dtype, copy=False).ravel())
        flags = xp.asarray([p.grad is not None for p in self.params], dtype=self.dtype)
        counts = xp.zeros(self.n_counts, self.dtype)
        if self.n_counts:
            counts[rank] = batch_size
        return xp.concatenate([*parts, flags, counts])

    def unpack(self, summed, world_size: int) -> list[int]:
        """Give each parameter the mean gradient; returns the ranks' batch sizes."""
        xp = backend.array_module(summed)
        grads = summed[:self.n_grads] / self.dtype.type(world_size)
        flags = backend.to_host(summed[self.n_grads:self.n_grads + len(self.params)])
        start = 0
        for p, size, flag in zip(self.params, self.sizes, flags):
            if flag > 0:  # some rank has a gradient (the others count as zero)
                g = grads[start:start + size].reshape(p.shape)
                p.grad = Tensor(g if xp is backend.array_module(p._data)
                                else _on(backend.array_module(p._data), g))
            start += size
        counts = backend.to_host(summed[len(summed) - self.n_counts:]) if self.n_counts else []
        return [int(c) for c in counts]


class _Reducer:
    """Sends the buckets as backward completes them; waits for them when it ends."""

    def __init__(self, communicator, params: list, bucket_bytes: float, first_bytes: float,
                 check_batch_sizes: bool):
        self.communicator = communicator
        self.check_batch_sizes = check_batch_sizes
        self.batch_size = 0
        self.syncing = True  # False inside DataParallel.no_sync
        self.buckets = _buckets(params[::-1], bucket_bytes, first_bytes,  # last layers first
                                communicator.world_size)
        self.bucket_of = {id(p): b for b in self.buckets for p in b.params}
        self.hooks = gradient_hooks.watch(params, self._ready, self._done)
        self._reset()

    def _reset(self) -> None:
        for b in self.buckets:
            b.waiting = len(b.params)
        self.ready: set[int] = set()
        self.pending: list = []  # (bucket, Pending) in the order sent
        self.next = 0  # the next bucket to send

    def _ready(self, param) -> None:
        if not self.syncing or id(param) in self.ready:
            return
        self.ready.add(id(param))
        self.bucket_of[id(param)].waiting -= 1
        self._send_complete()

    def _send_complete(self) -> None:
        while self.next < len(self.buckets) and self.buckets[self.next].waiting == 0:
            self._send(self.buckets[self.next])
        self.communicator.progress([p for _, p in self.pending])

    def _send(self, bucket: _Bucket) -> None:
        comm = self.communicator
        message = bucket.message(comm.xp, comm.rank, self.batch_size)
        what = f"the gradient sum of bucket {bucket.index} ({len(bucket.params)} parameters)"
        self.pending.append((bucket, comm.start_allreduce(message, what)))
        self.next += 1

    def _done(self) -> None:
        """The backward ended: send what is left (gradients no rank computed count as
        none), then wait for every bucket."""
        if not self.syncing:
            return
        try:
            for b in self.buckets[self.next:]:
                b.waiting = 0
            self._send_complete()
            sizes = []
            for bucket, pending in self.pending:
                sizes += bucket.unpack(self.communicator.wait(pending),
                                       self.communicator.world_size)
        finally:
            self._reset()
        if self.check_batch_sizes and all(sizes) and len(set(sizes)) > 1:
            raise DistributedError(
                f"DataParallel: the ranks' batches differ in size ({sizes}), so the mean of "
                "their gradients is not the combined batch's; give every rank as many "
                "samples (DistributedBatchSampler does), or DataParallel(..., "
                "check_batch_sizes=False)")


def _buckets(params: list, bucket_bytes: float, first_bytes: float, world_size: int):
    """Consecutive parameters of one dtype, up to the byte limit per bucket."""
    groups, current, size = [], [], 0
    for p in params:
        nbytes = int(np.prod(p.shape)) * p.dtype.itemsize
        limit = first_bytes if not groups else bucket_bytes
        if current and (p.dtype != current[0].dtype or size + nbytes > limit):
            groups.append(current)
            current, size = [], 0
        current.append(p)
        size += nbytes
    if current:
        groups.append(current)
    return [_Bucket(k, group, world_size) for k, group in enumerate(groups)]
