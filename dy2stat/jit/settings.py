"""Switches and logging of the conversion: on/off, verbosity, code dumps."""

from __future__ import annotations

import logging

from dy2stat.dy2static import convert as _convert

log = logging.getLogger("dy2stat")


class _State:
    enabled = True  # enable_to_static(False): everything runs eagerly
    verbosity = 0  # >= 1: retrace reasons; >= 2: the traced program
    code_level = 0  # >= 1: the converted code after each pass
    last_function = None  # the StaticFunction called most recently (ProgramTranslator)
    # Programs one converted function may trace (as torch._dynamo's cache_size_limit);
    # past it, calls that need another program run eagerly, with a warning.
    cache_size_limit = 8


state = _State()


def enable_to_static(flag: bool) -> None:
    """Globally turn conversion on or off (off: decorated functions run eagerly)."""
    state.enabled = bool(flag)


def set_verbosity(level: int = 0) -> None:
    """1: log why a call retraces; 2: also log every traced program."""
    state.verbosity = int(level)
    _convert.set_verbosity(level)
    if level > 0 and not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("dy2stat: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)


def set_cache_size_limit(limit: int) -> None:
    """How many programs one converted function may trace (default 8); calls that would
    need more run the original function eagerly, and a warning says what kept changing."""
    if type(limit) is not int or limit < 1:
        raise ValueError(f"set_cache_size_limit: the limit must be a positive int, "
                         f"got {limit!r}")
    state.cache_size_limit = limit


def set_code_level(level: int = 0) -> None:
    """Print the converted code after each pass (``level`` > 0)."""
    state.code_level = int(level)
    _convert.set_code_level(level)


def convert(function):
    return _convert.convert_to_static(function)


def converted_code(function) -> str:
    return _convert.convert_to_static(function).code


def log_retrace(name: str, reasons: list[str]) -> None:
    if state.verbosity >= 1:
        log.info("retracing %s: %s", name, "; ".join(reasons) or "new input signature")


def key_changes(old_key, new_key, names: list[str]) -> list[str]:
    """What differs between two cache keys ``(argument descriptions, training)``."""
    (old_args, old_training), (new_args, new_training) = old_key, new_key
    reasons = []
    if old_training != new_training:
        reasons.append(f"train/eval mode changed ({old_training} -> {new_training})")
    for i, (old, new) in enumerate(zip(old_args, new_args)):
        if old != new:
            arg = names[i] if i < len(names) else f"argument {i}"
            reasons.append(f"argument {arg!r} changed from {_show(old)} to {_show(new)}")
    return reasons


def _show(desc) -> str:
    if desc and desc[0] == "tensor":
        return f"tensor {list(desc[1])} {desc[2]}"
    if len(desc) == 2 and isinstance(desc[0], type) and desc[0] not in (list, tuple, dict):
        text = repr(desc[1])
        return text if len(text) <= 60 else text[:57] + "..."
    return str(desc)


def dump_program(name: str, program) -> None:
    if state.verbosity >= 2:
        log.info("traced %s:\n%s", name, program)
