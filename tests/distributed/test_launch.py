"""``dy2stat launch`` and docs/distributed.md: the guide's script trains as two ranks
and as one process; the command's mistakes are one line."""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dy2stat import cli
from dy2stat.distributed import launch
from tests.distributed.test_data_parallel import needs_mpi

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "distributed.md"


@pytest.fixture
def script(tmp_path):
    (code,) = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), flags=re.S)
    path = tmp_path / "train.py"
    path.write_text(code)
    return path


def test_ranks_share_the_cores_unless_told(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    shared = launch._environment(2)
    assert (shared["OMP_NUM_THREADS"], shared["OPENBLAS_NUM_THREADS"]) == ("4", "4")
    assert launch._environment(16)["OMP_NUM_THREADS"] == "1"
    monkeypatch.setenv("MKL_NUM_THREADS", "3")
    assert "OMP_NUM_THREADS" not in launch._environment(2)


@needs_mpi
def test_the_guides_script_trains_as_two_ranks(script):
    result = subprocess.run([sys.executable, "-m", "dy2stat.cli", "launch", "-n", "2",
                             str(script)], cwd=script.parent, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    for rank in (0, 1):
        assert f"rank {rank} of 2, epoch 2: loss" in result.stdout
    assert (script.parent / "net.pdparams").exists()


def test_the_guides_script_runs_as_one_process(script):
    result = subprocess.run([sys.executable, str(script)], cwd=script.parent,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "rank 0 of 1, epoch 2: loss" in result.stdout


def _launch(*args) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = cli.main(["launch", *args])
    return status, err.getvalue()


def test_launch_mistakes_are_one_line(tmp_path, monkeypatch):
    status, err = _launch("-n", "2", str(tmp_path / "missing.py"))
    assert (status, err) == (2, f"dy2stat launch: error: {tmp_path / 'missing.py'}: no such "
                                "file\n")
    status, err = _launch("-n", "0", str(tmp_path))
    assert (status, err) == (2, "dy2stat launch: error: -n must be at least 1, got 0\n")
    script = tmp_path / "job.py"
    script.write_text("")
    monkeypatch.setattr(launch, "find_mpiexec", lambda: None)
    status, err = _launch("-n", "2", str(script))
    assert status == 2
    assert err == ("dy2stat launch: error: mpiexec is not installed (next to this Python or "
                   "on PATH): pip install 'dy2stat[distributed]'\n")


def test_a_job_of_one_runs_the_script_with_its_arguments(tmp_path):
    script = tmp_path / "job.py"
    script.write_text("import os, sys\nprint(sys.argv[1:], os.environ.get('OMP_NUM_THREADS'))\n"
                      "sys.exit(3)\n")
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    result = subprocess.run([sys.executable, "-m", "dy2stat.cli", "launch", str(script),
                             "--lr", "0.1", "-x"], capture_output=True, text=True,
                            env=environment, timeout=60)
    assert result.stdout == "['--lr', '0.1', '-x'] None\n"  # as run directly
    assert result.returncode == 3  # the job's status
    assert result.stderr == "dy2stat launch: error: the job failed (exit status 3)\n"
