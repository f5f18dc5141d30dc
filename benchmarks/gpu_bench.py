"""dy2stat on the GPU: eager vs static vs PyTorch CUDA eager, measured in one run.

    python benchmarks/gpu_bench.py [--json FILE] [--calls N] [--steps N] [--repeat N]
    python benchmarks/gpu_bench.py --probe   # launch/sync cost, W2 four ways, conv paths
    python benchmarks/gpu_bench.py --cpu     # a quick dry run on the CPU (no GPU needed)
    D2S_FAKE_CUPY=1 python benchmarks/gpu_bench.py ...  # on the CuPy test double

The probe (``--probe``): a tiny kernel's launch cost, a launch with a synchronize,
a one-element read back, a captured graph of 10 tiny kernels; the W2 loop four
ways (eager; converted, op by op; its loop as one kernel; and that captured as a
CUDA graph, the default); a loop that does not lower (a matrix product in its
body) op by op and with its iterations replayed as graphs; LeNet's second
convolution (forward and both gradients) through the generic kernel and through
cuDNN.

Cases (times are the best of --repeat runs, the configurations taking turns):
- the second seed's d2l MLP (42 x Linear(512, 512), then 512 -> 256 -> ReLU ->
  128 -> ReLU -> 2), forward at batch 1 and 64 without gradients: eager,
  ``to_static``, the same program through ``static.Executor`` (fetches kept on
  the device), and PyTorch CUDA eager with the same weights (skipped when
  torch is missing);
- a LeNet train step at batch 64 (forward, cross entropy, backward, Adam);
- an LSTM train step (LSTM(32, 64) over 20 steps at batch 16, a Linear head
  on the last step, cross entropy, backward, Adam);
- a ResNet-18 train step at batch 32 on 3x32x32 images (PyTorch's twin from
  torchvision, when installed, with its own weights: timing only);
- the W2 loop (``while x.sum() < 1000 and i < 100`` with a tensor ``if``, x[16]).
Each timed loop ends with a device synchronize, so GPU work is counted.
Targets: converted >= 2x faster than eager on the d2l MLP at batch 1, and ahead
of PyTorch CUDA eager there; LeNet and ResNet-18 train steps converted within
1.2x of PyTorch CUDA; the W2 loop in 30 us or less.
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

if os.environ.get("D2S_FAKE_CUPY"):  # a dry run on the test double: before dy2stat loads
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from tests.gpu import fake_cupy

    fake_cupy.install(cudnn=os.environ["D2S_FAKE_CUPY"] == "cudnn")

from train_step import trainer  # noqa: E402  (the training step the CPU benchmark times)

import dy2stat as d2s  # noqa: E402
from dy2stat import flags, jit, nn, static  # noqa: E402
from dy2stat.kernels import backend, cudnn  # noqa: E402
from dy2stat.static import InputSpec  # noqa: E402
from dy2stat.vision.models import LeNet, resnet18  # noqa: E402

try:  # the comparison column; optional
    import torch
except Exception:  # pragma: no cover - depends on the machine
    torch = None

LENET_BATCH = 64
LSTM_BATCH, LSTM_STEPS, LSTM_INPUT, LSTM_HIDDEN, LSTM_CLASSES = 16, 20, 32, 64, 10
RESNET_BATCH, RESNET_SIZE = 32, 32
DRY_BATCH = 8  # a dry run's batches (the test double computes on the CPU)
W2_GOAL_US, TRAIN_GOAL = 30.0, 1.2


# ------------------------------------------------------------------ timing
class Machine:
    """Where the run happens, and how to wait for its queued work."""

    def __init__(self, gpu: bool, small: bool = False):
        self.gpu, self.small = gpu, small  # small: a dry run (the test double, the CPU)
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
        batch = DRY_BATCH if machine.small else LENET_BATCH
        x_host = rng.standard_normal((batch, 1, 28, 28)).astype("float32")
        y_host = rng.integers(0, 10, (batch,)).astype("int64")
        make = LeNet
    elif name == "resnet18":
        batch, size = (1, 8) if machine.small else (RESNET_BATCH, RESNET_SIZE)
        x_host = rng.standard_normal((batch, 3, size, size)).astype("float32")
        y_host = rng.integers(0, 10, (batch,)).astype("int64")
        make = lambda: resnet18(num_classes=10)  # noqa: E731
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
    twin = {"lenet": torch_lenet, "lstm": torch_lstm, "resnet18": torch_resnet18}[name]
    if machine.torch_device is not None and twin() is not None:
        dev = machine.torch_device
        tnet = twin().to(dev)
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


def torch_resnet18():
    try:
        import torchvision  # optional: the twin of ResNet-18
    except Exception:  # noqa: BLE001
        return None
    return torchvision.models.resnet18(num_classes=10)


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
    parts.append(f"convolutions: {cudnn.status()}")
    parts.append(f"torch {torch.__version__} on {machine.torch_device}"
                 if machine.torch_device else "torch: not available (column skipped)")
    return " | ".join(parts)


# -------------------------------------------------------------------- W2
def w2(x):
    i = 0
    while x.sum() < 1000 and i < 100:
        if x.mean() > 20:
            x = x * 1.1 + 1
        else:
            x = x + 3
        i += 1
    return x


W2_WAYS = {  # way -> flags the converted function is compiled under
    "converted, op by op": {"gpu_loop_kernels": False, "cuda_graphs": False},
    "converted, loop kernel": {"gpu_loop_kernels": True, "cuda_graphs": False},
    "converted, loop kernel in a graph": {"gpu_loop_kernels": True, "cuda_graphs": True},
}
DEFAULT_W2_WAY = "converted, loop kernel in a graph"  # the flags' defaults


def w2_case(machine, calls, repeat) -> dict:
    """us per call of the W2 loop: eager, and converted the three ways above."""
    x = d2s.to_tensor(np.ones(16, "float32"))
    with d2s.no_grad():
        want = w2(x).numpy()
    fns = {"eager": w2}
    before = flags.get_flags(list(W2_WAYS["converted, op by op"]))
    for way, settings in W2_WAYS.items():
        flags.set_flags(settings)
        converted = jit.to_static(w2)
        with d2s.no_grad():
            close(converted(x).numpy(), want, f"W2 {way} vs eager")
        fns[way] = converted
    flags.set_flags(before)

    def timed(fn):
        def call():
            with d2s.no_grad():
                fn(x)
        return call

    return best_times(machine, {k: timed(f) for k, f in fns.items()}, calls, repeat)


def matmul_loop(x, w):
    while x.sum() < 1e6:
        x = d2s.matmul(x, w) + 1.0
    return x


def host_loop_case(machine, calls, repeat) -> dict:
    """us per call of a loop that does not lower (a product in its body): op by op, and
    its iterations replayed as one captured graph each (the default)."""
    x = d2s.ones([64, 64])
    w = d2s.to_tensor((np.eye(64) * 2).astype("float32"))
    with d2s.no_grad():
        want = matmul_loop(x, w).numpy()
    fns = {}
    before = flags.get_flags(["cuda_graphs"])
    for way, graphs in (("op by op", False), ("iterations replayed as graphs", True)):
        flags.set_flags({"cuda_graphs": graphs})
        converted = jit.to_static(matmul_loop)
        with d2s.no_grad():
            close(converted(x, w).numpy(), want, f"host loop {way} vs eager")
        fns[way] = converted
    flags.set_flags(before)

    def timed(fn):
        def call():
            with d2s.no_grad():
                fn(x, w)
        return call

    return best_times(machine, {k: timed(f) for k, f in fns.items()}, calls, repeat)


# ------------------------------------------------------------------ probe
def per_call_us(machine, fn, calls) -> float:
    fn()
    machine.sync()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    machine.sync()
    return (time.perf_counter() - start) / calls * 1e6


def probe(machine, calls, repeat) -> dict:
    """What one launch, one synchronize and one read cost here; W2 four ways; conv paths."""
    cp = backend.cupy
    x = cp.ones(1, dtype="float32")
    results = {
        "tiny kernel launch (us)": per_call_us(machine, lambda: x + 1, calls),
        "launch + synchronize (us)": per_call_us(machine, lambda: (x + 1, machine.sync()), calls),
        "one-element read to the host (us)": per_call_us(machine, lambda: float(x[0]), calls),
    }
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        y = x
        for _ in range(10):
            y = y + 1
        graph = stream.end_capture()
    results["graph of 10 tiny kernels (us)"] = per_call_us(machine, graph.launch, calls)
    results["W2 (us per call)"] = w2_case(machine, calls, repeat)
    results["a loop with a product, 7 turns (us per call)"] = host_loop_case(machine, calls,
                                                                             repeat)
    results["conv, LeNet's second layer, forward + gradients (us)"] = conv_paths(machine, calls)
    return results


def conv_paths(machine, calls) -> dict:
    from dy2stat.runtime.registry import get_op

    cp = backend.cupy
    rng = np.random.default_rng(0)
    x = cp.asarray(rng.standard_normal((LENET_BATCH, 6, 14, 14)).astype("float32"))
    w = cp.asarray(rng.standard_normal((16, 6, 5, 5)).astype("float32"))
    forward, grad_in, grad_w = (get_op(t).kernel for t in
                                ("conv2d", "conv2d_grad_input", "conv2d_grad_filter"))

    def step():
        y = forward(cp, x, w)
        grad_in(cp, x, w, y)
        grad_w(cp, x, y, w)

    times = {}
    for path, use in (("generic", False), ("cuDNN", True)):
        if use and not cudnn.available():
            times[path] = None
            continue
        flags.set_flags({"use_cudnn": use})
        times[path] = per_call_us(machine, step, max(1, calls // 10))
    flags.set_flags({"use_cudnn": True})
    return times


def print_probe(results: dict) -> None:
    for key, value in results.items():
        if isinstance(value, dict):
            print(key)
            for k, v in value.items():
                print(f"    {k:40s} {'-' if v is None else f'{v:10.1f}'}")
        else:
            print(f"{key:44s} {value:10.2f}")


# -------------------------------------------------------------------- main
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true",
                        help="a quick dry run on the CPU (small counts unless given)")
    parser.add_argument("--probe", action="store_true",
                        help="the probe: launch and sync cost, W2 four ways, conv paths")
    parser.add_argument("--calls", type=int, help="MLP forward calls per repeat (GPU: 200)")
    parser.add_argument("--steps", type=int, help="train steps per repeat (GPU: 20)")
    parser.add_argument("--repeat", type=int, help="repeats; the best is kept (GPU: 5)")
    parser.add_argument("--json", metavar="FILE",
                        help="also write the results as JSON (default: $OUT/gpu_bench.json "
                             "when OUT is set)")
    args = parser.parse_args(argv)
    small = args.cpu or bool(os.environ.get("D2S_FAKE_CUPY"))
    calls = args.calls or (2 if small else 200)
    steps = args.steps or (2 if small else 20)
    repeat = args.repeat or (1 if small else 5)
    if not args.cpu:
        if not d2s.is_compiled_with_cuda():
            print("no GPU: CuPy is missing or sees no device (use --cpu for a dry run)",
                  file=sys.stderr)
            return 2
        d2s.set_device("gpu")
        flags.set_flags({"cudnn_exhaustive_search": True})  # no-op without cuDNN
    machine = Machine(gpu=not args.cpu, small=small)
    print(describe(machine))
    if args.probe:
        if args.cpu:
            print("the probe needs a GPU (or D2S_FAKE_CUPY=1)", file=sys.stderr)
            return 2
        results = {"machine": describe(machine), **probe(machine, calls, repeat)}
        print_probe({k: v for k, v in results.items() if k != "machine"})
        return write(results, args.json, "probe.json")
    print(f"MLP: {calls} calls per repeat; train steps: {steps} per repeat; best of {repeat}\n")

    results = {"machine": describe(machine), "mlp": {}, "train": {}}
    for batch in (1, DRY_BATCH if small else 64):
        results["mlp"][batch] = mlp_case(machine, batch, calls, repeat)
    for name in ("lenet", "lstm", "resnet18"):
        results["train"][name] = train_case(machine, name, steps, repeat)
    results["w2"] = w2_case(machine, calls, repeat)
    report(results, small)
    return write(results, args.json, "gpu_bench.json")


def report(results: dict, dry: bool) -> None:
    """Print the tables and the targets (a dry run's figures are not the GPU's)."""
    cols = ["eager", "to_static", "executor", "torch"]
    print(f"{'d2l MLP forward (us/call)':28s}" + "".join(f"{c:>11s}" for c in cols)
          + f"{'eager/static':>14s}{'torch/static':>14s}")
    for batch, row in results["mlp"].items():  # the ratios: of to_static (converted)
        cells = "".join(f"{row[c]:11.1f}" if c in row else f"{'-':>11s}" for c in cols)
        torch_ratio = f"{ratio(row['torch'], row['to_static']):13.2f}x" if "torch" in row \
            else f"{'-':>14s}"
        print(f"{'batch ' + str(batch):28s}{cells}{ratio(row['eager'], row['to_static']):13.2f}x"
              f"{torch_ratio}")
    print()
    cols = ["eager", "to_static", "torch"]
    print(f"{'train step (ms/step)':28s}" + "".join(f"{c:>11s}" for c in cols)
          + f"{'eager/static':>14s}{'static/torch':>14s}")
    labels = {"lenet": f"LeNet, batch {DRY_BATCH if dry else LENET_BATCH}",
              "lstm": f"LSTM b{LSTM_BATCH} T{LSTM_STEPS} h{LSTM_HIDDEN}",
              "resnet18": f"ResNet-18, batch {1 if dry else RESNET_BATCH}"}
    for name, row in results["train"].items():
        cells = "".join(f"{row[c]:11.2f}" if c in row else f"{'-':>11s}" for c in cols)
        torch_ratio = f"{ratio(row['to_static'], row['torch']):13.2f}x" if "torch" in row \
            else f"{'-':>14s}"
        print(f"{labels[name]:28s}{cells}{ratio(row['eager'], row['to_static']):13.2f}x"
              f"{torch_ratio}")
    print("\nW2 loop (us/call)")
    for way, t in results["w2"].items():
        print(f"    {way:40s} {t:10.1f}")

    one, train = results["mlp"][1], results["train"]
    converted = one["to_static"]
    w2_default = results["w2"][DEFAULT_W2_WAY]

    def vs_torch(name):
        row = train[name]
        return None if "torch" not in row else ratio(row["to_static"], row["torch"]) <= TRAIN_GOAL

    checks = [
        ("converted >= 2x faster than eager, d2l MLP batch 1",
         ratio(one["eager"], converted) >= 2),
        ("converted ahead of PyTorch CUDA eager, d2l MLP batch 1",
         converted < one["torch"] if "torch" in one else None),
        (f"LeNet train step converted <= {TRAIN_GOAL}x PyTorch CUDA", vs_torch("lenet")),
        (f"ResNet-18 train step converted <= {TRAIN_GOAL}x PyTorch CUDA", vs_torch("resnet18")),
        (f"W2 loop converted <= {W2_GOAL_US:g} us", w2_default <= W2_GOAL_US),
    ]
    print("\ntargets" + (" -- a dry run: not the GPU figures" if dry else ""))
    for text, ok in checks:
        print(f"  {'n/a   ' if ok is None else 'met   ' if ok else 'MISSED'} {text}")
    results["targets"] = {text: ok for text, ok in checks}
    results["mismatches"] = MISMATCHES
    for text in MISMATCHES:
        print(f"  WARNING {text}")


def write(results: dict, path, default_name) -> int:
    path = path or (os.path.join(os.environ["OUT"], default_name)
                    if os.environ.get("OUT") else None)
    if path:
        with open(path, "w") as f:
            json.dump(results, f, indent=2, default=str)
        print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
