"""The command line never prints a traceback: every failure is one line and an exit status
(1: the program failed while running; 2: the command's input is wrong)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from dy2stat import cli
from dy2stat.picture import render_png

MODEL = textwrap.dedent('''
    import dy2stat as d2s
    from dy2stat import nn


    class Net(nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        @d2s.jit.to_static
        def forward(self, x, i):
            y = self.fc(x)
            assert y.sum() > -5, "the sum is too small"
            return d2s.gather(y, i)


    def make():
        d2s.seed(0)
        return Net()


    def broken():
        return {}["missing"]
''')


def run(capsys, *args) -> tuple[int, str, str]:
    status = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err


def one_line(err: str, command: str) -> str:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"dy2stat {command}: error: "), lines[0]
    return lines[0]


def npy_bytes(shape: str, header_size: int, data_size: int) -> bytes:
    """A version 1.0 .npy file of float32 ``shape`` with a header padded to ``header_size``."""
    header = f"{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}".encode()
    header += b" " * (header_size - len(header) - 1) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + bytes(data_size)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli_errors")
    (folder / "model.py").write_text(MODEL)
    (folder / "fails_on_import.py").write_text("import math\n\nmath.sqrt(-1)\n")
    (folder / "missing_import.py").write_text("import a_module_that_is_not_there\n")
    np.save(folder / "x.npy", np.ones((2, 4), "float32"))
    np.save(folder / "big.npy", np.full((2, 4), 1000.0, "float32"))
    np.save(folder / "i.npy", np.array([0, 1]))
    np.save(folder / "i_bad.npy", np.array([5]))
    np.save(folder / "complex.npy", np.ones(2, "complex64"))
    (folder / "empty.npy").write_bytes(b"")
    (folder / "a_file").write_text("")
    (folder / "huge_header.npy").write_bytes(npy_bytes("(2, 4)", 60000, 32))
    (folder / "lies.npy").write_bytes(npy_bytes("(100000000000,)", 128, 8))
    assert cli.main(["export", f"{folder}/model.py:make", "--input-spec", "x:float32[-1,4]",
                     "--input-spec", "i:int64[-1]", "-o", f"{folder}/saved/net"]) == 0
    return folder


def test_an_op_that_fails_while_running_is_one_line_naming_it(work, capsys, monkeypatch):
    monkeypatch.chdir(work)
    status, out, err = run(capsys, "run", "saved/net", "--input", "x=x.npy", "--input",
                           "i=i_bad.npy")
    line = one_line(err, "run")
    assert status == 1 and out == ""
    assert "block 0, op " in line
    # the saved program recorded where the user's code built the op
    assert "(gather) at " in line and "model.py:15 (`return d2s.gather(y, i)`): " \
        "IndexError: index 5 is out of bounds" in line


def test_a_failed_assert_is_one_line_with_its_message(work, capsys, monkeypatch):
    monkeypatch.chdir(work)
    status, _, err = run(capsys, "run", "saved/net", "--input", "x=big.npy", "--input", "i=i.npy")
    line = one_line(err, "run")
    assert status == 1
    assert line.endswith('model.py:14 (`assert y.sum() > -5, "the sum is too small"`): '
                         "assertion failed: the sum is too small"), line


@pytest.mark.parametrize("file, message", [
    ("saved", "--input x: saved: is a folder, not a .npy file"),
    ("empty.npy", "--input x: empty.npy: the file is empty, not a .npy array"),
    ("huge_header.npy", "--input x: huge_header.npy: not a .npy array (ValueError: Header "
                        "info length (60000) is large"),
    ("lies.npy", "--input x: lies.npy: the header declares float32[100000000000] "
                 "(400,000,000,000 bytes) but the file holds 8"),
    ("complex.npy", "--input x: complex.npy: a complex64 array; dy2stat reads"),
    ("model.py", "--input x: model.py: not a .npy array"),
    ("nothing.npy", "--input x: nothing.npy: no such file"),
])
def test_bad_input_files_are_one_line_with_status_2(work, capsys, monkeypatch, file, message):
    monkeypatch.chdir(work)
    status, _, err = run(capsys, "run", "saved/net", "--input", f"x={file}", "--input", "i=i.npy")
    assert status == 2 and message in one_line(err, "run")


@pytest.mark.parametrize("args, message", [
    (["run", "saved/net", "--input", "x=x.npy", "--input", "i=i.npy", "-o", "a_file/out"],
     "a_file/out.npy: cannot write it:"),
    (["export", "model.py:make", "--input-spec", "x:float32[-1,4]", "--input-spec",
      "i:int64[-1]", "-o", "a_file/net"], "a_file/net.json: cannot write it:"),
    (["transpile", "model.py", "-o", "a_file/out.py"], "a_file/out.py: cannot write it:"),
    (["inspect", "saved/net", "--svg", "a_file/net.svg"], "a_file/net.svg: cannot write it:"),
    (["inspect", "saved/net", "--png", "a_file/net.png"], "a_file/net.png: cannot write it:"),
])
def test_an_output_under_a_file_is_one_line_with_status_2(work, capsys, monkeypatch, args,
                                                          message):
    monkeypatch.chdir(work)
    status, out, err = run(capsys, *args)
    assert status == 2 and message in one_line(err, args[0]) and "is a file" in err


@pytest.mark.parametrize("target, message", [
    ("missing_import.py:make", "missing_import.py:1: importing it failed: ModuleNotFoundError: "
                               "No module named 'a_module_that_is_not_there'"),
    ("fails_on_import.py:make", "fails_on_import.py:3: importing it failed: ValueError: "
                                "math domain error"),
    ("model.py:broken", "model.py:24: saving broken failed: KeyError: 'missing'"),
])
def test_a_model_that_fails_to_import_or_build_is_one_line(work, capsys, monkeypatch, target,
                                                           message):
    monkeypatch.chdir(work)
    status, _, err = run(capsys, "export", target, "--input-spec", "x:float32[-1,4]", "-o", "o")
    assert status == 2 and one_line(err, "export").endswith(message), err


def test_no_command_prints_help_and_exits_2(capsys):
    status, out, err = run(capsys)
    assert status == 2 and out == "" and err.startswith("usage: dy2stat")


def test_the_written_output_file_is_named_as_written(work, capsys, monkeypatch):
    monkeypatch.chdir(work)
    status, out, err = run(capsys, "run", "saved/net", "--input", "x=x.npy", "--input", "i=i.npy",
                           "-o", "result")
    assert status == 0 and err.strip() == "wrote result.npy"
    assert np.load(work / "result.npy").shape == (2, 3)


def test_a_model_path_may_name_the_json_file_or_its_folder(work, capsys, monkeypatch):
    monkeypatch.chdir(work)
    for path in ("saved/net.json", "saved", "saved/net.safetensors"):
        status, out, err = run(capsys, "inspect", path, "--format", "json")
        assert status == 0 and json.loads(out)["feed"] == ["x", "i"], (path, err)


def test_interrupts_and_internal_errors_are_one_line(work, capsys, monkeypatch):
    monkeypatch.chdir(work)
    for exc, status in ((KeyboardInterrupt(), 130), (ZeroDivisionError("oops"), 1)):
        def fail(*args, exc=exc):
            raise exc

        monkeypatch.setattr(cli, "_inspect", fail)
        code, _, err = run(capsys, "inspect", "saved/net")
        line = one_line(err, "inspect")
        assert code == status
        assert "interrupted" in line if status == 130 else "internal error: ZeroDivisionError"


def test_messages_are_bounded_and_escaped(work, capsys, monkeypatch):
    monkeypatch.chdir(work)
    doc = json.loads((work / "saved" / "net.json").read_text())
    doc["feed"][0] = "\x1b[2J" + "x" * 1_000_000
    (work / "hostile.json").write_text(json.dumps(doc))
    shutil.copy(work / "saved" / "net.safetensors", work / "hostile.safetensors")
    status, _, err = run(capsys, "inspect", "hostile")
    line = one_line(err, "inspect")
    assert status == 2 and len(line) < 700 and "\x1b" not in line


def test_png_without_pillow_says_how_to_get_it_and_prints_nothing(work, capsys, monkeypatch):
    monkeypatch.chdir(work)
    monkeypatch.setattr(render_png, "Image", None)
    status, out, err = run(capsys, "inspect", "saved/net", "--png", "net.png")
    line = one_line(err, "inspect")
    assert status == 2 and out == "" and not (work / "net.png").exists()
    assert "--png: PNG pictures need Pillow" in line and "pip install 'dy2stat[png]'" in line


def test_the_console_script_exits_with_the_status(work):
    result = subprocess.run([sys.executable, "-m", "dy2stat.cli", "run", "saved/net", "--input",
                             "x=x.npy", "--input", "i=i_bad.npy"], cwd=work,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
