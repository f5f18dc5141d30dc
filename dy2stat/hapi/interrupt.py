"""Ctrl-C during ``Model.fit``: the batch in progress finishes, then training stops.

While ``fit`` runs in the main thread with Python's default SIGINT handler,
the first Ctrl-C only sets ``requested``; ``fit`` checks it after every batch
and stops with one line (and a checkpoint when it has a ``save_dir``), so no
parameter is left half updated. A second Ctrl-C raises ``KeyboardInterrupt``
at once, which ``fit`` also turns into one line (without a checkpoint: the
step it cut may be half done). Elsewhere (another thread, a handler of the
user's) Ctrl-C is left as it is.
"""

from __future__ import annotations

import signal
import threading

__all__ = ["CtrlC"]


class CtrlC:
    """A context manager: ``requested`` becomes true at the first Ctrl-C."""

    def __init__(self):
        self.requested = False
        self._previous = None

    def __enter__(self) -> CtrlC:
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def _handle(self, signum, frame) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def held(self):
        """A context in which Ctrl-C is ignored (while a checkpoint is written)."""
        return _Ignored()


class _Ignored:
    def __enter__(self):
        self._previous = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, signal.SIG_IGN)

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
