"""Keeping freed host memory: on where glibc is, off when asked."""

import os

import pytest

from dy2stat.kernels import host_memory


def _glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc")
    except (ValueError, OSError, AttributeError):
        return False


@pytest.mark.skipif(not _glibc(), reason="needs glibc")
def test_thresholds_are_raised_under_glibc():
    assert host_memory.keep_freed_memory() is True


def test_the_environment_can_turn_it_off(monkeypatch):
    monkeypatch.setenv("DY2STAT_KEEP_HOST_MEMORY", "0")
    assert host_memory.keep_freed_memory() is False
