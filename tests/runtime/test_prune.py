"""prune (inference subsets) and dead-code elimination."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dy2stat.runtime import serialize as S
from dy2stat.runtime.ir import Operator, Program
from dy2stat.runtime.prune import clone_program, dead_code_elimination, prune
from tests.runtime import programs as P


def ops_of(program, block=0):
    return [(op.type, op.output_names()) for op in program.blocks[block].ops]


def reloads(program, feed, fetch):
    """The program passes the loader's validation (and round-trips)."""
    loaded, _, _ = S.program_from_json(S.program_to_json(program, feed, fetch), "pruned.json")
    assert str(loaded) == str(program)


def test_prune_drops_dead_ops_and_vars():
    program, params = P.mlp()
    before = str(program)
    version = program.version
    pruned = prune(program, ["x"], ["y"])
    assert str(program) == before and program.version == version  # input untouched
    assert [t for t, _ in ops_of(pruned)] == ["matmul", "add", "relu", "clip"]
    assert "dead" not in pruned.global_block().vars
    assert [v.name for v in pruned.persistables()] == ["fc_0.w", "fc_0.b"]
    reloads(pruned, ["x"], ["y"])
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    assert np.array_equal(P.run(pruned, {"x": x}, params, ["y"])[0],
                          P.run(program, {"x": x}, params, ["y"])[0])


def test_prune_is_a_deep_copy():
    program, _ = P.mlp()
    pruned = prune(program, ["x"], ["y"])
    pruned.global_block().ops[3].attrs["max"] = 1.0
    pruned.global_block().vars["x"].shape = (1, 4)
    assert program.global_block().ops[3].attrs["max"] == 6.0
    assert program.global_block().vars["x"].shape == (-1, 4)
    assert pruned.global_block().program is pruned


def test_prune_only_keeps_parameters_the_fetch_needs():
    program, _ = P.mlp()
    pruned = prune(program, ["x"], ["h"])
    assert ops_of(pruned) == [("matmul", ["h"])]
    assert [v.name for v in pruned.persistables()] == ["fc_0.w"]
    assert sorted(pruned.global_block().vars) == ["fc_0.w", "h", "x"]


def test_feeds_cut_the_graph():
    program, params = P.mlp()
    pruned = prune(program, ["h"], ["y"])
    assert [t for t, _ in ops_of(pruned)] == ["add", "relu", "clip"]
    glob = pruned.global_block()
    assert "x" not in glob.vars and "fc_0.w" not in glob.vars
    assert glob.vars["h"].is_data  # a fed value becomes a data variable
    assert not program.global_block().vars["h"].is_data
    reloads(pruned, ["h"], ["y"])
    h = np.ones((2, 3), np.float32)
    expected = np.clip(np.maximum(h + params["fc_0.b"], 0), None, 6.0)
    np.testing.assert_array_equal(P.run(pruned, {"h": h}, params, ["y"])[0], expected)


def test_several_fetches():
    program, _ = P.mlp()
    pruned = prune(program, ["x"], ["y", "dead"])
    assert [t for t, _ in ops_of(pruned)] == ["matmul", "add", "relu", "clip", "scale"]


def test_fetch_that_cannot_be_computed_is_named():
    program, _ = P.mlp()
    with pytest.raises(ValueError, match=r"cannot compute fetch 'y': it needs the data variable "
                                         r"'x', which is not fed \(feeds: none\)"):
        prune(program, [], ["y"])
    with pytest.raises(ValueError, match="cannot compute fetch 'dead'"):
        prune(program, ["h2"], ["y", "dead"])  # y is fine from h2; dead needs x


def test_fetch_of_a_value_no_op_computes():
    program, _ = P.mlp()
    program.global_block().create_var((2,), "float32", name="orphan")
    with pytest.raises(ValueError, match="cannot compute fetch 'orphan': it needs 'orphan', "
                                         "which is not fed"):
        prune(program, ["x"], ["orphan"])


def test_unknown_feed_or_fetch():
    program, _ = P.mlp()
    with pytest.raises(ValueError, match="fetch 'nope' is not a variable"):
        prune(program, ["x"], ["nope"])
    with pytest.raises(ValueError, match="feed 'nope' is not a variable"):
        prune(program, ["nope"], ["y"])
    with pytest.raises(ValueError, match="nothing to fetch"):
        prune(program, ["x"], [])


def test_fetching_a_feed_or_a_parameter():
    program, _ = P.mlp()
    assert ops_of(prune(program, ["x"], ["x"])) == []
    pruned = prune(program, [], ["fc_0.b"])
    assert ops_of(pruned) == [] and list(pruned.global_block().vars) == ["fc_0.b"]


def test_variables_are_accepted_for_names():
    program, _ = P.mlp()
    glob = program.global_block()
    pruned = prune(program, [glob.vars["x"]], [glob.vars["y"]])
    assert len(pruned.global_block().ops) == 4


def test_prune_keeps_and_renumbers_sub_blocks():
    program = P.with_cond()
    pruned = prune(program, ["x", "pred"], ["w"])
    # the second cond (z, blocks 3 and 4) is dead
    assert [t for t, _ in ops_of(pruned)] == ["cond", "add"]
    assert len(pruned.blocks) == 3 and "z" not in pruned.global_block().vars
    cond = pruned.global_block().ops[0]
    assert (cond.attrs["true_block"], cond.attrs["false_block"]) == (1, 2)
    assert [b.parent_idx for b in pruned.blocks] == [-1, 0, 0]
    reloads(pruned, ["x", "pred"], ["w"])
    x = np.array([-1.0, 2.0], np.float32)
    for pred in (True, False):
        feed = {"x": x, "pred": np.array(pred)}
        np.testing.assert_array_equal(P.run(pruned, feed, {}, ["w"])[0],
                                      P.run(program, feed, {}, ["w"])[0])


def test_prune_renumbers_when_an_early_block_is_dropped():
    program = P.with_cond()
    pruned = prune(program, ["x", "pred"], ["z"])
    assert [t for t, _ in ops_of(pruned)] == ["cond"]
    cond = pruned.global_block().ops[0]
    assert (cond.attrs["true_block"], cond.attrs["false_block"]) == (1, 2)
    assert [op.type for op in pruned.blocks[1].ops] == ["neg"]
    assert [op.type for op in pruned.blocks[2].ops] == ["exp"]
    assert all(b.idx == i for i, b in enumerate(pruned.blocks))
    reloads(pruned, ["x", "pred"], ["z"])


def test_prune_keeps_a_while_loop_and_what_it_captures():
    program = P.with_while()
    pruned = prune(program, ["n"], ["i"])
    assert [t for t, _ in ops_of(pruned)] == ["full", "while"]
    assert len(pruned.blocks) == 3 and [v.name for v in pruned.persistables()] == ["step"]
    reloads(pruned, ["n"], ["i"])
    feed, params = {"n": np.array(7)}, {"step": np.array(2)}
    assert P.run(pruned, feed, params, ["i"])[0] == 8
    assert [t for t, _ in ops_of(prune(program, ["n"], ["dead"]))] == ["neg"]
    assert len(prune(program, ["n"], ["dead"]).blocks) == 1


def test_sub_block_reads_of_outer_names_are_kept():
    """A sub-block that reads an outer value directly (not listed as an Input)."""
    program = Program()
    g = program.global_block()
    g.create_var((2,), "float32", name="x", is_data=True)
    g.create_var((), "bool", name="pred", is_data=True)
    e = P.op(g, "exp", {"X": "x"}, out="e")
    tb = program.create_block(0)
    t = P.op(tb, "add", {"X": "x", "Y": "e"})
    fb = program.create_block(0)
    f = P.op(fb, "neg", {"X": "x"})
    g.create_var((2,), "float32", name="y")
    g.append_op(Operator("cond", {"Cond": ["pred"], "Input": ["x"]}, {"Out": ["y"]},
                         {"true_block": tb.idx, "false_block": fb.idx,
                          "true_outs": [t], "false_outs": [f]}))
    pruned = prune(program, ["x", "pred"], ["y"])
    assert [t for t, _ in ops_of(pruned)] == ["exp", "cond"]
    assert e in pruned.global_block().vars


def test_dead_code_elimination():
    program, _ = P.mlp()
    result = dead_code_elimination(program, ["y"])
    assert [t for t, _ in ops_of(result)] == ["matmul", "add", "relu", "clip"]
    assert "dead" not in result.global_block().vars
    assert [t for t, _ in ops_of(program)][-1] == "scale"  # input untouched
    # data and persistable variables stay even when unused
    result = dead_code_elimination(program, ["h"])
    assert sorted(result.global_block().vars) == ["fc_0.b", "fc_0.w", "h", "x"]
    reloads(result, ["x"], ["h"])


def test_dead_code_elimination_keeps_effects():
    program, _ = P.mlp()
    g = program.global_block()
    # a parameter update (writes a persistable) and a random op: not dead code
    g.append_op(Operator("scale", {"X": ["fc_0.b"]}, {"Out": ["fc_0.b"]}, {"scale": 0.5}))
    P.op(g, "uniform", {}, {"shape": [2]}, out="noise")
    P.op(g, "exp", {"X": "y"}, out="unused")
    result = dead_code_elimination(program, ["y"])
    assert [t for t, _ in ops_of(result)] == ["matmul", "add", "relu", "clip", "scale", "uniform"]
    # prune (inference) drops both: they do not contribute to the fetch
    assert [t for t, _ in ops_of(prune(program, ["x"], ["y"]))] == [
        "matmul", "add", "relu", "clip"]


def test_dead_code_elimination_of_unknown_name():
    program, _ = P.mlp()
    with pytest.raises(ValueError, match="'nope' is not a variable"):
        dead_code_elimination(program, ["nope"])


def test_clone_program_keeps_every_block():
    program = P.with_cond()
    copy = clone_program(program)
    assert str(copy) == str(program) and len(copy.blocks) == 5
    copy.blocks[1].ops[0].attrs["x"] = 1
    assert "x" not in program.blocks[1].ops[0].attrs


# ------------------------------------------------- random programs (hypothesis)

_UNARY = ["relu", "exp", "neg", "tanh", "sin"]
_BINARY = ["add", "multiply", "subtract", "maximum"]


@st.composite
def random_programs(draw):
    """A random DAG of elementwise ops over two data inputs and one parameter."""
    program = Program()
    g = program.global_block()
    g.create_var((3,), "float64", name="a", is_data=True)
    g.create_var((3,), "float64", name="b", is_data=True)
    g.create_var((3,), "float64", name="p", persistable=True)
    names = ["a", "b", "p"]
    for _ in range(draw(st.integers(1, 12))):
        if draw(st.booleans()):
            t = draw(st.sampled_from(_UNARY))
            names.append(P.op(g, t, {"X": draw(st.sampled_from(names))}))
        else:
            t = draw(st.sampled_from(_BINARY))
            names.append(P.op(g, t, {"X": draw(st.sampled_from(names)),
                                     "Y": draw(st.sampled_from(names))}))
    computed = names[3:]
    fetch = draw(st.lists(st.sampled_from(computed), min_size=1, max_size=3, unique=True))
    return program, fetch


@settings(max_examples=80, deadline=None)
@given(case=random_programs())
def test_pruned_random_programs_compute_the_same(case):
    program, fetch = case
    pruned = prune(program, ["a", "b"], fetch)
    rng = np.random.default_rng(0)
    feed = {"a": rng.standard_normal(3), "b": rng.standard_normal(3)}
    params = {"p": rng.standard_normal(3)}
    used = {n for op in pruned.global_block().ops for n in op.input_names()}
    pruned_feed = {k: v for k, v in feed.items() if k in pruned.global_block().vars}
    pruned_params = {v.name: params[v.name] for v in pruned.persistables()}
    for a, b in zip(P.run(program, feed, params, fetch),
                    P.run(pruned, pruned_feed, pruned_params, fetch)):
        np.testing.assert_array_equal(a, b)
    # minimal: every kept op feeds a fetch or another kept op
    for op in pruned.global_block().ops:
        assert any(n in used or n in fetch for n in op.output_names())
    reloads(pruned, list(pruned_feed), fetch)
    dce = dead_code_elimination(program, fetch)
    assert ops_of(dce) == ops_of(pruned)


def test_prune_keeps_checks_it_can_run_and_drops_the_rest():
    """An assert on the input stays (with the op it reads); one on a label that is
    not fed goes, without an error."""
    p = Program()
    g = p.global_block()
    g.create_var((-1, 3), "float32", name="x", is_data=True)
    g.create_var((-1,), "int64", name="label", is_data=True)
    total = P.op(g, "sum", {"X": "x"}, {"axis": None}, out="total")
    positive = P.op(g, "greater_than", {"X": total, "Y": "total"}, out="positive")
    g.append_op(Operator("assert", {"Cond": [positive]}, {}, {"message": "x"}))
    bad = P.op(g, "less_than", {"X": "label", "Y": "label"}, out="bad")
    g.append_op(Operator("assert", {"Cond": [bad]}, {}, {"message": "label"}))
    y = P.op(g, "scale", {"X": "x"}, {"scale": 2.0}, out="y")
    pruned = prune(p, ["x"], [y])
    assert ops_of(pruned) == [("sum", ["total"]), ("greater_than", ["positive"]),
                              ("assert", []), ("scale", ["y"])]
    assert pruned.global_block().ops[2].attrs["message"] == "x"
    assert "label" not in pruned.global_block().vars
    reloads(pruned, ["x"], [y])
