"""Shape/dtype inference of the manipulation and creation ops, with -1 dims."""

import numpy as np
import pytest

from dy2stat.dispatch import apply
from dy2stat.runtime import dtypes
from dy2stat.runtime.ops.indexing import decode_index, encode_index
from dy2stat.runtime.registry import Meta, get_op
from dy2stat.tensor import Tensor
from tests.ops import cases_creation, cases_manipulation

F32, I64, BOOL = dtypes.float32, dtypes.int64, dtypes.bool_


def m(*shape, dtype=F32):
    return Meta(tuple(shape), np.dtype(dtype))


def infer(op, *metas, **attrs):
    opdef = get_op(op)
    return opdef.infer(*metas, **opdef.full_attrs(attrs))


def shape_of(op, *metas, **attrs):
    out = infer(op, *metas, **attrs)
    return [o.shape for o in out] if isinstance(out, list) else out.shape


# ------------------------------------------------------ infer agrees with run


def _meta_of(value, unknown=False):
    if isinstance(value, list):
        return [_meta_of(v, unknown) for v in value]
    if not isinstance(value, np.ndarray):
        return Meta((), dtypes.scalar_dtype(value))
    shape = tuple(-1 for _ in value.shape) if unknown else value.shape
    return Meta(shape, value.dtype)


def _tensors(values):
    return [Tensor(v) if isinstance(v, np.ndarray) else
            [Tensor(t) for t in v] if isinstance(v, list) else v for v in values]


CASES = cases_manipulation.CASES + cases_creation.CASES


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_infer_matches_the_kernel(case):
    out = apply(case.op, *_tensors(case.inputs), **case.attrs)
    outs = out if isinstance(out, list) else [out]
    metas = infer(case.op, *[_meta_of(v) for v in case.inputs], **case.attrs)
    metas = metas if isinstance(metas, list) else [metas]
    assert [o.dtype for o in outs] == [mt.dtype for mt in metas]
    for o, mt in zip(outs, metas):
        # Only the length of a selection by a tensor mask or bound depends on values.
        assert len(mt.shape) == len(o.shape)
        # value-dependent shapes
        exact = case.op not in ("getitem", "full_shaped", "range", "reshape_shaped")
        assert all(d == k or (d == -1 and not exact) for d, k in zip(mt.shape, o.shape))
    if case.op == "squeeze":
        return  # squeeze(axis=None) cannot tell which unknown dims are 1
    # With every input dim unknown, inference still runs and stays compatible.
    unknown = infer(case.op, *[_meta_of(v, True) for v in case.inputs], **case.attrs)
    unknown = unknown if isinstance(unknown, list) else [unknown]
    for o, mt in zip(outs, unknown):
        assert len(mt.shape) == len(o.shape)
        assert all(d in (-1, k) for d, k in zip(mt.shape, o.shape)), (mt.shape, o.shape)


# ------------------------------------------------------------- -1 dims


def test_reshape_unknown_dims():
    assert shape_of("reshape", m(-1, 6), shape=[0, 2, 3]) == (-1, 2, 3)
    assert shape_of("reshape", m(-1, 6), shape=[-1, 3]) == (-1, 3)
    assert shape_of("reshape", m(4, 6), shape=[-1, 3]) == (8, 3)
    with pytest.raises(ValueError, match=r"reshape: .*\[4, 6\].*\[5, -1\]"):
        infer("reshape", m(4, 6), shape=[5, -1])
    assert shape_of("reshape_like", m(-1, 6), m(-1, 2, 3)) == (-1, 2, 3)
    with pytest.raises(ValueError, match="reshape_like"):
        infer("reshape_like", m(4, 6), m(5))


def test_concat_unknown_dims_and_errors():
    assert shape_of("concat", [m(-1, 3), m(2, 3)]) == (-1, 3)
    assert shape_of("concat", [m(-1, 3), m(2, -1)], axis=1) == (2, -1)
    assert shape_of("concat", [m(-1, 3), m(-1, 4)], axis=-1) == (-1, 7)
    assert infer("concat", [m(2), m(3, dtype="int64")]).dtype == F32
    with pytest.raises(ValueError, match=r"concat: shapes \[2, 3\], \[2, 4\] differ outside"):
        infer("concat", [m(2, 3), m(2, 4)])
    with pytest.raises(ValueError, match="concat"):
        infer("concat", [m(2, 3), m(2, 3, 1)], axis=1)
    with pytest.raises(ValueError, match="concat: axis 2"):
        infer("concat", [m(2, 3)], axis=2)


def test_split_family():
    assert shape_of("split", m(-1, 4), num_or_sections=2) == [(-1, 4), (-1, 4)]
    assert shape_of("split", m(2, 6), num_or_sections=[1, -1, 2], axis=1) == [
        (2, 1), (2, 3), (2, 2)
    ]
    assert shape_of("split", m(2, -1), num_or_sections=[1, -1], axis=1) == [(2, 1), (2, -1)]
    with pytest.raises(ValueError, match=r"split: cannot split shape \[5, 2\]"):
        infer("split", m(5, 2), num_or_sections=2)
    with pytest.raises(ValueError, match="split"):
        infer("split", m(5, 2), num_or_sections=[2, 2])
    assert shape_of("split_like", m(-1, 5), [m(-1, 2), m(3, -1)], axis=1) == [(-1, 2), (-1, -1)]
    assert shape_of("unstack", m(-1, 3), axis=1) == [(-1,)] * 3
    assert shape_of("unstack", m(-1, 3), axis=0, num=2) == [(3,), (3,)]
    with pytest.raises(ValueError, match="unstack: .*pass num"):
        infer("unstack", m(-1, 3))
    assert shape_of("stack", [m(-1, 3), m(2, -1)], axis=-1) == (2, 3, 2)
    with pytest.raises(ValueError, match=r"stack: .*\[2, 3\], \[3, 3\]"):
        infer("stack", [m(2, 3), m(3, 3)])


def test_reshaping_ops_with_unknown_dims():
    assert shape_of("transpose", m(-1, 3, 4), perm=[2, 0, 1]) == (4, -1, 3)
    with pytest.raises(ValueError, match="transpose: perm"):
        infer("transpose", m(2, 3), perm=[0, 0])
    assert shape_of("swapaxes_last", m(-1, 3)) == (3, -1)
    with pytest.raises(ValueError, match="swapaxes_last"):
        infer("swapaxes_last", m(3))
    with pytest.raises(ValueError, match="pass axis"):
        shape_of("squeeze", m(1, -1, 1))
    assert shape_of("squeeze", m(1, -1, 1), axis=[0, 2]) == (-1,)
    assert shape_of("squeeze", m(-1, 3, 1), axis=[0, 1]) == (3, 1)
    assert shape_of("unsqueeze", m(-1, 3), axis=[0, -1]) == (1, -1, 3, 1)
    with pytest.raises(ValueError, match="unsqueeze"):
        infer("unsqueeze", m(2), axis=[0, 0])
    assert shape_of("flatten", m(-1, 3, 4), start_axis=1) == (-1, 12)
    assert shape_of("flatten", m(2, -1, 4)) == (-1,)
    assert shape_of("flatten", m()) == (1,)
    assert shape_of("expand", m(-1, 1), shape=[2, -1, 5]) == (2, -1, 5)
    with pytest.raises(ValueError, match=r"expand: cannot expand shape \[3, 2\] to \[3, 4\]"):
        infer("expand", m(3, 2), shape=[3, 4])
    assert shape_of("tile", m(-1, 3), repeat_times=[2, 2]) == (-1, 6)
    assert shape_of("flip", m(-1, 3), axis=[0]) == (-1, 3)


def test_gather_where_and_friends():
    assert shape_of("gather", m(-1, 5), m(-1, dtype="int64"), axis=1) == (-1, -1)
    with pytest.raises(TypeError, match="gather: Index must be an integer tensor"):
        infer("gather", m(3), m(2))
    assert shape_of("where", m(-1, 1, dtype="bool"), m(3), m(2, 1)) == (2, 3)
    assert shape_of("where", m(-1, 1, dtype="bool"), m(3), m(1, 1)) == (-1, 3)
    with pytest.raises(TypeError, match="where: Cond must be a bool tensor, got float32"):
        infer("where", m(3), m(3), m(3))
    with pytest.raises(ValueError, match="where"):
        infer("where", m(2, dtype="bool"), m(3), m(3))
    assert infer("one_hot", m(-1, dtype="int64"), num_classes=4) == m(-1, 4)
    assert infer("shape", m(-1, 2, 3)) == Meta((3,), I64)
    assert infer("numel", m(-1)) == Meta((), I64)


# ------------------------------------------------------------------ indexing


def getitem_shape(shape, index, tensor_metas=()):
    encoded, tensors = encode_index(index)
    metas = list(tensor_metas) or [Meta(np.shape(t), np.asarray(t).dtype) for t in tensors]
    return infer("getitem", m(*shape), metas, index=encoded).shape


def test_getitem_with_unknown_dims():
    t = object()  # any non-index object stands for a tensor
    assert getitem_shape((-1, 4), (slice(None), slice(None, 2))) == (-1, 2)
    assert getitem_shape((-1, 4), 0) == (4,)
    assert getitem_shape((-1, 4), (Ellipsis, -1)) == (-1,)
    assert getitem_shape((-1, 4), (None, slice(None, None, -1), None)) == (1, -1, 1, 4)
    assert getitem_shape((5, 4), slice(None, None, -2)) == (3, 4)
    assert getitem_shape((5, 4), (slice(4, 0, -3), 1)) == (2,)
    assert getitem_shape((-1, 4), (slice(None), t), [m(-1, 2, dtype="int64")]) == (-1, -1, 2)
    assert getitem_shape((-1, 4), t, [m(-1, 4, dtype="bool")]) == (-1,)
    assert getitem_shape((6, 4), slice(t, None), [m(dtype="int64")]) == (-1, 4)
    # Advanced indices split by a slice move to the front (numpy's rule).
    assert getitem_shape((7, 3, 5), (0, slice(None), t), [m(2, dtype="int64")]) == (2, 3)
    assert getitem_shape((7, 3, 5), (slice(None), [0, 1], [1, 1])) == (7, 2)


def test_getitem_errors():
    with pytest.raises(IndexError, match=r"getitem: index 4 is out of range .*\[2, 4\]"):
        getitem_shape((2, 4), (1, 4))
    with pytest.raises(IndexError, match="too many indices"):
        getitem_shape((2, 4), (1, 1, 1))
    with pytest.raises(ValueError, match="single ellipsis"):
        getitem_shape((2, 4), (Ellipsis, Ellipsis))
    with pytest.raises(IndexError, match="boolean index"):
        getitem_shape((2, 4), [True, False, True])
    with pytest.raises(TypeError, match="getitem: Index must be an integer or bool tensor"):
        getitem_shape((2, 4), object(), [m(2)])
    with pytest.raises(ValueError, match="step cannot be zero"):
        getitem_shape((2, 4), slice(None, None, 0))


def test_setitem_checks_the_value_shape():
    encoded, _ = encode_index((slice(None), 0))
    assert infer("setitem", m(-1, 4), m(1, 1), [], index=encoded) == m(-1, 4)
    assert infer("setitem", m(-1, 4), m(), [], index=encoded) == m(-1, 4)
    with pytest.raises(ValueError, match=r"setitem: cannot assign .*\[3\].*\[2\]"):
        infer("setitem", m(2, 4), m(3), [], index=encoded)
    assert infer("getitem_grad", m(2), m(-1, 4), [], index=encoded) == m(-1, 4)
    with pytest.raises(ValueError, match=r"getitem_grad: the gradient has shape \[2, 3\]"):
        infer("getitem_grad", m(2, 3), m(-1, 4), [], index=encoded)


# ------------------------------------------------------------------ creation


def test_creation_infer():
    assert infer("full", shape=[2, 3], dtype="int32") == m(2, 3, dtype="int32")
    assert infer("full_like", m(-1, 3), value=1.0) == m(-1, 3)
    assert infer("full_like", m(-1, 3), dtype="bool") == m(-1, 3, dtype="bool")
    assert infer("arange", start=1, end=10, step=3) == m(3, dtype="int64")
    assert infer("arange", start=0.0, end=1.0, step=0.3, dtype="float32") == m(4)
    assert infer("arange", start=3, end=0) == m(0, dtype="int64")
    assert infer("linspace", start=0.0, stop=1.0, num=7) == m(7)
    assert infer("eye", num_rows=2, num_columns=5) == m(2, 5)
    assert infer("uniform", shape=[3], dtype="float64") == m(3, dtype="float64")
    assert infer("randint", shape=[3], high=5) == m(3, dtype="int64")
    assert infer("bernoulli_mask", m(-1, 3), p=0.1) == m(-1, 3)
    with pytest.raises(ValueError, match="arange: the end attr is required"):
        infer("arange")
    with pytest.raises(ValueError, match="full: shape"):
        infer("full", shape=[-1, 3])
    with pytest.raises(TypeError, match="normal: dtype must be a float dtype"):
        infer("normal", shape=[2], dtype="int64")
    with pytest.raises(ValueError, match="randint: low 3 must be below high 3"):
        infer("randint", shape=[2], low=3, high=3)
    with pytest.raises(ValueError, match="bernoulli_mask: p"):
        infer("bernoulli_mask", m(2), p=1.5)
    assert all(get_op(op).random for op in ("uniform", "normal", "randint", "bernoulli_mask"))


def _random_index(r, shape):
    """One random index item per dim (and some extra): every kind the encoding has."""
    items = []
    for d in list(shape) + [1]:
        kind = r.integers(9)
        if kind == 0:
            items.append(int(r.integers(-d, d)))
        elif kind == 1:
            start, stop = (None if r.random() < 0.3 else int(r.integers(-d - 2, d + 2))
                           for _ in range(2))
            items.append(slice(start, stop, [None, 1, 2, -1, -3][r.integers(5)]))
        elif kind == 2:
            items.append(None)
        elif kind == 3:
            items.append(Ellipsis)
        elif kind == 4:
            items.append(r.integers(-d, d, size=r.integers(1, 3)))
        elif kind == 5:
            items.append(r.random(d) < 0.5)
        elif kind == 6:
            items.append([int(v) for v in r.integers(-d, d, size=2)])
        elif kind == 7:
            items.append(bool(r.random() < 0.7))
        else:
            items.append(slice(np.array(int(r.integers(0, d))), None))
    return tuple(items[: r.integers(1, len(items) + 1)])


def test_index_shape_agrees_with_numpy():
    r = np.random.default_rng(0)
    checked = 0
    for _ in range(3000):
        shape = tuple(int(d) for d in r.integers(1, 4, size=r.integers(0, 4)))
        x = np.zeros(shape)
        index = _random_index(r, shape)
        try:
            want = x[index].shape
        except (IndexError, ValueError):
            continue  # numpy rejects it (ellipses, bounds, mask sizes): not this test's subject
        encoded, tensors = encode_index(index)
        metas = [Meta(np.shape(t), np.asarray(t).dtype) for t in tensors]
        got = infer("getitem", m(*shape), metas, index=encoded).shape
        assert len(got) == len(want) and all(g in (-1, w) for g, w in zip(got, want)), index
        np.testing.assert_array_equal(x[decode_index(encoded, tensors)], x[index])
        checked += 1
    assert checked > 1000
