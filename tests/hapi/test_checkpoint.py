"""``Model.save``/``Model.load`` checkpoints: the two files are one save."""

from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat.runtime import atomic
from dy2stat.runtime.serialize import FormatError


def small_model(seed=0, optimizer=True):
    d2s.seed(seed)
    model = d2s.Model(d2s.nn.Sequential(d2s.nn.Linear(4, 8), d2s.nn.ReLU(), d2s.nn.Linear(8, 2)))
    opt = d2s.optimizer.Adam(learning_rate=0.01, parameters=model.parameters())
    model.prepare(opt if optimizer else None, d2s.nn.CrossEntropyLoss())
    return model


def data(n=32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 4)).astype("float32")
    y = (x[:, :1] > 0).astype("int64")
    return d2s.io.TensorDataset([d2s.to_tensor(x), d2s.to_tensor(y)])


def metadata(path) -> dict:
    raw = open(path, "rb").read()
    (size,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + size])["__metadata__"]


def test_the_optimizer_state_records_the_parameters_digest(tmp_path):
    model = small_model()
    model.fit(data(), batch_size=8, epochs=1, verbose=0)
    model.save(str(tmp_path / "ckpt"))
    recorded = metadata(tmp_path / "ckpt.pdopt")["params_sha256"]
    assert recorded == atomic.digest((tmp_path / "ckpt.pdparams").read_bytes())
    again = small_model(seed=5)
    again.load(str(tmp_path / "ckpt"))
    for a, b in zip(again.parameters(), model.parameters()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_files_from_different_saves_are_refused_naming_both(tmp_path):
    model = small_model()
    model.save(str(tmp_path / "a"))
    model.fit(data(), batch_size=8, epochs=1, verbose=0)
    model.save(str(tmp_path / "b"))
    os.replace(tmp_path / "b.pdparams", tmp_path / "a.pdparams")
    with pytest.raises(FormatError) as info:
        small_model().load(str(tmp_path / "a"))
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'a'}.pdparams: not the parameters saved with "
                              f"{tmp_path / 'a'}.pdopt"), message
    # without the optimizer state the parameters load on their own
    small_model().load(str(tmp_path / "a"), reset_optimizer=True)


def test_a_checkpoint_interrupted_after_its_commit_loads_the_new_pair(tmp_path, monkeypatch):
    model = small_model()
    model.save(str(tmp_path / "ckpt"))
    model.fit(data(), batch_size=8, epochs=1, verbose=0)
    replace = os.replace

    def crash_on_the_last_rename(src, dst):
        if str(src).endswith(".pending"):
            raise KeyboardInterrupt
        replace(src, dst)

    monkeypatch.setattr(os, "replace", crash_on_the_last_rename)
    with pytest.raises(KeyboardInterrupt):
        model.save(str(tmp_path / "ckpt"))
    monkeypatch.setattr(os, "replace", replace)
    again = small_model(seed=3)
    again.load(str(tmp_path / "ckpt"))
    for a, b in zip(again.parameters(), model.parameters()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_a_save_without_an_optimizer_removes_an_older_optimizer_state(tmp_path):
    small_model().save(str(tmp_path / "ckpt"))
    assert (tmp_path / "ckpt.pdopt").exists()
    small_model(optimizer=False).save(str(tmp_path / "ckpt"))
    assert sorted(os.listdir(tmp_path)) == ["ckpt.pdparams"]
    small_model().load(str(tmp_path / "ckpt"))  # nothing stale to pair with
