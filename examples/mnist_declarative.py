"""The first seed's MNIST Layer: `@declarative` on forward, trained, exported, reloaded.

    python examples/mnist_declarative.py [--steps 20] [--quick]

One decorator on the outermost Layer's forward turns the whole forward (the
sublayers included) into a static program. The model trains with an ordinary
eager optimizer loop on synthetic data (no download), then
`ProgramTranslator().save_inference_model(dirname)` saves the program that ran
last, Paddle-1.8 style, and `jit.load` runs it again without this file's code.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np

import dy2stat as d2s
from dy2stat import nn
from dy2stat.jit import ProgramTranslator, declarative


class MNIST(nn.Layer):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2D(1, 20, 5)                   # [N, 1, 28, 28] -> [N, 20, 24, 24]
        self.pool2d = nn.MaxPool2D(kernel_size=2, stride=2)  # -> [N, 20, 12, 12]
        self.pool_2_dim = 20 * 12 * 12
        self.proj = nn.Linear(self.pool_2_dim, 10)

    @declarative  # the whole forward, sublayers included, runs as one static program
    def forward(self, inputs):
        x = self.conv(inputs)
        x = self.pool2d(x)
        x = d2s.reshape(x, [-1, self.pool_2_dim])
        x = self.proj(x)
        return nn.functional.softmax(x)


def synthetic_digits(n: int, seed: int = 0):
    """Noise images whose label is the row band holding a bright stripe."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, n)
    images = rng.uniform(0, 0.2, (n, 1, 28, 28)).astype("float32")
    for image, label in zip(images, labels):
        image[0, 1 + 2 * label: 3 + 2 * label, 4:24] = 1.0
    return images, labels.reshape(-1, 1).astype("int64")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="training steps")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--quick", action="store_true", help="a few steps, for the tests")
    args = parser.parse_args(argv)
    steps = 4 if args.quick else args.steps

    d2s.seed(0)
    model = MNIST()
    optimizer = d2s.optimizer.Adam(learning_rate=0.002, parameters=model.parameters())
    images, labels = synthetic_digits(steps * args.batch)
    for step in range(steps):
        batch = slice(step * args.batch, (step + 1) * args.batch)
        x, y = d2s.to_tensor(images[batch]), d2s.to_tensor(labels[batch])
        prob = model(x)  # the static program; one node on the eager tape
        loss = nn.functional.cross_entropy(prob, y, use_softmax=False)
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
        if step % max(steps // 10, 1) == 0 or step == steps - 1:
            print(f"step {step}: loss {float(loss):.4f}")

    # The seed's deployment: run forward once, then save the program that ran.
    model.eval()
    in_np = np.random.default_rng(1).random([20, 1, 28, 28]).astype("float32")
    out = model(d2s.to_tensor(in_np))
    ops = sorted({op.type for op in model.forward.main_program.all_ops()})
    print(f"static program ops: {', '.join(ops)}")
    with tempfile.TemporaryDirectory() as tmp:
        dirname = os.path.join(tmp, "dy2stat_infer_model")
        ProgramTranslator().save_inference_model(dirname, fetch=[0])
        print(f"saved: {', '.join(sorted(os.listdir(dirname)))}")
        loaded = d2s.jit.load(os.path.join(dirname, "model"))
        again = loaded(d2s.to_tensor(in_np))
    same = np.allclose(out.numpy(), again.numpy(), atol=1e-6)
    print(f"reloaded model gives the same output: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
