"""The second seed's hybrid programming: a 42-layer MLP, eager vs `to_static`, then `jit.save`.

    python examples/hybrid_mlp.py [--calls 1000] [--quick]

The same network runs `--calls` forward passes eagerly (define-by-run: Python
dispatches every op) and after `to_static` (define-and-run: the program is
traced once, then the compiled plan runs), with identical results. Then the
converted network is saved with `jit.save` and the files are listed.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

import dy2stat as d2s
from dy2stat import nn
from dy2stat.jit import to_static
from dy2stat.static import InputSpec


def get_net(seed: int = 0) -> nn.Sequential:
    """42 x Linear(512, 512), then 512 -> 256 -> ReLU -> 128 -> ReLU -> 2."""
    d2s.seed(seed)
    blocks = [nn.Linear(512, 512) for _ in range(42)] + [
        nn.Linear(512, 256),
        nn.ReLU(),
        nn.Linear(256, 128),
        nn.ReLU(),
        nn.Linear(128, 2),
    ]
    return nn.Sequential(*blocks)


class Benchmark:
    """Times a `with` block and prints the seconds it took."""

    def __init__(self, description: str = "Done"):
        self.description = description

    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *args):
        self.seconds = time.perf_counter() - self.start
        print(f"{self.description}: {self.seconds:.4f} sec")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="forward calls to time")
    parser.add_argument("--quick", action="store_true", help="20 calls, for the tests")
    args = parser.parse_args(argv)
    calls = 20 if args.quick else args.calls

    x = d2s.randn((1, 512))
    with d2s.no_grad():  # inference: no gradient recording in either mode
        net = get_net()
        eager_out = net(x)
        with Benchmark(f"eager (dynamic graph), {calls} calls") as eager:
            for _ in range(calls):
                net(x)

        x_spec = InputSpec(shape=[-1, 512], name="x")
        net = to_static(get_net(), input_spec=[x_spec])
        static_out = net(x)  # the first call traces and compiles the program
        with Benchmark(f"to_static (static graph), {calls} calls") as static:
            for _ in range(calls):
                net(x)

    same = np.allclose(eager_out.numpy(), static_out.numpy(), rtol=1e-4, atol=1e-5)
    print(f"same results: {same}; speed-up {eager.seconds / static.seconds:.2f}x")

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "my_net")
        d2s.jit.save(net, path)
        for name in sorted(os.listdir(tmp)):
            size = os.path.getsize(os.path.join(tmp, name))
            print(f"{size / 2**20:8.2f} MiB  {name}")
        loaded = d2s.jit.load(path)
        reloaded = np.allclose(loaded(x).numpy(), static_out.numpy(), rtol=1e-5, atol=1e-6)
    print(f"jit.load gives the same results: {reloaded}")
    return 0 if same and reloaded else 1


if __name__ == "__main__":
    raise SystemExit(main())
