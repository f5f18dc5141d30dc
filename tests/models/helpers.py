"""What the model tests share: the example scripts as modules, training a model eagerly
and converted from the same weights, and running a saved model in a fresh process.

Converted training is compared with eager bit for bit (the converted plan runs eager
mode's kernels on the same values; tests/jit/test_numerics.py says why), dropout
included: both draw their masks from the generator ``d2s.seed`` resets, in the same
order.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np

import dy2stat as d2s
from dy2stat import jit

ROOT = Path(__file__).resolve().parents[2]


def example(name: str):
    """examples/NAME.py as a module (its functions keep their source, so they convert)."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", ROOT / "examples" /
                                                  f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def train(make: Callable, loss_of: Callable, convert: Callable | None, steps: int = 3,
          lr: float = 1e-2, seed: int = 11):
    """Losses of ``steps`` Adam steps of a model made by ``make()`` after ``d2s.seed``,
    converted by ``convert(model)`` when given, the final parameters and the model."""
    d2s.seed(seed)
    model = make()
    if convert is not None:
        model = convert(model)
    optimizer = d2s.optimizer.Adam(learning_rate=lr, parameters=model.parameters())
    losses = []
    for step in range(steps):
        loss = loss_of(model, step)
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
        losses.append(float(loss))
    return np.array(losses), [p.numpy() for p in model.parameters()], model


def assert_trains_as_eager(make: Callable, loss_of: Callable, convert: Callable,
                           steps: int = 3, lr: float = 1e-2):
    """The converted model's losses and final parameters are eager's, bit for bit; the
    two models are returned (eager, converted)."""
    losses, params, converted = train(make, loss_of, convert, steps, lr)
    eager_losses, eager_params, eager = train(make, loss_of, None, steps, lr)
    assert np.isfinite(eager_losses).all()
    np.testing.assert_array_equal(losses, eager_losses)
    for p, e in zip(params, eager_params, strict=True):
        np.testing.assert_array_equal(p, e)
    return eager, converted


def assert_equal_outputs(got, want):
    """Tensors (or nested tuples/lists of them) with the same values, bit for bit."""
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_equal_outputs(g, w)
        return
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


_RUN_SAVED = textwrap.dedent('''
    import json, sys
    import numpy as np
    import dy2stat as d2s
    from dy2stat import jit

    prefix, inputs, outputs = sys.argv[1:4]
    model = jit.load(prefix)
    feeds = np.load(inputs)
    args = [d2s.to_tensor(feeds[f"arg{i}"]) for i in range(len(feeds.files))]
    out = model(*args)
    out = list(out) if isinstance(out, (list, tuple)) else [out]
    np.savez(outputs, *[o.numpy() for o in out])
    print(json.dumps({"modules": [m for m in sys.modules if m.startswith("example_")]}))
''')


def outputs_after_load_elsewhere(model, input_spec, inputs, tmp_path: Path) -> list:
    """``jit.save`` the model, then ``jit.load`` it in a fresh Python process (which
    never imports the model's source) and run it on ``inputs`` (arrays): its outputs."""
    prefix = tmp_path / "saved" / "model"
    jit.save(model, str(prefix), input_spec=input_spec)
    np.savez(tmp_path / "inputs.npz", **{f"arg{i}": a for i, a in enumerate(inputs)})
    result = subprocess.run([sys.executable, "-c", _RUN_SAVED, str(prefix),
                             str(tmp_path / "inputs.npz"), str(tmp_path / "outputs.npz")],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"modules": []}
    saved = np.load(tmp_path / "outputs.npz")
    return [saved[f"arr_{i}"] for i in range(len(saved.files))]
