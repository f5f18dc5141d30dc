"""The first seed's double grad: differentiate a gradient (`create_graph=True`).

    python examples/double_grad.py [--quick]

Part 1 is the seed's example: y = x * x, dx = dy/dx = 2x computed with
`d2s.grad(..., create_graph=True)`, so that z = y + dx can be differentiated
again: dz/dx = 2x + 2. Part 2 uses the same machinery the way GANs do, as a
gradient penalty ||d out / d input||^2 added to a loss and minimized.
"""

from __future__ import annotations

import argparse

import numpy as np

import dy2stat as d2s
from dy2stat import nn


def seed_example() -> float:
    x = d2s.ones(shape=[1], dtype="float32")
    x.stop_gradient = False
    y = x * x
    # Since y = x * x, dx = 2 * x; create_graph keeps dx differentiable.
    dx = d2s.grad(outputs=[y], inputs=[x], create_graph=True, retain_graph=True)[0]
    z = y + dx
    z.backward()  # the double grad: dz/dx = 2x + 2
    print(f"x = {x.item()}, dy/dx = {dx.item()}, dz/dx = {x.grad.item()}  (expected 4.0)")
    return x.grad.item()


def gradient_penalty(steps: int) -> list[float]:
    """Train a small critic so that its input gradients have norm 1 (WGAN-GP style)."""
    d2s.seed(0)
    critic = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))
    optimizer = d2s.optimizer.Adam(learning_rate=0.01, parameters=critic.parameters())
    rng = np.random.default_rng(0)
    penalties = []
    for step in range(steps):
        points = d2s.to_tensor(rng.standard_normal((32, 2)).astype("float32"),
                               stop_gradient=False)
        out = critic(points)
        (grads,) = d2s.grad([out.sum()], [points], create_graph=True)
        penalty = ((grads.pow(2).sum(axis=1).sqrt() - 1) ** 2).mean()
        penalty.backward()  # differentiates through the gradient: second order
        optimizer.step()
        optimizer.clear_grad()
        penalties.append(float(penalty))
        if step % max(steps // 5, 1) == 0 or step == steps - 1:
            print(f"step {step:3d}: gradient penalty {penalties[-1]:.5f}")
    return penalties


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="a few steps, for the tests")
    args = parser.parse_args(argv)
    ok = abs(seed_example() - 4.0) < 1e-6
    penalties = gradient_penalty(10 if args.quick else args.steps)
    print(f"penalty {penalties[0]:.5f} -> {penalties[-1]:.5f}")
    return 0 if ok and penalties[-1] < penalties[0] else 1


if __name__ == "__main__":
    raise SystemExit(main())
