"""An RNN whose number of steps depends on the data, converted with `to_static` and trained.

    python examples/rnn_dynamic_loop.py [--steps 60] [--quick]

Each batch holds sequences padded to 12 steps; the batch's real length is a
tensor. The forward loops `while t < length`, a loop on a tensor value: the
converter turns it into a `while` op, so one traced program serves every
length, and gradients flow back through the loop to the weights. The task:
classify whether the sum of the real steps' first feature is positive.
"""

from __future__ import annotations

import argparse

import numpy as np

import dy2stat as d2s
from dy2stat import nn
from dy2stat.jit import to_static
from dy2stat.static import InputSpec

MAX_LEN, FEATURES, HIDDEN = 12, 4, 16


class DynamicRNN(nn.Layer):
    def __init__(self):
        super().__init__()
        self.input_proj = nn.Linear(FEATURES, HIDDEN)
        self.hidden_proj = nn.Linear(HIDDEN, HIDDEN)
        self.head = nn.Linear(HIDDEN, 2)

    def forward(self, x, length):
        # x: [batch, MAX_LEN, FEATURES]; length: int64 [] — how many steps to run.
        h = d2s.zeros_like(self.hidden_proj.bias) * x[:, :1, 0]  # [batch, HIDDEN] zeros
        t = d2s.zeros([], dtype="int64")
        while t < length:  # data-dependent: becomes a `while` op
            step = d2s.gather(x, t, axis=1)
            h = d2s.tanh(self.input_proj(step) + self.hidden_proj(h))
            t = t + 1
        return self.head(h)


def batches(n: int, batch: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        length = int(rng.integers(3, MAX_LEN + 1))
        x = rng.standard_normal((batch, MAX_LEN, FEATURES)).astype("float32")
        x[:, length:] = 0  # padding
        label = (x[:, :length, 0].sum(axis=1) > 0).astype("int64").reshape(-1, 1)
        yield x, np.array(length, dtype="int64"), label


def gradients(model, x, length, label) -> list[np.ndarray]:
    loss = nn.functional.cross_entropy(model(x, length), label)
    loss.backward()
    grads = [p.grad.numpy().copy() for p in model.parameters()]
    for p in model.parameters():
        p.clear_grad()
    return grads


def check_gradients(model) -> None:
    """The converted loop's gradients equal the eager loop's (same weights, same batch)."""
    x, length, label = (d2s.to_tensor(a) for a in next(batches(1, 8, seed=1)))
    static = gradients(model, x, length, label)
    d2s.jit.enable_to_static(False)  # the same model, run eagerly (Python while loop)
    try:
        eager = gradients(model, x, length, label)
    finally:
        d2s.jit.enable_to_static(True)
    worst = max(float(np.abs(s - e).max()) for s, e in zip(static, eager))
    print(f"gradients through the while op match eager: max difference {worst:.2e}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150, help="training steps")
    parser.add_argument("--quick", action="store_true", help="a few steps, for the tests")
    args = parser.parse_args(argv)
    steps = 8 if args.quick else args.steps

    d2s.seed(0)
    model = to_static(DynamicRNN(), input_spec=[
        InputSpec([-1, MAX_LEN, FEATURES], "float32", name="x"),
        InputSpec([], "int64", name="length")])
    check_gradients(model)
    optimizer = d2s.optimizer.Adam(learning_rate=0.01, parameters=model.parameters())
    losses, lengths = [], set()
    for step, (x, length, label) in enumerate(batches(steps, 32)):
        logits = model(d2s.to_tensor(x), d2s.to_tensor(length))
        loss = nn.functional.cross_entropy(logits, d2s.to_tensor(label))
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
        losses.append(float(loss))
        lengths.add(int(length))
        if step % max(steps // 10, 1) == 0 or step == steps - 1:
            print(f"step {step:3d}: length {int(length):2d}  loss {losses[-1]:.4f}")

    ops = sorted({op.type for op in model.forward.main_program.all_ops()})
    traces = len(model.forward.program_cache)
    print(f"one program for {len(lengths)} different lengths ({traces} trace); ops: "
          f"{', '.join(ops)}")
    first, last = np.mean(losses[:3]), np.mean(losses[-3:])
    print(f"loss {first:.4f} -> {last:.4f}")
    return 0 if "while" in ops and (args.quick or last < first) else 1


if __name__ == "__main__":
    raise SystemExit(main())
