"""Training-step time of the model set, eager vs converted (``jit.to_static``), measured
in one run.

    python benchmarks/models.py [--full] [--device cpu|gpu] [--models NAME ...]
                                [--steps 5] [--repeats 3]

Prints ms per training step (forward + backward + Adam step) of each model eagerly
and converted, and the ratio. The models: ResNet-18 and -50 and MobileNetV2
(``dy2stat.vision.models``), and the Transformer, ERNIE, seq2seq-attention and
BiLSTM models of ``examples/``. By default they run in small configurations that a
CPU trains in well under a second per step; ``--full`` runs the published ones
(ResNet-50 and MobileNetV2 on 224x224 images, Transformer base with d_model 512 and
6 + 6 layers, ERNIE 1.0 base with 768 wide, 12 layers), meant for a GPU
(``--device gpu``).

Both runs of a model start from the same weights and see the same batch; the
first steps (which also trace and compile the converted program) check that the
converted losses equal eager's (column ``same``: bit for bit, or the largest
relative difference). The timed steps alternate between the two, so a slow spell
of the machine hits both alike; the best of ``--repeats`` runs is kept.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import time
from pathlib import Path

if __name__ == "__main__" and "OMP_NUM_THREADS" not in os.environ:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as benchmarks/train_step.py

import numpy as np

import dy2stat as d2s
from dy2stat import jit
from dy2stat.nn import functional as F
from dy2stat.vision import models as vision

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def example(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Each case: (make the model, convert it, a fixed batch -> loss of a model), for the
# small and the full configuration.


def image_case(make, size: int, batch: int):
    rng = np.random.default_rng(0)
    images = d2s.to_tensor(rng.standard_normal((batch, 3, size, size)).astype("float32"))
    labels = d2s.to_tensor(rng.integers(0, 1000, (batch, 1)).astype("int64"))
    spec = [d2s.static.InputSpec([None, 3, size, size], "float32")]
    return (make, lambda m: jit.to_static(m, input_spec=spec),
            lambda m: F.cross_entropy(m(images), labels))


def transformer_case(full: bool):
    T = example("transformer")
    config = T.CONFIGS["base" if full else "small"]
    batch, length = (32, 32) if full else (32, 6)
    src, trg_in, trg = (d2s.to_tensor(a) for a in T.reversal_batch(
        np.random.default_rng(0), batch, length, config["vocab_size"]))
    return (lambda: T.TransformerModel(**config), T.converted,
            lambda m: T.label_smoothed_loss(m(src, trg_in), trg))


def ernie_case(full: bool):
    E = example("ernie")
    config = E.CONFIGS["base" if full else "small"]
    batch, length = (32, 128) if full else (32, 16)
    ids, types, positions, masked, labels = (d2s.to_tensor(a) for a in E.pair_batch(
        np.random.default_rng(0), batch, length, config["vocab_size"]))

    def loss(m):
        mlm, nsp = m(ids, types, positions)
        return E.pretraining_loss(mlm, masked, nsp, labels)

    return lambda: E.ErnieForPretraining(E.ErnieModel(**config)), E.converted, loss


def seq2seq_case(full: bool):
    S = example("seq2seq_attention")
    config = S.CONFIGS["full" if full else "small"]
    batch, length = (64, 50) if full else (32, 6)
    vocab = min(config["src_vocab_size"], config["trg_vocab_size"])
    src, src_len, trg_in, trg_out, trg_len = (d2s.to_tensor(a) for a in S.reversal_batch(
        np.random.default_rng(0), batch, length, vocab))
    return (lambda: S.Seq2SeqAttention(**config), S.converted,
            lambda m: S.masked_loss(m(src, src_len, trg_in), trg_out, trg_len))


def bilstm_case(full: bool):
    B = example("bilstm_classifier")
    config = B.CONFIGS["full" if full else "small"]
    batch, length = (64, 128) if full else (32, 12)
    text, seq_len, label = (d2s.to_tensor(a) for a in B.text_batch(
        np.random.default_rng(0), batch, length, config["vocab_size"]))
    return (lambda: B.BiLSTMClassifier(**config), B.converted,
            lambda m: F.cross_entropy(m(text, seq_len), label))


# name -> (description of the small config, of the full one, case maker)
CASES = {
    "resnet18": ("32x32, batch 8", "224x224, batch 32", lambda full: image_case(
        vision.resnet18, 224 if full else 32, 32 if full else 8)),
    "resnet50": ("32x32, batch 8", "224x224, batch 32", lambda full: image_case(
        vision.resnet50, 224 if full else 32, 32 if full else 8)),
    "mobilenet_v2": ("32x32, batch 8", "224x224, batch 32", lambda full: image_case(
        vision.mobilenet_v2, 224 if full else 32, 32 if full else 8)),
    "transformer": ("d32, 2+2 layers, b32 x 6", "base: d512, 6+6 layers, b32 x 32",
                    transformer_case),
    "ernie": ("h32, 2 layers, b32 x 16", "base: h768, 12 layers, b32 x 128", ernie_case),
    "seq2seq": ("h32, 2 layers, b32 x 6", "h512, 2 layers, b64 x 50", seq2seq_case),
    "bilstm": ("h24, b32 x 12", "h198, b64 x 128", bilstm_case),
}


def trainer(make, convert, loss_of, converted: bool):
    d2s.seed(0)
    model = make()
    if converted:
        model = convert(model)
    optimizer = d2s.optimizer.Adam(learning_rate=1e-4, parameters=model.parameters())

    def step():
        loss = loss_of(model)
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
        return float(loss)

    return step


def seeded(step, seed: int) -> tuple:
    """One step after ``d2s.seed(seed)``: eager and converted dropout draw the same masks."""
    d2s.seed(seed)
    return (step(),)


def ms_per_step(steps_by_label: dict, steps: int, repeats: int) -> dict:
    """Best of ``repeats`` runs of ``steps`` steps, in ms per step, per label; the
    configurations take turns."""
    best = dict.fromkeys(steps_by_label, float("inf"))
    for _ in range(repeats):
        for label, step in steps_by_label.items():
            start = time.perf_counter()
            for _ in range(steps):
                step()
            best[label] = min(best[label], (time.perf_counter() - start) / steps * 1e3)
    return best


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="the published configurations")
    parser.add_argument("--device", default="cpu", help="cpu or gpu (gpu:N)")
    parser.add_argument("--models", nargs="+", choices=list(CASES), default=list(CASES))
    parser.add_argument("--steps", type=int, default=5, help="timed steps per repeat")
    parser.add_argument("--repeats", type=int, default=3, help="repeats (the best is kept)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed, compared steps")
    args = parser.parse_args(argv)
    d2s.set_device(args.device)

    rows = []
    for name in args.models:
        small, full, make_case = CASES[name]
        make, convert, loss_of = make_case(args.full)
        eager = trainer(make, convert, loss_of, converted=False)
        converted = trainer(make, convert, loss_of, converted=True)
        warm = np.array([seeded(eager, i) + seeded(converted, i) for i in range(args.warmup)])
        worst = float(np.max(np.abs(warm[:, 1] - warm[:, 0]) / np.abs(warm[:, 0])))
        times = ms_per_step({"eager": eager, "converted": converted}, args.steps,
                            args.repeats)
        rows.append((f"{name} ({full if args.full else small})", times["eager"],
                     times["converted"], "bit for bit" if worst == 0 else f"{worst:.1e}"))
        print(f"{rows[-1][0]}: eager {times['eager']:.1f} ms, converted "
              f"{times['converted']:.1f} ms", flush=True)

    print(f"\ndevice {args.device}; BLAS threads: "
          f"{os.environ.get('OPENBLAS_NUM_THREADS') or 'OpenBLAS default'}")
    print(f"{'model (forward+backward+Adam)':48s} {'eager ms':>9s} {'static ms':>10s} "
          f"{'ratio':>7s}  same")
    for label, t_eager, t_converted, same in rows:
        print(f"{label:48s} {t_eager:9.1f} {t_converted:10.1f} {t_eager / t_converted:6.2f}x"
              f"  {same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
