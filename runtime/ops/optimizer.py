"""Parameter updates: sgd, momentum, adam, adamw, and multi_tensor_adam (many
parameters' adam or adamw updates in one op: the pass ``multi_tensor_adam``).

Each op reads a parameter, its gradient, its accumulators and the learning
rate, and returns their new values; it changes nothing in place. Eagerly the
optimizer writes the results back into the parameter tensors; in a static
program the update op's outputs name the persistable variables themselves, so
the executor stores them in its scope.

``LearningRate`` is a one-element float tensor rather than an attr, so a
scheduler changes it between runs without rebuilding the program. The
updates follow Paddle's kernels (Adam's epsilon is scaled by the bias
correction of the second moment). No op here has a gradient rule.
"""

from __future__ import annotations

import weakref

import numpy

from dy2stat.kernels import adam_loop
from dy2stat.runtime import dtypes
from dy2stat.runtime.registry import NONE, NUMBER, InputDtypeError, Meta, defop

# ---------------------------------------------------------------- inference


def _check(op, param, grad, lr, accumulators=()):
    """Grad and accumulators have the parameter's shape; the rate has one element."""
    for name, meta in (("Grad", grad), *accumulators):
        if len(meta.shape) != len(param.shape) or any(
            a != b and a != -1 and b != -1 for a, b in zip(meta.shape, param.shape)
        ):
            raise ValueError(
                f"{op}: {name} has shape {list(meta.shape)}, but Param has {list(param.shape)}"
            )
    if -1 not in lr.shape and _size(lr.shape) != 1:
        raise ValueError(f"{op}: LearningRate must hold one value, got shape {list(lr.shape)}")


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _like(*metas):
    return tuple(Meta(m.shape, m.dtype) for m in metas)


def _sgd_infer(param, grad, lr):
    _check("sgd", param, grad, lr)
    return Meta(param.shape, param.dtype)


def _momentum_infer(param, grad, velocity, lr, **_):
    _check("momentum", param, grad, lr, [("Velocity", velocity)])
    return _like(param, velocity)


def _adam_infer(op):
    def infer(param, grad, moment1, moment2, beta1_pow, beta2_pow, lr, **_):
        _check(op, param, grad, lr, [("Moment1", moment1), ("Moment2", moment2)])
        for name, meta in (("Beta1Pow", beta1_pow), ("Beta2Pow", beta2_pow)):
            if -1 not in meta.shape and _size(meta.shape) != 1:
                raise ValueError(f"{op}: {name} must hold one value, got {list(meta.shape)}")
        return _like(param, moment1, moment2, beta1_pow, beta2_pow)

    return infer


# ------------------------------------------------------------------ kernels


def _scalar(a, dtype):
    """A one-element array as a 0-d array of ``dtype`` (broadcasts like a scalar)."""
    return a.reshape(()).astype(dtype, copy=False)


def _sgd_kernel(xp, param, grad, lr):
    g = grad.astype(param.dtype, copy=False)
    return param - _scalar(lr, param.dtype) * g


def _momentum_kernel(xp, param, grad, velocity, lr, mu=0.9, use_nesterov=False):
    acc = velocity.dtype
    g = grad.astype(acc, copy=False)
    lr = _scalar(lr, acc)
    velocity_out = mu * velocity + g
    step = (g + mu * velocity_out) * lr if use_nesterov else lr * velocity_out
    param_out = (param.astype(acc, copy=False) - step).astype(param.dtype, copy=False)
    return param_out, velocity_out


def _adam_step(xp, param, grad, moment1, moment2, beta1_pow, beta2_pow, lr,
               beta1, beta2, epsilon):
    acc = moment1.dtype
    g = grad.astype(acc, copy=False)
    b1p, b2p = _scalar(beta1_pow, acc), _scalar(beta2_pow, acc)
    correction = xp.sqrt(1 - b2p)
    lr_t = _scalar(lr, acc) * correction / (1 - b1p)
    param_out, m1, m2 = _adam_update(xp, param, g, moment1, moment2, lr_t,
                                     epsilon * correction, beta1, beta2)
    return param_out, m1, m2, beta1_pow * beta1, beta2_pow * beta2


def _adam_update(xp, param, g, moment1, moment2, lr_t, eps_t, beta1, beta2):
    """``m1 = beta1 * moment1 + (1 - beta1) * g``, ``m2 = beta2 * moment2 + (1 - beta2) *
    (g * g)`` and ``param - lr_t * (m1 / (sqrt(m2) + eps_t))``: the same operations in
    the same order (so the same bits), through one temporary instead of nine, which
    keeps a large parameter's update in cache; on the host, once called often, in one
    compiled loop (``kernels.adam_loop``: the same bits again)."""
    if xp is numpy:
        done = adam_loop.adam_update(param, g, moment1, moment2, lr_t, eps_t, beta1, beta2)
        if done is not None:
            return done

    def new(a):  # an array also for 0-d operands (a ufunc gives those a scalar)
        return xp.empty(a.shape, a.dtype)

    m1 = xp.multiply(moment1, beta1, out=new(moment1))
    t = xp.multiply(g, 1 - beta1, out=new(g))
    xp.add(m1, t, out=m1)
    xp.multiply(g, g, out=t)
    xp.multiply(t, 1 - beta2, out=t)
    m2 = xp.multiply(moment2, beta2, out=new(moment2))
    xp.add(m2, t, out=m2)
    xp.sqrt(m2, out=t)
    xp.add(t, eps_t, out=t)
    xp.divide(m1, t, out=t)
    xp.multiply(t, lr_t, out=t)  # lr_t * (...): a product's bits do not depend on the order
    return (param - t).astype(param.dtype, copy=False), m1, m2


def _adam_kernel(xp, param, grad, moment1, moment2, beta1_pow, beta2_pow, lr,
                 beta1=0.9, beta2=0.999, epsilon=1e-8):
    return _adam_step(xp, param, grad, moment1, moment2, beta1_pow, beta2_pow, lr,
                      beta1, beta2, epsilon)


def _adamw_kernel(xp, param, grad, moment1, moment2, beta1_pow, beta2_pow, lr,
                  beta1=0.9, beta2=0.999, epsilon=1e-8, coeff=0.01):
    """Adam on the parameter decayed first by ``lr * coeff`` (decoupled weight decay)."""
    decayed = param * (1 - _scalar(lr, param.dtype) * coeff)
    return _adam_step(xp, decayed, grad, moment1, moment2, beta1_pow, beta2_pow, lr,
                      beta1, beta2, epsilon)


def _multi_tensor_adam_kernel(xp, params, grads, moments1, moments2, beta1_pows, beta2_pows,
                              lr, beta1=0.9, beta2=0.999, epsilon=1e-8, coeff=None):
    """``adam`` (``adamw`` when ``coeff`` is set) of every parameter at once, on one flat
    array per operand: the same elementwise operations on the same values, so the same
    bits, in a dozen NumPy calls instead of a dozen per parameter. Operands that are
    the consecutive views a previous call returned are read without a copy; each result
    is returned as views of one flat array."""
    acc = moments1[0].dtype
    sizes = [p.size for p in params]
    param = _joined(xp, params)
    if coeff is not None:  # adamw: decayed first, as _adamw_kernel does
        param = param * (1 - _scalar(lr, param.dtype) * coeff)
    g = _joined(xp, grads).astype(acc, copy=False)
    pows1, pows2 = _joined(xp, beta1_pows), _joined(xp, beta2_pows)
    b1p, b2p = _per_element(xp, pows1, sizes), _per_element(xp, pows2, sizes)
    correction = xp.sqrt(1 - b2p)
    lr_t = _scalar(lr, acc) * correction / (1 - b1p)
    param_out, m1, m2 = _adam_update(xp, param, g, _joined(xp, moments1),
                                     _joined(xp, moments2), lr_t, epsilon * correction,
                                     beta1, beta2)
    return (_split(param_out, params), _split(m1, params), _split(m2, params),
            _split(pows1 * beta1, beta1_pows), _split(pows2 * beta2, beta2_pows))


def _joined(xp, arrays):
    """``arrays`` flattened end to end: the flat array itself when they are the views
    ``_split`` made of it (the same objects, in the same order), else a copy."""
    base = arrays[0].base
    made = _SPLITS.get(id(base)) if base is not None else None
    if made is not None and made[0]() is base and len(made[1]) == len(arrays) and all(
            ref() is a for ref, a in zip(made[1], arrays)):
        return base
    return xp.concatenate([a.reshape(-1) for a in arrays])


def _per_element(xp, values, sizes):
    """One value per parameter (``values[i]``) as a scalar when they are all the same
    bits, else repeated over each parameter's elements."""
    if bool((values.view(xp.uint8).reshape(len(sizes), -1)
             == values[:1].view(xp.uint8)).all()):
        return values[0]
    return xp.repeat(values, sizes)


# id(flat array) -> (a weak reference to it, weak references to the views _split made of
# it, in order): while the flat array lives, a view among them is that exact view.
_SPLITS: dict[int, tuple] = {}


def _split(flat, like):
    """``flat`` as views shaped as the arrays ``like``, end to end (remembered, so that
    ``_joined`` of them is ``flat`` again)."""
    out, offset = [], 0
    for a in like:
        out.append(flat[offset:offset + a.size].reshape(a.shape))
        offset += a.size
    for key in [k for k, (ref, _) in list(_SPLITS.items()) if ref() is None]:
        _SPLITS.pop(key, None)  # flat arrays gone since
    _SPLITS[id(flat)] = (weakref.ref(flat), [weakref.ref(v) for v in out])
    return out


# ------------------------------------------------------------ declarations

defop(
    "sgd",
    inputs=("Param", "Grad", "LearningRate"),
    outputs=("ParamOut",),
    kernel=_sgd_kernel,
    infer=_sgd_infer,
    dtypes=dict.fromkeys(("Param", "Grad", "LearningRate"), dtypes.FLOATS),
    doc="ParamOut = Param - LearningRate * Grad",
)
defop(
    "momentum",
    inputs=("Param", "Grad", "Velocity", "LearningRate"),
    outputs=("ParamOut", "VelocityOut"),
    attrs={"mu": 0.9, "use_nesterov": False},
    kernel=_momentum_kernel,
    infer=_momentum_infer,
    dtypes=dict.fromkeys(("Param", "Grad", "Velocity", "LearningRate"), dtypes.FLOATS),
    doc="VelocityOut = mu * Velocity + Grad; ParamOut = Param - lr * VelocityOut "
        "(Nesterov: Param - lr * (Grad + mu * VelocityOut))",
)
_ADAM_INPUTS = ("Param", "Grad", "Moment1", "Moment2", "Beta1Pow", "Beta2Pow", "LearningRate")
_ADAM_SLOTS = dict(
    inputs=_ADAM_INPUTS,
    outputs=("ParamOut", "Moment1Out", "Moment2Out", "Beta1PowOut", "Beta2PowOut"),
    dtypes=dict.fromkeys(_ADAM_INPUTS, dtypes.FLOATS),
)
defop(
    "adam",
    attrs={"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8},
    kernel=_adam_kernel,
    infer=_adam_infer("adam"),
    doc="Adam with bias correction through the running powers Beta1Pow, Beta2Pow",
    **_ADAM_SLOTS,
)
defop(
    "adamw",
    attrs={"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "coeff": 0.01},
    kernel=_adamw_kernel,
    infer=_adam_infer("adamw"),
    doc="Adam after decaying Param by (1 - lr * coeff)",
    **_ADAM_SLOTS,
)


def _multi_tensor_adam_infer(params, grads, moments1, moments2, beta1_pows, beta2_pows, lr,
                             **attrs):
    # One flat array per operand: each slot's tensors share one dtype.
    for slot, metas in (("Param", params), ("Grad", grads), ("Moment1", moments1),
                        ("Moment2", moments2), ("Beta1Pow", beta1_pows),
                        ("Beta2Pow", beta2_pows)):
        found = {m.dtype for m in metas}
        if len(found) > 1:
            raise InputDtypeError(f"multi_tensor_adam: the {slot} tensors must share one "
                                  f"dtype, got {dtypes.names(found)}", slot)
    infer = _adam_infer("multi_tensor_adam")
    outs = [infer(*group, lr) for group in zip(params, grads, moments1, moments2,
                                                beta1_pows, beta2_pows)]
    return tuple([list(column) for column in zip(*outs)])


defop(
    "multi_tensor_adam",
    inputs=("Param*", "Grad*", "Moment1*", "Moment2*", "Beta1Pow*", "Beta2Pow*",
            "LearningRate"),
    outputs=("ParamOut*", "Moment1Out*", "Moment2Out*", "Beta1PowOut*", "Beta2PowOut*"),
    attrs={"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "coeff": None},
    attr_types={"coeff": NONE | NUMBER},
    kernel=_multi_tensor_adam_kernel,
    infer=_multi_tensor_adam_infer,
    eager_infer=True,
    dtypes=dict.fromkeys(("Param", "Grad", "Moment1", "Moment2", "Beta1Pow", "Beta2Pow",
                          "LearningRate"), dtypes.FLOATS),
    doc="adam of every parameter in Param (adamw with coeff), on flat arrays",
)
