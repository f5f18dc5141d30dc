"""dy2stat on the GPU: eager vs static vs PyTorch CUDA eager, measured in one run.

    python benchmarks/gpu_bench.py [--json FILE] [--calls N] [--steps N] [--repeat N]
    python benchmarks/gpu_bench.py --cpu     # a quick dry run on the CPU (no GPU needed)

Cases (times are the best of --repeat runs, the configurations taking turns):
- the second seed's d2l MLP (42 x Linear(512, 512), then 512 -> 256 -> ReLU ->
  128 -> ReLU -> 2), forward at batch 1 and 64 without gradients: eager,
  ``to_static``, the same program through ``static.Executor`` (fetches kept on
  the device), and PyTorch CUDA eager with the same weights (skipped when
  torch is missing);
- a LeNet train step at batch 64 (forward, cross entropy, backward, Adam);
- an LSTM train step (LSTM(32, 64) over 20 steps at batch 16, a Linear head
  on the last step, cross entropy, backward, Adam).
Each timed loop ends with a device synchronize, so GPU work is counted.
Targets (issue 7): static >= 2x faster than eager on the d2l MLP at batch 1,
and ahead of PyTorch CUDA eager there.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time

import numpy as np
from train_step import trainer  # the same training step the CPU benchmark times

import dy2stat as d2s
from dy2stat import flags, jit, nn, static
from dy2stat.kernels import backend, cudnn
from dy2stat.static import InputSpec
from dy2stat.vision.models import LeNet

try:  # the comparison column; optional
    import torch
except Exception:  # pragma: no cover - depends on the machine
    torch = None

LENET_BATCH = 64
LSTM_BATCH, LSTM_STEPS, LSTM_INPUT, LSTM_HIDDEN, LSTM_CLASSES = 16, 20, 32, 64, 10


# ------------------------------------------------------------------ timing
class Machine:
    """Where the run happens, and how to wait for its queued work."""

    def __init__(self, gpu: bool):
        self.gpu = gpu
        self.torch_device = None
        if torch is not None and (not gpu or torch.cuda.is_available()):
            self.torch_device = "cuda" if gpu else "cpu"

    def sync(self):
        if self.gpu:
            backend.cupy.cuda.get_current_stream().synchronize()
        if self.torch_device == "cuda":
            torch.cuda.synchronize()


def best_times(machine, fns: dict, calls: int, repeat: int) -> dict:
    """Best of ``repeat`` runs of ``calls`` calls, in microseconds per call, per label."""
    for fn in fns.values():  # warm: traces, compiles, CUDA kernels, allocator pools
        fn()
        fn()
    machine.sync()
    best = dict.fromkeys(fns, math.inf)
    for _ in range(repeat):
        for label, fn in fns.items():
            machine.sync()
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            machine.sync()
            best[label] = min(best[label], (time.perf_counter() - start) / calls * 1e6)
    return best


MISMATCHES: list = []


def close(a, b, what, rtol=1e-3):
    """Results agree relative to their scale (float32 sums in different orders);
    a disagreement is reported, and the timing goes on."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    scale = max(float(np.abs(b).max()), 1e-6)
    if a.shape != b.shape or not np.allclose(a, b, rtol=rtol, atol=rtol * scale):
        diff = np.abs(a - b).max() if a.shape == b.shape else "shape"
        MISMATCHES.append(f"{what}: results differ (max diff {diff}, scale {scale:.3g})")
        print(f"WARNING {MISMATCHES[-1]}", file=sys.stderr)


# ------------------------------------------------------------------ d2l MLP
def d2l_net():
    blocks = [nn.Linear(512, 512) for _ in range(42)] + [
        nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 2)]
    return nn.Sequential(*blocks)


def torch_twin(net, device):
    """The same network in PyTorch with the same weights (Linear weights transposed)."""
    layers = []
    for layer in net:
        if isinstance(layer, nn.Linear):
            t = torch.nn.Linear(layer.weight.shape[0], layer.weight.shape[1])
            with torch.no_grad():
                t.weight.copy_(torch.from_numpy(layer.weight.numpy().T.copy()))
                t.bias.copy_(torch.from_numpy(layer.bias.numpy()))
            layers.append(t)
        else:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers).to(device).eval()


def mlp_case(machine, batch, calls, repeat):
    d2s.seed(0)
    net = d2l_net()
    converted = d2l_net()
    converted.set_state_dict(net.state_dict())
    jit.to_static(converted, input_spec=[InputSpec([-1, 512], "float32", "x")])
    x_host = np.random.default_rng(1).standard_normal((batch, 512)).astype("float32")
    x = d2s.to_tensor(x_host)
    with d2s.no_grad():
        want = net(x).numpy()
        close(converted(x).numpy(), want, "to_static vs eager")
    concrete = converted.forward.concrete_program
    runner = concrete.runner
    exe = static.Executor()
    feed = {runner.feed_names[0]: x._data}
    fetch = list(runner.fetch_names)
    close(exe.run(concrete.main_program, feed=feed, fetch_list=fetch)[0], want,
          "static.Executor vs eager")

    def eager():
        with d2s.no_grad():
            net(x)

    def to_static():
        with d2s.no_grad():
            converted(x)

    fns = {
        "eager": eager,
        "to_static": to_static,
        "executor": lambda: exe.run(concrete.main_program, feed=feed, fetch_list=fetch,
                                    return_numpy=False),
    }
    if machine.torch_device is not None:
        tnet = torch_twin(net, machine.torch_device)
        tx = torch.from_numpy(x_host).to(machine.torch_device)
        with torch.inference_mode():
            close(tnet(tx).cpu().numpy(), want, "PyTorch vs dy2stat")

        def torch_eager():
            with torch.inference_mode():
                tnet(tx)

        fns["torch"] = torch_eager
    return best_times(machine, fns, calls, repeat)


# -------------------------------------------------------------- train steps
def torch_trainer(net, loss_of):
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_of(net)
        loss.backward()
        opt.step()
        return loss

    return step


class LSTMClassifier(nn.Layer):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(LSTM_INPUT, LSTM_HIDDEN)
        self.head = nn.Linear(LSTM_HIDDEN, LSTM_CLASSES)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


def train_case(machine, name, steps, repeat):
    rng = np.random.default_rng(0)
    loss_fn = nn.CrossEntropyLoss()
    if name == "lenet":
        x_host = rng.standard_normal((LENET_BATCH, 1, 28, 28)).astype("float32")
        y_host = rng.integers(0, 10, (LENET_BATCH,)).astype("int64")
        make = LeNet
    else:
        x_host = rng.standard_normal((LSTM_BATCH, LSTM_STEPS, LSTM_INPUT)).astype("float32")
        y_host = rng.integers(0, LSTM_CLASSES, (LSTM_BATCH,)).astype("int64")
        make = LSTMClassifier
    x, y = d2s.to_tensor(x_host), d2s.to_tensor(y_host)

    def seeded():
        d2s.seed(0)
        return make()

    eager = trainer(seeded, lambda net: loss_fn(net(x), y), False)
    converted = trainer(seeded, lambda net: loss_fn(net(x), y), True)
    losses = [(float(eager()), float(converted())) for _ in range(2)]
    close([c for _, c in losses], [e for e, _ in losses], f"{name}: to_static vs eager loss")
    fns = {"eager": eager, "to_static": converted}
    if machine.torch_device is not None:
        dev = machine.torch_device
        tnet = (torch_lenet() if name == "lenet" else torch_lstm()).to(dev)
        tx, ty = torch.from_numpy(x_host).to(dev), torch.from_numpy(y_host).to(dev)
        fns["torch"] = torch_trainer(
            tnet, lambda net: torch.nn.functional.cross_entropy(net(tx), ty))
    return {k: v / 1e3 for k, v in best_times(machine, fns, steps, repeat).items()}  # ms


def torch_lenet():
    t = torch.nn
    return t.Sequential(
        t.Conv2d(1, 6, 3, padding=1), t.ReLU(), t.MaxPool2d(2, 2),
        t.Conv2d(6, 16, 5), t.ReLU(), t.MaxPool2d(2, 2), t.Flatten(),
        t.Linear(400, 120), t.Linear(120, 84), t.Linear(84, 10))


def torch_lstm():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(LSTM_INPUT, LSTM_HIDDEN, batch_first=True)
            self.head = torch.nn.Linear(LSTM_HIDDEN, LSTM_CLASSES)

        def forward(self, x):
            out, _ = self.lstm(x)
            return self.head(out[:, -1])

    return Net()


# -------------------------------------------------------------------- report
def ratio(a, b):
    return a / b if b else math.nan


def describe(machine) -> str:
    parts = [f"python {platform.python_version()}", f"numpy {np.__version__}",
             f"dy2stat device {d2s.get_device()}"]
    if backend.has_cupy():
        parts.append(f"cupy {backend.cupy.__version__}")
        if machine.gpu:
            props = backend.cupy.cuda.runtime.getDeviceProperties(
                backend.cupy.cuda.Device().id)
            name = props["name"]
            parts.append(name.decode() if isinstance(name, bytes) else str(name))
    parts.append(f"cuDNN via CuPy: {'yes' if cudnn.available() else 'no'}")
    parts.append(f"torch {torch.__version__} on {machine.torch_device}"
                 if machine.torch_device else "torch: not available (column skipped)")
    return " | ".join(parts)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true",
                        help="a quick dry run on the CPU (small counts unless given)")
    parser.add_argument("--calls", type=int, help="MLP forward calls per repeat (GPU: 200)")
    parser.add_argument("--steps", type=int, help="train steps per repeat (GPU: 20)")
    parser.add_argument("--repeat", type=int, help="repeats; the best is kept (GPU: 5)")
    parser.add_argument("--json", metavar="FILE",
                        help="also write the results as JSON (default: $OUT/gpu_bench.json "
                             "when OUT is set)")
    args = parser.parse_args(argv)
    calls = args.calls or (2 if args.cpu else 200)
    steps = args.steps or (2 if args.cpu else 20)
    repeat = args.repeat or (1 if args.cpu else 5)
    if not args.cpu:
        if not d2s.is_compiled_with_cuda():
            print("no GPU: CuPy is missing or sees no device (use --cpu for a dry run)",
                  file=sys.stderr)
            return 2
        d2s.set_device("gpu")
        flags.set_flags({"cudnn_exhaustive_search": True})  # no-op without cuDNN
    machine = Machine(gpu=not args.cpu)
    print(describe(machine))
    print(f"MLP: {calls} calls per repeat; train steps: {steps} per repeat; best of {repeat}\n")

    results = {"machine": describe(machine), "mlp": {}, "train": {}}
    for batch in (1, 64):
        results["mlp"][batch] = mlp_case(machine, batch, calls, repeat)
    for name in ("lenet", "lstm"):
        results["train"][name] = train_case(machine, name, steps, repeat)

    cols = ["eager", "to_static", "executor", "torch"]
    print(f"{'d2l MLP forward (us/call)':28s}" + "".join(f"{c:>11s}" for c in cols)
          + f"{'eager/static':>14s}{'torch/static':>14s}")
    for batch, row in results["mlp"].items():
        static_best = min(row["to_static"], row["executor"])
        cells = "".join(f"{row[c]:11.1f}" if c in row else f"{'-':>11s}" for c in cols)
        torch_ratio = f"{ratio(row['torch'], static_best):13.2f}x" if "torch" in row else \
            f"{'-':>14s}"
        print(f"{'batch ' + str(batch):28s}{cells}{ratio(row['eager'], static_best):13.2f}x"
              f"{torch_ratio}")
    print()
    cols = ["eager", "to_static", "torch"]
    print(f"{'train step (ms/step)':28s}" + "".join(f"{c:>11s}" for c in cols)
          + f"{'eager/static':>14s}{'torch/static':>14s}")
    labels = {"lenet": f"LeNet, batch {LENET_BATCH}",
              "lstm": f"LSTM b{LSTM_BATCH} T{LSTM_STEPS} h{LSTM_HIDDEN}"}
    for name, row in results["train"].items():
        cells = "".join(f"{row[c]:11.2f}" if c in row else f"{'-':>11s}" for c in cols)
        torch_ratio = f"{ratio(row['torch'], row['to_static']):13.2f}x" if "torch" in row \
            else f"{'-':>14s}"
        print(f"{labels[name]:28s}{cells}{ratio(row['eager'], row['to_static']):13.2f}x"
              f"{torch_ratio}")

    one = results["mlp"][1]
    static_best = min(one["to_static"], one["executor"])
    checks = [("static >= 2x faster than eager, d2l MLP batch 1",
               ratio(one["eager"], static_best) >= 2)]
    if "torch" in one:
        checks.append(("static ahead of PyTorch CUDA eager, d2l MLP batch 1",
                       static_best < one["torch"]))
    else:
        checks.append(("static ahead of PyTorch CUDA eager, d2l MLP batch 1", None))
    print("\ntargets (issue 7)" + (" -- a CPU dry run: not the GPU figures" if args.cpu else ""))
    for text, ok in checks:
        print(f"  {'n/a   ' if ok is None else 'met   ' if ok else 'MISSED'} {text}")
    results["targets"] = {text: ok for text, ok in checks}
    results["mismatches"] = MISMATCHES
    for text in MISMATCHES:
        print(f"  WARNING {text}")

    path = args.json or (os.path.join(os.environ["OUT"], "gpu_bench.json")
                         if os.environ.get("OUT") else None)
    if path:
        with open(path, "w") as f:
            json.dump(results, f, indent=2, default=str)
        print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
