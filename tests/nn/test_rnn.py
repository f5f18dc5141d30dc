"""LSTM and GRU against NumPy reference implementations (Paddle's gate order)."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import nn
from tests.nn.helpers import check_param_grads, double, params_np, randn, sigmoid, tensor


def lstm_ref(x, params, num_layers, h0=None, c0=None, lengths=None):
    batch, steps, _ = x.shape
    hidden = params["weight_hh_l0"].shape[1]
    hs, cs = [], []
    for k in range(num_layers):
        w_ih, w_hh = params[f"weight_ih_l{k}"], params[f"weight_hh_l{k}"]
        b = params[f"bias_ih_l{k}"] + params[f"bias_hh_l{k}"]
        h = np.zeros((batch, hidden)) if h0 is None else h0[k]
        c = np.zeros((batch, hidden)) if c0 is None else c0[k]
        outs = []
        for t in range(steps):
            gates = x[:, t] @ w_ih.T + h @ w_hh.T + b
            i, f, g, o = np.split(gates, 4, axis=-1)
            c_new = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
            h_new = sigmoid(o) * np.tanh(c_new)
            live = np.ones((batch, 1)) if lengths is None else (lengths > t)[:, None]
            h, c = np.where(live, h_new, h), np.where(live, c_new, c)
            outs.append(h_new * live)
        x = np.stack(outs, axis=1)
        hs.append(h)
        cs.append(c)
    return x, np.stack(hs), np.stack(cs)


def gru_ref(x, params, num_layers, h0=None, lengths=None):
    batch, steps, _ = x.shape
    hidden = params["weight_hh_l0"].shape[1]
    hs = []
    for k in range(num_layers):
        w_ih, w_hh = params[f"weight_ih_l{k}"], params[f"weight_hh_l{k}"]
        b_ih, b_hh = params[f"bias_ih_l{k}"], params[f"bias_hh_l{k}"]
        h = np.zeros((batch, hidden)) if h0 is None else h0[k]
        outs = []
        for t in range(steps):
            x_r, x_z, x_c = np.split(x[:, t] @ w_ih.T + b_ih, 3, axis=-1)
            h_r, h_z, h_c = np.split(h @ w_hh.T + b_hh, 3, axis=-1)
            r, z = sigmoid(x_r + h_r), sigmoid(x_z + h_z)
            c = np.tanh(x_c + r * h_c)
            h_new = z * h + (1 - z) * c
            live = np.ones((batch, 1)) if lengths is None else (lengths > t)[:, None]
            h = np.where(live, h_new, h)
            outs.append(h_new * live)
        x = np.stack(outs, axis=1)
        hs.append(h)
    return x, np.stack(hs)


@pytest.mark.parametrize("num_layers", [1, 2])
def test_lstm_forward(num_layers):
    lstm = double(nn.LSTM(3, 4, num_layers=num_layers))
    assert lstm.weight_ih_l0.shape == [16, 3] and lstm.weight_hh_l0.shape == [16, 4]
    assert lstm.bias_ih_l0.shape == [16]
    x = randn(2, 5, 3)
    out, (h, c) = lstm(tensor(x))
    ref_out, ref_h, ref_c = lstm_ref(x, params_np(lstm), num_layers)
    assert out.shape == [2, 5, 4] and h.shape == [num_layers, 2, 4] and c.shape == h.shape
    np.testing.assert_allclose(out.numpy(), ref_out, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(h.numpy(), ref_h, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(c.numpy(), ref_c, rtol=1e-10, atol=1e-12)


def test_lstm_initial_states_time_major_and_float32():
    lstm = nn.LSTM(2, 3, num_layers=2, time_major=True)
    x = randn(4, 2, 2, dtype="float32")  # [time, batch, input]
    h0, c0 = randn(2, 2, 3, dtype="float32"), randn(2, 2, 3, dtype="float32")
    out, (h, c) = lstm(tensor(x), (tensor(h0), tensor(c0)))
    ref_out, ref_h, ref_c = lstm_ref(x.transpose(1, 0, 2), params_np(lstm), 2, h0, c0)
    assert out.dtype == np.float32 and out.shape == [4, 2, 3]
    np.testing.assert_allclose(out.numpy(), ref_out.transpose(1, 0, 2), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h.numpy(), ref_h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c.numpy(), ref_c, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("num_layers", [1, 3])
def test_gru_forward(num_layers):
    gru = double(nn.GRU(3, 4, num_layers=num_layers))
    assert gru.weight_ih_l0.shape == [12, 3] and gru.weight_hh_l0.shape == [12, 4]
    x = randn(3, 4, 3)
    h0 = randn(num_layers, 3, 4)
    out, h = gru(tensor(x), tensor(h0))
    ref_out, ref_h = gru_ref(x, params_np(gru), num_layers, h0)
    np.testing.assert_allclose(out.numpy(), ref_out, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(h.numpy(), ref_h, rtol=1e-10, atol=1e-12)
    out0, h_zero = gru(tensor(x))
    np.testing.assert_allclose(out0.numpy(), gru_ref(x, params_np(gru), num_layers)[0],
                               rtol=1e-10, atol=1e-12)


def test_sequence_length_masks_padded_steps():
    lengths = np.array([4, 2, 1])
    x = randn(3, 4, 2)
    lstm = double(nn.LSTM(2, 3, num_layers=2))
    out, (h, c) = lstm(tensor(x), sequence_length=tensor(lengths))
    ref_out, ref_h, ref_c = lstm_ref(x, params_np(lstm), 2, lengths=lengths)
    np.testing.assert_allclose(out.numpy(), ref_out, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(h.numpy(), ref_h, rtol=1e-10, atol=1e-12)
    assert not out.numpy()[2, 1:].any()
    gru = double(nn.GRU(2, 3))
    out, h = gru(tensor(x), sequence_length=tensor(lengths))
    ref_out, ref_h = gru_ref(x, params_np(gru), 1, lengths=lengths)
    np.testing.assert_allclose(out.numpy(), ref_out, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(h.numpy(), ref_h, rtol=1e-10, atol=1e-12)


def test_dropout_between_layers_only_in_training():
    d2s.seed(0)
    lstm = nn.LSTM(2, 3, num_layers=2, dropout=0.5)
    x = tensor(randn(2, 3, 2, dtype="float32"))
    lstm.eval()
    ref = lstm_ref(x.numpy(), params_np(lstm), 2)[0]
    np.testing.assert_allclose(lstm(x)[0].numpy(), ref, rtol=1e-5, atol=1e-6)
    lstm.train()
    assert not np.allclose(lstm(x)[0].numpy(), ref)


def test_lstm_gradients_two_layers():
    lstm = nn.LSTM(2, 3, num_layers=2)
    check_param_grads(lstm, tensor(randn(2, 3, 2)))


def test_gru_gradients_with_initial_state():
    gru = nn.GRU(2, 3, num_layers=2)
    check_param_grads(gru, tensor(randn(2, 3, 2)), tensor(randn(2, 2, 3)))


def test_gradient_reaches_inputs_and_initial_states():
    lstm = double(nn.LSTM(2, 3))
    x = tensor(randn(2, 3, 2), stop_gradient=False)
    h0 = tensor(randn(1, 2, 3), stop_gradient=False)
    c0 = tensor(randn(1, 2, 3), stop_gradient=False)
    out, (h, c) = lstm(x, (h0, c0))
    (out.sum() + c.sum()).backward()
    assert x.grad.shape == [2, 3, 2] and h0.grad.shape == [1, 2, 3] and c0.grad is not None


def test_cells_match_one_step_of_the_layer():
    lstm = double(nn.LSTM(3, 4))
    cell = double(nn.LSTMCell(3, 4))
    cell.set_state_dict({k[:-3]: v for k, v in lstm.state_dict().items()})
    x = randn(2, 1, 3)
    out, (h, c) = lstm(tensor(x))
    h1, (h2, c1) = cell(tensor(x[:, 0]))
    np.testing.assert_allclose(h1.numpy(), out.numpy()[:, 0], rtol=1e-12)
    np.testing.assert_allclose(c1.numpy(), c.numpy()[0], rtol=1e-12)
    gru = double(nn.GRU(3, 4))
    gcell = double(nn.GRUCell(3, 4))
    gcell.set_state_dict({k[:-3]: v for k, v in gru.state_dict().items()})
    h0 = randn(2, 4)
    g_out, _ = gru(tensor(x), tensor(h0[None]))
    np.testing.assert_allclose(gcell(tensor(x[:, 0]), tensor(h0))[0].numpy(),
                               g_out.numpy()[:, 0], rtol=1e-12)


def test_unsupported_direction_is_a_clear_error():
    with pytest.raises(NotImplementedError, match="direction='forward'"):
        nn.LSTM(2, 3, direction="bidirect")


def test_default_initialization_range():
    d2s.seed(0)
    gru = nn.GRU(5, 16)
    for p in gru.parameters():
        assert np.abs(p.numpy()).max() <= 0.25
