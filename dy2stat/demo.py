"""``dy2stat demo``: the main job on built-in synthetic data.

A small classifier whose ``forward`` has Python control flow that depends on
tensor values (a data-dependent number of refinement steps) is converted with
``@to_static``, trained with Adam on a synthetic two-moons data set next to
the same model run eagerly, then saved with ``jit.save`` and loaded back.
"""

from __future__ import annotations

import os
import tempfile
import time

import numpy as np

import dy2stat as d2s
from dy2stat import nn


def synthetic_data(n: int = 256, seed: int = 0):
    """Two interleaved half-moons: not linearly separable, so the hidden layer matters."""
    rng = np.random.default_rng(seed)
    angle = rng.uniform(0, np.pi, n)
    label = rng.integers(0, 2, n)
    x = np.stack([np.cos(angle) + label, np.sin(angle) * (1 - 2 * label) + 0.5 * label], 1)
    x += rng.normal(0, 0.1, x.shape)
    return x.astype("float32"), label.astype("int64")


class Refiner(nn.Layer):
    """An MLP that refines its hidden state until it settles (at most 3 steps)."""

    def __init__(self):
        super().__init__()
        self.encode = nn.Linear(2, 16)
        self.refine = nn.Linear(16, 16)
        self.classify = nn.Linear(16, 2)

    def forward(self, x):
        h = d2s.tanh(self.encode(x))
        steps = 0
        while steps < 3:
            update = d2s.tanh(self.refine(h))
            if (update - h).abs().mean() < 0.05:  # a tensor-valued test: a cond op
                break
            h = 0.5 * (h + update)
            steps += 1
        return self.classify(h)


def train(model, x, y, steps, log=None):
    optimizer = d2s.optimizer.Adam(learning_rate=0.05, parameters=model.parameters())
    loss_fn = nn.CrossEntropyLoss()
    losses, times = [], []
    for step in range(steps):
        start = time.perf_counter()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
        losses.append(float(loss))
        times.append(time.perf_counter() - start)
        if log is not None and (step % max(steps // 5, 1) == 0 or step == steps - 1):
            log(f"step {step:4d}  loss {losses[-1]:.4f}")
    return losses, times


def _median_ms(times) -> float:
    return float(np.median(times)) * 1e3 if times else 0.0


def main(args) -> int:
    x_np, y_np = synthetic_data()
    x, y = d2s.to_tensor(x_np), d2s.to_tensor(y_np)

    d2s.seed(0)
    eager = Refiner()
    d2s.seed(0)
    converted = d2s.jit.to_static(Refiner())

    print(f"training the converted model for {args.steps} steps")
    losses, converted_times = train(converted, x, y, args.steps, log=print)
    eager_losses, eager_times = train(eager, x, y, args.steps)

    ops = [op.type for op in converted.forward.main_program.all_ops()]
    accuracy = float((d2s.argmax(converted(x), axis=1) == y).astype("float32").mean())
    gap = max(abs(a - b) for a, b in zip(losses, eager_losses))
    print(f"converted program: {len(ops)} ops, {ops.count('while')} while, "
          f"{ops.count('cond')} cond")
    print(f"trained {args.steps} steps: loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
          f"accuracy {accuracy:.1%}; "
          f"largest difference from the eager run: {gap:.2e}")
    print(f"first step (convert + trace + compile): {converted_times[0] * 1e3:.1f} ms; "
          f"then per step: converted {_median_ms(converted_times[1:]):.2f} ms, "
          f"eager {_median_ms(eager_times[1:]):.2f} ms")

    converted.eval()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "refiner")
        d2s.jit.save(converted, path, input_spec=[d2s.static.InputSpec([None, 2], "float32")])
        loaded = d2s.jit.load(path)
        same = np.allclose(loaded(x).numpy(), converted(x).numpy(), atol=1e-5)
    print(f"saved with jit.save and loaded back with jit.load: outputs match: {same}")
    return 0 if same else 1
