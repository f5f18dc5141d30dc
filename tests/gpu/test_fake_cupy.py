"""The test double is as strict as CuPy 14 where it matters (run everywhere, no GPU):
what it refuses, how its stream capture behaves, and that its names are CuPy 14.2's
(checked against a real CuPy when one is installed)."""

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.gpu import cupy14_api, fake_cupy

cp, cupyx = fake_cupy.build()


def test_a_device_array_never_becomes_a_host_array_implicitly():
    a = cp.arange(4.0)
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array"):
        np.asarray(a)
    with pytest.raises(TypeError, match="Implicit conversion"):
        np.array([a, a])
    with pytest.raises(TypeError, match="numpy.ndarray"):
        a + np.ones(4)
    with pytest.raises(TypeError, match="numpy.ndarray"):
        cp.concatenate([a, np.ones(2)])
    np.testing.assert_array_equal(cp.asnumpy(a * np.float32(2)), [0, 2, 4, 6])  # NumPy scalars
    assert isinstance(a.sum(), cp.ndarray) and a.sum().shape == ()  # 0-d, not a scalar
    with pytest.raises(TypeError):
        range(cp.asarray(3))  # no __index__
    with pytest.raises(ValueError, match="Unsupported dtype"):
        cp.asarray(["a", "b"])
    with pytest.raises(ValueError, match="Unsupported dtype"):
        cp.asarray(np.ones(2, np.longdouble))
    assert (a + np.float64(1)).dtype == np.float64 and (a.astype("float32") * 2).dtype == "f4"


def test_names_cupy_14_lacks_are_missing():
    for name in ("cudnn", "errstate", "object_", "insert"):
        assert not hasattr(cp, name)
    rng = cp.random.default_rng(0)
    assert rng.standard_normal((2,)).shape == (2,)
    for name in ("normal", "choice", "bernoulli"):
        with pytest.raises(AttributeError):
            getattr(rng, name)


def test_arrays_live_on_one_device():
    a = cp.ones(3)
    with cp.cuda.Device(1):
        with pytest.raises(ValueError, match="Array device must be same as the current"):
            a + 1
        b = a.copy()  # a copy goes to the current device
    assert b.device.id == 1 and a.device.id == 0


def test_capture_records_and_a_launch_replays_into_the_same_buffers():
    x = cp.arange(3.0)
    state = cp.zeros(3)
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        s.begin_capture()
        y = x * 2 + 1
        cp.copyto(state, state + y)  # an in-place write: it happens at launch only
        with pytest.raises(fake_cupy.CUDARuntimeError, match="while a stream captures"):
            float(y[0])
        with pytest.raises(fake_cupy.CUDARuntimeError, match="while a stream captures"):
            cp.asarray(np.ones(2))  # host data copied in
        graph = s.end_capture()
    assert np.isnan(y.get()).all()  # no values before a launch
    np.testing.assert_array_equal(state.get(), [0, 0, 0])  # the captured write did not run
    graph.launch()
    graph.launch()
    np.testing.assert_array_equal(state.get(), [2, 6, 10])
    cp.copyto(x, cp.full(3, 10.0))
    graph.launch()
    np.testing.assert_array_equal(y.get(), [21, 21, 21])
    with pytest.raises(fake_cupy.CUDARuntimeError, match="null stream"):
        cp.cuda.Stream.null.begin_capture()


def test_raw_kernels_run_only_what_dy2stat_registered():
    kernel = cp.RawKernel('extern "C" __global__ void nobody_made_me() {}', "nobody_made_me")
    with pytest.raises(fake_cupy.CUDARuntimeError, match="no reference"):
        kernel.compile()


def test_the_names_are_those_of_cupy_14_2():
    """The API lists the double serves from, against an installed CuPy (not this double)."""
    code = ("import json, cupy, cupyx; print(json.dumps({'version': cupy.__version__, "
            "'cupy': sorted(n for n in dir(cupy) if not n.startswith('_')), "
            "'ndarray': sorted(n for n in dir(cupy.ndarray) if not n.startswith('_')), "
            "'generator': sorted(n for n in dir(cupy.random.Generator) "
            "if not n.startswith('_'))}))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    if result.returncode:
        pytest.skip("CuPy is not installed here")
    real = json.loads(result.stdout)
    if not real["version"].startswith("14."):
        pytest.skip(f"CuPy {real['version']} is installed, not 14")
    assert cupy14_api.CUPY - {"annotations", "np"} <= set(real["cupy"]) | {"annotations"}
    assert {n for n in cupy14_api.NDARRAY if not n.startswith("_")} <= set(real["ndarray"])
    assert cupy14_api.GENERATOR == set(real["generator"])
    for name in ("cudnn", "errstate"):
        assert name not in real["cupy"]  # what the double refuses, real CuPy 14 lacks
