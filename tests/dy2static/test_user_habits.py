"""Habits of code written for eager frameworks that conversion must keep: module functions
called in loops, lists grown in loops, values that change rank or become tensors in a loop.
Each function runs eagerly and converted on inputs that take each path; values and
gradients must agree."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import nn
from dy2stat.dy2static.ifelse import BranchMismatchError
from dy2stat.dy2static.loops import LoopVariableError
from dy2stat.static import InputSpec
from tests.dy2static.test_regressions import MIX, NEG, POS, assert_converted_equals_eager


def _count(n=3):
    return d2s.to_tensor(n)


# A module whose function shares a name with a mutating method (set.add, list.pop,
# dict.update) is read, not changed: it must not become a loop's carried value.


def module_add_in_tensor_loop(x):
    i = d2s.to_tensor(0)
    while i < _count():
        x = d2s.add(x, x * 0.5)
        i += 1
    return x


def module_calls_in_python_and_tensor_branches(x):
    for _ in range(2):
        if x.mean() > 0:
            x = d2s.add(x, d2s.ones_like(x))
        else:
            x = nn.functional.relu(d2s.add(x, x))
    return x + math.pi


def aliased_module_in_nested_loops(x):
    import dy2stat as paddle

    i = paddle.to_tensor(0)
    while i < 2:
        for j in range(2):
            x = paddle.add(x, paddle.full_like(x, float(j)))
        i += 1
    return x


def test_module_functions_named_like_mutating_methods_in_loops():
    for fn in (module_add_in_tensor_loop, module_calls_in_python_and_tensor_branches,
               aliased_module_in_nested_loops):
        assert_converted_equals_eager(fn, POS, NEG, MIX)


# Lists grown by a different number of items on each path of a tensor `if` (an append
# after a tensor `break`, an append in one branch) become tensor arrays whose length the
# program knows when it runs.


def append_after_tensor_break(x):
    outs = []
    i = d2s.to_tensor(0)
    while i < 5:
        if x.sum() > 12:
            break
        outs.append(x * i.astype("float32"))
        x = x + 1
        i += 1
    return d2s.stack(outs).sum(axis=0) if outs else x


def append_after_continue(x):
    outs = [x]
    for i in range(4):
        x = x + 1
        if x.mean() > 2:
            continue
        outs.append(x * float(i))
    return d2s.concat(outs, axis=0)


def append_in_one_branch_then_stack(x):
    feats = [x]
    if x.mean() > 0:
        feats.append(x * 2)
        feats.append(x * 3)
    else:
        feats.append(-x)
    return d2s.stack(feats).sum(axis=0) + len(feats)


def test_lists_grown_differently_by_the_branches_of_a_tensor_if():
    for fn in (append_after_tensor_break, append_after_continue,
               append_in_one_branch_then_stack):
        assert_converted_equals_eager(fn, POS, NEG, MIX, POS * 4)


def grow_by_concatenation(x):
    s = []
    i = d2s.to_tensor(0)
    while i < 3:
        s = s + [x * i.astype("float32")]
        i += 1
    s += [x]
    return d2s.stack(s)


def extend_in_loop(x):
    s = [x]
    i = d2s.to_tensor(0)
    while i < 2:
        s.extend([x + 1, x * 2])
        x = x - 1
        i += 1
    return d2s.stack(s, axis=1)


def concat_on_a_later_axis(x):
    outs = []
    i = d2s.to_tensor(0)
    while i < 3:
        outs.append(x * (i + 1).astype("float32"))
        i += 1
    return d2s.concat(outs, axis=1) + d2s.concat(outs, axis=-1)


def test_lists_grown_in_tensor_loops_by_concatenation_extend_and_concat_axes():
    for fn in (grow_by_concatenation, extend_in_loop, concat_on_a_later_axis):
        assert_converted_equals_eager(fn, POS, NEG)


# A Python number a tensor loop turns into a tensor of some shape (`total = 0` then
# `total = total + x.sum(axis=0)`) enters the loop with that shape, as it leaves it eagerly.


def number_accumulates_a_row(x):
    total = 0
    i = d2s.to_tensor(0)
    while i < 3:
        total = total + x.sum(axis=0)
        i += 1
    return total * 2


def float_accumulates_a_one_element_tensor(x):
    z = 0.0
    for i in range(_count(2)):
        z = z + x.sum().reshape([1]) * (i + 1)
    return x * z


def test_numbers_broadcast_into_tensors_by_a_tensor_loop():
    for fn in (number_accumulates_a_row, float_accumulates_a_one_element_tensor):
        assert_converted_equals_eager(fn, POS, NEG)


def dict_gains_keys(x, n):
    y = {"a": x}
    i = d2s.to_tensor(0)
    while i < n:
        y["a"] = y["a"] + 1
        y["b"] = x * i.astype("float32")
        y["c"] = (x, x.sum())
        i += 1
    return y["a"] + y["b"] + y["c"][1]


def test_dict_keys_first_set_in_a_tensor_loop_are_carried():
    for n in (1, 3):
        assert_converted_equals_eager(dict_gains_keys, (POS, d2s.to_tensor(n)),
                                      (MIX, d2s.to_tensor(n)))
    with pytest.raises(UnboundLocalError, match="y\\['b'\\]"):
        d2s.jit.to_static(dict_gains_keys)(d2s.to_tensor(POS), d2s.to_tensor(0))


# An operand dy2stat does not know makes an operator return NotImplemented, so Python asks
# the operand: a name a tensor `if` left unassigned says so, a user's class handles it.


def test_a_name_one_branch_left_unassigned_is_named_on_either_side_of_an_operator():
    def left(x):
        h = x
        if x.sum() > 100:
            scale = 2.0
        return h * scale

    def right(x):
        if x.sum() > 100:
            scale = x
        return (scale + x) / 2

    for fn in (left, right):  # a Python number or a tensor: when the program runs
        with pytest.raises(UnboundLocalError, match="'scale'.*only in its true branch"):
            d2s.jit.to_static(fn)(d2s.to_tensor(POS))


def test_operators_defer_to_an_operand_of_a_foreign_class():
    class Scaled:
        def __rmul__(self, other):
            return ("scaled", other.shape)

        def __radd__(self, other):
            return "added"

    x = d2s.to_tensor(POS)
    assert x * Scaled() == ("scaled", [2, 3])
    assert x + Scaled() == "added"
    with pytest.raises(TypeError, match="unsupported operand"):
        x - object()
    assert (x == object()) is False


def int32_meets_int64(x):
    z = d2s.to_tensor(np.int32(1))
    v = d2s.to_tensor(np.int64(2))
    i = d2s.to_tensor(0)
    while i < 3:
        z = z + v
        i += 1
    return x * z.astype("float32")


def scalar_tensor_becomes_a_row(x):
    z = x.sum() * 0  # a [] tensor the loop makes a [3] one
    i = d2s.to_tensor(0)
    while i < 2:
        z = z + x[0] * (i + 1).astype("float32")
        i += 1
    return x + z


def flag_becomes_a_count(x):
    hits = d2s.to_tensor(False)
    for row in x:
        hits = hits + (row.sum() > 0).astype("int64")
    return x * hits.astype("float32")


def test_carried_tensors_promoted_by_the_body_enter_the_loop_promoted():
    for fn in (int32_meets_int64, scalar_tensor_becomes_a_row, flag_becomes_a_count):
        assert_converted_equals_eager(fn, POS, MIX)


def test_a_carried_value_whose_dtype_narrows_is_still_an_error():
    def narrows(x):
        z = d2s.to_tensor(np.int64(1))
        i = d2s.to_tensor(0)
        while i < 3:
            z = (z + 1).astype("int32")
            i += 1
        return x * z.astype("float32")

    with pytest.raises(LoopVariableError, match="'z' changes dtype from int64 to int32"):
        d2s.jit.to_static(narrows)(d2s.to_tensor(POS))


# `a and b` / `a or b` as a value is b or a (Python's meaning), as a test only its truth.


def and_or_values(x):
    first = x.mean() and x.sum()  # eager: the sum where the mean is non-zero
    second = (x.max() > 1) or (x.min() < -1)
    third = x.min() or x.max()
    if x.mean() > 0 and x.sum():
        first = first * 2
    return x * first + second.astype("float32") + third


def test_and_or_give_an_operand_as_eager_and_only_truth_as_a_test():
    assert_converted_equals_eager(and_or_values, POS, NEG, MIX, POS * 0)


def test_and_or_of_values_of_different_types_is_an_error_at_the_users_line():
    def mixed(x):
        return (x.sum() > 0 and x * 2) or x

    with pytest.raises(BranchMismatchError, match="the value of `and`") as info:
        d2s.jit.to_static(mixed)(d2s.to_tensor(POS))
    assert info.value.lineno == mixed.__code__.co_firstlineno + 1


class Block(nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x):
        return self.fc(x)


class LayersInExpressions(nn.Layer):
    """Sublayers of a Python loop called in if-expressions inside a tensor loop."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.LayerList([Block(), Block()])

    def forward(self, x):
        i = d2s.to_tensor(0)
        while i < 2:
            for blk in self.blocks:
                x = blk(x) if x.mean() > 0 else x * 0.5
                x = blk(x) if x.sum() < 100 and x.mean() > -100 else x
            i += 1
        return x


def test_layers_called_in_expressions_inside_a_tensor_loop():
    d2s.seed(0)
    eager = LayersInExpressions()
    converted = LayersInExpressions()
    converted.set_state_dict(eager.state_dict())
    d2s.jit.to_static(converted)
    for data in (POS, NEG):
        np.testing.assert_allclose(converted(d2s.to_tensor(data)).numpy(),
                                   eager(d2s.to_tensor(data)).numpy(), rtol=1e-5)


def _load(tmp_path, name, source):
    """A function `name` defined by `source` in a module file of its own."""
    import importlib.util

    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def test_an_expression_of_hundreds_of_terms_converts(tmp_path):
    terms = " + ".join(f"x * {i}" for i in range(300))
    fn = _load(tmp_path, "long_sum", f"def long_sum(x):\n    return {terms}\n")
    assert_converted_equals_eager(fn, POS)


def test_a_long_list_literal_converts_in_memory_linear_in_its_length(tmp_path):
    import tracemalloc

    n = 1500
    items = ", ".join(f"{i}.5" for i in range(n))
    source = f"def table(x):\n    v = [{items}]\n    return x * v[7] + len(v)\n"
    fn = _load(tmp_path, "table", source)
    tracemalloc.start()
    try:
        out = d2s.jit.to_static(fn)(d2s.to_tensor(POS))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_allclose(out.numpy(), POS * 7.5 + n)
    # Each node holding its own copy of the 9 kB line would take n * 9 kB = 14 MB more.
    assert peak < 8e6, f"converting a {n}-element literal peaked at {peak / 1e6:.0f} MB"


class EarlyExit(nn.Layer):
    """Return after block k when confident; break out of zip(blocks, heads)."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.LayerList([nn.Linear(3, 3) for _ in range(3)])
        self.heads = [nn.Linear(3, 2), nn.Linear(3, 2), nn.Linear(3, 2)]
        for i, head in enumerate(self.heads):
            self.add_sublayer(f"head{i}", head)

    def forward(self, x):
        logits = []
        for blk, head in zip(self.blocks, self.heads):
            x = nn.functional.relu(blk(x))
            out = head(x)
            logits.append(out)
            if out.max() > 0.8:
                break
        for k, blk in enumerate(self.blocks):
            if x.mean() > 1.0 + k:
                return x * float(k), d2s.stack(logits).mean(axis=0)
            x = blk(x) + 0.5
        return x, d2s.stack(logits).sum(axis=0)


def test_early_exit_from_python_loops_over_layers():
    for seed in range(4):
        d2s.seed(seed)
        eager = EarlyExit()
        converted = EarlyExit()
        converted.set_state_dict(eager.state_dict())
        d2s.jit.to_static(converted)
        for data in (POS, NEG * 3, MIX * 4):
            xs = [d2s.to_tensor(data, stop_gradient=False) for _ in range(2)]
            got = [net(x) for net, x in zip((eager, converted), xs)]
            for a, b in zip(*got):
                np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6)
            for outs in got:
                (outs[0].sum() + outs[1].sum()).backward()
            np.testing.assert_allclose(xs[1].grad.numpy(), xs[0].grad.numpy(), rtol=1e-5,
                                       atol=1e-6)


# Builtins whose answer depends on a traced value: isinstance (a Variable is a Tensor),
# max/min of one-element tensors (the larger or smaller value).


def builtins_on_traced_values(x):
    scale = max(x.sum(), d2s.to_tensor(0.0))
    floor = min(x.min(), x.max(), 0.5)
    if isinstance(x, d2s.Tensor) and isinstance(x, (list, d2s.Tensor)):
        x = x + 1
    if isinstance(x, list):
        x = x * 100
    return x * scale + floor + max([1.0, 2.0])


def test_builtins_isinstance_max_min_on_traced_values():
    assert_converted_equals_eager(builtins_on_traced_values, POS, NEG, MIX)


def host_values_in_arithmetic(x):
    scale = float(x.sum()) + x.mean().item() + int(x.max())
    if x.numpy().mean() > 0:  # a cond, as Paddle converts it
        scale = scale * 2
    return x * scale + x.tolist()[0][0] if False else x * scale


def test_host_values_of_traced_tensors_carry_no_gradient_as_eagerly():
    assert_converted_equals_eager(host_values_in_arithmetic, POS, NEG, MIX)


def test_a_list_started_empty_with_unknown_dims_then_enumerated():
    from dy2stat.static import InputSpec

    def build_then_walk(x, n):
        outs = []
        i = d2s.to_tensor(0)
        while i < n:
            outs.append(x * i.astype("float32"))
            i += 1
        total = x * 0
        for j, o in enumerate(outs):
            total = total + o * j
        return d2s.stack(outs).sum(axis=0) + total

    converted = d2s.jit.to_static(build_then_walk,
                                  input_spec=[InputSpec([None, 3]), InputSpec([], "int64")])
    for rows, n in ((2, 3), (5, 1)):
        x = d2s.to_tensor(np.arange(rows * 3, dtype="float32").reshape(rows, 3))
        count = d2s.to_tensor(np.int64(n))
        np.testing.assert_allclose(converted(x, count).numpy(),
                                   build_then_walk(x, count).numpy())


# ------------------------------------------- tensors beside None and strings in a branch
# `return out, None` (no hidden state), a dict with an unused entry or a tag: the Python
# values are the same either way, so only the tensors go through the `cond`.


def return_pair_with_none(x):
    if x.mean() > 0:
        return x * 2, None
    return x - 1, None


def dict_with_none_and_a_name(x):
    if x.sum() > 0:
        out = {"y": x * 3, "aux": None, "kind": "scores"}
    else:
        out = {"y": x + 1, "aux": None, "kind": "scores"}
    return out


def nested_state_with_none(x):
    h = (x, (None, x + 1))
    if x.mean() < 0:
        h = (x * 4, (None, x))
    return h[0] + h[1][1]


@pytest.mark.parametrize("fn", [return_pair_with_none, dict_with_none_and_a_name,
                                nested_state_with_none])
@pytest.mark.parametrize("data", [POS, NEG, MIX])
def test_python_values_beside_tensors_in_a_tensor_if(fn, data):
    x = d2s.to_tensor(data)
    eager, converted = fn(x), d2s.jit.to_static(fn)(x)
    if isinstance(eager, dict):
        assert list(converted) == list(eager)  # the keys in eager's order
        eager, converted = tuple(eager.values()), tuple(converted.values())
    eager = eager if isinstance(eager, tuple) else (eager,)
    converted = converted if isinstance(converted, tuple) else (converted,)
    assert len(converted) == len(eager)
    for c, e in zip(converted, eager):
        if isinstance(e, d2s.Tensor):
            np.testing.assert_allclose(c.numpy(), e.numpy(), rtol=1e-6)
        else:
            assert c == e and type(c) is type(e)


def none_in_one_branch_a_tag_in_the_other(x):
    if x.mean() > 0:
        return x, None
    return x, "tag"


def test_python_values_that_differ_between_branches_are_a_clear_error():
    with pytest.raises(BranchMismatchError) as err:
        d2s.jit.to_static(none_in_one_branch_a_tag_in_the_other)(d2s.to_tensor(POS))
    message = str(err.value)
    assert "(a float32[2, 3] tensor, None) in the true branch" in message
    assert "(a float32[2, 3] tensor, a str) in the false branch" in message


def dict_built_in_a_tensor_if(x):
    if x.mean() > 0:
        out = {"z": x, "a": x + 1, "m": x * 2}
    else:
        out = {"z": x - 1, "a": x, "m": x}
    return [k for k in out], out["m"]


def dict_carried_by_a_tensor_loop(x):
    state = {"total": x, "count": d2s.zeros([1])}
    while state["count"] < 3:
        state = {"total": state["total"] * 2, "count": state["count"] + 1}
    return list(state), state["total"]


@pytest.mark.parametrize("fn", [dict_built_in_a_tensor_if, dict_carried_by_a_tensor_loop])
def test_a_dict_keeps_its_key_order_through_converted_control_flow(fn):
    for data in (POS, NEG):
        x = d2s.to_tensor(data)
        (keys, value), (converted_keys, converted_value) = fn(x), d2s.jit.to_static(fn)(x)
        assert converted_keys == keys
        np.testing.assert_allclose(converted_value.numpy(), value.numpy(), rtol=1e-6)


# ------------------------------------------------ a Python list read at a tensor index


def numbers_at_a_loop_counter(x):
    scales = [0.5, 1.0, 2.0]
    i = d2s.to_tensor(0)
    while i < 3:
        x = x * scales[i] + 1
        i += 1
    return x


def tensors_at_a_loop_counter(x):
    items = [x, x * 2, x.abs()]
    total = d2s.zeros_like(x)
    n = _count()
    for i in range(n):
        total = total + items[i] * (i + 1)
    return total


def tensors_at_a_computed_index(x):
    table = (x * 3, -x)
    return table[(x.sum() < 0).astype("int64")]


@pytest.mark.parametrize("fn", [numbers_at_a_loop_counter, tensors_at_a_loop_counter,
                                tensors_at_a_computed_index])
def test_a_python_list_read_at_a_tensor_index(fn):
    assert_converted_equals_eager(fn, POS, NEG, MIX)


# --------------------------- values only the branches use: they may differ between them
# A name a branch reads and changes but nothing reads after the `if` (a label built for a
# log line, a scratch tensor) need not be the same kind of value in both branches.


def label_only_the_branches_use(x):
    name = "layer_" + str(3)
    if x.sum() > 0:
        name = name + "_positive"
        x = x * 2
    return x


def scratch_of_another_rank_in_one_branch(x):
    scratch = x
    if x.mean() > 0:
        scratch = scratch.sum()
        x = x + scratch
    else:
        x = x - 1
    return x


@pytest.mark.parametrize("fn", [label_only_the_branches_use,
                                scratch_of_another_rank_in_one_branch])
def test_values_nothing_reads_after_a_tensor_if_may_differ(fn):
    assert_converted_equals_eager(fn, POS, NEG, MIX)


def label_read_after(x):
    name = "layer"
    if x.sum() > 0:
        name = name + "_positive"
    return x, name


LABEL = "layer"


def global_label(x):
    global LABEL
    if x.sum() > 0:
        LABEL = LABEL + "_positive"
    return x


@pytest.mark.parametrize("fn", [label_read_after, global_label])
def test_values_read_after_a_tensor_if_must_agree(fn):
    with pytest.raises(BranchMismatchError, match="a str in the true branch"):
        d2s.jit.to_static(fn)(d2s.to_tensor(POS))


class _History:
    def __init__(self):
        self.lines = []


def append_to_a_shared_list(x, history):
    log = history.lines  # another name for a list the caller holds
    if x.sum() > 0:
        log.append("positive")
    return x


def test_a_list_changed_in_one_branch_is_an_error_even_if_unread_after():
    with pytest.raises(BranchMismatchError, match="list of 1 in the true branch"):
        d2s.jit.to_static(append_to_a_shared_list)(d2s.to_tensor(POS), _History())


# --------------------------------------------------------------- x.size in converted code


def mean_by_size(x):
    return x.sum() / x.size


def test_size_counts_the_elements_in_converted_code():
    assert_converted_equals_eager(mean_by_size, POS, MIX)
    converted = d2s.jit.to_static(mean_by_size, input_spec=[InputSpec([None, 3], "float32")])
    for rows in (1, 4):
        x = d2s.to_tensor(np.arange(rows * 3, dtype="float32").reshape(rows, 3))
        got, want = converted(x), mean_by_size(x)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    assert len(converted.program_cache) == 1


# ----------------------------------------------- tensors where eager code wants a number
# range() of a tensor and d2s.full with a tensor value: eagerly the tensor converts to a
# Python number (int() / float()), so converted code refuses what eager refuses and gives
# the value eager gives, detached from the gradient as a number is.


def range_of_a_tensor(x, n):
    s = x * 0
    for i in range(n):
        s = s + x * i
    return s


def test_range_takes_integer_tensors_of_one_element_as_eager_does():
    for n in (np.array(3, "int64"), np.array([2], "int32")):
        assert_converted_equals_eager(range_of_a_tensor, (POS, d2s.to_tensor(n)))
    for n, error in ((np.array(2.0, "float32"), TypeError), (np.array([1, 2]), ValueError)):
        with pytest.raises(error):
            range_of_a_tensor(d2s.to_tensor(POS), d2s.to_tensor(n))
        with pytest.raises(error):
            d2s.jit.to_static(range_of_a_tensor)(d2s.to_tensor(POS), d2s.to_tensor(n))


def full_of_a_tensor_value(x):
    a = d2s.full([2, 3], x.sum(), dtype="int32")
    b = d2s.full([x.shape[0], 3], x.mean())
    return x * b + a.astype("float32")


def test_full_takes_a_tensor_value_detached_from_the_gradient():
    assert_converted_equals_eager(full_of_a_tensor_value, POS, MIX)


def defined_from_a_name_a_later_iteration_assigns(n):
    """From Paddle's test_loop (`for_loop_dyfunc2`): `s = a` reads `a`, which the loop
    assigns after it, on iterations after the first."""
    x = d2s.full(shape=[1, 2], dtype="int32", fill_value=1)
    for i in range(n):
        if i > 1:
            s = a  # noqa: F821  (assigned below, on an earlier iteration)
        a = 1  # noqa: F841  (read by the next iteration)
        q, _ = x.shape
    return d2s.full(shape=[1], dtype="int32", fill_value=s + q)


def test_a_name_defined_from_one_a_later_statement_of_the_loop_assigns():
    for n in (3, 5):
        n = d2s.to_tensor(np.array([n], "int64"))
        expected = defined_from_a_name_a_later_iteration_assigns(n)
        got = d2s.jit.to_static(defined_from_a_name_a_later_iteration_assigns)(n)
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got.numpy(), expected.numpy())
    with pytest.raises(UnboundLocalError):
        d2s.jit.to_static(defined_from_a_name_a_later_iteration_assigns)(d2s.to_tensor([1]))
