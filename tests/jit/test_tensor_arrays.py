"""Tensor arrays (``create_array``/``array_write``/``array_read``/``array_length``):
eagerly a Python list; in converted loops carried by the ``while`` op, written and read
at tensor indices, with gradients through the writes and reads."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import jit, nn
from dy2stat.dy2static import anno, parser
from dy2stat.dy2static.analysis import activity
from dy2stat.static import InputSpec
from tests.jit.helpers import op_types, tensor


def test_eager_arrays_are_lists_written_in_order():
    arr = d2s.create_array("float32")
    x, y = d2s.ones([2]), d2s.zeros([2])
    assert d2s.array_write(x, d2s.to_tensor([0]), arr) is arr
    d2s.array_write(y, 1, arr)
    d2s.array_write(x * 3, 0, arr)  # over the first element
    assert d2s.array_length(arr) == 2
    np.testing.assert_array_equal(d2s.array_read(arr, d2s.to_tensor(0)).numpy(), [3, 3])
    assert d2s.array_read(arr, 1) is y
    new = d2s.array_write(x, 0)  # array=None: a new array
    assert isinstance(new, list) and len(new) == 1
    with pytest.raises(IndexError, match="index 3 is past the end of an array of 2"):
        d2s.array_write(x, 3, arr)


class Decoder(nn.Layer):
    """Steps a cell ``n`` (a tensor) times, writing each state into a tensor array."""

    def __init__(self):
        super().__init__()
        self.cell = nn.Linear(4, 4)

    def forward(self, x, n):
        states = d2s.create_array("float32")
        i = d2s.zeros([1], "int64")
        h = x
        while i < n:
            h = d2s.tanh(self.cell(h))
            d2s.array_write(h, i, array=states)
            i = d2s.increment(i)
        total = d2s.zeros_like(x)
        j = 0
        while j < d2s.array_length(states):
            total = total + d2s.array_read(states, j) * (j + 1.0)
            j += 1
        return total.mean(), d2s.stack(states)


def _train_step(model, x, n):
    loss, stacked = model(x, n)
    loss.backward()
    grads = {k: p.grad.numpy() for k, p in model.named_parameters()}
    model.clear_gradients()
    return loss.numpy(), stacked.numpy(), grads, x.grad.numpy()


def test_a_converted_loop_carries_the_array_and_trains_as_eager():
    d2s.seed(3)
    model = Decoder()
    n = d2s.to_tensor(np.array([3]))
    eager = _train_step(model, tensor([2, 4], stop_gradient=False), n)
    jit.to_static(model, input_spec=[InputSpec([-1, 4]), InputSpec([1], "int64")])
    converted = _train_step(model, tensor([2, 4], stop_gradient=False), n)
    assert "array_write" in op_types(model.forward.main_program)
    assert "while" in op_types(model.forward.main_program)
    np.testing.assert_array_equal(converted[0], eager[0])
    np.testing.assert_array_equal(converted[1], eager[1])
    assert converted[1].shape == (3, 2, 4)
    for k in eager[2]:
        np.testing.assert_allclose(converted[2][k], eager[2][k], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(converted[3], eager[3], rtol=1e-6, atol=1e-7)
    # The trip count is data: the same program runs 5 steps.
    loss, stacked = model(tensor([3, 4]), d2s.to_tensor(np.array([5])))
    assert stacked.shape == [5, 3, 4]


def grow_in_a_for_loop(x, n):
    arr = d2s.create_array("float32")
    for t in range(n):  # a tensor bound: a while op
        arr = d2s.array_write(x * (t + 1.0), t, array=arr)
    return d2s.array_read(arr, n - 1), d2s.array_length(arr)


def test_writes_in_a_for_loop_over_a_tensor_range():
    x, n = tensor([2, 3]), d2s.to_tensor(4)
    (last, length), (eager_last, eager_length) = (jit.to_static(grow_in_a_for_loop)(x, n),
                                                  grow_in_a_for_loop(x, n))
    np.testing.assert_array_equal(last.numpy(), eager_last.numpy())
    assert int(length) == eager_length == 4


def overwrite_in_a_loop(x, n):
    arr = d2s.array_write(x, 0)
    arr = d2s.array_write(x * 2.0, 1, arr)
    i = d2s.zeros([1], "int64")
    while i < n:
        d2s.array_write(d2s.array_read(arr, i) + 10.0, i, arr)  # replaces element i
        i += 1
    return d2s.stack(arr)


def test_writing_below_the_length_replaces_the_element():
    x = tensor([3], stop_gradient=False)
    eager = overwrite_in_a_loop(x, d2s.to_tensor([2]))
    eager.sum().backward()
    expected_grad = x.grad.numpy()
    x.clear_grad()
    converted = jit.to_static(overwrite_in_a_loop)(x, d2s.to_tensor([2]))
    converted.sum().backward()
    np.testing.assert_array_equal(converted.numpy(), eager.numpy())
    np.testing.assert_array_equal(x.grad.numpy(), expected_grad)


def read_with_a_tensor_index(x, i):
    arr = d2s.create_array("float32", [x, x * 2.0, x * 3.0])
    return d2s.array_read(arr, i)


def test_reading_a_list_at_a_tensor_index():
    x = tensor([2])
    out = jit.to_static(read_with_a_tensor_index)(x, d2s.to_tensor([2]))
    np.testing.assert_allclose(out.numpy(), 3 * x.numpy())


def append_with_a_tensor_index(x, i):
    arr = d2s.create_array("float32")
    d2s.array_write(x, 0, arr)
    d2s.array_write(x + 1.0, i, arr)  # outside a loop: must be the length
    return d2s.stack(arr)


def test_a_tensor_index_outside_a_loop_appends_and_the_program_checks_it():
    converted = jit.to_static(append_with_a_tensor_index)
    x = tensor([2])
    np.testing.assert_array_equal(converted(x, d2s.to_tensor(1)).numpy(),
                                  append_with_a_tensor_index(x, d2s.to_tensor(1)).numpy())
    with pytest.raises(AssertionError, match="must be its length"):
        converted(x, d2s.to_tensor(0))


def test_the_analysis_sees_array_write_and_increment_change_their_argument():
    fn = parser.parse_str("def f(x, i, arr, c):\n"
                          "  d2s.array_write(x, i, array=arr)\n"
                          "  paddle.tensor.array_write(x, i, arr)\n"
                          "  d2s.increment(c)\n").body[0]
    activity.resolve(fn)
    mutated = [{str(q) for q in anno.getanno(stmt, anno.Static.SCOPE).mutated}
               for stmt in fn.body]
    assert mutated == [{"arr"}, {"arr"}, {"c"}]


def test_an_array_of_unknown_element_shape_starts_as_a_placeholder():
    """An empty list appended to in a loop, its elements [-1, 4]: the first write sets
    the element shape when the program runs."""

    def collect(x, n):
        out = []
        i = 0
        while i < n:
            out.append(x * float(1))
            i += 1
        return d2s.stack(out)

    converted = jit.to_static(collect, input_spec=[InputSpec([-1, 4]), InputSpec([], "int64")])
    x = tensor([3, 4])
    result = converted(x, d2s.to_tensor(2))
    assert result.shape == [2, 3, 4]
    np.testing.assert_array_equal(result.numpy(), np.stack([x.numpy()] * 2))
