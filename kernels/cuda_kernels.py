"""The CUDA kernels dy2stat generates, by name: their source, and what each computes.

Every ``RawKernel`` dy2stat launches (fused elementwise chains, pooling, loops
lowered to one kernel) is a ``CudaKernel`` registered here: ``name`` (its
``extern "C"`` entry point, unique per source), ``source`` (self-contained CUDA
C: no includes, so NVRTC compiles it as nvcc does) and ``reference``, the same
computation written with NumPy over the kernel's own arguments (arrays written
in place, NumPy scalars), for reading and for machines without a GPU (the test
suite's CuPy double runs it). ``function(xp, kernel)`` is the compiled
``xp.RawKernel``, one per (kernel, device); ``registered()`` lists every kernel
made so far, for reading their source or compiling them all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["CudaKernel", "function", "named", "register", "registered"]


@dataclass(eq=False)
class CudaKernel:
    name: str
    source: str
    reference: Callable = field(repr=False)
    _compiled: dict = field(default_factory=dict, repr=False)  # device -> RawKernel


_BY_NAME: dict[str, CudaKernel] = {}


def register(name: str, source: str, reference: Callable) -> CudaKernel:
    """The kernel ``name`` (registered once; the same name always has the same source)."""
    kernel = _BY_NAME.get(name)
    if kernel is None:
        kernel = _BY_NAME[name] = CudaKernel(name, source, reference)
    elif kernel.source != source:
        raise ValueError(f"CUDA kernel {name}: two sources under one name")
    return kernel


def named(name: str) -> CudaKernel | None:
    return _BY_NAME.get(name)


def registered() -> list[CudaKernel]:
    return list(_BY_NAME.values())


def function(xp, kernel: CudaKernel):
    """``kernel`` compiled for the current device (on first use there)."""
    device = xp.cuda.runtime.getDevice()
    fn = kernel._compiled.get(device)
    if fn is None:
        try:
            fn = xp.RawKernel(kernel.source, kernel.name)
            fn.compile()
        except Exception as exc:
            numbered = "\n".join(f"{i + 1:4} {line}"
                                 for i, line in enumerate(kernel.source.splitlines()))
            raise RuntimeError(f"CUDA kernel {kernel.name} failed to compile: {exc}\n"
                               f"source:\n{numbered}") from exc
        kernel._compiled[device] = fn
    return fn
