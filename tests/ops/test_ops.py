"""Every registered op: forward vs NumPy, gradients vs finite differences."""

import importlib
import pkgutil

import numpy as np
import pytest

import dy2stat as d2s
import tests.ops as cases_package
from dy2stat.dispatch import apply
from dy2stat.runtime.registry import OPS

CASES = []
for _info in pkgutil.iter_modules(cases_package.__path__):
    if _info.name.startswith("cases_"):
        CASES += importlib.import_module(f"tests.ops.{_info.name}").CASES


def _tensors(case, stop_gradient=True):
    return [
        d2s.Tensor(np.array(x), stop_gradient=stop_gradient or not _is_float(x))
        if isinstance(x, np.ndarray) else x
        for x in case.inputs
    ]


def _is_float(x):
    return isinstance(x, np.ndarray) and x.dtype.kind == "f"


def _flat(out):
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _flat(o)]
    return [out]


def _checked(case):
    if case.grad_inputs is not None:
        return list(case.grad_inputs)
    return [i for i, x in enumerate(case.inputs) if _is_float(x)]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_forward_matches_numpy(case):
    out = apply(case.op, *_tensors(case), **case.attrs)
    if case.check is not None:
        case.check(out, case.inputs)
        return
    expected = case.ref(*case.inputs, **case.attrs)
    got, want = _flat(out), _flat(expected)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == list(w.shape)
        np.testing.assert_allclose(g.numpy(), w, rtol=case.rtol, atol=case.atol)


def _weights(outs, seed=1):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(o.shape) if o.dtype.kind == "f" else None for o in outs]


def _loss(case, tensors, weights):
    outs = _flat(apply(case.op, *tensors, **case.attrs))
    total = None
    for o, w in zip(outs, weights):
        if w is None:
            continue
        term = (o * d2s.Tensor(w.astype(o.dtype))).sum()
        total = term if total is None else total + term
    return total


def _numeric_grad(f, inputs, index, eps=1e-6):
    x = inputs[index]
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        saved = x[i]
        x[i] = saved + eps
        plus = f()
        x[i] = saved - eps
        minus = f()
        x[i] = saved
        grad[i] = (plus - minus) / (2 * eps)
    return grad


GRAD_CASES = [c for c in CASES if c.grad and OPS[c.op].grad is not None]


@pytest.mark.parametrize("case", GRAD_CASES, ids=[c.id for c in GRAD_CASES])
def test_grad_matches_finite_differences(case):
    inputs = [np.array(x, dtype=np.float64) if _is_float(x) else x for x in case.inputs]
    case_inputs = list(inputs)
    weights = _weights(_flat(apply(case.op, *_tensors(case), **case.attrs)))
    tensors = [d2s.Tensor(x, stop_gradient=not _is_float(x)) if isinstance(x, np.ndarray) else x
               for x in case_inputs]
    checked = _checked(case)
    loss = _loss(case, tensors, weights)
    grads = d2s.grad([loss], [tensors[i] for i in checked], allow_unused=True)

    def f():
        with d2s.no_grad():
            ts = [d2s.Tensor(x) if isinstance(x, np.ndarray) else x for x in case_inputs]
            return float(_loss(case, ts, weights).numpy())

    for i, g in zip(checked, grads):
        numeric = _numeric_grad(f, case_inputs, i)
        analytic = np.zeros_like(numeric) if g is None else g.numpy()
        np.testing.assert_allclose(analytic, numeric, rtol=1e-4, atol=1e-6,
                                   err_msg=f"d/d input {i}")


DOUBLE_CASES = [c for c in GRAD_CASES if c.double]


@pytest.mark.parametrize("case", DOUBLE_CASES, ids=[c.id for c in DOUBLE_CASES])
def test_double_grad_matches_finite_differences(case):
    case_inputs = [np.array(x, dtype=np.float64) if _is_float(x) else x for x in case.inputs]
    weights = _weights(_flat(apply(case.op, *_tensors(case), **case.attrs)))
    checked = _checked(case)
    rng = np.random.default_rng(2)
    directions = [rng.standard_normal(case_inputs[i].shape) for i in checked]

    def first_grad_loss(ts, create_graph):
        loss = _loss(case, ts, weights)
        grads = d2s.grad([loss], [ts[i] for i in checked], create_graph=create_graph,
                         allow_unused=True)
        total = None
        for g, v in zip(grads, directions):
            if g is None:
                continue
            term = (g * d2s.Tensor(v)).sum()
            total = term if total is None else total + term
        return total

    def make():
        return [d2s.Tensor(x, stop_gradient=not _is_float(x)) if isinstance(x, np.ndarray)
                else x for x in case_inputs]

    tensors = make()
    second = first_grad_loss(tensors, create_graph=True)
    if second is None or second.stop_gradient:
        pytest.skip("first gradient is constant in the inputs")
    grads = d2s.grad([second], [tensors[i] for i in checked], allow_unused=True)

    def f():
        return float(first_grad_loss(make(), create_graph=False).numpy())

    for i, g in zip(checked, grads):
        numeric = _numeric_grad(f, case_inputs, i)
        analytic = np.zeros_like(numeric) if g is None else g.numpy()
        np.testing.assert_allclose(analytic, numeric, rtol=1e-4, atol=1e-5,
                                   err_msg=f"d2/d input {i}")


def test_every_op_has_a_case():
    covered = {c.op for c in CASES}
    missing = sorted(set(OPS) - covered - EXEMPT)
    assert not missing, f"ops without a test case: {missing}"


# Ops exercised elsewhere (control flow, random draws checked by statistics; py_layer,
# whose gradient is a user's backward: tests/eager/test_pylayer.py).
EXEMPT = {"cond", "while", "while_grad", "py_layer"}
