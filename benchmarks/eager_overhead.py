"""Eager framework overhead against raw NumPy, measured in one run.

    python benchmarks/eager_overhead.py

Prints the per-op time of ``y = x + 1`` on a (1,)-shaped float32 tensor and
the forward time of a 42-layer, 32-wide MLP at batch 1, eager with and
without gradient recording, beside raw NumPy, and the ratios.
Targets: eager op (no grad) <= 2.5x NumPy; eager MLP <= 2.5x.
"""

from __future__ import annotations

import timeit

import numpy as np

import dy2stat as d2s

LAYERS, WIDTH = 42, 32


def best(fn, number):
    """Best of five repeats, in microseconds per call."""
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def make_mlp(seed=0):
    rng = np.random.default_rng(seed)
    weights = [(rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype("float32")
               for _ in range(LAYERS)]
    biases = [np.full(WIDTH, 0.01, "float32") for _ in range(LAYERS)]
    return weights, biases


def numpy_mlp(h, weights, biases):
    for w, b in zip(weights, biases):
        h = np.maximum(h @ w + b, 0)
    return h


def eager_mlp(h, weights, biases):
    for w, b in zip(weights, biases):
        h = (h @ w + b).relu()
    return h


def main():
    x_np = np.ones(1, "float32")
    x = d2s.to_tensor(x_np)
    n = 200_000
    op_numpy = best(lambda: x_np + 1, n)
    with d2s.no_grad():
        op_eager = best(lambda: x + 1, n)
    x_grad = d2s.to_tensor(x_np, stop_gradient=False)
    op_record = best(lambda: x_grad + 1, n // 4)

    weights, biases = make_mlp()
    h_np = np.ones((1, WIDTH), "float32")
    w_t = [d2s.to_tensor(w) for w in weights]
    b_t = [d2s.to_tensor(b) for b in biases]
    h = d2s.to_tensor(h_np)
    np.testing.assert_allclose(eager_mlp(h, w_t, b_t).numpy(), numpy_mlp(h_np, weights, biases),
                               rtol=1e-5)
    m = 2000
    mlp_numpy = best(lambda: numpy_mlp(h_np, weights, biases), m)
    with d2s.no_grad():
        mlp_eager = best(lambda: eager_mlp(h, w_t, b_t), m)
    for t in w_t + b_t:
        t.stop_gradient = False
    mlp_record = best(lambda: eager_mlp(h, w_t, b_t), m // 4)

    rows = [
        ("y = x + 1, (1,) float32", op_numpy, op_eager, op_record),
        (f"MLP {LAYERS}x{WIDTH} forward, batch 1", mlp_numpy, mlp_eager, mlp_record),
    ]
    print(f"{'case':34s} {'numpy us':>10s} {'eager us':>10s} {'ratio':>7s} "
          f"{'record us':>10s} {'ratio':>7s}")
    for name, base, eager, record in rows:
        print(f"{name:34s} {base:10.2f} {eager:10.2f} {eager / base:6.2f}x "
              f"{record:10.2f} {record / base:6.2f}x")
    print("targets: eager (no grad) <= 2.50x numpy for both rows")


if __name__ == "__main__":
    main()
