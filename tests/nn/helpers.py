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


def check_input_grads(fn, *arrays, eps=1e-6, rtol=1e-5, atol=1e-7, wrt=None):
    """Autograd gradients of ``sum(fn(*inputs) * W)`` with respect to the float64 inputs
    (or those whose positions are in ``wrt``) against central finite differences."""
    positions = [i for i, a in enumerate(arrays)
                 if np.asarray(a).dtype == np.float64 and (wrt is None or i in wrt)]
    tensors = [d2s.to_tensor(np.asarray(a), stop_gradient=i not in positions)
               for i, a in enumerate(arrays)]
    outs = _flatten_outputs(fn(*tensors))
    weights = [rng.standard_normal(o.shape) for o in outs]
    grads = d2s.grad(_loss(outs, weights), [tensors[i] for i in positions])
    for i, analytic in zip(positions, grads):
        base = np.array(arrays[i], dtype=np.float64)
        numeric = np.zeros_like(base)
        with d2s.no_grad():
            for idx in np.ndindex(*base.shape):
                values = []
                for sign in (1, -1):
                    moved = base.copy()
                    moved[idx] += sign * eps
                    args = list(tensors)
                    args[i] = d2s.to_tensor(moved)
                    values.append(_loss(_flatten_outputs(fn(*args)), weights).item())
                numeric[idx] = (values[0] - values[1]) / (2 * eps)
        np.testing.assert_allclose(analytic.numpy(), numeric, rtol=rtol, atol=atol,
                                   err_msg=f"input {i}")


def check_converted(fn, *arrays, input_spec=None, params=(), rtol=1e-10, atol=1e-12):
    """``fn`` converted with ``to_static`` gives what it gives eagerly: its outputs, and
    the gradients of ``sum(out * W)`` with respect to the float inputs and ``params``."""
    def run(call):
        tensors = [d2s.to_tensor(np.asarray(a),
                                 stop_gradient=np.asarray(a).dtype.kind != "f")
                   for a in arrays]
        outs = _flatten_outputs(call(*tensors))
        wrt = [t for t in tensors if not t.stop_gradient] + list(params)
        loss = _loss(outs, weights(outs))
        grads = d2s.grad(loss, wrt, allow_unused=True) if wrt else []
        return [o.numpy() for o in outs], [None if g is None else g.numpy() for g in grads]

    cache = {}

    def weights(outs):
        if "w" not in cache:
            cache["w"] = [rng.standard_normal(o.shape) for o in outs]
        return cache["w"]

    eager_outs, eager_grads = run(fn)
    converted = d2s.jit.to_static(_positional(fn, len(arrays)), input_spec=input_spec)
    outs, grads = run(converted)
    assert len(outs) == len(eager_outs)
    for i, (a, b) in enumerate(zip(outs, eager_outs)):
        assert a.shape == b.shape, (i, a.shape, b.shape)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"output {i}")
    for i, (a, b) in enumerate(zip(grads, eager_grads)):
        assert (a is None) == (b is None), f"gradient {i}"
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"gradient {i}")
    return converted


def _positional(fn, n: int):
    """A function of ``n`` named arguments calling ``fn`` (an input_spec binds to named
    arguments, not to ``*args``)."""
    if n == 1:
        def call(a):
            return fn(a)
    elif n == 2:
        def call(a, b):
            return fn(a, b)
    elif n == 3:
        def call(a, b, c):
            return fn(a, b, c)
    elif n == 4:
        def call(a, b, c, d):
            return fn(a, b, c, d)
    else:
        raise ValueError(f"check_converted: up to 4 inputs, got {n}")
    return call
