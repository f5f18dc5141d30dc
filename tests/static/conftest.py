"""Every static test starts and ends in eager mode with the default programs."""

import pytest

import dy2stat as d2s


@pytest.fixture(autouse=True)
def _eager_after_each_test():
    yield
    d2s.disable_static()
