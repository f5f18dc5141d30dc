"""Collectives between processes over MPI (``mpi4py``), each with a timeout.

Every collective starts non-blocking and is waited for with a deadline: when
a rank never arrives (it failed, hangs, or is at another step) the others
raise ``DistributedError`` instead of waiting forever. While it waits, a rank
also looks for failure notices: a rank that fails sends one to the others
(``notify_failure``), and they stop with ``PeerFailed`` naming it.

MPI moves host memory: arrays here are NumPy arrays.
"""

from __future__ import annotations

import time

import numpy as np

from dy2stat.distributed.errors import PeerFailed, timed_out

# Point-to-point messages never match collectives, whatever their tag; this one only
# keeps the notices apart from a user's own messages.
_FAILED_TAG = 0xD25

# A waiting rank first polls (a collective between processes on one machine takes
# microseconds), then sleeps between polls so it leaves the cores to the others.
_SPIN_S = 0.002
_MAX_SLEEP_S = 0.002


class Pending:
    """A collective in flight: ``MpiCommunicator.wait`` gives its result."""

    __slots__ = ("request", "array", "what")

    def __init__(self, request, array, what: str):
        self.request, self.array, self.what = request, array, what


class MpiCommunicator:
    """The processes of ``MPI.COMM_WORLD``; every wait ends within ``timeout`` seconds."""

    xp = np  # the arrays it moves

    def __init__(self, timeout: float):
        # Imported here, not with this module: mpi4py is an optional dependency, and
        # importing it starts MPI, which only a launched job should do.
        from mpi4py import MPI

        self._mpi = MPI
        self._comm = MPI.COMM_WORLD
        self.rank, self.world_size = self._comm.Get_rank(), self._comm.Get_size()
        self.timeout = float(timeout)
        self._sent: list = []  # failure notices on their way

    # ------------------------------------------------------------ collectives
    def start_allreduce(self, array: np.ndarray, what: str) -> Pending:
        """Start summing ``array`` over the ranks, in place."""
        request = self._comm.Iallreduce(self._mpi.IN_PLACE, array, op=self._mpi.SUM)
        return Pending(request, array, what)

    def wait(self, pending: Pending) -> np.ndarray:
        self._wait(pending.request, pending.what)
        return pending.array

    def progress(self, pending: list[Pending]) -> None:
        """Let collectives in flight advance (MPI moves data only inside its calls)."""
        for p in pending:
            p.request.Test()

    def broadcast(self, array: np.ndarray, root: int, what: str) -> np.ndarray:
        """``array`` of rank ``root`` on every rank (in place)."""
        self._wait(self._comm.Ibcast(array, root=root), what)
        return array

    def barrier(self, what: str) -> None:
        self._wait(self._comm.Ibarrier(), what)

    # ----------------------------------------------------------------- failure
    def notify_failure(self, text: str) -> None:
        """Tell the other ranks that this one fails (``text``: why, one line)."""
        message = bytearray(text.encode("utf-8", "replace")[:2000])
        for other in range(self.world_size):
            if other != self.rank:
                self._sent.append(self._comm.Isend([message, self._mpi.BYTE], dest=other,
                                                   tag=_FAILED_TAG))

    def linger(self, seconds: float) -> None:
        """Give the other ranks up to ``seconds`` to hear of this one's failure (one that
        does ends the job); over at once when every other rank has failed too."""
        deadline = time.monotonic() + seconds
        failed, status = set(), self._mpi.Status()
        while len(failed) < self.world_size - 1 and time.monotonic() < deadline:
            while self._comm.Iprobe(source=self._mpi.ANY_SOURCE, tag=_FAILED_TAG, status=status):
                self._receive_notice(status)
                failed.add(status.Get_source())
            time.sleep(0.01)

    def abort(self, status: int) -> None:
        """End every rank of the job now, with exit status ``status``."""
        self._comm.Abort(status)

    # ---------------------------------------------------------------- waiting
    def check_notices(self) -> None:
        """Raise ``PeerFailed`` when another rank has said it fails."""
        status = self._mpi.Status()
        if self._comm.Iprobe(source=self._mpi.ANY_SOURCE, tag=_FAILED_TAG, status=status):
            reason = self._receive_notice(status)
            raise PeerFailed(f"rank {status.Get_source()} failed ({reason})")

    def _receive_notice(self, status) -> str:
        message = bytearray(status.Get_count(self._mpi.BYTE))
        self._comm.Recv([message, self._mpi.BYTE], source=status.Get_source(), tag=_FAILED_TAG)
        return message.decode("utf-8", "replace")

    def _wait(self, request, what: str) -> None:
        if request.Test():
            return
        start = time.monotonic()
        deadline, pause = start + self.timeout, 0.0
        while not request.Test():
            self.check_notices()
            now = time.monotonic()
            if now > deadline:
                raise timed_out(what, self.timeout)
            if now - start > _SPIN_S:
                pause = min(_MAX_SLEEP_S, pause * 2 or 1e-4)
                time.sleep(pause)
