"""Layers on the GPU give the CPU's results (skipped without CuPy and a GPU)."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import nn
from tests.nn.helpers import randn

pytestmark = pytest.mark.gpu


@pytest.fixture
def gpu():
    if not d2s.is_compiled_with_cuda():
        pytest.skip("needs CuPy and a GPU")
    yield
    d2s.set_device("cpu")


class Net(nn.Layer):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2D(1, 2, 3, padding=1), nn.BatchNorm2D(2), nn.ReLU(),
                                  nn.MaxPool2D(2))
        self.lstm = nn.LSTM(8, 5, num_layers=2)
        self.norm = nn.LayerNorm(5)
        self.fc = nn.Linear(5, 3)

    def forward(self, x):
        y = self.conv(x)  # [n, 2, 2, 4]
        y = d2s.reshape(y, [y.shape[0], 2, 8])
        out, _ = self.lstm(y)
        return self.fc(nn.functional.gelu(self.norm(out[:, -1])))


def test_moved_model_matches_cpu(gpu):
    cpu_model, gpu_model = Net(), Net()
    gpu_model.set_state_dict(cpu_model.state_dict())
    gpu_model.to("gpu")
    assert all(p.place.startswith("gpu") for p in gpu_model.parameters())
    x = randn(3, 1, 4, 8, dtype="float32")
    label = np.array([0, 2, 1])
    losses = []
    for model, place in ((cpu_model, "cpu"), (gpu_model, "gpu")):
        logits = model(d2s.to_tensor(x, place=place))
        loss = nn.CrossEntropyLoss()(logits, d2s.to_tensor(label, place=place))
        loss.backward()
        losses.append(loss.item())
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-4)
    for (name, a), (_, b) in zip(cpu_model.named_parameters(), gpu_model.named_parameters()):
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-3, atol=1e-5,
                                   err_msg=name)
    np.testing.assert_allclose(gpu_model.conv[1]._mean.numpy(), cpu_model.conv[1]._mean.numpy(),
                               rtol=1e-5, atol=1e-6)


def test_layers_built_on_the_gpu_live_there(gpu):
    d2s.set_device("gpu")
    d2s.seed(0)
    layer = nn.Sequential(nn.Linear(4, 3), nn.Dropout(0.5), nn.BatchNorm1D(3))
    assert all(t.place.startswith("gpu") for t in layer.parameters() + layer.buffers())
    out = layer(d2s.randn([6, 4]))
    assert out.place.startswith("gpu") and out.shape == [6, 3]


@pytest.mark.parametrize("opt", ["SGD", "Momentum", "Adam", "AdamW"])
def test_an_optimizer_made_before_the_move_follows_the_parameters(gpu, opt):
    """The learning rate and the optimizer's state live where each parameter lives."""
    d2s.seed(3)
    cpu_model = nn.Linear(4, 2)
    gpu_model = nn.Linear(4, 2)
    gpu_model.set_state_dict(cpu_model.state_dict())
    cpu_opt = getattr(d2s.optimizer, opt)(parameters=cpu_model.parameters(), learning_rate=0.1)
    gpu_opt = getattr(d2s.optimizer, opt)(parameters=gpu_model.parameters(), learning_rate=0.1)
    gpu_model.to("gpu")  # after the optimizer was built on the CPU
    x = randn(3, 4)
    for _ in range(2):
        for model, optimizer, place in ((cpu_model, cpu_opt, "cpu"), (gpu_model, gpu_opt, "gpu")):
            model(d2s.to_tensor(x, place=place)).sum().backward()
            optimizer.step()
            optimizer.clear_grad()
    assert gpu_model.weight.place.startswith("gpu")
    np.testing.assert_allclose(gpu_model.weight.numpy(), cpu_model.weight.numpy(), rtol=1e-5)


def test_assign_takes_values_from_gpu_arrays_and_tensors(gpu):
    """CuPy refuses np.asarray on its arrays: Assign copies them to the host itself."""
    from dy2stat.kernels import backend

    d2s.set_device("gpu")
    host = np.array([[1.0, 2.0], [3.0, 4.0]], "float32")
    for values in (backend.cupy.asarray(host), d2s.to_tensor(host)):
        layer = nn.Linear(2, 2, weight_attr=nn.initializer.Assign(values))
        assert layer.weight.place.startswith("gpu")
        np.testing.assert_array_equal(layer.weight.numpy(), host)


class ReleaseNet(nn.Layer):
    """The layers of the 0.2 model set in one model (sizes tiny)."""

    def __init__(self):
        super().__init__()
        self.up = nn.Sequential(nn.Conv2DTranspose(1, 2, 3, stride=2, padding=1,
                                                   output_padding=1),
                                nn.GroupNorm(1, 2), nn.PReLU(2),
                                nn.Upsample(scale_factor=0.5, mode="bilinear"),
                                nn.AdaptiveAvgPool2D([2, 4]))
        self.gru = nn.GRU(4, 4, direction="bidirect")
        self.encoder = nn.TransformerEncoderLayer(8, 2, 8, dropout=0.0)
        self.fc = nn.Linear(8, 3)

    def forward(self, x, lengths, mask):
        y = self.up(x)  # [n, 2, 2, 4]
        y = d2s.reshape(y, [y.shape[0], 4, 4])
        out, _ = self.gru(y, sequence_length=lengths)
        return self.fc(self.encoder(out, src_mask=mask)[:, 0])


def test_moved_release_layers_match_cpu(gpu):
    cpu_model, gpu_model = ReleaseNet(), ReleaseNet()
    gpu_model.set_state_dict(cpu_model.state_dict())
    gpu_model.to("gpu")
    x = randn(3, 1, 2, 4, dtype="float32")
    lengths = np.array([4, 2, 3])
    mask = (np.arange(4) < lengths[:, None])[:, None, None, :]
    label = np.array([0, 2, 1])
    results = []
    for model, place in ((cpu_model, "cpu"), (gpu_model, "gpu")):
        logits = model(d2s.to_tensor(x, place=place), d2s.to_tensor(lengths, place=place),
                       d2s.to_tensor(mask, place=place))
        loss = nn.BCEWithLogitsLoss()(logits, d2s.to_tensor(np.eye(3, dtype="float32")[label],
                                                            place=place))
        loss.backward()
        acc = d2s.metric.accuracy(logits, d2s.to_tensor(label, place=place), k=2)
        results.append((loss.item(), acc.item()))
    np.testing.assert_allclose(results[1], results[0], rtol=1e-4)
    for (name, a), (_, b) in zip(cpu_model.named_parameters(), gpu_model.named_parameters()):
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-3, atol=1e-5,
                                   err_msg=name)
