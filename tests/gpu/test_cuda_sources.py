"""Every CUDA kernel dy2stat generates compiles for sm_90 (nvcc), on a machine without a
GPU: the pooling kernels, and the loop kernels of a set of converted loops (their
programs lowered by the CUDA target as a GPU plan would). The fused elementwise
kernels have their own test (tests/kernels/test_fusion_codegen.py)."""

import shutil
import subprocess

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import jit
from dy2stat.kernels import cuda_kernels, pool_cuda
from dy2stat.runtime import executor, lower, passes
from tests.gpu.test_gpu_executor import LOOPS

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


def loop_kernels() -> list:
    """The loop kernels of LOOPS' programs, lowered for the GPU (compiled here, never run)."""
    kernels = []
    for fn, _ in LOOPS.values():
        converted = jit.to_static(fn)
        with d2s.no_grad():
            converted(d2s.to_tensor(np.linspace(1, 2, 16).astype("float32")))
        runner = converted.concrete_program.runner
        program, feeds, fetches = runner._optimized, runner.feed_names, runner.fetch_names
        lowering = lower.cuda.CudaLowering(np)
        program = executor._fused(passes.optimize(program, fetches), fetches, lowering)
        executor._generate(program, list(feeds), list(fetches), np, False, lowering)
        assert lowering.kernels, f"{fn.__name__}: its loop did not lower"
        kernels += lowering.kernels
    return kernels


def pool_kernels() -> list:
    return [pool_cuda.kernel_for(kind, dtype)
            for kind in ("max_forward", "max_backward", "avg_forward", "avg_backward")
            for dtype in ("float32", "float64")]


def test_kernels_are_registered_under_their_names():
    for kernel in pool_kernels() + loop_kernels():
        assert cuda_kernels.named(kernel.name) is kernel
        assert f'extern "C" __global__ void {kernel.name}(' in kernel.source
        assert "#include" not in kernel.source  # NVRTC compiles it as nvcc does


@needs_nvcc
def test_every_pooling_and_loop_kernel_compiles_for_sm90(tmp_path):
    kernels = {k.name: k for k in pool_kernels() + loop_kernels()}
    unit = "\n".join(f"namespace k{i} {{\n{k.source}\n}}" for i, k in enumerate(kernels.values()))
    (tmp_path / "all.cu").write_text(unit)
    result = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-o", str(tmp_path / "all.cubin"),
                             str(tmp_path / "all.cu")], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
