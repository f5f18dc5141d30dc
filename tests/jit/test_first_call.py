"""A converted function's first call (trace, compile, run): what it does to the process."""

import gc
import threading

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat.runtime.lower import tier


def test_the_cycle_collector_is_off_while_tracing_and_on_after():
    seen = []

    @d2s.jit.to_static
    def f(x):
        seen.append(gc.isenabled())
        return x + 1

    assert gc.isenabled()
    np.testing.assert_array_equal(f(d2s.ones([2])).numpy(), [2.0, 2.0])
    assert seen == [False] and gc.isenabled()
    f(d2s.ones([2]))  # cached: not traced again
    assert seen == [False]


def test_the_collector_is_on_again_after_a_trace_that_raises():
    @d2s.jit.to_static
    def bad(x):
        raise ValueError("in the user's code")

    with pytest.raises(ValueError, match="user's code"):
        bad(d2s.ones([2]))
    assert gc.isenabled()


def test_a_collector_the_user_turned_off_stays_off():
    @d2s.jit.to_static
    def f(x):
        return x * 2

    gc.disable()
    try:
        f(d2s.ones([2]))
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_background_build_waits_until_no_trace_has_run_for_a_while():
    started = threading.Event()
    with tier.foreground.tracing():
        tier._submit(started.set)
        assert not started.wait(3 * tier.QUIET_S)  # held back while a trace runs
    assert started.wait(30)  # and runs once the traces are over


def test_a_build_starts_even_if_traces_never_stop(monkeypatch):
    monkeypatch.setattr(tier, "MOST_WAIT_S", 0.3)
    started = threading.Event()
    with tier.foreground.tracing():
        tier._submit(started.set)
        assert started.wait(30)
