"""NumPy references for the update ops (Paddle's formulas), in float64."""

import numpy as np


def _scalar(a):
    return np.reshape(a, ())


def sgd(p, g, lr):
    return p - _scalar(lr) * g


def momentum(p, g, v, lr, mu=0.9, use_nesterov=False):
    lr = _scalar(lr)
    v = mu * v + g
    p = p - (g + mu * v) * lr if use_nesterov else p - lr * v
    return p, v


def adam(p, g, m1, m2, b1p, b2p, lr, beta1=0.9, beta2=0.999, epsilon=1e-8):
    lr, b1, b2 = _scalar(lr), _scalar(b1p), _scalar(b2p)
    m1 = beta1 * m1 + (1 - beta1) * g
    m2 = beta2 * m2 + (1 - beta2) * g * g
    lr_t = lr * np.sqrt(1 - b2) / (1 - b1)
    p = p - lr_t * (m1 / (np.sqrt(m2) + epsilon * np.sqrt(1 - b2)))
    return p, m1, m2, b1p * beta1, b2p * beta2


def adamw(p, g, m1, m2, b1p, b2p, lr, beta1=0.9, beta2=0.999, epsilon=1e-8, coeff=0.01):
    p = p * (1 - _scalar(lr) * coeff)
    return adam(p, g, m1, m2, b1p, b2p, lr, beta1, beta2, epsilon)


def multi_tensor_adam(params, grads, m1s, m2s, b1ps, b2ps, lr, coeff=None, **attrs):
    """``adam`` (``adamw`` with ``coeff``) of each parameter, as lists per output."""
    outs = [adam(*group, lr, **attrs) if coeff is None else adamw(*group, lr, coeff=coeff,
                                                                     **attrs)
            for group in zip(params, grads, m1s, m2s, b1ps, b2ps)]
    return tuple(list(column) for column in zip(*outs))


class Trainer:
    """Runs an optimizer's reference updates over steps, holding its state."""

    def __init__(self, kind, p, lr, weight_decay=0.0, **attrs):
        self.kind, self.p, self.lr, self.wd, self.attrs = kind, p.copy(), lr, weight_decay, attrs
        zeros = np.zeros_like(p)
        self.state = {
            "sgd": [],
            "momentum": [zeros],
            "adam": [zeros, zeros, np.array([attrs.get("beta1", 0.9)]),
                     np.array([attrs.get("beta2", 0.999)])],
        }[kind if kind != "adamw" else "adam"]

    def step(self, g, lr=None):
        lr = self.lr if lr is None else lr
        if self.wd and self.kind != "adamw":
            g = g + self.wd * self.p
        attrs = dict(self.attrs)
        if self.kind == "adamw":
            attrs["coeff"] = self.wd
        out = globals()[self.kind](self.p, g, *self.state, lr, **attrs)
        if isinstance(out, tuple):
            self.p, self.state = out[0], list(out[1:])
        else:
            self.p = out
        return self.p
