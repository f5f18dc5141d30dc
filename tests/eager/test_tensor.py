"""The Tensor surface: creation, dtypes, operators, indexing, errors."""

import numpy as np
import pytest

import dy2stat as d2s


def test_creation_defaults():
    assert d2s.to_tensor([1.0, 2.0]).dtype == "float32"
    assert d2s.to_tensor([1, 2]).dtype == "int64"
    assert d2s.to_tensor(np.zeros(2, "float64")).dtype == "float64"
    assert d2s.zeros([2, 3]).shape == [2, 3]
    assert d2s.full([2], 7).dtype == "int64"
    assert d2s.arange(5).numpy().tolist() == [0, 1, 2, 3, 4]
    np.testing.assert_allclose(d2s.linspace(0, 1, 3).numpy(), [0, 0.5, 1])
    np.testing.assert_allclose(d2s.eye(2).numpy(), np.eye(2))
    x = d2s.ones([2, 2])
    assert d2s.zeros_like(x).numpy().sum() == 0 and d2s.full_like(x, 3).numpy().sum() == 12


def test_seed_makes_random_tensors_reproducible():
    d2s.seed(7)
    a = d2s.randn([3]).numpy(), d2s.rand([3]).numpy(), d2s.randint(0, 10, [3]).numpy()
    d2s.seed(7)
    b = d2s.randn([3]).numpy(), d2s.rand([3]).numpy(), d2s.randint(0, 10, [3]).numpy()
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)


@pytest.mark.parametrize("tensor_dtype, scalar, expected", [
    ("float32", 1, "float32"),
    ("float32", 1.5, "float32"),
    ("float16", 2.0, "float16"),
    ("int32", 1, "int32"),
    ("int64", 1.5, "float32"),
    ("bool", 1.5, "float32"),
    ("bool", 1, "int64"),
])
def test_scalar_promotion(tensor_dtype, scalar, expected):
    x = d2s.to_tensor(np.ones(2, tensor_dtype))
    assert (x + scalar).dtype == expected
    assert (scalar * x).dtype == expected


def test_tensor_promotion():
    f32 = d2s.to_tensor(np.ones(2, "float32"))
    i64 = d2s.to_tensor(np.ones(2, "int64"))
    i32 = d2s.to_tensor(np.ones(2, "int32"))
    assert (f32 + i64).dtype == "float32"
    assert (i32 + i64).dtype == "int64"
    assert (f32 + d2s.to_tensor(np.ones(2, "float64"))).dtype == "float64"


def test_operators_match_numpy():
    a = np.array([[1.0, -2.0], [3.0, 4.0]], "float32")
    b = np.array([[2.0, 5.0], [-1.0, 2.0]], "float32")
    x, y = d2s.to_tensor(a), d2s.to_tensor(b)
    cases = {
        "+": (x + y, a + b), "-": (x - y, a - b), "*": (x * y, a * b), "/": (x / y, a / b),
        "//": (x // y, a // b), "%": (x % y, a % b), "**": (abs(x) ** y, abs(a) ** b),
        "@": (x @ y, a @ b), "neg": (-x, -a), "<": (x < y, a < b), "==": (x == y, a == b),
        ">=": (x >= y, a >= b), "!=": (x != y, a != b),
        "&": ((x > 0) & (y > 0), (a > 0) & (b > 0)), "|": ((x > 0) | (y > 0), (a > 0) | (b > 0)),
        "~": (~(x > 0), ~(a > 0)), "r-": (1 - x, 1 - a), "r/": (2 / y, 2 / b),
    }
    for name, (got, want) in cases.items():
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, err_msg=name)
        assert got.dtype == want.dtype, name


NUMPY_SCALAR_SIDES = {
    "mul": lambda a, b: a * b, "sub": lambda a, b: a - b, "div": lambda a, b: a / b,
    "pow": lambda a, b: a ** b, "lt": lambda a, b: a < b, "ge": lambda a, b: a >= b,
    "eq": lambda a, b: a == b,
}


@pytest.mark.parametrize("name", list(NUMPY_SCALAR_SIDES))
@pytest.mark.parametrize("convert", [False, True], ids=["eager", "converted"])
def test_a_numpy_scalar_on_either_side_is_a_scalar(name, convert):
    """``np.float32(2) < x`` gives a tensor as ``x > np.float32(2)`` does (NumPy hands
    the scalar to the tensor's ufunc hook, as a 0-d array for comparisons)."""
    op = NUMPY_SCALAR_SIDES[name]

    def f(x):
        return op(np.float32(1.5), x), op(x, np.float32(1.5))

    host = np.array([1.0, 2.0, 1.5], "float32")
    fn = d2s.jit.to_static(f) if convert else f
    left, right = fn(d2s.to_tensor(host))
    for got, want in ((left, op(np.float32(1.5), host)), (right, op(host, np.float32(1.5)))):
        assert isinstance(got, d2s.Tensor) and got.dtype == want.dtype
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


def test_reductions_return_0d_and_keep_axes():
    x = d2s.to_tensor(np.arange(6, dtype="float32").reshape(2, 3))
    assert x.sum().shape == [] and x.mean().shape == [] and x.max().shape == []
    assert x.sum(axis=1, keepdim=True).shape == [2, 1]
    assert d2s.argmax(x, axis=1).numpy().tolist() == [2, 2]
    assert x.sum().item() == 15.0


def test_indexing_read_and_write():
    a = np.arange(24, dtype="float32").reshape(2, 3, 4)
    x = d2s.to_tensor(a)
    for index in [0, (1, 2), (slice(None), 1), (Ellipsis, -1), (slice(None, None, -1),),
                  (0, slice(1, None, 2)), (None, 1)]:
        np.testing.assert_array_equal(x[index].numpy(), a[index])
    mask = x > 10
    np.testing.assert_array_equal(x[mask].numpy(), a[a > 10])
    idx = d2s.to_tensor([1, 0])
    np.testing.assert_array_equal(x[idx].numpy(), a[[1, 0]])
    x[0, 1] = 100.0
    a[0, 1] = 100.0
    x[:, :, 0] = d2s.zeros([2, 3])
    a[:, :, 0] = 0
    np.testing.assert_array_equal(x.numpy(), a)


def test_python_conversions():
    x = d2s.to_tensor([2.5])
    assert float(x) == 2.5 and int(d2s.to_tensor([3])) == 3 and bool(x)
    assert len(d2s.zeros([4, 2])) == 4
    assert [t.shape for t in d2s.zeros([3, 2])] == [[2]] * 3
    with pytest.raises(ValueError, match="ambiguous"):
        bool(d2s.ones([2]))


def test_shape_mismatch_errors_name_the_op_and_both_shapes():
    with pytest.raises(ValueError, match=r"matmul.*\[2, 3\].*\[4, 5\]"):
        d2s.ones([2, 3]) @ d2s.ones([4, 5])
    with pytest.raises(ValueError, match=r"add.*\[2, 3\].*\[4\]"):
        d2s.ones([2, 3]) + d2s.ones([4])
    with pytest.raises(ValueError, match=r"concat.*\[2, 3\].*\[2, 4\]"):
        d2s.concat([d2s.ones([2, 3]), d2s.ones([2, 4])], axis=0)


def test_unsupported_dtype_names_the_op_and_dtype():
    with pytest.raises(TypeError, match="exp.*int64"):
        d2s.exp(d2s.to_tensor([1, 2]))
    with pytest.raises(TypeError, match="to_tensor"):
        d2s.to_tensor(["a", "b"])


def test_no_bare_key_or_index_errors_from_inside():
    with pytest.raises(ValueError, match="unknown op type"):
        d2s.dispatch.apply("no_such_op", d2s.ones([1]))
    with pytest.raises(TypeError, match="unknown attr"):
        d2s.dispatch.apply("sum", d2s.ones([1]), no_such_attr=1)
    with pytest.raises(IndexError):
        d2s.ones([2])[5]


def test_set_device_gpu_is_a_clear_error_without_cupy():
    if d2s.is_compiled_with_cuda():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="CuPy|GPU"):
        d2s.set_device("gpu")
    assert d2s.get_device() == "cpu"
    with pytest.raises(ValueError, match="bad device"):
        d2s.set_device("tpu")


def test_methods_mirror_the_functional_api():
    x = d2s.to_tensor(np.arange(6, dtype="float32").reshape(2, 3))
    assert x.reshape([3, 2]).shape == [3, 2] and x.reshape(3, 2).shape == [3, 2]
    assert x.transpose([1, 0]).shape == [3, 2]
    assert x.unsqueeze(0).shape == [1, 2, 3] and x.flatten().shape == [6]
    assert [t.shape for t in x.split(3, axis=1)] == [[2, 1]] * 3
    assert x.astype("int64").dtype == "int64" and x.clone().numpy().sum() == 15
    np.testing.assert_allclose(x.clip(1, 3).numpy(), np.clip(x.numpy(), 1, 3))


def test_print_and_assert_ops_act_when_run(capsys):
    d2s.dispatch.apply("print", [d2s.to_tensor([1.0, 2.0])], texts=["x =", None])
    assert capsys.readouterr().out == "x = [1. 2.]\n"
    with pytest.raises(AssertionError, match="must hold"):
        d2s.dispatch.apply("assert", d2s.to_tensor([True, False]), message="must hold")
