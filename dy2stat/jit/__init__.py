"""``dy2stat.jit``: to_static / declarative, save / load, and the Paddle 1.8 entry points."""

from dy2stat.jit.api import declarative, not_to_static, to_static
from dy2stat.jit.program_translator import ProgramTranslator
from dy2stat.jit.save_load import TranslatedLayer, load, save
from dy2stat.jit.settings import (
    enable_to_static,
    set_cache_size_limit,
    set_code_level,
    set_verbosity,
)
from dy2stat.jit.static_function import StaticFunction
from dy2stat.jit.traced_layer import TracedLayer

__all__ = [
    "ProgramTranslator", "StaticFunction", "TracedLayer", "TranslatedLayer", "declarative",
    "enable_to_static", "load", "not_to_static", "save", "set_cache_size_limit",
    "set_code_level", "set_verbosity",
    "to_static",
]
