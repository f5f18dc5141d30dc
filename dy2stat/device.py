"""The current device: where new tensors and programs live."""

from __future__ import annotations

import numpy

from dy2stat.kernels import backend


class _Device:
    name = "cpu"
    xp = numpy


current = _Device()


def is_compiled_with_cuda() -> bool:
    """True when CuPy imports and sees at least one GPU."""
    if not backend.has_cupy():
        return False
    try:
        return backend.cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def set_device(device: str) -> str:
    """``"cpu"``, ``"gpu"`` or ``"gpu:N"``; returns the device name now in use."""
    name = str(device).lower()
    if name == "cpu":
        current.name, current.xp = "cpu", numpy
        return current.name
    if name == "gpu" or name.startswith("gpu:"):
        index = name.partition(":")[2] or "0"
        if not index.isdigit():
            raise ValueError(f"set_device: bad device {device!r} (use 'cpu', 'gpu' or 'gpu:N')")
        if not backend.has_cupy():
            raise RuntimeError(
                f"set_device({device!r}): CuPy is not installed; install the GPU extra "
                "(pip install 'dy2stat[gpu]') on a machine with an NVIDIA GPU"
            )
        if not is_compiled_with_cuda():
            raise RuntimeError(f"set_device({device!r}): CuPy sees no GPU on this machine")
        count = backend.cupy.cuda.runtime.getDeviceCount()
        if int(index) >= count:
            raise ValueError(f"set_device({device!r}): only {count} GPU(s) present")
        backend.cupy.cuda.Device(int(index)).use()
        current.name, current.xp = f"gpu:{index}", backend.cupy
        return current.name
    raise ValueError(f"set_device: bad device {device!r} (use 'cpu', 'gpu' or 'gpu:N')")


def get_device() -> str:
    return current.name


def device_of(array) -> str:
    """The device an array lives on, by the same names set_device takes."""
    if backend.array_module(array) is numpy:
        return "cpu"
    return f"gpu:{array.device.id}"
