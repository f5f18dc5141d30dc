"""Training-step time, eager vs converted (``jit.to_static``), measured in one run.

    python benchmarks/train_step.py [--profile]

Prints ms/step (forward + backward + Adam step) of
- LeNet (``d2s.vision.models.LeNet``) at batch 64 on 1x28x28 images, and
- an LSTM language model whose time loop is a ``while`` on a TENSOR length
  (``while t < length`` with ``length`` a 0-D int64 tensor: one ``while`` op in the
  converted program, a Python loop of ``length`` steps in eager mode),
eager; the eager loop over the converted Layer ("Layer": forward and backward
programs, Adam eagerly); and the whole step -- forward, ``loss.backward()``,
``opt.step()``, ``opt.clear_grad()`` -- converted as one function ("step": one
program), with the ratio eager / step, with the default flags and with the opt-in
flag ``batch_minor_layout`` on (LeNet). All runs start from the same weights, and
the script checks that their losses agree: bit for bit with the default flags
(LeNet), to 1e-4 with the opt-in layout or the LSTM's loop.
Targets: the converted step >= 1.3x faster than eager on LeNet, >= 2x on the LSTM.
When PyTorch is installed (optional; skipped with a note when not), the LeNet rows
also time PyTorch eager on one thread, taking turns with the others, from the same
weights (its losses checked to 1e-4), and print the converted step's time over it
(goal <= 0.8x). ``--profile`` prints the top cProfile entries of each configuration.

BLAS runs on one thread unless ``OPENBLAS_NUM_THREADS`` (or ``OMP_NUM_THREADS``)
is set. With more, eager mode gains a little (its products use both cores)
and this alternating benchmark is skewed against the converted model: after
eager steps OpenBLAS's idle threads spin for ~0.1 s into the converted steps
(whose plans use one BLAS thread per product and both cores through batch
splitting and overlap) — set ``OPENBLAS_THREAD_TIMEOUT=4`` to compare.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import importlib.util
import io
import os
import pstats
import time

if __name__ == "__main__" and "OMP_NUM_THREADS" not in os.environ:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads OpenBLAS

import numpy as np

import dy2stat as d2s
from dy2stat import jit, nn
from dy2stat.nn import functional as F
from dy2stat.vision.models import LeNet

LENET_BATCH = 64
LM_BATCH, LM_STEPS, LM_VOCAB, LM_EMB, LM_HIDDEN = 16, 20, 50, 32, 64


class LanguageModel(nn.Layer):
    """Embedding -> LSTMCell stepped by ``while t < length`` -> Linear -> cross entropy."""

    def __init__(self, vocab, emb, hidden):
        super().__init__()
        self.hidden = hidden
        self.embedding = nn.Embedding(vocab, emb)
        self.cell = nn.LSTMCell(emb, hidden)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, ids, length):
        x = self.embedding(ids)
        h = d2s.zeros([ids.shape[0], self.hidden])
        c = d2s.zeros([ids.shape[0], self.hidden])
        loss = d2s.zeros([])
        t = 0
        while t < length:
            h, (h, c) = self.cell(x[:, t], (h, c))
            loss = loss + F.cross_entropy(self.out(h), ids[:, t + 1])
            t += 1
        return loss / length.astype("float32")


def lenet_case():
    rng = np.random.default_rng(0)
    x = d2s.to_tensor(rng.standard_normal((LENET_BATCH, 1, 28, 28)).astype("float32"))
    y = d2s.to_tensor(rng.integers(0, 10, (LENET_BATCH, 1)).astype("int64"))
    loss_fn = nn.CrossEntropyLoss()

    def make():
        d2s.seed(0)
        return LeNet()

    return make, lambda net: loss_fn(net(x), y)


def torch_lenet_step(net):
    """The same LeNet step in PyTorch eager on one thread, from ``net``'s weights; None
    when PyTorch is not installed."""
    if importlib.util.find_spec("torch") is None:
        return None
    import torch  # optional: not a dependency of dy2stat

    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 6, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2, 2),
        torch.nn.Conv2d(6, 16, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2, 2),
        torch.nn.Flatten(), torch.nn.Linear(400, 120), torch.nn.Linear(120, 84),
        torch.nn.Linear(84, 10))
    ours = [p.numpy() for p in net.parameters()]
    with torch.no_grad():
        for tensor, value in zip(model.parameters(), ours):
            if value.ndim == 2:
                value = value.T  # dy2stat's Linear holds [in, out]
            tensor.copy_(torch.from_numpy(np.ascontiguousarray(value)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)  # lenet_case's batch
    x = torch.from_numpy(rng.standard_normal((LENET_BATCH, 1, 28, 28)).astype("float32"))
    y = torch.from_numpy(rng.integers(0, 10, (LENET_BATCH, 1)).astype("int64")[:, 0])
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        torch.set_num_threads(1)  # its idle threads would spin into the others' turns
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.item()

    return step


def lm_case():
    rng = np.random.default_rng(0)
    ids = d2s.to_tensor(rng.integers(0, LM_VOCAB, (LM_BATCH, LM_STEPS + 1)).astype("int64"))
    length = d2s.to_tensor(np.array(LM_STEPS, "int64"))

    def make():
        d2s.seed(0)
        return LanguageModel(LM_VOCAB, LM_EMB, LM_HIDDEN)

    return make, lambda net: net(ids, length)


def trainer(make, loss_of, convert):
    """A training step: eager (``convert`` None), over the converted Layer ("layer"), or
    converted whole ("step")."""
    net = make()
    if convert == "layer":
        jit.to_static(net)
    opt = d2s.optimizer.Adam(parameters=net.parameters(), learning_rate=1e-3)

    def train_step():
        loss = loss_of(net)
        loss.backward()
        opt.step()
        opt.clear_grad()
        return loss

    if convert == "step":
        train_step = jit.to_static(train_step)
    return lambda: float(train_step())


@contextlib.contextmanager
def flags_set(flags):
    """``flags`` set for the block (plans compiled in it keep them), then restored."""
    old = d2s.get_flags(list(flags))
    d2s.set_flags(flags)
    try:
        yield
    finally:
        d2s.set_flags(old)


def ms_per_step(steps_by_label: dict, steps: int, repeats: int) -> dict:
    """Best of ``repeats`` runs of ``steps`` steps, in ms per step, per label.

    The configurations take turns, so a slow spell of the machine hits both alike.
    """
    best = dict.fromkeys(steps_by_label, float("inf"))
    for _ in range(repeats):
        for label, step in steps_by_label.items():
            start = time.perf_counter()
            for _ in range(steps):
                step()
            best[label] = min(best[label], (time.perf_counter() - start) / steps * 1e3)
    return best


def profile(label, step, steps, top=12):
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(steps):
        step()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    print(f"\n--- cProfile: {label}, {steps} steps, by own time")
    print("\n".join(out.getvalue().splitlines()[4:]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10, help="timed steps per repeat")
    parser.add_argument("--repeats", type=int, default=7, help="repeats (the best is kept)")
    parser.add_argument("--profile", action="store_true", help="print cProfile top entries")
    args = parser.parse_args()

    layout = {"batch_minor_layout": True}
    cases = [  # name, case, target, opt-in flags, rtol of the converted losses
        (f"LeNet, batch {LENET_BATCH}", lenet_case(), 1.3, {}, 0),
        (f"LeNet, batch {LENET_BATCH}, batch_minor_layout on", lenet_case(), 1.3, layout, 1e-4),
        (f"LSTM LM, tensor-length while, b{LM_BATCH} T{LM_STEPS} h{LM_HIDDEN}", lm_case(), 2.0,
         {}, 1e-4),
    ]
    rows = []
    for name, (make, loss_of), target, flags, rtol in cases:
        steps = {kind: trainer(make, loss_of, kind) for kind in (None, "layer", "step")}
        peer = torch_lenet_step(make()) if name.startswith("LeNet") else None
        if peer is not None:
            steps["torch"] = peer
        with flags_set(flags):  # the converted plans compile on the first step
            warm = [[step() for step in steps.values()] for _ in range(3)]
        for k in range(1, len(steps)):  # and the losses are checked
            np.testing.assert_allclose([w[k] for w in warm], [w[0] for w in warm],
                                       rtol=rtol if k < 3 else 1e-4)
        times = ms_per_step(steps, args.steps, args.repeats)
        rows.append((name, times[None], times["layer"], times["step"], target,
                     times.get("torch")))
        if args.profile:
            for kind, step in steps.items():
                profile(f"{name}, {kind or 'eager'}", step, args.steps)

    cpu_flags = d2s.get_flags(["inter_op_parallelism", "batch_parallelism", "batch_minor_layout"])
    print(f"\nBLAS threads: {os.environ.get('OPENBLAS_NUM_THREADS') or 'OpenBLAS default'}; "
          f"flags: {cpu_flags}")
    if importlib.util.find_spec("torch") is None:
        print("(PyTorch is not installed: its column is skipped)")
    print(f"\n{'case (forward+backward+Adam)':52s} {'eager ms':>9s} {'Layer ms':>9s} "
          f"{'step ms':>8s} {'speedup':>8s} {'target':>7s}  {'PyTorch ms':>10s} "
          f"{'step/PyTorch':>12s}")
    for name, t_eager, t_layer, t_step, target, t_torch in rows:
        speedup = t_eager / t_step
        mark = "ok" if speedup >= target else "MISSED"
        peer = "" if t_torch is None else (
            f"  {t_torch:10.2f} {t_step / t_torch:11.2f}x "
            + ("ok" if t_step / t_torch <= 0.8 else "MISSED (goal <= 0.8x)"))
        print(f"{name:52s} {t_eager:9.2f} {t_layer:9.2f} {t_step:8.2f} {speedup:7.2f}x "
              f"{target:5.1f}x {mark:6s}{peer}")


if __name__ == "__main__":
    main()
