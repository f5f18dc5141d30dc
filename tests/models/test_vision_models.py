"""vision.models ResNet and MobileNetV2: Paddle's layout, training converted as eager
(BatchNorm in training mode), eval mode as eager (running statistics), and the saved
model in a fresh process.

Small inputs keep the tests fast: 32x32 images (the networks downsample by 32, so
the last map is 1x1) and a MobileNetV2 of width 0.25; the layers are the published
ones (benchmarks/models.py times them at 224x224).
"""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import jit, nn
from dy2stat.static import InputSpec
from dy2stat.vision import models
from tests.models.helpers import assert_trains_as_eager, outputs_after_load_elsewhere

# Parameter counts of the published models (1000 classes; BatchNorm's running
# statistics are buffers, not parameters), as Paddle and torchvision report them.
PUBLISHED = {"resnet18": 11_689_512, "resnet34": 21_797_672, "resnet50": 25_557_032,
             "mobilenet_v2": 3_504_872}


@pytest.mark.parametrize("name", PUBLISHED)
def test_parameter_counts_are_the_published_ones(name):
    model = getattr(models, name)()
    assert sum(int(np.prod(p.shape)) for p in model.parameters()) == PUBLISHED[name]


def test_paddle_layout_and_options():
    net = models.resnet18(num_classes=10)
    names = [name for name, _ in net.named_parameters()]
    assert names[:3] == ["conv1.weight", "bn1.weight", "bn1.bias"]
    assert "layer2.0.downsample.0.weight" in names and names[-2:] == ["fc.weight", "fc.bias"]
    assert "layer1.0.bn1._mean" in net.state_dict()
    x = d2s.randn([2, 3, 32, 32])
    assert net(x).shape == [2, 10]
    assert models.resnet50(with_pool=False, num_classes=0)(x).shape == [2, 2048, 1, 1]
    assert models.resnet18(num_classes=0)(x).shape == [2, 512, 1, 1]
    assert models.ResNet(models.BottleneckBlock, 50, width=32, num_classes=3)(x).shape == [2, 3]
    mobile = models.mobilenet_v2(scale=0.5, num_classes=7)
    assert mobile(x).shape == [2, 7] and mobile.last_channel == 1280
    assert models.MobileNetV2(with_pool=False, num_classes=0)(x).shape == [2, 1280, 1, 1]
    assert isinstance(mobile.classifier[0], nn.Dropout)
    with pytest.raises(ValueError, match="pretrained"):
        models.resnet50(pretrained=True)
    with pytest.raises(ValueError, match="depth"):
        models.ResNet(models.BasicBlock, 20)


def _images(batch=2, size=32, classes=10, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((batch, 3, size, size)).astype("float32"),
            rng.integers(0, classes, (batch, 1)).astype("int64"))


MAKERS = {
    "resnet18": lambda: models.resnet18(num_classes=10),
    "resnet50": lambda: models.resnet50(num_classes=10),
    "mobilenet_v2 x0.25": lambda: models.mobilenet_v2(scale=0.25, num_classes=10),
}
SPEC = [InputSpec([None, 3, 32, 32], "float32", "image")]


@pytest.mark.parametrize("name", MAKERS)
def test_converted_trains_evaluates_and_loads_as_eager(name, tmp_path):
    x, y = _images()
    images, labels = d2s.to_tensor(x), d2s.to_tensor(y)

    def loss_of(model, step):
        return nn.functional.cross_entropy(model(images), labels)

    eager, converted = assert_trains_as_eager(
        MAKERS[name], loss_of, lambda m: jit.to_static(m, input_spec=SPEC), lr=1e-3)
    for a, b in zip(converted.buffers(), eager.buffers(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())  # running statistics
    eager.eval()
    converted.eval()
    test_x, _ = _images(batch=3, seed=1)
    expected = eager(d2s.to_tensor(test_x)).numpy()
    np.testing.assert_array_equal(converted(d2s.to_tensor(test_x)).numpy(), expected)
    (loaded,) = outputs_after_load_elsewhere(converted, SPEC, [test_x], tmp_path)
    np.testing.assert_array_equal(loaded, expected)
