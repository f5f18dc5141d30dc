"""Every function of ``api_cases``: eager against NumPy, gradients against float64 finite
differences (second derivatives where smooth), the same call in a static program (values
and static gradients), converted with ``to_static`` (equal to eager, values and gradients,
with a -1 batch dim), and saved with ``jit.save`` and run again after ``jit.load`` (in
this process and in a fresh one)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import jit
from dy2stat.runtime import passes, serialize, verify
from dy2stat.static import InputSpec
from tests.ops.api_cases import CASES
from tests.static.helpers import building, run

IDS = [c.id for c in CASES]
assert len(set(IDS)) == len(IDS), "case ids must be unique"


def _flat(out):
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _flat(o)]
    return [out]


def _tensors(case, requires_grad=False):
    return [d2s.to_tensor(x, stop_gradient=not (requires_grad and x.dtype.kind == "f"))
            for x in case.inputs]


def _float_inputs(case):
    return [i for i, x in enumerate(case.inputs) if x.dtype.kind == "f"] if case.grad else []


def _check(got, want, rtol=1e-6, atol=1e-9):
    got, want = _flat(got), [np.asarray(w) for w in _flat(want)]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = g.numpy() if hasattr(g, "numpy") else np.asarray(g)
        assert list(g.shape) == list(w.shape)
        if w.dtype == bool or w.dtype.kind in "iu":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def _weights(outs):
    rng = np.random.default_rng(1)
    return [rng.standard_normal(o.shape) if np.dtype(o.dtype).kind == "f" else None
            for o in outs]


def _loss(outs, weights):
    """sum(w * out) over the float outputs (its gradient is each output weighted)."""
    terms = [(o * d2s.to_tensor(w.astype(o.dtype))).sum()
             for o, w in zip(outs, weights) if w is not None]
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return total


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_eager_matches_numpy(case):
    _check(case.call(*_tensors(case)), case.ref(*case.inputs))


GRAD = [c for c in CASES if _float_inputs(c)]


def _numeric(f, arrays, i, eps=1e-6):
    x = arrays[i]
    grad = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        saved = x[idx]
        x[idx] = saved + eps
        plus = f()
        x[idx] = saved - eps
        minus = f()
        x[idx] = saved
        grad[idx] = (plus - minus) / (2 * eps)
    return grad


@pytest.mark.parametrize("case", GRAD, ids=[c.id for c in GRAD])
def test_gradients_match_finite_differences(case):
    arrays = [x.copy() for x in case.inputs]
    checked = _float_inputs(case)
    weights = _weights(_flat(case.call(*_tensors(case))))
    tensors = [d2s.to_tensor(x, stop_gradient=i not in checked) for i, x in enumerate(arrays)]
    first = _loss(_flat(case.call(*tensors)), weights)
    grads = d2s.grad(first, [tensors[i] for i in checked], create_graph=case.double)

    def f():
        with d2s.no_grad():
            ts = [d2s.to_tensor(x) for x in arrays]
            return float(_loss(_flat(case.call(*ts)), weights))

    for i, g in zip(checked, grads):
        np.testing.assert_allclose(g.numpy(), _numeric(f, arrays, i), rtol=1e-5, atol=1e-7)
    if not case.double:
        return
    rng = np.random.default_rng(2)
    directions = [rng.standard_normal(arrays[i].shape) for i in checked]
    second = _loss(grads, directions)
    seconds = d2s.grad(second, [tensors[i] for i in checked], allow_unused=True)

    def g():
        ts = [d2s.to_tensor(x, stop_gradient=i not in checked) for i, x in enumerate(arrays)]
        gs = d2s.grad(_loss(_flat(case.call(*ts)), weights), [ts[i] for i in checked])
        return float(_loss(gs, directions))

    for i, h in zip(checked, seconds):
        analytic = np.zeros(arrays[i].shape) if h is None else h.numpy()
        np.testing.assert_allclose(analytic, _numeric(g, arrays, i), rtol=1e-4, atol=1e-6)


def _specs(case):
    """Input specs: a -1 first dim on the first input when the case allows it."""
    specs = []
    for k, x in enumerate(case.inputs):
        shape = list(x.shape)
        if k == 0 and case.batch and shape:
            shape[0] = -1
        specs.append(InputSpec(shape, str(x.dtype), name=f"x{k}"))
    return specs


def _static_program(case):
    """(program, feed, fetch names, output count): the call on data variables (a -1
    batch dim) and, for a differentiable case, the gradients of sum(w * out) w.r.t.
    its float inputs (the weights fed as data)."""
    checked = _float_inputs(case)
    weights = _weights(_flat(case.call(*_tensors(case))))
    float_weights = [w for w in weights if w is not None]
    with building() as (main, _):
        data = [d2s.static.data(s.name, s.shape, s.dtype) for s in _specs(case)]
        outs = _flat(case.call(*data))
        grads = []
        if checked:
            float_outs = [o for o, w in zip(outs, weights) if w is not None]
            seeds = [d2s.static.data(f"w{k}", list(w.shape), str(o.dtype))
                     for k, (o, w) in enumerate(zip(float_outs, float_weights))]
            grads = d2s.static.gradients(float_outs, [data[i] for i in checked],
                                         target_gradients=seeds)
    feed = {f"x{k}": x for k, x in enumerate(case.inputs)}
    if checked:
        feed.update({f"w{k}": w for k, w in enumerate(float_weights)})
    fetch = [v.name for v in outs + grads]
    return main, feed, fetch, len(outs)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_static_program(case):
    """Built into a program, saved as JSON and loaded again (the loader validates every
    op, the gradient ops too), run by the executor: the values are NumPy's and the
    static gradients eager's."""
    main, feed, fetch, n_out = _static_program(case)
    loaded, _, fetch = serialize.program_from_json(serialize.program_to_json(main, [], fetch))
    values = run(loaded, feed, fetch)
    _check(values[:n_out], case.ref(*case.inputs))
    checked = _float_inputs(case)
    if checked:
        tensors = _tensors(case, requires_grad=True)
        weights = _weights(_flat(case.call(*_tensors(case))))
        expected = d2s.grad(_loss(_flat(case.call(*tensors)), weights),
                            [tensors[i] for i in checked])
        _check(values[n_out:], [e.numpy() for e in expected])


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_graph_passes_keep_the_results(case):
    """Every graph pass in turn (the program verified after each) changes no result."""
    main, feed, fetch, _ = _static_program(case)
    expected = run(main, feed, fetch)
    program = main
    for name in passes.PASSES:
        program = passes.run_passes(program, [name], keep=fetch)
        verify.verify(program, feed_names=list(feed))
    _check(run(program, feed, fetch), expected, rtol=1e-12, atol=1e-12)


def _converted(case):
    """``case.call`` converted, with one named parameter per input (an input_spec
    describes named parameters)."""
    n = len(case.inputs)
    if n == 1:
        def function(x0):
            return case.call(x0)
    elif n == 2:
        def function(x0, x1):
            return case.call(x0, x1)
    else:
        def function(x0, x1, x2):
            return case.call(x0, x1, x2)
    return jit.to_static(function, input_spec=_specs(case))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_converted_equals_eager(case):
    checked = _float_inputs(case)
    eager_in, static_in = _tensors(case, True), _tensors(case, True)
    eager_outs = _flat(case.call(*eager_in))
    static_outs = _flat(_converted(case)(*static_in))
    _check(static_outs, [o.numpy() for o in eager_outs], rtol=0, atol=0)
    if checked:
        weights = _weights(eager_outs)
        _loss(eager_outs, weights).backward()
        _loss(static_outs, weights).backward()
        for i in checked:
            np.testing.assert_allclose(static_in[i].grad.numpy(), eager_in[i].grad.numpy(),
                                       rtol=1e-12, atol=1e-12)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Every case saved by jit.save (with its specs), with its inputs and expected outputs."""
    folder = tmp_path_factory.mktemp("saved_ops")
    for k, case in enumerate(CASES):
        fn = _converted(case)
        expected = _flat(fn(*_tensors(case)))
        jit.save(fn, str(folder / f"case{k}"), input_spec=_specs(case))
        np.savez(folder / f"case{k}.npz", *case.inputs)
        np.savez(folder / f"case{k}.out.npz", *[e.numpy() for e in expected])
    return folder


@pytest.mark.parametrize("k", range(len(CASES)), ids=IDS)
def test_saved_program_loads_and_runs(saved, k):
    loaded = jit.load(str(saved / f"case{k}"))
    inputs = np.load(saved / f"case{k}.npz")
    expected = np.load(saved / f"case{k}.out.npz")
    outs = loaded(*[d2s.to_tensor(inputs[f"arr_{i}"]) for i in range(len(inputs.files))])
    _check(outs, [expected[f"arr_{i}"] for i in range(len(expected.files))], rtol=0, atol=0)


LOADER = textwrap.dedent('''
    import json, sys
    import numpy as np
    import dy2stat as d2s
    from dy2stat import jit

    folder, count = sys.argv[1], int(sys.argv[2])
    worst = {}
    for k in range(count):
        inputs = np.load(f"{folder}/case{k}.npz")
        expected = np.load(f"{folder}/case{k}.out.npz")
        model = jit.load(f"{folder}/case{k}")
        outs = model(*[d2s.to_tensor(inputs[f"arr_{i}"]) for i in range(len(inputs.files))])
        outs = outs if isinstance(outs, (list, tuple)) else [outs]
        diffs = [float(np.abs(o.numpy().astype(float) - expected[f"arr_{i}"].astype(float))
                       .max(initial=0.0)) for i, o in enumerate(outs)]
        worst[k] = max(diffs) if len(outs) == len(expected.files) else -1.0
    print(json.dumps(worst))
''')


def test_saved_programs_run_in_a_fresh_process(saved):
    """The loader imports none of the test code: each program runs from its files."""
    result = subprocess.run([sys.executable, "-c", LOADER, str(saved), str(len(CASES))],
                            capture_output=True, text=True, check=True)
    worst = json.loads(result.stdout)
    assert {IDS[int(k)]: v for k, v in worst.items() if v != 0.0} == {}


def test_pow_by_a_python_float_keeps_its_precision_in_the_gradient():
    """d x**p / dx = p x**(p-1) with p - 1 computed at the exponent's precision (it once
    became a float32 0-d array: 1e-7 off, so converted code, exact, differed)."""
    x = d2s.to_tensor(np.array([0.7, 2.3]), stop_gradient=False)
    (g,) = d2s.grad((x ** (1.0 / 3.0)).sum(), [x])
    np.testing.assert_allclose(g.numpy(), (1 / 3) * np.array([0.7, 2.3]) ** (-2 / 3),
                               rtol=1e-15)


def item_of_a_sum(x):
    return x.sum().item() * 2


def test_item_in_converted_code_stands_for_the_value():
    x = d2s.to_tensor(np.array([1.0, 2.5], "float32"))
    assert item_of_a_sum(x) == 7.0
    converted = jit.to_static(item_of_a_sum)(x)
    assert converted.shape == [] and float(converted) == 7.0


def test_view_of_a_dtype_says_to_use_astype():
    with pytest.raises(TypeError, match="use astype"):
        d2s.ones([2, 3]).view("float32")
