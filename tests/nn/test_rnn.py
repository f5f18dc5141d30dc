"""SimpleRNN, LSTM and GRU against NumPy reference implementations (Paddle's gate order),
both directions, sequence lengths, and converted code whose length is known only at run
time (a while op) against eager."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import nn
from dy2stat.static import InputSpec
from tests.nn.helpers import (
    check_converted,
    check_param_grads,
    double,
    params_np,
    randn,
    sigmoid,
    tensor,
)


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


def test_unknown_direction_is_a_clear_error():
    with pytest.raises(ValueError, match="'bidirect'"):
        nn.LSTM(2, 3, direction="backward")


def test_default_initialization_range():
    d2s.seed(0)
    gru = nn.GRU(5, 16)
    for p in gru.parameters():
        assert np.abs(p.numpy()).max() <= 0.25


# ------------------------------------------------------- both directions, SimpleRNN
def _cell_ref(kind, x_t, state, w_ih, w_hh, b_ih, b_hh, activation="tanh"):
    """One step of ``kind``; ``state`` is (h,) or (h, c); returns (output, new state)."""
    if kind == "lstm":
        h, c = state
        i, f, g, o = np.split(x_t @ w_ih.T + b_ih + h @ w_hh.T + b_hh, 4, axis=-1)
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        return h, (h, c)
    (h,) = state
    if kind == "gru":
        x_r, x_z, x_c = np.split(x_t @ w_ih.T + b_ih, 3, axis=-1)
        h_r, h_z, h_c = np.split(h @ w_hh.T + b_hh, 3, axis=-1)
        r, z = sigmoid(x_r + h_r), sigmoid(x_z + h_z)
        h = z * h + (1 - z) * np.tanh(x_c + r * h_c)
    else:
        pre = x_t @ w_ih.T + b_ih + h @ w_hh.T + b_hh
        h = np.tanh(pre) if activation == "tanh" else np.maximum(pre, 0)
    return h, (h,)


def rnn_ref(kind, x, params, num_layers, directions, lengths=None, activation="tanh"):
    """Outputs [batch, time, directions * hidden] and the final states, stacked
    [layers * directions, batch, hidden] per state tensor."""
    batch, steps, _ = x.shape
    hidden = params["weight_hh_l0"].shape[1]
    n_states = 2 if kind == "lstm" else 1
    lengths = np.full(batch, steps) if lengths is None else lengths
    finals = []
    for k in range(num_layers):
        outs = []
        for d, suffix in enumerate(["", "_reverse"][:directions]):
            w = [params[f"{name}_l{k}{suffix}"]
                 for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
            state = tuple(np.zeros((batch, hidden)) for _ in range(n_states))
            out = np.zeros((batch, steps, hidden))
            order = range(steps - 1, -1, -1) if d else range(steps)
            for t in order:
                live = (lengths > t)[:, None]
                h, new = _cell_ref(kind, x[:, t], state, *w, activation=activation)
                state = tuple(np.where(live, n, s) for n, s in zip(new, state))
                out[:, t] = h * live
            outs.append(out)
            finals.append(state)
        x = np.concatenate(outs, axis=-1)
    return x, [np.stack([f[i] for f in finals]) for i in range(n_states)]


KINDS = [("lstm", nn.LSTM), ("gru", nn.GRU), ("simple", nn.SimpleRNN)]


def _states(kind, result):
    return list(result) if kind == "lstm" else [result]


@pytest.mark.parametrize("kind, cls", KINDS)
@pytest.mark.parametrize("direction", ["bidirect", "bidirectional"])
def test_bidirectional_forward(kind, cls, direction):
    layer = double(cls(3, 4, num_layers=2, direction=direction))
    assert layer.weight_ih_l1.shape[1] == 8 and layer.weight_ih_l0_reverse.shape[1] == 3
    x = randn(2, 5, 3)
    out, states = layer(tensor(x))
    ref_out, ref_states = rnn_ref(kind, x, params_np(layer), 2, 2)
    assert out.shape == [2, 5, 8]
    np.testing.assert_allclose(out.numpy(), ref_out, rtol=1e-10, atol=1e-12)
    for got, ref in zip(_states(kind, states), ref_states):
        assert got.shape == [4, 2, 4]
        np.testing.assert_allclose(got.numpy(), ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind, cls", KINDS)
def test_bidirectional_with_sequence_lengths(kind, cls):
    """The reverse direction of each sequence starts at its own last step."""
    layer = double(cls(2, 3, direction="bidirect"))
    x, lengths = randn(3, 4, 2), np.array([4, 2, 1])
    out, states = layer(tensor(x), sequence_length=tensor(lengths))
    ref_out, ref_states = rnn_ref(kind, x, params_np(layer), 1, 2, lengths)
    np.testing.assert_allclose(out.numpy(), ref_out, rtol=1e-10, atol=1e-12)
    for got, ref in zip(_states(kind, states), ref_states):
        np.testing.assert_allclose(got.numpy(), ref, rtol=1e-10, atol=1e-12)
    # a short sequence's reverse pass equals the reverse pass over just its steps
    alone, _ = layer(tensor(x[2:, :1]))
    np.testing.assert_allclose(out.numpy()[2, 0], alone.numpy()[0, 0], rtol=1e-10)


def test_simple_rnn_relu_time_major_and_initial_state():
    layer = double(nn.SimpleRNN(2, 3, num_layers=2, activation="relu", time_major=True))
    x = randn(4, 2, 2)  # [time, batch, input]
    h0 = np.zeros((2, 2, 3))
    out, h = layer(tensor(x), tensor(h0))
    ref_out, (ref_h,) = rnn_ref("simple", x.transpose(1, 0, 2), params_np(layer), 2, 1,
                                activation="relu")
    np.testing.assert_allclose(out.numpy(), ref_out.transpose(1, 0, 2), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(h.numpy(), ref_h, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="activation"):
        nn.SimpleRNN(2, 3, activation="sigmoid")


def test_simple_rnn_cell_matches_one_step():
    layer = double(nn.SimpleRNN(3, 4))
    cell = double(nn.SimpleRNNCell(3, 4))
    cell.set_state_dict({k[:-3]: v for k, v in layer.state_dict().items()})
    x = randn(2, 1, 3)
    h, _ = cell(tensor(x[:, 0]))
    np.testing.assert_allclose(h.numpy(), layer(tensor(x))[0].numpy()[:, 0], rtol=1e-12)


@pytest.mark.parametrize("kind, cls", KINDS)
def test_bidirectional_gradients(kind, cls):
    layer = cls(2, 2, direction="bidirect")
    check_param_grads(layer, tensor(randn(2, 3, 2)), None, tensor(np.array([3, 2])))


@pytest.mark.parametrize("kind, cls", KINDS)
def test_converted_with_a_run_time_length_is_a_while_loop_equal_to_eager(kind, cls):
    layer = double(cls(3, 4, num_layers=2, direction="bidirect"))
    x, lengths = randn(2, 5, 3), np.array([5, 3])

    def forward(inputs, lens):
        out, states = layer(inputs, sequence_length=lens)
        return out, states

    converted = check_converted(forward, x, lengths, params=layer.parameters(),
                                input_spec=[InputSpec([None, None, 3], "float64"),
                                            InputSpec([None], "int64")])
    ops = [op.type for op in converted.main_program.all_ops()]
    assert ops.count("while") == 4  # 2 layers x 2 directions
    # the same program runs other lengths
    longer = randn(3, 7, 3)
    lens = np.array([7, 1, 4])
    np.testing.assert_allclose(converted(tensor(longer), tensor(lens))[0].numpy(),
                               layer(tensor(longer), sequence_length=tensor(lens))[0].numpy(),
                               rtol=1e-10, atol=1e-12)


def test_converted_with_a_known_length_unrolls():
    layer = double(nn.GRU(2, 3))
    converted = check_converted(lambda v: layer(v)[0], randn(2, 3, 2), params=layer.parameters(),
                                input_spec=[InputSpec([None, 3, 2], "float64")])
    assert "while" not in [op.type for op in converted.main_program.all_ops()]
