"""Kernels compiled to machine code by Numba, in the background, after some calls.

A few NumPy kernels spend their time in many small NumPy calls (a max-pool gradient:
a compare, a mask update and a select per window position); the same loop compiled
is several times faster. Such a kernel keeps its NumPy form and asks ``ready(name,
build)`` for the compiled one: the ``START_AFTER``-th ask starts ``build()`` (import
Numba, compile) on a background thread, and later asks get the compiled function once
it is built; until then, when Numba cannot import or the build fails, or with
``DY2STAT_COMPILED_KERNELS=0``, they get None and the NumPy form runs. So no call waits
for a compiler (the first calls of a program stay fast), and a compiled kernel must
give the NumPy form's bits exactly: only kernels that select or copy values (no
arithmetic whose rounding could differ) are compiled this way.
"""

from __future__ import annotations

import os
import threading

ENABLED = os.environ.get("DY2STAT_COMPILED_KERNELS", "1") != "0"
START_AFTER = 20  # asks before a build starts: a kernel called this often will be again

_lock = threading.Lock()
_asks: dict[str, int] = {}
_built: dict = {}  # name -> the compiled function (absent: not built, or failed)
_threads: dict[str, threading.Thread] = {}


def ready(name: str, build):
    """The compiled kernel ``name`` if built, else None (and maybe start building it)."""
    fn = _built.get(name)
    if fn is not None or not ENABLED:
        return fn
    count = _asks.get(name, 0) + 1
    _asks[name] = count
    if count >= START_AFTER:
        start(name, build)
    return None


def start(name: str, build) -> threading.Thread:
    """Start building ``name`` (once) on a background thread."""
    with _lock:
        thread = _threads.get(name)
        if thread is None:
            thread = _threads[name] = threading.Thread(
                target=_build, args=(name, build), name=f"dy2stat-compile-{name}", daemon=True)
            thread.start()
    return thread


def build_now(name: str, build, timeout: float = 600.0):
    """Build ``name`` and wait for it (tests, benchmarks); the function or None."""
    start(name, build).join(timeout)
    return _built.get(name)


def wait_all(timeout: float = 600.0) -> None:
    """Wait for every build started so far (benchmarks: time the steady state)."""
    for thread in list(_threads.values()):
        thread.join(timeout)


def _build(name: str, build) -> None:
    try:
        fn = build()
    except Exception:  # no Numba, or it failed: the NumPy form keeps running
        return
    _built[name] = fn


def numba_njit():
    """``numba.njit`` (raises ImportError without Numba)."""
    import numba  # optional at run time: imported on the build thread, when needed

    return numba.njit
