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


def set_code_level(level: int = 0) -> None:
    """Print the converted code after each pass (``level`` > 0)."""
    state.code_level = int(level)
    _convert.set_code_level(level)


def convert(function):
    return _convert.convert_to_static(function)


def converted_code(function) -> str:
    return _convert.convert_to_static(function).code


def log_retrace(name: str, old_key, new_key) -> None:
    if state.verbosity < 1:
        return
    (old_args, old_training, old_hooks), (new_args, new_training, new_hooks) = old_key, new_key
    reasons = []
    if old_training != new_training:
        reasons.append(f"train/eval mode changed ({old_training} -> {new_training})")
    if old_hooks != new_hooks:
        reasons.append("forward hooks of a sublayer were registered or removed")
    old, new = dict(old_args), dict(new_args)
    for arg in new:
        if arg not in old:
            reasons.append(f"argument {arg!r} is new")
        elif old[arg] != new[arg]:
            reasons.append(f"argument {arg!r} changed from {_show(old[arg])} to {_show(new[arg])}")
    log.info("retracing %s: %s", name, "; ".join(reasons) or "new input signature")


def _show(desc) -> str:
    if desc and desc[0] == "tensor":
        return f"tensor {list(desc[1])} {desc[2]}"
    if desc and desc[0] == "value":
        return repr(desc[1])
    return str(desc)


def dump_program(name: str, program) -> None:
    if state.verbosity >= 2:
        log.info("traced %s:\n%s", name, program)
