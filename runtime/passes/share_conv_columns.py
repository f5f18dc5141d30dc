"""Share a convolution's columns with its filter gradient (training programs).

On the host a convolution copies its input into im2col columns and multiplies them
by the filter; the filter gradient of the same input copies the same columns again
(for LeNet's first layer at batch 64, a quarter of the gradient's time). When a
block has ``conv2d(x, w)`` and, later, ``conv2d_grad_filter(x, dy, w)`` with the same
attrs, and nothing between them writes ``x``, the pair becomes
``conv2d_keeping_columns`` (which also outputs the columns) and
``conv2d_grad_filter_from_columns`` (which reads them): the same products on the same
columns, so the same bits; the columns live from the forward to the backward. 1x1
filters copy nothing and are left alone, and so are inputs with an unknown dim other
than the batch. For NumPy plans only (a GPU convolution is cuDNN's), and not applied
by default: in LeNet's training step the megabytes of kept columns are cold by the
time the filter gradients read them, and the step ran 0.1-0.3 ms slower with the pass
than copying the columns again (``run_passes(program, ["share_conv_columns"])``).

``share_conv_columns(program, keep=())`` returns a new program.
"""

from __future__ import annotations

from dy2stat.runtime.ir import Block, Operator, Program
from dy2stat.runtime.prune import copy_for_pass
from dy2stat.runtime.registry import get_op

__all__ = ["share_conv_columns"]


def share_conv_columns(program: Program, keep=()) -> Program:
    """``program`` with each convolution and its filter gradient sharing the columns."""
    result, _ = copy_for_pass(program, keep, "share_conv_columns")
    for block in result.blocks:
        _share_in_block(result, block)
    result.bump()
    return result


def _share_in_block(program: Program, block: Block) -> None:
    forward: dict = {}  # (input, attrs) -> index of the latest conv2d reading it
    for j, op in enumerate(block.ops):
        if op.type == "conv2d":
            key = _key(op, op.inputs["X"][0])
            if key is not None and _shareable(block, op):
                forward[key] = j
        elif op.type == "conv2d_grad_filter":
            x = op.inputs["X"][0]
            i = forward.get(_key(op, x))
            if i is None or any(x in program.writes(block.ops[k]) for k in range(i + 1, j)):
                continue
            _rewrite(program, block, i, j)
            del forward[_key(op, x)]


def _key(op: Operator, x: str):
    attrs = get_op(op.type).full_attrs(op.attrs)
    return (x, tuple((k, repr(v)) for k, v in sorted(attrs.items())))


def _shareable(block: Block, op: Operator) -> bool:
    x, w = block.find_var(op.inputs["X"][0]), block.find_var(op.inputs["Filter"][0])
    return (x is not None and w is not None and x.dtype == w.dtype
            and -1 not in (*x.shape[1:], *w.shape) and tuple(w.shape[2:]) != (1, 1))


def _rewrite(program: Program, block: Block, i: int, j: int) -> None:
    conv, grad = block.ops[i], block.ops[j]
    out = block.var(conv.outputs["Out"][0])
    columns_shape = get_op("conv2d_keeping_columns").infer(
        block.var(conv.inputs["X"][0]), block.var(conv.inputs["Filter"][0]),
        **get_op("conv2d").full_attrs(conv.attrs))[1].shape
    columns = block.create_var(columns_shape, out.dtype,
                               name=program.unique_name(f"{out.name}.columns"),
                               stop_gradient=True)
    block.ops[i] = Operator("conv2d_keeping_columns", dict(conv.inputs),
                            {"Out": list(conv.outputs["Out"]), "Columns": [columns.name]},
                            dict(conv.attrs), origin=conv.origin)
    block.ops[j] = Operator("conv2d_grad_filter_from_columns",
                            {"Columns": [columns.name], "DOut": list(grad.inputs["DOut"]),
                             "Filter": list(grad.inputs["Filter"])},
                            dict(grad.outputs), dict(grad.attrs), origin=grad.origin)
