"""Saving and loading inference programs: ``{path}.json`` and ``{path}.safetensors``."""

from __future__ import annotations

import os

from dy2stat import device
from dy2stat.kernels.backend import to_host
from dy2stat.runtime import prune, serialize
from dy2stat.static.builder import captured_tensors
from dy2stat.static.executor import Executor, global_scope
from dy2stat.static.framework import default_main_program
from dy2stat.static.variable import Variable


def save_inference_model(path_prefix: str, feed_vars, fetch_vars, executor: Executor,
                         program=None) -> None:
    """Prune the program to what the fetches need and write the program and parameters
    (all or nothing: see ``serialize.save_model``)."""
    feed_vars = feed_vars if isinstance(feed_vars, (list, tuple)) else [feed_vars]
    fetch_vars = fetch_vars if isinstance(fetch_vars, (list, tuple)) else [fetch_vars]
    program = program or (fetch_vars[0].block.program if fetch_vars else default_main_program())
    feed_names = [v.name if isinstance(v, Variable) else str(v) for v in feed_vars]
    fetch_names = [v.name if isinstance(v, Variable) else str(v) for v in fetch_vars]
    pruned = prune.prune(program, feed_names, fetch_names)
    scope = global_scope()
    captured = captured_tensors(program)
    params = {}
    for var in pruned.persistables():
        if var.name in captured:
            params[var.name] = to_host(captured[var.name]._data)
        elif var.name in scope:
            params[var.name] = to_host(scope[var.name])
        else:
            raise ValueError(
                f"save_inference_model: parameter {var.name!r} has no value; "
                "run the startup program first"
            )
    directory = os.path.dirname(path_prefix)
    if directory:
        os.makedirs(directory, exist_ok=True)
    serialize.save_model(path_prefix, pruned, feed_names, fetch_names, params)


def load_inference_model(path_prefix: str, executor: Executor | None = None):
    """``[program, feed_names, fetch_targets]``; parameters go into the global scope,
    on the executor's device (the current device when there is no executor).

    ``path_prefix`` may also be ``{prefix}.json`` or a folder holding one model."""
    prefix = serialize.model_prefix(path_prefix, "load_inference_model")
    program, feed_names, fetch_names, params = serialize.load_model(prefix)
    xp = executor.xp if executor is not None else device.current.xp
    scope = global_scope()
    for name, value in params.items():
        scope[name] = xp.asarray(value)
    block = program.global_block()
    return [program, feed_names, [Variable(block, n) for n in fetch_names]]
