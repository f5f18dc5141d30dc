"""Property: a converted function gives what the eager function gives, on random programs.

Each seed generates a module of control-flow code of the kind models have
(program_generator.py), writes it to a file (the transpiler reads the source) and calls its
entry point eagerly and through `d2s.jit.to_static` on several argument sets, a few calls per
traced signature (so a cached program also runs on new values). Values (rtol 1e-5), dtypes,
shapes and structure must agree, and so must the gradients of the tensor arguments (and of
a Layer's parameters) where the eager outputs have one.

A failure is shrunk (program_shrinker.py: statements removed while it persists) and reported
as a script that reproduces it, with the seed and the generated program.

CI runs `DY2STAT_FUZZ_CASES` seeds (default 60, about 15 s) from `DY2STAT_FUZZ_SEED`
(default 0), leaving out the constructs in `program_generator.KNOWN_FAILING`. For a longer
local run (`DY2STAT_FUZZ_BUDGET` sets how many statements an entry point holds, default 24):

    DY2STAT_FUZZ_CASES=2000 pytest -q tests/dy2static/test_equivalence_property.py -x
    python -m tests.dy2static.test_equivalence_property 0 2000   # failures grouped by class

`DY2STAT_FUZZ_FEATURES=all` turns the known-failing constructs on too.

The native tier runs the same kind of programs too, with every plan built native at its
first call and each argument set called twice, so that the second call runs the native
code: a few seeds by default (Numba compiles each region, about a second), or
`DY2STAT_FUZZ_NATIVE_CASES` seeds from `DY2STAT_FUZZ_SEED`.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import importlib.util
import itertools
import os
import re
import signal
import sys
import tempfile
import traceback
import warnings

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat.runtime import lower
from dy2stat.static import nest
from dy2stat.tensor import Tensor
from tests.dy2static import program_generator as gen
from tests.dy2static import program_shrinker as shrinker

CASES = int(os.environ.get("DY2STAT_FUZZ_CASES", "60"))
FIRST_SEED = int(os.environ.get("DY2STAT_FUZZ_SEED", "0"))
NATIVE_SEEDS = (range(FIRST_SEED, FIRST_SEED + int(os.environ["DY2STAT_FUZZ_NATIVE_CASES"]))
                if "DY2STAT_FUZZ_NATIVE_CASES" in os.environ else [0, 6, 9])
FEATURES = (frozenset(gen.FEATURES) if os.environ.get("DY2STAT_FUZZ_FEATURES") == "all"
            else gen.DEFAULT_FEATURES)
RTOL = 1e-5
CASE_SECONDS = 30  # a converted loop that never ends fails the case instead of hanging

_files = tempfile.TemporaryDirectory(prefix="dy2stat_fuzz_")
_names = itertools.count()


@dataclasses.dataclass
class Failure:
    kind: str  # what went wrong, without the details (what shrinking must keep)
    detail: str
    call: int  # the index of the argument set it showed on


# ------------------------------------------------------------------- running a program


def load(source: str):
    """The module of `source`, imported from a file of its own (inspect reads it)."""
    name = f"dy2stat_fuzz_{next(_names)}"
    path = os.path.join(_files.name, f"{name}.py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # as an import would (inspect looks classes up there)
    spec.loader.exec_module(module)
    return module


def entry_points(program: gen.Program, module):
    """(eager callable, converted callable, eager parameters, converted parameters)."""
    if not program.layer:
        return module.main, d2s.jit.to_static(module.main), [], []
    eager = module.Model()
    converted = module.Model()
    converted.set_state_dict(eager.state_dict())
    d2s.jit.to_static(converted)
    return eager, converted, eager.parameters(), converted.parameters()


def tensors(args: tuple, dtype=np.float32) -> list:
    return [d2s.to_tensor(a.astype(dtype), stop_gradient=False) if isinstance(a, np.ndarray)
            else a for a in args]


def call(fn, program: gen.Program, args: list):
    if "kwargs_call" in program.features:
        named = dict(zip(program.params, args))
        first = {n: named.pop(n) for n in ("x", "y")}
        return fn(**first, **dict(reversed(list(named.items()))))
    return fn(*args)


def check(program: gen.Program, inputs=None) -> Failure | None:
    """Run `program` eagerly and converted on its inputs; the first difference found."""
    try:
        module = load(program.source)
        eager_fn, static_fn, eager_params, static_params = entry_points(program, module)
    except Exception as e:
        return Failure("eager raised (a generator bug)", _exception(e), -1)
    try:
        return _check_calls(program, program.inputs if inputs is None else inputs,
                            eager_fn, static_fn, eager_params, static_params)
    finally:
        sys.modules.pop(module.__name__, None)


def _check_calls(program, inputs, eager_fn, static_fn, eager_params, static_params):
    for index, args in enumerate(inputs):
        if index == 1 and "mutate_attribute" in program.features and program.layer:
            for model in (eager_fn, static_fn):
                model.threshold = -model.threshold
        eager_args, static_args = tensors(args), tensors(args)
        try:
            expected = call(eager_fn, program, eager_args)
        except Exception as e:
            return Failure("eager raised (a generator bug)", _exception(e), index)
        try:
            actual = call(static_fn, program, static_args)
        except Exception as e:
            return Failure(f"converted raised {_summary(e)}", _exception(e), index)
        problem = compare(actual, expected, "output")
        if problem is None:
            problem = compare_gradients(actual, expected, static_args, eager_args,
                                        static_params, eager_params, program.features)
        if problem is not None and not (problem[0] in ("value differs", "gradient differs")
                                        and float32_is_too_coarse(program, eager_fn,
                                                                  eager_params, args)):
            return Failure(problem[0], problem[1], index)
    if program.layer:  # buffers (batch norm statistics) must have moved the same way
        expected_state, actual_state = eager_fn.state_dict(), static_fn.state_dict()
        for name, value in expected_state.items():
            problem = _close(actual_state[name].numpy(), value.numpy(), f"state {name!r}",
                             "state differs")
            if problem is not None:
                return Failure(problem[0], problem[1], len(inputs) - 1)
    return None


def _summary(e: BaseException) -> str:
    """The exception's type and first line, numbers and quoted names blanked (what stays
    the same while a program shrinks)."""
    lines = [line for line in str(e).strip().splitlines()
             if line and not line.startswith(("File ", " "))]
    first = re.sub(r"\S+\.py", "FILE", (lines or [""])[0])
    first = re.sub(r"'[^']*'|\"[^\"]*\"", "'_'", first)
    return f"{type(e).__name__}: {re.sub(r'[0-9]+', '#', first)}"[:160]


def _exception(e: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(e), e)).strip()


def compare(actual, expected, where: str):
    """(kind, detail) of the first difference between two outputs, or None."""
    if isinstance(expected, (tuple, list)):
        if type(actual) is not type(expected) or len(actual) != len(expected):
            return "structure differs", f"{where}: {_describe(actual)} for {_describe(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            problem = compare(a, e, f"{where}[{i}]")
            if problem is not None:
                return problem
        return None
    if not isinstance(expected, Tensor):
        if isinstance(actual, Tensor) or actual != expected:
            return "value differs", f"{where}: {_describe(actual)} for {_describe(expected)}"
        return None
    if not isinstance(actual, Tensor):
        return "structure differs", f"{where}: {_describe(actual)} for {_describe(expected)}"
    if actual.dtype != expected.dtype:
        return "dtype differs", f"{where}: {actual.dtype} for {expected.dtype}"
    if list(actual.shape) != list(expected.shape):
        return "shape differs", f"{where}: {actual.shape} for {expected.shape}"
    return _close(actual.numpy(), expected.numpy(), where, "value differs")


def _close(actual, expected, where: str, kind: str):
    scale = max(1.0, float(np.nanmax(np.abs(expected), initial=0.0)))
    if np.allclose(actual, expected, rtol=RTOL, atol=RTOL * scale, equal_nan=True):
        return None
    return kind, f"{where}:\n  converted {actual!r}\n  eager     {expected!r}"


def _describe(value) -> str:
    if isinstance(value, Tensor):
        return f"a {value.dtype}{list(value.shape)} tensor"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    return repr(value)


def compare_gradients(actual, expected, static_args, eager_args, static_params, eager_params,
                      features=()):
    """Which outputs need a gradient, and the gradients of the float arguments and parameters
    of a weighted sum of the float outputs; None (no gradient) counts as zeros."""
    for i, (a, e) in enumerate(zip(_float_leaves(actual), _float_leaves(expected))):
        if a.stop_gradient != e.stop_gradient and (
                e.stop_gradient is False or "stop_gradient_of_constants" in features):
            return ("gradient differs", f"output leaf {i} has stop_gradient={a.stop_gradient} "
                                        f"converted, {e.stop_gradient} eager")
    eager_loss, static_loss = _loss(expected), _loss(actual)
    if eager_loss is None or eager_loss.stop_gradient:
        return None
    names = [f"argument {i}" for i, a in enumerate(eager_args) if isinstance(a, Tensor)]
    names += [f"parameter {i}" for i in range(len(eager_params))]
    wrt_eager = [a for a in eager_args if isinstance(a, Tensor)] + list(eager_params)
    wrt_static = [a for a in static_args if isinstance(a, Tensor)] + list(static_params)
    expected_grads = d2s.grad(eager_loss, wrt_eager, allow_unused=True)
    try:
        actual_grads = d2s.grad(static_loss, wrt_static, allow_unused=True)
    except Exception as e:
        return f"converted backward raised {_summary(e)}", _exception(e)
    for name, wrt, a, e in zip(names, wrt_eager, actual_grads, expected_grads):
        a = np.zeros(wrt.shape, np.float32) if a is None else a.numpy()
        e = np.zeros(wrt.shape, np.float32) if e is None else e.numpy()
        problem = _close(a, e, f"gradient of {name}", "gradient differs")
        if problem is not None:
            return problem
    return None


def float32_is_too_coarse(program, fn, params, args) -> bool:
    """Whether eager in float32 is itself off by more than the tolerance: eager in float64
    (same parameters) gives other outputs or gradients. There (overflowing exponentials, a
    tanh rounded to 1) a converted program that rounds differently is no failure."""
    if "batchnorm" in program.features:  # another call would move the statistics again
        return False
    results = []
    for dtype in (np.float32, np.float64):
        args_ = tensors(args, dtype)
        try:
            outputs = call(fn, program, args_)
        except Exception:  # the program is float32-only somewhere: cannot tell
            return False
        leaves, loss = _float_leaves(outputs), _loss(outputs)
        wrt = [a for a in args_ if isinstance(a, Tensor)] + list(params)
        grads = [] if loss is None or loss.stop_gradient else \
            d2s.grad(loss, wrt, allow_unused=True)
        results.append([v.numpy() for v in leaves] +
                       [np.zeros(w.shape) if g is None else g.numpy() for w, g in zip(wrt, grads)])
    return any(_close(a.astype(np.float64), b, "", "") is not None
               for a, b in zip(*results))


def _float_leaves(outputs) -> list:
    return [v for v in nest.flatten(outputs)
            if isinstance(v, Tensor) and np.dtype(v.dtype).kind == "f"]


def _loss(outputs):
    """sum(w_i * out_i) over the float tensor outputs, fixed weights; None without any."""
    leaves = _float_leaves(outputs)
    if not leaves:
        return None
    total = None
    for i, leaf in enumerate(leaves):
        weight = np.random.default_rng(i).uniform(0.5, 1.5, leaf.shape).astype(leaf.dtype)
        term = (leaf * d2s.to_tensor(weight)).sum()
        total = term if total is None else total + term
    return total


@contextlib.contextmanager
def time_limit(seconds: int):
    """Raise TimeoutError after `seconds` (main thread, where signals work)."""
    def expire(signum, frame):
        raise TimeoutError(f"the case ran past {seconds} s")

    usable = hasattr(signal, "setitimer") and \
        signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, None)
    if usable:
        signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        if usable:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)


def run_case(program: gen.Program, inputs=None) -> Failure | None:
    try:
        with time_limit(CASE_SECONDS), np.errstate(all="ignore"):  # overflow is compared too
            return check(program, inputs)
    except TimeoutError as e:
        return Failure("timeout", str(e), -1)


def report(program: gen.Program, failure: Failure) -> str:
    small, small_failure = shrinker.shrink(program, failure, run_case)
    return (f"seed {program.seed}: {failure.kind}\n{failure.detail}\n\n"
            f"--- a smaller reproducer ---\n{shrinker.reproducer(small, small_failure)}\n"
            f"--- the generated program ---\n{program.source}")


# ------------------------------------------------------------------------------ tests


@pytest.mark.parametrize("seed", range(FIRST_SEED, FIRST_SEED + CASES))
def test_converted_program_gives_what_eager_gives(seed):
    program = gen.generate(seed, FEATURES)
    failure = run_case(program)
    if failure is not None:
        pytest.fail(report(program, failure), pytrace=False)


@pytest.fixture
def native_at_once(monkeypatch):
    """Every plan builds its native form at its first call, before the next."""
    if not lower.native.available():
        pytest.skip("needs Numba")
    monkeypatch.setattr(lower.tier, "_submit", lambda function, *args: function(*args))
    d2s.set_flags({"native_after_calls": 1})


@pytest.mark.parametrize("seed", NATIVE_SEEDS)
def test_native_plans_give_what_eager_gives(seed, native_at_once):
    program = gen.generate(seed, FEATURES)
    program = dataclasses.replace(program, inputs=[a for args in program.inputs
                                                   for a in (args, args)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", lower.NativeTierWarning)  # a region left interpreted
        failure = run_case(program)
    if failure is not None:
        pytest.fail(f"native: {report(program, failure)}", pytrace=False)


def test_every_native_build_of_a_loop_with_counters_in_a_backward_plan_succeeds(native_at_once):
    """A region's own code keeps a loop counter an array when its start is an argument
    (the build failed there, leaving the plan interpreted)."""
    program = gen.generate(336, frozenset(gen.FEATURES))
    program = dataclasses.replace(program, inputs=[a for args in program.inputs
                                                   for a in (args, args)][:4])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", lower.NativeTierWarning)
        failure = run_case(program)
    assert failure is None, report(program, failure)
    assert [str(w.message) for w in caught if "could not build" in str(w.message)] == []


def test_the_generated_programs_are_well_formed_and_use_every_construct():
    programs = [gen.generate(s, FEATURES) for s in range(FIRST_SEED, FIRST_SEED + 200)]
    assert [p.seed for p in programs if not shrinker.well_formed(ast.parse(p.source))] == []
    assert FEATURES - set().union(*(p.features for p in programs)) == set()


def test_known_failing_constructs_are_features():
    assert set(gen.KNOWN_FAILING) <= set(gen.FEATURES)


if __name__ == "__main__":  # python -m tests.dy2static.test_equivalence_property FIRST COUNT
    first, count = (int(a) for a in sys.argv[1:3])
    classes: dict[str, list] = {}
    for seed in range(first, first + count):
        program = gen.generate(seed, FEATURES)
        failure = run_case(program)
        if failure is not None:
            classes.setdefault(failure.kind, []).append((seed, failure))
            print(f"seed {seed}: {failure.kind}: {failure.detail.splitlines()[0]}", flush=True)
    for kind, seeds in classes.items():
        print(f"{kind}: {len(seeds)} seeds, e.g. {[s for s, _ in seeds[:10]]}")
