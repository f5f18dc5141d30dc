"""The losses: forward against NumPy for every reduction, gradients against finite
differences (float64), converted code against eager."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import nn
from dy2stat.nn import functional as F
from dy2stat.static import InputSpec
from tests.nn.helpers import check_converted, check_input_grads, randn, sigmoid, softmax, tensor

rng = np.random.default_rng(7)


def _reduce(loss, reduction):
    return {"mean": loss.mean(), "sum": loss.sum(), "none": loss}[reduction]


def _probs(*shape):
    return rng.uniform(0.05, 0.95, shape)


def _binary(*shape):
    return rng.integers(0, 2, shape).astype("float64")


def bce_ref(p, y, w=None):
    loss = -(y * np.log(p) + (1 - y) * np.log(1 - p))
    return loss if w is None else loss * w


def bce_logits_ref(x, y, w=None, pos_weight=None):
    p = sigmoid(x)
    pw = 1.0 if pos_weight is None else pos_weight
    loss = -(pw * y * np.log(p) + (1 - y) * np.log(1 - p))
    return loss if w is None else loss * w


def smooth_l1_ref(x, y, delta=1.0):
    z = np.abs(x - y)
    return np.where(z < delta, 0.5 * z * z, delta * z - 0.5 * delta * delta)


def kl_ref(x, y):
    return np.where(y > 0, y * (np.log(np.where(y > 0, y, 1)) - x), 0.0)


ELEMENTWISE = [
    # (name, layer factory(reduction), inputs, NumPy elementwise reference)
    ("l1", lambda r: nn.L1Loss(r), lambda: (randn(3, 4), randn(3, 4)),
     lambda x, y: np.abs(x - y)),
    ("smooth_l1", lambda r: nn.SmoothL1Loss(r), lambda: (randn(3, 4), randn(3, 4) * 2),
     smooth_l1_ref),
    ("smooth_l1_delta", lambda r: nn.SmoothL1Loss(r, delta=0.5),
     lambda: (randn(3, 4), randn(3, 4) * 2), lambda x, y: smooth_l1_ref(x, y, 0.5)),
    ("bce", lambda r: nn.BCELoss(reduction=r), lambda: (_probs(4, 3), _binary(4, 3)), bce_ref),
    ("bce_weight", lambda r: nn.BCELoss(weight=tensor(np.array([0.5, 1.0, 2.0])), reduction=r),
     lambda: (_probs(4, 3), _binary(4, 3)),
     lambda p, y: bce_ref(p, y, np.array([0.5, 1.0, 2.0]))),
    ("bce_logits", lambda r: nn.BCEWithLogitsLoss(reduction=r),
     lambda: (randn(4, 3) * 3, _binary(4, 3)), bce_logits_ref),
    ("bce_logits_pos", lambda r: nn.BCEWithLogitsLoss(
        reduction=r, pos_weight=tensor(np.array([1.0, 3.0, 0.5]))),
     lambda: (randn(4, 3) * 3, _probs(4, 3)),
     lambda x, y: bce_logits_ref(x, y, pos_weight=np.array([1.0, 3.0, 0.5]))),
    ("kl_div", lambda r: nn.KLDivLoss(r),
     lambda: (np.log(softmax(randn(3, 4))), softmax(randn(3, 4)) * (randn(3, 4) > -1)),
     kl_ref),
    ("mse", lambda r: nn.MSELoss(r), lambda: (randn(3, 4), randn(3, 4)),
     lambda x, y: (x - y) ** 2),
]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name, make, inputs, ref", ELEMENTWISE, ids=[c[0] for c in ELEMENTWISE])
def test_elementwise_losses_match_numpy(name, make, inputs, ref, reduction):
    x, y = inputs()
    out = make(reduction)(tensor(x), tensor(y))
    np.testing.assert_allclose(out.numpy(), _reduce(ref(x, y), reduction), rtol=1e-10,
                               atol=1e-12)
    assert out.shape == ([] if reduction != "none" else list(x.shape))


@pytest.mark.parametrize("name, make, inputs, ref", ELEMENTWISE, ids=[c[0] for c in ELEMENTWISE])
def test_elementwise_losses_gradients_and_conversion(name, make, inputs, ref):
    x, y = inputs()
    loss = make("none")
    check_input_grads(lambda a, b: loss(a, b), x, y, wrt=[0], rtol=1e-6, atol=1e-9)
    check_converted(lambda a, b: make("mean")(a, b), x, y,
                    input_spec=[InputSpec([None, x.shape[1]], "float64"),
                                InputSpec([None, y.shape[1]], "float64")])


def test_kl_div_batchmean_and_log_target():
    x, y = np.log(softmax(randn(3, 4))), softmax(randn(3, 4))
    np.testing.assert_allclose(F.kl_div(tensor(x), tensor(y), "batchmean").numpy(),
                               kl_ref(x, y).sum() / 3, rtol=1e-12)
    np.testing.assert_allclose(F.kl_div(tensor(x), tensor(np.log(y)), "sum",
                                        log_target=True).numpy(), kl_ref(x, y).sum(),
                               rtol=1e-10)
    check_converted(lambda a, b: F.kl_div(a, b, "batchmean"), x, y,
                    input_spec=[InputSpec([None, 4], "float64"),
                                InputSpec([None, 4], "float64")])


def test_bce_with_logits_is_finite_and_exact_at_extremes():
    x = np.array([-60.0, -20.0, 0.0, 20.0, 60.0])
    y = np.array([1.0, 0.0, 1.0, 1.0, 0.0])
    out = F.binary_cross_entropy_with_logits(tensor(x), tensor(y), reduction="none").numpy()
    ref = np.maximum(x, 0) - x * y + np.log1p(np.exp(-np.abs(x)))
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-15)
    t = tensor(np.zeros(2), stop_gradient=False)  # zero logits: slope sigmoid(0) - y
    (g,) = d2s.grad(F.binary_cross_entropy_with_logits(t, tensor(np.array([1.0, 0.0])),
                                                       reduction="sum"), [t])
    np.testing.assert_allclose(g.numpy(), [-0.5, 0.5])


@pytest.mark.filterwarnings("ignore:divide by zero")
def test_bce_clips_the_log_at_minus_100():
    p, y = np.array([0.0, 1.0, 0.5]), np.array([1.0, 0.0, 1.0])
    out = F.binary_cross_entropy(tensor(p), tensor(y), reduction="none").numpy()
    np.testing.assert_allclose(out, [100.0, 100.0, np.log(2)], rtol=1e-12)


def nll_ref(logp, label, weight=None, ignore_index=-100, reduction="mean"):
    moved = np.moveaxis(logp, 1, -1)
    valid = label != ignore_index
    safe = np.where(valid, label, 0)
    picked = np.take_along_axis(moved, safe[..., None], axis=-1)[..., 0]
    w = (np.ones(logp.shape[1]) if weight is None else weight)[safe] * valid
    loss = -picked * w
    if reduction == "mean":
        return loss.sum() / w.sum()
    return _reduce(loss, reduction)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss(reduction, weighted):
    logp = np.log(softmax(randn(5, 4), axis=1))
    label = np.array([0, 3, -100, 2, 1])
    weight = np.array([0.5, 2.0, 1.0, 0.25]) if weighted else None
    loss = nn.NLLLoss(weight=None if weight is None else tensor(weight), reduction=reduction)
    np.testing.assert_allclose(loss(tensor(logp), tensor(label)).numpy(),
                               nll_ref(logp, label, weight, reduction=reduction), rtol=1e-12)


def test_nll_loss_over_positions_gradients_and_conversion():
    logp = np.log(softmax(randn(2, 3, 4), axis=1))  # [N, C, d1]
    label = np.array([[0, 2, 1, 1], [2, 2, 0, 1]])
    weight = np.array([1.0, 0.5, 2.0])
    out = F.nll_loss(tensor(logp), tensor(label), tensor(weight))
    np.testing.assert_allclose(out.numpy(), nll_ref(logp, label, weight), rtol=1e-12)
    check_input_grads(lambda a, b: F.nll_loss(a, b, reduction="sum"), logp, label, wrt=[0])
    check_converted(lambda a, b: F.nll_loss(a, b), logp, label,
                    input_spec=[InputSpec([None, 3, None], "float64"),
                                InputSpec([None, None], "int64")])
    with pytest.raises(ValueError, match="one dim less"):
        F.nll_loss(tensor(logp), tensor(label[..., None]))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_margin_ranking_loss(reduction):
    a, b = randn(6), randn(6)
    label = np.array([1.0, -1.0, 1.0, 1.0, -1.0, -1.0])
    ref = np.maximum(0, -label * (a - b) + 0.3)
    out = nn.MarginRankingLoss(0.3, reduction)(tensor(a), tensor(b), tensor(label))
    np.testing.assert_allclose(out.numpy(), _reduce(ref, reduction), rtol=1e-12)
    check_input_grads(lambda x, y, z: F.margin_ranking_loss(x, y, z, 0.3), a, b, label,
                      wrt=[0, 1])


def test_cross_entropy_none_keeps_the_labels_size_one_axis():
    """Paddle's shape: with labels [N, 1] the per-sample loss is [N, 1], so weighting
    it by a [N, 1] tensor multiplies sample by sample instead of broadcasting to [N, N]."""
    logits = randn(4, 3)
    label = np.array([[2], [0], [1], [1]])
    loss = F.cross_entropy(tensor(logits), tensor(label), reduction="none")
    ref = -np.log(softmax(logits))[np.arange(4), label[:, 0]]
    assert loss.shape == [4, 1]
    np.testing.assert_allclose(loss.numpy()[:, 0], ref, rtol=1e-12)
    weights = np.array([[1.0], [0.5], [2.0], [0.0]])
    weighted = loss * tensor(weights)
    assert weighted.shape == [4, 1]
    np.testing.assert_allclose(weighted.numpy()[:, 0], ref * weights[:, 0], rtol=1e-12)
    # labels without the axis give [N]; soft labels keep the axis; so does a class weight
    assert F.cross_entropy(tensor(logits), tensor(label[:, 0]), reduction="none").shape == [4]
    soft = softmax(randn(4, 3))
    assert F.cross_entropy(tensor(logits), tensor(soft), soft_label=True,
                           reduction="none").shape == [4, 1]
    assert F.cross_entropy(tensor(logits), tensor(label), weight=tensor(np.ones(3)),
                           reduction="none").shape == [4, 1]
    check_converted(lambda x, y: F.cross_entropy(x, y, reduction="none"), logits, label,
                    input_spec=[InputSpec([None, 3], "float64"), InputSpec([None, 1], "int64")])


def test_unknown_reductions_are_errors():
    for make in (nn.L1Loss, nn.BCELoss, nn.NLLLoss, nn.SmoothL1Loss):
        with pytest.raises(ValueError, match="reduction"):
            make(reduction="avg")
    with pytest.raises(ValueError, match="batchmean"):
        nn.KLDivLoss("avg")
