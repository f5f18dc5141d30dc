"""Every registered op on the GPU gives what it gives on the CPU, forward and gradients,
eager and converted (``gpu``-marked: a GPU, or the strict test double).

The op table of ``tests/ops`` (the CPU checks it against NumPy and finite
differences) runs again with its inputs on the GPU: the results must stay there
and equal the CPU's. On the test double any ``np.asarray`` of a device array,
anywhere an op's kernel, its gradient or a plan's generated code runs, raises,
so this is the check that nothing on the GPU path converts to the host behind
the user's back.
"""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import jit
from dy2stat.dispatch import apply
from tests.ops.test_ops import CASES, GRAD_CASES, _checked, _flat, _weights

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def gpu():
    d2s.set_device("gpu")
    yield
    d2s.set_device("cpu")


def _tensor(x, place, grad=False):
    """An input of a case on ``place``: arrays (and lists of them) become tensors."""
    if isinstance(x, list) and x and all(isinstance(a, (np.ndarray, np.generic)) for a in x):
        return [_tensor(a, place, grad) for a in x]
    if isinstance(x, (np.ndarray, np.generic)):  # (a 0-d case value may be a NumPy scalar)
        return d2s.to_tensor(np.array(x), place=place,
                             stop_gradient=not (grad and x.dtype.kind == "f"))
    return x


def _tensors(case, place, grad=False):
    return [_tensor(x, place, grad) for x in case.inputs]


def _outputs(case, place):
    return _flat(apply(case.op, *_tensors(case, place), **case.attrs))


def _assert_same(got, want, case):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.place.startswith("gpu"), f"{case.id}: a result on {g.place}"
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=max(case.rtol, 1e-6),
                                   atol=max(case.atol, 1e-7))


DETERMINISTIC = [c for c in CASES if c.check is None]


@pytest.mark.parametrize("case", DETERMINISTIC, ids=[c.id for c in DETERMINISTIC])
def test_the_op_on_the_gpu_gives_the_cpus_results(case):
    _assert_same(_outputs(case, "gpu"), _outputs(case, "cpu"), case)


RANDOM = [c for c in CASES if c.check is not None]


@pytest.mark.parametrize("case", RANDOM, ids=[c.id for c in RANDOM])
def test_the_op_on_the_gpu_passes_its_check(case):
    out = apply(case.op, *_tensors(case, "gpu"), **case.attrs)
    assert all(t.place.startswith("gpu") for t in _flat(out))
    case.check(out, case.inputs)


def _grads(case, place, weights):
    tensors = _tensors(case, place, grad=True)
    total = None
    for o, w in zip(_flat(apply(case.op, *tensors, **case.attrs)), weights):
        if w is not None:
            term = (o * d2s.to_tensor(w.astype(o.dtype), place=place)).sum()
            total = term if total is None else total + term
    checked = [tensors[i] for i in _checked(case)]
    return d2s.grad([total], checked, allow_unused=True)


@pytest.mark.parametrize("case", GRAD_CASES, ids=[c.id for c in GRAD_CASES])
def test_the_ops_gradient_on_the_gpu_gives_the_cpus(case):
    weights = _weights(_outputs(case, "cpu"))
    for g, w in zip(_grads(case, "gpu", weights), _grads(case, "cpu", weights)):
        assert (g is None) == (w is None)
        if g is not None:
            assert g.place.startswith("gpu")
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("case", DETERMINISTIC, ids=[c.id for c in DETERMINISTIC])
def test_the_op_in_a_converted_function_on_the_gpu(case):
    """The op as one op of a static program run by a GPU plan (its generated code)."""
    given = _tensors(case, "gpu")
    positions = [i for i, x in enumerate(given) if x is not case.inputs[i]]

    def fn(*tensors):
        inputs = list(case.inputs)
        for i, t in zip(positions, tensors):
            inputs[i] = t
        return apply(case.op, *inputs, **case.attrs)

    converted = jit.to_static(fn)
    want = _outputs(case, "cpu")
    tensors = [given[i] for i in positions]
    with d2s.no_grad():
        for _ in range(3):  # uncaptured, captured, replayed
            _assert_same(_flat(converted(*tensors)), want, case)
