"""Programs with many blocks: new names stay unique, and building a backward grows with
the program, not with its square (a model calling a helper full of tensor-dependent
`if`s for each layer of a LayerList traces thousands of blocks; checking each new
name against every block, and walking every branch again for each choice of every
cond, made such a backward take minutes)."""

from __future__ import annotations

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import static
from dy2stat.runtime import backward, serialize
from dy2stat.runtime.ir import Program
from dy2stat.runtime.prune import copy_for_pass
from dy2stat.static import framework


def _names(program: Program) -> set:
    return {n for b in program.blocks for n in b.vars}


def _many_blocks(program: Program, count: int) -> None:
    for k in range(count):
        program.create_block(0).create_var((1,), "float32", name=f"tmp_{k}")


def test_new_names_skip_every_name_any_block_holds():
    program = Program()
    program.unique_name("tmp")  # the set of used names exists from here on
    _many_blocks(program, 5)  # names given, as a user or a loaded program gives them
    sub = program.create_block(0)
    for _ in range(20):
        name = program.unique_name("tmp")
        assert name not in _names(program)
        sub.create_var((1,), "float32", name=name)


def test_copies_and_loaded_programs_do_not_reuse_their_names():
    program = Program()
    _many_blocks(program, 6)
    copied, _ = copy_for_pass(program, (), "test")
    loaded = serialize.program_from_dict(serialize.program_to_dict(program))
    for other in (copied, loaded):
        made = [other.unique_name("tmp") for _ in range(10)]
        assert not set(made) & _names(program)
        assert len(set(made)) == len(made)


def test_a_replaced_table_of_variables_is_learned_again():
    program = Program()
    block = program.create_block(0)
    program.unique_name("tmp")
    block.vars = {"tmp_1": block.create_var((1,), "float32", name="x"),
                  "tmp_2": block.vars["x"]}
    program._forget_names()
    assert {program.unique_name("tmp") for _ in range(3)}.isdisjoint({"tmp_1", "tmp_2"})


def _chain_of_conds(count: int):
    """A static program of ``count`` conds one after another, each with a cond in each
    branch, all on x: the forward program and the names whose gradients are wanted."""
    main, startup = Program(), Program()
    with static.program_guard(main, startup), framework.static_guard(True):
        x = static.data("x", [3], "float32")
        x.stop_gradient = False
        y = x
        for k in range(count):
            p = d2s.sum(y) > float(k % 3 - 1)

            def inner(v=y, k=k):
                return static.nn.cond(d2s.mean(v) > 0.0, lambda: v * 2.0 + k,
                                      lambda: d2s.tanh(v))

            y = static.nn.cond(p, inner, lambda v=y: static.nn.cond(
                d2s.max(v) > 0.5, lambda: v - 1.0, lambda: v * 0.5))
        d2s.sum(y)
    return main, [x.name]


def _walks(monkeypatch, count: int) -> int:
    """How many times finding the deciding conds of ``_chain_of_conds(count)`` walks
    the ops of a sub-block."""
    program, sources = _chain_of_conds(count)
    calls = [0]
    name = "_walk_reach" if hasattr(backward, "_walk_reach") else "_requires"
    walk = getattr(backward, name)

    def counted(ops, block, *args, **kwargs):
        calls[0] += block.idx != 0
        return walk(ops, block, *args, **kwargs)

    monkeypatch.setattr(backward, name, counted)
    backward.gradient_deciding_ops(program, sources)
    return calls[0]


def test_finding_the_deciding_conds_walks_each_branch_a_bounded_number_of_times(monkeypatch):
    """Twice the conds, about twice the walks through their blocks (it was four times:
    every choice walked every block of the program three times)."""
    small, large = _walks(monkeypatch, 12), _walks(monkeypatch, 24)
    assert large <= 2.5 * small, (small, large)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_long_chain_of_nested_conds_gives_eager_gradients(sign):
    """The same values and gradient as eager mode for a function with twelve nested
    tensor-dependent `if`s one after another."""

    def fn(x):
        for k in range(12):
            if x.sum() > k % 3 - 1:
                x = x * 2.0 + k if x.mean() > 0 else d2s.tanh(x)
            else:
                x = x - 1.0 if x.max() > 0.5 else x * 0.5
        return x

    data = np.array([0.5, -0.25, 1.0], np.float32) * sign
    results = []
    for f in (fn, d2s.jit.to_static(fn)):
        x = d2s.to_tensor(data, stop_gradient=False)
        out = f(x)
        (g,) = d2s.grad(out.sum(), [x])
        results.append((out.numpy(), g.numpy()))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-6)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-6)
