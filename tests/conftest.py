"""Shared test setup: GPU tests skip cleanly without a GPU; the ``xp`` fixture.

- A test marked ``@pytest.mark.gpu`` runs only where ``d2s.is_compiled_with_cuda()``
  (CuPy imports and sees a GPU); elsewhere it is skipped with the reason.
- ``xp`` runs a kernel test once per array module: numpy always, and cupy
  when CuPy is installed (that run carries the ``gpu`` marker, so
  ``pytest -m gpu`` selects it and a machine without a GPU skips it).
- Every test starts on the CPU with the default flags, whatever the one
  before it set.
- ``D2S_FAKE_CUPY=1`` puts a NumPy stand-in for CuPy in place first, so the
  GPU tests exercise dy2stat's device plumbing on a machine without a GPU.
- The native tier caches compiled code in a temporary directory of the run
  (``DY2STAT_CACHE_DIR``), never in the user's cache.
"""

import atexit
import os
import shutil
import tempfile

if "DY2STAT_CACHE_DIR" not in os.environ:  # before dy2stat reads it; subprocesses inherit it
    os.environ["DY2STAT_CACHE_DIR"] = tempfile.mkdtemp(prefix="dy2stat-test-cache-")
    atexit.register(shutil.rmtree, os.environ["DY2STAT_CACHE_DIR"], ignore_errors=True)

if os.environ.get("D2S_FAKE_CUPY"):  # GPU code paths on a NumPy stand-in (tests/gpu/fake_cupy.py)
    from tests.gpu import fake_cupy

    fake_cupy.install(cudnn=os.environ["D2S_FAKE_CUPY"] == "cudnn")

import numpy  # noqa: E402
import pytest  # noqa: E402

import dy2stat as d2s  # noqa: E402
from dy2stat import device, flags  # noqa: E402
from dy2stat.kernels import backend  # noqa: E402

_DEFAULT_FLAGS = flags.get_flags()


def pytest_collection_modifyitems(config, items):
    if d2s.is_compiled_with_cuda():
        return
    reason = ("needs CuPy and a GPU" if not backend.has_cupy()
              else "CuPy is installed but sees no GPU")
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if item.get_closest_marker("gpu") is not None:  # (keywords also hold folder names)
            item.add_marker(skip)


_MODULES = [pytest.param("numpy", id="numpy")]
if backend.has_cupy():
    _MODULES.append(pytest.param("cupy", id="cupy", marks=pytest.mark.gpu))


@pytest.fixture(params=_MODULES)
def xp(request):
    """numpy, or cupy (gpu-marked) when CuPy is installed."""
    return numpy if request.param == "numpy" else backend.cupy


@pytest.fixture(autouse=True)
def _cpu_and_default_flags():
    yield
    if device.current.name != "cpu":
        d2s.set_device("cpu")
    if flags.get_flags() != _DEFAULT_FLAGS:
        flags.set_flags(_DEFAULT_FLAGS)
