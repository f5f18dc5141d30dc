"""``multi_tensor_adam``: consecutive Adam updates become one op over flat arrays, with
the per-parameter ops' bits, run after run (the flat results read back without copies)."""

import numpy as np
import pytest

from dy2stat.runtime import build, executor
from dy2stat.runtime.executor import Scope
from dy2stat.runtime.ir import Program
from dy2stat.runtime.ops import optimizer as update_ops
from dy2stat.runtime.passes import multi_tensor_adam
from dy2stat.runtime.verify import verify

SHAPES = {"w1": (3, 4), "w2": (5,), "w3": (2, 2, 2)}


def _updates(kinds, dtype="float32", rates=("lr",)):
    """A program of one update per ``(kind, param, rate)`` in ``kinds``, reading each
    parameter's gradient (fed); returns it and a first scope."""
    rng = np.random.default_rng(0)
    p = Program()
    g = p.global_block()
    for rate in rates:
        g.create_var((1,), dtype, name=rate, is_data=True)
    scope = {}
    for name, shape in SHAPES.items():
        g.create_var(shape, dtype, name=f"{name}@GRAD", is_data=True)
        for suffix, value in (("", rng.standard_normal(shape)), ("_m1", np.zeros(shape)),
                              ("_m2", np.zeros(shape)), ("_b1", np.full([1], 0.9)),
                              ("_b2", np.full([1], 0.999))):
            var = g.create_var(value.shape, dtype, name=name + suffix, persistable=True)
            scope[var.name] = value.astype(dtype)
    for kind, name, rate, attrs in kinds:
        ins = [g.var(n) for n in (name, f"{name}@GRAD", f"{name}_m1", f"{name}_m2",
                                  f"{name}_b1", f"{name}_b2", rate)]
        outs = build.append(g, kind, ins, attrs)
        for op_out, target in zip(g.ops[-1].outputs.values(),
                                  (name, f"{name}_m1", f"{name}_m2", f"{name}_b1",
                                   f"{name}_b2")):
            op_out[0] = target  # the update writes the persistable variables
        del outs
    return p, scope


def _feeds(dtype, steps=3, rates=("lr",)):
    rng = np.random.default_rng(1)
    return [{**{f"{n}@GRAD": rng.standard_normal(s).astype(dtype) for n, s in SHAPES.items()},
             **{r: np.array([0.01 * (k + 1)], dtype) for k, r in enumerate(rates)}}
            for _ in range(steps)]


def _run_both(program, scope, feeds):
    """Each step's scope with the pass (and the plan passes) and without, compared bit
    for bit; the merged plan's compiled program is returned."""
    merged = executor.compile(program, list(feeds[0]), [])
    plain = executor.compile(program, list(feeds[0]), [], optimize=False)
    a, b = Scope(dict(scope)), Scope(dict(scope))
    for feed in feeds:
        merged.run(feed, a)
        plain.run(feed, b)
        for name in scope:
            assert a[name].shape == b[name].shape, name
            assert a[name].tobytes() == b[name].tobytes(), name
    return merged.compiled, a


@pytest.mark.parametrize("kind,attrs", [("adam", {"epsilon": 1e-6}),
                                        ("adamw", {"coeff": 0.1, "beta1": 0.8})])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_updates_merged_give_the_same_bits_run_after_run(kind, attrs, dtype):
    program, scope = _updates([(kind, n, "lr", attrs) for n in SHAPES], dtype)
    compiled, result = _run_both(program, scope, _feeds(dtype))
    assert [op.type for op in compiled.global_block().ops] == ["multi_tensor_adam"]
    verify(multi_tensor_adam(program))
    # The results are views of one flat array per operand: the next run reads it as is.
    assert all(result[n].base is not None for n in SHAPES)
    assert len({id(result[n].base) for n in SHAPES}) == 1
    assert not np.array_equal(result["w1"], scope["w1"])  # it trained


def test_parameters_whose_powers_differ_keep_their_own():
    """A parameter that took fewer steps (frozen for a while) has its own bias
    correction."""
    program, scope = _updates([("adam", n, "lr", {}) for n in SHAPES])
    scope["w2_b1"] = np.full([1], 0.9 ** 4, "float32")
    scope["w3_b2"] = np.full([1], 0.999 ** 7, "float32")
    _run_both(program, scope, _feeds("float32"))


def test_what_cannot_merge_stays_apart():
    """A parameter updated twice, another learning rate, other attrs, another kind."""
    kinds = [("adam", "w1", "lr", {}), ("adam", "w2", "lr", {}),
             ("adam", "w1", "lr", {}),  # w1 again: reads what the first update wrote
             ("adam", "w3", "lr", {}),
             ("adam", "w2", "lr2", {}),  # another rate
             ("adam", "w3", "lr2", {"epsilon": 1e-3}),  # other attrs
             ("adamw", "w1", "lr2", {})]
    program, scope = _updates(kinds, rates=("lr", "lr2"))
    compiled, _ = _run_both(program, scope, _feeds("float32", rates=("lr", "lr2")))
    ops = compiled.global_block().ops
    assert [op.type for op in ops] == ["multi_tensor_adam", "multi_tensor_adam", "adam",
                                       "adam", "adamw"]
    assert [ops[0].inputs["Param"], ops[1].inputs["Param"]] == [["w1", "w2"], ["w1", "w3"]]


def test_views_in_another_order_are_copied():
    flat = np.arange(9.0)
    a, b = update_ops._split(flat, [np.zeros(4), np.zeros((5,))])
    assert update_ops._joined(np, [a, b]) is flat
    swapped = update_ops._joined(np, [b, a])
    assert swapped is not flat and swapped.tolist() == [4, 5, 6, 7, 8, 0, 1, 2, 3]
    assert update_ops._joined(np, [a[:2], b]) is not flat
