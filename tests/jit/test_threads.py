"""Tracing state, static mode and no_grad are per thread: a converted Layer can be served
from a thread pool, first traces included."""

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import dy2stat as d2s
from dy2stat import jit, nn
from dy2stat.tensor import Tensor


class Looping(nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        if y.mean() > 0:
            y = y * 2
        i = 0
        while y.sum() < 50 and i < 6:
            y = y + 1
            i += 1
        return y


def test_one_converted_layer_called_from_eight_threads_with_different_batches():
    d2s.seed(0)
    eager = Looping()
    converted = Looping()
    converted.set_state_dict(eager.state_dict())
    jit.to_static(converted)
    inputs = [np.random.default_rng(b).standard_normal((b, 4)).astype("float32")
              for b in range(1, 9)]
    expected = [eager(d2s.to_tensor(x)).numpy() for x in inputs]
    start = threading.Barrier(8)

    def serve(i):
        start.wait()  # every thread's first call races the others' first traces
        outs = [converted(d2s.to_tensor(inputs[i])) for _ in range(10)]
        return [type(o) for o in outs], [o.numpy() for o in outs]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(serve, range(8)))
    for i, (types, values) in enumerate(results):
        assert all(t is Tensor for t in types)
        for v in values:
            np.testing.assert_allclose(v, expected[i], rtol=1e-5)
    assert len(converted.forward.program_cache) == 8


def test_no_grad_in_one_thread_leaves_gradients_on_in_others():
    inside, other = threading.Event(), threading.Event()
    seen = {}

    def quiet():
        with d2s.no_grad():
            inside.set()
            other.wait(5)

    def recording():
        inside.wait(5)
        p = d2s.to_tensor([1.0], stop_gradient=False)
        seen["stop_gradient"] = (p * 2).stop_gradient
        other.set()

    threads = [threading.Thread(target=quiet), threading.Thread(target=recording)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen["stop_gradient"] is False


def test_static_mode_in_one_thread_leaves_others_eager():
    started, done = threading.Event(), threading.Event()
    seen = {}

    def static():
        d2s.enable_static()
        try:
            started.set()
            done.wait(5)
        finally:
            d2s.disable_static()

    def eager():
        started.wait(5)
        seen["value"] = (d2s.ones([2]) + 1).numpy()
        done.set()

    threads = [threading.Thread(target=static), threading.Thread(target=eager)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_array_equal(seen["value"], [2.0, 2.0])
