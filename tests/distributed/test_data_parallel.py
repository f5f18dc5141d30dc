"""Data-parallel training: two ranks under mpiexec train a converted LeNet and an eager
MLP exactly as one process trains them on the combined batch; a rank that fails or
hangs ends the job with a clear error; a job of one is the model itself."""

from __future__ import annotations

import gc
import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import gradient_hooks
from dy2stat.distributed import DataParallel, DistributedError, data_parallel, env, launch
from tests.distributed import training

MPIEXEC = launch.find_mpiexec()
needs_mpi = pytest.mark.skipif(
    MPIEXEC is None or importlib.util.find_spec("mpi4py") is None,
    reason="needs mpiexec and mpi4py (pip install 'dy2stat[distributed]')")


def run_job(out: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``mpiexec -n 2 python training.py OUT ARGS``, one BLAS thread per rank."""
    command = [MPIEXEC, "-n", "2", sys.executable, training.__file__, str(out), *args]
    environment = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                          env=environment)


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("ranks")
    result = run_job(out)
    assert result.returncode == 0, result.stdout + result.stderr
    return [np.load(out / f"rank{r}.npz") for r in (0, 1)]


@needs_mpi
@pytest.mark.parametrize("kind", ["lenet", "mlp"])
def test_two_ranks_train_as_one_process_on_the_combined_batch(two_ranks, kind):
    losses, params, without_grad = training.train(kind, world_size=1, rank=0)
    rank0, rank1 = ({k[len(kind) + 1:]: v for k, v in r.items() if k.startswith(kind + "/")}
                    for r in two_ranks)
    assert len(losses) == training.STEPS
    # Equal shards: the combined batch's mean loss is the mean of the ranks' means.
    np.testing.assert_allclose((rank0["losses"] + rank1["losses"]) / 2, losses,
                               rtol=1e-5, atol=1e-6)
    assert not np.allclose(rank0["losses"], rank1["losses"])  # they read different data
    for name, value in params.items():
        np.testing.assert_array_equal(rank0[name], rank1[name], err_msg=name)  # one model
        np.testing.assert_allclose(rank0[name], value, rtol=1e-4, atol=1e-6, err_msg=name)
    # A parameter no rank computed a gradient for keeps none, as in one process.
    assert list(rank0["without_grad"]) == without_grad
    assert (kind == "mlp") == bool(without_grad)


@needs_mpi
def test_no_sync_accumulates_and_the_next_backward_averages_the_sums(two_ranks):
    rank0 = two_ranks[0]
    got = {k[len("no_sync/got/"):]: rank0[k] for k in rank0 if k.startswith("no_sync/got/")}
    expected = {k[len("no_sync/expected/"):]: rank0[k] for k in rank0
                if k.startswith("no_sync/expected/")}
    assert sorted(got) == sorted(expected) and got
    for name, value in expected.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-7, err_msg=name)


@needs_mpi
def test_a_rank_that_raises_stops_the_job_with_its_error(tmp_path):
    start = time.monotonic()
    result = run_job(tmp_path, "raise")
    assert result.returncode != 0
    assert "ValueError: rank 1 cannot read its batch" in result.stderr  # its traceback
    assert ("rank 0 stops: rank 1 failed (ValueError: rank 1 cannot read its batch)"
            in result.stderr)
    assert time.monotonic() - start < 30


@needs_mpi
def test_a_rank_that_hangs_makes_the_others_time_out(tmp_path):
    start = time.monotonic()
    result = run_job(tmp_path, "hang")  # rank 1 sleeps 60 s; collectives wait 1 s
    assert result.returncode != 0
    assert "rank 0: the gradient sum of bucket 0" in result.stderr
    assert "timed out after 1 s" in result.stderr
    assert time.monotonic() - start < 30


@needs_mpi
def test_ranks_with_batches_of_different_sizes_are_an_error(tmp_path):
    result = run_job(tmp_path, "batch")
    assert result.returncode != 0
    assert "the ranks' batches differ in size ([4, 3])" in result.stderr


# ------------------------------------------------------------------ a job of one
@pytest.fixture
def fresh_job(monkeypatch):
    """No job connected yet (and none left connected afterwards)."""
    monkeypatch.setattr(env, "job", env._Job())
    for name in ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)


def test_in_a_job_of_one_data_parallel_trains_as_the_layer(fresh_job):
    parallel = env.init_parallel_env()
    assert (parallel.rank, parallel.world_size) == (0, 1)
    assert (d2s.distributed.get_rank(), d2s.distributed.get_world_size()) == (0, 1)
    alone, _, _ = training.train("mlp", world_size=1, rank=0)
    wrapped, params, _ = training.train("mlp", world_size=1, rank=0, wrap=DataParallel)
    np.testing.assert_array_equal(wrapped, alone)
    assert list(params) == list(training.MLP().state_dict())  # the layer's own keys


def test_no_sync_in_a_job_of_one_accumulates(fresh_job):
    d2s.seed(0)
    net = DataParallel(training.MLP())
    x = d2s.randn([4, 16])
    with net.no_sync():
        net(x).sum().backward()
    net(x).sum().backward()
    twice = net._layers.out.bias.grad.numpy()
    net.clear_gradients()
    net(x).sum().backward()
    np.testing.assert_allclose(twice, 2 * net._layers.out.bias.grad.numpy(), rtol=1e-6)


def test_a_launched_rank_must_connect_first(fresh_job, monkeypatch):
    monkeypatch.setenv("PMI_RANK", "1")
    monkeypatch.setenv("PMI_SIZE", "2")
    assert (d2s.distributed.get_rank(), d2s.distributed.get_world_size()) == (1, 2)
    with pytest.raises(DistributedError, match="call d2s.distributed.init_parallel_env"):
        DataParallel(training.MLP())


@pytest.mark.parametrize("kwargs, message", [
    ({"backend": "gloo"}, "unknown backend 'gloo'"),
    ({"timeout": 0}, "timeout must be > 0"),
])
def test_init_parallel_env_refuses_bad_arguments(fresh_job, kwargs, message):
    with pytest.raises(ValueError, match=message):
        env.init_parallel_env(**kwargs)


def test_data_parallel_wraps_layers_only():
    with pytest.raises(TypeError, match="expected a Layer, got function"):
        DataParallel(lambda x: x)


def test_a_wrapper_that_is_dropped_stops_watching(fresh_job):
    class Communicator:  # enough to build the wrapper: it sends nothing here
        xp, rank, world_size = np, 0, 2

        def broadcast(self, array, root, what):
            return array

    env.job.communicator = Communicator()
    net = training.MLP()
    wrapper = DataParallel(net)
    assert isinstance(wrapper._reducer, data_parallel._Reducer)
    assert all(gradient_hooks.watched(p) for p in net.parameters())
    del wrapper
    gc.collect()
    assert not any(gradient_hooks.watched(p) for p in net.parameters())
