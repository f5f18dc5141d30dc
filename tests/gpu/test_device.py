"""Devices: clear errors without a GPU (run everywhere), the backend kernel table,
and placement on a GPU (``gpu``-marked: skipped without CuPy and a GPU)."""

import types

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import device, dispatch, flags, jit, nn, static
from dy2stat.kernels import backend, cudnn, pool_cuda
from dy2stat.runtime.ops import conv as nn_ops
from dy2stat.runtime.registry import get_op
from dy2stat.tensor import Tensor

NO_GPU = not d2s.is_compiled_with_cuda()
needs_no_gpu = pytest.mark.skipif(not NO_GPU, reason="a GPU is present")


# ------------------------------------------------------ without a GPU (CPU)


@needs_no_gpu
def test_gpu_requests_are_clear_errors_without_a_gpu():
    want = "CuPy is not installed" if not backend.has_cupy() else "sees no GPU"
    with pytest.raises(RuntimeError, match=want):
        d2s.set_device("gpu:0")
    assert d2s.get_device() == "cpu"
    x = d2s.ones([2])
    for call in (lambda: x.to("gpu"), lambda: x.cuda(),
                 lambda: d2s.to_tensor([1.0], place="gpu"), lambda: static.Executor("gpu")):
        with pytest.raises(RuntimeError, match=want):
            call()
    assert not d2s.is_compiled_with_cuda()


def test_bad_device_names():
    for bad in ("tpu", "gpu:x", "gpu:-1", "cuda"):
        with pytest.raises(ValueError, match="bad device"):
            d2s.set_device(bad)
        with pytest.raises(ValueError, match="bad device"):
            d2s.ones([1]).to(bad)
    assert device.parse("CPU") is None and device.parse("gpu:3") == 3
    assert device.parse("gpu") == 0  # the current GPU; GPU 0 while on the CPU


def test_cpu_moves_are_no_copies_and_numpy_is_on_the_host():
    x = d2s.to_tensor([1.0, 2.0])
    assert x.place == "cpu" and x.to("cpu") is x and x.cpu() is x
    assert isinstance(x.numpy(), np.ndarray)
    a = np.arange(3.0)
    t = d2s.to_tensor(a, place="cpu")
    a[0] = 9
    assert t.numpy()[0] == 0  # to_tensor copies


def test_the_mixed_devices_message_names_both_devices():
    err = device.mixed_devices_error("add", ["gpu:0", "cpu", "gpu:0"])
    assert isinstance(err, ValueError)
    assert "add" in str(err) and "cpu and gpu:0" in str(err)


def test_the_dispatcher_refuses_inputs_on_two_devices(monkeypatch):
    """A second array module is simulated: arrays of a marked ndarray subclass."""

    class OnGpu(np.ndarray):
        pass

    fake = types.SimpleNamespace(__name__="fakecupy")
    real_module = backend.array_module
    monkeypatch.setattr(backend, "array_module",
                        lambda a: fake if isinstance(a, OnGpu) else real_module(a))
    monkeypatch.setattr(device, "device_of",
                        lambda a: "gpu:0" if isinstance(a, OnGpu) else "cpu")
    monkeypatch.setattr(dispatch, "_NO_CUPY", False)
    on_gpu = Tensor(np.ones(3, np.float32).view(OnGpu))
    on_cpu = d2s.ones([3])
    with pytest.raises(ValueError, match=r"add: inputs live on different devices "
                                         r"\(cpu and gpu:0\)"):
        d2s.add(on_cpu, on_gpu)
    with pytest.raises(ValueError, match="concat: .*cpu and gpu:0"):
        d2s.concat([on_cpu, on_gpu])
    assert d2s.add(on_cpu, on_cpu).shape == [3]  # one device is fine


def test_the_backend_table_picks_a_module_kernel_and_falls_back(monkeypatch):
    calls = []

    def fast(xp, x, w, **attrs):
        calls.append(attrs)
        return NotImplemented if attrs.get("groups") == 2 else "fast"

    monkeypatch.setitem(nn_ops.BACKEND_KERNELS, "numpy", {"conv2d": fast})
    kernel = get_op("conv2d").kernel
    x, w = np.ones((1, 2, 4, 4)), np.ones((2, 1, 3, 3))
    assert kernel(np, x, w.repeat(2, axis=1)) == "fast"
    y = kernel(np, x, w, groups=2)  # NotImplemented: the generic kernel runs
    assert isinstance(y, np.ndarray) and y.shape == (1, 2, 2, 2) and len(calls) == 2


def test_gpu_kernels_decline_host_arrays():
    x, w = np.ones((1, 1, 4, 4)), np.ones((1, 1, 3, 3))
    assert cudnn.conv2d(np, x, w) is NotImplemented  # host arrays: never cuDNN
    assert pool_cuda.max_pool2d(np, x, 2) is NotImplemented
    assert pool_cuda.avg_pool2d_grad(np, x, np.ones((1, 1, 2, 2)), 2) is NotImplemented
    if not backend.has_cupy():
        assert not cudnn.available()


def test_static_executor_on_the_cpu_returns_host_arrays():
    main, startup = static.Program(), static.Program()
    with static.program_guard(main, startup):
        x = static.data("x", [-1, 3])
        y = d2s.relu(x) * 2.0
    exe = static.Executor()
    assert exe.place == "cpu" and exe.xp is np
    out = exe.run(main, feed={"x": np.array([[-1.0, 0.5, 2.0]], "float32")}, fetch_list=[y])
    np.testing.assert_allclose(out[0], [[0.0, 1.0, 4.0]])


# --------------------------------------------------------------- on a GPU

gpu = pytest.mark.gpu


@pytest.fixture
def cp():
    import cupy

    d2s.set_device("gpu")
    yield cupy
    d2s.set_device("cpu")


@gpu
def test_new_tensors_and_parameters_live_on_the_gpu(cp):
    assert d2s.is_compiled_with_cuda() and d2s.get_device() == "gpu:0"
    for t in (d2s.ones([2, 3]), d2s.randn([4]), d2s.arange(5), d2s.to_tensor([1.0, 2.0]),
              d2s.to_tensor(np.zeros(3))):
        assert isinstance(t._data, cp.ndarray) and t.place == "gpu:0"
    layer = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1D(3))
    assert all(isinstance(p._data, cp.ndarray) for p in layer.parameters() + layer.buffers())
    out = layer(d2s.randn([5, 4]))
    assert out.place == "gpu:0" and isinstance(out.numpy(), np.ndarray)
    out.sum().backward()
    assert all(p.grad.place == "gpu:0" for p in layer.parameters())


@gpu
def test_to_tensor_keeps_cupy_arrays_on_their_gpu_and_moves_on_request(cp):
    d2s.set_device("cpu")
    a = cp.arange(4, dtype=cp.float32)
    t = d2s.to_tensor(a)
    assert t.place == "gpu:0" and t._data is not a  # a copy, on the GPU
    assert d2s.to_tensor(a, place="cpu").place == "cpu"
    h = d2s.to_tensor(np.arange(3.0), place="gpu")
    assert h.place == "gpu:0" and h.dtype == np.float64
    back = h.cpu()
    assert back.place == "cpu" and back.cuda().place == "gpu:0" and h.to("gpu:0") is h
    np.testing.assert_array_equal(back.to("gpu").numpy(), [0.0, 1.0, 2.0])


@gpu
def test_mixing_devices_in_one_op_is_a_clear_error(cp):
    g = d2s.ones([3])
    c = d2s.ones([3]).cpu()
    with pytest.raises(ValueError, match=r"cpu and gpu:0"):
        g + c
    with pytest.raises(ValueError, match=r"cpu and gpu:0"):
        d2s.matmul(c.reshape([1, 3]), g.reshape([3, 1]))


@gpu
def test_seeded_random_repeats_on_the_gpu(cp):
    d2s.seed(11)
    a = d2s.randn([16]).numpy()
    d2s.seed(11)
    b = d2s.randn([16]).numpy()
    np.testing.assert_array_equal(a, b)
    d2s.seed(11)
    layer_a = nn.Linear(8, 8)
    d2s.seed(11)
    layer_b = nn.Linear(8, 8)
    np.testing.assert_array_equal(layer_a.weight.numpy(), layer_b.weight.numpy())


@gpu
def test_static_executor_runs_programs_on_the_gpu(cp):
    main, startup = static.Program(), static.Program()
    with static.program_guard(main, startup):
        x = static.data("x", [-1, 4])
        y = static.nn.fc(x, 3)
        total = d2s.sum(y)
        out = static.nn.cond(total > 0, lambda: y * 2.0, lambda: y - 1.0)
    exe = static.Executor()  # place None: the current device
    assert exe.xp is cp
    exe.run(startup)
    feed = {"x": np.ones((2, 4), "float32")}
    y_host, out_host = exe.run(main, feed=feed, fetch_list=[y, out])
    assert isinstance(out_host, np.ndarray)
    want = y_host * 2.0 if y_host.sum() > 0 else y_host - 1.0
    np.testing.assert_allclose(out_host, want, rtol=1e-6)
    (on_device,) = exe.run(main, feed=feed, fetch_list=[out], return_numpy=False)
    assert isinstance(on_device, cp.ndarray)


@gpu
def test_loading_without_an_executor_puts_parameters_on_the_current_device(cp, tmp_path):
    main, startup = static.Program(), static.Program()
    with static.program_guard(main, startup):
        x = static.data("x", [-1, 4])
        y = static.nn.fc(x, 3)
    exe = static.Executor()
    exe.run(startup)
    feed = {"x": np.ones((2, 4), "float32")}
    (want,) = exe.run(main, feed=feed, fetch_list=[y])
    static.save_inference_model(str(tmp_path / "m"), [x], [y], exe)
    program, feeds, fetches = static.load_inference_model(str(tmp_path / "m"))  # no executor
    assert all(isinstance(static.global_scope()[p.name], cp.ndarray)
               for p in program.persistables())
    (got,) = static.Executor().run(program, feed=feed, fetch_list=fetches)
    np.testing.assert_allclose(got, want, rtol=1e-6)


@gpu
def test_an_explicit_executor_place_leaves_the_current_device_alone(cp):
    d2s.set_device("cpu")
    exe = static.Executor("gpu:0")
    assert exe.xp is cp and d2s.get_device() == "cpu"


@gpu
def test_to_static_jit_save_load_and_cli_run_on_the_gpu(cp, tmp_path, capsys):
    from dy2stat import cli

    d2s.seed(0)
    net = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 2))
    x = d2s.randn([3, 6])
    want = net(x).numpy()
    jit.to_static(net)
    got = net(x)
    assert got.place == "gpu:0"
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    got.sum().backward()  # the program's backward, on the GPU
    assert all(p.grad is not None and p.grad.place == "gpu:0" for p in net.parameters())
    path = str(tmp_path / "net")
    jit.save(net, path, input_spec=[static.InputSpec([-1, 6], "float32", "x")])
    loaded = jit.load(path)
    assert all(p.place == "gpu:0" for p in loaded.parameters())
    out = loaded(x.numpy())  # a host input is copied to the device once
    assert out.place == "gpu:0"
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)
    d2s.set_device("cpu")
    np.save(tmp_path / "x.npy", x.numpy())
    out_file = tmp_path / "out.npy"
    assert cli.main(["run", path, "--device", "gpu", "--input", f"x={tmp_path / 'x.npy'}",
                     "--output", str(out_file)]) == 0
    np.testing.assert_allclose(np.load(out_file), want, rtol=1e-5, atol=1e-6)


@gpu
@pytest.mark.parametrize("search", [False, True])
def test_conv_and_pool_ops_on_the_gpu_match_the_cpu(cp, search):
    flags.set_flags({"cudnn_exhaustive_search": search})
    x = np.random.default_rng(0).standard_normal((4, 3, 16, 16)).astype("float32")
    d2s.seed(0)
    conv = nn.Conv2D(3, 8, 3, padding=1)
    results = []
    for place in ("cpu", "gpu"):
        conv.to(place)
        xt = d2s.to_tensor(x, place=place, stop_gradient=False)
        y = nn.functional.max_pool2d(conv(xt), 2)
        y = nn.functional.avg_pool2d(y, 2, exclusive=False)
        y.sum().backward()
        results.append((y.numpy(), xt.grad.numpy(), conv.weight.grad.numpy()))
        for p in conv.parameters():
            p.clear_grad()
    for got, want in zip(results[1], results[0]):
        np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2 * np.abs(want).max())
    if search and cudnn.available():
        assert any(k[0] == "forward" for k in cudnn.searched())
