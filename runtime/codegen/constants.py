"""Plan constants: what an op computes from constants alone, computed once per plan.

A value is a constant when ``passes.constant_folding.evaluate`` can compute
it while the plan compiles: the outputs of input-less creation ops
(``full``, ``arange``, ...) and of ops whose inputs are all constants (not
random, no sub-block, small, writing no persistable). Its array is bound in
the plan's namespace and read from there (``c4``) by every call and every
loop iteration: never rebuilt. A sub-block reads the constants of the
blocks around it the same way, without them being passed in.

On another array module than NumPy only input-less ops count (their NumPy
values are moved to the device once): a computation's bits there are the
device's.
"""

from __future__ import annotations

import numpy

from dy2stat.runtime.passes.constant_folding import evaluate

__all__ = ["evaluate_step"]


def evaluate_step(xp, op, var_of, value_of) -> dict | None:
    """name -> array (of ``xp``) of ``op``'s outputs when they are constants, else None."""
    if xp is not numpy and op.input_names():
        return None
    values = evaluate(op, var_of, value_of)
    if values is None or xp is numpy:
        return values
    return {n: xp.asarray(v) for n, v in values.items()}
