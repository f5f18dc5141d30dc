"""``Model.save``/``Model.load`` checkpoints: the two files are one save."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat.hapi.callbacks import Callback
from dy2stat.runtime import atomic
from dy2stat.runtime.serialize import FormatError

ROOT = Path(__file__).parents[2]


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


class CtrlCAt(Callback):
    """Presses Ctrl-C (SIGINT to this process) after batch ``step`` of epoch ``epoch``."""

    def __init__(self, epoch, step, times=1):
        super().__init__()
        self.at, self.times, self.epoch = (epoch, step), times, 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, step, logs=None):
        if (self.epoch, step) == self.at:
            for _ in range(self.times):
                os.kill(os.getpid(), signal.SIGINT)


@pytest.mark.parametrize("verbose", [0, 1, 2])
def test_ctrl_c_in_fit_stops_after_the_step_with_one_line_and_a_checkpoint(tmp_path, capsys,
                                                                           verbose):
    model = small_model()
    history = model.fit(data(), batch_size=8, epochs=3, verbose=verbose,
                        save_dir=str(tmp_path), callbacks=[CtrlCAt(1, 1)])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("Model.fit")]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert lines == [f"Model.fit: stopped by Ctrl-C in epoch 2/3 after 2 steps; saved a "
                     f"checkpoint to {tmp_path / 'interrupted'}"]
    assert len(history["loss"]) == 1  # the first epoch completed, the second did not
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    again = small_model(seed=3)
    again.load(str(tmp_path / "interrupted"))
    for a, b in zip(again.parameters(), model.parameters()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not (tmp_path / "final.pdparams").exists()


def test_a_second_ctrl_c_stops_at_once_without_a_checkpoint(tmp_path, capsys):
    model = small_model()
    model.fit(data(), batch_size=8, epochs=2, verbose=0, save_dir=str(tmp_path),
              callbacks=[CtrlCAt(0, 2, times=2)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip() == ("Model.fit: stopped by Ctrl-C in epoch 1/2; in the middle of a "
                           "step, so no checkpoint was saved")
    assert not (tmp_path / "interrupted.pdparams").exists()
    model.fit(data(), batch_size=8, epochs=1, verbose=0)  # the model still trains


def test_ctrl_c_in_fit_in_a_subprocess_prints_no_traceback(tmp_path):
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(ROOT)!r})
        from tests.hapi.test_checkpoint import CtrlCAt, data, small_model
        model = small_model()
        model.fit(data(), batch_size=8, epochs=2, verbose=2, save_dir={str(tmp_path)!r},
                  callbacks=[CtrlCAt(0, 0)])
        print("after fit")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and result.stdout.endswith("after fit\n")
    assert (tmp_path / "interrupted.pdparams").exists()
