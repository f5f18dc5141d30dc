"""``Model.summary``: the network's layers, their output shapes and parameter counts."""

from __future__ import annotations

import sys

import numpy as np

from dy2stat.autograd import no_grad
from dy2stat.creation import to_tensor
from dy2stat.nn import Layer
from dy2stat.static.input_spec import InputSpec


def _summary(model, input_size, dtype, file) -> dict:
    network = model.network
    shapes: dict[int, list] = {}
    if input_size is None and model._inputs is not None:
        input_size = model._inputs
    if input_size is not None and not model.static:
        _trace_shapes(network, input_size, dtype, shapes)
    rows = []
    total = trainable = 0
    for name, layer in network.named_sublayers():
        own = layer.parameters(include_sublayers=False)
        if layer._sub_layers and not own:
            continue
        count = sum(int(np.prod(p.shape)) for p in own)
        rows.append((f"{name} ({type(layer).__name__})", shapes.get(id(layer), "-"), count))
    for p in network.parameters():
        n = int(np.prod(p.shape))
        total += n
        if not p.stop_gradient:
            trainable += n
    widths = [max([len(r[0]) for r in rows] + [len("Layer")]) + 2, 24, 12]
    out = file or sys.stdout
    line = "-" * sum(widths)
    print(line, file=out)
    print(f"{'Layer':<{widths[0]}}{'Output Shape':<{widths[1]}}{'Param #':>{widths[2]}}",
          file=out)
    print("=" * sum(widths), file=out)
    for label, shape, count in rows:
        print(f"{label:<{widths[0]}}{str(shape):<{widths[1]}}{count:>{widths[2]},}", file=out)
    print("=" * sum(widths), file=out)
    print(f"Total params: {total:,}", file=out)
    print(f"Trainable params: {trainable:,}", file=out)
    print(f"Non-trainable params: {total - trainable:,}", file=out)
    print(line, file=out)
    return {"total_params": total, "trainable_params": trainable}


def _trace_shapes(network: Layer, input_size, dtype, shapes: dict) -> None:
    """Run the eager forward on zeros (batch 1) and record each layer's output shape."""
    sizes = input_size if isinstance(input_size, list) and input_size and isinstance(
        input_size[0], (list, tuple, InputSpec)) else [input_size]
    xs = []
    for size in sizes:
        if isinstance(size, InputSpec):
            shape, kind = list(size.shape), size.dtype
        else:
            shape, kind = list(size), dtype or "float32"
        shape = [1 if d is None or d < 0 else int(d) for d in shape]
        xs.append(to_tensor(np.zeros(shape, dtype=kind)))

    def hook(layer, inputs, outputs):
        first = outputs[0] if isinstance(outputs, (list, tuple)) and outputs else outputs
        if hasattr(first, "shape"):
            shapes[id(layer)] = list(first.shape)

    handles = [layer.register_forward_post_hook(hook) for layer in network.sublayers()]
    was_training = network.training
    try:
        network.eval()
        with no_grad():
            type(network).forward(network, *xs)  # the eager forward, even when converted
    finally:
        network.train(was_training)
        for handle in handles:
            handle.remove()
