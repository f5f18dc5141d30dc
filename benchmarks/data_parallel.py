"""Training throughput of one process vs two data-parallel processes (MPI, one machine).

    python benchmarks/data_parallel.py [--steps 40] [--batch 64]

Trains a converted LeNet (1x28x28 images) and an eager MLP (784-1024-1024-10)
with Momentum, from the same weights on synthetic data, and prints samples per
second (forward + backward + gradient sum + update) for:

- 1 process, one BLAS thread, batch B and 2B;
- 1 process, a BLAS thread per core, batch 2B (the best one process does on all
  the cores);
- 2 processes under ``mpiexec`` (``dy2stat launch``: a BLAS thread per core
  each), batch B per rank (2B in all), with the time a step waits for the
  gradient sums after its own backward.

Each configuration runs in a fresh interpreter (``--measure``), a converted
model's plans in their native form (built before timing), the best of
``--repeats`` runs of ``--steps`` steps each; the configurations take turns
``--rounds`` times and the best of each is kept, so a busy spell of the machine
hits them alike. The last column compares with the best single process at the
same total batch 2B. Two processes on two cores are bounded by the cores: the
gain is what is left after the gradient sums (which move the whole gradient
through memory on each step) and the second process's share of the memory
bandwidth, and it is reported as measured.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

if "--measure" in sys.argv and "OMP_NUM_THREADS" not in os.environ:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads OpenBLAS

import numpy as np

import dy2stat as d2s
from dy2stat import nn
from dy2stat.distributed import DataParallel, data_parallel, launch
from dy2stat.nn import functional as F
from dy2stat.vision.models import LeNet


def mlp() -> nn.Layer:
    return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                         nn.Linear(1024, 10))


MODELS = {  # name -> (make the model, input shape of one sample)
    "LeNet (converted)": (lambda: d2s.jit.to_static(LeNet()), [1, 28, 28]),
    "MLP 784-1024-1024-10 (eager)": (mlp, [784]),
}


class WaitClock:
    """Time spent in the gradient sums' waits after each backward."""

    def __init__(self):
        self.seconds = 0.0
        done = data_parallel._Reducer._done

        def timed(reducer):
            start = time.perf_counter()
            try:
                return done(reducer)
            finally:
                self.seconds += time.perf_counter() - start

        data_parallel._Reducer._done = timed


def settle(layer: nn.Layer) -> None:
    """Build the native forms of a converted layer's plans now (as ``peers.py`` does),
    so that every configuration times the steady state."""
    forward = layer.forward
    if isinstance(forward, d2s.jit.StaticFunction):
        for plan in forward.concrete_program.runner._plans.values():
            plan.wait_native(600)


def trainer(make, shape, batch: int, rng):
    """One training step of the model ``make()`` on a fixed batch, data-parallel, and
    the model."""
    d2s.seed(0)
    net = DataParallel(make())
    opt = d2s.optimizer.Momentum(learning_rate=0.01, parameters=net.parameters())
    x = d2s.to_tensor(rng.random([batch, *shape]).astype("float32"))
    y = d2s.to_tensor(rng.integers(0, 10, [batch, 1]).astype("int64"))

    def step():
        F.cross_entropy(net(x), y).backward()
        opt.step()
        opt.clear_grad()

    return step, net._layers


def measure(batch: int, steps: int, repeats: int) -> dict:
    """samples/s and ms/step of each model, on this job's ranks (rank 0's clock)."""
    env = d2s.distributed.init_parallel_env()
    clock = WaitClock()
    results = {}
    rng = np.random.default_rng(env.rank)
    for name, (make, shape) in MODELS.items():
        step, model = trainer(make, shape, batch, rng)
        for _ in range(3):  # compile, warm the caches
            step()
        settle(model)
        step()
        best, waited = float("inf"), 0.0
        for _ in range(repeats):
            clock.seconds = 0.0
            start = time.perf_counter()
            for _ in range(steps):
                step()
            elapsed = time.perf_counter() - start
            if elapsed < best:
                best, waited = elapsed, clock.seconds
        results[name] = {"samples_per_s": env.world_size * batch * steps / best,
                         "ms_per_step": best / steps * 1e3,
                         "wait_ms_per_step": waited / steps * 1e3}
    return results


def run(label: str, nprocs: int, threads: int, batch: int, args) -> dict:
    """What ``measure`` gives in a fresh job of ``nprocs`` ranks."""
    command = [sys.executable, __file__, "--measure", "--batch", str(batch),
               "--steps", str(args.steps), "--repeats", str(args.repeats)]
    if nprocs > 1:
        command = [launch.find_mpiexec(), "-n", str(nprocs), *command]
    environment = dict(os.environ, OMP_NUM_THREADS=str(threads),
                       OPENBLAS_NUM_THREADS=str(threads))
    result = subprocess.run(command, capture_output=True, text=True, env=environment,
                            check=False)
    if result.returncode != 0:
        sys.exit(f"{label} failed:\n{result.stdout}{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64, help="B: samples per rank per step")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per repeat")
    parser.add_argument("--repeats", type=int, default=3, help="repeats (the best is kept)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="turns of all the configurations (the best is kept)")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        results = measure(args.batch, args.steps, args.repeats)
        if d2s.distributed.get_rank() == 0:
            print(json.dumps(results))
        return
    if launch.find_mpiexec() is None:
        sys.exit("mpiexec is not installed: pip install 'dy2stat[distributed]'")
    cores, b = os.cpu_count() or 1, args.batch
    configs = [  # label, processes, BLAS threads each, batch per process
        (f"1 process, 1 thread, batch {b}", 1, 1, b),
        (f"1 process, 1 thread, batch {2 * b}", 1, 1, 2 * b),
        (f"1 process, {cores} threads, batch {2 * b}", 1, cores, 2 * b),
        (f"2 processes, {max(1, cores // 2)} thread each, batch {b} each", 2,
         max(1, cores // 2), b),
    ]
    best: dict = {}
    for _ in range(args.rounds):
        for label, n, threads, batch in configs:
            for model, r in run(label, n, threads, batch, args).items():
                kept = best.setdefault((label, model), r)
                if r["samples_per_s"] > kept["samples_per_s"]:
                    best[(label, model)] = r
    print(f"{cores} cores; {args.steps} steps x best of {args.repeats}, best of {args.rounds} "
          f"rounds; flags {d2s.get_flags(['inter_op_parallelism', 'native_tier'])}")
    for model in MODELS:
        single = max(best[(label, model)]["samples_per_s"] for label, n, _, batch in configs
                     if n == 1 and batch == 2 * b)
        print(f"\n{model}")
        print(f"  {'configuration':44s} {'samples/s':>10s} {'ms/step':>8s} {'waits':>7s} "
              f"{'vs best 1 proc at ' + str(2 * b):>22s}")
        for label, n, _, _ in configs:
            r = best[(label, model)]
            wait = f"{r['wait_ms_per_step']:6.2f}" if n > 1 else "     -"
            print(f"  {label:44s} {r['samples_per_s']:10.0f} {r['ms_per_step']:8.2f} "
                  f"{wait:>7s} {r['samples_per_s'] / single:21.2f}x")


if __name__ == "__main__":
    main()
