"""The first seed's forward pre-hook: a hook that doubles a Layer's input, eager and converted.

    python examples/forward_pre_hook.py [--quick]

`register_forward_pre_hook(hook)` runs `hook(layer, inputs)` before `forward`;
a non-None result replaces the inputs. With the hook, linear(x) equals
linear(2 * x) without it. The same holds when the layer is converted with
`to_static` (the hook runs around the static program) and when it is a
sublayer of a converted model (the hook is traced into the program).
(The seed writes `input * 2`; `inputs` is a tuple, so the hook doubles its item.)
"""

from __future__ import annotations

import argparse

import numpy as np

import dy2stat as d2s
from dy2stat import nn
from dy2stat.jit import to_static


def forward_pre_hook(layer, inputs):
    """Change the layer's input: input = input * 2."""
    return (inputs[0] * 2,)


class Model(nn.Layer):
    """A model whose sublayer carries the hook; its forward is converted."""

    def __init__(self, linear):
        super().__init__()
        self.linear = linear

    @to_static
    def forward(self, x):
        y = self.linear(x)
        if y.sum() > 0:  # tensor control flow, to make conversion matter
            y = y * 1.0
        return y


def run(name: str, call, linear, value0) -> bool:
    handle = linear.register_forward_pre_hook(forward_pre_hook)
    out0 = call(d2s.to_tensor(value0))  # hooked: input doubled
    handle.remove()
    out1 = call(d2s.to_tensor(value0 * 2))  # no hook: input doubled by hand
    out2 = call(d2s.to_tensor(value0))  # no hook: the input as it is
    same = np.allclose(out0.numpy(), out1.numpy(), rtol=1e-5, atol=1e-5)
    changed = not np.allclose(out0.numpy(), out2.numpy())
    print(f"{name:>28}: hooked == doubled input: {same}; removed hook no longer applies: "
          f"{changed}")
    return same and changed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="accepted for symmetry; fast anyway")
    parser.parse_args(argv)
    value0 = np.arange(26).reshape(2, 13).astype("float32") / 26

    d2s.seed(0)
    linear = nn.Linear(13, 5)
    ok = run("eager Linear", linear, linear, value0)

    d2s.seed(0)
    converted = to_static(nn.Linear(13, 5))
    ok &= run("to_static(Linear)", converted, converted, value0)

    d2s.seed(0)
    inner = nn.Linear(13, 5)
    model = Model(inner)
    ok &= run("hooked sublayer, converted", model, inner, value0)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
