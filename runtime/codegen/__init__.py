"""The executor's code generator: each block of a plan becomes one Python function.

- ``block``: ``Module`` (one plan's source and namespace) and ``Function``
  (one block analysed and emitted);
- ``calls``: how one op becomes one call (direct array-module calls, bound
  kernels);
- ``control_flow``: ``cond``/``while``/``while_grad`` as Python control flow;
- ``buffers``: which op may write its result into an input (buffer reuse);
- ``worker``: overlap, heavy ops run on a worker thread.
"""

from dy2stat.runtime.codegen.block import Function, Module
from dy2stat.runtime.codegen.worker import (
    blas_on_one_thread,
    look_up_blas_soon,
    on_worker,
    overlap,
    run_here,
    run_on_worker,
    sharing_cores,
)

__all__ = ["Function", "Module", "blas_on_one_thread", "look_up_blas_soon", "on_worker",
           "overlap", "run_here", "run_on_worker", "sharing_cores"]
