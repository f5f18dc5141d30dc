"""Every test leaves the global conversion switches as it found them."""

import pytest

from dy2stat import jit
from dy2stat.jit import settings


@pytest.fixture(autouse=True)
def _restore_switches():
    enabled, verbosity = settings.state.enabled, settings.state.verbosity
    yield
    jit.enable_to_static(enabled)
    settings.state.verbosity = verbosity
