"""Tiers: a plan runs interpreted first and natively once it is called often.

Every plan starts interpreted (the generated Python of ``codegen``): its
first call costs no compilation. When the native tier is on (the flag
``native_tier``, on where Numba can be imported) and the plan has regions
that lower (``regions``), the ``native_after_calls``-th call starts building
its native form on a background thread: the same plan with each region one
machine-code function (``lower.native``). When that is ready it is swapped
in between two calls; a call already running finishes on the code it
started with, and every call gives the same results either way (bit for bit
but for sums added in another order, see ``rules``). A plan whose native code is
already in the disk cache (built by an earlier process: a marker under the
plan's content hash says so) starts building at its first call, and loads
instead of compiling.

Compiling holds the GIL for most of its time (Numba's typing is Python), so
calls running meanwhile run slower. A build therefore waits for a quiet spell:
no trace running and none in the last ``QUIET_S`` seconds (``foreground``), so
that a process converting its functions one after another keeps its first calls
fast. A region Numba cannot compile stays interpreted, with a
``NativeTierWarning``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pathlib
import queue
import threading
import time
import warnings

from dy2stat.runtime.lower import native

__all__ = ["Tier", "cache_root", "foreground", "settings"]

QUIET_S = 0.2  # how long no trace must have run before a build starts
MOST_WAIT_S = 2.0  # a build starts after this long even if traces keep coming


class _Settings:
    """The flags ``native_tier``, ``native_exact``, ``native_relaxed``,
    ``native_after_calls`` and ``native_cache_dir`` (empty: the default, see
    ``native``)."""

    def __init__(self):
        self.enabled = native.available()
        self.exact = False
        self.relaxed = False
        self.after_calls = 100
        self.cache_dir = ""

    @property
    def rounding(self) -> str:
        """The loosest rounding the flags let rules have (``rules.ROUNDINGS``)."""
        return "library" if self.relaxed else "exact" if self.exact else "order"

    @property
    def active(self) -> bool:
        return self.enabled and native.available()


settings = _Settings()


class Tier:
    """A plan's way to native code: when to build it and how (``build()`` returns
    the new function and what it ran, or None)."""

    def __init__(self, key_text: str, build, root: pathlib.Path):
        self.key = hashlib.sha256(key_text.encode()).hexdigest()[:40]
        self.build, self.root = build, root  # root: the cache directory it uses
        self.state = "interpreted"  # -> "building" -> "native" or "failed"
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self.loaded = 0  # regions loaded from the disk cache rather than compiled

    def calls_before_native(self) -> int:
        """How many calls run interpreted before the build starts (1: at the first)."""
        return 1 if self._marker().exists() else max(int(settings.after_calls), 1)

    def start(self, plan) -> None:
        """Build the native form of ``plan`` on the background thread, then swap it in."""
        with _lock:
            if self.state != "interpreted" or not settings.active:
                return
            self.state = "building"
        _submit(self._run, plan)

    def _run(self, plan) -> None:
        try:
            built = self.build()
            if built is None:  # no region compiled
                self.state = "failed"
                return
            plan._swap_native(*built)
            self.state = "native"
            self._mark()
        except Exception as exc:  # noqa: BLE001 - the plan goes on interpreted
            self.state, self.error = "failed", exc
            warnings.warn(f"dy2stat: the native tier could not build {plan!r} ({type(exc).__name__}"
                          f": {exc}); it stays interpreted", native.NativeTierWarning,
                          stacklevel=1)
        finally:
            self.ready.set()

    def _marker(self) -> pathlib.Path:
        """The file saying this plan's native form is in the cache (by content hash)."""
        return self.root / "plans" / self.key

    def _mark(self) -> None:
        try:
            path = self._marker()
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
        except OSError:
            pass  # a hint only: the next process compiles after some calls instead


def cache_root() -> pathlib.Path:
    """The cache directory in use: the flag ``native_cache_dir``, or the default."""
    return pathlib.Path(settings.cache_dir) if settings.cache_dir else native.default_cache_dir()


class _Foreground:
    """The traces running now and when the last one ended."""

    def __init__(self):
        self._lock = threading.Lock()
        self._running = 0
        self._ended = 0.0  # time.monotonic() of the last trace's end

    @contextlib.contextmanager
    def tracing(self):
        """Around a trace (and its first run): builds wait until it is over."""
        with self._lock:
            self._running += 1
        try:
            yield
        finally:
            with self._lock:
                self._running -= 1
                self._ended = time.monotonic()

    def wait_quiet(self) -> None:
        """Return once no trace has run for ``QUIET_S`` (or after ``MOST_WAIT_S``)."""
        deadline = time.monotonic() + MOST_WAIT_S
        while True:
            now = time.monotonic()
            with self._lock:
                quiet = not self._running and now - self._ended >= QUIET_S
            if quiet or now >= deadline:
                return
            time.sleep(QUIET_S / 4)


foreground = _Foreground()

_jobs: queue.SimpleQueue = queue.SimpleQueue()
_thread = {"thread": None, "pid": None}
_lock = threading.Lock()  # one build per plan
_thread_lock = threading.Lock()


def _submit(function, *args) -> None:
    """Run ``function(*args)`` on the one background compile thread (a daemon: a
    process that exits does not wait for a compile)."""
    with _thread_lock:
        if _thread["thread"] is None or _thread["pid"] != os.getpid():
            thread = threading.Thread(target=_work, name="dy2stat-native", daemon=True)
            _thread["thread"], _thread["pid"] = thread, os.getpid()
            thread.start()
    _jobs.put((function, args))


def _work() -> None:
    while True:
        function, args = _jobs.get()
        foreground.wait_quiet()
        try:
            function(*args)
        except Exception:  # noqa: BLE001, S110 - a job reports its own failure; keep serving
            pass
