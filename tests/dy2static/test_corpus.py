"""The corpus, converted: the same results as the original eagerly, and static programs
that hold the expected cond/while ops and compute the same results when run."""

from __future__ import annotations

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import jit
from dy2stat.dy2static.convert import convert_to_static
from dy2stat.static import framework, nest
from dy2stat.static.variable import Variable
from dy2stat.tensor import Tensor
from tests.dy2static.corpus import CASES

STATIC = [c for c in CASES if c.static]

# print() of a static tensor warns that the runtime has no print op (yet).
pytestmark = pytest.mark.filterwarnings("ignore:print\\(\\) of a static tensor")


def eager(args: tuple) -> list:
    return [d2s.to_tensor(a) if isinstance(a, np.ndarray) else a for a in args]


def as_numpy(value):
    if isinstance(value, Tensor):
        return value.numpy()
    if isinstance(value, (list, tuple)):
        return [as_numpy(v) for v in value]
    if isinstance(value, dict):
        return {k: as_numpy(v) for k, v in value.items()}
    return value


def assert_same(actual, expected, rtol: float) -> None:
    if isinstance(expected, (list, tuple)):
        assert isinstance(actual, (list, tuple)) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_same(a, e, rtol)
    elif isinstance(expected, dict):
        assert sorted(actual) == sorted(expected)
        for k in expected:
            assert_same(actual[k], expected[k], rtol)
    elif isinstance(expected, (np.ndarray, np.generic, int, float, bool)) \
            and not isinstance(expected, str):
        np.testing.assert_allclose(np.asarray(actual, dtype=np.float64),
                                   np.asarray(expected, dtype=np.float64), rtol=rtol, atol=1e-6)
    else:
        assert actual == expected


def trace(case, args: tuple):
    """The converted function traced into a program with `static.data` for the arrays."""
    program = d2s.static.Program()
    shapes = list(case.shapes or [])
    with framework.program_guard(program, d2s.static.Program()), framework.static_guard(True):
        static_args = []
        for i, a in enumerate(args):
            if isinstance(a, np.ndarray):
                shape = shapes.pop(0) if shapes else list(a.shape)
                static_args.append(d2s.static.data(f"arg{i}", shape, str(a.dtype)))
            else:
                static_args.append(a)
        outputs = convert_to_static(case.fn)(*static_args)
    return program, outputs


def signature_groups(case) -> list[list[tuple]]:
    """The input sets that one traced program serves (same shapes, same Python values)."""
    groups: dict = {}
    for args in case.inputs:
        key = repr([a.shape if isinstance(a, np.ndarray) else a for a in args])
        groups.setdefault(key, []).append(args)
    return list(groups.values())


def run(program, outputs, args: tuple):
    feed = {f"arg{i}": a for i, a in enumerate(args) if isinstance(a, np.ndarray)}
    leaves = nest.flatten(outputs)
    fetch = [v for v in leaves if isinstance(v, Variable)]
    results = iter(d2s.static.Executor().run(program, feed=feed, fetch_list=fetch))
    values = [next(results) if isinstance(v, Variable) else v for v in leaves]
    return nest.pack_as(outputs, values)


def test_corpus_is_large_enough():
    assert len(CASES) >= 120
    assert len({c.name for c in CASES}) == len(CASES)
    assert sum(1 for c in CASES if "cond" in c.ops) >= 40
    assert sum(1 for c in CASES if "while" in c.ops) >= 30


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_converted_function_runs_eagerly_like_the_original(case):
    converted = convert_to_static(case.fn)
    for args in case.inputs:
        expected = as_numpy(case.fn(*eager(args)))
        actual = as_numpy(converted(*eager(args)))
        assert_same(actual, expected, case.rtol)


@pytest.mark.parametrize("case", STATIC, ids=lambda c: c.name)
def test_static_program_holds_the_control_flow_ops(case):
    for group in signature_groups(case):
        program, _ = trace(case, group[0])
        types = {op.type for op in program.all_ops()}
        assert case.ops <= types, f"{case.name}: ops {sorted(types)}"


@pytest.mark.parametrize("case", STATIC, ids=lambda c: c.name)
def test_static_program_computes_what_the_original_does(case):
    for group in signature_groups(case):
        program, outputs = trace(case, group[0])
        for args in group:
            expected = as_numpy(case.fn(*eager(args)))
            assert_same(run(program, outputs, args), expected, case.rtol)


@pytest.mark.parametrize("case", STATIC, ids=lambda c: c.name)
def test_to_static_runs_the_corpus_like_the_original(case):
    static_fn = jit.to_static(case.fn)
    for args in case.inputs:
        expected = as_numpy(case.fn(*eager(args)))
        assert_same(as_numpy(static_fn(*eager(args))), expected, case.rtol)


def test_to_static_disabled_runs_the_corpus_eagerly():
    jit.enable_to_static(False)
    try:
        for case in CASES:
            static_fn = jit.to_static(case.fn)
            for args in case.inputs:
                expected = as_numpy(case.fn(*eager(args)))
                assert_same(as_numpy(static_fn(*eager(args))), expected, case.rtol)
    finally:
        jit.enable_to_static(True)
