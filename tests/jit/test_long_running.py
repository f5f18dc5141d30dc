"""A converted function called for a long time with changing Python arguments stays bounded."""

from __future__ import annotations

import gc
import logging
import sys

import numpy as np

import dy2stat as d2s
from dy2stat import jit


class Net(d2s.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = d2s.nn.Linear(4, 4)

    @jit.to_static
    def forward(self, x, k, mode):
        y = self.fc(x) * k
        if mode == "double":
            y = y * 2
        if y.sum() > 0:
            y = y - 1
        return y


def blocks_after(calls) -> int:
    """Python's allocated memory blocks after running ``calls`` (a leak of one object
    per call shows as thousands of blocks; noise is a few)."""
    for call in calls:
        call()
    gc.collect()
    return sys.getallocatedblocks()


def test_ten_thousand_calls_with_changing_python_arguments_keep_memory_flat(caplog):
    caplog.set_level(logging.ERROR)  # the cache-limit warning, once
    d2s.seed(0)
    net, x = Net(), d2s.randn([2, 4])

    def call(i):
        return lambda: net(x, float(i), ("double", "plain", f"mode {i}")[i % 3])

    before = blocks_after(call(i) for i in range(1000))  # warm: the cache is full
    after = blocks_after(call(i) for i in range(1000, 11000))
    assert after - before < 1000, after - before
    assert len(net.forward.program_cache) == jit.settings.state.cache_size_limit
    y = net.fc(x).numpy() * 7.5  # still the eager answer
    np.testing.assert_allclose(net(x, 7.5, "plain").numpy(), y - 1 if y.sum() > 0 else y,
                               rtol=1e-5)


def test_the_measure_sees_programs_pile_up_without_the_limit():
    d2s.seed(0)
    net, x = Net(), d2s.randn([2, 4])
    jit.set_cache_size_limit(10_000)
    try:
        before = blocks_after([lambda: net(x, 1.0, "plain")])
        after = blocks_after(lambda i=i: net(x, float(i), "plain") for i in range(2, 32))
    finally:
        jit.set_cache_size_limit(8)
    assert after - before > 3000  # each traced program holds thousands of objects
