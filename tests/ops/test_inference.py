"""Shape/dtype inference of the release-0.2 ops agrees with their kernels, with every
input's first dim unknown (-1) too; bad inputs get errors that name the op."""

import numpy as np
import pytest

from dy2stat.dispatch import apply
from dy2stat.runtime import dtypes
from dy2stat.runtime.registry import Meta, get_op
from dy2stat.tensor import Tensor
from tests.ops import cases_elementwise, cases_resample, cases_selection, cases_sorting

CASES = (cases_elementwise.CASES + cases_resample.CASES + cases_selection.CASES
         + cases_sorting.CASES)
# Ops whose output length depends on the values (inference says -1 there).
VALUE_DEPENDENT = {"masked_select", "nonzero", "repeat_interleave", "sequence_mask",
                   "array_write"}


def _meta(value, unknown_first=False):
    if isinstance(value, list):
        return [_meta(v, unknown_first) for v in value]
    if value is None:
        return None
    if not isinstance(value, np.ndarray):
        return Meta((), dtypes.scalar_dtype(value))
    shape = tuple(value.shape)
    if unknown_first and shape:
        shape = (-1,) + shape[1:]
    return Meta(shape, value.dtype)


def _infer(case, unknown_first=False):
    op = get_op(case.op)
    out = op.infer(*[_meta(v, unknown_first) for v in case.inputs], **op.full_attrs(case.attrs))
    return [out] if isinstance(out, Meta) else list(out)


def _run(case):
    values = [Tensor(v) if isinstance(v, np.ndarray) else
              [Tensor(t) for t in v] if isinstance(v, list) else v for v in case.inputs]
    out = apply(case.op, *values, **case.attrs)
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _flat(values):
    return [v for x in values for v in (x if isinstance(x, list) else [x])]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_inference_agrees_with_the_kernel(case):
    outs = _flat(_run(case))
    for unknown_first in (False, True):
        metas = _flat(_infer(case, unknown_first))
        assert [m.dtype for m in metas] == [o.dtype for o in outs]
        for m, o in zip(metas, outs):
            assert len(m.shape) == len(o.shape), (m.shape, o.shape)
            exact = not unknown_first and case.op not in VALUE_DEPENDENT
            assert all(d == k or (d == -1 and not exact) for d, k in zip(m.shape, o.shape)), \
                (m.shape, o.shape)


def m(*shape, dtype="float32"):
    return Meta(tuple(shape), np.dtype(dtype))


def infer(op, *metas, **attrs):
    opdef = get_op(op)
    return opdef.infer(*metas, **opdef.full_attrs(attrs))


def test_run_time_lengths_are_unknown_and_later_ops_infer_with_them():
    selected = infer("masked_select", m(-1, 4), m(-1, 4, dtype="bool"))
    assert selected.shape == (-1,)
    assert infer("nonzero", m(3, 4)).shape == (-1, 2)
    assert infer("sum", selected).shape == ()
    assert infer("reshape", selected, shape=[-1, 2]).shape == (-1, 2)
    assert infer("topk", selected, k=2)[0].shape == (2,)
    assert infer("repeat_interleave", m(3, 2), m(3, dtype="int64"), axis=0).shape == (-1, 2)
    assert infer("repeat_interleave", m(3, 2), None, times=2, axis=0).shape == (6, 2)


@pytest.mark.parametrize("op,metas,attrs,message", [
    ("topk", [m(3, 4)], {"k": 5}, r"topk: k=5 is out of range for axis -1 of shape \[3, 4\]"),
    ("masked_fill", [m(3), m(3), m()], {}, "masked_fill: Mask must be a bool tensor"),
    ("einsum", [[m(2, 3), m(4, 5)]], {"equation": "ij,jk->ik"},
     "einsum: subscript 'j' of 'ij,jk->ik' is 3 in one operand and 4 in another"),
    ("gather_nd", [m(3, 4), m(2, 3, dtype="int64")], {}, "gather_nd: the index addresses 3"),
    ("scatter", [m(4, 3), m(2, dtype="int64"), m(3, 3)], {},
     r"scatter: updates of shape \[3, 3\] do not fit"),
    ("pad", [m(2, 3)], {"paddings": [0, 0, 3, 0], "mode": "reflect"},
     "reflect padding must be smaller than the dim"),
    ("interpolate", [m(2, 3, 4)], {"size": [2, 2]}, "interpolate: the input must be 4-D"),
    ("array_write", [m(0, 3), m(2, 3), m(dtype="int64")], {},
     r"array_write: an element of shape \[2, 3\] does not fit"),
    ("diag", [m(2, 3, 4)], {}, "diag: the input must be 1-D or 2-D"),
    ("meshgrid", [[m(2, 2)]], {}, "meshgrid: the inputs must be 1-D"),
])
def test_bad_inputs_are_named(op, metas, attrs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        infer(op, *metas, **attrs)
