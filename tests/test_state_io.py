"""``d2s.save`` / ``d2s.load``: state dicts and nested values in one safetensors file."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import safetensors.numpy

import dy2stat as d2s
from dy2stat.runtime.serialize import FormatError


def trained():
    d2s.seed(0)
    net = d2s.nn.Linear(3, 2)
    scheduler = d2s.optimizer.lr.CosineAnnealingDecay(0.1, 10)
    opt = d2s.optimizer.Adam(parameters=net.parameters(), learning_rate=scheduler)
    net(d2s.randn([4, 3])).mean().backward()
    opt.step()
    return net, opt


def test_a_state_dict_round_trips_and_reads_as_plain_safetensors(tmp_path):
    net, _ = trained()
    d2s.save(net.state_dict(), tmp_path / "net.pdparams")
    back = d2s.load(tmp_path / "net.pdparams")
    assert set(back) == {"weight", "bias"} and isinstance(back["weight"], d2s.Tensor)
    fresh = d2s.nn.Linear(3, 2)
    fresh.set_state_dict(back)
    np.testing.assert_array_equal(fresh.weight.numpy(), net.weight.numpy())
    plain = safetensors.numpy.load_file(tmp_path / "net.pdparams")
    np.testing.assert_array_equal(plain["bias"], net.bias.numpy())


def test_nested_values_and_optimizer_state_round_trip(tmp_path):
    net, opt = trained()
    obj = {"model": net.state_dict(), "opt": opt.state_dict(), "epoch": 3,
           "best": float("nan"), "tags": ("a", 1, None, True), "hist": [0.5, math.inf]}
    d2s.save(obj, tmp_path / "ckpt")
    back = d2s.load(tmp_path / "ckpt")
    assert back["epoch"] == 3 and math.isnan(back["best"]) and back["tags"] == ("a", 1, None, True)
    assert back["hist"] == [0.5, math.inf]
    assert back["opt"]["LR_Scheduler"] == opt.state_dict()["LR_Scheduler"]
    again = d2s.optimizer.Adam(parameters=net.parameters(),
                               learning_rate=d2s.optimizer.lr.CosineAnnealingDecay(0.1, 10))
    again.set_state_dict(back["opt"])
    numpy = d2s.load(tmp_path / "ckpt", return_numpy=True)
    assert isinstance(numpy["model"]["weight"], np.ndarray)


@pytest.mark.parametrize("value, message", [
    (object(), "object values cannot be saved"),
    ({1: d2s.ones([1])}, "dict keys must be strings"),
])
def test_what_cannot_be_saved_is_refused(tmp_path, value, message):
    with pytest.raises(TypeError, match=message):
        d2s.save(value, tmp_path / "x")
    assert os.listdir(tmp_path) == []


def test_a_tampered_structure_is_a_format_error_naming_the_file(tmp_path):
    path = tmp_path / "bad"
    safetensors.numpy.save_file({"t": np.zeros(2, "float32")}, path,
                                metadata={"structure": '{"dict": {"a": {"tensor": "nope"}}}'})
    with pytest.raises(FormatError, match=f"{path}: structure.dict\\['a'\\].tensor: no tensor"):
        d2s.load(path)
    safetensors.numpy.save_file({"t": np.zeros(2, "float32")}, path,
                                metadata={"structure": '{"pickle": "x"}'})
    with pytest.raises(FormatError, match="unknown tag 'pickle'"):
        d2s.load(path)


def test_the_file_is_written_atomically_with_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        d2s.save({"a": d2s.ones([2])}, tmp_path / "x")
    finally:
        os.umask(old)
    assert os.listdir(tmp_path) == ["x"]
    assert (tmp_path / "x").stat().st_mode & 0o777 == 0o640
