"""``set_flags`` / ``get_flags``: validation, Paddle's FLAGS_ spelling, and what they set."""

import os

import pytest

from dy2stat import flags
from dy2stat.kernels import cudnn
from dy2stat.runtime import lower


def test_defaults_and_reading():
    assert flags.get_flags() == {"cudnn_exhaustive_search": False, "cudnn_deterministic": False,
                                 "use_cudnn": True,
                                 "inter_op_parallelism": (os.cpu_count() or 1) > 1,
                                 "batch_parallelism": False,  # opt-in: eager's rounding
                                 "batch_minor_layout": False,  # by default (performance.md)
                                 "native_tier": lower.native.available(),
                                 "native_exact": False,  # products add in loop order
                                 "native_after_calls": 100,
                                 "native_relaxed": False,  # opt-in: another rounding
                                 "native_cache_dir": "",
                                 "cuda_graphs": True, "gpu_loop_kernels": True}
    assert flags.get_flags("FLAGS_use_cudnn") == {"FLAGS_use_cudnn": True}
    assert flags.get_flags(["cudnn_deterministic"]) == {"cudnn_deterministic": False}
    assert set(flags.describe()) == set(flags.get_flags())


def test_setting_reaches_the_cudnn_kernels():
    flags.set_flags({"cudnn_exhaustive_search": True, "FLAGS_cudnn_deterministic": 1,
                     "use_cudnn": False})
    assert cudnn.settings.exhaustive_search is True
    assert cudnn.settings.deterministic is True
    assert cudnn.settings.enabled is False
    assert flags.get_flags("cudnn_exhaustive_search") == {"cudnn_exhaustive_search": True}
    flags.set_flags({"cudnn_exhaustive_search": False, "cudnn_deterministic": False,
                     "use_cudnn": True})
    assert not cudnn.settings.exhaustive_search and cudnn.settings.enabled


def test_unknown_flags_and_bad_values_are_errors_naming_them():
    with pytest.raises(ValueError, match="unknown flag 'cudnn_exhaustive_serch'.*known flags"):
        flags.set_flags({"cudnn_exhaustive_serch": True})
    with pytest.raises(ValueError, match="unknown flag 'FLAGS_nope'"):
        flags.get_flags("FLAGS_nope")
    with pytest.raises(TypeError, match="'use_cudnn' takes True or False, got 'yes'"):
        flags.set_flags({"use_cudnn": "yes"})
    with pytest.raises(TypeError, match="'native_after_calls' takes a whole number >= 1"):
        flags.set_flags({"native_after_calls": 0})
    with pytest.raises(TypeError, match="'native_cache_dir' takes a string"):
        flags.set_flags({"native_cache_dir": 3})
    with pytest.raises(TypeError, match="takes a dict"):
        flags.set_flags([("use_cudnn", True)])
    # nothing is applied unless every entry is valid
    with pytest.raises(ValueError):
        flags.set_flags({"cudnn_exhaustive_search": True, "bogus": 1})
    assert flags.get_flags("cudnn_exhaustive_search") == {"cudnn_exhaustive_search": False}
    assert cudnn.settings.exhaustive_search is False
