"""Shared helpers of the static-mode tests: build programs, run them."""

from __future__ import annotations

import contextlib

import numpy as np

import dy2stat as d2s
from dy2stat.runtime.executor import Scope


@contextlib.contextmanager
def static_mode():
    """Static mode on inside the ``with`` (and off after it, whatever happens)."""
    was = d2s.in_static_mode()
    d2s.enable_static()
    try:
        yield
    finally:
        if not was:
            d2s.disable_static()


@contextlib.contextmanager
def building():
    """``with building() as (main, startup):`` static mode and fresh programs."""
    main, startup = d2s.static.Program(), d2s.static.Program()
    with static_mode(), d2s.static.program_guard(main, startup):
        yield main, startup


def run(program, feed=None, fetch=(), scope=None):
    """Run ``program`` with a fresh executor; a list of NumPy arrays."""
    exe = d2s.static.Executor()
    return exe.run(program, feed=feed or {}, fetch_list=list(fetch),
                   scope=scope if scope is not None else Scope())


def central_differences(f, value: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """d f / d value by central differences (``f`` reads ``value``, changed in place)."""
    grad = np.zeros_like(value)
    for i in np.ndindex(value.shape):
        saved = value[i]
        value[i] = saved + eps
        plus = f()
        value[i] = saved - eps
        minus = f()
        value[i] = saved
        grad[i] = (plus - minus) / (2 * eps)
    return grad
