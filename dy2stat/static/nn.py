"""``static.nn``: layers that create parameters in static mode, and control flow."""

from __future__ import annotations

from dy2stat import ops
from dy2stat.static import framework
from dy2stat.static.control_flow import cond, while_loop
from dy2stat.static.variable import Variable

__all__ = ["fc", "cond", "while_loop"]

_ACTIVATIONS = {"relu": ops.relu, "sigmoid": ops.sigmoid, "tanh": ops.tanh,
                "softmax": ops.softmax}


def fc(x, size: int, activation: str | None = None, name: str | None = None):
    """A fully connected layer: ``activation(x @ w + b)`` with new parameters w, b.

    ``x`` is flattened to 2-D from axis 1 (Paddle's ``num_flatten_dims=1``).
    """
    if not isinstance(x, Variable):
        raise TypeError("static.nn.fc builds a static program: call it in static mode")
    if x.ndim > 2:
        x = ops.flatten(x, start_axis=1)
    in_features = x.shape[-1]
    if in_features < 0:
        raise ValueError(f"static.nn.fc: the last dim of {x.name} must be known, got {x.shape}")
    prefix = name or framework.default_main_program().unique_name("fc")
    w = framework.create_parameter([in_features, size], x.dtype, name=f"{prefix}.w")
    b = framework.create_parameter([size], x.dtype, name=f"{prefix}.b",
                                   initializer=("full", {"value": 0.0}))
    main = framework.default_main_program().global_block()
    out = ops.add(ops.matmul(x, Variable(main, w.name)), Variable(main, b.name))
    if activation is None:
        return out
    if activation not in _ACTIVATIONS:
        raise ValueError(f"static.nn.fc: unknown activation {activation!r}")
    return _ACTIVATIONS[activation](out)
