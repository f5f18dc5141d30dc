"""The GPU check's pieces, run where there is no GPU: the script's syntax and its
install steps, the benchmark's CPU dry run, and the gpu tests on a fake CuPy."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

import dy2stat as d2s

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"


def run(args, env=None, timeout=300):
    return subprocess.run(args, cwd=ROOT, env={**os.environ, **(env or {})},
                          capture_output=True, text=True, timeout=timeout)


def test_gpu_check_script_parses():
    result = run(["bash", "-n", str(SCRIPT)])
    assert result.returncode == 0, result.stderr


def test_gpu_check_install_steps_stage_an_importable_package(tmp_path):
    """The offline install without pip: a staged copy with runtime/ and kernels/ mapped."""
    env = {"D2S_INSTALL": "stage", "D2S_WORK": str(tmp_path / "work"),
           "OUT": str(tmp_path / "out"), "PYTHON": sys.executable}
    result = run(["bash", str(SCRIPT), "--install-only"], env)
    assert result.returncode == 0, result.stdout + result.stderr
    staged = tmp_path / "work" / "src"
    assert f"dy2stat from {staged}/dy2stat/__init__.py" in result.stdout
    assert (staged / "dy2stat" / "runtime" / "executor.py").exists()
    assert (staged / "dy2stat" / "kernels" / "cudnn.py").exists()


def test_gpu_bench_dry_run_on_the_cpu(tmp_path):
    out = tmp_path / "bench.json"
    result = run([sys.executable, "benchmarks/gpu_bench.py", "--cpu", "--calls", "1",
                  "--steps", "1", "--json", str(out)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "d2l MLP forward" in result.stdout and "LeNet, batch 64" in result.stdout
    assert "static >= 2x faster than eager, d2l MLP batch 1" in result.stdout
    data = json.loads(out.read_text())
    assert set(data["mlp"]) == {"1", "64"} and set(data["train"]) == {"lenet", "lstm"}
    assert {"eager", "to_static", "executor"} <= set(data["mlp"]["1"])


@pytest.mark.skipif(d2s.is_compiled_with_cuda(), reason="a real GPU runs the gpu tests")
@pytest.mark.parametrize("fake", ["1", "cudnn"], ids=["like CuPy 14", "like CuPy 13 + cuDNN"])
def test_gpu_tests_pass_on_a_fake_cupy(fake):
    """The gpu-marked device tests, with tests/gpu/fake_cupy.py standing in for CuPy."""
    result = run([sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider",
                  "tests/gpu", "tests/nn/test_gpu.py", "tests/kernels/test_nn_kernels.py"],
                 env={"D2S_FAKE_CUPY": fake})
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "skipped" not in result.stdout
