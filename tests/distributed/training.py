"""Training runs the data-parallel tests compare: the same models, data and steps, on
N ranks (this file run by mpiexec) or in one process on the combined batch (imported).

    mpiexec -n 2 python tests/distributed/training.py OUT_DIR [MODE]

writes OUT_DIR/rank<r>.npz (each step's loss and the final parameters of each
model). MODE ``raise``, ``hang`` or ``batch`` makes rank 1 raise, sleep, or read
batches of another size at step 3 (``hang``: with a one-second timeout on collectives).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

import dy2stat as d2s
from dy2stat import nn
from dy2stat.distributed import DataParallel, DistributedBatchSampler
from dy2stat.io import DataLoader, TensorDataset
from dy2stat.nn import functional as F
from dy2stat.vision.models import LeNet

STEPS = 20
BATCH = 4  # per rank
SAMPLES = 64  # an epoch is 8 steps of 2 x 4: 20 steps go through set_epoch twice


class MLP(nn.Layer):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(16, 32)
        self.out = nn.Linear(32, 5)
        self.unused = nn.Linear(3, 3)  # no gradient on any rank: stays None

    def forward(self, x):
        return self.out(F.relu(self.hidden(x)))


def data(kind: str) -> TensorDataset:
    rng = np.random.default_rng(1)
    x = (rng.random([SAMPLES, 1, 28, 28]) if kind == "lenet"  # images in [0, 1)
         else rng.standard_normal([SAMPLES, 16])).astype("float32")
    y = rng.integers(0, 5, [SAMPLES, 1]).astype("int64")
    return TensorDataset([d2s.to_tensor(x), d2s.to_tensor(y)])


def model(kind: str, seed: int) -> nn.Layer:
    d2s.seed(seed)
    return d2s.jit.to_static(LeNet(num_classes=5)) if kind == "lenet" else MLP()


def train(kind: str, world_size: int, rank: int, wrap=lambda m: m, fail_at=None):
    """Each step's loss and the final parameters; ``world_size`` ranks of BATCH
    samples, or (``world_size`` 1 with the combined batch) the single process."""
    net = wrap(model(kind, seed=rank))  # DataParallel copies rank 0's weights
    opt = d2s.optimizer.Momentum(learning_rate=0.02, momentum=0.9,
                                 parameters=net.parameters())
    dataset = data(kind)
    batch = BATCH * (2 if world_size == 1 else 1)
    sampler = DistributedBatchSampler(dataset, batch, num_replicas=world_size, rank=rank,
                                      shuffle=True)
    losses, step, epoch = [], 0, 0
    while step < STEPS:
        sampler.set_epoch(epoch)
        for x, y in DataLoader(dataset, batch_sampler=sampler):
            if step == fail_at:
                x, y = _fail(x, y)
            loss = F.cross_entropy(net(x), y)
            loss.backward()
            without_grad = sorted(k for k, p in net.named_parameters() if p.grad is None)
            opt.step()
            opt.clear_grad()
            losses.append(float(loss))
            step += 1
            if step == STEPS:
                break
        epoch += 1
    params = {k: v.numpy() for k, v in net.state_dict().items()}
    return np.array(losses), params, without_grad


def _fail(x, y):
    mode = sys.argv[2]
    if mode == "raise":
        raise ValueError("rank 1 cannot read its batch")
    if mode == "hang":
        time.sleep(60)
    return x[:-1], y[:-1]  # "batch": one sample fewer


def accumulated(world_size: int, rank: int) -> tuple[dict, dict]:
    """A backward under ``no_sync`` on rank 0 only (with no traffic, the others need not
    take part), then one on every rank: the gradients DataParallel leaves, and the
    mean over the ranks of each rank's summed gradients (computed here from every
    rank's data, without DataParallel)."""
    def batch(r, k):
        return d2s.to_tensor(np.random.default_rng(10 * r + k).standard_normal(
            [BATCH, 16]).astype("float32"))

    def loss(net, x):
        return (net(x) ** 2).mean()

    net = DataParallel(model("mlp", seed=0))
    if rank == 0:
        with net.no_sync():
            loss(net, batch(rank, 0)).backward()
    loss(net, batch(rank, 1)).backward()
    got = {k: p.grad.numpy() for k, p in net.named_parameters() if p.grad is not None}
    alone = model("mlp", seed=0)
    for r in range(world_size):
        for k in (0, 1) if r == 0 else (1,):
            loss(alone, batch(r, k)).backward()
    expected = {"_layers." + k: p.grad.numpy() / world_size
                for k, p in alone.named_parameters() if p.grad is not None}
    return got, expected


def main() -> None:
    out, mode = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None
    env = d2s.distributed.init_parallel_env(timeout=1.0 if mode == "hang" else 60.0)
    fail_at = 3 if mode and env.rank == 1 else None
    results = {}
    for kind in (("mlp",) if mode else ("mlp", "lenet")):
        losses, params, without_grad = train(
            kind, env.world_size, env.rank, fail_at=fail_at,
            wrap=lambda m: DataParallel(m, comm_buffer_size=0.002, last_comm_buffer_size=0.001))
        results[f"{kind}/losses"] = losses
        results[f"{kind}/without_grad"] = [k.removeprefix("_layers.") for k in without_grad]
        results.update({f"{kind}/{k}": v for k, v in params.items()})
    if not mode:
        got, expected = accumulated(env.world_size, env.rank)
        results.update({f"no_sync/got/{k}": v for k, v in got.items()})
        results.update({f"no_sync/expected/{k}": v for k, v in expected.items()})
    np.savez(os.path.join(out, f"rank{env.rank}.npz"), **results)


if __name__ == "__main__":
    main()
