"""Overlap: heavy ops of a top-level plan run on a worker thread.

On NumPy with ``overlap.enabled``, a convolution or pooling op whose result
is first needed after another heavy op runs on a worker thread
(``_f7 = _submit(k3, xp, v1, v2)``) and is joined right before its first
reader (``v9 = _f7.result()``). NumPy releases the GIL inside these kernels,
so on two cores a weight gradient is computed while the input gradient chain
goes on. The values it reads stay live (never written in place) until the
join. Only while BLAS runs each product on one thread: a product's last bits
depend on how many threads BLAS splits it over, so a plan then runs
``_submit``-ed ops on its own thread (``run_here``), with BLAS as eager mode
finds it (see ``Plan.run``).
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

from dy2stat.runtime.ir import Operator
from dy2stat.runtime.ops.control_flow import CONTROL_FLOW
from dy2stat.runtime.ops.conv import CHWN_FORMS

__all__ = ["OVERLAPPABLE", "blas_on_one_thread", "choose_overlap", "heavy_ops_early",
           "look_up_blas_soon", "on_worker", "overlap", "run_here", "run_on_worker",
           "sharing_cores"]

# Heavy kernels that spend most of their time with the GIL released (BLAS,
# large copies and ufunc loops): what overlap may move to the worker thread.
OVERLAPPABLE = frozenset({"conv2d", "conv2d_grad_input", "conv2d_grad_filter", "max_pool2d",
                          "max_pool2d_grad", "avg_pool2d", "avg_pool2d_grad",
                          "conv2d_keeping_columns", "conv2d_grad_filter_from_columns"})
OVERLAPPABLE |= {f"{t}_chwn" for t in OVERLAPPABLE if t in CHWN_FORMS}


class _OverlapSettings:
    """Whether plans compiled from now on overlap heavy ops (the flag
    ``inter_op_parallelism``); only worth it with a second core."""

    def __init__(self):
        self.enabled = (os.cpu_count() or 1) > 1


overlap = _OverlapSettings()
_worker = {"pool": None, "pid": None}
_worker_lock = threading.Lock()
_WORKER_NAME = "dy2stat-worker"


def run_on_worker(function, *args):
    """Start ``function(*args)`` on the one worker thread (made again after a fork);
    returns its future."""
    pool = _worker["pool"]
    if pool is None or _worker["pid"] != os.getpid():
        with _worker_lock:
            if _worker["pool"] is None or _worker["pid"] != os.getpid():
                _worker["pool"] = ThreadPoolExecutor(1, thread_name_prefix=_WORKER_NAME)
                _worker["pid"] = os.getpid()
            pool = _worker["pool"]
    return pool.submit(function, *args)


class _SharingCores:
    """Entered while plan work runs on the worker thread and on this one at once.

    The interpreter then hands the GIL over every ``SWITCH_INTERVAL`` seconds
    instead of Python's 5 ms (a thread back from a GIL-free kernel would
    otherwise wait up to the whole interval while the other runs small ops,
    which keep the GIL), and BLAS runs each product on one thread (two
    threads' products, each spread over every core, would fight for them).
    Counted, so overlapping users restore both only when the last one leaves.
    """

    SWITCH_INTERVAL = 1e-4

    def __init__(self):
        self._lock, self._users = threading.Lock(), 0
        self._interval, self._blas_threads = None, []

    def __enter__(self):
        with self._lock:
            if self._users == 0:
                self._interval = sys.getswitchinterval()
                sys.setswitchinterval(min(self._interval, self.SWITCH_INTERVAL))
                self._blas_threads = [(lib, lib.get_num_threads()) for lib in blas_libraries()]
                for lib, _ in self._blas_threads:
                    lib.set_num_threads(1)
            self._users += 1

    def __exit__(self, *exc):
        with self._lock:
            self._users -= 1
            if self._users == 0:
                sys.setswitchinterval(self._interval)
                for lib, threads in self._blas_threads:
                    lib.set_num_threads(threads)


sharing_cores = _SharingCores()


@functools.cache
def blas_libraries() -> tuple:
    """The thread controls of the BLAS libraries loaded in this process
    (threadpoolctl's), or none when threadpoolctl is not installed."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return ()
    return tuple(ThreadpoolController().select(user_api="blas").lib_controllers)


@functools.cache
def look_up_blas_soon() -> None:
    """Start finding ``blas_libraries`` on a background thread (once): it takes a few
    milliseconds (importing threadpoolctl, scanning the loaded libraries), which a
    program's trace and compilation cover and its first run would otherwise pay."""
    threading.Thread(target=blas_libraries, name="dy2stat-blas-lookup", daemon=True).start()


class _Done:
    """A result already computed, read as a future's (``run_here``)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value


def run_here(function, *args) -> _Done:
    """``function(*args)`` run now on this thread, as a finished future: what an
    overlapped op does when the worker must not run it (``blas_on_one_thread``)."""
    return _Done(function(*args))


def blas_on_one_thread() -> bool:
    """Whether every BLAS library of this process runs each product on one thread.

    Only then may a product run on the worker thread (where ``sharing_cores``
    keeps BLAS on one thread) and give the bits eager mode's product gives:
    OpenBLAS rounds a product split over two threads differently in the last
    bits. Unknown (no BLAS control found) counts as no.
    """
    libraries = blas_libraries()
    return bool(libraries) and all(lib.get_num_threads() == 1 for lib in libraries)


def on_worker() -> bool:
    """Whether this is the worker thread (which must not wait for itself)."""
    return threading.current_thread().name.startswith(_WORKER_NAME)


def heavy_ops_early(ops: list[Operator]) -> list[int]:
    """The order to run ``ops`` in (their indices): each overlappable op moved up to
    right after the last op it depends on, so the worker thread can start it
    before the ops it skipped.

    An op moves above another only when neither writes a name the other reads
    or writes; it never crosses control flow, an op with no outputs (print,
    assert), whose effects are not named, or a heavy op moved up before it
    (moved heavy ops keep their order: the first goes to the worker).
    """
    order, moved = list(range(len(ops))), set()
    for i, op in enumerate(ops):
        if op.type not in OVERLAPPABLE:
            continue
        reads, writes = set(op.input_names()), set(op.output_names())
        to = i  # ops before i moved only up: op i is still at position i
        while to > 0:
            prev = ops[order[to - 1]]
            prev_writes = set(prev.output_names())
            if (prev.type in CONTROL_FLOW or order[to - 1] in moved or not prev_writes
                    or prev_writes & (reads | writes) or writes & set(prev.input_names())):
                break
            to -= 1
        if to < i:
            moved.add(i)
            order.insert(to, order.pop(i))
    return order


def choose_overlap(steps, joins) -> None:
    """Mark the heavy ``steps`` to run on the worker thread: ``step.join`` is the
    step before which it is joined, ``joins[join]`` lists them.

    Decided from the last op back, so an op counts the heavy ops after it
    that stay on the calling thread, and a long side branch (a weight
    gradient read only at the end) wins over its neighbours.
    """
    heavy = {s.index for s in steps if s.op.type in OVERLAPPABLE}
    for step in reversed(steps):
        outs = [v for group in step.outs for v in group]
        if (step.op.type not in OVERLAPPABLE or not outs
                or any(v.var is None or v.var.persistable or v.first_use < 0 for v in outs)):
            continue
        join = min(v.first_use for v in outs)
        if not any(step.index < h < join for h in heavy):
            continue  # nothing heavy to run meanwhile: the thread hop would only cost
        step.join = join
        joins[join].insert(0, step)
        heavy.discard(step.index)
        for v in step.reads:  # read by the worker until the join: keep them intact
            v.last_use = max(v.last_use, join)
