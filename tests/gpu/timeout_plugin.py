"""A per-test time limit for the GPU check (``-p tests.gpu.timeout_plugin
--per-test-timeout=S``): a test still running after S seconds fails with a
``TimeoutError`` (SIGALRM, main thread), so one hung test does not stop the rest."""

import signal

import pytest


def pytest_addoption(parser):
    parser.addoption("--per-test-timeout", type=float, default=0.0,
                     help="fail a test that runs longer than this many seconds (0: no limit)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    limit = item.config.getoption("--per-test-timeout")
    if not limit or not hasattr(signal, "SIGALRM"):
        yield
        return

    def expire(signum, frame):
        raise TimeoutError(f"{item.nodeid} ran past its {limit:g} s limit")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
