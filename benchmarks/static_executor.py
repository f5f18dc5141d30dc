"""The static executor against eager dy2stat and hand-written NumPy, measured in one run.

    python benchmarks/static_executor.py [--calls 1000] [--repeat 5]

Two models at batch 1, 1000 forward calls each (best of several repeats):
- the 42-layer, 32-wide MLP (matmul, add, relu per layer);
- the second seed's d2l MLP: 42 x Linear(512, 512), then 512 -> 256 -> ReLU
  -> 128 -> ReLU -> 2.
Each runs as a static program (built with ``runtime.build``) through the
runtime ``Executor`` (plan cached, feeds checked on every call), through the
user-facing ``static.Executor`` when it is importable, eagerly with dy2stat
tensors (no gradient recording), and as the same computation in hand-written
NumPy. Targets: executor <= 1.2x NumPy on both models and >= 2x
faster than eager on the 32-wide MLP.
"""

from __future__ import annotations

import argparse
import timeit

import numpy as np

import dy2stat as d2s
from dy2stat.runtime import build
from dy2stat.runtime.executor import Executor, Scope
from dy2stat.runtime.ir import Program

try:  # the user-facing wrapper; optional so that this runs on the runtime alone
    from dy2stat import static
except Exception:  # pragma: no cover - depends on the checkout
    static = None


def layers_32():
    """(weight, bias, relu?) per layer of the 42 x 32 MLP."""
    rng = np.random.default_rng(0)
    return [((rng.standard_normal((32, 32)) / np.sqrt(32)).astype("float32"),
             np.full(32, 0.01, "float32"), True) for _ in range(42)]


def layers_d2l():
    """(weight, bias, relu?) per Linear of the d2l MLP (Linear's [in, out] layout)."""
    rng = np.random.default_rng(0)
    sizes = [(512, 512)] * 42 + [(512, 256), (256, 128), (128, 2)]
    relu = [False] * 42 + [True, True, False]
    return [((rng.standard_normal((i, o)) / np.sqrt(i)).astype("float32"),
             np.zeros(o, "float32"), r) for (i, o), r in zip(sizes, relu)]


def static_program(layers, width):
    """The MLP as a program over data ``x`` and persistable weights; (program, out, scope)."""
    program = Program()
    block = program.global_block()
    h = block.create_var((-1, width), "float32", name="x", is_data=True)
    scope = Scope()
    for k, (w, b, relu) in enumerate(layers):
        wv = block.create_var(w.shape, w.dtype, name=f"linear_{k}.w", persistable=True)
        bv = block.create_var(b.shape, b.dtype, name=f"linear_{k}.b", persistable=True)
        scope[wv.name], scope[bv.name] = w, b
        h = build.append(block, "add", [build.append(block, "matmul", [h, wv], {}), bv], {})
        if relu:
            h = build.append(block, "relu", [h], {})
    return program, h.name, scope


def numpy_forward(layers):
    def forward(h):
        for w, b, relu in layers:
            h = np.maximum(h @ w + b, 0) if relu else h @ w + b
        return h

    return forward


def eager_forward(layers):
    params = [(d2s.to_tensor(w), d2s.to_tensor(b), relu) for w, b, relu in layers]

    def forward(h):
        for w, b, relu in params:
            h = (h @ w + b).relu() if relu else h @ w + b
        return h

    return forward


def best(fn, calls, repeat):
    """Best of ``repeat`` runs of ``calls`` calls, in microseconds per call."""
    return min(timeit.repeat(fn, number=calls, repeat=repeat)) / calls * 1e6


def measure(name, layers, width, calls, repeat):
    x = np.random.default_rng(1).standard_normal((1, width)).astype("float32")
    program, out, scope = static_program(layers, width)
    exe = Executor()
    feed = {"x": x}
    fetch = [out]
    np_fn, eager_fn = numpy_forward(layers), eager_forward(layers)
    xt = d2s.to_tensor(x)
    expected = np_fn(x)
    np.testing.assert_allclose(exe.run(program, feed, fetch, scope)[0], expected,
                               rtol=1e-4, atol=1e-5)
    with d2s.no_grad():
        np.testing.assert_allclose(eager_fn(xt).numpy(), expected, rtol=1e-4, atol=1e-5)
    row = {
        "numpy": best(lambda: np_fn(x), calls, repeat),
        "executor": best(lambda: exe.run(program, feed, fetch, scope), calls, repeat),
    }
    if static is not None:
        user_exe, user_scope = static.Executor("cpu"), static.global_scope()
        for key in scope:
            user_scope[key] = scope[key]
        user_run = lambda: user_exe.run(program, feed=feed, fetch_list=fetch)  # noqa: E731
        np.testing.assert_allclose(user_run()[0], expected, rtol=1e-4, atol=1e-5)
        row["static.Executor"] = best(user_run, calls, repeat)
    with d2s.no_grad():
        row["eager"] = best(lambda: eager_fn(xt), calls, repeat)
    return name, row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="forward calls per repeat")
    parser.add_argument("--repeat", type=int, default=5, help="repeats (the best is kept)")
    args = parser.parse_args(argv)
    rows = [
        measure("MLP 42x32, batch 1", layers_32(), 32, args.calls, args.repeat),
        measure("d2l MLP 42x512+3, batch 1", layers_d2l(), 512, args.calls, args.repeat),
    ]
    print(f"{args.calls} forward calls per repeat, best of {args.repeat}; us per call\n")
    print(f"{'model':28s} {'numpy':>9s} {'executor':>9s} {'/numpy':>7s} "
          f"{'static.Ex':>9s} {'/numpy':>7s} {'eager':>9s} {'eager/exe':>9s}")
    for name, r in rows:
        user = r.get("static.Executor")
        user_cols = (f"{user:9.1f} {user / r['numpy']:6.2f}x" if user is not None
                     else f"{'-':>9s} {'-':>7s}")
        print(f"{name:28s} {r['numpy']:9.1f} {r['executor']:9.1f} "
              f"{r['executor'] / r['numpy']:6.2f}x {user_cols} {r['eager']:9.1f} "
              f"{r['eager'] / r['executor']:8.2f}x")
    (_, mlp), (_, d2l) = rows
    checks = [
        ("executor <= 1.2x numpy, 42x32 MLP", mlp["executor"] / mlp["numpy"] <= 1.2),
        ("executor <= 1.2x numpy, d2l MLP", d2l["executor"] / d2l["numpy"] <= 1.2),
        ("executor >= 2x faster than eager, 42x32 MLP", mlp["eager"] / mlp["executor"] >= 2),
    ]
    print()
    for text, ok in checks:
        print(f"{'met ' if ok else 'MISSED'} {text}")


if __name__ == "__main__":
    main()
