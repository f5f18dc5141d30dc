"""Parameter updates: sgd, momentum, adam, adamw.

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

from dy2stat.runtime import dtypes
from dy2stat.runtime.registry import Meta, defop

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
    m1 = beta1 * moment1 + (1 - beta1) * g
    m2 = (beta2 * moment2 + (1 - beta2) * (g * g)).astype(moment2.dtype, copy=False)
    correction = xp.sqrt(1 - b2p)
    lr_t = _scalar(lr, acc) * correction / (1 - b1p)
    param_out = param - lr_t * (m1 / (xp.sqrt(m2) + epsilon * correction))
    return (param_out.astype(param.dtype, copy=False), m1, m2,
            beta1_pow * beta1, beta2_pow * beta2)


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
