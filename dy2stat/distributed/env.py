"""The data-parallel job this process belongs to: its rank, the number of ranks, and
the communicator between them.

A process started by ``mpiexec -n N`` (or ``dy2stat launch -n N``) is one of N
ranks; any other process is a job of one. ``init_parallel_env()`` connects the
ranks (MPI on the CPU, NCCL between GPUs) and makes a failure stop the whole job:
a rank whose script raises prints its error, tells the others, and the job ends
with a non-zero status instead of leaving them waiting.
"""

from __future__ import annotations

import os
import sys
import traceback

from dy2stat import device
from dy2stat.distributed.errors import DistributedError, PeerFailed
from dy2stat.distributed.mpi import MpiCommunicator
from dy2stat.distributed.nccl import NcclCommunicator

__all__ = ["ParallelEnv", "get_rank", "get_world_size", "init_parallel_env"]

# What launchers tell each process: (rank, size, rank on this machine) variables.
_LAUNCHER_VARIABLES = (
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),  # MPICH, Intel MPI (Hydra), Slurm
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),  # Open MPI
)
BACKENDS = ("mpi", "nccl")


class ParallelEnv:
    """Where this process stands in the job: ``rank``, ``world_size``, ``local_rank``
    (its rank among the ranks on this machine)."""

    def __init__(self):
        self.rank, self.world_size, self.local_rank = _launched()

    @property
    def nranks(self) -> int:
        """The number of ranks (``world_size``)."""
        return self.world_size

    def __repr__(self) -> str:
        return f"ParallelEnv(rank={self.rank}, world_size={self.world_size})"


class _Job:
    communicator = None  # MpiCommunicator or NcclCommunicator once connected
    env: ParallelEnv | None = None


job = _Job()


def init_parallel_env(backend: str | None = None, timeout: float = 300.0) -> ParallelEnv:
    """Connect this process to the other ranks of its job (nothing to do in a job of
    one). ``backend``: ``"mpi"`` (CPU) or ``"nccl"`` (GPUs; the default when the
    current device is a GPU). Every collective that waits longer than ``timeout``
    seconds raises ``DistributedError``. Calling it again returns the same env."""
    if job.env is not None:
        return job.env
    if backend is None:
        backend = "nccl" if device.get_device().startswith("gpu") else "mpi"
    if backend not in BACKENDS:
        raise ValueError(f"init_parallel_env: unknown backend {backend!r} "
                         f"(use {' or '.join(map(repr, BACKENDS))})")
    if not timeout > 0:
        raise ValueError(f"init_parallel_env: timeout must be > 0 seconds, got {timeout!r}")
    env = ParallelEnv()
    if env.world_size > 1:
        try:
            mpi = MpiCommunicator(timeout)
        except ImportError:
            raise DistributedError(
                f"this process is rank {env.rank} of {env.world_size}, but mpi4py is not "
                "installed: pip install 'dy2stat[distributed]'") from None
        if mpi.world_size != env.world_size:
            raise DistributedError(f"the launcher started {env.world_size} ranks but MPI "
                                   f"sees {mpi.world_size}: is mpi4py built for another MPI?")
        job.communicator = mpi
        sys.excepthook = _stop_the_job  # from here on a failure ends every rank
        if backend == "nccl":
            device.set_device(f"gpu:{env.local_rank}")
            job.communicator = NcclCommunicator(mpi)
        job.communicator.barrier("starting the job (waiting for every rank)")
    job.env = env
    return env


def get_rank() -> int:
    """This process's rank, 0 to ``get_world_size() - 1`` (0 in a job of one)."""
    return job.env.rank if job.env is not None else _launched()[0]


def get_world_size() -> int:
    """The number of ranks in the job (1 when not launched by mpiexec)."""
    return job.env.world_size if job.env is not None else _launched()[1]


def _launched() -> tuple[int, int, int]:
    for rank, size, local in _LAUNCHER_VARIABLES:
        if size in os.environ:
            try:
                return (int(os.environ[rank]), int(os.environ[size]),
                        int(os.environ.get(local, os.environ[rank])))
            except (KeyError, ValueError):
                raise DistributedError(f"the launcher's {rank}/{size} are not numbers: "
                                       f"{os.environ.get(rank)!r}/{os.environ[size]!r}") from None
    return 0, 1, 0


def _stop_the_job(kind, exc, tb) -> None:
    """``sys.excepthook`` of a rank: report, tell the other ranks, end the job."""
    communicator, rank = job.communicator, job.env.rank if job.env else get_rank()
    if isinstance(exc, PeerFailed):  # the failing rank printed the reason
        print(f"dy2stat.distributed: rank {rank} stops: {exc}", file=sys.stderr)
    elif isinstance(exc, KeyboardInterrupt):  # Ctrl-C reaches every rank: no one to tell
        print(f"dy2stat.distributed: rank {rank} interrupted", file=sys.stderr)
    else:
        if isinstance(exc, DistributedError):
            print(f"dy2stat.distributed: rank {rank}: {exc}", file=sys.stderr)
        else:
            traceback.print_exception(kind, exc, tb)
            print(f"dy2stat.distributed: rank {rank} failed; stopping the job", file=sys.stderr)
        sys.stderr.flush()
        reason = " ".join(f"{kind.__name__}: {exc}".split())
        communicator.notify_failure(reason)
        # The others hear of it at their next collective and end the job; one that
        # never gets there is ended after as long as a collective may take.
        communicator.linger(communicator.timeout)
    sys.stderr.flush()
    communicator.abort(1)
