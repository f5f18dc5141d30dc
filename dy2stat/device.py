"""The current device: where new tensors and programs live; ``info()`` says how a GPU
computes.

Devices are named ``"cpu"``, ``"gpu"`` (the current GPU, else GPU 0) and
``"gpu:N"``. The CPU computes with NumPy, a GPU with CuPy; every array knows
its device, and an op whose inputs live on two devices is an error naming both.
"""

from __future__ import annotations

import numpy

from dy2stat.kernels import backend, cudnn
from dy2stat.runtime import lower
from dy2stat.runtime.codegen import cuda_graphs


class _Device:
    name = "cpu"
    xp = numpy


current = _Device()
_gpu_count = None  # how many GPUs CuPy sees (looked up once)


def _gpus() -> int:
    global _gpu_count
    if _gpu_count is None:
        _gpu_count = 0
        if backend.has_cupy():
            try:
                _gpu_count = int(backend.cupy.cuda.runtime.getDeviceCount())
            except Exception:  # no driver, no device: CuPy imports but cannot run
                _gpu_count = 0
    return _gpu_count


def is_compiled_with_cuda() -> bool:
    """True when CuPy imports and sees at least one GPU."""
    return _gpus() > 0


def parse(device, where: str = "set_device") -> int | None:
    """None for ``"cpu"``; the GPU index for ``"gpu"`` / ``"gpu:N"``."""
    name = str(device).lower().strip()
    if name == "cpu":
        return None
    if name == "gpu":
        return gpu_index()
    if name.startswith("gpu:") and name[4:].isdigit():
        return int(name[4:])
    raise ValueError(f"{where}: bad device {device!r} (use 'cpu', 'gpu' or 'gpu:N')")


def gpu_index() -> int:
    """The GPU a plain ``"gpu"`` means: the current one, else GPU 0."""
    return int(current.name[4:]) if current.name.startswith("gpu:") else 0


def module_for(device, where: str = "set_device"):
    """The array module (numpy or cupy) that computes on ``device``; checks the GPU exists."""
    index = parse(device, where)
    if index is None:
        return numpy
    if not backend.has_cupy():
        raise RuntimeError(
            f"{where}({device!r}): CuPy is not installed; install the GPU extra "
            "(pip install 'dy2stat[gpu]') on a machine with an NVIDIA GPU"
        )
    count = _gpus()
    if count == 0:
        raise RuntimeError(f"{where}({device!r}): CuPy is installed but sees no GPU on this "
                           "machine (no NVIDIA driver or device)")
    if index >= count:
        raise ValueError(f"{where}({device!r}): only {count} GPU(s) present")
    return backend.cupy


def set_device(device: str) -> str:
    """``"cpu"``, ``"gpu"`` or ``"gpu:N"``; returns the device name now in use."""
    xp = module_for(device, "set_device")
    if xp is numpy:
        current.name, current.xp = "cpu", numpy
        return current.name
    index = parse(device)
    backend.cupy.cuda.Device(index).use()
    current.name, current.xp = f"gpu:{index}", xp
    return current.name


def get_device() -> str:
    """The current device: 'cpu' or 'gpu:N'."""
    return current.name


def device_of(array) -> str:
    """The device an array lives on, by the same names set_device takes."""
    if backend.array_module(array) is numpy:
        return "cpu"
    return f"gpu:{array.device.id}"


def move(array, device, where: str = "to"):
    """``array`` on ``device``: itself when already there, else a copy."""
    xp = module_for(device, where)
    if xp is numpy:
        return backend.to_host(array)
    index = parse(device, where)
    if backend.array_module(array) is xp and array.device.id == index:
        return array
    with xp.cuda.Device(index):
        # copy() copies to the current device, also from another GPU
        return xp.asarray(array) if backend.array_module(array) is numpy else array.copy()


def mixed_devices_error(op_type: str, devices) -> ValueError:
    """The error for an op whose inputs live on more than one device."""
    names = sorted(set(devices))
    return ValueError(
        f"{op_type}: inputs live on different devices ({' and '.join(names)}); "
        f"move them to one device first with .to({names[-1]!r}) or .cpu()"
    )


def info() -> dict:
    """What computes where, in words: the current device, the GPUs CuPy sees, and the
    paths a GPU takes (convolutions through cuDNN or the generic kernel, pooling,
    fused kernels, CUDA graphs, loop kernels) -- what a bug report should include."""
    gpus = _gpus()
    report = {"device": current.name, "gpus": gpus,
              "cupy": backend.cupy.__version__ if backend.has_cupy() else None}
    if gpus:
        props = backend.cupy.cuda.runtime.getDeviceProperties(gpu_index())
        name = props.get("name", b"")
        report["gpu"] = name.decode() if isinstance(name, bytes) else str(name)
    report["convolution"] = cudnn.status()
    report["pooling"] = "one CUDA kernel per call (kernels/pool_cuda.py)"
    report["elementwise"] = "chains fused into one CUDA kernel each (NVRTC)"
    report["cuda_graphs"] = ("straight-line plans, and the iterations of loops left on the "
                             "host, captured and replayed" if cuda_graphs.settings.enabled
                             else "off (the cuda_graphs flag)")
    report["loops"] = ("a while loop whose ops lower runs as one kernel"
                       if lower.cuda.settings.enabled else "off (the gpu_loop_kernels flag)")
    return report
