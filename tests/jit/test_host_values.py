"""Host-value habits in converted code: ``x.numpy()``, ``x.item()``, ``x.tolist()``,
casts and ``to_tensor`` of traced values behave as the tensor (as Paddle converts them);
only where Python truly needs the value is there an error naming the line."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import jit
from tests.jit.helpers import op_types


def numpy_in_a_condition(x):
    if d2s.mean(x).numpy() > 1:
        return x * 2
    return x - 1


def item_in_arithmetic(x):
    peak = x.max().item()
    if peak > 2:
        return x / peak
    return x * peak


def tolist_indexed(x):
    values = x.tolist()
    return values[0] + values[-1] * 2


def casts(x):
    total = float(x.sum())
    count = int(x.shape[0])
    flag = bool(x.mean() > 0)
    return x * total + count if flag else x - total


def to_tensor_of_traced(x):
    y = d2s.to_tensor(x * 2)
    pair = d2s.to_tensor([x.sum(), 3.0])
    as_int = d2s.to_tensor(x, dtype="int64")
    return y + pair.sum(), as_int


def true_division(x):
    counts = d2s.to_tensor(np.array([7, 3], "int64"))
    return counts / 2 + x.astype("int64") / counts


CASES = [numpy_in_a_condition, item_in_arithmetic, tolist_indexed, casts,
         to_tensor_of_traced, true_division]


def _values(out):
    return [o.numpy() for o in out] if isinstance(out, tuple) else [out.numpy()]


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("data", [[0.5, 1.0], [3.0, 4.0], [-2.0, 1.5]])
def test_host_value_habits_convert_to_tensor_code(fn, data):
    x = d2s.to_tensor(np.array(data, "float32"))
    eager, converted = fn(x), _values(jit.to_static(fn)(x))
    if isinstance(eager, float):  # Python arithmetic on host values: a 0-D tensor now
        (value,) = converted
        assert value.shape == () and value.dtype == np.float32
        np.testing.assert_allclose(value, eager, rtol=1e-6)
        return
    for c, e in zip(converted, _values(eager), strict=True):
        assert c.dtype == e.dtype and c.shape == e.shape
        np.testing.assert_allclose(c, e, rtol=1e-6)


def test_a_numpy_value_in_a_condition_is_a_cond_op():
    converted = jit.to_static(numpy_in_a_condition)
    for data in ([1.0, 2.0], [-1.0, -3.0]):  # each branch, from one program
        x = d2s.to_tensor(np.array(data, "float32"))
        np.testing.assert_array_equal(converted(x).numpy(), numpy_in_a_condition(x).numpy())
    assert "cond" in op_types(converted.main_program)
    assert len(converted.program_cache) == 1


def test_a_traced_value_made_a_tensor_stops_the_gradient_as_to_tensor_does():
    def detached(x):
        return (d2s.to_tensor(x * 3) * x).sum()

    for fn in (detached, jit.to_static(detached)):
        x = d2s.to_tensor(np.array([1.0, 2.0], "float32"), stop_gradient=False)
        fn(x).backward()
        np.testing.assert_allclose(x.grad.numpy(), [3.0, 6.0])  # not 6x: a constant factor


def numpy_exp(x):
    return np.exp(x) + 1


def numpy_mean(x):
    return np.mean(x)


@pytest.mark.parametrize("fn, call, instead", [(numpy_exp, "np.exp", "d2s.exp"),
                                               (numpy_mean, "np.mean", "d2s.mean")])
def test_numpy_on_a_traced_value_names_the_call_and_the_d2s_equivalent(fn, call, instead):
    with pytest.raises(TypeError, match=rf"{call} cannot compute a static Variable.*"
                                        rf"use {instead} instead"):
        jit.to_static(fn)(d2s.ones([2]))


def index_a_list(x, table):
    return table[x.argmax()]


@pytest.mark.parametrize("table, dtype", [([1.5, 2.5, -1.0], "float32"), ((3, 1, 2), "int64"),
                                          ([True, False, True], "bool"),
                                          ([1, 2.5, 3], "float32")])
def test_a_traced_value_indexing_a_python_list_reads_the_item(table, dtype):
    for data in ([0.0, 5.0, 1.0], [9.0, 1.0, 1.0], [0.0, 0.0, 7.0]):
        x = d2s.to_tensor(np.array(data, "float32"))
        got = jit.to_static(index_a_list)(x, table)
        want = index_a_list(x, table)  # a Python number: as a tensor, of this dtype
        assert got.shape == [] and got.dtype == np.dtype(dtype)
        assert got.numpy().item() == want


def test_a_traced_value_indexing_a_list_of_other_things_is_an_error_at_the_line():
    with pytest.raises(TypeError, match="must hold numbers, or tensors of one shape") as info:
        jit.to_static(index_a_list)(d2s.ones([2]), ["a", "b"])
    notes = "".join(getattr(info.value, "__notes__", []))
    assert "test_host_values.py" in notes and "return table[x.argmax()]" in notes


def assign_into_a_list_at_a_tensor_index(x):
    items = [x, x]
    items[x.argmax()] = x * 2
    return items[0]


def test_assigning_into_a_python_list_at_a_tensor_index_is_an_error():
    with pytest.raises(TypeError, match="where Python needs its value"):
        jit.to_static(assign_into_a_list_at_a_tensor_index)(d2s.ones([2]))


def test_true_division_of_integer_tensors_is_float_eagerly_too():
    a = d2s.to_tensor(np.array([7, -3], "int64"))
    b = d2s.to_tensor(np.array([2, 2], "int32"))
    for out in (a / b, a / 2, 7 / b, d2s.divide(a, b)):
        assert out.dtype == np.float32
        assert out.numpy().tolist() in ([3.5, -1.5], [3.5, 3.5])
    assert (a // 2).dtype == np.int64
