"""gather_tree against a NumPy back-trace, eagerly and in programs whose number of steps
is known only at run time (a while op)."""

import numpy as np

import dy2stat as d2s
from dy2stat.nn import functional as F
from dy2stat.static import InputSpec


def gather_tree_ref(ids, parents):
    steps, batch, beam = ids.shape
    out = np.zeros_like(ids)
    for b in range(batch):
        for k in range(beam):
            parent = k
            for t in range(steps - 1, -1, -1):
                out[t, b, k] = ids[t, b, parent]
                parent = parents[t, b, parent]
    return out


def _beams(steps=5, batch=2, beam=3, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 20, (steps, batch, beam))
    parents = rng.integers(0, beam, (steps, batch, beam))
    return ids, parents


def test_matches_the_numpy_back_trace():
    ids, parents = _beams()
    out = F.gather_tree(d2s.to_tensor(ids), d2s.to_tensor(parents))
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out.numpy(), gather_tree_ref(ids, parents))
    one = F.gather_tree(d2s.to_tensor(ids[:1]), d2s.to_tensor(parents[:1]))
    np.testing.assert_array_equal(one.numpy(), ids[:1])


def test_converted_with_a_run_time_number_of_steps():
    @d2s.jit.to_static(input_spec=[InputSpec([None, None, 3], "int64"),
                                   InputSpec([None, None, 3], "int64")])
    def trace(ids, parents):
        return F.gather_tree(ids, parents)

    for steps in (5, 2, 7):
        ids, parents = _beams(steps, seed=steps)
        np.testing.assert_array_equal(trace(d2s.to_tensor(ids), d2s.to_tensor(parents)).numpy(),
                                      gather_tree_ref(ids, parents))
    assert "while" in [op.type for op in trace.main_program.all_ops()]
