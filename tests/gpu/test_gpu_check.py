"""The GPU check, run where there is no GPU: the script's syntax and install steps, its
dry run (every phase on the CuPy test double, each within its time box, everything in
one folder), a phase cut at its box, and the gpu tests on the double with cuDNN."""

import json
import os
import pathlib
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

import dy2stat as d2s

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"
PHASES = ["machine", "install", "probe", "tests", "bench"]


def run(args, env=None, timeout=300):
    return subprocess.run(args, cwd=ROOT, env={**os.environ, **(env or {})},
                          capture_output=True, text=True, timeout=timeout)


def check_env(tmp_path, **more):
    return {"D2S_INSTALL": "stage", "D2S_WORK": str(tmp_path / "work"),
            "OUT": str(tmp_path / "out"), "PYTHON": sys.executable, **more}


def summary(out: pathlib.Path) -> dict:
    """phase -> (exit status, seconds, box) from summary.txt."""
    rows = {}
    for line in (out / "summary.txt").read_text().splitlines():
        m = re.match(r"(\w+)\s+exit (\d+)\s+(\d+) s \(box (\d+) s\)", line)
        rows[m.group(1)] = tuple(int(g) for g in m.groups()[1:])
    return rows


def test_gpu_check_script_parses():
    result = run(["bash", "-n", str(SCRIPT)])
    assert result.returncode == 0, result.stderr


def test_gpu_check_install_steps_stage_an_importable_package(tmp_path):
    """The offline install without pip: a staged copy with runtime/ and kernels/ mapped."""
    result = run(["bash", str(SCRIPT), "--install-only"], check_env(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    staged = tmp_path / "work" / "src"
    assert f"dy2stat from {staged}/dy2stat/__init__.py" in result.stdout
    assert (staged / "dy2stat" / "runtime" / "executor.py").exists()
    assert (staged / "dy2stat" / "kernels" / "cudnn.py").exists()
    assert "convolution:" in result.stdout  # device.info, as the GPU machine will show it


@pytest.mark.skipif(d2s.is_compiled_with_cuda(), reason="a real GPU runs the real check")
def test_the_dry_run_runs_every_phase_on_the_test_double_within_its_box(tmp_path):
    result = run(["bash", str(SCRIPT), "--dry-run"], check_env(tmp_path), timeout=600)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    out = tmp_path / "out"
    rows = summary(out)
    assert list(rows) == PHASES
    for phase, (status, seconds, box) in rows.items():
        assert status == 0 and seconds <= box, (phase, rows)
    assert sum(box for _, _, box in rows.values()) <= 8 * 60 + 30  # about 8 minutes at most
    for name in ("machine.txt", "install.log", "probe.txt", "tests.log", "bench.txt"):
        assert (out / name).stat().st_size > 0, name
    suite = ET.parse(out / "tests.xml").getroot()
    suite = suite if suite.tag == "testsuite" else suite[0]
    assert int(suite.get("tests")) > 100 and int(suite.get("failures")) == 0
    assert int(suite.get("errors")) == 0
    probe = json.loads((out / "probe.json").read_text())
    assert set(probe["W2 (us per call)"]) == {"eager", "converted, op by op",
                                              "converted, loop kernel",
                                              "converted, loop kernel in a graph"}
    bench = json.loads((out / "bench.json").read_text())
    assert set(bench["train"]) == {"lenet", "lstm", "resnet18"} and bench["w2"]
    assert not bench["mismatches"]  # converted agreed with eager everywhere


@pytest.mark.skipif(d2s.is_compiled_with_cuda(), reason="a real GPU runs the real check")
def test_a_phase_past_its_box_is_cut_and_the_next_phases_still_run(tmp_path):
    env = check_env(tmp_path, BOX_TESTS="1", BOX_BENCH="1")
    result = run(["bash", str(SCRIPT), "--dry-run"], env, timeout=300)
    assert result.returncode != 0
    rows = summary(tmp_path / "out")
    assert list(rows) == PHASES and rows["tests"][0] == 124 and rows["bench"][0] == 124
    assert "TIMED OUT" in (tmp_path / "out" / "summary.txt").read_text()


@pytest.mark.skipif(d2s.is_compiled_with_cuda(), reason="a real GPU runs the real tests")
def test_gpu_tests_pass_on_the_test_double_with_cudnn():
    """The gpu-marked tests with tests/gpu/fake_cupy.py and the cuDNN frontend's double
    (the dry run above runs them without cuDNN, as CuPy 14 alone is; the op table's
    sweep runs there only)."""
    result = run([sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider",
                  "tests/gpu", "tests/nn/test_gpu.py", "tests/kernels/test_nn_kernels.py",
                  "--ignore=tests/gpu/test_ops_on_gpu.py"], env={"D2S_FAKE_CUPY": "cudnn"})
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "skipped" not in result.stdout
