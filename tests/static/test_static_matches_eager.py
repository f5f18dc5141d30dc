"""For every case of the op table (``tests/ops``): the op built into a static
program and run by the Executor gives the eager result.

Array inputs become data variables (fed at run time); Python scalars and None
stay as they are. Random ops are compared by shape and dtype only. The
declared (inferred) shape and dtype of each static output must agree with
the value the program computes, and every program verifies.
"""

from __future__ import annotations

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat.dispatch import apply
from dy2stat.runtime import shapes
from dy2stat.runtime.registry import OPS
from dy2stat.runtime.verify import verify
from dy2stat.static import Variable
from tests.ops.test_ops import CASES
from tests.static.helpers import building, run

# Ops not covered by the table, and why.
EXEMPT = {
    "cond": "control flow: built by static.nn.cond, tested in tests/static/test_control_flow.py",
    "while": "control flow: built by static.nn.while_loop, tested in test_control_flow.py",
    "while_grad": "control flow: built by append_backward, tested in test_control_flow.py",
    "py_layer": "built by PyLayer.apply, tested eager/static/converted in "
                "tests/eager/test_pylayer.py",
}


def _is_array(x) -> bool:
    return isinstance(x, (np.ndarray, np.generic))


def _static_inputs(case, unknown_dims=False):
    """(inputs with data variables for arrays, feed dict); ``unknown_dims``
    declares every dim of every data variable -1."""
    feeds = {}

    def data(x):
        name = f"in{len(feeds)}"
        x = np.asarray(x)
        feeds[name] = x
        shape = [-1] * x.ndim if unknown_dims else list(x.shape)
        return d2s.static.data(name, shape, str(x.dtype))

    args = []
    for x in case.inputs:
        if _is_array(x):
            args.append(data(x))
        elif isinstance(x, (list, tuple)):
            args.append(type(x)(data(v) if _is_array(v) else v for v in x))
        else:
            args.append(x)
    return args, feeds


def _eager_inputs(case):
    def tensor(x):
        return d2s.Tensor(np.array(x))

    args = []
    for x in case.inputs:
        if _is_array(x):
            args.append(tensor(x))
        elif isinstance(x, (list, tuple)):
            args.append(type(x)(tensor(v) if _is_array(v) else v for v in x))
        else:
            args.append(x)
    return args


def _flat(out):
    if isinstance(out, (list, tuple)):
        return [leaf for o in out for leaf in _flat(o)]
    return [out]


# Cases whose inference with unknown dims declares a rank the kernel does not
# produce (reported; runtime/ops/manipulation.py's _squeeze_shape assumes an
# unknown dim is not 1 with axis=None, and is 1 when listed in axis).
UNKNOWN_DIMS_XFAIL = {
    "squeeze-axes": "squeeze of a listed unknown dim assumes it is 1; here it is 3",
}

# Cases whose inference refuses unknown dims, with the message it gives.
UNKNOWN_DIMS_REFUSED = {
    "squeeze": "pass axis",
    # How many dims an index row addresses (its last dim) fixes the result's rank.
    "gather_nd": "needs a last dim of known size",
    "gather_nd-rows": "needs a last dim of known size",
}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_static_matches_eager(case):
    _check(case, unknown_dims=False)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_static_matches_eager_with_unknown_dims(case):
    """The same, with every dim of every input declared -1: inference must still
    describe what the kernels compute."""
    if case.id in UNKNOWN_DIMS_REFUSED:
        with pytest.raises(ValueError, match=UNKNOWN_DIMS_REFUSED[case.id]):
            _check(case, unknown_dims=True)
        return
    if case.id not in UNKNOWN_DIMS_XFAIL:
        _check(case, unknown_dims=True)
        return
    try:
        _check(case, unknown_dims=True)
    except AssertionError:
        pytest.xfail(UNKNOWN_DIMS_XFAIL[case.id])
    pytest.fail(f"{case.id} passes now: remove it from UNKNOWN_DIMS_XFAIL")


def _check(case, unknown_dims):
    if case.op in EXEMPT:
        pytest.skip(EXEMPT[case.op])
    random = OPS[case.op].random
    eager = _flat(apply(case.op, *_eager_inputs(case), **case.attrs))
    if not all(isinstance(t, d2s.Tensor) for t in eager):
        pytest.skip(f"{case.op} returns non-arrays")
    with building() as (main, _):
        args, feeds = _static_inputs(case, unknown_dims)
        out = _flat(apply(case.op, *args, **case.attrs))
    assert all(isinstance(v, Variable) for v in out)
    assert len(out) == len(eager)
    verify(main, feed_names=list(feeds))
    got = run(main, feeds, out)
    for i, (var, value, expected) in enumerate(zip(out, got, eager)):
        where = f"{case.id} output {i}"
        # the program's declared shape/dtype agree with what it computes
        assert var.dtype == value.dtype, where
        assert shapes.same(tuple(var.shape), value.shape), (where, var.shape, value.shape)
        # ... and with the eager result
        assert value.dtype == expected.dtype, where
        assert list(value.shape) == expected.shape, where
        if random:
            continue
        np.testing.assert_allclose(value, expected.numpy(), rtol=1e-6, atol=1e-7,
                                   err_msg=where)


def test_every_op_is_covered_or_exempt():
    covered = {c.op for c in CASES}
    missing = sorted(set(OPS) - covered - set(EXEMPT))
    assert not missing, f"ops with no static-vs-eager case: {missing}"
    assert not (set(EXEMPT) & covered), "an exempt op has table cases: drop the exemption"
