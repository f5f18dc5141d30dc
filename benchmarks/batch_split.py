"""Batch splitting (flag ``batch_parallelism``, opt-in): a converted training step
with the batch run as two halves on two threads, against the same step run whole.

    python benchmarks/batch_split.py [--steps 10] [--repeats 15] [--layout]

For LeNet (Adam) and a 784-256-10 MLP (SGD) at several batch sizes, prints
ms/step with splitting forced on (``MIN_WORK`` 0) and off, their ratio, and
whether the threshold (``batch_split.MIN_WORK``) splits that call once the
flag is on — the table to read when moving the threshold to another machine.
Both settings take turns in one run; the medians are compared. ``--layout``
also turns on the opt-in ``batch_minor_layout`` (the threshold was measured
with it).
"""

from __future__ import annotations

import argparse
import os
import time

if __name__ == "__main__" and "OMP_NUM_THREADS" not in os.environ:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads OpenBLAS

import numpy as np

import dy2stat as d2s
from dy2stat import jit, nn
from dy2stat.runtime import batch_split
from dy2stat.vision.models import LeNet


def lenet():
    return LeNet(), (1, 28, 28), d2s.optimizer.Adam


def mlp():
    net = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    return net, (784,), d2s.optimizer.SGD


def step_of(make, batch):
    d2s.seed(0)
    net, shape, optimizer = make()
    jit.to_static(net)
    opt = optimizer(parameters=net.parameters(), learning_rate=1e-3)
    rng = np.random.default_rng(0)
    x = d2s.to_tensor(rng.standard_normal((batch, *shape)).astype("float32"))
    y = d2s.to_tensor(rng.integers(0, 10, (batch, 1)).astype("int64"))
    loss_fn = nn.CrossEntropyLoss()

    def step():
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        opt.clear_grad()

    return net, step


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10, help="timed steps per turn")
    parser.add_argument("--repeats", type=int, default=15, help="turns of each setting")
    parser.add_argument("--layout", action="store_true", help="batch_minor_layout on")
    args = parser.parse_args()
    default_work, enabled = batch_split.MIN_WORK, batch_split.settings.enabled
    d2s.set_flags({"batch_minor_layout": args.layout})
    print(f"BLAS threads: {os.environ.get('OPENBLAS_NUM_THREADS', 'default')}; "
          f"MIN_WORK {default_work:.0e}; batch_minor_layout {args.layout}\n")
    print(f"{'model':6s} {'batch':>5s} {'whole ms':>9s} {'split ms':>9s} {'whole/split':>11s} "
          f"{'work':>8s}  flag on")
    batch_split.MIN_ROWS = 2
    for name, make, batches in (("LeNet", lenet, (16, 32, 48, 64, 128)),
                                ("MLP", mlp, (32, 64, 128, 256))):
        for batch in batches:
            net, step = step_of(make, batch)
            times = {True: [], False: []}
            batch_split.MIN_WORK = 0
            for _ in range(args.repeats):
                for split in (True, False):
                    batch_split.settings.enabled = split
                    start = time.perf_counter()
                    for _ in range(args.steps):
                        step()
                    times[split].append((time.perf_counter() - start) / args.steps * 1e3)
            (plans,) = net.forward.concrete_program.runner._backward.values()
            work = plans.split.work * batch
            whole, split = np.median(times[False]), np.median(times[True])
            print(f"{name:6s} {batch:5d} {whole:9.2f} {split:9.2f} {whole / split:10.2f}x "
                  f"{work:8.1e}  {'split' if work >= default_work else 'whole'}")
    batch_split.MIN_WORK, batch_split.settings.enabled = default_work, enabled


if __name__ == "__main__":
    main()
