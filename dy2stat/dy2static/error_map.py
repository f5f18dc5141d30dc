"""Errors raised while running converted code point at the user's line.

Converted code is compiled with the user's file name and line numbers, so its frames already
read as the user's. What is left: a note naming the user's file, line and source (with a few
lines of context), and dropping the frames of the helpers that sit between the user's ones.
The exception keeps its type.
"""

from __future__ import annotations

import os
import re
import types

from dy2stat.dy2static import origin

_DY2STATIC = os.path.dirname(os.path.abspath(__file__)) + os.sep
_CONTROL_FLOW = os.path.join(os.path.dirname(_DY2STATIC.rstrip(os.sep)), "static",
                             "control_flow.py")

# Code objects of converted functions (and of the bodies inside them): the name of the
# user's function each belongs to (a generated body, `while_body_0`, is its function's).
converted_codes: dict[types.CodeType, str] = {}
_GENERATED = re.compile(r"(if_true|if_false|while_test|while_body|for_body|get_state|"
                        r"set_state|extra_test)_\d+")


def register(code: types.CodeType, function: str | None = None) -> None:
    """Remember `code` and the code nested in it as converted code."""
    if function is None or not _GENERATED.fullmatch(code.co_name):
        function = code.co_name
    converted_codes[code] = function
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            register(const, function)


def _is_helper(filename: str) -> bool:
    filename = os.path.abspath(filename)
    return filename.startswith(_DY2STATIC) or filename == _CONTROL_FLOW


def map_error(error: BaseException, keep_frames: bool = False) -> BaseException:
    """Note the user's line on `error` (once) and drop helper frames from its traceback."""
    tb = error.__traceback__
    entries = []
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    if not getattr(error, "__dy2static_noted__", False):
        user = _innermost_user_frame(entries)
        if user is not None:
            _note(error, user)
            error.__dy2static_noted__ = True
    kept = [e for e in entries if not _is_helper(e.tb_frame.f_code.co_filename)]
    if keep_frames or not kept:
        return error
    rebuilt = None
    for entry in reversed(kept):
        rebuilt = types.TracebackType(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return error.with_traceback(rebuilt)


def _innermost_user_frame(entries):
    """The last converted-code frame, or the last frame outside the framework after one."""
    found = None
    for entry in entries:
        code = entry.tb_frame.f_code
        if code in converted_codes:
            found = entry
        elif found is not None and not _is_framework(entry.tb_frame):
            found = entry
    return found


def _is_framework(frame) -> bool:
    module = frame.f_globals.get("__name__", "")
    return module == "dy2stat" or module.startswith("dy2stat.")


def _note(error: BaseException, entry) -> None:
    code = entry.tb_frame.f_code
    name = converted_codes.get(code, code.co_name)
    info = origin.OriginInfo(code.co_filename, entry.tb_lineno, 0, "", name)
    text = (f"The error happened in code converted by dy2stat, at\n  {info}\n"
            f"{info.excerpt()}")
    if hasattr(error, "add_note"):
        error.add_note(text)
    else:  # Python 3.10: no notes; keep them where 3.11 would look
        error.__notes__ = [*getattr(error, "__notes__", []), text]
