"""Shared checks for layer tests: NumPy references, float64 layers and finite differences."""

from __future__ import annotations

import math

import numpy as np

import dy2stat as d2s
from dy2stat.nn import Layer

rng = np.random.default_rng(0)


def randn(*shape, dtype="float64"):
    return rng.standard_normal(shape).astype(dtype)


def tensor(array, stop_gradient=True):
    return d2s.to_tensor(np.asarray(array), stop_gradient=stop_gradient)


def double(layer: Layer) -> Layer:
    """The layer with every float parameter and buffer cast to float64 in place."""
    return layer.to(dtype="float64")


def params_np(layer: Layer) -> dict:
    """Dotted name -> NumPy copy of each parameter (for NumPy references)."""
    return {name: p.numpy().copy() for name, p in layer.named_parameters()}


def erf(x):
    return np.vectorize(math.erf)(x)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _loss(out, weights):
    """A scalar that depends on every output element with its own weight."""
    outs = out if isinstance(out, (list, tuple)) else [out]
    return sum(d2s.sum(o * d2s.to_tensor(w)) for o, w in zip(outs, weights))


def _flatten_outputs(out):
    if isinstance(out, (list, tuple)):
        return [leaf for item in out for leaf in _flatten_outputs(item)]
    return [out]


def check_param_grads(layer: Layer, *inputs, eps=1e-6, rtol=1e-5, atol=1e-7, names=None):
    """Autograd gradients of every parameter (or ``names``) against central finite
    differences of ``sum(output * W)`` for a fixed random W, in float64."""
    double(layer)
    outs = _flatten_outputs(layer(*inputs))
    weights = [rng.standard_normal(o.shape) for o in outs]
    layer.clear_gradients()
    _loss(outs, weights).backward()
    checked = 0
    for name, param in layer.named_parameters():
        if names is not None and name not in names:
            continue
        assert param.dtype == np.float64, name
        assert param.grad is not None, f"{name} got no gradient"
        analytic = param.grad.numpy()
        numeric = np.zeros_like(analytic)
        data = param._data
        with d2s.no_grad():
            for idx in np.ndindex(*data.shape):
                original = data[idx]
                data[idx] = original + eps
                plus = _loss(_flatten_outputs(layer(*inputs)), weights).item()
                data[idx] = original - eps
                minus = _loss(_flatten_outputs(layer(*inputs)), weights).item()
                data[idx] = original
                numeric[idx] = (plus - minus) / (2 * eps)
        np.testing.assert_allclose(analytic, numeric, rtol=rtol, atol=atol, err_msg=name)
        checked += 1
    assert checked, "no parameter was checked"
    return checked
