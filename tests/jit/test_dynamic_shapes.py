"""Shape-dependent code with a -1 batch dim keeps working in converted code."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat.static import InputSpec


def test_creation_and_reshape_with_an_unknown_batch_dim():
    @d2s.jit.to_static(input_spec=[InputSpec([-1, 2, 3], "float32")])
    def f(x):
        flat = x.reshape([x.shape[0], 6])
        return d2s.zeros([x.shape[0], 6]) + flat, d2s.ones([len(x), 1])

    for batch in (4, 2):
        x = np.arange(batch * 6, dtype="float32").reshape(batch, 2, 3)
        flat, ones = f(d2s.to_tensor(x))
        np.testing.assert_array_equal(flat.numpy(), x.reshape(batch, 6))
        assert ones.shape == [batch, 1]
    assert len(f.program_cache) == 1


def test_to_tensor_inside_converted_code_is_a_constant():
    @d2s.jit.to_static
    def f(x):
        return x + d2s.to_tensor([1.0, 2.0])

    np.testing.assert_array_equal(f(d2s.ones([2])).numpy(), [2.0, 3.0])


def test_print_and_assert_run_with_the_program(capsys):
    @d2s.jit.to_static
    def f(x):
        print("sum is", x.sum())
        assert x.sum() > 0, "x must be positive"
        if x.mean() > 1:
            print("big")
        return x * 2

    f(d2s.ones([2]))
    assert capsys.readouterr().out == "sum is 2.0\n"
    try:
        f(-d2s.ones([2]))
    except AssertionError as error:
        assert "x must be positive" in str(error)
    else:
        raise AssertionError("the assert op did not fire")


def test_a_saved_program_keeps_its_prints_and_asserts(tmp_path, capsys):
    @d2s.jit.to_static(input_spec=[InputSpec([-1], "float32", "x")])
    def f(x):
        print("sum is", x.sum())
        assert x.sum() > 0, "x must be positive"
        return x * 2

    d2s.jit.save(f, str(tmp_path / "f"))
    loaded = d2s.jit.load(str(tmp_path / "f"))
    capsys.readouterr()
    np.testing.assert_array_equal(loaded(d2s.ones([3])).numpy(), [2.0, 2.0, 2.0])
    assert capsys.readouterr().out == "sum is 3.0\n"
    with pytest.raises(AssertionError, match="x must be positive"):
        loaded(-d2s.ones([3]))
