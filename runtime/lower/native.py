"""Numba, and the disk cache of what it compiles.

``compile_region(source)`` writes a region's generated module to the cache
directory under the hash of its text (``r<hash>.py``), imports it and
compiles its ``region`` function for its signature with Numba's own cache
on (the machine code lands in ``__pycache__`` beside the module). The name
is the content: a program that changes generates another text, hence
another file, and never loads code compiled for an earlier one. A process
that finds the files loads the machine code instead of compiling it. A
cache file that cannot be read (truncated, overwritten) is ignored with a
warning, removed, and the region compiled again.

The cache holds code this process will run: keep it where only you write
(the default is under your user cache directory, ``~/.cache/dy2stat``, or
``$XDG_CACHE_HOME/dy2stat``; ``DY2STAT_CACHE_DIR`` or the flag
``native_cache_dir`` moves it).

Numba is imported the first time a region compiles (it takes a few tenths
of a second), never at import time: ``available()`` only looks for it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import pathlib
import sys
import tempfile
import threading
import warnings

__all__ = ["NativeTierWarning", "available", "cache_dir", "compile_region", "numba_version"]

# Bumped when the code generator changes what the same source means.
FORMAT = "1"


class NativeTierWarning(RuntimeWarning):
    """Something the native tier could not do (the plan goes on interpreted)."""


def available() -> bool:
    """Whether Numba can be imported (looked for once, not imported)."""
    return _found()


@functools.cache
def _found() -> bool:
    try:
        return importlib.util.find_spec("numba") is not None
    except (ImportError, ValueError):
        return False


_numba = {"module": None}
_import_lock = threading.Lock()


def numba():
    """The numba module, imported on first use."""
    if _numba["module"] is None:
        with _import_lock:
            if _numba["module"] is None:
                import numba as module  # a heavy optional dependency: imported when needed

                _numba["module"] = module
    return _numba["module"]


def numba_version() -> str:
    return numba().__version__


def default_cache_dir() -> pathlib.Path:
    base = os.environ.get("DY2STAT_CACHE_DIR")
    if base:
        return pathlib.Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME")
    root = pathlib.Path(xdg) if xdg else pathlib.Path.home() / ".cache"
    return root / "dy2stat"


def cache_dir(root=None) -> pathlib.Path:
    """Where native code is cached (``root``, or the default), per Numba version."""
    root = pathlib.Path(root) if root else default_cache_dir()
    return root / f"native-{FORMAT}-numba{numba_version()}"


def compile_region(text: str, root=None):
    """The Numba dispatcher of the module ``text``'s ``region`` function (compiled, or
    loaded from the cache under ``root``)."""
    key = hashlib.sha256(f"{FORMAT}\n{text}".encode()).hexdigest()[:40]
    directory = _private(cache_dir(root))
    path = directory / f"r{key}.py"
    _write_source(path, text)
    try:
        return _compile(path)
    except Exception as exc:
        stale = _cache_files(path)
        if not stale:
            raise
        for file in stale:
            file.unlink(missing_ok=True)
        dispatcher = _compile(path)  # raises where the code itself does not compile
        warnings.warn(f"dy2stat: ignored unreadable native cache files for {path.name} "
                      f"({type(exc).__name__}: {exc}); compiled the region again",
                      NativeTierWarning, stacklevel=2)
        return dispatcher


def _private(directory: pathlib.Path) -> pathlib.Path:
    """``directory``, made if needed, when only this user can write it; otherwise (made
    by someone else, or writable by others: its files would be code this process runs)
    a private directory of this process, with a warning."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = directory.stat()
        safe = not hasattr(os, "getuid") or (
            info.st_uid == os.getuid() and not info.st_mode & 0o022)
    except OSError as exc:
        safe, why = False, f"it cannot be made ({exc})"
    else:
        why = "another user owns it, or others may write to it"
    if safe:
        return directory
    fallback = _fallback_dir()
    if fallback not in _warned:
        _warned.add(fallback)
        warnings.warn(f"dy2stat: not using the native cache {directory}: {why}; caching in "
                      f"{fallback} for this process only", NativeTierWarning, stacklevel=3)
    return fallback


_warned: set = set()


@functools.cache
def _fallback_dir() -> pathlib.Path:
    return pathlib.Path(tempfile.mkdtemp(prefix="dy2stat-native-"))


def _write_source(path: pathlib.Path, text: str) -> None:
    """The module at ``path`` (written once, atomically; rewritten if its text is not
    the one its name promises, which Numba's cache would otherwise trust)."""
    try:
        if path.read_text() == text:
            return
        warnings.warn(f"dy2stat: the native cache file {path.name} did not hold the code its "
                      "name stands for; writing it again", NativeTierWarning, stacklevel=3)
        for file in _cache_files(path):
            file.unlink(missing_ok=True)
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError):
        pass  # unreadable: written again below
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _compile(path: pathlib.Path):
    """Import the module at ``path`` afresh and compile (or load) its region.

    The module is registered under a name made of its content hash: Numba's
    cached code refers to the module by name when it is loaded again."""
    nb = numba()
    name = f"dy2stat_native_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    dispatcher = nb.njit(module.SIGNATURE, cache=True, error_model="numpy",
                         nogil=True)(module.region)
    dispatcher.disable_compile()  # an argument of another type raises TypeError: the fallback
    return dispatcher


def _cache_files(path: pathlib.Path) -> list[pathlib.Path]:
    """Numba's cache files for the module at ``path``."""
    cache = path.parent / "__pycache__"
    return sorted(cache.glob(f"{path.stem}.*.nb[ic]")) if cache.is_dir() else []
