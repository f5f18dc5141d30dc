"""Collectives between GPUs over NCCL (``cupy.cuda.nccl``), with the MPI
communicator's interface and timeouts.

MPI starts the job: rank 0's NCCL id reaches the others by an MPI broadcast,
and failure notices travel over MPI while a rank waits. Collectives run on a
stream of their own, after the work queued on the current stream (where the
gradients were computed); a wait polls the collective's event until the
deadline, then aborts the NCCL communicator and raises.

Not yet run on GPU hardware: the tests run the MPI communicator only.
"""

from __future__ import annotations

import time

import numpy as np

from dy2stat.distributed.errors import DistributedError, timed_out
from dy2stat.distributed.mpi import MpiCommunicator
from dy2stat.kernels import backend

_POLL_S = 1e-4
_UNIQUE_ID_BYTES = 128  # NCCL's ncclUniqueId


class Pending:
    """A collective in flight on the NCCL stream."""

    __slots__ = ("event", "array", "what")

    def __init__(self, event, array, what: str):
        self.event, self.array, self.what = event, array, what


class NcclCommunicator:
    """The ranks' GPUs (one per rank); arrays here are CuPy arrays."""

    def __init__(self, mpi: MpiCommunicator):
        cupy = backend.cupy
        if cupy is None:
            raise DistributedError("the nccl backend needs CuPy (pip install 'dy2stat[gpu]')")
        from cupy.cuda import nccl  # ships with CuPy only where NCCL is installed

        self.xp, self._cupy, self._nccl, self._mpi = cupy, cupy, nccl, mpi
        self.rank, self.world_size, self.timeout = mpi.rank, mpi.world_size, mpi.timeout
        self._types = {np.dtype(np.float16): nccl.NCCL_FLOAT16,
                       np.dtype(np.float32): nccl.NCCL_FLOAT32,
                       np.dtype(np.float64): nccl.NCCL_FLOAT64,
                       np.dtype(np.int32): nccl.NCCL_INT32, np.dtype(np.int64): nccl.NCCL_INT64,
                       np.dtype(np.uint8): nccl.NCCL_UINT8, np.dtype(np.int8): nccl.NCCL_INT8}
        uid = np.zeros(_UNIQUE_ID_BYTES, dtype=np.int8)  # the id's bytes (C chars)
        if self.rank == 0:
            uid[:] = nccl.get_unique_id()
        mpi.broadcast(uid, 0, "sharing the NCCL id")
        self._comm = nccl.NcclCommunicator(self.world_size, tuple(int(b) for b in uid),
                                           self.rank)
        self._stream = cupy.cuda.Stream(non_blocking=True)

    def start_allreduce(self, array, what: str) -> Pending:
        """Start summing ``array`` over the ranks, in place."""
        self._stream.wait_event(self._cupy.cuda.get_current_stream().record())
        self._comm.allReduce(array.data.ptr, array.data.ptr, array.size,
                             self._type(array), self._nccl.NCCL_SUM, self._stream.ptr)
        return Pending(self._stream.record(), array, what)

    def wait(self, pending: Pending):
        self._wait(pending.event, pending.what)
        # Later work on the current stream reads the sum only after it is there.
        self._cupy.cuda.get_current_stream().wait_event(pending.event)
        return pending.array

    def progress(self, pending: list) -> None:
        """NCCL progresses on the GPU by itself."""

    def broadcast(self, array, root: int, what: str):
        self._stream.wait_event(self._cupy.cuda.get_current_stream().record())
        self._comm.bcast(array.data.ptr, array.size, self._type(array), root, self._stream.ptr)
        self._wait(self._stream.record(), what)
        return array

    def barrier(self, what: str) -> None:
        self._mpi.barrier(what)

    def notify_failure(self, text: str) -> None:
        self._mpi.notify_failure(text)

    def linger(self, seconds: float) -> None:
        self._mpi.linger(seconds)

    def abort(self, status: int) -> None:
        self._comm.abort()
        self._mpi.abort(status)

    def _type(self, array):
        kind = self._types.get(array.dtype)
        if kind is None:
            raise DistributedError(f"NCCL collectives of {array.dtype} are not supported here "
                                   f"(use {', '.join(str(t) for t in self._types)})")
        return kind

    def _wait(self, event, what: str) -> None:
        deadline = time.monotonic() + self.timeout
        while not event.done:
            self._mpi.check_notices()
            if time.monotonic() > deadline:
                self._comm.abort()  # the collective never ends otherwise
                raise timed_out(what, self.timeout)
            time.sleep(_POLL_S)
