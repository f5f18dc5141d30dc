"""``dy2stat demo``: the main job on built-in synthetic data.

Trains a small two-layer network with eager autograd and plain SGD on a
synthetic two-class problem and prints the loss as it falls.
"""

from __future__ import annotations

import time

import numpy as np

import dy2stat as d2s


def synthetic_data(n: int = 256, seed: int = 0):
    """Two interleaved half-moons: not linearly separable, so the hidden layer matters."""
    rng = np.random.default_rng(seed)
    angle = rng.uniform(0, np.pi, n)
    label = rng.integers(0, 2, n)
    x = np.stack([np.cos(angle) + label, np.sin(angle) * (1 - 2 * label) + 0.5 * label], 1)
    x += rng.normal(0, 0.1, x.shape)
    return x.astype("float32"), label.astype("float32")


def train(steps: int = 200, lr: float = 0.5, log=print):
    x_np, y_np = synthetic_data()
    x, y = d2s.to_tensor(x_np), d2s.to_tensor(y_np).reshape([-1, 1])
    d2s.seed(0)
    w1 = d2s.randn([2, 16]) * 0.5
    w2 = d2s.randn([16, 1]) * 0.5
    params = [w1, d2s.zeros([16]), w2, d2s.zeros([1])]
    for p in params:
        p.stop_gradient = False
    losses = []
    for step in range(steps):
        w1, b1, w2, b2 = params
        logits = d2s.tanh(x @ w1 + b1) @ w2 + b2
        prob = d2s.sigmoid(logits)
        loss = -(y * d2s.log(prob + 1e-6) + (1 - y) * d2s.log(1 - prob + 1e-6)).mean()
        loss.backward()
        with d2s.no_grad():
            for p in params:
                p.set_value(p - lr * p.grad)
                p.clear_grad()
        losses.append(float(loss))
        if step % max(steps // 5, 1) == 0 or step == steps - 1:
            log(f"step {step:4d}  loss {losses[-1]:.4f}")
    accuracy = float(((prob > 0.5).astype("float32") == y).astype("float32").mean())
    return losses, accuracy


def main(args) -> int:
    start = time.perf_counter()
    losses, accuracy = train(steps=args.steps)
    elapsed = time.perf_counter() - start
    print(f"trained {len(losses)} steps in {elapsed:.2f}s: loss {losses[0]:.4f} -> "
          f"{losses[-1]:.4f}, accuracy {accuracy:.2%}")
    return 0
