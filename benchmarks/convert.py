"""Conversion cost: first-call latency and per-call overhead of ``to_static``, in one run.

    python benchmarks/convert.py [--repeats 5]

1. First call (convert the source + trace the program + compile the plan + run it)
   of the seed's MNIST model (Conv2D(1, 20, 5) -> MaxPool2D(2, 2) -> reshape ->
   Linear(2880, 10) -> softmax, ``@declarative`` forward, batch 8) and of a
   function with nested loops (tensor ``while`` in a tensor ``while``, a
   ``for`` over a tensor range, ``break`` and an ``if`` on tensor values).
   Each repeat imports the models from a fresh copy of their module, so no
   conversion is cached; the best repeat is reported, with a breakdown taken on
   another fresh copy. "first call, training" is the first call with
   parameters that need gradients: it also builds the backward program and plans.
2. Per-call overhead of a cached converted call over calling the compiled plan
   directly (``Plan.run``) and over ``concrete_program.runner.run_arrays``, for
   ``x + 1`` on a [4] tensor (overhead only) and the MNIST model (batch 1), under
   ``no_grad``.
3. Guards: a forward reading 20 Layer attributes (and a function reading 20 module
   globals) against the same program traced from constants: what checking that the
   values read while tracing are unchanged costs a cached call.
Targets: first call under 100 ms for the MNIST model; a cached call (cache key, argument
check, feeds, fetch) adds at most 3 us over the bare plan ("added, stub"); guarding 20
attributes adds at most 2 us per call.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import os
import sys
import tempfile
import time
import timeit

import numpy as np

import dy2stat as d2s
from dy2stat.jit import settings

MODELS = '''
import dy2stat as d2s
from dy2stat import nn
from dy2stat.jit import declarative, to_static


class MNIST(nn.Layer):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2D(1, 20, 5)
        self.pool2d = nn.MaxPool2D(kernel_size=2, stride=2)
        self.pool_2_dim = 20 * 12 * 12
        self.proj = nn.Linear(self.pool_2_dim, 10)

    @declarative
    def forward(self, inputs):
        x = self.conv(inputs)
        x = self.pool2d(x)
        x = d2s.reshape(x, [-1, self.pool_2_dim])
        x = self.proj(x)
        return nn.functional.softmax(x)


@to_static
def nested_loops(x, n):
    total = d2s.zeros_like(x)
    i = d2s.zeros([], "int64")
    while i < n:
        j = d2s.zeros([], "int64")
        while j < i:
            total = total + x * j.astype("float32")
            j += 1
        for k in range(n):
            if total.sum() > 1000.0:
                break
            total = total - 0.5 * k.astype("float32")
        i += 1
    return total


@to_static
def add_one(x):
    return x + 1


class TwentyAttributes(nn.Layer):
    """Reads 20 Python attributes while tracing: each is guarded."""

    def __init__(self):
        super().__init__()
        for i in range(20):
            setattr(self, f"a{i}", float(i))

    def forward(self, x):
        scale = (self.a0 + self.a1 + self.a2 + self.a3 + self.a4 + self.a5 + self.a6
                 + self.a7 + self.a8 + self.a9 + self.a10 + self.a11 + self.a12 + self.a13
                 + self.a14 + self.a15 + self.a16 + self.a17 + self.a18 + self.a19)
        return x * scale


class NoAttributes(nn.Layer):
    """The same program from constants: nothing to guard."""

    def forward(self, x):
        return x * 190.0


G0, G1, G2, G3, G4, G5, G6, G7, G8, G9 = (float(i) for i in range(10))
G10, G11, G12, G13, G14, G15, G16, G17, G18, G19 = (float(i) for i in range(10, 20))


@to_static
def twenty_globals(x):
    scale = (G0 + G1 + G2 + G3 + G4 + G5 + G6 + G7 + G8 + G9 + G10 + G11 + G12 + G13 + G14
             + G15 + G16 + G17 + G18 + G19)
    return x * scale


@to_static
def no_globals(x):
    return x * 190.0
'''

_counter = itertools.count()


def fresh_module(directory):
    """A new copy of MODELS, imported under a new name (nothing cached for it).

    The copies start at different lines: code objects that differ only in their
    file compare equal, and the transpiler caches translations by code object.
    """
    index = next(_counter)
    name = f"d2s_convert_bench_{index}"
    path = os.path.join(directory, f"{name}.py")
    with open(path, "w") as f:
        f.write("\n" * index + MODELS)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def timed(fn, *args):
    start = time.perf_counter()
    result = fn(*args)
    return (time.perf_counter() - start) * 1e3, result


def mnist_input(batch):
    return d2s.to_tensor(np.random.default_rng(0).random([batch, 1, 28, 28]).astype("float32"))


def nested_inputs():
    return d2s.to_tensor(np.ones([4, 4], "float32")), d2s.to_tensor(np.array(4, "int64"))


def first_calls(directory, repeats):
    """First-call latencies in ms: {case: (first in this process, best of ``repeats``)}.

    The first in the process also pays one-time costs (the transpiler's and the
    executor's own warm-up); the best is what every later model pays.
    """
    times = {"mnist, inference": [], "mnist, training": [], "nested loops": []}
    x = mnist_input(8)
    for _ in range(repeats):
        module = fresh_module(directory)
        net = module.MNIST()
        net.eval()
        with d2s.no_grad():
            times["mnist, inference"].append(timed(net, x)[0])
        module = fresh_module(directory)
        net = module.MNIST()
        times["mnist, training"].append(timed(net, x)[0])
        args = nested_inputs()
        times["nested loops"].append(timed(module.nested_loops, *args)[0])
    return {name: (ms[0], min(ms)) for name, ms in times.items()}


def breakdown(directory, name):
    """(convert, trace, compile + first run, steady run) in ms, on a fresh copy."""
    module = fresh_module(directory)
    if name == "mnist":
        sf = module.MNIST().forward
        args = [mnist_input(8)]
    else:
        sf = module.nested_loops
        args = list(nested_inputs())
    with d2s.no_grad():
        t_convert, _ = timed(lambda: settings.convert(sf.dygraph_function))
        t_trace, (concrete, _) = timed(lambda: sf.get_concrete_program(*args))
        arrays = [a._data for a in args]
        t_first, _ = timed(lambda: concrete.runner.run_arrays(arrays))
        t_run = min(timed(lambda: concrete.runner.run_arrays(arrays))[0] for _ in range(20))
    return t_convert, t_trace, t_first - t_run, t_run


def overhead(sf, args, number, repeats):
    """Per-call us of the converted call, runner.run_arrays and Plan.run (best of
    ``repeats``, taking turns so that a slow spell of the machine hits all three alike),
    and the same three with the plan's generated function stubbed out (it returns its
    last outputs):
    the exact cost the converted call adds, free of the kernels' timing noise."""
    with d2s.no_grad():
        sf(*args)
        runner = sf.concrete_program.runner
        arrays = [a._data for a in args]
        plan = runner._plan("forward", runner.program, runner.feed_names, runner.fetch_names,
                            np) if _plan_takes_xp(runner) else \
            runner._plan("forward", runner.program, runner.feed_names, runner.fetch_names)
        scope = runner._scope()
        scope = scope[0] if isinstance(scope, tuple) else scope
        feeds = dict(zip(runner.feed_names, arrays))
        outputs = plan.run(feeds, scope)
        np.testing.assert_allclose(outputs[0], sf(*args).numpy(), rtol=1e-6)
        calls = {"converted": lambda: sf(*args),
                 "run_arrays": lambda: runner.run_arrays(arrays),
                 "plan": lambda: plan.run(feeds, scope)}
        best = {}
        for stubbed in (False, True):
            if stubbed:  # the plan's generated function (feeds and argument checks still run)
                kept = plan._fn, getattr(plan, "_fn_here", None)
                plan._fn = plan._fn_here = lambda S, *args: outputs
            try:
                times = dict.fromkeys(calls, np.inf)
                for _ in range(repeats if not stubbed else 7):
                    for label, call in calls.items():
                        n = number if not stubbed else 20000
                        times[label] = min(times[label], timeit.timeit(call, number=n) / n * 1e6)
            finally:
                if stubbed:
                    plan._fn, plan._fn_here = kept
            best.update({(label, stubbed): t for label, t in times.items()})
    return best


def guard_cost(guarded, plain, x, repeats=15, number=20000):
    """us per call that ``guarded`` (the same program as ``plain``, its trace having read
    20 Python values) takes over ``plain``: best of ``repeats``, taking turns."""
    with d2s.no_grad():
        np.testing.assert_allclose(guarded(x).numpy(), plain(x).numpy(), rtol=1e-6)
        best = {"guarded": np.inf, "plain": np.inf}
        for _ in range(repeats):
            for label, call in (("guarded", guarded), ("plain", plain)):
                best[label] = min(best[label],
                                  timeit.timeit(lambda c=call: c(x), number=number) / number)
    return (best["guarded"] - best["plain"]) * 1e6


def _plan_takes_xp(runner) -> bool:
    import inspect

    return "xp" in inspect.signature(runner._plan).parameters


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="fresh first calls per case")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        sys.path.insert(0, directory)
        first = first_calls(directory, args.repeats)
        parts = {name: breakdown(directory, name) for name in ("mnist", "nested")}
        module = fresh_module(directory)
        net = module.MNIST()
        net.eval()
        costs = [("x + 1, [4] float32", overhead(module.add_one, [d2s.ones([4])], 5000, 15)),
                 ("MNIST forward, batch 1",
                  overhead(net.forward, [mnist_input(1)], 50, 60))]
        x = d2s.ones([4])
        attributes = d2s.jit.to_static(module.TwentyAttributes())
        constants = d2s.jit.to_static(module.NoAttributes())
        guards = [("20 Layer attributes", guard_cost(attributes, constants, x)),
                  ("20 module globals", guard_cost(module.twenty_globals, module.no_globals, x))]

    print(f"{'first call (convert+trace+compile+run)':40s} {'1st in process':>14s} "
          f"{'best ms':>8s} {'target':>7s}")
    for name, (cold, ms) in first.items():
        target = "< 100" if name.startswith("mnist") else ""
        mark = ("ok" if max(cold, ms) < 100 else "MISSED") if target else ""
        print(f"{name:40s} {cold:14.1f} {ms:8.1f} {target:>7s} {mark}")
    print(f"\n{'breakdown (ms, no_grad)':24s} {'convert':>8s} {'trace':>8s} {'compile':>8s} "
          f"{'run':>8s}")
    for name, (c, t, k, r) in parts.items():
        print(f"{name:24s} {c:8.2f} {t:8.2f} {k:8.2f} {r:8.2f}")
    print(f"\n{'cached call (us/call, no_grad)':30s} {'converted':>10s} {'run_arrays':>11s} "
          f"{'Plan.run':>9s} {'added':>8s} {'added, stub':>12s} {'target':>7s}")
    for name, t in costs:
        added = t["converted", False] - t["plan", False]
        exact = t["converted", True] - t["plan", True]
        mark = "ok" if exact <= 3 else "MISSED"
        print(f"{name:30s} {t['converted', False]:10.2f} {t['run_arrays', False]:11.2f} "
              f"{t['plan', False]:9.2f} {added:8.2f} {exact:12.2f} {'<= 3':>7s} {mark}")
    print("('added, stub': the same calls with the plan's generated function stubbed out, so "
          "kernel timing noise cannot hide or inflate the overhead)")
    print(f"\n{'guards (us/call added)':30s} {'added':>8s} {'target':>7s}")
    for name, added in guards:
        print(f"{name:30s} {added:8.2f} {'<= 2':>7s} {'ok' if added <= 2 else 'MISSED'}")


if __name__ == "__main__":
    main()
