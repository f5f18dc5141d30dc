"""vision.models.LeNet: Paddle's layer layout and a short training run."""

import numpy as np

import dy2stat as d2s
from dy2stat import nn, optimizer
from dy2stat.vision.models import LeNet


def test_layout_and_output_shape():
    d2s.seed(0)
    model = LeNet()
    shapes = [p.shape for p in model.parameters()]
    assert shapes == [[6, 1, 3, 3], [6], [16, 6, 5, 5], [16], [400, 120], [120], [120, 84],
                      [84], [84, 10], [10]]
    assert model(d2s.randn([3, 1, 28, 28])).shape == [3, 10]
    features = LeNet(num_classes=0)
    assert features(d2s.randn([2, 1, 28, 28])).shape == [2, 16, 5, 5]


def test_loss_falls_with_adam():
    d2s.seed(1)
    rng = np.random.default_rng(1)
    x = d2s.to_tensor(rng.standard_normal((16, 1, 28, 28)).astype("float32"))
    y = d2s.to_tensor(rng.integers(0, 10, (16, 1)))
    model = LeNet()
    opt = optimizer.Adam(learning_rate=0.002, parameters=model.parameters())
    loss_fn = nn.CrossEntropyLoss()
    losses = []
    for _ in range(8):
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.clear_grad()
        losses.append(float(loss))
    assert losses[-1] < losses[0]
