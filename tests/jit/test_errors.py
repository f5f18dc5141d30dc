"""Exceptions inside converted code name the user's file:line and keep their type."""

import traceback

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import jit, nn
from tests.jit.helpers import tensor

with open(__file__) as _f:
    _LINES = _f.read().splitlines()


def line_of(marker: str) -> int:
    (number,) = [i for i, text in enumerate(_LINES, 1)
                 if text.rstrip().endswith(f"# {marker}")]
    return number


def report(error: BaseException) -> str:
    return "".join(traceback.format_exception(error))


def assert_points_at(error, marker, source):
    text = report(error)
    assert f'File "{__file__}", line {line_of(marker)}' in text, text
    assert source in text, text


class UserError(Exception):
    pass


def test_a_shape_error_while_tracing():
    @jit.to_static
    def f(x):
        y = x + 1
        return y.reshape([7, 7])  # E-reshape

    with pytest.raises(ValueError) as info:
        f(tensor([3, 4]))
    assert_points_at(info.value, "E-reshape", "y.reshape([7, 7])")


def test_the_users_own_exception_keeps_its_type():
    @jit.to_static
    def f(x, limit):
        if limit > 3:
            raise UserError(f"limit {limit} too large")  # E-user
        return x

    f(tensor([2]), 1)
    with pytest.raises(UserError, match="limit 5 too large") as info:
        f(tensor([2]), 5)
    assert_points_at(info.value, "E-user", "raise UserError")


def helper(x):
    return x @ x  # E-helper


def test_an_error_in_a_helper_called_from_converted_code():
    @jit.to_static
    def f(x):
        if x.sum() > 0:
            x = helper(x)
        return x

    with pytest.raises(ValueError) as info:
        f(tensor([2, 3]))
    assert_points_at(info.value, "E-helper", "return x @ x")


def test_an_error_inside_a_tensor_branch_of_a_converted_layer():
    class Net(nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            h = self.fc(x)
            if h.mean() > 0:
                h = d2s.concat([h, x], axis=0)  # E-concat
            return h

    net = jit.to_static(Net())
    with pytest.raises(ValueError) as info:
        net(tensor([2, 4]))
    assert_points_at(info.value, "E-concat", "d2s.concat([h, x], axis=0)")


def test_python_errors_keep_their_type():
    @jit.to_static
    def f(x, table):
        return x * table["missing"]  # E-key

    with pytest.raises(KeyError) as info:
        f(tensor([2]), {"present": 1})
    assert_points_at(info.value, "E-key", 'table["missing"]')


def test_an_error_while_running_the_program_names_the_users_line():
    @jit.to_static
    def f(x, index):
        y = x * 2
        return d2s.gather(y, index)  # E-run

    f(tensor([3, 2]), d2s.to_tensor(np.array([0, 1])))
    with pytest.raises(IndexError) as info:
        f(tensor([3, 2]), d2s.to_tensor(np.array([0, 7])))
    assert_points_at(info.value, "E-run", "d2s.gather(y, index)")


def test_identical_functions_in_two_files_each_point_at_their_own_file(tmp_path):
    import importlib.util

    source = ("from dy2stat import jit\n\n\n@jit.to_static\ndef f(x):\n"
              "    return x.reshape([7, 7])\n")
    paths = []
    for name in ("d2s_twin_one", "d2s_twin_two"):
        path = tmp_path / f"{name}.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        with pytest.raises(ValueError) as info:
            module.f(tensor([2]))
        paths.append((str(path), report(info.value)))
    for path, text in paths:
        assert f'File "{path}", line 6' in text, text
