"""Starting a data-parallel job: ``dy2stat launch -n N train.py [args]``.

N processes of ``train.py`` under ``mpiexec`` (the one installed next to this
Python, as ``pip install mpich`` puts it, else the first on PATH), each with an
equal share of the cores for its math libraries unless ``OMP_NUM_THREADS`` (or
a library's own variable) is set, and unbuffered output so the ranks' lines
come as they print them. One process runs the script directly, without MPI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

__all__ = ["find_mpiexec", "launch"]

_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


class LaunchError(Exception):
    """The job cannot start (one line)."""


def find_mpiexec() -> str | None:
    """``mpiexec`` beside ``sys.executable``, else on PATH; None when there is none."""
    return (shutil.which("mpiexec", path=os.path.dirname(sys.executable))
            or shutil.which("mpiexec"))


def launch(nprocs: int, script: str, args=()) -> int:
    """Run ``script`` with ``args`` as ``nprocs`` ranks; the job's exit status."""
    if nprocs < 1:
        raise LaunchError(f"-n must be at least 1, got {nprocs}")
    if not os.path.isfile(script):
        raise LaunchError(f"{script}: no such file")
    command = [sys.executable, script, *args]
    if nprocs == 1:
        return subprocess.run(command).returncode
    mpiexec = find_mpiexec()
    if mpiexec is None:
        raise LaunchError("mpiexec is not installed (next to this Python or on PATH): "
                          "pip install 'dy2stat[distributed]'")
    command = [mpiexec, "-n", str(nprocs), *command]
    return subprocess.run(command, env=_environment(nprocs)).returncode


def _environment(nprocs: int) -> dict:
    environment = dict(os.environ, PYTHONUNBUFFERED="1")
    if not any(v in environment for v in _THREAD_VARIABLES):
        threads = max(1, (os.cpu_count() or 1) // nprocs)
        environment["OMP_NUM_THREADS"] = environment["OPENBLAS_NUM_THREADS"] = str(threads)
    return environment
